"""torch.nn.functional's names, signatures and documented semantics (defaults, reductions, shapes), composed from Tensor's
differentiable ops: activations, losses, linear, convolution, pooling, dropout, normalization, embedding, attention,
pad, one_hot, normalize. Class dims are PyTorch's: dim 1 of (N, C, d1, ...) inputs, dim 0 of a 1-D input."""
from __future__ import annotations
import math
import warnings
from collections.abc import Sequence
import numpy as np
from compute.dtypes import dtypes
from compute.tensor import Tensor


def _tuple(v, n: int, what: str) -> tuple[int, ...]:
  t = (v,) * n if isinstance(v, int) else tuple(v)
  if len(t) != n or any(not isinstance(x, int) or x < 0 for x in t):
    raise ValueError(f"{what} must be a non-negative int or {n} of them, got {v!r}")
  return t


def _reduction(reduction: str, size_average: bool | None, reduce: bool | None) -> str:
  """The legacy size_average/reduce arguments (None: not given, i.e. True) folded into `reduction`, which is checked."""
  if size_average is not None or reduce is not None:
    reduction = "none" if reduce is False else "sum" if size_average is False else "mean"
  if reduction not in ("none", "mean", "sum"): raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
  return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
  return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


# --- activations
def relu(input: Tensor, inplace: bool = False) -> Tensor: return input.relu_() if inplace else input.relu()
def silu(input: Tensor, inplace: bool = False) -> Tensor: return input.copy_(input.silu()) if inplace else input.silu()
def sigmoid(input: Tensor) -> Tensor: return input.sigmoid()
def tanh(input: Tensor) -> Tensor: return input.tanh()
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
  out = input.leaky_relu(negative_slope)
  return input.copy_(out) if inplace else out


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
  """x * Phi(x) with the Gaussian CDF Phi exact (erf), or its tanh approximation with approximate='tanh'."""
  if approximate == "tanh": return input.gelu()
  if approximate != "none": raise ValueError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")
  x = input if input.dtype.is_float else input.float()
  return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())


def _softmax_dim(ndim: int, what: str) -> int:
  warnings.warn(f"implicit dimension choice for {what} is deprecated in PyTorch; pass dim", UserWarning, stacklevel=3)
  return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, *, dtype=None) -> Tensor:
  """dim=None picks PyTorch's legacy implicit dim (0 for 0-, 1- and 3-D inputs, else 1) with a warning."""
  x = input if dtype is None else input.cast(dtype)
  return x.softmax(_softmax_dim(x.ndim, "softmax") if dim is None else dim)


def log_softmax(input: Tensor, dim: int | None = None, *, dtype=None) -> Tensor:
  x = input if dtype is None else input.cast(dtype)
  return x.log_softmax(_softmax_dim(x.ndim, "log_softmax") if dim is None else dim)


# --- losses
def _classes_last(x: Tensor) -> Tensor:
  """(N, C, d1, ...) -> (N, d1, ..., C); (C,) and (N, C) stay."""
  return x if x.ndim <= 2 else x.permute(0, *range(2, x.ndim), 1)


