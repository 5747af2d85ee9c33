"""compute.distributed: collectives between processes launched by mpirun, shaped like torch.distributed; the data
moves GPU to GPU by RDMA WRITE over hcq's NICs (drivers/rdma), MPI only bootstraps.

  mpirun -np 2 python script.py          # as root add --allow-run-as-root; on a small machine --oversubscribe
  from compute import Tensor, distributed as dist
  dist.init()                            # rank and world size from mpirun's environment; connects every pair of ranks
  t = Tensor([1.0, 2.0])                 # on this rank's device, dist.device(): init() made it the default device
  dist.all_reduce(t)                     # t (updated in place, and returned) is the sum over the ranks
  dist.broadcast(t, src=0); dist.all_gather(parts, t); dist.send(t, dst=1); dist.recv(t, src=0); dist.barrier()
  dist.destroy_process_group()           # also done at exit

Reduction ops are torch's ReduceOp names: "sum", "product", "min", "max" and "avg" (floating point only); the
reductions run on the rank's GPU (a compute kernel per chunk). Tensors must be on the rank's device (`device()`,
the process's default device from init() on, as torch.cuda.set_device(local_rank) after torchrun); results are outside
the autograd graph. all_reduce is a ring all-reduce (reduce-scatter then all-gather, each chunk
one RDMA WRITE into the next rank's landing slots); all_gather is the ring's second half; broadcast is a pipelined
chain from `src` along the ring; send/recv use the link between the two ranks. A rank that dies or stops answering
makes the collective fail on the others with a DistributedError naming it and the collective, after at most
`timeout_s` (HCQ_DIST_TIMEOUT_S, default 60) without progress. A rank that raises an exception it does not catch
ends the whole job at once (init() installs a sys.excepthook that prints it, then calls MPI_Abort): left alone, the
rank would wait in MPI_Finalize for the others while they wait for it in a collective. Devices:
compute/distributed/group.py; the wire protocol: compute/distributed/ring.py.
"""
from __future__ import annotations
import atexit, sys
from math import prod
from typing import Callable

from compute.dtypes import DType
from compute.lazy import LazyBuffer, Ops
from compute.runtime import Buffer, Device
from compute.tensor import Tensor
from compute.distributed.group import Group, place
from compute.distributed.ring import CHUNK, DistributedError, Plan, Recv

__all__ = ["init", "is_initialized", "rank", "world_size", "device", "all_reduce", "broadcast", "all_gather", "send",
           "recv", "barrier", "destroy_process_group", "ReduceOp", "DistributedError", "stats"]


class ReduceOp:
  """torch.distributed.ReduceOp's names, as the strings all_reduce takes."""
  SUM, PRODUCT, MIN, MAX, AVG = "sum", "product", "min", "max", "avg"


OPS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
  ReduceOp.SUM: Tensor.add, ReduceOp.AVG: Tensor.add, ReduceOp.PRODUCT: Tensor.mul, ReduceOp.MIN: Tensor.minimum,
  ReduceOp.MAX: Tensor.maximum}
MIN_KERNEL = 256           # elements: the smallest reduction kernel (sizes are powers of two up to a chunk: few kernels)

_group: Group | None = None
stats = {"staging_copies": 0, "staging_bytes": 0}   # copies between the GPU and host-visible memory (the staging path)


def init(timeout_s: float | None = None) -> None:
  """Join the job: rank and world size from mpirun's environment (a job of one without it), open this rank's GPU and
  NIC, make the GPU the process's default device and connect to every other rank (bootstrapped through mpi4py's
  allgather). In a job of several, an exception no one catches from here on aborts the job (MPI_Abort) once printed.
  `timeout_s`: how long a collective waits without progress before it fails (default HCQ_DIST_TIMEOUT_S, else 60)."""
  global _group, _excepthook
  if _group is not None: raise RuntimeError("compute.distributed is initialized already; destroy_process_group() first")
  if place().world_size > 1 and _excepthook is None: _excepthook, sys.excepthook = sys.excepthook, _abort_job
  _group = Group(timeout_s)
  Device.DEFAULT = _group.device_name
  atexit.register(destroy_process_group)


