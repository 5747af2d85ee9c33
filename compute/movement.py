"""Tensor movement ops: reshape, permute, expand, pad, shrink, flip, basic slicing, cat/stack (a mixin of Tensor).
Shape errors raise here, at graph-build time, with the shapes in the message.

Views: what PyTorch returns as a view sharing its input's storage (reshape/view, permute, transpose, T, expand,
flatten, squeeze, unsqueeze, basic indexing, detach) is registered here as a view of its root tensor, with the steps
that make it from the root; an in-place change of the root or of any of its views is then seen by all of them
(compute/inplace.py). pad, flip, cat, repeat and advanced indexing make new tensors, as in PyTorch."""
from __future__ import annotations
import weakref
from math import prod
from typing import TYPE_CHECKING, Sequence
from compute import function
from compute.dtypes import dtypes
if TYPE_CHECKING: from compute.tensor import Tensor


def _tensors_and_dim(first, others: tuple, dim: int, what: str) -> tuple[list, int]:
  """cat/stack arguments: ([tensors], dim) or (tensor, *tensors, dim=)."""
  if isinstance(first, (list, tuple)):
    if len(others) > 1 or (others and not isinstance(others[0], int)):
      raise TypeError(f"{what}(tensors, dim=0) takes a sequence of tensors and a dim, got extra arguments {others!r}")
    ts, dim = list(first), others[0] if others else dim
  else: ts = [first, *others]
  if not ts: raise ValueError(f"{what} needs at least one tensor")
  if not all(isinstance(t, MovementOps) for t in ts):
    raise TypeError(f"{what} takes tensors, got {', '.join(type(t).__name__ for t in ts if not isinstance(t, MovementOps))}")
  return ts, dim


def _args(shape) -> tuple:
  return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)