def _nll(x: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, what: str) -> tuple[Tensor, Tensor, Tensor]:
  """x (..., C) of log-probabilities against class indices (...): per element -w[y] * x[y] (0 where y == ignore_index),
  the weights w[y] (0 where ignored), and the mask of the targets that count."""
  c = x.shape[-1]
  if target.shape != x.shape[:-1]:
    raise ValueError(f"{what}: class-index target must have shape {x.shape[:-1]} for an input with {c} classes, got {target.shape}")
  if not target.dtype.is_int:
    raise TypeError(f"{what}: class-index target must be an integer tensor, got {target.dtype.name} (class probabilities are "
                    "floats of the input's shape)")
  if weight is not None and weight.shape != (c,): raise ValueError(f"{what}: weight must have shape ({c},), got {weight.shape}")
  keep = target != ignore_index
  if target.numel():
    lo, hi = target._int_range()   # known without a read-back for host data
    if lo <= ignore_index <= hi: lo, hi = keep._select(target, 0)._int_range()
    if lo < 0 or hi >= c: raise IndexError(f"{what}: target {lo if lo < 0 else hi} is out of range for {c} classes (0..{c - 1})")
  hit = (target.unsqueeze(-1) == Tensor.arange(c, device=x.device)) & keep.unsqueeze(-1)
  w = hit._select(1.0 if weight is None else weight, 0.0)
  return -hit._select(x if weight is None else x * weight, 0).sum(-1), w.sum(-1), keep


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean") -> Tensor:
  """Log-probabilities (C), (N, C) or (N, C, d1, ...) against class indices (), (N) or (N, d1, ...); 'mean' divides by
  the summed weights of the targets that count."""
  reduction = _reduction(reduction, size_average, reduce)
  loss, w, _ = _nll(_classes_last(input), target, weight, ignore_index, "nll_loss")
  return loss.sum() / w.sum() if reduction == "mean" else _reduce(loss, reduction)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
  """Logits against class indices (the input's shape without the class dim) or class probabilities (the input's shape).
  label_smoothing mixes the target with the uniform distribution over the C classes."""
  reduction = _reduction(reduction, size_average, reduce)
  if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
  if input.ndim == 0: raise ValueError("cross_entropy needs an input with a class dim, got a 0-d tensor")
  logp = _classes_last(input.log_softmax(0 if input.ndim == 1 else 1))
  c = logp.shape[-1]
  wlogp = logp if weight is None else logp * weight
  if target.shape == input.shape:
    if not target.dtype.is_float: raise TypeError(f"cross_entropy: class probabilities must be floats, got {target.dtype.name}")
    p = _classes_last(target)
    if label_smoothing: p = p * (1 - label_smoothing) + label_smoothing / c
    return _reduce(-(wlogp * p).sum(-1), reduction)
  loss, w, keep = _nll(logp, target, weight, ignore_index, "cross_entropy")
  if label_smoothing:
    loss = (1 - label_smoothing) * loss + label_smoothing / c * keep._select(-wlogp.sum(-1), 0)
  return loss.sum() / w.sum() if reduction == "mean" else _reduce(loss, reduction)


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
  return _reduce((input - target).square(), _reduction(reduction, size_average, reduce))


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
  return _reduce((input - target).abs(), _reduction(reduction, size_average, reduce))


def _same_size(input: Tensor, target: Tensor, what: str) -> None:
  if input.shape != target.shape: raise ValueError(f"{what}: target of shape {target.shape} must have the input's shape {input.shape}")


def _log_clamped(x: Tensor) -> Tensor:
  """log(x) clamped to >= -100 as PyTorch's binary_cross_entropy does; x == 0 gives -100 and a zero gradient."""
  pos = x > 0
  return pos._select(pos._select(x, 1.0).log().maximum(-100.0), -100.0)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
  """Probabilities in [0, 1] against targets of the same shape; `weight` rescales each element (broadcast)."""
  reduction = _reduction(reduction, size_average, reduce)
  _same_size(input, target, "binary_cross_entropy")
  loss = -(target * _log_clamped(input) + (1 - target) * _log_clamped(1 - input))
  return _reduce(loss if weight is None else loss * weight, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, reduce=None,
                                     reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
  """Logits against targets of the same shape, computed stably as pos_weight*y*softplus(-x) + (1-y)*softplus(x);
  pos_weight weighs the positive term per class (broadcast along the last dim)."""
  reduction = _reduction(reduction, size_average, reduce)
  _same_size(input, target, "binary_cross_entropy_with_logits")
  pos = target if pos_weight is None else target * pos_weight
  loss = pos * (-input).softplus() + (1 - target) * input.softplus()
  return _reduce(loss if weight is None else loss * weight, reduction)


# --- linear, convolution, pooling
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor: return input.linear(weight, bias)


def _conv_pads(padding, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int]) -> list[tuple[int, int]]:
  """(before, after) per spatial dim for padding 'valid', 'same' (the odd extra after, as PyTorch does) or ints."""
  if padding == "valid": return [(0, 0)] * len(kernel)
  if padding == "same":
    if any(s != 1 for s in stride): raise ValueError(f"padding='same' needs stride 1, got stride {tuple(stride)}")
    return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation)]
  if isinstance(padding, str): raise ValueError(f"padding must be 'valid', 'same', an int or a tuple of ints, got {padding!r}")
  return [(p, p) for p in _tuple(padding, len(kernel), "padding")]


