"""compute.distributed: collectives between processes launched by mpirun, shaped like torch.distributed; the data
moves GPU to GPU by RDMA WRITE over hcq's NICs (drivers/rdma), MPI only bootstraps.

  mpirun -np 2 python script.py          # as root add --allow-run-as-root; on a small machine --oversubscribe
  from compute import Tensor, distributed as dist
  dist.init()                            # rank and world size from mpirun's environment; connects every pair of ranks
  t = Tensor([1.0, 2.0])                 # on this rank's device, dist.device(): init() made it the default device
  dist.all_reduce(t)                     # t (updated in place, and returned) is the sum over the ranks
  dist.broadcast(t, src=0); dist.all_gather(parts, t); dist.send(t, dst=1); dist.recv(t, src=0); dist.barrier()
  dist.reduce_scatter_tensor(out, t); dist.all_gather_into_tensor(out, t); dist.all_to_all(outs, ins)
  g = dist.new_group([0, 1]); dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g)
  dist.destroy_process_group()           # also done at exit

The collectives take torch.distributed's arguments, with its names and defaults: `op` (ReduceOp.SUM, PRODUCT, MIN,
MAX, AVG: AVG for floating point only; the lower-case strings are the same), `group` (None: every rank; else what
new_group(ranks) returned; `src`/`dst` are global ranks, as torch has them) and `async_op` (True: the call returns a
Work whose wait() returns True once the result is there). A rank that is not in `group` does nothing, with a warning,
and gets None, as in torch. The reductions run on the rank's GPU (a compute kernel per chunk). Tensors must be on the
rank's device (`device()`, the process's default device from init() on, as torch.cuda.set_device(local_rank) after
torchrun); results are outside the autograd graph.

all_reduce is a pipelined ring: reduce-scatter then all-gather, each segment cut into chunks (each one RDMA WRITE into
the next rank's landing slots); a chunk's reduction is queued on the GPU while the next chunks are on the wire, and
the chunk it produces goes on to the next rank as soon as it is done. reduce_scatter is the ring's first half,
all_gather its second; broadcast is a pipelined chain from `src` along the ring; all_to_all and send/recv use the links
between the two ranks. A rank that dies or stops answering makes the collective fail on the others with a
DistributedError naming it and the collective, after at most `timeout_s` (HCQ_DIST_TIMEOUT_S, default 60) without
progress. A rank that raises an exception it does not catch ends the whole job at once (init() installs a
sys.excepthook that prints it, then calls MPI_Abort): left alone, the rank would wait in MPI_Finalize for the others
while they wait for it in a collective. Devices: compute/distributed/group.py; the wire protocol: ring.py; the
device work of landed chunks: fold.py.
"""
from __future__ import annotations
import atexit, sys, warnings
from datetime import timedelta
from math import prod
from typing import Any, Callable

from compute.dtypes import DType
from compute.lazy import LazyBuffer, Ops
from compute.runtime import Buffer, Device
from compute.tensor import Tensor
from compute.distributed.group import Group, place
from compute.distributed.ring import CHUNK, DistributedError, Engine, Plan, Recv

__all__ = ["init", "is_initialized", "rank", "world_size", "get_rank", "get_world_size", "device", "new_group",
           "ProcessGroup", "Work", "all_reduce", "reduce_scatter", "reduce_scatter_tensor", "broadcast", "all_gather",
           "all_gather_into_tensor", "all_to_all", "all_to_all_single", "send", "recv", "barrier", "destroy_process_group",
           "ReduceOp", "DistributedError", "stats"]


class ReduceOp:
  """torch.distributed.ReduceOp's reductions (the strings are accepted as well)."""
  SUM, PRODUCT, MIN, MAX, AVG = "sum", "product", "min", "max", "avg"


OPS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
  ReduceOp.SUM: Tensor.add, ReduceOp.AVG: Tensor.add, ReduceOp.PRODUCT: Tensor.mul, ReduceOp.MIN: Tensor.minimum,
  ReduceOp.MAX: Tensor.maximum}
# a ring segment is cut into at least DEPTH chunks (so one is reduced while the next is on the wire) of at least
# MIN_PIECE bytes; on two ranks each phase is one hop and a chunk's reduction is short next to its wire time, so there a
# segment is cut only into CHUNK-sized pieces (a 1 MiB all_reduce on 2 CPU ranks here: 11 ms cut in two, 9 ms whole)
DEPTH = 2
MIN_PIECE = 256 << 10

