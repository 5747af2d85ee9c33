"""One rank of tests/compute/test_distributed.py (started by mpirun): runs the collectives the test names and prints
one JSON line per check, {"rank", "check", "ok", "detail"}, comparing against numpy on data every rank can make
itself (seeded by size and rank).

  python distributed_worker.py collectives   all_reduce (sizes, dtypes, ops), broadcast, all_gather, send/recv, barrier,
                                             reduce_scatter(_tensor), all_gather_into_tensor, all_to_all(_single),
                                             async handles, a group of ranks 0 and n-1
  python distributed_worker.py mismatch      rank 0 all-reduces 1000 elements, the others 2000: each must say so
  python distributed_worker.py mismatch_rs   the same for reduce_scatter_tensor (parts of 1000 and 2000 elements)
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
  newer(r, n, dev)
  report("no staging copies", dist.stats["staging_copies"] == 0, json.dumps(dist.stats))


REF = {"sum": lambda x: x.sum(0), "avg": lambda x: x.mean(0), "product": lambda x: x.prod(0), "min": lambda x: x.min(0),
       "max": lambda x: x.max(0)}


def newer(r: int, n: int, dev: str) -> None:
  """reduce_scatter (both forms, every ReduceOp), all_gather_into_tensor (both forms), all_to_all(_single), async
  handles and groups."""
  for size in (1, 1000, (1 << 18) + 3):          # elements per rank's part
    for op in ("sum", "avg", "product", "min", "max"):
      dtype = np.int32 if op in ("sum", "max") and size == 1000 else np.float32
      parts = [data(n * size, dtype, k).reshape(n, size) / (4 if op == "product" else 1) for k in range(n)]
      parts = [p.astype(dtype) for p in parts]
      everyone = np.stack(parts).astype(np.float64)
      want = REF[op](everyone)[r].astype(dtype)
      out = Tensor(np.zeros(size, dtype), device=dev)
      dist.reduce_scatter_tensor(out, Tensor(parts[r].reshape(-1), device=dev), op=getattr(dist.ReduceOp, op.upper()))
      compare(f"reduce_scatter_tensor {op} {size} {np.dtype(dtype).name}", out.numpy(), want)
    out = Tensor(np.zeros(size, np.float32), device=dev)
    w = dist.reduce_scatter(out, [Tensor(p, device=dev) for p in data(n * size, np.float32, r).reshape(n, size)], async_op=True)
    report(f"reduce_scatter async handle {size}", isinstance(w, dist.Work) and w.wait() is True and w.is_completed())
    compare(f"reduce_scatter list {size}", out.numpy(), np.stack([data(n * size, np.float32, k).reshape(n, size) for k in range(n)]).sum(0)[r])
    mine = data(size, np.float32, r)
    everyone = np.stack([data(size, np.float32, k) for k in range(n)])
    cat, stack = Tensor(np.zeros(n * size, np.float32), device=dev), Tensor(np.zeros((n, size), np.float32), device=dev)
    dist.all_gather_into_tensor(cat, Tensor(mine, device=dev))
    dist.all_gather_into_tensor(stack, Tensor(mine, device=dev), async_op=True).wait()
    compare(f"all_gather_into_tensor concatenated {size}", cat.numpy(), everyone.reshape(-1))
    compare(f"all_gather_into_tensor stacked {size}", stack.numpy(), everyone)
  # async handles: started in order, the second after the first ended; is_completed moves the last one on
  x, y = Tensor(data(3000, np.float32, r), device=dev), Tensor(data((1 << 19) + 5, np.float32, r), device=dev)
  wx = dist.all_reduce(x, async_op=True)
  wy = dist.all_reduce(y, op=dist.ReduceOp.MAX, async_op=True)
  first = wx.is_completed()
  while not wy.is_completed(): pass
  report("async handles end in order", first and wx.wait() is True and wy.wait() is True and wx.is_success())
  compare("async all_reduce sum", x.numpy(), np.stack([data(3000, np.float32, k) for k in range(n)]).sum(0))
  compare("async all_reduce max", y.numpy(), np.stack([data((1 << 19) + 5, np.float32, k) for k in range(n)]).max(0))
  # all_to_all: rank k sends (k + 1) * (j + 1) * 100 + 1 elements to rank j; outputs sized to match
  count = lambda src, dst: (src + 1) * (dst + 1) * 100 + 1
  msg = lambda src, dst: data(count(src, dst), np.float32, 1000 * src + dst)
  outs = [Tensor(np.zeros(count(i, r), np.float32), device=dev) for i in range(n)]
  dist.all_to_all(outs, [Tensor(msg(r, j), device=dev) for j in range(n)])
  compare("all_to_all", np.concatenate([o.numpy() for o in outs]), np.concatenate([msg(i, r) for i in range(n)]))
  rows = (1 << 16) * n
  single = Tensor(np.zeros((rows, 4), np.int32), device=dev)
  dist.all_to_all_single(single, Tensor(data(rows * 4, np.int32, r).reshape(rows, 4), device=dev))
  compare("all_to_all_single equal", single.numpy(),
          np.concatenate([data(rows * 4, np.int32, i).reshape(n, -1, 4)[r] for i in range(n)]))
  splits = lambda k: [k + j + 1 for j in range(n)]          # rank k sends k + j + 1 rows to rank j
  inp = data(sum(splits(r)) * 3, np.float32, r).reshape(-1, 3)
  got = Tensor(np.zeros((sum(i + r + 1 for i in range(n)), 3), np.float32), device=dev)
  dist.all_to_all_single(got, Tensor(inp, device=dev), [i + r + 1 for i in range(n)], splits(r))
  want = [np.split(data(sum(splits(i)) * 3, np.float32, i).reshape(-1, 3), np.cumsum(splits(i))[:-1])[r] for i in range(n)]
  compare("all_to_all_single uneven", got.numpy(), np.concatenate(want))
  # a group of the first and the last rank: its collectives involve only them; the others do nothing (None)
  members = [0, n - 1]
  g = dist.new_group(members[::-1])
  report("group ranks sorted", g.ranks == (0, n - 1) and dist.get_rank(g) == (members.index(r) if r in members else -1))
  t = Tensor(data(1000, np.float32, r), device=dev)
  import warnings
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    w = dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g, async_op=True)
  if r in members:
    w.wait()
    compare("group all_reduce max", t.numpy(), np.max([data(1000, np.float32, k) for k in members], 0))
    parts = [Tensor(np.zeros(1000, np.float32), device=dev) for _ in members]
    dist.all_gather(parts, Tensor(data(1000, np.float32, r), device=dev), group=g)
    compare("group all_gather", np.stack([p.numpy() for p in parts]), np.stack([data(1000, np.float32, k) for k in members]))
    b = Tensor(data(5000, np.float32, r), device=dev)
    dist.broadcast(b, src=n - 1, group=g)
    compare("group broadcast", b.numpy(), data(5000, np.float32, n - 1))
    dist.barrier(group=g)
  else:
    report("group all_reduce max", w is None and "is not in the group" in str(caught[0].message) and
           np.array_equal(t.numpy(), data(1000, np.float32, r)))
    for check in ("group all_gather", "group broadcast"): report(check, True)
  dist.barrier()


def mismatch() -> None:
  t = Tensor(np.ones(1000 if dist.rank() == 0 else 2000, np.float32), device=dist.device())
  try: dist.all_reduce(t)
  except dist.DistributedError as e:
    report("error", True, str(e))
    return
  report("error", False, "all_reduce returned")


def mismatch_rs() -> None:
  """reduce_scatter_tensor: rank 0 scatters 2000 elements into parts of 1000, the others 4000 into parts of 2000."""
  part = 1000 if dist.rank() == 0 else 2000
  out = Tensor(np.zeros(part, np.float32), device=dist.device())
  try: dist.reduce_scatter_tensor(out, Tensor(np.ones(part * dist.world_size(), np.float32), device=dist.device()))
  except dist.DistributedError as e:
    report("error", True, str(e))
    return
  report("error", False, "reduce_scatter_tensor returned")


def die() -> None:
  """Rank 1 dies once it has queued the reduction of its second chunk of a 4 MiB all_reduce; the others must fail,
  naming it."""
  if dist.rank() == 1:
    folder, calls = dist._g().folder, []
    real = folder.reduce
    def dying(*a):
      calls.append(1)
      if len(calls) == 2: os.kill(os.getpid(), signal.SIGKILL)
      return real(*a)
    folder.reduce = dying
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
  {"collectives": collectives, "mismatch": mismatch, "mismatch_rs": mismatch_rs, "die": die, "raise": fail}[sys.argv[1]]()
  dist.destroy_process_group()
