"""Layers as torch.nn has them (arguments, defaults and initialisation): Linear, Conv1d, Conv2d, Embedding, LayerNorm,
RMSNorm, Dropout, Flatten, Identity and the activations ReLU, GELU, SiLU, Sigmoid, Tanh."""
from __future__ import annotations
import math
from compute.nn import functional as F
from compute.nn.module import Module, Parameter
from compute.tensor import Tensor


def _uniform(shape: tuple[int, ...], bound: float, device: str | None, dtype) -> Parameter:
  """U(-bound, bound): PyTorch's default for Linear and ConvNd weights and biases, bound = 1/sqrt(fan_in)."""
  return Parameter(Tensor.uniform(*shape, low=-bound, high=bound, device=device, dtype=dtype))


class Linear(Module):
  """y = x @ weight.T + bias, weight (out_features, in_features)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True, device: str | None = None, dtype=None):
    super().__init__()
    self.in_features, self.out_features = in_features, out_features
    bound = 1 / math.sqrt(in_features) if in_features else 0.0
    self.weight = _uniform((out_features, in_features), bound, device, dtype)
    self.bias = _uniform((out_features,), bound, device, dtype) if bias else None

  def forward(self, input: Tensor) -> Tensor: return F.linear(input, self.weight, self.bias)
  def extra_repr(self) -> str: return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _ConvNd(Module):
  nd = 0

  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
               bias: bool = True, padding_mode: str = "zeros", device: str | None = None, dtype=None):
    super().__init__()
    if in_channels % groups or out_channels % groups:
      raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by groups ({groups})")
    if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
      raise ValueError(f"padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got {padding_mode!r}")
    self.in_channels, self.out_channels, self.groups, self.padding_mode = in_channels, out_channels, groups, padding_mode
    self.kernel_size = F._tuple(kernel_size, self.nd, "kernel_size")
    self.stride, self.dilation = F._tuple(stride, self.nd, "stride"), F._tuple(dilation, self.nd, "dilation")
    self.padding = padding if isinstance(padding, str) else F._tuple(padding, self.nd, "padding")
    self._pads = F._conv_pads(self.padding, self.kernel_size, self.stride, self.dilation)
    bound = 1 / math.sqrt(in_channels // groups * math.prod(self.kernel_size))
    self.weight = _uniform((out_channels, in_channels // groups, *self.kernel_size), bound, device, dtype)
    self.bias = _uniform((out_channels,), bound, device, dtype) if bias else None

  def forward(self, input: Tensor) -> Tensor:
    conv = F.conv1d if self.nd == 1 else F.conv2d
    if self.padding_mode == "zeros": return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
    x = F.pad(input, [p for pair in reversed(self._pads) for p in pair], mode=self.padding_mode)
    return conv(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

  def extra_repr(self) -> str:
    return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
            + (f", dilation={self.dilation}" if any(d != 1 for d in self.dilation) else "") + (f", groups={self.groups}" if self.groups != 1 else "")
            + ("" if self.bias is not None else ", bias=False") + (f", padding_mode={self.padding_mode}" if self.padding_mode != "zeros" else ""))


class Conv1d(_ConvNd):
  """(N, Cin, L) -> (N, Cout, Lout); weight (Cout, Cin/groups, K)."""
  nd = 1


class Conv2d(_ConvNd):
  """(N, Cin, H, W) -> (N, Cout, OH, OW); weight (Cout, Cin/groups, KH, KW)."""
  nd = 2


class Embedding(Module):
  """A table of num_embeddings vectors (weight ~ N(0, 1); the padding_idx row zero and never trained)."""
  def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, max_norm: float | None = None,
               norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False, _weight: Tensor | None = None,
               device: str | None = None, dtype=None):
    super().__init__()
    if padding_idx is not None:
      if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"padding_idx {padding_idx} is out of range for {num_embeddings} embeddings")
      padding_idx %= num_embeddings
    self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
    self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, scale_grad_by_freq, sparse
    if _weight is not None:
      if _weight.shape != (num_embeddings, embedding_dim):
        raise ValueError(f"_weight must have shape ({num_embeddings}, {embedding_dim}), got {_weight.shape}")
      self.weight = Parameter(_weight)
      return
    w = Tensor.randn(num_embeddings, embedding_dim, device=device, dtype=dtype)
    if padding_idx is not None: w[padding_idx] = 0
    self.weight = Parameter(w)

  def forward(self, input: Tensor) -> Tensor:
    return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse)
  def extra_repr(self) -> str:
    return f"{self.num_embeddings}, {self.embedding_dim}" + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class LayerNorm(Module):
  """Normalizes the last dims (normalized_shape); weight ones and bias zeros when elementwise_affine."""
  def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
               device: str | None = None, dtype=None):
    super().__init__()
    self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    self.eps, self.elementwise_affine = eps, elementwise_affine
    self.weight = Parameter(Tensor.full(self.normalized_shape, 1.0, dtype, device)) if elementwise_affine else None
    self.bias = Parameter(Tensor.full(self.normalized_shape, 0.0, dtype, device)) if elementwise_affine and bias else None

  def forward(self, input: Tensor) -> Tensor: return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)
  def extra_repr(self) -> str: return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
  """x / sqrt(mean(x^2) + eps) over the last dims (eps=None: the dtype's machine epsilon), * weight (ones)."""
  def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device: str | None = None, dtype=None):
    super().__init__()
    self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    self.eps, self.elementwise_affine = eps, elementwise_affine
    self.weight = Parameter(Tensor.full(self.normalized_shape, 1.0, dtype, device)) if elementwise_affine else None

  def forward(self, input: Tensor) -> Tensor: return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)
  def extra_repr(self) -> str: return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Module):
  """F.dropout while training (train()), the identity after eval()."""
  def __init__(self, p: float = 0.5, inplace: bool = False):
    super().__init__()
    if not 0.0 <= p <= 1.0: raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    self.p, self.inplace = p, inplace

  def forward(self, input: Tensor) -> Tensor: return F.dropout(input, self.p, self.training, self.inplace)
  def extra_repr(self) -> str: return f"p={self.p}, inplace={self.inplace}"


