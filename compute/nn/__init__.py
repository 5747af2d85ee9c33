"""torch.nn's shape: Module and Parameter (compute.nn.module), the layers (compute.nn.layers), compute.nn.functional,
and parameters(obj) for models that are plain objects."""
from __future__ import annotations
from compute.tensor import Tensor
from compute.nn import functional
from compute.nn.module import Module, Parameter, Sequential, ModuleList, RemovableHandle
from compute.nn.layers import (Linear, Conv1d, Conv2d, Embedding, LayerNorm, RMSNorm, Dropout, MaxPool2d, AvgPool2d, Flatten,
                               Identity, ReLU, GELU, SiLU, Sigmoid, Tanh)

__all__ = ["functional", "Module", "Parameter", "Sequential", "ModuleList", "RemovableHandle", "Linear", "Conv1d", "Conv2d", "Embedding", "LayerNorm",
           "RMSNorm", "Dropout", "MaxPool2d", "AvgPool2d", "Flatten", "Identity", "ReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "parameters"]


def parameters(obj) -> list[Tensor]:
  """Every Tensor reachable through attributes, lists, tuples and dicts of `obj` (each once, in order); of a Module,
  its parameters()."""
  out, seen = [], set()
  def walk(o):
    if isinstance(o, Module): found = list(o.parameters())
    elif isinstance(o, Tensor): found = [o]
    else:
      for x in (o if isinstance(o, (list, tuple)) else o.values() if isinstance(o, dict) else vars(o).values() if hasattr(o, "__dict__") else ()):
        walk(x)
      return
    for t in found:
      if id(t) not in seen: seen.add(id(t)); out.append(t)
  walk(obj)
  return out
