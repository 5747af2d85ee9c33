"""Running schedules through the queue API (drivers.hcq) only: devices, buffers, compiling, launching.

Every run of kernels of a schedule on one device goes into one ordered compute-queue submission (after the device's
timeline, signalling it at the end): the replay of a queue-API Graph made the first time that run of kernels ran,
its sealed stream patched with this run's buffers, so a repeated op encodes no launch again (with profiling on, the
launches are encoded each time instead, each with its timestamps). Device copies use Buffer.transfer. Freed buffers
return to a per-device pool and are reused once the timeline shows their last user has finished.

A compile that takes longer than COMPILE_NOTICE_S prints one line on stderr (what was compiled; the result is on
disk for the next run). Capture for compute.jit: while a Capture is active, run_schedule also hands it every launch
and copy, and reading tensor data on the host is refused.
"""
from __future__ import annotations
import os, sys, time, weakref
from collections import defaultdict
import numpy as np
from drivers.hcq import open_device, default_device_name, parse_device, profile
from drivers.hcq import Device as HCQDevice, Buffer as HCQBuffer, Program as HCQProgram, Queue as HCQQueue, Graph
from compute.codegen import Dialect, Program
import compute.nir   # noqa: F401  (defines, so registers, the NIR dialect)
from compute.dtypes import DType, dtypes
from compute.lazy import LazyBuffer, Ops
from compute.schedule import Kernel, Copy, KNode


class _Devices:
  """Device names the compute layer uses: the queue API's device strings, canonicalized ('cpu' -> 'CPU')."""
  def __init__(self):
    self._default: str | None = None
    self._names: dict[str, str] = {}          # string given -> canonical name
    self._open: dict[str, HCQDevice] = {}     # canonical name -> the device opened for it

  @property
  def DEFAULT(self) -> str:
    if self._default is None: self._default = self.canonicalize(default_device_name())
    return self._default

  @DEFAULT.setter
  def DEFAULT(self, name: str) -> None: self._default = self.canonicalize(name)

  def canonicalize(self, name: str | None) -> str:
    if name is None: return self.DEFAULT
    if (canon := self._names.get(name)) is not None: return canon
    if not isinstance(name, str): raise TypeError(f"a device is a string like 'CPU' or 'MOCKPCI+AMD', not {name!r}")
    canon = self._names[name] = str(parse_device(name.upper()))
    return canon

  def __getitem__(self, name: str) -> HCQDevice:
    canon = self.canonicalize(name)
    if (dev := self._open.get(canon)) is None or dev.closed: dev = self._open[canon] = open_device(canon)
    return dev


Device = _Devices()

# --- buffers
# free buffers by device object (a device closed and opened again under the same name starts with an empty pool)
_pool: weakref.WeakKeyDictionary[HCQDevice, dict[int, list[tuple[HCQBuffer, int]]]] = weakref.WeakKeyDictionary()


def _free_list(dev: HCQDevice, nbytes: int) -> list[tuple[HCQBuffer, int]]:
  return _pool.setdefault(dev, defaultdict(list))[nbytes]


def _release(buf: HCQBuffer) -> None:
  dev = buf.device
  if dev.closed: return
  _free_list(dev, buf.size).append((buf, dev.timeline_value - 1))   # reusable once the timeline reaches this


class Buffer:
  """Device memory for one realized tensor, from the device's pool; back to the pool when collected."""
  def __init__(self, device: str, nbytes: int):
    self.device, self.nbytes = device, nbytes
    dev = Device[device]
    free = _free_list(dev, nbytes)
    hit = next((i for i, (_, ready) in enumerate(free) if dev.timeline.value >= ready), None)
    if hit is not None: self.hcq = free.pop(hit)[0]
    else:
      try: self.hcq = dev.alloc(nbytes)
      except MemoryError:
        for entries in _pool.get(dev, {}).values():
          for b, _ in entries: b.free()
          entries.clear()
        self.hcq = dev.alloc(nbytes)
    weakref.finalize(self, _release, self.hcq)
    if Capture.active is not None: Capture.active.made.add(id(self))

  @classmethod
  def over(cls, device: str, hcq: HCQBuffer) -> Buffer:
    """A Buffer over memory its caller owns (compute.distributed's work and landing buffers): not from the pool, and
    not returned to it."""
    self = cls.__new__(cls)
    self.device, self.nbytes, self.hcq = device, hcq.size, hcq
    return self

  def __repr__(self) -> str: return f"<Buffer {self.nbytes} B on {self.device}>"