class MovementOps:
  __slots__ = ()

  def _viewed(self: Tensor, out: Tensor, step: tuple) -> Tensor:
    """Register `out` (made from self by `step`, e.g. ("reshape", shape)) as a view of self's root tensor."""
    if out is self: return out
    root = self._base if self._base is not None else self
    steps = self._view + (step,)
    if root.requires_grad and not out.requires_grad and step[0] != "detach": steps += (("detach",),)   # made without gradients
    out._base, out._view = root, steps
    if root._views is None: root._views = weakref.WeakValueDictionary()   # by id: a WeakSet would compare tensors with ==
    root._views[id(out)] = out
    return out

  def _step(self: Tensor, step: tuple) -> Tensor:
    """Apply one recorded view step again (to the root's new value)."""
    kind, *arg = step
    return self.detach() if kind == "detach" else getattr(self, kind)(*arg) if kind != "getitem" else self[arg[0]]

  def reshape(self: Tensor, *shape) -> Tensor:
    shape = _args(shape)
    if any(not isinstance(s, int) for s in shape): raise TypeError(f"reshape takes ints, got {shape}")
    if shape.count(-1) > 1: raise ValueError(f"reshape {self.shape} to {shape}: only one -1 allowed")
    if -1 in shape:
      rest = prod(s for s in shape if s != -1)
      if rest == 0 or self.numel() % rest: raise ValueError(f"cannot reshape tensor of shape {self.shape} into {shape}")
      shape = tuple(self.numel() // rest if s == -1 else s for s in shape)
    if any(s < 0 for s in shape) or prod(shape) != self.numel():
      raise ValueError(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) into {shape}")
    return self if shape == self.shape else self._viewed(function.Reshape.apply(self, shape=shape), ("reshape", shape))
  view = reshape

  def permute(self: Tensor, *order) -> Tensor:
    order = tuple(self._axis(a) for a in _args(order))
    if sorted(order) != list(range(self.ndim)): raise ValueError(f"permute {order} is not a permutation of the {self.ndim} axes of {self.shape}")
    return self if order == tuple(range(self.ndim)) else self._viewed(function.Permute.apply(self, order=order), ("permute", order))

  def transpose(self: Tensor, dim0: int = 1, dim1: int = 0) -> Tensor:
    """Swap two dims (PyTorch's transpose; numpy's transpose(axes) is permute(axes))."""
    if not isinstance(dim0, int) or not isinstance(dim1, int):
      raise TypeError(f"transpose(dim0, dim1) swaps two dims, got {dim0!r}; use permute({dim0!r}) to reorder every dim")
    order = list(range(self.ndim))
    a, b = self._axis(dim0), self._axis(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)

  @property
  def T(self: Tensor) -> Tensor: return self.permute(tuple(reversed(range(self.ndim))))

  def expand(self: Tensor, *shape) -> Tensor:
    shape = _args(shape)
    if len(shape) < self.ndim: raise ValueError(f"cannot expand shape {self.shape} to {shape}: fewer dims")
    full = (1,) * (len(shape) - self.ndim) + self.shape
    new = tuple(f if s == -1 else s for s, f in zip(shape, full))
    if any(f != n and f != 1 for f, n in zip(full, new)): raise ValueError(f"cannot expand shape {self.shape} to {shape}")
    t = self.reshape(full)
    return t if new == t.shape else self._viewed(function.Expand.apply(t, shape=new), ("expand", new))

  def pad(self: Tensor, padding, value: float = 0.0) -> Tensor:
    """padding: ((before, after), ...) per dim from the first, or None for a dim; negative values crop."""
    if len(padding) > self.ndim: raise ValueError(f"pad {padding} has more entries than dims of {self.shape}")
    padding = [(0, 0) if p is None else tuple(p) for p in padding] + [(0, 0)] * (self.ndim - len(padding))
    if any(len(p) != 2 for p in padding): raise ValueError(f"pad needs (before, after) pairs, got {padding}")
    crop = tuple((max(0, -b), n - max(0, -a)) for n, (b, a) in zip(self.shape, padding))
    if any(e < s for s, e in crop): raise ValueError(f"pad {padding} crops more than the shape {self.shape} has")
    t = self.shrink(crop)
    pads = tuple((max(0, b), max(0, a)) for b, a in padding)
    if all(p == (0, 0) for p in pads): return t
    out = function.Pad.apply(t, pads=pads)
    if value == 0: return out
    inside = function.Pad.apply(t.ones_like(dtype=dtypes.bool), pads=pads)
    return inside.where(out, value)

  def shrink(self: Tensor, bounds) -> Tensor:
    """bounds: ((start, end), ...) per dim, or None to keep a dim whole."""
    bounds = tuple((0, n) if b is None else tuple(b) for b, n in zip(bounds, self.shape)) + tuple((0, n) for n in self.shape[len(bounds):])
    if any(not 0 <= s <= e <= n for (s, e), n in zip(bounds, self.shape)):
      raise ValueError(f"shrink {bounds} is outside the shape {self.shape}")
    return self if all(b == (0, n) for b, n in zip(bounds, self.shape)) else function.Shrink.apply(self, bounds=bounds)

  def flip(self: Tensor, *dims, axis=None) -> Tensor:
    """Reverse the order along dims: flip(0), flip(0, 1), flip([0, 1]) like PyTorch, or numpy's flip(axis=None) (every dim)."""
    if dims and axis is not None: raise TypeError("flip takes dims or numpy's axis=, not both")
    dims = _args(dims) if dims else tuple(range(self.ndim)) if axis is None else axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(self._axis(a) for a in dims)
    return function.Flip.apply(self, axes=axes) if axes and self.ndim else self

  def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._axis(start_dim), self._axis(end_dim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  def unsqueeze(self: Tensor, dim: int) -> Tensor:
    d = self._axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

  def squeeze(self: Tensor, dim: int | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(n for n in self.shape if n != 1))
    d = self._axis(dim)
    return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])

  def _window(self: Tensor, axis: int, k: int, stride: int = 1, dilation: int = 1) -> Tensor:
    """dim `axis` (n) -> (o, k): sliding windows of k elements, `stride` apart, taps `dilation` apart."""
    n = self.shape[axis]
    if dilation * (k - 1) + 1 > n:
      raise ValueError(f"window of {k} (dilation {dilation}) does not fit dim {axis} of size {n} in shape {self.shape}")
    return function.Window.apply(self, axis=axis, k=k, stride=stride, dilation=dilation)

  def _slice(self: Tensor, axis: int, start: int, stop: int, step: int) -> Tensor:
    """Elements start, start+step, ... (stop exclusive) along one axis; slice.indices() semantics."""
    n = len(range(start, stop, step))
    if n == 0: return self.shrink(tuple((0, 0) if i == axis else None for i in range(self.ndim)))
    t = self
    if step < 0:
      t = t.flip(axis)
      start, step = self.shape[axis] - 1 - start, -step
    span = (n - 1) * step + 1
    t = t.shrink(tuple((start, start + span) if i == axis else None for i in range(self.ndim)))
    if step == 1: return t
    # stride by padding to n*step, splitting into (n, step) and keeping column 0
    t = t.pad(tuple((0, n * step - span) if i == axis else None for i in range(self.ndim)))
    t = t.reshape(t.shape[:axis] + (n, step) + t.shape[axis + 1:])
    t = t.shrink(tuple((0, 1) if i == axis + 1 else None for i in range(t.ndim)))
    return t.reshape(t.shape[:axis + 1] + t.shape[axis + 2:])

  def _unslice(self: Tensor, axis: int, start: int, stop: int, step: int, n: int) -> Tensor:
    """The inverse of _slice: this tensor's elements along `axis` placed at start, start+step, ... of a dim of
    size n, zeros elsewhere."""
    c = self.shape[axis]
    t = self
    if step < 0: t, start, step = t.flip(axis), start + (c - 1) * step, -step
    span = (c - 1) * step + 1
    if step > 1:
      t = t.reshape(t.shape[:axis + 1] + (1,) + t.shape[axis + 1:])
      t = t.pad(tuple((0, step - 1) if i == axis + 1 else None for i in range(t.ndim)))
      t = t.reshape(t.shape[:axis] + (c * step,) + t.shape[axis + 2:])
      t = t.shrink(tuple((0, span) if i == axis else None for i in range(t.ndim)))
    return t.pad(tuple((start, n - start - span) if i == axis else None for i in range(t.ndim)))

  def _basic_bounds(self: Tensor, idx: tuple) -> tuple[list[tuple[int, int, int]], tuple[int, ...]]:
    """For a normalized basic index (ints, slices, None; one entry per dim plus the Nones): (start, stop, step) per
    dim of self, and the result's shape."""
    bounds, out_shape, axis = [], [], 0
    for i in idx:
      if i is None: out_shape.append(1); continue
      n = self.shape[axis]
      if isinstance(i, int):
        if not -n <= i < n: raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
        bounds.append((i % n, i % n + 1, 1))
      else:
        bounds.append(i.indices(n))
        out_shape.append(len(range(*bounds[-1])))
      axis += 1
    return bounds, tuple(out_shape)

  def _basic_get(self: Tensor, idx: tuple) -> Tensor:
    """Basic indexing (ints, slices with any step, None) with a normalized index."""
    bounds, out_shape = self._basic_bounds(idx)
    t = self
    for axis, b in enumerate(bounds): t = t._slice(axis, *b)
    return t.reshape(out_shape)

  def _basic_put(self: Tensor, idx: tuple, value: Tensor) -> Tensor:
    """A copy of self with `value` (shaped like self[idx], basic idx) in the place self[idx] reads."""
    bounds, _ = self._basic_bounds(idx)
    kept = tuple(len(range(*b)) for b in bounds)
    if 0 in kept: return self
    v, inside, whole = value.reshape(kept), value.ones_like(dtype=dtypes.bool).reshape(kept), True
    for axis, b in enumerate(bounds):
      if b != (0, self.shape[axis], 1):
        v, inside, whole = v._unslice(axis, *b, self.shape[axis]), inside._unslice(axis, *b, self.shape[axis]), False
    return v if whole else inside.where(v, self)

  def cat(self: Tensor | Sequence[Tensor], *others, dim: int = 0) -> Tensor:
    """Concatenate along `dim`: Tensor.cat([a, b, c], dim) like torch.cat, or a.cat(b, c, dim=dim)."""
    ts, d = _tensors_and_dim(self, others, dim, "cat")
    first = ts[0]
    d = first._axis(d)
    for t in ts:
      if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != d):
        raise ValueError(f"cat along dim {d} needs matching shapes elsewhere, got {[t.shape for t in ts]}")
    total, out, off = sum(t.shape[d] for t in ts), None, 0
    for t in ts:
      p = t.pad(tuple((off, total - off - t.shape[d]) if i == d else None for i in range(first.ndim)))
      out = p if out is None else out + p
      off += t.shape[d]
    return out

  def stack(self: Tensor | Sequence[Tensor], *others, dim: int = 0) -> Tensor:
    """Stack equal-shaped tensors along a new dim: Tensor.stack([a, b], dim) like torch.stack, or a.stack(b, dim=dim)."""
    ts, d = _tensors_and_dim(self, others, dim, "stack")
    if any(t.shape != ts[0].shape for t in ts): raise ValueError(f"stack needs equal shapes, got {[t.shape for t in ts]}")
    d = ts[0]._axis(d, ts[0].ndim + 1)
    return MovementOps.cat([t.unsqueeze(d) for t in ts], dim=d)

  def repeat(self: Tensor, *repeats) -> Tensor:
    repeats = _args(repeats)
    if len(repeats) < self.ndim: raise ValueError(f"repeat {repeats} has fewer entries than dims of {self.shape}")
    t = self.reshape((1,) * (len(repeats) - self.ndim) + self.shape)
    mid = tuple(x for n in t.shape for x in (1, n))
    big = tuple(x for r, n in zip(repeats, t.shape) for x in (r, n))
    return t.reshape(mid).expand(big).reshape(tuple(r * n for r, n in zip(repeats, t.shape)))
