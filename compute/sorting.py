"""sort, argsort, topk, kthvalue, median, mode, unique and searchsorted (a mixin of Tensor), by ranks: an element's rank
along the dim is how many elements sort before it (equal ones by position, so the sort is stable), and the r-th output
is the element of rank r (a one-hot selection, so values carry gradients). Each is two fused kernels of n^2 work per row of n: meant for the sizes
tensors are sorted at inside models (tens to a few thousand per row). NaN sorts as the largest value, like PyTorch."""
from __future__ import annotations
import math
from typing import Self
from compute.args import torch_args
from compute.dtypes import dtypes
from compute.core import TensorCore, ValuesIndices


class SortingOps(TensorCore):
  __slots__ = ()

  def _rank(self, d: int, descending: bool) -> Self:
    """int32 rank of every element along dim d."""
    xi, xj = self.unsqueeze(d + 1), self.unsqueeze(d)    # (..., n, 1, ...) and (..., 1, n, ...): i ranks against j
    if self.dtype is dtypes.bool: xi, xj = xi.cast(dtypes.int32), xj.cast(dtypes.int32)
    before = xj > xi if descending else xj < xi
    tie = xj == xi
    if self.dtype.is_float:
      ni, nj = xi != xi, xj != xj
      before = before | ((nj & ~ni) if descending else (ni & ~nj))
      tie = tie | (ni & nj)
    n = self.shape[d]
    pos = type(self).arange(n, device=self.device)
    earlier = pos.reshape(1, n) < pos.reshape(n, 1)       # [i, j]: j < i
    earlier = earlier.reshape((1,) * d + (n, n) + (1,) * (self.ndim - d - 1))
    return (before | (tie & earlier)).sum(d + 1, dtype=dtypes.int32)

  def _by_rank(self, d: int, rank: Self, k: int) -> ValuesIndices[Self]:
    """The elements of rank 0..k-1 along d, and their positions."""
    r = type(self).arange(k, device=self.device).reshape((1,) * d + (k, 1) + (1,) * (self.ndim - d - 1))
    return self._at_rank(d, rank.unsqueeze(d), r, d + 1)

  def _at_rank(self, d: int, rank: Self, r, at: int) -> ValuesIndices[Self]:
    """The elements whose rank (along dim d of self, dim `at` of rank) equals r, and their positions (int64)."""
    hit = rank == r
    n, xs = self.shape[d], self if at == d else self.unsqueeze(d)
    pos = type(self).arange(n, device=self.device).reshape((1,) * at + (n,) + (1,) * (hit.ndim - at - 1))
    picked = hit._select(xs, 0)
    return ValuesIndices(picked.sum(at, dtype=picked.dtype).cast(self.dtype), hit._select(pos, 0).sum(at, dtype=dtypes.int64))

  def _empty_along(self, d: int, k: int) -> ValuesIndices[Self]:
    shape = self.shape[:d] + (k,) + self.shape[d + 1:]
    zeros = lambda dt: type(self).zeros(shape, dtype=dt, device=self.device)
    return ValuesIndices(zeros(self.dtype), zeros(dtypes.int64))

  @torch_args
  def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices[Self]:
    """(values, indices) sorted along dim, like torch.sort; always stable (equal elements keep their order)."""
    if self.ndim == 0: return ValuesIndices(self, type(self).zeros((), dtype=dtypes.int64, device=self.device))
    d = self._axis(dim)
    if self.shape[d] == 0: return self._empty_along(d, 0)
    return self._by_rank(d, self._rank(d, descending), self.shape[d])

  @torch_args
  def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Self:
    return self.sort(dim, descending, stable).indices

  @torch_args
  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices[Self]:
    """The k largest (or smallest) along dim and their indices, like torch.topk (always in sorted order)."""
    d = self._axis(dim)
    n = self.shape[d] if self.ndim else 1
    if not isinstance(k, int) or not 0 <= k <= n: raise ValueError(f"topk: k={k!r} is out of range for dim {d} of size {n}")
    if self.ndim == 0: return self.sort()
    if k == 0: return self._empty_along(d, 0)
    return self._by_rank(d, self._rank(d, largest), k)

  @torch_args
  def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices[Self]:
    """The k-th smallest element (k from 1) along dim and its index, like torch.kthvalue."""
    d = self._axis(dim)
    n = self.shape[d] if self.ndim else 1
    if not isinstance(k, int) or not 1 <= k <= n: raise ValueError(f"kthvalue: k={k!r} is out of range 1..{n} for dim {d}")
    if self.ndim == 0: return self.sort()
    return self._kept(self._at_rank(d, self._rank(d, False), k - 1, d), d, keepdim)

  def _kept(self, vi: ValuesIndices[Self], d: int, keepdim: bool) -> ValuesIndices[Self]:
    """Values and indices reduced over dim d, with d kept (size 1) if keepdim."""
    return ValuesIndices(vi.values.unsqueeze(d), vi.indices.unsqueeze(d)) if keepdim else vi

  @torch_args
  def median(self, dim: int | None = None, keepdim: bool = False):
    """median(): the lower median of all elements (0-d); median(dim): (values, indices) along dim. A NaN makes the
    median NaN (the first NaN's index), like PyTorch."""
    if dim is None: return self.flatten().median(0).values if self.numel() else type(self).full((), math.nan, device=self.device)
    d = self._axis(dim)
    if self.ndim == 0: return self.sort()
    self._nonempty(d, "median")
    n = self.shape[d]
    r = (n - 1) // 2
    if self.dtype.is_float:    # the first NaN has the rank of the count of numbers
      finite = (self == self).sum(d, keepdim=True, dtype=dtypes.int32)
      r = (finite < n)._select(finite, r)
    return self._kept(self._at_rank(d, self._rank(d, False), r, d), d, keepdim)

  @torch_args
  def mode(self, dim: int = -1, keepdim: bool = False) -> ValuesIndices[Self]:
    """The most frequent value along dim (the smallest of equally frequent ones) and the index of its last occurrence,
    like PyTorch on the CPU. n^2 work per row of n."""
    d = self._axis(dim)
    if self.ndim == 0: return self.sort()
    self._nonempty(d, "mode")
    count = (self.unsqueeze(d + 1) == self.unsqueeze(d)).sum(d + 1, dtype=dtypes.int32)
    top = count == count.amax(d, keepdim=True)
    big = True if self.dtype is dtypes.bool else math.inf if self.dtype.is_float else self.dtype.max
    value = top._select(self, big).amin(d, keepdim=True)
    n = self.shape[d]
    pos = type(self).arange(n, device=self.device).reshape(tuple(n if i == d else 1 for i in range(self.ndim)))
    index = (self == value)._select(pos, -1).amax(d, keepdim=keepdim).cast(dtypes.int64)
    return ValuesIndices(value.cast(self.dtype) if keepdim else value.cast(self.dtype).squeeze(d), index)

  def unique(self, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None):
    """The distinct elements in ascending order (always sorted), with the index of each element's value in them
    (return_inverse, self's shape) and how often each occurs (return_counts), like torch.unique; with dim, the distinct
    slices along dim in lexicographic order (inverse and counts per slice). The result's length depends on the data:
    it is read back from the device (one small transfer)."""
    if dim is not None: return self._unique_dim(self._axis(dim), return_inverse, return_counts)
    x = self.flatten()
    if x.numel() == 0: vals = x
    else:
      s = x.sort().values
      new = (s[1:] != s[:-1]).pad(((1, 0),), value=True)
      vals = s[new]
    if not return_inverse and not return_counts: return vals
    hit = x.reshape(-1, 1) == vals.reshape(1, -1)                              # (n, u)
    out = [vals]
    if return_inverse:
      out.append(hit._select(type(self).arange(vals.numel(), device=self.device), 0).sum(1).reshape(self.shape))
    if return_counts: out.append(hit.sum(0))
    return tuple(out)

  def _unique_dim(self, d: int, return_inverse: bool, return_counts: bool):
    """unique(dim=d): slices compared as rows (n, m) lexicographically, n^2 m work. A slice is kept if no earlier one
    equals it; its place is the count of kept slices before it in order; each slice's inverse is the place of its
    value."""
    n, order = self.shape[d], [d] + [k for k in range(self.ndim) if k != d]
    front = self.permute(order)
    rows = front.reshape(n, -1)
    if self.dtype is dtypes.bool: rows = rows.cast(dtypes.int32)
    a, b = rows.unsqueeze(1), rows.unsqueeze(0)                            # [i, j, p]: row i against row j
    ne = a != b
    first = (ne.cast(dtypes.int32).cumsum(-1, dtype=dtypes.int32) - ne.cast(dtypes.int32)) == 0 if rows.shape[1] else ne
    below = ((b < a) & ne & first).any(-1)                                # [i, j]: row j sorts before row i
    same = ~ne.any(-1)
    pos = type(self).arange(n, device=self.device)
    kept = ~(same & (pos.reshape(1, n) < pos.reshape(n, 1))).any(1)       # no earlier equal row
    place = (below & kept.reshape(1, n)).sum(1)                           # (n,): the place of row i's value
    u = int(kept.sum().item()) if n else 0
    hit = (place.reshape(1, n) == type(self).arange(u, device=self.device).reshape(u, 1)) & kept.reshape(1, n)   # (u, n)
    picked = hit.unsqueeze(-1)._select(front.reshape(1, n, -1), 0)
    vals = picked.sum(1, dtype=picked.dtype).cast(self.dtype).reshape((u,) + front.shape[1:]).permute([order.index(k) for k in range(self.ndim)])
    out = [vals]
    if return_inverse: out.append(place)
    if return_counts: out.append((place.reshape(1, n) == type(self).arange(u, device=self.device).reshape(u, 1)).sum(1))
    return vals if len(out) == 1 else tuple(out)

  @torch_args
  def searchsorted(self, values, right: bool = False, side: str | None = None, out_int32: bool = False) -> Self:
    """For each of `values`, the index in this sorted tensor (along its last dim) where it would be inserted to keep
    it sorted: before equal elements (side='left') or after them (right=True or side='right'), like torch.searchsorted
    with this tensor as sorted_sequence. Leading dims of a non-1-D sequence must match values'."""
    if side is not None:
      if side not in ("left", "right"): raise ValueError(f"searchsorted side must be 'left' or 'right', got {side!r}")
      if right and side == "left": raise ValueError("searchsorted got right=True and side='left'")
      right = side == "right"
    v = self._to_tensor(values)
    if self.ndim > 1 and self.shape[:-1] != v.shape[:-1]:
      raise ValueError(f"searchsorted: the sequence's leading dims {self.shape[:-1]} must match the values' {v.shape[:-1]}")
    seq = self.unsqueeze(-2) if self.ndim > 1 else self                      # (..., 1, n) against (..., m, 1)
    before = seq <= v.unsqueeze(-1) if right else seq < v.unsqueeze(-1)
    out = before.sum(-1, dtype=dtypes.int32 if out_int32 else dtypes.int64)
    return out.reshape(()) if v.ndim == 0 else out