_excepthook = None    # the sys.excepthook that _abort_job replaced (a rank of a job of several keeps _abort_job)


def _abort_job(kind, value, tb) -> None:
  """sys.excepthook of a rank: the exception as Python prints it, then MPI_Abort, which makes mpirun end every rank.
  (Python's exit would run MPI_Finalize, which waits for every rank to finalize: the others wait in their collective
  for this rank, until their timeout.)"""
  _excepthook(kind, value, tb)
  sys.stderr.flush()
  from mpi4py import MPI
  MPI.COMM_WORLD.Abort(1)


def is_initialized() -> bool: return _group is not None


def _g() -> Group:
  if _group is None: raise RuntimeError("compute.distributed is not initialized: call compute.distributed.init() first")
  return _group


def rank() -> int: return _g().rank if _group is not None else place().rank
def world_size() -> int: return _g().world_size if _group is not None else place().world_size
def device() -> str:
  """This rank's device (DEV, or the emulated GPU with the rank's local index): the default device after init()."""
  return _g().device_name


def destroy_process_group() -> None:
  """Tear the connections down and free what init() made (a no-op when not initialized)."""
  global _group
  g, _group = _group, None
  atexit.unregister(destroy_process_group)
  if g is not None: g.close()


def _live(what: str) -> Group:
  """The process group, unless an earlier collective failed (then no GPU work starts for this one)."""
  g = _g()
  if g.engine is not None and g.engine.failed is not None:
    raise DistributedError(f"{what}: the process group failed earlier ({g.engine.failed})")
  return g


# --- moving tensors in and out of the work buffer
def _buffer(t: Tensor, what: str):
  """The realized, contiguous device buffer holding `t`'s elements."""
  g = _live(what)
  if not isinstance(t, Tensor): raise TypeError(f"{what} takes a compute Tensor, not {type(t).__name__}")
  if t.device != g.device_name:
    raise ValueError(f"{what}: the tensor is on {t.device}, this rank's device is {g.device_name} (use .to(dist.device()))")
  lb = t.lazydata
  if (lb.op is Ops.VIEW and not lb.st.is_reshape_of(lb.base.shape)) or lb.base.op in (Ops.CONST, Ops.ARANGE): lb = lb.contiguous()
  Tensor.realize_all(Tensor._from_lazy(lb))
  return lb.base.buffer.hcq


def _copy(src, dest) -> None:
  src.transfer(dest)
  if _g().staging:
    stats["staging_copies"] += 1
    stats["staging_bytes"] += src.size


def _tensor(hcq, shape: tuple[int, ...], dtype: DType) -> Tensor:
  return Tensor._from_lazy(LazyBuffer.from_buffer(Buffer.over(_g().device_name, hcq), shape, dtype))


def _result(work, offset: int, shape: tuple[int, ...], dtype: DType) -> Tensor:
  """A new tensor with the work buffer's bytes at `offset`."""
  out = Buffer(_g().device_name, prod(shape) * dtype.itemsize)
  if out.nbytes: _copy(work.view(offset, out.nbytes), out.hcq)
  return Tensor._from_lazy(LazyBuffer.from_buffer(out, shape, dtype))