def _conv(input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups: int, nd: int) -> Tensor:
  if input.ndim not in (nd + 1, nd + 2) or weight.ndim != nd + 2:
    raise ValueError(f"conv{nd}d needs a {nd + 2}-D input (N, C, ...) or a {nd + 1}-D unbatched one and a {nd + 2}-D weight, "
                     f"got {input.shape} and {weight.shape}")
  x = input.unsqueeze(0) if input.ndim == nd + 1 else input
  st, dil = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
  pads = _conv_pads(padding, weight.shape[2:], st, dil)
  if any(b != a for b, a in pads):
    x, pads = x.pad(((0, 0), (0, 0), *pads)), [(0, 0)] * nd
  w = weight
  if nd == 1: x, w, st, dil, pads = x.unsqueeze(2), w.unsqueeze(2), (1, *st), (1, *dil), [(0, 0), *pads]
  out = x.conv2d(w, bias, st, tuple(b for b, _ in pads), dil, groups)
  if nd == 1: out = out.squeeze(2)
  return out.squeeze(0) if input.ndim == nd + 1 else out


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
  """(N, Cin, L) or (Cin, L) with weight (Cout, Cin/groups, K); padding: int, tuple, 'valid' or 'same'."""
  return _conv(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
  """(N, Cin, H, W) or (Cin, H, W) with weight (Cout, Cin/groups, KH, KW); padding: int, pair, 'valid' or 'same'."""
  return _conv(input, weight, bias, stride, padding, dilation, groups, 2)


def _pool_geometry(input: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool):
  """kernel, stride, padding, dilation pairs and the extra right/bottom padding ceil_mode needs. PyTorch's output size:
  floor or ceil((n + 2p - d(k - 1) - 1) / s) + 1, less one where the last window would start in the right padding."""
  if input.ndim not in (3, 4): raise ValueError(f"2-D pooling needs a (N, C, H, W) or (C, H, W) input, got {input.shape}")
  k = _tuple(kernel_size, 2, "kernel_size")
  s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _tuple(stride, 2, "stride")
  p, d = _tuple(padding, 2, "padding"), _tuple(dilation, 2, "dilation")
  if any(pi > ki // 2 for pi, ki in zip(p, k)): raise ValueError(f"pooling padding {p} must be at most half the kernel size {k}")
  extra = []
  for n, ki, si, pi, di in zip(input.shape[-2:], k, s, p, d):
    span = n + 2 * pi - di * (ki - 1) - 1
    if span < 0: raise ValueError(f"pooling window {k} (dilation {d}) is larger than the padded input {input.shape[-2:]}")
    out = (-(-span // si) if ceil_mode else span // si) + 1
    if ceil_mode and (out - 1) * si >= n + pi: out -= 1
    extra.append(max(0, (out - 1) * si + di * (ki - 1) + 1 - (n + 2 * pi)))
  return k, s, p, d, extra


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
  """Window maxima; with return_indices (max, indices): each max's position h * W + w in its input plane, int64."""
  k, s, p, d, extra = _pool_geometry(input, kernel_size, stride, padding, dilation, ceil_mode)
  return input._max_pool(k, s, ((p[0], p[0] + extra[0]), (p[1], p[1] + extra[1])), d, return_indices)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
  """Window means; the count includes the zero padding (count_include_pad) but never what ceil_mode adds beyond it."""
  k, s, p, _, extra = _pool_geometry(input, kernel_size, stride, padding, 1, ceil_mode)
  if not any(extra) and count_include_pad and divisor_override is None: return input.avg_pool2d(k, s, p)
  pads = ((p[0], p[0] + extra[0]), (p[1], p[1] + extra[1]))
  total = input.pad(((0, 0),) * (input.ndim - 2) + pads).avg_pool2d(k, s) * (k[0] * k[1])
  if divisor_override is not None: return total / divisor_override
  counted = Tensor.ones(*input.shape[-2:], device=input.device).pad(tuple((pi, pi) for pi in p), value=1.0 if count_include_pad else 0.0)
  return total / (counted.pad(((0, extra[0]), (0, extra[1]))).unsqueeze(0).avg_pool2d(k, s).squeeze(0) * (k[0] * k[1]))


# --- dropout, normalization, embedding
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
  """Zeroes each element with probability p (Tensor.manual_seed's generator) and scales the rest by 1/(1-p) while
  training; the input itself otherwise."""
  if not 0.0 <= p <= 1.0: raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
  if not training or p == 0.0: return input
  out = input * 0 if p == 1.0 else (Tensor.rand(*input.shape, device=input.device) >= p)._select(input * (1 / (1 - p)), 0)
  return input.copy_(out) if inplace else out


def _normalized_axes(input: Tensor, normalized_shape, what: str) -> tuple[int, ...]:
  ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
  if len(ns) > input.ndim or input.shape[input.ndim - len(ns):] != ns:
    raise ValueError(f"{what}: normalized_shape {ns} must equal the input's last dims, got an input of shape {input.shape}")
  return tuple(range(input.ndim - len(ns), input.ndim))


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
  """(x - mean) / sqrt(biased var + eps) over the last len(normalized_shape) dims, then * weight + bias."""
  axes = _normalized_axes(input, normalized_shape, "layer_norm")
  d = input - input.mean(axes, True)
  y = d * ((d * d).mean(axes, True) + eps).rsqrt()
  if weight is not None: y = y * weight
  return y if bias is None else y + bias


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
  """x / sqrt(mean(x^2) + eps) over the last dims, then * weight; eps=None is the machine epsilon of the input's dtype."""
  axes = _normalized_axes(input, normalized_shape, "rms_norm")
  if not input.dtype.is_float: raise TypeError(f"rms_norm needs a floating-point input, got {input.dtype.name}")
  if eps is None: eps = float(np.finfo(input.dtype.np).eps) if input.dtype.np is not None else 2.0 ** -7   # bfloat16: 7 mantissa bits
  y = input * ((input * input).mean(axes, True) + eps).rsqrt()
  return y if weight is None else y * weight


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
  """Rows of weight (num_embeddings, dim) at the integer indices of input: input.shape + (dim,). The row at padding_idx
  gets no gradient."""
  if max_norm is not None or scale_grad_by_freq or sparse:
    raise NotImplementedError("embedding supports neither max_norm, scale_grad_by_freq nor sparse; leave them at their defaults")
  if not input.dtype.is_int: raise TypeError(f"embedding indices must be an integer tensor, got {input.dtype.name}")
  if weight.ndim != 2: raise ValueError(f"embedding weight must be 2-D (num_embeddings, embedding_dim), got {weight.shape}")
  out = weight[input]
  if padding_idx is None: return out
  n = weight.shape[0]
  if not -n <= padding_idx < n: raise ValueError(f"padding_idx {padding_idx} is out of range for {n} embeddings")
  return (input != padding_idx % n).unsqueeze(-1)._select(out, out.detach())


# --- attention
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Tensor:
  """softmax(q @ k^T * scale + mask) @ v over (..., L, E), (..., S, E), (..., S, Ev): scale defaults to 1/sqrt(E);
  attn_mask is a bool mask (True: attend) or a float bias broadcast to (..., L, S); is_causal masks the upper
  triangle (top-left aligned); enable_gqa shares each key/value head among query-heads / kv-heads query heads (dim -3)."""
  if is_causal and attn_mask is not None: raise ValueError("scaled_dot_product_attention takes attn_mask or is_causal=True, not both")
  if enable_gqa and key.shape[-3] != query.shape[-3]:
    hq, hk = query.shape[-3], key.shape[-3]
    if hq % hk or value.shape[-3] != hk:
      raise ValueError(f"enable_gqa needs query heads ({hq}) a multiple of key/value heads ({hk}, {value.shape[-3]})")
    def share(t: Tensor) -> Tensor:
      return t.unsqueeze(-3).expand(*t.shape[:-2], hq // hk, *t.shape[-2:]).reshape(*t.shape[:-3], hq, *t.shape[-2:])
    key, value = share(key), share(value)
  scores = (query @ key.transpose(-2, -1)) * (1 / math.sqrt(query.shape[-1]) if scale is None else scale)
  if is_causal:
    lq, sk = query.shape[-2], key.shape[-2]
    scores = (Tensor.arange(lq, device=query.device).reshape(lq, 1) >= Tensor.arange(sk, device=query.device))._select(scores, float("-inf"))
  if attn_mask is not None: scores = attn_mask._select(scores, float("-inf")) if attn_mask.dtype is dtypes.bool else scores + attn_mask
  attn = scores.softmax(-1)
  return dropout(attn, dropout_p) @ value if dropout_p else attn @ value


# --- pad, one_hot, normalize
def _along(x: Tensor, d: int, lo: int, hi: int) -> Tensor: return x.shrink(tuple((lo, hi) if i == d else None for i in range(x.ndim)))


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
  """pad = (before, after) pairs from the last dim backwards. constant (value, default 0; negative pads crop), reflect
  (mirrors without repeating the edge), replicate (repeats the edge), circular (wraps around)."""
  if len(pad) % 2 or len(pad) // 2 > input.ndim:
    raise ValueError(f"pad {tuple(pad)} must hold (before, after) pairs for at most {input.ndim} dims")
  pairs = {input.ndim - 1 - i: (pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)}
  if mode == "constant": return input.pad(tuple(pairs.get(d, (0, 0)) for d in range(input.ndim)), value=0.0 if value is None else value)
  if mode not in ("reflect", "replicate", "circular"):
    raise ValueError(f"pad mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
  if value is not None: raise ValueError(f"pad mode {mode!r} takes no value")
  x = input
  for d, (b, a) in sorted(pairs.items()):
    n = x.shape[d]
    if b < 0 or a < 0 or (mode == "reflect" and max(b, a) >= n) or (mode == "circular" and max(b, a) > n) or (mode == "replicate" and n == 0):
      raise ValueError(f"pad {mode}: padding ({b}, {a}) of dim {d} must be non-negative and "
                       f"{'below' if mode == 'reflect' else 'at most'} its size {n}")
    if mode == "reflect": left, right = _along(x, d, 1, b + 1).flip(d), _along(x, d, n - 1 - a, n - 1).flip(d)
    elif mode == "circular": left, right = _along(x, d, n - b, n), _along(x, d, 0, a)
    else: left, right = (_along(x, d, i, i + 1).expand(*(k if j == d else m for j, m in enumerate(x.shape))) for i, k in ((0, b), (n - 1, a)))
    x = Tensor.cat([t for t in (left, x, right) if t.shape[d]], dim=d)
  return x


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
  """int64 (..., num_classes); num_classes=-1 is the largest index + 1 (read back from the device)."""
  if num_classes == -1:
    if not tensor.numel(): raise ValueError("one_hot cannot infer the number of classes from an empty tensor; pass num_classes")
    num_classes = int(tensor.max().item()) + 1
  return tensor.one_hot(num_classes)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
  """input / max(||input||_p along dim, eps), p > 0 (math.inf: the largest magnitude)."""
  if not p > 0: raise ValueError(f"normalize needs p > 0, got {p}")
  a = input.abs()
  if p == math.inf: norm = a.gather(dim, a.argmax(dim, True))
  elif p == 2: norm = (input * input).sum(dim, True).sqrt()
  else: norm = (a if p == 1 else a ** p).sum(dim, True) ** (1 / p)
  return input / norm.maximum(eps)
