"""Indexing like numpy and PyTorch (a mixin of Tensor): basic indexing (ints, slices, None, ...) makes views;
integer tensors and lists (gather, numpy's broadcasting and placement rules for several of them), boolean masks,
__setitem__, gather, scatter, index_select and masked_fill build new values.

An element picked by an index tensor is a one-hot selection over the indexed dim(s), compare-and-sum inside one fused
kernel: no data-dependent addressing, every device runs it, and gradients flow through it. Out-of-range indices are an
IndexError, like PyTorch on the CPU: an index tensor's range is known without a device read when it came from host data
or arange, else it is read back (one small kernel). A boolean mask is read back too (its count sets the result shape).
"""
from __future__ import annotations
from math import prod
from typing import Self, cast
import numpy as np
from compute.dtypes import dtypes
from compute.core import TensorCore, known_range
from compute.lazy import Ops
from compute.shape import broadcast_shape

def _index_dtype(n: int):
  return dtypes.int32 if n <= dtypes.int32.max else dtypes.int64


class IndexingOps(TensorCore):
  __slots__ = ()

  def _int_range(self) -> tuple[int, int]:
    """(min, max) of a non-empty integer tensor."""
    lb = self.lazydata
    if (r := known_range(lb.base)) is not None:
      return (min(r[0], 0), max(r[1], 0)) if lb.op is Ops.VIEW and any(v.valid or v.empty for v in lb.tracker.views) else r
    if lb.is_const(): return int(lb.base.arg), int(lb.base.arg)
    lo, hi = type(self).stack([self.min(), self.max()]).numpy().tolist()
    return int(lo), int(hi)

  def _as_index(self, i) -> Self:
    """A list, numpy array or tensor used as an index: an integer (int32/int64) or bool tensor on this device."""
    if isinstance(i, TensorCore): t = cast(Self, i)
    else: t = type(self)(i if np.size(i) else np.zeros(np.shape(i), np.int32), device=self.device)
    if t.dtype.is_float: raise IndexError(f"tensors used as indices must be integer or bool tensors, got {t.dtype.name}")
    if t.device != self.device: raise IndexError(f"an index tensor on {t.device} cannot index a tensor on {self.device}")
    if t.dtype in (dtypes.uint8, dtypes.int8): return t.cast(dtypes.int32)
    return t.cast(dtypes.int64) if t.dtype is dtypes.uint32 else t

  def _checked(self, index: Self, dim: int, negative: bool) -> Self:
    """`index` into dim `dim` after a range check (IndexError naming the index); negatives count from the end
    where `negative` (tensor indexing), else are an error (gather, scatter, index_select, as in PyTorch)."""
    n = self.shape[dim]
    if index.numel() == 0: return index
    lo, hi = index._int_range()
    bad = hi if hi >= n else lo if lo < (-n if negative else 0) else None
    if bad is not None: raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {n}")
    return (index < 0)._select(index + n, index) if negative and lo < 0 else index

  def _take(self, dim: int, index: Self) -> Self:
    """self with dim `dim` replaced by index's dims: out[..., i, ...] = self[..., index[i], ...] (indices in range)."""
    n, pre, post = self.shape[dim], self.shape[:dim], self.shape[dim + 1:]
    hit = index.reshape(index.shape + (1,)) == type(self).arange(n, dtype=index.dtype, device=self.device)
    hit = hit.reshape((1,) * len(pre) + hit.shape + (1,) * len(post))
    picked = hit._select(self.reshape(pre + (1,) * index.ndim + (n,) + post), 0)
    out = picked.sum(len(pre) + index.ndim, dtype=picked.dtype)      # one element each: no widening to int64
    return out if out.dtype is self.dtype else out.cast(self.dtype)

  # --- basic indexing: ints, slices with any step, None
  def _slice(self, axis: int, start: int, stop: int, step: int) -> Self:
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

  def _unslice(self, axis: int, start: int, stop: int, step: int, n: int) -> Self:
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

  def _basic_bounds(self, idx: tuple) -> tuple[list[tuple[int, int, int]], tuple[int, ...]]:
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

  def _basic_get(self, idx: tuple) -> Self:
    """Basic indexing (ints, slices with any step, None) with a normalized index."""
    bounds, out_shape = self._basic_bounds(idx)
    t = self
    for axis, b in enumerate(bounds): t = t._slice(axis, *b)
    return t.reshape(out_shape)

  def _basic_put(self, idx: tuple, value: Self) -> Self:
    """A copy of self with `value` (shaped like self[idx], basic idx) in the place self[idx] reads."""
    bounds, _ = self._basic_bounds(idx)
    kept = tuple(len(range(*b)) for b in bounds)
    if 0 in kept: return self
    v, inside, whole = value.reshape(kept), value.ones_like(dtype=dtypes.bool).reshape(kept), True
    for axis, b in enumerate(bounds):
      if b != (0, self.shape[axis], 1):
        v, inside, whole = v._unslice(axis, *b, self.shape[axis]), inside._unslice(axis, *b, self.shape[axis]), False
    return v if whole else inside._select(v, self)

  # --- tensor[...]
  def _normalize(self, idx) -> tuple:
    """The index as a tuple with Ellipsis expanded and every dim covered: ints, slices, None and index tensors."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    out, used = [], 0
    for i in idx:
      if isinstance(i, (TensorCore, list, np.ndarray)):
        i = self._as_index(i)
        used += i.ndim if i.dtype is dtypes.bool else 1
      elif isinstance(i, (bool, np.bool_)) or not (i is None or i is Ellipsis or isinstance(i, (int, np.integer, slice))):
        raise TypeError(f"tensor index must be an int, slice, None, ..., a list or an integer or bool tensor, got {type(i).__name__}")
      elif isinstance(i, (int, np.integer)): i, used = int(i), used + 1
      elif isinstance(i, slice): used += 1
      out.append(i)
    if sum(i is Ellipsis for i in out) > 1: raise IndexError("an index can only have a single ellipsis")
    if used > self.ndim: raise IndexError(f"too many indices ({used}) for a tensor of shape {self.shape}")
    fill = [slice(None)] * (self.ndim - used)
    if (e := next((k for k, i in enumerate(out) if i is Ellipsis), None)) is not None:   # `is`: == on a tensor compares
      return tuple(out[:e] + fill + out[e + 1:])
    return tuple(out + fill)

  def _advanced(self, idx: tuple) -> tuple[Self, tuple, list[int], list[Self]]:
    """For an index with tensors: (view, its basic index, advanced dims of the view, their index tensors). The view
    is self[basic] where basic keeps the slices and Nones and takes whole dims for the rest; ints become 0-d index
    tensors and masks their nonzero() positions (numpy's rules)."""
    basic: list = []
    adv, arrays, dim = [], [], 0               # dim: position in the view
    axis = 0                                   # position in self
    for i in idx:
      if i is None: basic.append(None); dim += 1; continue
      if isinstance(i, slice): basic.append(i); dim += 1; axis += 1; continue
      if isinstance(i, TensorCore) and i.dtype is dtypes.bool:
        ms = self.shape[axis:axis + i.ndim]
        if i.shape != ms:
          raise IndexError(f"the boolean index of shape {i.shape} does not match the indexed tensor's dims {ms} (shape {self.shape})")
        for k, pos in enumerate(np.nonzero(i.numpy())):
          t = type(self)(pos.astype(_index_dtype(ms[k]).np), device=self.device)
          adv.append(dim); arrays.append(t)
          basic.append(slice(None)); dim += 1
        axis += i.ndim
        continue
      n = self.shape[axis]
      if isinstance(i, int):
        if not -n <= i < n: raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
        i = type(self).full((), i % n, dtype=dtypes.int32, device=self.device)
      else: i = self._checked(i, axis, negative=True)
      adv.append(dim); arrays.append(i)
      basic.append(slice(None)); dim += 1; axis += 1
    return self._basic_get(tuple(basic)), tuple(basic), adv, arrays

  def _flat_index(self, adv: list[int], arrays: list[Self]) -> tuple[Self, tuple[int, ...], Self, list[int]]:
    """(linear index over the advanced dims taken together (shape: the arrays broadcast), that shape, self with the
    advanced dims first and flattened into one, the remaining dims)."""
    shape = broadcast_shape(*(a.shape for a in arrays))
    sizes = [self.shape[d] for d in adv]
    dt = _index_dtype(prod(sizes))
    lin, stride = None, 1
    for a, n in zip(reversed(arrays), reversed(sizes)):
      term = a.cast(dt) * stride if stride != 1 else a.cast(dt)
      lin = term if lin is None else lin + term
      stride *= n
    rest = [d for d in range(self.ndim) if d not in adv]
    flat = self.permute(adv + rest).reshape((prod(sizes),) + tuple(self.shape[d] for d in rest))
    assert lin is not None   # the index has at least one array
    return lin._expand_to(shape), shape, flat, rest

  @staticmethod
  def _placement(adv: list[int], rest: list[int], nb: int) -> list[int] | None:
    """numpy's rule: advanced indices next to each other put their dims where they were; otherwise they go first.
    Returns the permutation from (advanced dims, rest) order to the result order, or None if it is the same."""
    if adv != list(range(adv[0], adv[0] + len(adv))) or adv[0] == 0: return None
    before = sum(1 for d in rest if d < adv[0])
    order = list(range(nb, nb + before)) + list(range(nb)) + list(range(nb + before, nb + len(rest)))
    return order

  def __getitem__(self, idx) -> Self:
    """numpy/PyTorch indexing. Ints, slices (any step), None and ... give a view; integer tensors/lists and bool masks
    give a new tensor (numpy's broadcasting and placement rules)."""
    idx = self._normalize(idx)
    if not any(isinstance(i, TensorCore) for i in idx): return self._viewed(self._basic_get(idx), ("getitem", idx))
    view, _, adv, arrays = self._advanced(idx)
    lin, shape, flat, rest = view._flat_index(adv, arrays)
    out = flat._take(0, lin)
    order = IndexingOps._placement(adv, rest, len(shape))
    return out if order is None else out.permute(order)

  def _value_for(self, value, shape: tuple[int, ...]) -> Self:
    """A value to store into a region of `shape`: this tensor's dtype (host data checked to fit), broadcast."""
    if not isinstance(value, TensorCore): value = type(self)(value, device=self.device, dtype=self.dtype)
    elif value.device != self.device: raise RuntimeError(f"cannot store a tensor on {value.device} into a tensor on {self.device}")
    try: fits = broadcast_shape(value.shape, shape) == shape
    except ValueError: fits = False
    if not fits: raise ValueError(f"a value of shape {value.shape} cannot be broadcast to the indexed shape {shape}")
    return value.cast(self.dtype)._expand_to(shape)

  def _put(self, idx, value) -> Self:
    """A copy of self with self[idx] = value (numpy semantics: broadcasting; repeated indices: the last one wins)."""
    idx = self._normalize(idx)
    if not any(isinstance(i, TensorCore) for i in idx):
      bounds, shape = self._basic_bounds(idx)
      return self._basic_put(idx, self._value_for(value, shape))
    view, basic, adv, arrays = self._advanced(idx)
    lin, shape, flat, rest = view._flat_index(adv, arrays)
    out_shape = shape + tuple(view.shape[d] for d in rest)
    order = IndexingOps._placement(adv, rest, len(shape))
    if order is not None: out_shape = tuple(out_shape[i] for i in order)
    v = self._value_for(value, out_shape)
    if order is not None: v = v.permute([order.index(i) for i in range(len(order))])
    m = prod(shape)
    if m == 0: return self
    v = v.reshape((m,) + flat.shape[1:])
    hits = lin.reshape(m, 1) == type(self).arange(flat.shape[0], dtype=lin.dtype, device=self.device)        # (m, N)
    last = hits._select(type(self).arange(m, device=self.device).reshape(m, 1), -1).amax(0)                # (N,): last writer
    new = (last >= 0).reshape(last.shape + (1,) * (flat.ndim - 1))._select(v._take(0, last.maximum(0)), flat)
    inv = [(adv + rest).index(d) for d in range(view.ndim)]
    new = new.reshape(tuple(view.shape[d] for d in adv + rest)).permute(inv)
    return self._basic_put(basic, new)

  # --- torch's index functions
  def _along(self, dim: int, index: Self, what: str) -> tuple[int, Self, Self]:
    """(dim, checked index, self cut to the index's extent on the other dims) for gather/scatter."""
    d, index = self._axis(dim), self._as_index(index)
    if index.ndim != self.ndim: raise ValueError(f"{what}: index must have {self.ndim} dims like the tensor, got shape {index.shape}")
    if any(a > b for k, (a, b) in enumerate(zip(index.shape, self.shape)) if k != d):
      raise ValueError(f"{what}: index of shape {index.shape} is larger than the tensor {self.shape} outside dim {d}")
    index = self._checked(index, d, negative=False)
    return d, index, self[tuple(slice(0, m) if k != d else slice(None) for k, m in enumerate(index.shape))]

  def _onehot_along(self, d: int, index: Self, n: int) -> Self:
    """index (shape I) -> I[:d] + (I[d], n) + I[d+1:]: whether index[..., i, ...] == j."""
    ar = type(self).arange(n, dtype=index.dtype, device=self.device).reshape((1,) * (d + 1) + (n,) + (1,) * (index.ndim - d - 1))
    return index.unsqueeze(d + 1) == ar

  def gather(self, dim: int, index) -> Self:
    """out[i][j][k] = self[index[i][j][k]][j][k] for dim 0 (and so on), like torch.gather; out has index's shape."""
    d, index, region = self._along(dim, index, "gather")
    if index.numel() == 0: return type(self).zeros(index.shape, dtype=self.dtype, device=self.device)
    return region._gather(d, index, self.shape[d])

  def _gather(self, d: int, index: Self, n: int) -> Self:
    """gather on a tensor already cut to the index's extent outside dim d (indices in range)."""
    picked = self._onehot_along(d, index, n)._select(self.unsqueeze(d), 0)
    out = picked.sum(d + 1, dtype=picked.dtype)
    return out if out.dtype is self.dtype else out.cast(self.dtype)

  def scatter(self, dim: int, index, src, reduce: str | None = None) -> Self:
    """A copy of self with self[index[i][j]][j] = src[i][j] for dim 0 (and so on), like torch.scatter; src may be a
    scalar. reduce="add" adds instead (repeated indices add up); without it a repeated index keeps the last value."""
    if reduce not in (None, "add"): raise ValueError(f"scatter reduce must be None or 'add', got {reduce!r}")
    d, index, region = self._along(dim, index, "scatter")
    if isinstance(src, TensorCore):
      if src.ndim != self.ndim or any(a > b for a, b in zip(index.shape, src.shape)):
        raise ValueError(f"scatter: src of shape {src.shape} is smaller than the index {index.shape}")
      src = src[tuple(slice(0, m) for m in index.shape)].cast(self.dtype)
    else: src = type(self).full(index.shape, src, dtype=self.dtype, device=self.device)
    if index.numel() == 0: return self
    hits = self._onehot_along(d, index, self.shape[d])           # I[:d] + (I[d], n) + I[d+1:]
    if reduce == "add": new = region + hits._select(src.unsqueeze(d + 1), 0).sum(d, dtype=self.dtype)
    else:
      pos = type(self).arange(index.shape[d], device=self.device).reshape((1,) * d + (index.shape[d], 1) + (1,) * (self.ndim - d - 1))
      last = hits._select(pos, -1).amax(d)                        # region's shape: the last source position per target
      new = (last >= 0)._select(src._gather(d, last.maximum(0), index.shape[d]), region)
    return self._basic_put(tuple(slice(0, m) if k != d else slice(None) for k, m in enumerate(index.shape)), new)

  def index_select(self, dim: int, index) -> Self:
    """The entries index[0], index[1], ... of dim `dim` (index 1-D), like torch.index_select."""
    d, index = self._axis(dim), self._as_index(index)
    if index.ndim > 1 or index.dtype is dtypes.bool:
      raise ValueError(f"index_select needs a 1-D integer index, got shape {index.shape} {index.dtype.name}")
    return self._take(d, self._checked(index.reshape(-1), d, negative=False))

  def masked_fill(self, mask: Self, value) -> Self:
    """value where mask (broadcast) is True, self elsewhere."""
    if mask.dtype is not dtypes.bool: raise TypeError(f"masked_fill needs a bool mask, got {mask.dtype.name}")
    out = mask._select(value, self)
    return out if out.dtype is self.dtype else out.cast(self.dtype)
