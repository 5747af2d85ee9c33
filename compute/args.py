"""PyTorch's argument spellings for Tensor methods: numpy's names are accepted as aliases where they mean the same thing
(axis= for dim=, keepdims= for keepdim=), and numpy-only arguments are refused with the PyTorch spelling to use."""
from __future__ import annotations
import functools
import inspect
from typing import Callable, TypeVar

ALIASES = {"axis": "dim", "keepdims": "keepdim", "axes": "dims"}
# numpy argument -> what to write instead
NUMPY_ONLY = {"ddof": "correction= (or unbiased=)", "out": "the returned tensor (out= is not supported; copy_() stores into a tensor)",
              "initial": "a separate op (initial= is not supported)", "where": "where(mask, x, fill) before reducing (where= is not supported)",
              "kind": "stable=True", "a_min": "min=", "a_max": "max="}
FnT = TypeVar("FnT", bound=Callable)


def torch_args(fn: FnT) -> FnT:
  """Map numpy keyword aliases to fn's PyTorch parameters; refuse numpy-only keywords naming the PyTorch spelling."""
  params = inspect.signature(fn).parameters
  aliases = {a: d for a, d in ALIASES.items() if d in params and a not in params}
  refused = {k: v for k, v in NUMPY_ONLY.items() if k not in params}

  @functools.wraps(fn)
  def wrapped(*args, **kw):
    if kw:
      for k in kw.keys() & refused.keys(): raise TypeError(f"{fn.__name__}() takes PyTorch's arguments: use {refused[k]}, not numpy's {k}=")
      for a, d in aliases.items():
        if a in kw:
          if d in kw: raise TypeError(f"{fn.__name__}() got both {d}= and its numpy alias {a}=")
          kw[d] = kw.pop(a)
    return fn(*args, **kw)
  return wrapped  # type: ignore[return-value]