class MaxPool2d(Module):
  """F.max_pool2d as a layer; return_indices: forward gives (max, indices)."""
  def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False, ceil_mode: bool = False):
    super().__init__()
    self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
    self.return_indices, self.ceil_mode = return_indices, ceil_mode

  def forward(self, input: Tensor):
    return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode, self.return_indices)


class AvgPool2d(Module):
  def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None):
    super().__init__()
    self.kernel_size, self.stride, self.padding, self.ceil_mode = kernel_size, stride, padding, ceil_mode
    self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

  def forward(self, input: Tensor) -> Tensor:
    return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad, self.divisor_override)


class Flatten(Module):
  def __init__(self, start_dim: int = 1, end_dim: int = -1):
    super().__init__()
    self.start_dim, self.end_dim = start_dim, end_dim

  def forward(self, input: Tensor) -> Tensor: return input.flatten(self.start_dim, self.end_dim)
  def extra_repr(self) -> str: return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Module):
  def forward(self, input: Tensor) -> Tensor: return input


class ReLU(Module):
  def forward(self, input: Tensor) -> Tensor: return F.relu(input)


class GELU(Module):
  def __init__(self, approximate: str = "none"):
    super().__init__()
    self.approximate = approximate

  def forward(self, input: Tensor) -> Tensor: return F.gelu(input, self.approximate)
  def extra_repr(self) -> str: return f"approximate={self.approximate!r}"


class SiLU(Module):
  def forward(self, input: Tensor) -> Tensor: return F.silu(input)


class Sigmoid(Module):
  def forward(self, input: Tensor) -> Tensor: return input.sigmoid()


class Tanh(Module):
  def forward(self, input: Tensor) -> Tensor: return input.tanh()
