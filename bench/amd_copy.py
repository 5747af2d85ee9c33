"""SDMA copy throughput on the emulated AMD GPU: host->device, device->device, device->host, with
memcpy of the same size on the host as the reference measured in the same run.

Usage: python bench/amd_copy.py [DEV ...]   (default: MOCKKFD+AMD MOCKPCI+AMD); one JSON line per figure."""
import sys
from figures import best, emit, skipped
import numpy as np
from drivers.hcq import open_device

SIZE = 64 << 20



def main() -> None:
  host = np.random.default_rng(0).integers(0, 255, SIZE, dtype=np.uint8)
  out = np.empty_like(host)
  t_memcpy = best(lambda: np.copyto(out, host))
  emit("amd/host_memcpy_gbps", SIZE / t_memcpy / 1e9, "GB/s")
  for name in sys.argv[1:] or ["MOCKKFD+AMD", "MOCKPCI+AMD"]:
    try: dev = open_device(name)
    except Exception as e:
      skipped("amd/copy", str(e), device=name)
      continue
    a, b = dev.alloc(SIZE), dev.alloc(SIZE)
    figs = {"h2d": best(lambda: a.copyin(host.data)), "d2d": best(lambda: a.transfer(b)), "d2h": best(lambda: b.copyout(out.data))}
    assert np.array_equal(out, host)
    for fig, t in figs.items():
      emit(f"amd/copy_{fig}_gbps", SIZE / t / 1e9, "GB/s", device=name, vs_memcpy=round(t_memcpy / t, 3))
    dev.close()


if __name__ == "__main__":
  main()