_group: Group | None = None
_world: ProcessGroup | None = None
stats = {"staging_copies": 0, "staging_bytes": 0}   # copies between the GPU and host-visible memory (the staging path)


class ProcessGroup:
  """Ranks that run collectives together (torch.distributed's ProcessGroup): every rank (init()), or new_group(ranks).
  `ranks`: their global ranks in order; rank(): this process's index among them (-1 when it is not one of them)."""
  def __init__(self, ranks: tuple[int, ...], me: int, timeout_s: float):
    self.ranks, self.me, self.timeout_s = ranks, me, timeout_s

  def rank(self) -> int: return self.me
  def size(self) -> int: return len(self.ranks)
  def __repr__(self) -> str: return f"<ProcessGroup of ranks {list(self.ranks)}>"


class Work:
  """What a collective called with async_op=True returns (torch.distributed's Work). The call starts the collective
  (its first chunks go on the wire) and returns; the NICs carry what was posted while the caller goes on, and the rest
  moves when the caller calls wait(), is_completed() or its next collective (collectives run in the order they were
  called). wait() returns True once the result is in the output tensors (raising the collective's error, if it
  failed); read them after it."""
  def __init__(self, complete: Callable[[], object], running: bool):
    self._complete, self._done = complete, False
    self._error: BaseException | None = None
    self.result: object = None
    if not running: self._finalize()

  def _finalize(self, error: BaseException | None = None) -> None:
    global _outstanding
    if _outstanding is self: _outstanding = None
    if error is not None: self._error = error
    else: self._done, self.result = True, self._complete()

  def wait(self, timeout: timedelta | None = None) -> bool:
    if self._error is not None: raise self._error
    if not self._done:
      try: _engine(_g()).finish()
      except BaseException as e:
        self._finalize(e)
        raise
      _g().folder.landed()
      self._finalize()
    return True

  def is_completed(self) -> bool:
    """Whether the collective has ended (moving it on without blocking); one that failed has ended too."""
    if self._done or self._error is not None: return True
    try: done = _engine(_g()).poll()
    except BaseException as e:
      self._finalize(e)
      return True
    if done: self.wait()
    return done

  def is_success(self) -> bool: return self._done and self._error is None
  def get_future(self): raise NotImplementedError("Work.get_future: compute.distributed has no futures; call wait()")


_outstanding: Work | None = None    # the collective started with async_op=True that has not ended yet


def init(timeout_s: float | None = None) -> None:
  """Join the job: rank and world size from mpirun's environment (a job of one without it), open this rank's GPU and
  NIC, make the GPU the process's default device and connect to every other rank (bootstrapped through mpi4py's
  allgather). In a job of several, an exception no one catches from here on aborts the job (MPI_Abort) once printed.
  `timeout_s`: how long a collective waits without progress before it fails (default HCQ_DIST_TIMEOUT_S, else 60)."""
  global _group, _world, _excepthook
  if _group is not None: raise RuntimeError("compute.distributed is initialized already; destroy_process_group() first")
  if place().world_size > 1 and _excepthook is None: _excepthook, sys.excepthook = sys.excepthook, _abort_job
  _group = Group(timeout_s)
  _world = ProcessGroup(tuple(range(_group.world_size)), _group.rank, _group.timeout_s)
  Device.DEFAULT = _group.device_name
  atexit.register(destroy_process_group)


_excepthook: Any = None    # the sys.excepthook that _abort_job replaced (a rank of a job of several keeps _abort_job)


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


def get_rank(group: ProcessGroup | None = None) -> int:
  """This rank's index in `group` (-1 when not in it); the global rank without one."""
  return rank() if group is None else group.rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
  return world_size() if group is None else group.size()


