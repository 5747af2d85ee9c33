"""Tensor reductions and scans with PyTorch's signatures (a mixin of Tensor): sum prod mean var std (dim=None,
keepdim=False; numpy's axis=/keepdims= are aliases), max/min (a 0-d tensor, or (values, indices) along one dim), amax
amin argmax argmin any all count_nonzero norm logsumexp, cumsum cumprod. Integer and bool sums and products are int64
and indices are int64, as in PyTorch."""
from __future__ import annotations
import math
from math import prod
from typing import Self
from compute import function
from compute.args import torch_args
from compute.dtypes import DType, dtypes
from compute.core import TensorCore, ValuesIndices
from compute.lazy import Ops


def _correction(unbiased: bool | None, correction: float | None) -> float:
  if unbiased is not None and correction is not None: raise TypeError("var/std take unbiased= or correction=, not both")
  if unbiased is not None and not isinstance(unbiased, bool): raise TypeError(f"unbiased must be a bool, got {unbiased!r}")
  return correction if correction is not None else 0 if unbiased is False else 1


class ReduceOps(TensorCore):
  __slots__ = ()

  def _axes(self, dim) -> tuple[int, ...]:
    if dim is None: return tuple(range(self.ndim))
    axes = tuple(self._axis(a) for a in (dim if isinstance(dim, (tuple, list)) else (dim,)))
    if len(set(axes)) != len(axes): raise ValueError(f"dim {dim} repeats a dim")
    return axes if self.ndim else ()          # dim 0 (or -1) of a 0-d tensor is the tensor itself

  def _reduce(self, fn, dim, keepdim: bool, **kw) -> Self:
    axes = self._axes(dim)
    if self.ndim == 0: return self
    out = fn.apply(self, axes=axes, **kw) if any(self.shape[a] != 1 for a in axes) else self
    return out if keepdim else self._dropped(out, axes)

  def _nonempty(self, dim, what: str) -> None:
    if any(self.shape[a] == 0 for a in self._axes(dim)):
      raise ValueError(f"{what} of an empty dim (shape {self.shape}) has no identity; give a non-empty dim")

  def _widened(self, dtype: DType | str | None) -> Self:
    """self as a sum or product accumulates it: in dtype if given, else integers and bool as int64 (like PyTorch)."""
    return self.cast(dtype) if dtype is not None else self if self.dtype.is_float else self.cast(dtypes.int64)

  @torch_args
  def sum(self, dim=None, keepdim: bool = False, dtype=None) -> Self:
    """Integers and bool sum as int64 unless dtype= says otherwise."""
    return self._widened(dtype)._reduce(function.Sum, dim, keepdim)

  @torch_args
  def prod(self, dim: int | None = None, keepdim: bool = False, dtype=None) -> Self:
    """Product of all elements, or along one dim; integers and bool as int64. Pairwise: log2(n) steps."""
    t = self._widened(dtype)
    if dim is None: return t.flatten()._prod(0).reshape((1,) * self.ndim if keepdim else ())
    if not isinstance(dim, int): raise TypeError(f"prod(dim) takes one int dim, like PyTorch, got {dim!r}; call it once per dim")
    d = self._axis(dim)
    out = t._prod(d) if self.ndim else t
    return out if keepdim or not self.ndim else out.squeeze(d)

  def _prod(self, d: int) -> Self:
    """The product along d (kept with size 1): the two halves multiplied, until one element is left."""
    t, at = self, lambda b: tuple(b if i == d else None for i in range(self.ndim))
    if t.shape[d] == 0: return type(self).ones(self.shape[:d] + (1,) + self.shape[d + 1:], dtype=self.dtype, device=self.device)
    while (n := t.shape[d]) > 1:
      if n % 2: t, n = t.pad(at((0, 1)), value=1), n + 1
      t = t.shrink(at((0, n // 2))) * t.shrink(at((n // 2, n)))
      if n > 16: t = t.contiguous()    # a kernel per level once the expression would grow large
    return t

  @torch_args
  def max(self, dim=None, keepdim: bool = False):
    """max(): the largest element (0-d); max(dim, keepdim=False): (values, indices) along dim; max(other): maximum."""
    return self._extreme(dim, keepdim, True)

  @torch_args
  def min(self, dim=None, keepdim: bool = False):
    """min(): the smallest element (0-d); min(dim, keepdim=False): (values, indices) along dim; min(other): minimum."""
    return self._extreme(dim, keepdim, False)

  def _extreme(self, dim, keepdim: bool, largest: bool):
    what = "max" if largest else "min"
    if isinstance(dim, TensorCore): return self.maximum(dim) if largest else self.minimum(dim)
    if dim is None:
      if keepdim: raise TypeError(f"{what}() without dim takes no keepdim; use a{what}(keepdim=True) to keep the dims")
      return self.amax() if largest else self.amin()
    if not isinstance(dim, int):
      raise TypeError(f"{what}(dim) takes one int dim and returns (values, indices); use a{what}(dim={dim!r}) to reduce several dims")
    d, idx = self._axis(dim), self._arg(dim, True, largest)
    if self.ndim == 0: return ValuesIndices(self, idx)
    n = self.shape[d]
    # the value at the index: its gradient goes to that one element (amax/amin share it among ties), like PyTorch
    picked = (type(self).arange(n, device=self.device).reshape(tuple(n if i == d else 1 for i in range(self.ndim))) == idx)._select(self, 0)
    return ValuesIndices(picked.sum(d, keepdim, dtype=picked.dtype).cast(self.dtype), idx if keepdim else idx.squeeze(d))

  @torch_args
  def amax(self, dim=(), keepdim: bool = False) -> Self:
    """The largest values over dim (an int or a tuple; () or None: every dim). NaN propagates; ties share the gradient."""
    dim = None if dim == () else dim
    self._nonempty(dim, "amax")
    return self._reduce(function.Max, dim, keepdim)

  @torch_args
  def amin(self, dim=(), keepdim: bool = False) -> Self:
    dim = None if dim == () else dim
    self._nonempty(dim, "amin")
    return self._reduce(function.Max, dim, keepdim, op=Ops.MIN)

  @torch_args
  def argmax(self, dim: int | None = None, keepdim: bool = False) -> Self:
    """Index (int64) of the first largest element along dim (of the flattened tensor if None); NaN counts as largest."""
    return self._arg(dim, keepdim, True)

  @torch_args
  def argmin(self, dim: int | None = None, keepdim: bool = False) -> Self:
    return self._arg(dim, keepdim, False)

  def _arg(self, dim, keepdim: bool, largest: bool) -> Self:
    if dim is None:
      out = self.flatten()._arg(0, False, largest)
      return out.reshape((1,) * self.ndim) if keepdim else out
    a = self._axis(dim)
    if self.ndim == 0: return type(self).zeros((), dtype=dtypes.int64, device=self.device)
    self._nonempty(a, "argmax" if largest else "argmin")
    n = self.shape[a]
    best = (self.amax(a, keepdim=True) if largest else self.amin(a, keepdim=True)).detach()
    hit = self == best
    if self.dtype.is_float: hit = hit | ((self != self) & (best != best))    # a NaN is the extreme, like PyTorch
    rev = type(self).arange(n, 0, -1, device=self.device).reshape(tuple(n if i == a else 1 for i in range(self.ndim)))
    return (n - hit._select(rev, 0).amax(a, keepdim=keepdim)).cast(dtypes.int64)

  @torch_args
  def mean(self, dim=None, keepdim: bool = False, dtype=None) -> Self:
    """Average over dim of a float tensor; dtype= computes in that float type. Integers and bool are refused, like PyTorch."""
    t = self.cast(dtype) if dtype is not None else self
    if not t.dtype.is_float:
      raise TypeError(f"mean needs a float tensor, got {t.dtype.name}: convert it first, as t.float().mean(), or pass a float dtype=")
    n = prod(self.shape[a] for a in self._axes(dim))
    s = t.sum(dim, keepdim)
    return s / n if n else s * float("nan")

  def _var_mean(self, dim, unbiased, keepdim: bool, correction) -> tuple[Self, Self]:
    c = _correction(unbiased, correction)
    n = prod(self.shape[a] for a in self._axes(dim))
    x = self._float()
    m = x.mean(dim, keepdim=True)
    d = x - m
    return (d * d).sum(dim, keepdim) / max(n - c, 0), m if keepdim else self._dropped(m, dim)

  def _dropped(self, out: Self, dim) -> Self:
    """`out`, reduced over dim with keepdim=True, without the reduced dims."""
    axes = self._axes(dim)
    return out.reshape(tuple(n for i, n in enumerate(self.shape) if i not in axes))

  @torch_args
  def var(self, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction: float | None = None) -> Self:
    """Variance over dim, divided by n - correction (correction=1 by default: unbiased; unbiased=False means 0)."""
    return self._var_mean(dim, unbiased, keepdim, correction)[0]

  @torch_args
  def std(self, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction: float | None = None) -> Self:
    return self._var_mean(dim, unbiased, keepdim, correction)[0].sqrt()

  @torch_args
  def var_mean(self, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
               correction: float | None = None) -> tuple[Self, Self]:
    return self._var_mean(dim, unbiased, keepdim, correction)

  @torch_args
  def std_mean(self, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
               correction: float | None = None) -> tuple[Self, Self]:
    v, m = self._var_mean(dim, unbiased, keepdim, correction)
    return v.sqrt(), m

  @torch_args
  def any(self, dim=None, keepdim: bool = False) -> Self:
    """Whether any element along dim is nonzero (bool); False over an empty dim."""
    return self._truth()._reduce(function.Max, dim, keepdim)

  @torch_args
  def all(self, dim=None, keepdim: bool = False) -> Self:
    """Whether every element along dim is nonzero (bool); True over an empty dim."""
    return self._truth()._reduce(function.Max, dim, keepdim, op=Ops.MIN)

  @torch_args
  def count_nonzero(self, dim=None) -> Self: return self._truth().sum(dim)

  @torch_args
  def norm(self, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Self:
    """The vector p-norm over dim (every dim if None): p = 'fro' or 2, 1, inf, -inf, 0 (count of nonzeros), any number."""
    x = self.cast(dtype) if dtype is not None else self._float()
    if p in ("fro", 2):
      s = (x * x).sum(dim, keepdim)
      zero = s == 0       # the gradient of a zero norm is 0 (PyTorch's), not 0 * inf = NaN: the root of 1 there, then 0
      return zero._select(0.0, (s + zero).sqrt())
    if isinstance(p, str) or not isinstance(p, (int, float)):
      raise ValueError(f"norm p={p!r} is not supported: use 'fro', a number, inf or -inf (the nuclear norm needs an SVD)")
    if p == math.inf: return x.abs().amax(dim, keepdim)
    if p == -math.inf: return x.abs().amin(dim, keepdim)
    if p == 0: return x._truth().sum(dim, keepdim).cast(x.dtype)
    if p == 1: return x.abs().sum(dim, keepdim)
    return (x.abs() ** p).sum(dim, keepdim) ** (1 / p)

  @torch_args
  def logsumexp(self, dim=-1, keepdim: bool = False) -> Self:
    m = self.amax(dim, keepdim=True).detach()
    m = m.isinf()._select(0.0, m)        # an all -inf (or a +inf) row: shifting by m would give inf - inf = NaN
    out = (self - m).exp().sum(dim, keepdim=True).log() + m
    return out if keepdim else self._dropped(out, dim)

  # --- scans
  @torch_args
  def cumsum(self, dim: int = 0, dtype=None) -> Self:
    """Running sum along dim (integers and bool as int64). Up to 256 long: one kernel summing a triangle (each output
    sums its prefix in order); longer: a log2(n)-step scan."""
    t = self._widened(dtype)
    if self.ndim == 0: return t
    d, n = self._axis(dim), self.shape[self._axis(dim)]
    if n > 256: return t._scan(d, False)
    i = type(self).arange(n, device=self.device)
    tri = (i.reshape(1, n) <= i.reshape(n, 1)).reshape((1,) * d + (n, n) + (1,) * (self.ndim - d - 1))   # [i, j]: j <= i
    return tri._select(t.unsqueeze(d), 0).sum(d + 1, dtype=t.dtype)

  @torch_args
  def cumprod(self, dim: int = 0, dtype=None) -> Self:
    """Running product along dim: a log2(n)-step scan (products grouped pairwise, not left to right)."""
    t = self._widened(dtype)
    return t if self.ndim == 0 else t._scan(self._axis(dim), True)

  def _scan(self, d: int, mul: bool) -> Self:
    """Hillis-Steele inclusive scan: step s combines every element with the one s before it (s = 1, 2, 4, ...)."""
    n, t, s = self.shape[d], self, 1
    while s < n:
      prev = t.shrink(tuple((0, n - s) if i == d else None for i in range(t.ndim)))
      prev = prev.pad(tuple((s, 0) if i == d else None for i in range(t.ndim)), value=1 if mul else 0)
      t = (t * prev if mul else t + prev).contiguous()
      s *= 2
    return t
