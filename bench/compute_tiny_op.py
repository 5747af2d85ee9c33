"""Tiny-op cost of the compute layer, with and without capture (compute.jit), measured side by side in the same run.

Usage: python bench/compute_tiny_op.py [device ...]   (default: CPU MOCKKFD+AMD)
The op is `x + 1` on 16 float32s. Figures, per device and mode (eager: build, schedule, launch each op; jit: replay):
- host_us: the calling thread's CPU time per op while ops are issued back to back (one synchronize per round; the
  emulated GPU runs in this process's own threads, which are not counted). Targets on a 2-core machine: eager <= 100,
  jit <= 30. Where the device is slower than the host it includes the host's waits for it (its memory pool, the
  graph's kernel-argument sets), as any stream of ops does.
- latency_us: wall time of one op followed by synchronize (host time plus the device's own time and the wake-ups).
Rounds alternate the modes (best of ROUNDS each). Prints one JSON line per figure."""
import os, sys, time
sys.path.insert(0, os.path.dirname(__file__))
import numpy as np
from figures import emit
from compute import Tensor, Device, jit

N, ROUNDS = 200, 7


def host_us(op, dev) -> float:
  keep = [op() for _ in range(N)]   # then the memory pool has N buffers ready for the round's results
  dev.synchronize()
  del keep
  c0 = time.thread_time()
  for _ in range(N): y = op()
  took = time.thread_time() - c0
  del y
  dev.synchronize()
  return took / N * 1e6


def latency_us(op, dev) -> float:
  t0 = time.perf_counter()
  for _ in range(N // 4):
    op()
    dev.synchronize()
  return (time.perf_counter() - t0) / (N // 4) * 1e6


def main() -> None:
  for name in sys.argv[1:] or ["CPU", "MOCKKFD+AMD"]:
    dev = Device[name]
    x = Tensor(np.ones(16, np.float32), device=name).realize()
    add1 = jit(lambda x: x + 1)
    modes = {"eager": lambda: (x + 1).realize(), "jit": lambda: add1(x)}
    for op in modes.values():
      assert np.array_equal(op().numpy(), np.full(16, 2, np.float32)) and np.array_equal(op().numpy(), np.full(16, 2, np.float32))
    best = {(m, f): float("inf") for m in modes for f in ("host_us", "latency_us")}
    for _ in range(ROUNDS):
      for m, op in modes.items():
        best[(m, "host_us")] = min(best[(m, "host_us")], host_us(op, dev))
        best[(m, "latency_us")] = min(best[(m, "latency_us")], latency_us(op, dev))
    for (m, fig), value in best.items(): emit(f"compute/tiny_op_{fig}", value, "us", device=name, mode=m)


if __name__ == "__main__":
  main()