def new_group(ranks: list[int] | None = None, timeout: timedelta | float | None = None, backend: str | None = None) -> ProcessGroup:
  """A group of the given global ranks (all of them by default; their order is sorted, as torch does) for the
  collectives' `group=`. Every rank may call it; a rank not in `ranks` gets a group it is no member of (its
  collectives on it do nothing). `timeout` (a timedelta or seconds): the group's collectives' wait without progress
  (default init()'s). The ranks are connected already (init() connects every pair): nothing goes on the wire."""
  g = _g()
  if backend is not None and backend.lower() not in ("hcq", "nccl", "gloo"):
    raise ValueError(f"new_group: backend {backend!r}: compute.distributed has one transport (RDMA over hcq's NICs); pass no backend")
  ranks = list(range(g.world_size)) if ranks is None else list(ranks)
  bad = [r for r in ranks if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < g.world_size]
  if bad or not ranks: raise ValueError(f"new_group: ranks must be ranks of the job in [0, {g.world_size}), got {ranks!r}")
  if len(set(ranks)) != len(ranks): raise ValueError(f"new_group: ranks {ranks!r} name a rank twice")
  ordered = tuple(sorted(ranks))
  timeout_s = g.timeout_s if timeout is None else timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
  if not timeout_s > 0: raise ValueError(f"new_group: timeout must be positive, got {timeout!r}")
  return ProcessGroup(ordered, ordered.index(g.rank) if g.rank in ordered else -1, timeout_s)


def destroy_process_group(group: ProcessGroup | None = None) -> None:
  """Tear the connections down and free what init() made (a no-op when not initialized); with a group made by
  new_group, only that group is dropped (its ranks stay connected)."""
  global _group, _world, _outstanding
  if group is not None and group is not _world: return
  if _outstanding is not None:      # the collective started last ends first (the peers wait for it)
    try: _outstanding.wait()
    finally: _outstanding = None
  g, _group, _world = _group, None, None
  atexit.unregister(destroy_process_group)
  if g is not None: g.close()


def _member(group: ProcessGroup | None, what: str) -> ProcessGroup | None:
  """The group a collective runs in (the world for None); None, with a warning, where this rank is not in it."""
  _g()
  if _outstanding is not None: _outstanding.wait()     # collectives run in the order they were called
  pg = _world if group is None else group
  if not isinstance(pg, ProcessGroup): raise TypeError(f"{what}: group must be what new_group() returned, not {type(group).__name__}")
  if pg.me < 0:
    warnings.warn(f"{what}: rank {rank()} is not in the group of ranks {list(pg.ranks)}: it does nothing", stacklevel=3)
    return None
  return pg


def _live(what: str) -> Group:
  """The process group, unless an earlier collective failed (then no GPU work starts for this one)."""
  g = _g()
  if g.engine is not None and g.engine.failed is not None:
    raise DistributedError(f"{what}: the process group failed earlier ({g.engine.failed})")
  return g


def _engine(g: Group) -> Engine:
  if g.engine is None: raise RuntimeError("compute.distributed: this rank is not connected (a job of one has no links)")
  return g.engine


def _finish(complete: Callable[[], object], async_op: bool, running: bool = True):
  """What a collective returns: with async_op a Work at once (`running`: whether it started a plan, which runs on),
  else, once the plan ended, complete()'s value (complete() moves the result into the output tensors)."""
  global _outstanding
  work = Work(complete, running)
  if async_op:
    if running: _outstanding = work
    return work
  work.wait()
  return work.result


def _done(value):
  return lambda: value


def _reduce_op(op, what: str, dtype: DType) -> str:
  name = op.lower() if isinstance(op, str) else op
  if name not in OPS: raise ValueError(f"{what}: unknown op {op!r}; ops are torch's ReduceOp names: {', '.join(OPS)}")
  if name == ReduceOp.AVG and not dtype.is_float: raise TypeError(f"{what}: avg needs a floating-point tensor, not {dtype.name}")
  return name


# --- moving tensors in and out of the work buffer
def _buffer(t: Tensor, what: str):
  """The realized, contiguous device buffer holding `t`'s elements."""
  g = _live(what)
  if not isinstance(t, Tensor): raise TypeError(f"{what} takes a compute Tensor, not {type(t).__name__}")
  if t.device != g.device_name:
    raise ValueError(f"{what}: the tensor is on {t.device}, this rank's device is {g.device_name} (use .to(dist.device()))")
  lb = t.lazydata
  if (lb.op is Ops.VIEW and not lb.tracker.is_reshape_of(lb.base.shape)) or lb.base.op in (Ops.CONST, Ops.ARANGE): lb = lb.contiguous()
  Tensor.realize_all(Tensor._from_lazy(lb))
  return lb.base.buffer.hcq


def _copy(src, dest) -> None:
  src.transfer(dest)
  if _g().staging:
    stats["staging_copies"] += 1
    stats["staging_bytes"] += src.size


