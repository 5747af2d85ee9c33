"""Layers: nn.Linear and nn.Conv2d (weights initialised like PyTorch: uniform +-1/sqrt(fan_in)), and parameter discovery."""
from __future__ import annotations
import math
from compute.tensor import Tensor


def _uniform(shape: tuple[int, ...], bound: float, device: str | None) -> Tensor:
  return Tensor.uniform(*shape, low=-bound, high=bound, device=device, requires_grad=True)


class Linear:
  """y = x @ weight.T + bias, weight (out_features, in_features)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True, device: str | None = None):
    bound = 1 / math.sqrt(in_features)
    self.weight = _uniform((out_features, in_features), bound, device)
    self.bias = _uniform((out_features,), bound, device) if bias else None

  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight, self.bias)


class Conv2d:
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
               bias: bool = True, device: str | None = None):
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
    bound = 1 / math.sqrt(in_channels // groups * kh * kw)
    self.weight = _uniform((out_channels, in_channels // groups, kh, kw), bound, device)
    self.bias = _uniform((out_channels,), bound, device) if bias else None

  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


def parameters(obj) -> list[Tensor]:
  """Every Tensor reachable through attributes, lists, tuples and dicts of `obj` (each once, in order)."""
  out, seen = [], set()
  def walk(o):
    if isinstance(o, Tensor):
      if id(o) not in seen: seen.add(id(o)); out.append(o)
    elif isinstance(o, (list, tuple)):
      for x in o: walk(x)
    elif isinstance(o, dict):
      for x in o.values(): walk(x)
    elif hasattr(o, "__dict__"):
      for x in vars(o).values(): walk(x)
  walk(obj)
  return out
