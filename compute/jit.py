"""compute.jit: capture the kernels and copies of a function's first call, replay them on later calls, as
torch.cuda.graphs does (and torch.compile's "reduce-overhead" mode): no graph building, scheduling or launch encoding
per call, and one submission per device.

  @jit
  def step(x, w): return (x @ w).relu().sum(axis=1)
  y = step(x1, w)      # runs as usual and captures what ran into a queue-API Graph (drivers.hcq.Graph)
  y = step(x2, w)      # replays it with x2's buffer in x1's place and new buffers for the results

A call with tensors of other shapes, dtypes or devices (or other non-tensor arguments) is captured anew; up to
MAX_CAPTURES signatures are kept. Tensors the function reads that are not its arguments (weights, constants made
inside) are read from the memory they had at capture, as a CUDA graph reads its static addresses; so are random
tensors made inside. An update of such a tensor between calls (w.assign(...) gives w new memory) is not seen by
replays: pass tensors that change as arguments. The function's effects are its results and the in-place updates of its arguments (`x += 1`,
`w.assign(...)`), which every replay makes again; updating another tensor made before the call (a weight it does not
take as an argument) is a CaptureError: pass such tensors as arguments. Replayed results carry no autograd history:
call backward() inside the function (as a training step does). A function that reads tensor data on the host
while being captured (.numpy(), .item(), ...), or returns anything but tensors (alone, or in tuples, lists and dicts),
cannot be captured and raises CaptureError saying why.
"""
from __future__ import annotations
import functools
from collections import OrderedDict
from typing import Any, Callable
from drivers.hcq import Graph
from compute.lazy import LazyBuffer, Ops
from compute.runtime import Buffer, Capture, CaptureError
from compute.tensor import Tensor

MAX_CAPTURES = 16


def _flatten(x: Any, tensors: list[Tensor], leaf: Callable[[Any], Any]) -> Any:
  """The structure of x (tuples, lists, dicts) with each Tensor appended to `tensors` and standing as ("T", shape,
  dtype, device), and every other leaf as leaf(x): a cache key, and what _rebuild turns back into the value."""
  if isinstance(x, Tensor):
    tensors.append(x)
    return ("T", x.shape, x.dtype, x.device)
  if isinstance(x, (tuple, list)): return (type(x).__name__, tuple(_flatten(v, tensors, leaf) for v in x))
  if isinstance(x, dict): return ("dict", tuple((k, _flatten(v, tensors, leaf)) for k, v in x.items()))
  return leaf(x)


def _argument(what: str) -> Callable[[Any], Any]:
  def leaf(x: Any) -> Any:
    try: hash(x)
    except TypeError: raise CaptureError(f"cannot capture {what}: argument {x!r} is neither a tensor nor hashable") from None
    return ("V", type(x), x)
  return leaf


def _result(what: str) -> Callable[[Any], Any]:
  def leaf(x: Any) -> Any:
    raise CaptureError(f"cannot capture {what}: it returns {type(x).__name__} {x!r:.60}; a captured function returns "
                       "tensors (alone, or in tuples, lists and dicts), which a replay fills anew")
  return leaf


def _rebuild(spec: Any, tensors) -> Any:
  kind = spec[0]
  if kind == "T": return next(tensors)
  if kind in ("tuple", "list"): return (tuple if kind == "tuple" else list)(_rebuild(s, tensors) for s in spec[1])
  if kind == "dict": return {k: _rebuild(s, tensors) for k, s in spec[1]}
  return spec[2]


def _buffer_view(t: Tensor) -> Tensor | None:
  """`t` as a tensor over one realized buffer in row-major order (what a replay swaps), if it is one already."""
  lb = t.lazydata
  if lb.op is Ops.BUFFER: return t
  if lb.op is Ops.VIEW and lb.base.realized and lb.tracker.is_reshape_of(lb.base.shape):
    return Tensor._from_lazy(LazyBuffer.from_buffer(lb.base.buffer, lb.shape, lb.dtype), t.requires_grad)
  return None


def _plain(ts: list[Tensor]) -> list[Tensor]:
  """The tensors as tensors over realized buffers in row-major order, realized together (one schedule)."""
  ts = [t.contiguous() if (v := _buffer_view(t)) is None else v for t in ts]
  Tensor.realize_all(*ts)
  return ts


