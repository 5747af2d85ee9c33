"""Tensor neural-network ops: matmul, einsum, conv2d, pooling, softmax, cross-entropy (a mixin of Tensor; everything is
composed from the differentiable primitives)."""
from __future__ import annotations
from typing import Any, Self
from compute import function
from compute.dtypes import dtypes, promote
from compute.args import torch_args
from compute.core import TensorCore
from compute.lazy import Ops
from compute.shape import broadcast_shape


def _pair(v, what: str) -> tuple[int, int]:
  t = (v, v) if isinstance(v, int) else tuple(v)
  if len(t) != 2 or any(not isinstance(x, int) for x in t): raise ValueError(f"{what} must be an int or a pair of ints, got {v!r}")
  return t  # type: ignore[return-value]


class NNOps(TensorCore):
  __slots__ = ()

  @torch_args
  def softmax(self, dim: int = -1) -> Self:
    e = (self - self.amax(dim, keepdim=True).detach()).exp()
    return e / e.sum(dim, keepdim=True)

  @torch_args
  def log_softmax(self, dim: int = -1) -> Self:
    s = self - self.amax(dim, keepdim=True).detach()
    return s - s.exp().sum(dim, keepdim=True).log()

  # --- linear algebra
  def dot(self, w: Self) -> Self:
    """numpy matmul semantics: 1-D operands are vectors, leading dims broadcast."""
    x, w = self, self._to_tensor(w)
    if x.ndim == 0 or w.ndim == 0: raise ValueError(f"matmul needs at least 1-D operands, got shapes {x.shape} and {w.shape}")
    if x.device != w.device: raise RuntimeError(f"matmul operands are on different devices ({x.device} and {w.device})")
    k_x, k_w = x.shape[-1], w.shape[-2] if w.ndim > 1 else w.shape[0]
    if k_x != k_w: raise ValueError(f"matmul shape mismatch: {x.shape} @ {w.shape} (inner dims {k_x} and {k_w} differ)")
    dt = promote(x.dtype, w.dtype)
    if not dt.is_float and dt.itemsize < 4: dt = dtypes.int32                 # small integers and bool accumulate as int32
    x, w = (t if t.dtype is dt else t.cast(dt) for t in (x, w))                # products in that type too (no int8 wrap)
    # the product-sum straight from the primitives (its intermediates are nobody's views: no view bookkeeping), and from
    # the lazy buffers' own ops where no gradient is recorded
    F = function
    a: Any
    b: Any
    if graph := type(x).grad_enabled and (x.requires_grad or w.requires_grad):
      a, b = x, w
      reshape, permute = (lambda t, s: F.Reshape.apply(t, shape=s)), (lambda t, o: F.Permute.apply(t, order=o))
      expand, mul, total = (lambda t, s: F.Expand.apply(t, shape=s)), (lambda p, q: F.Mul.apply(p, q)), (lambda t, d: F.Sum.apply(t, axes=d))
    else:
      a, b = x.lazydata, w.lazydata
      reshape, permute, expand = (lambda t, s: t.reshape(s)), (lambda t, o: t.permute(o)), (lambda t, s: t.expand(s))
      mul, total = (lambda p, q: p.alu(Ops.MUL, q)), (lambda t, d: t.reduce(Ops.ADD, d))
    a = reshape(a, x.shape[:-1] + (1, k_x) if x.ndim > 1 else (1, 1, k_x))
    if w.ndim > 1: b = reshape(permute(b, tuple(range(w.ndim - 2)) + (w.ndim - 1, w.ndim - 2)), w.shape[:-2] + (1, w.shape[-1], k_w))
    else: b = reshape(b, (1, 1, k_w))
    full = broadcast_shape(a.shape, b.shape)
    def to_full(t):
      if len(t.shape) < len(full): t = reshape(t, (1,) * (len(full) - len(t.shape)) + t.shape)
      return t if t.shape == full else expand(t, full)
    shape = full[:-1]                                                # (..., n, m)
    if x.ndim == 1: shape = shape[:-2] + shape[-1:]
    if w.ndim == 1: shape = shape[:-1]
    out = reshape(total(mul(to_full(a), to_full(b)), (len(full) - 1,)), shape)
    return out if graph else self._from_lazy(out)
  matmul = dot

  @staticmethod
  def einsum(equation: str, *operands) -> Any:
    """Einstein summation like torch.einsum / numpy.einsum: "ij,jk->ik", "bij,bjk->bik", "ii->i" (diagonal), "ii"
    (trace), "...ij->...ji", implicit outputs ("ij,jk": the labels used once, sorted). One fused product-sum."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(operands) or not operands:
      raise ValueError(f"einsum {equation!r} names {len(specs)} operands, got {len(operands)}")
    if any(not (c.isalpha() or c in ".,->") for c in eq): raise ValueError(f"einsum {equation!r}: labels must be letters")
    ell = max((t.ndim - len(sp.replace("...", "")) for sp, t in zip(specs, operands) if "..." in sp), default=0)
    free = [chr(c) for c in range(0x3b1, 0x3b1 + 64) if chr(c) not in eq][:ell]   # labels for the ... dims
    def expand(sp: str, nd: int) -> str:
      if "..." not in sp: return sp
      k = nd - len(sp.replace("...", ""))
      return sp.replace("...", "".join(free[ell - k:]))
    specs = [expand(sp, t.ndim) for sp, t in zip(specs, operands)]
    for sp, t in zip(specs, operands):
      if len(sp) != t.ndim or "." in sp:
        raise ValueError(f"einsum {equation!r}: operand of shape {t.shape} does not match its labels {sp!r}")
    if arrow: out = expand(rhs, ell + len(rhs.replace("...", ""))) if "..." in rhs else rhs
    else: out = "".join(free) + "".join(sorted(c for c in set("".join(specs)) if "".join(specs).count(c) == 1 and c not in free))
    if len(set(out)) != len(out) or any(c not in "".join(specs) for c in out):
      raise ValueError(f"einsum {equation!r}: output labels {out!r} must be distinct and appear in an input")
    sizes: dict[str, int] = {}
    for sp, t in zip(specs, operands):
      for c, n in zip(sp, t.shape):
        if c in free and (n == 1 or sizes.get(c, 1) == 1): sizes[c] = max(n, sizes.get(c, 1))   # ... dims broadcast
        elif sizes.setdefault(c, n) != n:
          raise ValueError(f"einsum {equation!r}: label {c!r} has size {sizes[c]} and {n} in different operands")
    labels = list(out) + [c for c in dict.fromkeys("".join(specs)) if c not in out]
    terms = []
    for sp, t in zip(specs, operands):
      while (rep := next((c for c in sp if sp.count(c) > 1), None)) is not None:   # a repeated label: the diagonal
        a, b = sp.index(rep), sp.index(rep, sp.index(rep) + 1)
        t, sp = t._diagonal(a, b), "".join(x for k, x in enumerate(sp) if k not in (a, b)) + rep
      order = sorted(range(len(sp)), key=lambda k: labels.index(sp[k]))
      t, sp = t.permute(order), "".join(sp[k] for k in order)
      terms.append(t.reshape(tuple(t.shape[sp.index(c)] if c in sp else 1 for c in labels)))
    prod_ = terms[0]
    for t in terms[1:]: prod_ = prod_ * t
    prod_ = prod_._expand_to(tuple(sizes[c] for c in labels))
    return prod_.sum(tuple(range(len(out), len(labels))), dtype=prod_.dtype) if len(labels) > len(out) else prod_

  def _diagonal(self, a: int, b: int) -> Self:
    """Dims a and b (equal sizes n) replaced by one last dim of size n: element [..., i] = self[..., i, ..., i, ...]."""
    n = self.shape[a]
    if self.shape[b] != n: raise ValueError(f"a diagonal needs equal dims, got {self.shape[a]} and {self.shape[b]} in {self.shape}")
    rest = [k for k in range(self.ndim) if k not in (a, b)]
    t = self.permute(rest + [a, b]).reshape(tuple(self.shape[k] for k in rest) + (n * n,))
    t = t.pad(((0, 0),) * len(rest) + ((0, n),)).reshape(tuple(self.shape[k] for k in rest) + (n, n + 1))
    return t[(slice(None),) * len(rest) + (slice(None), 0)]

  def linear(self, weight: Self, bias: Self | None = None) -> Self:
    """x @ weight.T + bias, with weight of shape (out, in) like nn.Linear."""
    out = self @ weight.T
    return out if bias is None else out + bias

  # --- convolution and pooling
  def _pool(self, k: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Self:
    """(..., H, W) -> (..., OH, OW, KH, KW): windows over the last len(k) dims."""
    nd = len(k)
    t, base = self, self.ndim - nd
    for i in range(nd): t = t._window(base + 2 * i, k[i], stride[i], dilation[i])
    lead = tuple(range(base))
    return t.permute(lead + tuple(base + 2 * i for i in range(nd)) + tuple(base + 2 * i + 1 for i in range(nd)))

  def _window(self, axis: int, k: int, stride: int = 1, dilation: int = 1) -> Self:
    """dim `axis` (n) -> (o, k): sliding windows of k elements, `stride` apart, taps `dilation` apart."""
    n = self.shape[axis]
    if dilation * (k - 1) + 1 > n:
      raise ValueError(f"window of {k} (dilation {dilation}) does not fit dim {axis} of size {n} in shape {self.shape}")
    return function.Window.apply(self, axis=axis, k=k, stride=stride, dilation=dilation)

  def conv2d(self, weight: Self, bias: Self | None = None, stride=1, padding=0, dilation=1, groups: int = 1) -> Self:
    """x (N, Cin, H, W) with weight (Cout, Cin/groups, KH, KW) -> (N, Cout, OH, OW)."""
    if self.ndim != 4 or weight.ndim != 4:
      raise ValueError(f"conv2d needs a 4-D input (N, C, H, W) and 4-D weight (Cout, Cin, KH, KW), got {self.shape} and {weight.shape}")
    n, cin, h, w = self.shape
    cout, cg, kh, kw = weight.shape
    if cin % groups or cout % groups or cg * groups != cin:
      raise ValueError(f"conv2d input {self.shape} and weight {weight.shape} do not match with groups={groups}: "
                       f"weight dim 1 must be {cin}/{groups}")
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    if bias is not None and bias.shape != (cout,): raise ValueError(f"conv2d bias must have shape ({cout},), got {bias.shape}")
    x = self.pad(((0, 0), (0, 0), (ph, ph), (pw, pw)))
    if dh * (kh - 1) + 1 > h + 2 * ph or dw * (kw - 1) + 1 > w + 2 * pw:
      raise ValueError(f"conv2d kernel {(kh, kw)} (dilation {(dh, dw)}) is larger than the padded input {x.shape[2:]}")
    win = x._pool((kh, kw), (sh, sw), (dh, dw))                         # (N, Cin, OH, OW, KH, KW)
    oh, ow = win.shape[2], win.shape[3]
    win = win.reshape(n, groups, 1, cg, oh, ow, kh, kw).permute(0, 1, 2, 4, 5, 3, 6, 7)     # (N, G, 1, OH, OW, Cg, KH, KW)
    wt = weight.reshape(1, groups, cout // groups, 1, 1, cg, kh, kw)
    out = (win * wt).sum((5, 6, 7)).reshape(n, cout, oh, ow)
    return out if bias is None else out + bias.reshape(1, cout, 1, 1)

  def max_pool2d(self, kernel_size=2, stride=None, padding=0, dilation=1, return_indices: bool = False):
    """Window maxima over the last two dims (padding counts as -inf); with return_indices also (max, indices) like
    PyTorch: each max's position h * W + w in its (H, W) plane of self, int64."""
    k, pad = _pair(kernel_size, "kernel_size"), _pair(padding, "padding")
    return self._max_pool(k, _pair(stride if stride is not None else k, "stride"), ((pad[0], pad[0]), (pad[1], pad[1])),
                          _pair(dilation, "dilation"), return_indices)

  def _max_pool(self, k: tuple[int, int], stride: tuple[int, int], pads: tuple[tuple[int, int], tuple[int, int]],
                dilation: tuple[int, int], return_indices: bool):
    """max_pool2d with (before, after) padding of H and W; the index of a max is the first element in window order
    (row by row) of the input (not padding) equal to it, or the last NaN, as PyTorch's CPU kernel picks (it takes an
    element greater than the max so far, or a NaN: aten/src/ATen/native/cpu/MaxPoolKernel.cpp)."""
    x = self.pad(((0, 0),) * (self.ndim - 2) + pads, value=float("-inf")) if any(sum(pads, ())) else self
    win = x._pool(k, stride, dilation)                                   # (..., OH, OW, KH, KW)
    out = win.amax((-2, -1))
    if not return_indices: return out
    h, w = self.shape[-2:]
    pos = type(self).arange(h * w, dtype=dtypes.int64, device=self.device).reshape(h, w).pad(pads, value=-1)
    pos = pos._pool(k, stride, dilation).flatten(-2)                     # (OH, OW, KH*KW): input position or -1
    v, n, inside = win.flatten(-2), k[0] * k[1], pos >= 0
    first = n - ((v == out.unsqueeze(-1)) & inside)._select(type(self).arange(n, 0, -1, device=self.device), 0).amax(-1)
    last_nan = ((v != v) & inside)._select(type(self).arange(n, device=self.device), -1).amax(-1)
    at = (last_nan >= 0)._select(last_nan, first)
    return out, (type(self).arange(n, device=self.device) == at.unsqueeze(-1))._select(pos, 0).sum(-1)

  def avg_pool2d(self, kernel_size=2, stride=None, padding=0) -> Self:
    """Average over each window, padding included in the count."""
    k = _pair(kernel_size, "kernel_size")
    pad = _pair(padding, "padding")
    x = self.pad(((0, 0),) * (self.ndim - 2) + ((pad[0], pad[0]), (pad[1], pad[1])))
    return x._pool(k, _pair(stride if stride is not None else k, "stride"), (1, 1)).mean((-2, -1))

  # --- losses
  def one_hot(self, num_classes: int) -> Self:
    """int64 (..., num_classes) with a 1 (PyTorch's dtype) at each index; an index outside 0..num_classes-1 is an error."""
    if not self.dtype.is_int: raise TypeError(f"one_hot needs integer class indices, got {self.dtype.name}")
    if self.numel() and ((r := self._int_range())[0] < 0 or r[1] >= num_classes):
      raise IndexError(f"one_hot: class index {r[0] if r[0] < 0 else r[1]} is out of range for {num_classes} classes")
    return (self.unsqueeze(-1) == type(self).arange(num_classes, device=self.device)).cast(dtypes.int64)

  def cross_entropy(self, target: Self, reduction: str = "mean", label_smoothing: float = 0.0,
                    ignore_index: int = -100) -> Self:
    """Logits (N, C) against class indices (N,) or class probabilities (N, C); like torch's cross_entropy (labels equal
    to ignore_index count for nothing). Labels must be integers in 0..C-1 (checked: this reads labels back unless
    they came from host data)."""
    if reduction not in ("mean", "sum", "none"): raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    c, keep = self.shape[-1], None
    if target.shape == self.shape[:-1]:
      if not target.dtype.is_int:
        raise TypeError(f"cross_entropy labels must be integer class indices (shape {self.shape[:-1]}), got {target.dtype.name}; "
                        f"class probabilities would have the logits' shape {self.shape}")
      lo, hi = target._int_range() if target.numel() else (0, 0)
      if lo <= ignore_index <= hi:   # some labels may be ignored: check the others
        keep = target != ignore_index
        lo, hi = keep._select(target, 0)._int_range()
      if lo < 0 or hi >= c:
        raise IndexError(f"cross_entropy label {lo if lo < 0 else hi} is out of range for {c} classes (labels are 0..{c - 1})")
      probs = (target.unsqueeze(-1) == type(self).arange(c, device=self.device)).cast(self.dtype)
    elif target.shape == self.shape: probs = target
    else:
      raise ValueError(f"cross_entropy target must have shape {self.shape[:-1]} (class indices) or {self.shape} "
                       f"(probabilities), got {target.shape}")
    if label_smoothing: probs = probs * (1 - label_smoothing) + label_smoothing / c
    loss = -(self.log_softmax(-1) * probs).sum(-1)
    if keep is not None:
      loss = keep._select(loss, 0)
      return loss.sum() / keep.sum() if reduction == "mean" else loss.sum() if reduction == "sum" else loss
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss

  def binary_cross_entropy(self, target: Self) -> Self:
    """Mean BCE of probabilities `self` against `target`."""
    return -(target * self.log() + (1 - target) * (1 - self).log()).mean()
