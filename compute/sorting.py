"""sort, argsort and topk (a mixin of Tensor), by ranks: an element's rank along the dim is how many elements sort
before it (equal ones by position, so the sort is stable), and the r-th output is the element of rank r (a one-hot
selection, so values carry gradients). Each is two fused kernels of n^2 work per row of n: meant for the sizes
tensors are sorted at inside models (tens to a few thousand per row). NaN sorts as the largest value, like PyTorch."""
from __future__ import annotations
from typing import TYPE_CHECKING, NamedTuple
from compute.dtypes import dtypes
from compute.nnops import NNOps
if TYPE_CHECKING: from compute.tensor import Tensor


class ValuesIndices(NamedTuple):
  """What sort and topk return, like torch.return_types: unpack it or use .values / .indices (int32)."""
  values: Tensor
  indices: Tensor


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
    n = self.shape[d]
    r = type(self).arange(k, device=self.device).reshape((1,) * d + (k, 1) + (1,) * (self.ndim - d - 1))
    hit = rank.unsqueeze(d) == r                          # (..., k, n, ...)
    values = hit.where(self.unsqueeze(d), 0).sum(d + 1)
    pos = type(self).arange(n, device=self.device).reshape((1,) * (d + 1) + (n,) + (1,) * (self.ndim - d - 1))
    return ValuesIndices(values if values.dtype is self.dtype else values.cast(self.dtype), hit.where(pos, 0).sum(d + 1))

  def sort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """(values, indices) sorted along dim, like torch.sort; always stable (equal elements keep their order)."""
    if self.ndim == 0: return ValuesIndices(self, type(self).zeros((), dtype=dtypes.int32, device=self.device))
    d = self._axis(dim)
    if self.shape[d] == 0: return ValuesIndices(self, self.zeros_like(dtype=dtypes.int32))
    return self._by_rank(d, self._rank(d, descending), self.shape[d])

  def argsort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return self.sort(dim, descending, stable).indices

  def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:
    """The k largest (or smallest) along dim and their indices, like torch.topk (always in sorted order)."""
    d = self._axis(dim)
    n = self.shape[d] if self.ndim else 1
    if not isinstance(k, int) or not 0 <= k <= n: raise ValueError(f"topk: k={k!r} is out of range for dim {d} of size {n}")
    if self.ndim == 0: return self.sort()
    if k == 0:
      shape = self.shape[:d] + (0,) + self.shape[d + 1:]
      empty = type(self).zeros(shape, dtype=self.dtype, device=self.device)
      return ValuesIndices(empty, empty.cast(dtypes.int32))
    return self._by_rank(d, self._rank(d, largest), k)
