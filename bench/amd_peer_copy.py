"""GPU-to-GPU transfer between two emulated AMD GPUs: Buffer.transfer (peer to peer where both are opened through PCI:
the source's SDMA writes the destination's VRAM through its BAR; else device to device through host memory both map),
against the shared-host-memory path (PeerLink: the source's SDMA writes host memory, the destination's SDMA reads it)
and the path through the host (copyout, then copyin), all measured in the same run.

Usage: python bench/amd_peer_copy.py [DEV_A DEV_B]   (default: a MOCKPCI+AMD pair and a MOCKKFD+AMD pair); one JSON
line per figure."""
import sys
from figures import best, emit, skipped
import numpy as np
from drivers.hcq import open_device
from drivers.hcq.hostshare import PeerLink

SIZES = (4 << 10, 4 << 20)
PAIRS = [("MOCKPCI+AMD", "MOCKPCI+AMD:1"), ("MOCKKFD+AMD", "MOCKKFD+AMD:1")]


def main() -> None:
  for pair in [tuple(sys.argv[1:3])] if len(sys.argv) >= 3 else PAIRS:
    try: a, b = (open_device(n) for n in pair)
    except Exception as e:
      skipped("amd/peer_copy", str(e), devices=list(pair))
      continue
    link = PeerLink(a, b)
    for size in SIZES:
      data = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8)
      src, dst = a.alloc(size), b.alloc(size)
      src.copyin(data.data)
      peer = hasattr(a.iface, "import_peer") and hasattr(b.iface, "bus_pages")   # what Buffer.transfer takes
      t_dev = best(lambda: src.transfer(dst))
      assert np.array_equal(np.frombuffer(dst.copyout(), np.uint8), data)
      dst.copyin(bytes(size))
      t_link = best(lambda: link.transfer(dst, src))
      assert np.array_equal(np.frombuffer(dst.copyout(), np.uint8), data)
      t_host = best(lambda: dst.copyin(src.copyout()))
      emit("amd/peer_copy_us", t_dev * 1e6, "us", devices=list(pair), bytes=size, path="peer to peer" if peer else "shared host memory",
           shared_host_us=round(t_link * 1e6, 1), via_host_us=round(t_host * 1e6, 1))
      src.free(); dst.free()
    link.close()


if __name__ == "__main__": main()