def _storage(dtype: DType):
  return np.uint8 if dtype is dtypes.bool else np.uint16 if dtype is dtypes.bfloat16 else dtype.np


def buffer_from_numpy(arr: np.ndarray, dtype: DType, device: str) -> Buffer:
  if dtype is dtypes.bfloat16:   # round to nearest even, keep the top 16 bits
    u = np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32)
    data = ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    data = np.where(np.isnan(arr), np.uint16(0x7fc0), data)
  else: data = np.ascontiguousarray(arr, dtype=_storage(dtype))
  buf = Buffer(device, data.nbytes)
  if data.nbytes: buf.hcq.copyin(data.reshape(-1).view(np.uint8).data)
  return buf


def buffer_to_numpy(buf: Buffer, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
  if Capture.active is not None: Capture.active.host_read(shape, dtype)
  raw = np.empty(shape, _storage(dtype))
  if raw.nbytes: buf.hcq.copyout(raw.reshape(-1).view(np.uint8).data)   # straight into the array numpy gets
  if dtype is dtypes.bfloat16: return (raw.astype(np.uint32) << 16).view(np.float32)
  return raw.astype(np.bool_) if dtype is dtypes.bool else raw


# --- kernels
_programs: dict[tuple, tuple[HCQProgram, object]] = {}
stats = {"kernels_launched": 0, "programs_built": 0}
COMPILE_NOTICE_S = float(os.environ.get("HCQ_COMPILE_NOTICE_S", 1.0))   # compiles slower than this print a notice


def kernel_key(k: Kernel) -> tuple:
  """Structural identity of a kernel (same key -> same source), so rendering happens once per shape of work."""
  memo: dict[int, tuple] = {}
  def key(n: KNode) -> tuple:
    if id(n) not in memo: memo[id(n)] = (n.op, n.dtype.name, n.arg, tuple(key(s) for s in n.srcs))
    return memo[id(n)]
  return (k.device, k.out_shape, k.full_shape, tuple(b.dtype.name for b in k.bufs), key(k.root))


def get_program(k: Kernel):
  """(program, rendered kernel) for `k`: from its cached schedule (k.cache), else by structure, else rendered and built."""
  dev = Device[k.device]
  if (hit := k.cache.get("program")) is not None and hit[0].device is dev: return hit
  key = kernel_key(k)
  if key not in _programs or _programs[key][0].device is not dev:   # new, or built for a device since closed
    spec = Dialect.of(dev.compiler.language, k.device).render(k, getattr(dev, "vector_registers", None))
    t0, built = time.perf_counter(), dev.compiler.compiled
    _programs[key] = (dev.program(spec.name, dev.compiler.compile(spec.src)), spec)
    if (took := time.perf_counter() - t0) > COMPILE_NOTICE_S and dev.compiler.compiled > built:
      print(f"compute: compiling kernel {spec.name} for {k.device} took {took:.1f} s; the result is cached on disk, so the "
            "next run loads it", file=sys.stderr)
    stats["programs_built"] += 1
  k.cache["program"] = _programs[key]
  return _programs[key]


def _mark_realized(lb: LazyBuffer, buf: Buffer) -> None:
  lb.buffer, lb.op, lb.srcs, lb.arg, lb.st = buf, Ops.BUFFER, (), None, None


def _launch(q: HCQQueue, launches: list[tuple]) -> None:
  for _, prg, bufs, spec in launches:
    q.exec(prg, prg.fill_kernargs(bufs, (), spec.global_size, spec.local_size), spec.global_size, spec.local_size)


def _replacements(g: Graph, launches: list[tuple]) -> dict[HCQBuffer, HCQBuffer] | None:
  """The recorded buffers of `g` mapped to those of `launches`; None if the two bind buffers differently."""
  replace: dict[HCQBuffer, HCQBuffer] = {}
  for st, (_, _, bufs, _) in zip(g.steps, launches):
    for old, new in zip(st.bufs, bufs):   # type: ignore[union-attr]  # these graphs hold launches only
      if replace.setdefault(old, new) is not new: return None
  return replace


def _submit(dev: HCQDevice, launches: list[tuple[Kernel, HCQProgram, list[HCQBuffer], Program]]) -> None:
  """One ordered submission of `launches` on `dev`: the replay of the Graph of this run of kernels (kept with the
  cached schedule's first kernel), made on first use."""
  if profile.enabled():
    dev.ordered_submit(dev.compute_queue(), lambda q: _launch(q, launches))
    return
  graphs = launches[0][0].cache.setdefault("graphs", {})
  key = tuple(id(k.cache) for k, *_ in launches)
  if (g := graphs.get(key)) is not None and g.steps[0].prg.device is dev and (replace := _replacements(g, launches)) is not None:
    g(replace=replace)
    return
  g = graphs[key] = Graph(dev)   # new, for a device since reopened, or binding buffers otherwise: record anew
  for _, prg, bufs, spec in launches: g.exec(prg, *bufs, global_size=spec.global_size, local_size=spec.local_size)
  g()


class Capture:
  """Collects what run_schedule runs (for compute.jit): launches as (program, buffers, global size, local size), copies as
  (dest, src); the runtime Buffers they use stay referenced by it. Reading tensor data on the host is an error. Tensors
  updated in place whose old value was computed before the capture began are noted (`outside`)."""
  active: Capture | None = None

  def __init__(self, what: str):
    self.what = what
    self.steps: list[tuple] = []
    self.buffers: list[Buffer] = []
    self.outside: list = []
    self.made: set[int] = set()   # ids of the Buffers made while capturing

  def updated(self, t, old: LazyBuffer) -> None:
    """Tensor `t` (of the tensor layer) is updated in place; its value was `old`."""
    if old.base.realized and id(old.base.buffer) not in self.made: self.outside.append(t)

  def __enter__(self) -> Capture:
    if Capture.active is not None: raise RuntimeError(f"cannot capture {self.what} while capturing {Capture.active.what}")
    Capture.active = self
    return self

  def __exit__(self, *exc) -> None: Capture.active = None

  def host_read(self, shape: tuple[int, ...], dtype: DType) -> None:
    raise CaptureError(f"cannot capture {self.what}: it reads a {dtype.name} tensor of shape {shape} on the host "
                       "(.numpy()/.item()/.tolist()/...) while being captured; what it does next may depend on the values "
                       "read, which a replay would not read again. Read results outside the captured function, or return them")


class CaptureError(RuntimeError):
  """A function cannot be captured for replay; the message says why."""


def run_schedule(items: list[Kernel | Copy]) -> None:
  pending: dict[str, list[tuple]] = {}   # per device: the launches of its next compute-queue submission
  cap = Capture.active

  def flush() -> None:
    for dn, launches in pending.items(): _submit(Device[dn], launches)
    pending.clear()

  for it in items:
    if isinstance(it, Copy):
      flush()
      dest = Buffer(it.dest.device, it.src.buffer.nbytes)
      if dest.nbytes: it.src.buffer.hcq.transfer(dest.hcq)
      if cap is not None and dest.nbytes:
        cap.steps.append(("copy", dest.hcq, it.src.buffer.hcq))
        cap.buffers += [dest, it.src.buffer]
      _mark_realized(it.dest, dest)
      continue
    out = it.bufs[0]
    buf = Buffer(it.device, out.size * out.dtype.itemsize)
    if out.size:
      prg, spec = get_program(it)
      bufs = [buf.hcq] + [b.buffer.hcq.view(o, b.buffer.hcq.size - o) if o else b.buffer.hcq for b, o in zip(it.bufs[1:], it.offsets[1:])]
      # no memory_barrier between kernels: each launch's own commands make earlier results visible to it
      pending.setdefault(it.device, []).append((it, prg, bufs, spec))
      stats["kernels_launched"] += 1
      if cap is not None:
        cap.steps.append(("exec", prg, bufs, spec.global_size, spec.local_size))
        cap.buffers += [buf] + [b.buffer for b in it.bufs[1:]]
    _mark_realized(out, buf)
  flush()