def _result(work, offset: int, shape: tuple[int, ...], dtype: DType) -> Tensor:
  """A new tensor with the work buffer's bytes at `offset`."""
  out = Buffer(_g().device_name, prod(shape) * dtype.itemsize)
  if out.nbytes: _copy(work.view(offset, out.nbytes), out.hcq)
  return Tensor._from_lazy(LazyBuffer.from_buffer(out, shape, dtype))


def _span(nbytes: int) -> int:
  """Bytes a region of the work buffer takes for `nbytes` (a multiple of 256: regions start aligned)."""
  return -(-nbytes // 256) * 256


def _start(what: str, pg: ProcessGroup, plan: Plan, work, mr, dtype: DType, op: str) -> None:
  """Start `plan` on the links: each landed chunk reduced (with `op`) or copied into `work` by the GPU."""
  g = _g()
  combine, folder = OPS[op], g.folder
  def consume(r: Recv, slot) -> int:
    if r.operand is None: return folder.copy(work.view(r.offset, r.length), slot.view(0, r.length))
    return folder.reduce(combine, dtype, work, r.offset, r.operand, slot, r.length)
  _engine(g).start(what, plan, mr, consume, pg.timeout_s)


def _segment(n: int, parts: int, i: int) -> tuple[int, int]:
  """Elements [start, end) of part i when n elements are cut into `parts` nearly equal parts."""
  return n * i // parts, n * (i + 1) // parts


def _ring_chunks(n: int, segments: int, itemsize: int):
  """chunk(seg, j) -> (byte offset, bytes): each segment cut into the same number m of pieces, of at most CHUNK bytes
  and, on rings of more than two (and segments long enough), DEPTH pieces of at least MIN_PIECE bytes."""
  longest = max(b - a for a, b in (_segment(n, segments, i) for i in range(segments)))
  m = max(1, -(-longest // (CHUNK // itemsize)), min(DEPTH, longest * itemsize // MIN_PIECE) if segments > 2 else 1)
  def chunk(seg: int, j: int) -> tuple[int, int]:
    a, b = _segment(n, segments, seg)
    lo, hi = _segment(b - a, m, j)
    return (a + lo) * itemsize, (hi - lo) * itemsize
  return m, chunk


def _ring(plan: Plan, ranks: tuple[int, ...], me: int, steps: int, m: int, chunk, reduce_steps: int, shift: int = 0,
          src: int = 0, dst: int = 0) -> None:
  """Ring steps 0 .. steps - 1 over the ranks `ranks` (this one is ranks[me]): at step k, member i sends segment
  i-k+shift to member i+1 and receives segment i-k-1+shift from member i-1, which it reduces during the first
  `reduce_steps` steps (work[dst + o] = work[src + o] op chunk) and copies after (to dst + o). The sends of step 0
  read the input at `src`, the later ones what was received at `dst`; a chunk forwarded waits for the same chunk of
  the step before. After n-1 reducing steps member i holds the reduced segment i+1+shift."""
  n = len(ranks)
  right, left = ranks[(me + 1) % n], ranks[(me - 1) % n]
  prev: list[Recv | None] = [None] * m
  for k in range(steps):
    cur, base = [], src if k == 0 else dst
    for j in range(m):
      offset, length = chunk((me - k + shift) % n, j)
      plan.send(right, base + offset, length, after=prev[j])
      offset, length = chunk((me - k - 1 + shift) % n, j)
      cur.append(plan.recv(left, dst + offset, length, operand=src + offset if k < reduce_steps else None))
    prev = cur


def _what(name: str, t: Tensor, pg: ProcessGroup) -> str:
  return f"{name} of {t.numel()} {t.dtype.name}" + ("" if pg is _world else f" in the group of ranks {list(pg.ranks)}")


def _average(t: Tensor, op: str, n: int) -> Tensor: return (t / n).cast(t.dtype) if op == ReduceOp.AVG else t


def _same(what: str, name: str, ts: list[Tensor], shape: tuple[int, ...] | None, dtype: DType, count: int) -> None:
  """`ts` is a list of `count` tensors of `dtype` (and `shape`, where given)."""
  if not isinstance(ts, (list, tuple)): raise TypeError(f"{what}: {name} must be a list of tensors, not {type(ts).__name__}")
  if len(ts) != count: raise ValueError(f"{what}: {name} has {len(ts)} tensors, the group has {count} ranks")
  for i, x in enumerate(ts):
    if not isinstance(x, Tensor) or (shape is not None and x.shape != shape) or x.dtype is not dtype:
      raise ValueError(f"{what}: {name}[{i}] must be a {dtype.name} tensor" + (f" of shape {shape}" if shape is not None else ""))


# --- collectives
def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group: ProcessGroup | None = None, async_op: bool = False):
  """Reduce `tensor` over the group's ranks with `op`; `tensor` is updated in place and returned (a Work with
  async_op)."""
  op = _reduce_op(op, "all_reduce", tensor.dtype)
  if (pg := _member(group, "all_reduce")) is None: return None
  g, n = _g(), pg.size()
  src = _buffer(tensor, "all_reduce")
  if n == 1 or tensor.numel() == 0: return _finish(_done(tensor), async_op, False)
  nbytes = tensor.numel() * tensor.dtype.itemsize
  work, mr = g.work_buffer(2 * _span(nbytes))
  _copy(src.view(0, nbytes), work.view(0, nbytes))
  m, chunk = _ring_chunks(tensor.numel(), n, tensor.dtype.itemsize)
  plan = Plan()
  _ring(plan, pg.ranks, pg.me, 2 * (n - 1), m, chunk, n - 1, dst=_span(nbytes))
  _start(_what("all_reduce", tensor, pg), pg, plan, work, mr, tensor.dtype, op)
  return _finish(lambda: tensor.assign(_average(_result(work, _span(nbytes), tensor.shape, tensor.dtype), op, n)), async_op)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op=ReduceOp.SUM, group: ProcessGroup | None = None,
                          async_op: bool = False):
  """`input` (the group's size times `output`: concatenated or stacked along dim 0) reduced over the ranks with `op`;
  member i's `output` gets the i-th part (updated in place)."""
  what = "reduce_scatter_tensor"
  if (pg := _member(group, what)) is None: return None
  n = pg.size()
  if not isinstance(output, Tensor) or not isinstance(input, Tensor): raise TypeError(f"{what} takes compute Tensors")
  if input.dtype is not output.dtype: raise ValueError(f"{what}: input is {input.dtype.name}, output {output.dtype.name}: they must match")
  if input.numel() != n * output.numel():
    raise ValueError(f"{what}: input has {input.numel()} elements, it must have the group's size ({n}) times output's "
                     f"{output.numel()}")
  return _reduce_scatter(what, pg, output, [input], op, async_op)


def reduce_scatter(output: Tensor, input_list: list[Tensor], op=ReduceOp.SUM, group: ProcessGroup | None = None,
                   async_op: bool = False):
  """input_list[i] (one tensor per rank of the group, each `output`'s shape and dtype) reduced over the ranks with
  `op` into member i's `output` (updated in place)."""
  what = "reduce_scatter"
  if (pg := _member(group, what)) is None: return None
  if not isinstance(output, Tensor): raise TypeError(f"{what} takes a compute Tensor, not {type(output).__name__}")
  _same(what, "input_list", input_list, output.shape, output.dtype, pg.size())
  return _reduce_scatter(what, pg, output, list(input_list), op, async_op)


def _reduce_scatter(what: str, pg: ProcessGroup, output: Tensor, inputs: list[Tensor], op, async_op: bool):
  op = _reduce_op(op, what, output.dtype)
  g, n, size = _g(), pg.size(), output.dtype.itemsize
  srcs = [(_buffer(x, what), x.numel() * size) for x in inputs]
  _buffer(output, what)
  nbytes = sum(b for _, b in srcs)
  work, mr = g.work_buffer(2 * _span(nbytes) + CHUNK)
  at = 0
  for buf, b in srcs:
    if b: _copy(buf.view(0, b), work.view(at, b))
    at += b
  if n > 1 and nbytes:
    m, chunk = _ring_chunks(output.numel() * n, n, size)
    plan = Plan()
    _ring(plan, pg.ranks, pg.me, n - 1, m, chunk, n - 1, shift=-1, dst=_span(nbytes))
    _start(_what(what, output, pg), pg, plan, work, mr, output.dtype, op)
  mine = (_span(nbytes) if n > 1 else 0) + pg.me * output.numel() * size
  return _finish(lambda: output.assign(_average(_result(work, mine, output.shape, output.dtype), op, n)), async_op,
                 n > 1 and nbytes > 0)


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: ProcessGroup | None = None, async_op: bool = False):
  """Every member's `tensor` into `tensor_list` (one tensor per rank of the group, each `tensor`'s shape and dtype;
  updated in place and returned), as torch's all_gather(tensor_list, tensor)."""
  if (pg := _member(group, "all_gather")) is None: return None
  _same("all_gather", "tensor_list", tensor_list, tensor.shape, tensor.dtype, pg.size())
  work, nbytes, running = _gather("all_gather", pg, tensor)
  def complete():
    for i, x in enumerate(tensor_list): x.assign(_result(work, i * nbytes, tensor.shape, tensor.dtype))
    return tensor_list
  return _finish(complete, async_op, running)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: ProcessGroup | None = None,
                           async_op: bool = False):
  """Every member's `input_tensor`, in rank order, into `output_tensor` (updated in place): the inputs concatenated
  along dim 0 (shape (n * d0, ...)) or stacked (shape (n, ...)), as torch has it."""
  what = "all_gather_into_tensor"
  if (pg := _member(group, what)) is None: return None
  n, shape = pg.size(), input_tensor.shape
  forms = [(n, *shape)] + ([(n * shape[0], *shape[1:])] if shape else [])
  if not isinstance(output_tensor, Tensor) or output_tensor.dtype is not input_tensor.dtype or output_tensor.shape not in forms:
    raise ValueError(f"{what}: output_tensor must be a {input_tensor.dtype.name} tensor of shape "
                     f"{' or '.join(map(str, dict.fromkeys(forms)))} (the group's {n} inputs of shape {shape}), not "
                     f"{getattr(output_tensor, 'dtype', None) and output_tensor.dtype.name} {getattr(output_tensor, 'shape', None)}")
  _buffer(output_tensor, what)
  work, _, running = _gather(what, pg, input_tensor)
  return _finish(lambda: output_tensor.assign(_result(work, 0, output_tensor.shape, output_tensor.dtype)), async_op, running)


