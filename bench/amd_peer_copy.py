"""GPU-to-GPU transfer between two emulated AMD GPUs: Buffer.transfer device to device (the source's SDMA writes host
memory both GPUs map, the destination's SDMA waits on a signal there and reads it), against the path through the host
(copyout, then copyin) measured in the same run.

Usage: python bench/amd_peer_copy.py [DEV_A DEV_B]   (default: both MOCKPCI+AMD pairs and MOCKKFD+AMD pairs); one JSON
line per figure."""
import sys
from common import best, emit, skipped
import numpy as np
from drivers.hcq import open_device

SIZES = (4 << 10, 4 << 20)
PAIRS = [("MOCKPCI+AMD", "MOCKPCI+AMD:1"), ("MOCKKFD+AMD", "MOCKKFD+AMD:1")]


def main() -> None:
  for pair in [tuple(sys.argv[1:3])] if len(sys.argv) >= 3 else PAIRS:
    try: a, b = (open_device(n) for n in pair)
    except Exception as e:
      skipped("amd/peer_copy", str(e), devices=list(pair))
      continue
    for size in SIZES:
      data = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8)
      src, dst = a.alloc(size), b.alloc(size)
      src.copyin(data.data)
      t_dev = best(lambda: src.transfer(dst))
      assert np.array_equal(np.frombuffer(dst.copyout(), np.uint8), data)
      t_host = best(lambda: dst.copyin(src.copyout()))
      emit("amd/peer_copy_us", t_dev * 1e6, "us", devices=list(pair), bytes=size, via_host_us=round(t_host * 1e6, 1))
      src.free(); dst.free()


if __name__ == "__main__": main()
