"""The rest of PyTorch's Tensor methods (a mixin of Tensor), composed from the ops below: splitting (chunk split
tensor_split unbind narrow: views, as in PyTorch), movedim roll tril triu diag diagonal trace, products (outer bmm
baddbmm addmm cdist), elementwise math (round frac lerp isnan isinf isfinite nan_to_num log1p expm1 erf atan atan2
hypot isclose), and the ops whose result size depends on the data (nonzero bincount repeat_interleave with counts:
those read the data back from the device, as the boolean mask indexing does)."""
from __future__ import annotations
import math
from typing import Any, Self, Sequence
import numpy as np
from compute.args import torch_args
from compute.dtypes import dtypes
from compute.core import TensorCore

# erf(x) = 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 + p x), |error| <= 1.5e-7: Abramowitz & Stegun, Handbook of
# Mathematical Functions, formula 7.1.26
_ERF_P, _ERF_A = 0.3275911, (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_TAN_PI_8 = math.sqrt(2) - 1


class TorchOps(TensorCore):
  __slots__ = ()

  # --- splitting: views of self
  def _part(self, d: int, start: int, stop: int | None) -> Self: return self[(slice(None),) * d + (slice(start, stop),)]

  @torch_args
  def split(self, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Self, ...]:
    """Pieces of split_size along dim (the last one smaller), or of the listed sizes (they must add up to the dim)."""
    d = self._axis(dim)
    n = self.shape[d]
    if isinstance(split_size_or_sections, int):
      if split_size_or_sections <= 0 and n: raise ValueError(f"split size must be positive, got {split_size_or_sections}")
      return tuple(self._part(d, i, i + split_size_or_sections) for i in range(0, n, split_size_or_sections)) if n else (self,)
    sizes = list(split_size_or_sections)
    if sum(sizes) != n or any(s < 0 for s in sizes):
      raise ValueError(f"split sizes {sizes} must be non-negative and add up to {n}, the size of dim {d}")
    bounds = np.cumsum([0] + sizes).tolist()
    return tuple(self._part(d, a, b) for a, b in zip(bounds, bounds[1:]))

  @torch_args
  def chunk(self, chunks: int, dim: int = 0) -> tuple[Self, ...]:
    """At most `chunks` pieces along dim, each ceil(n / chunks) long but the last."""
    if not isinstance(chunks, int) or chunks <= 0: raise ValueError(f"chunk needs a positive number of chunks, got {chunks!r}")
    return self.split(max(1, -(-self.shape[self._axis(dim)] // chunks)), dim)

  @torch_args
  def tensor_split(self, indices_or_sections, dim: int = 0) -> tuple[Self, ...]:
    """n sections (the first n % sections one longer), or the pieces between the given indices, like numpy.array_split."""
    d = self._axis(dim)
    n = self.shape[d]
    if isinstance(indices_or_sections, TensorCore): indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
      if indices_or_sections <= 0: raise ValueError(f"tensor_split needs a positive number of sections, got {indices_or_sections}")
      q, r = divmod(n, indices_or_sections)
      return self.split([q + 1] * r + [q] * (indices_or_sections - r), d)
    bounds = [0] + [min(max(i if i >= 0 else i + n, 0), n) for i in indices_or_sections] + [n]
    return tuple(self._part(d, a, max(a, b)) for a, b in zip(bounds, bounds[1:]))

  @torch_args
  def unbind(self, dim: int = 0) -> tuple[Self, ...]:
    d = self._axis(dim)
    return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))

  @torch_args
  def narrow(self, dim: int, start: int, length: int) -> Self:
    d = self._axis(dim)
    n = self.shape[d]
    start = start + n if start < 0 else start
    if not (0 <= start <= n and 0 <= length <= n - start):
      raise IndexError(f"narrow: start {start} and length {length} do not fit dim {d} of size {n}")
    return self._part(d, start, start + length)

  def movedim(self, source, destination) -> Self:
    src = [self._axis(s) for s in (source if isinstance(source, (tuple, list)) else (source,))]
    dst = [self._axis(s) for s in (destination if isinstance(destination, (tuple, list)) else (destination,))]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
      raise ValueError(f"movedim: source {source} and destination {destination} must be distinct dims of equal count")
    order: list[int | None] = [None] * self.ndim
    for s, t in zip(src, dst): order[t] = s
    rest = iter(a for a in range(self.ndim) if a not in src)
    return self.permute([o if o is not None else next(rest) for o in order])
  moveaxis = movedim

  def view_as(self, other: Self) -> Self: return self.reshape(other.shape)
  reshape_as = view_as
  def expand_as(self, other: Self) -> Self: return self.expand(other.shape)

  @torch_args
  def roll(self, shifts, dims=None) -> Self:
    """Elements shifted along dims (those pushed past the end come back at the start); dims=None: the flattened tensor."""
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    shifts, dims = (tuple(v) if isinstance(v, (tuple, list)) else (v,) for v in (shifts, dims))
    if len(shifts) != len(dims): raise ValueError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    t = self
    for s, d in zip(shifts, dims):
      d = self._axis(d)
      if (s := s % self.shape[d] if self.shape[d] else 0): t = type(self).cat([t._part(d, -s, None), t._part(d, 0, -s)], dim=d)
    return t

  @torch_args
  def repeat_interleave(self, repeats, dim: int | None = None, output_size: int | None = None) -> Self:
    """Each element repeated `repeats` times along dim (of the flattened tensor if None); repeats may give a count per
    element (a list or tensor: read back to the host)."""
    t, d = (self.flatten(), 0) if dim is None else (self, self._axis(dim))
    n = t.shape[d] if t.ndim else 1
    if isinstance(repeats, TensorCore): repeats = repeats.tolist()
    if isinstance(repeats, (list, tuple)) and len(repeats) == 1: repeats = repeats[0]
    if isinstance(repeats, int):
      if repeats < 0: raise ValueError(f"repeat_interleave: repeats must be non-negative, got {repeats}")
      t = t.unsqueeze(d + 1)
      out = t.expand(t.shape[:d + 1] + (repeats,) + t.shape[d + 2:]).flatten(d, d + 1)
    else:
      if len(repeats) != n or any(r < 0 for r in repeats):
        raise ValueError(f"repeat_interleave: {len(repeats)} repeats for dim {d} of size {n}; they must be non-negative")
      out = t.index_select(d, type(self)(np.repeat(np.arange(n), repeats).astype(np.int64), device=self.device))
    if output_size is not None and out.shape[d] != output_size:
      raise ValueError(f"repeat_interleave: output_size={output_size}, but the repeats give {out.shape[d]}")
    return out

  # --- triangles and diagonals
  def _tri(self, diagonal: int, lower: bool, what: str) -> Self:
    if self.ndim < 2: raise ValueError(f"{what} needs a tensor of at least 2 dims, got shape {self.shape}")
    r, c = self.shape[-2:]
    i, j = type(self).arange(r, device=self.device).reshape(r, 1), type(self).arange(c, device=self.device).reshape(1, c)
    keep = j - i <= diagonal if lower else j - i >= diagonal
    return keep._select(self, self.zeros_like())

  @torch_args
  def tril(self, diagonal: int = 0) -> Self:
    """The lower triangle of the last two dims (with the elements up to `diagonal` above the main one), zeros elsewhere."""
    return self._tri(diagonal, True, "tril")

  @torch_args
  def triu(self, diagonal: int = 0) -> Self: return self._tri(diagonal, False, "triu")

  @torch_args
  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Self:
    """The diagonal `offset` above the main one of dims dim1, dim2, as a new last dim: a view, as in PyTorch (writes
    to it change self, in-place changes of self show in it)."""
    a, b = self._axis(dim1), self._axis(dim2)
    if a == b: raise ValueError(f"diagonal dims must differ, got {dim1} and {dim2}")
    t = self._part(b, offset, None) if offset > 0 else self._part(a, -offset, None) if offset < 0 else self
    k = max(0, min(t.shape[a], t.shape[b]))
    return self._viewed(t._part(a, 0, k)._part(b, 0, k)._diagonal(a, b), ("diagonal", offset, a, b))

  def _undiagonal(self, value: Self, offset: int, a: int, b: int) -> Self:
    """self with diagonal(offset, a, b) replaced by `value` (writes through that view)."""
    k, rest = value.shape[-1], [d for d in range(self.ndim) if d not in (a, b)]
    if k == 0: return self
    lead, ra, rb = value.shape[:-1], max(-offset, 0), max(offset, 0)
    keep = ((0, 0),) * len(lead)
    def embed(v: Self) -> Self:   # (..., k) -> (..., n_a, n_b): v on the diagonal, zeros elsewhere (the row-of-k+1 trick)
      sq = v.reshape(lead + (k, 1)).pad(keep + ((0, 0), (0, k))).reshape(lead + (k * (k + 1),)).shrink((None,) * len(lead) + ((0, k * k),))
      return sq.reshape(lead + (k, k)).pad(keep + ((ra, self.shape[a] - ra - k), (rb, self.shape[b] - rb - k)))
    order = rest + [a, b]
    inv = [order.index(d) for d in range(self.ndim)]
    return embed(value.ones_like(dtype=dtypes.bool)).permute(inv)._select(embed(value.cast(self.dtype)).permute(inv), self)

  @torch_args
  def diag(self, diagonal: int = 0) -> Self:
    """1-D: a square matrix with self on diagonal `diagonal`; 2-D: a copy of that diagonal (PyTorch's diag is no view)."""
    if self.ndim == 2: return self.diagonal(diagonal).clone()
    if self.ndim != 1: raise ValueError(f"diag needs a 1-D or 2-D tensor, got shape {self.shape}")
    n, k = self.shape[0], abs(diagonal)
    m = n + k
    i, j = type(self).arange(m, device=self.device).reshape(m, 1), type(self).arange(m, device=self.device).reshape(1, m)
    v = self.pad(((0, k),)).reshape((m, 1) if diagonal >= 0 else (1, m))
    return (j - i == diagonal)._select(v, type(self).zeros((m, m), dtype=self.dtype, device=self.device))

  def trace(self) -> Self:
    if self.ndim != 2: raise ValueError(f"trace needs a 2-D tensor, got shape {self.shape}")
    return self.diagonal().sum()

  # --- products
  def outer(self, vec2: Self) -> Self:
    if self.ndim != 1 or vec2.ndim != 1: raise ValueError(f"outer needs two 1-D tensors, got shapes {self.shape} and {vec2.shape}")
    return self.reshape(-1, 1) * vec2.reshape(1, -1)
  ger = outer

  def bmm(self, mat2: Self) -> Self:
    """Batched matrix product of (b, n, m) and (b, m, p) tensors (no broadcasting, like PyTorch; matmul broadcasts)."""
    if self.ndim != 3 or mat2.ndim != 3 or self.shape[0] != mat2.shape[0]:
      raise ValueError(f"bmm needs 3-D tensors with the same batch size, got shapes {self.shape} and {mat2.shape}")
    return self @ mat2

  def _scaled_add(self, product: Self, beta, alpha) -> Self:
    """beta * self + alpha * product (self is ignored when beta is 0, NaN included, like PyTorch)."""
    out = product if alpha == 1 else product * alpha
    return out + (self if beta == 1 else self * beta) if beta != 0 else out + self.zeros_like()

  def baddbmm(self, batch1: Self, batch2: Self, *, beta=1, alpha=1) -> Self:
    return self._scaled_add(batch1.bmm(batch2), beta, alpha)

  def addmm(self, mat1: Self, mat2: Self, *, beta=1, alpha=1) -> Self:
    if mat1.ndim != 2 or mat2.ndim != 2: raise ValueError(f"addmm needs 2-D matrices, got shapes {mat1.shape} and {mat2.shape}")
    return self._scaled_add(mat1 @ mat2, beta, alpha)

  def cdist(self, x2: Self, p: float = 2.0) -> Self:
    """p-norm distances between the rows of self (..., P, M) and of x2 (..., R, M): (..., P, R)."""
    if self.ndim < 2 or x2.ndim < 2 or self.shape[-1] != x2.shape[-1]:
      raise ValueError(f"cdist needs (..., P, M) and (..., R, M) tensors, got shapes {self.shape} and {x2.shape}")
    return (self.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, dim=-1)

  # --- elementwise
  def lerp(self, end, weight) -> Self: return self + weight * (end - self)

  def round(self, decimals: int = 0) -> Self:
    """To the nearest integer (half to even), or to `decimals` decimal places, like PyTorch."""
    if not self.dtype.is_float: return self
    if decimals: return (self * 10.0 ** decimals).round() / 10.0 ** decimals
    f = self.floor()
    d = self - f
    return (d > 0.5)._select(f + 1, (d < 0.5)._select(f, (f % 2 == 0)._select(f, f + 1)))

  def frac(self) -> Self: return self - self.trunc()
  def clamp_min(self, min) -> Self: return self.clamp(min=min)
  def clamp_max(self, max) -> Self: return self.clamp(max=max)

  def nan_to_num(self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Self:
    """NaN, +inf and -inf replaced by nan, posinf and neginf (default: the dtype's largest and smallest finite values)."""
    if not self.dtype.is_float: return self
    posinf, neginf = self.dtype.max if posinf is None else posinf, self.dtype.min if neginf is None else neginf
    return self.isnan()._select(nan, (self == math.inf)._select(posinf, (self == -math.inf)._select(neginf, self)))

  def log1p(self) -> Self:
    """log(1 + x), accurate for tiny x: log(u) * x / (u - 1) with u = 1 + x rounded (Goldberg, "What Every Computer
    Scientist Should Know About Floating-Point Arithmetic", 1991, theorem 4)."""
    x = self._float()
    u = 1 + x
    return (u == 1)._select(x, (u == math.inf)._select(u, u.log() * (x / (u - 1))))

  def expm1(self) -> Self:
    """exp(x) - 1, accurate for tiny x: (u - 1) * x / log(u) with u = exp(x) rounded (Kahan's method)."""
    x = self._float()
    u = x.exp()
    return (u == 1)._select(x, (u - 1 == -1)._select(-1.0, (u == math.inf)._select(u, (u - 1) * (x / u.log()))))

  def erf(self) -> Self:
    """The error function, to 1.5e-7 absolute (Abramowitz & Stegun 7.1.26), also for float64; odd by symmetry, the
    branches (not abs) keep d/dx at 0 equal to 2/sqrt(pi)."""
    x = self._float()
    pos = x >= 0
    a = pos._select(x, -x)
    t = 1 / (1 + _ERF_P * a)
    poly = 0.0
    for c in reversed(_ERF_A): poly = (poly + c) * t
    y = 1 - poly * (-a * a).exp()
    return pos._select(y, -y)

  def atan(self) -> Self:
    """arctan to about 1e-8 (also for float64): |x| > 1 by atan(1/x), then above tan(pi/8) by pi/4 + atan((z-1)/(z+1)),
    then the Taylor series to z^17 on |z| <= tan(pi/8)."""
    x = self._float()
    a = x.abs()
    inv = a > 1
    z = inv._select(1 / a, a)
    hi = z > _TAN_PI_8
    z = hi._select((z - 1) / (z + 1), z)
    z2, poly = z * z, 0.0
    for k in range(8, -1, -1): poly = poly * z2 + (-1) ** k / (2 * k + 1)
    r = hi._select(math.pi / 4 + z * poly, z * poly)
    r = inv._select(math.pi / 2 - r, r)
    return (x < 0)._select(-r, r)
  arctan = atan

  def atan2(self, other) -> Self:
    """The angle of the point (other, self) in (-pi, pi], like PyTorch's atan2(input=y, other=x)."""
    y, x = self._broadcast(other)
    y, x = y._float(), x._float()
    r = (y / x).atan()
    left = (y >= 0)._select(r + math.pi, r - math.pi)
    axis = (y > 0)._select(math.pi / 2, (y < 0)._select(-math.pi / 2, 0.0))
    return (x > 0)._select(r, (x < 0)._select(left, axis))
  arctan2 = atan2

  def hypot(self, other) -> Self:
    """sqrt(x^2 + y^2) without overflow or underflow in between."""
    x, y = self._broadcast(other)
    x, y = x._float().abs(), y._float().abs()
    m = x.maximum(y)
    s = (m == 0)._select(1.0, m)
    out = m * ((x / s).square() + (y / s).square()).sqrt()
    return ((x == math.inf) | (y == math.inf))._select(math.inf, out)

  def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Self:
    """|self - other| <= atol + rtol * |other| elementwise (equal infinities are close; NaNs are if equal_nan)."""
    a, b = self._broadcast(other)
    if not a.dtype.is_float: return a == b if rtol == atol == 0 else (a - b).abs() <= atol + rtol * b.abs()
    close = (a == b) | (((a - b).abs() <= atol + rtol * b.abs()) & a.isfinite() & b.isfinite())
    return close | (a.isnan() & b.isnan()) if equal_nan else close

  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

  # --- results whose size depends on the data (read back from the device)
  def nonzero(self, *, as_tuple: bool = False):
    """The indices of the nonzero elements, (count, ndim) int64, or a tuple of one index tensor per dim (as_tuple)."""
    if self.ndim: idx: Any = np.nonzero(self._truth().numpy())
    else: idx = () if as_tuple else np.zeros((int(bool(self.item())), 0), np.int64)
    if as_tuple: return tuple(type(self)(i.astype(np.int64), device=self.device) for i in idx)
    return type(self)(idx if self.ndim == 0 else np.stack(idx, 1).astype(np.int64), device=self.device)

  def bincount(self, weights: Self | None = None, minlength: int = 0) -> Self:
    """How often each value 0..max occurs in a 1-D non-negative integer tensor (int64), or the sum of `weights` at
    them (float32 weights: float32, others: float64); at least minlength long."""
    if self.ndim != 1 or not self.dtype.is_int: raise ValueError(f"bincount needs a 1-D integer tensor, got shape {self.shape} {self.dtype.name}")
    lo, hi = self._int_range() if self.numel() else (0, -1)
    if lo < 0: raise ValueError(f"bincount needs non-negative values, got {lo}")
    if weights is not None and weights.shape != self.shape:
      raise ValueError(f"bincount weights must have the input's shape {self.shape}, got {weights.shape}")
    n = max(hi + 1, minlength)
    hit = self.reshape(-1, 1) == type(self).arange(n, device=self.device)
    if weights is None: return hit.sum(0)
    dt = dtypes.float32 if weights.dtype is dtypes.float32 else dtypes.float64
    return hit._select(weights.cast(dt).reshape(-1, 1), 0).sum(0)

  def histc(self, bins: int = 100, min: float = 0, max: float = 0) -> Self:
    """Counts in `bins` equal bins over [min, max] (the data's range when min == max); elements outside are left out,
    the last bin includes max. The result has self's float dtype."""
    if not self.dtype.is_float: raise TypeError(f"histc needs a floating-point tensor, got {self.dtype.name}; use bincount for integers")
    if bins <= 0 or min > max: raise ValueError(f"histc needs bins > 0 and min <= max, got bins={bins}, min={min}, max={max}")
    x = self.flatten()
    bound = lambda v: type(self).full((), v, dtype=self.dtype, device=self.device)
    lo, hi = (x.amin(), x.amax()) if min == max and x.numel() else (bound(min), bound(max))
    same = lo == hi
    lo, hi = same._select(lo - 1, lo), same._select(hi + 1, hi)
    b = ((x - lo) * (bins / (hi - lo))).floor().cast(dtypes.int32).minimum(bins - 1)
    inside = (x >= lo) & (x <= hi)
    return (inside.reshape(-1, 1) & (b.reshape(-1, 1) == type(self).arange(bins, device=self.device))).sum(0).cast(self.dtype)
