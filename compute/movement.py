"""Tensor movement ops that make new tensors (a mixin of Tensor): flip, cat, stack, repeat. The views (reshape/view,
permute, transpose, T, expand, flatten, squeeze, unsqueeze) and pad/shrink are TensorCore's (compute/core.py), basic
indexing is compute/indexing.py's. Shape errors raise at graph-build time, with the shapes in the message.

Views: what PyTorch returns as a view sharing its input's storage (reshape/view, permute, transpose, T, expand,
flatten, squeeze, unsqueeze, basic indexing, diagonal, detach) is registered as a view of its root tensor, with the steps
that make it from the root; an in-place change of the root or of any of its views is then seen by all of them
(compute/inplace.py). pad, flip, cat, repeat and advanced indexing make new tensors, as in PyTorch."""
from __future__ import annotations
from typing import Any, Self, Sequence
from compute import function
from compute.core import TensorCore, shape_arg


def _tensors_and_dim(first, others: tuple, dim: int, what: str) -> tuple[list, int]:
  """cat/stack arguments: ([tensors], dim) or (tensor, *tensors, dim=)."""
  if isinstance(first, (list, tuple)):
    if len(others) > 1 or (others and not isinstance(others[0], int)):
      raise TypeError(f"{what}(tensors, dim=0) takes a sequence of tensors and a dim, got extra arguments {others!r}")
    ts, dim = list(first), others[0] if others else dim
  else: ts = [first, *others]
  if not ts: raise ValueError(f"{what} needs at least one tensor")
  if not all(isinstance(t, TensorCore) for t in ts):
    raise TypeError(f"{what} takes tensors, got {', '.join(type(t).__name__ for t in ts if not isinstance(t, TensorCore))}")
  return ts, dim


class MovementOps(TensorCore):
  __slots__ = ()

  def flip(self, *dims, axis=None) -> Self:
    """Reverse the order along dims: flip(0), flip(0, 1), flip([0, 1]) like PyTorch, or numpy's flip(axis=None) (every dim)."""
    if dims and axis is not None: raise TypeError("flip takes dims or numpy's axis=, not both")
    which = shape_arg(dims) if dims else tuple(range(self.ndim)) if axis is None else tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(self._axis(a) for a in which)
    return function.Flip.apply(self, axes=axes) if axes and self.ndim else self

  def cat(self: TensorCore | Sequence[TensorCore], *others, dim: int = 0) -> Any:
    """Concatenate along `dim`: Tensor.cat([a, b, c], dim) like torch.cat, or a.cat(b, c, dim=dim)."""
    ts, d = _tensors_and_dim(self, others, dim, "cat")
    first = ts[0]
    d = first._axis(d)
    for t in ts:
      if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != d):
        raise ValueError(f"cat along dim {d} needs matching shapes elsewhere, got {[t.shape for t in ts]}")
    total, out, off = sum(t.shape[d] for t in ts), None, 0
    for t in ts:
      p = t.pad(tuple((off, total - off - t.shape[d]) if i == d else None for i in range(first.ndim)))
      out = p if out is None else out + p
      off += t.shape[d]
    return out

  def stack(self: TensorCore | Sequence[TensorCore], *others, dim: int = 0) -> Any:
    """Stack equal-shaped tensors along a new dim: Tensor.stack([a, b], dim) like torch.stack, or a.stack(b, dim=dim)."""
    ts, d = _tensors_and_dim(self, others, dim, "stack")
    if any(t.shape != ts[0].shape for t in ts): raise ValueError(f"stack needs equal shapes, got {[t.shape for t in ts]}")
    d = ts[0]._axis(d, ts[0].ndim + 1)
    return MovementOps.cat([t.unsqueeze(d) for t in ts], dim=d)

  def repeat(self, *repeats) -> Self:
    repeats = shape_arg(repeats)
    if len(repeats) < self.ndim: raise ValueError(f"repeat {repeats} has fewer entries than dims of {self.shape}")
    t = self.reshape((1,) * (len(repeats) - self.ndim) + self.shape)
    mid = tuple(x for n in t.shape for x in (1, n))
    big = tuple(x for r, n in zip(repeats, t.shape) for x in (r, n))
    return t.reshape(mid).expand(big).reshape(tuple(r * n for r, n in zip(repeats, t.shape)))