def _gather(what: str, pg: ProcessGroup, t: Tensor):
  """Start the ring's all-gather of every member's `t`: (the work buffer that holds them in rank order once it ended,
  bytes of each, whether a plan runs)."""
  g, n = _g(), pg.size()
  src, nbytes = _buffer(t, what), t.numel() * t.dtype.itemsize
  work, mr = g.work_buffer(nbytes * n)
  if nbytes: _copy(src.view(0, nbytes), work.view(pg.me * nbytes, nbytes))
  if n > 1 and nbytes:
    m, chunk = _ring_chunks(t.numel() * n, n, t.dtype.itemsize)
    plan = Plan()
    _ring(plan, pg.ranks, pg.me, n - 1, m, chunk, 0)
    _start(_what(what, t, pg), pg, plan, work, mr, t.dtype, ReduceOp.SUM)
  return work, nbytes, n > 1 and nbytes > 0


def all_to_all(output_tensor_list: list[Tensor], input_tensor_list: list[Tensor], group: ProcessGroup | None = None,
               async_op: bool = False):
  """input_tensor_list[j] to member j, whose output_tensor_list[i] gets it from member i (updated in place). Every
  tensor has one dtype; the sizes may differ by pair, but member i's input j must have member j's output i's size."""
  what = "all_to_all"
  if (pg := _member(group, what)) is None: return None
  if not input_tensor_list or not isinstance(input_tensor_list[0], Tensor):
    raise ValueError(f"{what}: input_tensor_list must be a list of the group's {pg.size()} tensors")
  dtype = input_tensor_list[0].dtype
  _same(what, "input_tensor_list", input_tensor_list, None, dtype, pg.size())
  _same(what, "output_tensor_list", output_tensor_list, None, dtype, pg.size())
  for o in output_tensor_list: _buffer(o, what)
  outs = _exchange(what, pg, [(_buffer(x, what), 0, x.numel() * dtype.itemsize) for x in input_tensor_list],
                   [o.numel() * dtype.itemsize for o in output_tensor_list], dtype)
  def complete():
    for o, (work, offset) in zip(output_tensor_list, outs): o.assign(_result(work, offset, o.shape, dtype))
    return output_tensor_list
  return _finish(complete, async_op, pg.size() > 1)


