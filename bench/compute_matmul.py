"""Matmul GFLOP/s of the compute layer against numpy's matmul, measured in the same run (best of N).

Usage: DEV=CPU python bench/compute_matmul.py [size ...]   (default 512; target: ratio <= 3 at 512 float32)
Both are timed alternately (best of 30 each), end to end: for us graph building, scheduling, launch and
synchronize included. Prints one JSON line per figure."""
import json, os, sys, time
import numpy as np
from compute import Tensor, Device


def best_interleaved(fns, n: int = 30) -> list[float]:
  """Best time of each function, run alternately so both see the same load on a shared machine."""
  times = [[] for _ in fns]
  for _ in range(n):
    for t, fn in zip(times, fns):
      t0 = time.perf_counter()
      fn()
      t.append(time.perf_counter() - t0)
  return [min(t) for t in times]


def main() -> None:
  dev = os.environ.get("DEV", "CPU")
  for size in [int(s) for s in sys.argv[1:]] or [512]:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((size, size), dtype=np.float32), rng.standard_normal((size, size), dtype=np.float32)
    ta, tb = Tensor(a, device=dev), Tensor(b, device=dev)
    assert np.allclose((ta @ tb).numpy(), a @ b, rtol=1e-3, atol=1e-3)
    hcq = Device[dev]
    def ours():
      (ta @ tb).realize()
      hcq.synchronize()
    t_ours, t_np = best_interleaved([ours, lambda: a @ b])
    flop = 2 * size ** 3
    for name, value, unit in [(f"matmul_{size}_f32_gflops", flop / t_ours / 1e9, "GFLOP/s"),
                              (f"numpy_matmul_{size}_f32_gflops", flop / t_np / 1e9, "GFLOP/s"),
                              (f"matmul_{size}_f32_time_vs_numpy", t_ours / t_np, "x")]:
      print(json.dumps({"bench": f"compute/{name}", "device": dev, "value": round(value, 3), "unit": unit}))


if __name__ == "__main__":
  main()
