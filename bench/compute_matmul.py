"""Matmul GFLOP/s of the compute layer against numpy's matmul, measured side by side in the same run.

Usage: DEV=CPU python bench/compute_matmul.py [size ...] [--cases square,aT,bT,batched]   (default 512, square;
target: time_vs_numpy <= 1 for float32). Cases: square (a @ b), aT (a.T @ b), bT (a @ b.T, as in a linear layer), batched
(BATCH = 8 products of size/2 squares: the flops of one square). float32 operands.
Ours is timed end to end: graph building, scheduling, launch and synchronize. The two take turns in blocks of BLOCK
calls (ROUNDS blocks each, best single call kept), each block after SETTLE_S idle: OpenBLAS's threads spin for about
0.1 s after a call, and a block of ours started meanwhile would share the cores with them. Where OPENBLAS_CORETYPE (or OPENBLAS_L2_SIZE) is set,
numpy's OpenBLAS runs a slower
kernel than this CPU has: unset both for the run to compare against numpy at its best; the numpy line names the
kernel it ran (threadpoolctl, when installed). Prints one JSON line per figure."""
import os, sys, time
sys.path.insert(0, os.path.dirname(__file__))
import numpy as np
from figures import emit
from compute import Tensor, Device

ROUNDS, BLOCK, SETTLE_S = 10, 5, 0.3


def blas() -> dict:
  try:
    from threadpoolctl import threadpool_info
  except ImportError: return {}
  info = next((i for i in threadpool_info() if i.get("user_api") == "blas"), {})
  return {"blas": f"{info.get('internal_api')} {info.get('architecture')}, {info.get('num_threads')} threads"} if info else {}


def best_in_blocks(fns) -> list[float]:
  """Best time of one call of each function, the functions taking turns in blocks of BLOCK calls."""
  best = [float("inf")] * len(fns)
  for _ in range(ROUNDS):
    for i, fn in enumerate(fns):
      time.sleep(SETTLE_S)
      for _ in range(BLOCK):
        t0 = time.perf_counter()
        fn()
        best[i] = min(best[i], time.perf_counter() - t0)
  return best


CASES = {"square": ("", lambda a, b: a @ b), "aT": ("_aT", lambda a, b: a.T @ b), "bT": ("_bT", lambda a, b: a @ b.T),
         "batched": ("_batched", lambda a, b: a @ b)}
BATCH = 8


def main() -> None:
  dev = os.environ.get("DEV", "CPU")
  env = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
  args = sys.argv[1:]
  cases = args.pop(args.index("--cases") + 1).split(",") if "--cases" in args else ["square"]
  if "--cases" in args: args.remove("--cases")
  if unknown := [c for c in cases if c not in CASES]: sys.exit(f"unknown case(s) {unknown}: the cases are {', '.join(CASES)}")
  for size in [int(s) for s in args] or [512]:
    for case in cases:
      suffix, op = CASES[case]
      rng = np.random.default_rng(0)
      shape = (BATCH, size // 2, size // 2) if case == "batched" else (size, size)
      a, b = rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32)
      ta, tb = Tensor(a, device=dev), Tensor(b, device=dev)
      assert np.allclose(op(ta, tb).numpy(), op(a, b), rtol=1e-3, atol=1e-3)
      hcq = Device[dev]
      def ours():
        op(ta, tb).realize()
        hcq.synchronize()
      t_ours, t_np = best_in_blocks([ours, lambda: op(a, b)])
      flop = 2 * shape[-1] ** 3 * (BATCH if case == "batched" else 1)
      emit(f"compute/matmul_{size}_f32{suffix}_gflops", flop / t_ours / 1e9, "GFLOP/s", device=dev)
      emit(f"compute/numpy_matmul_{size}_f32{suffix}_gflops", flop / t_np / 1e9, "GFLOP/s", **blas(), **env)
      emit(f"compute/matmul_{size}_f32{suffix}_time_vs_numpy", t_ours / t_np, "x", device=dev)


if __name__ == "__main__":
  main()
