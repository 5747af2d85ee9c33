"""One rank of tests/compute/test_distributed.py (started by mpirun): runs the collectives the test names and prints
one JSON line per check, {"rank", "check", "ok", "detail"}, comparing against numpy on data every rank can make
itself (seeded by size and rank).

  python distributed_worker.py collectives   all_reduce (sizes, dtypes, ops), broadcast, all_gather, send/recv, barrier
  python distributed_worker.py mismatch      rank 0 all-reduces 1000 elements, the others 2000: each must say so
  python distributed_worker.py die           rank 1 kills itself in the middle of a 1 MiB all_reduce; the others
                                             report the error they get
  python distributed_worker.py raise         rank 1 raises before its first collective (its excepthook aborts the job)
"""
import faulthandler, json, os, signal, sys
import numpy as np

from compute import Tensor
from compute import distributed as dist

SIZES = (1, 1000, (1 << 20) + 3)


def report(check: str, ok: bool, detail: str = "") -> None:
  print(json.dumps({"rank": dist.rank(), "check": check, "ok": bool(ok), "detail": detail}), flush=True)


def data(size: int, dtype, rank: int) -> np.ndarray:
  rng = np.random.default_rng([size, rank])
  if np.dtype(dtype).kind == "f": return rng.uniform(-4, 4, size).astype(dtype)
  return rng.integers(-1000, 1000, size).astype(dtype)


def compare(check: str, got: np.ndarray, want: np.ndarray) -> None:
  exact = got.dtype.kind != "f"
  ok = got.shape == want.shape and (np.array_equal(got, want) if exact else np.allclose(got, want, rtol=1e-5, atol=1e-5))
  bad = "" if ok else f"first differences at {np.flatnonzero(~np.isclose(got, want))[:5].tolist()}: {got.ravel()[:4]} vs {want.ravel()[:4]}"
  report(check, ok, bad)


def collectives() -> None:
  r, n, dev = dist.rank(), dist.world_size(), dist.device()
  for size in SIZES:
    for dtype in (np.float32, np.int32):
      mine = data(size, dtype, r)
      everyone = np.stack([data(size, dtype, k) for k in range(n)])
      t = Tensor(mine, device=dev)
      out = dist.all_reduce(t)
      want = everyone.astype(np.float64).sum(0).astype(dtype) if dtype == np.float32 else everyone.sum(0, dtype=dtype)
      compare(f"all_reduce sum {size} {np.dtype(dtype).name}", t.numpy(), want)
      report(f"all_reduce returns its tensor {size} {np.dtype(dtype).name}", out is t)
  small = [data(1000, np.float32, k) for k in range(n)]
  for op, ref in (("max", np.max), ("min", np.min), ("product", np.prod), ("avg", np.mean)):
    compare(f"all_reduce {op}", dist.all_reduce(Tensor(small[r], device=dev), op=op).numpy(),
            ref(np.stack(small).astype(np.float64), axis=0).astype(np.float32))
  ints = [data(1000, np.int32, k) for k in range(n)]
  compare("all_reduce max int32", dist.all_reduce(Tensor(ints[r], device=dev), op="max").numpy(), np.max(np.stack(ints), 0))
  for size in SIZES:
    src = n - 1
    t = Tensor(data(size, np.float32, r), device=dev)
    dist.broadcast(t, src=src)
    compare(f"broadcast {size} from {src}", t.numpy(), data(size, np.float32, src))
  for size in (1, 1000, (1 << 18) + 3):
    for dtype in (np.float32, np.int32):
      parts = [Tensor(np.zeros(size, dtype), device=dev) for _ in range(n)]
      dist.all_gather(parts, Tensor(data(size, dtype, r), device=dev))
      compare(f"all_gather {size} {np.dtype(dtype).name}", np.stack([p.numpy() for p in parts]),
              np.stack([data(size, dtype, k) for k in range(n)]))
  for size in (1000, (1 << 20) + 3):   # a ring of sends: each rank sends to the next, receives from the one before
    t = Tensor(np.zeros(size, np.float32), device=dev)
    if r % 2 == 0:
      dist.send(Tensor(data(size, np.float32, r), device=dev), (r + 1) % n)
      dist.recv(t, (r - 1) % n)
    else:
      dist.recv(t, (r - 1) % n)
      dist.send(Tensor(data(size, np.float32, r), device=dev), (r + 1) % n)
    compare(f"send/recv {size}", t.numpy(), data(size, np.float32, (r - 1) % n))
  dist.barrier()
  report("barrier", True)
  report("no staging copies", dist.stats["staging_copies"] == 0, json.dumps(dist.stats))


def mismatch() -> None:
  t = Tensor(np.ones(1000 if dist.rank() == 0 else 2000, np.float32), device=dist.device())
  try: dist.all_reduce(t)
  except dist.DistributedError as e:
    report("error", True, str(e))
    return
  report("error", False, "all_reduce returned")


def die() -> None:
  """Rank 1 dies once it has folded its second chunk of a 4 MiB all_reduce; the others must fail, naming it."""
  if dist.rank() == 1:
    real, calls = dist._consumer, []
    def consumer(*a):
      consume = real(*a)
      def dying(recv, slot):
        calls.append(1)
        if len(calls) == 2: os.kill(os.getpid(), signal.SIGKILL)
        consume(recv, slot)
      return dying
    dist._consumer = consumer
  t = Tensor(np.ones((1 << 20) + 3, np.float32), device=dist.device())
  try: dist.all_reduce(t)
  except dist.DistributedError as e:
    report("error", True, str(e))
    try: dist.all_reduce(t)   # the group stays failed, and says so at once
    except dist.DistributedError as again: report("again", True, str(again))
    return
  report("error", False, "all_reduce returned")


def fail() -> None:
  """Rank 1 raises (and no one catches it) while the others start an all_reduce."""
  if dist.rank() == 1: raise RuntimeError("rank 1 fails before its first collective")
  dist.all_reduce(Tensor(np.ones(1000, np.float32)))
  report("all_reduce returned", False)


if __name__ == "__main__":
  faulthandler.dump_traceback_later(float(os.environ.get("WORKER_STACKS_AFTER_S", 240)), exit=True)   # a hang shows where
  dist.init()
  {"collectives": collectives, "mismatch": mismatch, "die": die, "raise": fail}[sys.argv[1]]()
  dist.destroy_process_group()
