"""sort, argsort, topk, kthvalue, median, mode, unique and searchsorted (a mixin of Tensor), by ranks: an element's rank
along the dim is how many elements sort before it (equal ones by position, so the sort is stable), and the r-th output
is the element of rank r (a one-hot selection, so values carry gradients). Each is two fused kernels of n^2 work per row of n: meant for the sizes
tensors are sorted at inside models (tens to a few thousand per row). NaN sorts as the largest value, like PyTorch."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING
from compute.args import torch_args
from compute.dtypes import dtypes
from compute.nnops import NNOps
from compute.reductions import ValuesIndices
if TYPE_CHECKING: from compute.tensor import Tensor


class SortingOps(NNOps):
  __slots__ = ()

  def _rank(self: Tensor, d: int, descending: bool) -> Tensor:
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

  def _by_rank(self: Tensor, d: int, rank: Tensor, k: int) -> ValuesIndices:
    """The elements of rank 0..k-1 along d, and their positions."""
    r = type(self).arange(k, device=self.device).reshape((1,) * d + (k, 1) + (1,) * (self.ndim - d - 1))
    return self._at_rank(d, rank.unsqueeze(d), r, d + 1)

  def _at_rank(self: Tensor, d: int, rank: Tensor, r, at: int) -> ValuesIndices:
    """The elements whose rank (along dim d of self, dim `at` of rank) equals r, and their positions (int64)."""
    hit = rank == r
    n, xs = self.shape[d], self if at == d else self.unsqueeze(d)
    pos = type(self).arange(n, device=self.device).reshape((1,) * at + (n,) + (1,) * (hit.ndim - at - 1))
    picked = hit.where(xs, 0)
    return ValuesIndices(picked.sum(at, dtype=picked.dtype).cast(self.dtype), hit.where(pos, 0).sum(at, dtype=dtypes.int64))

  def _empty_along(self: Tensor, d: int, k: int) -> ValuesIndices:
    shape = self.shape[:d] + (k,) + self.shape[d + 1:]
    zeros = lambda dt: type(self).zeros(shape, dtype=dt, device=self.device)
    return ValuesIndices(zeros(self.dtype), zeros(dtypes.int64))

  @torch_args
  def sort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """(values, indices) sorted along dim, like torch.sort; always stable (equal elements keep their order)."""
    if self.ndim == 0: return ValuesIndices(self, type(self).zeros((), dtype=dtypes.int64, device=self.device))
    d = self._axis(dim)
    if self.shape[d] == 0: return self._empty_along(d, 0)
    return self._by_rank(d, self._rank(d, descending), self.shape[d])

  @torch_args
  def argsort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return self.sort(dim, descending, stable).indices

  @torch_args
  def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:
    """The k largest (or smallest) along dim and their indices, like torch.topk (always in sorted order)."""
    d = self._axis(dim)
    n = self.shape[d] if self.ndim else 1
    if not isinstance(k, int) or not 0 <= k <= n: raise ValueError(f"topk: k={k!r} is out of range for dim {d} of size {n}")
    if self.ndim == 0: return self.sort()
    if k == 0: return self._empty_along(d, 0)
    return self._by_rank(d, self._rank(d, largest), k)

  @torch_args
  def kthvalue(self: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """The k-th smallest element (k from 1) along dim and its index, like torch.kthvalue."""
    d = self._axis(dim)
    n = self.shape[d] if self.ndim else 1
    if not isinstance(k, int) or not 1 <= k <= n: raise ValueError(f"kthvalue: k={k!r} is out of range 1..{n} for dim {d}")
    if self.ndim == 0: return self.sort()
    return self._kept(self._at_rank(d, self._rank(d, False), k - 1, d), d, keepdim)

  @staticmethod
  def _kept(vi: ValuesIndices, d: int, keepdim: bool) -> ValuesIndices:
    """Values and indices reduced over dim d, with d kept (size 1) if keepdim."""
    return ValuesIndices(vi.values.unsqueeze(d), vi.indices.unsqueeze(d)) if keepdim else vi

  @torch_args
  def median(self: Tensor, dim: int | None = None, keepdim: bool = False):
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
      r = (finite < n).where(finite, r)
    return self._kept(self._at_rank(d, self._rank(d, False), r, d), d, keepdim)

  @torch_args
  def mode(self: Tensor, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """The most frequent value along dim (the smallest of equally frequent ones) and the index of its last occurrence,
    like PyTorch on the CPU. n^2 work per row of n."""
    d = self._axis(dim)
    if self.ndim == 0: return self.sort()
    self._nonempty(d, "mode")
    count = (self.unsqueeze(d + 1) == self.unsqueeze(d)).sum(d + 1, dtype=dtypes.int32)
    top = count == count.amax(d, keepdim=True)
    big = True if self.dtype is dtypes.bool else math.inf if self.dtype.is_float else self.dtype.max
    value = top.where(self, big).amin(d, keepdim=True)
    n = self.shape[d]
    pos = type(self).arange(n, device=self.device).reshape(tuple(n if i == d else 1 for i in range(self.ndim)))
    index = (self == value).where(pos, -1).amax(d, keepdim=keepdim).cast(dtypes.int64)
    return ValuesIndices(value.cast(self.dtype) if keepdim else value.cast(self.dtype).squeeze(d), index)

  def unique(self: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None):
    """The distinct elements in ascending order (always sorted), with the index of each element's value in them
    (return_inverse, self's shape) and how often each occurs (return_counts), like torch.unique. The result's length
    depends on the data: it is read back from the device (one small transfer)."""
    if dim is not None: raise NotImplementedError(f"unique(dim={dim}) is not supported: only unique() over all elements")
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
      out.append(hit.where(type(self).arange(vals.numel(), device=self.device), 0).sum(1).reshape(self.shape))
    if return_counts: out.append(hit.sum(0))
    return tuple(out)

  @torch_args
  def searchsorted(self: Tensor, values, right: bool = False, side: str | None = None, out_int32: bool = False) -> Tensor:
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