def all_to_all_single(output: Tensor, input: Tensor, output_split_sizes: list[int] | None = None,
                      input_split_sizes: list[int] | None = None, group: ProcessGroup | None = None, async_op: bool = False):
  """`input` split along dim 0 (into input_split_sizes rows, else the group's size equal parts), part j to member j;
  `output` (updated in place) gets member i's part for this rank as its i-th part (output_split_sizes rows, else equal)."""
  what = "all_to_all_single"
  if (pg := _member(group, what)) is None: return None
  n = pg.size()
  if not isinstance(output, Tensor) or not isinstance(input, Tensor): raise TypeError(f"{what} takes compute Tensors")
  if output.dtype is not input.dtype: raise ValueError(f"{what}: input is {input.dtype.name}, output {output.dtype.name}: they must match")
  def rows(t: Tensor, name: str, splits: list[int] | None) -> list[int]:
    if not t.shape: raise ValueError(f"{what}: {name} must have a first dimension to split")
    if splits is None:
      if t.shape[0] % n:
        raise ValueError(f"{what}: {name}'s first dimension {t.shape[0]} does not split into the group's {n} equal parts: "
                         f"pass {name}_split_sizes")
      return [t.shape[0] // n] * n
    splits = list(splits)
    if len(splits) != n or any(not isinstance(s, int) or s < 0 for s in splits) or sum(splits) != t.shape[0]:
      raise ValueError(f"{what}: {name}_split_sizes {splits!r} must be {n} row counts summing to {name}'s {t.shape[0]} rows")
    return splits
  if output.shape[1:] != input.shape[1:]: raise ValueError(f"{what}: output's rows {output.shape[1:]} differ from input's {input.shape[1:]}")
  row = prod(input.shape[1:]) * input.dtype.itemsize
  ins, outs_rows = rows(input, "input", input_split_sizes), rows(output, "output", output_split_sizes)
  src, _ = _buffer(input, what), _buffer(output, what)
  got = _exchange(what, pg, [(src, sum(ins[:j]) * row, ins[j] * row) for j in range(n)], [r * row for r in outs_rows], input.dtype)
  work, first = got[0]    # the parts lie in order, one after the other
  return _finish(lambda: output.assign(_result(work, first, output.shape, output.dtype)), async_op, n > 1)


def _exchange(what: str, pg: ProcessGroup, ins: list, outs: list[int], dtype: DType) -> list:
  """Start the exchange: member j gets ins[j] (buffer, byte offset, bytes); outs[i] bytes come from member i. ->
  (work buffer, offset) of each output once it ended, laid out in order one after the other."""
  g, n, me = _g(), pg.size(), pg.me
  if outs[me] != ins[me][2]:
    raise ValueError(f"{what}: this rank's part for itself is {ins[me][2]} bytes, its output for itself {outs[me]} bytes")
  total_in = _span(sum(b for _, _, b in ins))
  work, mr = g.work_buffer(total_in + sum(outs))
  at, send_at = 0, []
  for buf, o, b in ins:
    if b: _copy(buf.view(o, b), work.view(at, b))
    send_at.append(at)
    at += b
  out_at = [total_in + sum(outs[:i]) for i in range(n)]
  if outs[me]: work.view(send_at[me], outs[me]).transfer(work.view(out_at[me], outs[me]))
  plan = Plan()
  for d in range(1, n):    # member me+d first, so the members do not all send to the same one at once
    j, i = (me + d) % n, (me - d) % n
    for offset, length in _pieces(ins[j][2], dtype.itemsize): plan.send(pg.ranks[j], send_at[j] + offset, length)
    for offset, length in _pieces(outs[i], dtype.itemsize): plan.recv(pg.ranks[i], out_at[i] + offset, length)
  if n > 1: _start(f"{what} of {dtype.name}" + ("" if pg is _world else f" in the group of ranks {list(pg.ranks)}"), pg, plan,
                 work, mr, dtype, ReduceOp.SUM)
  return [(work, o) for o in out_at]


def _pieces(nbytes: int, itemsize: int) -> list[tuple[int, int]]:
  m, chunk = _ring_chunks(nbytes // itemsize, 1, itemsize)
  return [chunk(0, j) for j in range(m)]


def broadcast(tensor: Tensor, src: int = 0, group: ProcessGroup | None = None, async_op: bool = False):
  """Global rank `src`'s `tensor` to every member of the group (updated in place there and returned): a pipelined
  chain along the ring."""
  if (pg := _member(group, "broadcast")) is None: return None
  g = _g()
  _peer(src, "broadcast", "src", pg, own=True)
  buf, nbytes = _buffer(tensor, "broadcast"), tensor.numel() * tensor.dtype.itemsize
  if pg.size() == 1 or nbytes == 0: return _finish(_done(tensor), async_op, False)
  work, mr = g.work_buffer(nbytes)
  if g.rank == src: _copy(buf.view(0, nbytes), work.view(0, nbytes))
  plan = Plan()
  _chain(plan, pg.ranks, pg.me, pg.ranks.index(src), _pieces(nbytes, tensor.dtype.itemsize))
  _start(f"{_what('broadcast', tensor, pg)} from rank {src}", pg, plan, work, mr, tensor.dtype, ReduceOp.SUM)
  return _finish(lambda: tensor if g.rank == src else tensor.assign(_result(work, 0, tensor.shape, tensor.dtype)), async_op)


def _chain(plan: Plan, ranks: tuple[int, ...], me: int, src: int, pieces: list[tuple[int, int]]) -> None:
  """The chain from member `src` along the ring: each member after it receives every piece from its left, and
  forwards it to its right (once received) unless the right is `src`."""
  n = len(ranks)
  d = (me - src) % n
  for offset, length in pieces:
    got = plan.recv(ranks[(me - 1) % n], offset, length) if d else None
    if d < n - 1: plan.send(ranks[(me + 1) % n], offset, length, after=got)


def _peer(r: int, what: str, name: str, pg: ProcessGroup, own: bool = False) -> None:
  g = _g()
  if isinstance(r, bool) or not isinstance(r, int) or r not in pg.ranks or (r == g.rank and not own):
    among = f"in [0, {g.world_size})" if pg is _world else f"of the group {list(pg.ranks)}"
    raise ValueError(f"{what}: {name}={r!r} must be {'a rank' if own else 'another rank'} {among}" + ("" if own else f" (this is rank {g.rank})"))


def send(tensor: Tensor, dst: int, group: ProcessGroup | None = None) -> None:
  """Send `tensor` to global rank `dst`, which calls recv with a tensor of the same shape and dtype; returns once it
  is there."""
  if (pg := _member(group, "send")) is None: return
  g = _g()
  _peer(dst, "send", "dst", pg)
  buf, nbytes = _buffer(tensor, "send"), tensor.numel() * tensor.dtype.itemsize
  if nbytes == 0: return
  work, mr = g.work_buffer(nbytes)
  _copy(buf.view(0, nbytes), work.view(0, nbytes))
  plan = Plan()
  for offset, length in _pieces(nbytes, tensor.dtype.itemsize): plan.send(dst, offset, length)
  _start(f"{_what('send', tensor, pg)} to rank {dst}", pg, plan, work, mr, tensor.dtype, ReduceOp.SUM)
  _finish(_done(None), False)


def recv(tensor: Tensor, src: int, group: ProcessGroup | None = None) -> Tensor | None:
  """Receive into `tensor` (updated in place and returned) what global rank `src` sends."""
  if (pg := _member(group, "recv")) is None: return None
  g = _live("recv")
  _peer(src, "recv", "src", pg)
  nbytes = tensor.numel() * tensor.dtype.itemsize
  if nbytes == 0: return tensor
  work, mr = g.work_buffer(nbytes)
  plan = Plan()
  for offset, length in _pieces(nbytes, tensor.dtype.itemsize): plan.recv(src, offset, length)
  _start(f"{_what('recv', tensor, pg)} from rank {src}", pg, plan, work, mr, tensor.dtype, ReduceOp.SUM)
  return _finish(lambda: tensor.assign(_result(work, 0, tensor.shape, tensor.dtype)), False)


def barrier(group: ProcessGroup | None = None, async_op: bool = False, device_ids: list[int] | None = None):
  """Return once every member of the group has called barrier (a ring all-gather of one element each)."""
  if (pg := _member(group, "barrier")) is None: return None
  g = _live("barrier")
  if pg.size() > 1:
    work, mr = g.work_buffer(4 * pg.size())
    m, chunk = _ring_chunks(pg.size(), pg.size(), 4)
    plan = Plan()
    _ring(plan, pg.ranks, pg.me, pg.size() - 1, m, chunk, 0)
    _engine(g).start("barrier", plan, mr, lambda r, slot: None, pg.timeout_s)
  return _finish(_done(None), async_op, pg.size() > 1)