def _consumer(work, dtype: DType, op: str):
  """What a landed chunk does: reduced into the work buffer by a kernel on the GPU, or copied there."""
  combine = OPS[op]
  def consume(r: Recv, slot) -> None:
    if not r.reduce:
      slot.view(0, r.length).transfer(work.view(r.offset, r.length))
      return
    # a power of two of elements (up to a chunk: the work buffer has one to spare past its end), so kernels are reused;
    # the elements past the chunk are combined too, and not written back
    n = min(max(MIN_KERNEL, 1 << (r.length // dtype.itemsize - 1).bit_length()), CHUNK // dtype.itemsize)
    size = n * dtype.itemsize
    out = combine(_tensor(work.view(r.offset, size), (n,), dtype), _tensor(slot.view(0, size), (n,), dtype)).realize()
    out.lazydata.buffer.hcq.view(0, r.length).transfer(work.view(r.offset, r.length))
  return consume


def _segment(n: int, parts: int, i: int) -> tuple[int, int]:
  """Elements [start, end) of part i when n elements are cut into `parts` nearly equal parts."""
  return n * i // parts, n * (i + 1) // parts


def _ring_chunks(n: int, segments: int, itemsize: int):
  """chunk(seg, j) -> (byte offset, bytes): each segment cut into the same number of pieces of at most CHUNK bytes."""
  longest = max(b - a for a, b in (_segment(n, segments, i) for i in range(segments)))
  m = max(1, -(-longest // (CHUNK // itemsize)))
  def chunk(seg: int, j: int) -> tuple[int, int]:
    a, b = _segment(n, segments, seg)
    lo, hi = _segment(b - a, m, j)
    return (a + lo) * itemsize, (hi - lo) * itemsize
  return m, chunk


def _ring(plan: Plan, g: Group, steps: int, m: int, chunk, reduce_steps: int) -> None:
  """Ring steps 0 .. steps - 1: at step k, rank r sends segment r-k to its right and receives
  segment r-k-1 from its left (reduced during the first `reduce_steps` steps, copied after); a chunk it forwards
  waits for the same chunk of the step before."""
  r, n = g.rank, g.world_size
  right, left = (r + 1) % n, (r - 1) % n
  prev: list[Recv | None] = [None] * m
  for k in range(steps):
    cur = []
    for j in range(m):
      plan.send(right, *chunk((r - k) % n, j), after=prev[j])
      cur.append(plan.recv(left, *chunk((r - k - 1) % n, j), reduce=k < reduce_steps))
    prev = cur


def _what(name: str, t: Tensor) -> str: return f"{name} of {t.numel()} {t.dtype.name}"


# --- collectives
def all_reduce(t: Tensor, op: str = ReduceOp.SUM) -> Tensor:
  """Reduce `t` over all ranks with `op` (sum, product, min, max, avg); `t` is updated in place and returned."""
  op = op.lower() if isinstance(op, str) else op
  if op not in OPS: raise ValueError(f"all_reduce: unknown op {op!r}; ops are torch's ReduceOp names: {', '.join(OPS)}")
  if op == ReduceOp.AVG and not t.dtype.is_float: raise TypeError(f"all_reduce: avg needs a floating-point tensor, not {t.dtype.name}")
  g = _g()
  src = _buffer(t, "all_reduce")
  if g.world_size == 1 or t.numel() == 0: return t
  nbytes = t.numel() * t.dtype.itemsize
  work, mr = g.work_buffer(nbytes)
  _copy(src.view(0, nbytes), work.view(0, nbytes))
  m, chunk = _ring_chunks(t.numel(), g.world_size, t.dtype.itemsize)
  plan = Plan()
  _ring(plan, g, 2 * (g.world_size - 1), m, chunk, g.world_size - 1)
  g.engine.run(_what("all_reduce", t), plan, mr, _consumer(work, t.dtype, op))
  out = _result(work, 0, t.shape, t.dtype)
  if op == ReduceOp.AVG: out = (out / g.world_size).cast(t.dtype)
  return t.assign(out)


def all_gather(tensor_list: list[Tensor], t: Tensor) -> list[Tensor]:
  """Every rank's `t` into `tensor_list` (one tensor per rank, each `t`'s shape and dtype; updated in place and
  returned), as torch's all_gather(tensor_list, tensor)."""
  g = _g()
  if len(tensor_list) != g.world_size:
    raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, the job has {g.world_size} ranks")
  for i, x in enumerate(tensor_list):
    if not isinstance(x, Tensor) or x.shape != t.shape or x.dtype is not t.dtype:
      raise ValueError(f"all_gather: tensor_list[{i}] must be a {t.dtype.name} tensor of shape {t.shape} like the input")
  src, nbytes = _buffer(t, "all_gather"), t.numel() * t.dtype.itemsize
  work, mr = g.work_buffer(nbytes * g.world_size)
  if nbytes: _copy(src.view(0, nbytes), work.view(g.rank * nbytes, nbytes))
  if g.world_size > 1 and nbytes:
    m, chunk = _ring_chunks(t.numel() * g.world_size, g.world_size, t.dtype.itemsize)
    plan = Plan()
    _ring(plan, g, g.world_size - 1, m, chunk, 0)
    g.engine.run(_what("all_gather", t), plan, mr, _consumer(work, t.dtype, ReduceOp.SUM))
  for i, x in enumerate(tensor_list): x.assign(_result(work, i * nbytes, t.shape, t.dtype))
  return tensor_list


def broadcast(t: Tensor, src: int = 0) -> Tensor:
  """Rank `src`'s `t` to every rank (updated in place there and returned): a pipelined chain along the ring."""
  g = _g()
  _peer(src, "broadcast", "src", own=True)
  buf, nbytes = _buffer(t, "broadcast"), t.numel() * t.dtype.itemsize
  if g.world_size == 1 or nbytes == 0: return t
  work, mr = g.work_buffer(nbytes)
  if g.rank == src: _copy(buf.view(0, nbytes), work.view(0, nbytes))
  plan = Plan()
  _chain(plan, g, src, _chunks(t))
  g.engine.run(f"{_what('broadcast', t)} from rank {src}", plan, mr, _consumer(work, t.dtype, ReduceOp.SUM))
  return t if g.rank == src else t.assign(_result(work, 0, t.shape, t.dtype))


def _chain(plan: Plan, g: Group, src: int, pieces: list[tuple[int, int]]) -> None:
  """The chain from `src` along the ring: each rank after it receives every piece from its left, and forwards it to
  its right (once received) unless the right is `src`."""
  d, n = (g.rank - src) % g.world_size, g.world_size
  for offset, length in pieces:
    got = plan.recv((g.rank - 1) % n, offset, length) if d else None
    if d < n - 1: plan.send((g.rank + 1) % n, offset, length, after=got)


def _chunks(t: Tensor) -> list[tuple[int, int]]:
  m, chunk = _ring_chunks(t.numel(), 1, t.dtype.itemsize)
  return [chunk(0, j) for j in range(m)]


def _peer(r: int, what: str, name: str, own: bool = False) -> None:
  g = _g()
  if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < g.world_size or (r == g.rank and not own):
    others = "another rank" if not own else "a rank"
    raise ValueError(f"{what}: {name}={r!r} must be {others} in [0, {g.world_size})" + ("" if own else f" (this is rank {g.rank})"))


def send(t: Tensor, dst: int) -> None:
  """Send `t` to rank `dst`, which calls recv with a tensor of the same shape and dtype; returns once it is there."""
  g = _g()
  _peer(dst, "send", "dst")
  buf, nbytes = _buffer(t, "send"), t.numel() * t.dtype.itemsize
  if nbytes == 0: return
  work, mr = g.work_buffer(nbytes)
  _copy(buf.view(0, nbytes), work.view(0, nbytes))
  plan = Plan()
  for offset, length in _chunks(t): plan.send(dst, offset, length)
  g.engine.run(f"{_what('send', t)} to rank {dst}", plan, mr, _consumer(work, t.dtype, ReduceOp.SUM))


def recv(t: Tensor, src: int) -> Tensor:
  """Receive into `t` (updated in place and returned) what rank `src` sends."""
  g = _live("recv")
  _peer(src, "recv", "src")
  nbytes = t.numel() * t.dtype.itemsize
  if nbytes == 0: return t
  work, mr = g.work_buffer(nbytes)
  plan = Plan()
  for offset, length in _chunks(t): plan.recv(src, offset, length)
  g.engine.run(f"{_what('recv', t)} from rank {src}", plan, mr, _consumer(work, t.dtype, ReduceOp.SUM))
  return t.assign(_result(work, 0, t.shape, t.dtype))


def barrier() -> None:
  """Return once every rank has called barrier (a ring all-gather of one element each)."""
  g = _live("barrier")
  if g.world_size == 1: return
  work, mr = g.work_buffer(4 * g.world_size)
  m, chunk = _ring_chunks(g.world_size, g.world_size, 4)
  plan = Plan()
  _ring(plan, g, g.world_size - 1, m, chunk, 0)
  g.engine.run("barrier", plan, mr, lambda r, slot: None)