class _Captured:
  """One signature's capture: the graph, the recorded buffers of the inputs, and how each result is made:
  ("input", index) a result that is an input; ("made", (buffer, device, nbytes)) one the graph writes, into a new buffer
  per replay; ("same", runtime buffer) one the function did not write (it returns the same data every call).
  The results past the function's own are the new values of the arguments it updated in place (`updated`: which)."""
  def __init__(self, graph: Graph, inputs: list, out_spec: Any, outs: list[tuple[str, Any, tuple, Any]], updated: list[int],
               keep: list):
    self.graph, self.inputs, self.out_spec, self.outs, self.updated, self.keep = graph, inputs, out_spec, outs, updated, keep

  def __call__(self, args: list[Tensor], inputs: list[Tensor]) -> Any:
    bufs = [t.lazydata.buffer for t in inputs]
    replace = dict(zip(self.inputs, (b.hcq for b in bufs)))
    made: dict = {}
    results = []
    for kind, ref, shape, dtype in self.outs:
      if kind == "input": nb = bufs[ref]
      elif kind == "same": nb = ref
      elif (nb := made.get(ref[0])) is None:
        nb = made[ref[0]] = Buffer(ref[1], ref[2])
        replace[ref[0]] = nb.hcq
      results.append(Tensor._from_lazy(LazyBuffer.from_buffer(nb, shape, dtype)))
    self.graph(replace=replace)
    for i, new in zip(self.updated, results[len(results) - len(self.updated):]): args[i].assign(new)
    return _rebuild(self.out_spec, iter(results))


class JitFunction:
  """A function whose calls replay what its first call (per signature) ran; see the module docstring."""
  def __init__(self, fn: Callable):
    self.fn = fn
    self.captures: OrderedDict[tuple, Any] = OrderedDict()
    functools.update_wrapper(self, fn)

  @property
  def what(self) -> str: return f"{getattr(self.fn, '__qualname__', 'function')}()"

  def __call__(self, *args, **kwargs) -> Any:
    tensors: list[Tensor] = []
    if not kwargs and all(isinstance(a, Tensor) for a in args):   # the usual call: tensors only, the key made directly
      tensors, key = list(args), tuple((a.shape, a.dtype, a.device) for a in args)
    else: key = _flatten((args, kwargs), tensors, _argument(self.what))
    inputs = _plain(tensors)
    if (cap := self.captures.get(key)) is not None:
      self.captures.move_to_end(key)
      return cap(tensors, inputs)
    out, cap = self._capture(_flatten((args, kwargs), [], _argument(self.what)), tensors, inputs)
    self.captures[key] = cap
    if len(self.captures) > MAX_CAPTURES: self.captures.popitem(last=False)
    return out

  def _capture(self, spec: Any, tensors: list[Tensor], inputs: list[Tensor]) -> tuple[Any, _Captured]:
    in_bufs, before = [t.lazydata.buffer for t in inputs], [t.lazydata for t in inputs]
    with Capture(self.what) as cap:
      args, kwargs = _rebuild(spec, iter(inputs))
      outs: list[Tensor] = []
      out_spec = _flatten(self.fn(*args, **kwargs), outs, _result(self.what))
      # arguments updated in place (x += 1, x.assign(...)) are results too: a replay updates them the same way
      updated = [i for i, (t, lb) in enumerate(zip(inputs, before)) if t.lazydata is not lb]
      if (other := next((t for t in cap.outside if not any(t is a for a in inputs)), None)) is not None:
        raise CaptureError(f"cannot capture {self.what}: it updates a {other.dtype.name} tensor of shape {other.shape} in place "
                           "that is not one of its arguments (a weight it reads from outside?); a replay would not update "
                           "it. Pass that tensor as an argument")
      outs = _plain(outs + [inputs[i] for i in updated])
    for i in updated:
      if tensors[i] is not inputs[i]: tensors[i].assign(outs[len(outs) - len(updated) + updated.index(i)])
    g = Graph()
    written = set()
    for st in cap.steps:
      if st[0] == "exec": g.exec(st[1], *st[2], global_size=st[3], local_size=st[4])
      else: g.copy(st[1], st[2])
      written.add(st[2][0] if st[0] == "exec" else st[1])
    index = {id(b): i for i, b in enumerate(in_bufs)}
    info: list[tuple] = []
    for o in outs:
      b = o.lazydata.buffer
      if id(b) in index: info.append(("input", index[id(b)], o.shape, o.dtype))
      elif b.hcq in written: info.append(("made", (b.hcq, b.device, b.nbytes), o.shape, o.dtype))
      else: info.append(("same", b, o.shape, o.dtype))
    # the graph keeps what its steps use except the inputs and the results it writes, which every replay replaces
    swapped = {id(b) for b in in_bufs} | {id(o.lazydata.buffer) for o in outs}
    keep = [b for b in cap.buffers if id(b) not in swapped]
    return _rebuild(out_spec, iter(outs)), _Captured(g, [b.hcq for b in in_bufs], out_spec, info, updated, keep)


def jit(fn: Callable) -> JitFunction:
  """Capture `fn`'s kernels and copies on its first call (per signature of tensor shapes, dtypes and devices) and
  replay them on later calls. Use as `@jit` or `jit(fn)`."""
  return JitFunction(fn)
