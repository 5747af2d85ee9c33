"""Tensor movement ops: reshape, permute, expand, pad, shrink, flip, slicing, cat/stack (a mixin of Tensor).
Shape errors raise here, at graph-build time, with the shapes in the message."""
from __future__ import annotations
from math import prod
from typing import TYPE_CHECKING
from compute import function as F
from compute.dtypes import dtypes
if TYPE_CHECKING: from compute.tensor import Tensor


def _args(shape) -> tuple:
  return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)


class MovementOps:
  __slots__ = ()

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
    return self if shape == self.shape else F.Reshape.apply(self, shape=shape)
  view = reshape

  def permute(self: Tensor, *order) -> Tensor:
    order = tuple(self._axis(a) for a in _args(order))
    if sorted(order) != list(range(self.ndim)): raise ValueError(f"permute {order} is not a permutation of the {self.ndim} axes of {self.shape}")
    return self if order == tuple(range(self.ndim)) else F.Permute.apply(self, order=order)

  def transpose(self: Tensor, dim0: int = 1, dim1: int = 0) -> Tensor:
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
    return t if new == t.shape else F.Expand.apply(t, shape=new)

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
    out = F.Pad.apply(t, pads=pads)
    if value == 0: return out
    inside = F.Pad.apply(t.ones_like(dtype=dtypes.bool), pads=pads)
    return inside.where(out, value)

  def shrink(self: Tensor, bounds) -> Tensor:
    """bounds: ((start, end), ...) per dim, or None to keep a dim whole."""
    bounds = tuple((0, n) if b is None else tuple(b) for b, n in zip(bounds, self.shape)) + tuple((0, n) for n in self.shape[len(bounds):])
    if any(not 0 <= s <= e <= n for (s, e), n in zip(bounds, self.shape)):
      raise ValueError(f"shrink {bounds} is outside the shape {self.shape}")
    return self if all(b == (0, n) for b, n in zip(bounds, self.shape)) else F.Shrink.apply(self, bounds=bounds)

  def flip(self: Tensor, axis=None) -> Tensor:
    axes = tuple(range(self.ndim)) if axis is None else tuple(self._axis(a) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    return F.Flip.apply(self, axes=axes) if axes else self

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
    return F.Window.apply(self, axis=axis, k=k, stride=stride, dilation=dilation)

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

  def __getitem__(self: Tensor, idx) -> Tensor:
    """Basic indexing: ints, slices (any step), None and Ellipsis."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if sum(i is Ellipsis for i in idx) > 1: raise IndexError("an index can only have a single ellipsis")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise IndexError(f"too many indices ({n_real}) for a tensor of shape {self.shape}")
    if Ellipsis in idx:
      e = idx.index(Ellipsis)
      idx = idx[:e] + (slice(None),) * (self.ndim - n_real) + idx[e + 1:]
    idx = idx + (slice(None),) * (self.ndim - sum(1 for i in idx if i is not None))
    t, axis, out_shape = self, 0, []
    for i in idx:
      if i is None: out_shape.append(1); continue
      n = self.shape[axis]
      if isinstance(i, bool) or not isinstance(i, (int, slice)):
        raise TypeError(f"tensor index must be an int, slice, None or ..., got {type(i).__name__}")
      if isinstance(i, int):
        if not -n <= i < n: raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
        t = t._slice(axis, i % n, i % n + 1, 1)
      else:
        t = t._slice(axis, *i.indices(n))
        out_shape.append(t.shape[axis])
      axis += 1
    return t.reshape(tuple(out_shape))

  def cat(self: Tensor, *others: Tensor, dim: int = 0) -> Tensor:
    ts = (self, *others)
    d = self._axis(dim)
    for t in ts:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise ValueError(f"cat along dim {d} needs matching shapes elsewhere, got {[t.shape for t in ts]}")
    total, out, off = sum(t.shape[d] for t in ts), None, 0
    for t in ts:
      p = t.pad(tuple((off, total - off - t.shape[d]) if i == d else None for i in range(self.ndim)))
      out = p if out is None else out + p
      off += t.shape[d]
    return out

  def stack(self: Tensor, *others: Tensor, dim: int = 0) -> Tensor:
    ts = (self, *others)
    if any(t.shape != self.shape for t in ts): raise ValueError(f"stack needs equal shapes, got {[t.shape for t in ts]}")
    d = self._axis(dim, self.ndim + 1)
    return ts[0].unsqueeze(d).cat(*(t.unsqueeze(d) for t in ts[1:]), dim=d)

  def repeat(self: Tensor, *repeats) -> Tensor:
    repeats = _args(repeats)
    if len(repeats) < self.ndim: raise ValueError(f"repeat {repeats} has fewer entries than dims of {self.shape}")
    t = self.reshape((1,) * (len(repeats) - self.ndim) + self.shape)
    mid = tuple(x for n in t.shape for x in (1, n))
    big = tuple(x for r, n in zip(repeats, t.shape) for x in (r, n))
    return t.reshape(mid).expand(big).reshape(tuple(r * n for r, n in zip(repeats, t.shape)))
