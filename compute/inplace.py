"""In-place updates (a mixin of Tensor): add_, sub_, mul_, div_, clamp_, zero_, fill_, copy_, ..., `+=` and friends,
__setitem__ and assign, with PyTorch's aliasing: the tensor object keeps its identity, and a view of it (or the tensor
it is a view of, and that tensor's other views) sees the change (compute/movement.py says what makes a view).

A tensor's value is a lazy graph node, never mutated: an in-place update gives the root tensor a new node (for a
view, the root's node with the view's region replaced through the inverse of the view steps) and every live view of
the root is made again from it. Autograd follows PyTorch: the update is recorded (gradients reach the old value and
the operand), an in-place update of a leaf that requires grad (or of a view of one) is an error while gradients are
on, and assign() replaces the value without recording anything (for optimizer updates)."""
from __future__ import annotations
from typing import Self
import numpy as np
from compute.dtypes import DType, dtypes
from compute.runtime import Capture
from compute.core import TensorCore


def _castable(src: DType, dst: DType) -> bool:
  """numpy's same_kind rule, for storing a result of type src into a tensor of type dst."""
  np_of = lambda d: np.dtype(d.np) if d.np is not None else np.dtype(np.float32)
  return bool(np.can_cast(np_of(src), np_of(dst), "same_kind"))


class InPlaceOps(TensorCore):
  __slots__ = ()

  def _root(self) -> Self: return self._base if self._base is not None else self

  def _write(self, new: Self, tracked: bool = True) -> Self:
    """Give this tensor (and so its root and every view of the root) the value `new` (this shape; cast to this
    dtype). tracked: record it for autograd (with gradients on), else replace the value only."""
    if new.shape != self.shape: raise ValueError(f"in-place result of shape {new.shape} for a tensor of shape {self.shape}")
    if new.device != self.device: raise ValueError(f"in-place value on {new.device} for a tensor on {self.device}; use .to() first")
    if new.dtype is not self.dtype:
      if tracked and not _castable(new.dtype, self.dtype):
        raise TypeError(f"the result type {new.dtype.name} cannot be stored in place into a {self.dtype.name} tensor")
      new = new.cast(self.dtype)
    root = self._root()
    # through a detached view (x.detach()) the update is not recorded, as in PyTorch
    tracked = tracked and TensorCore.grad_enabled and not any(s[0] == "detach" for s in self._view)
    if tracked and root.requires_grad and root._ctx is None:
      what = "a view of a leaf tensor" if root is not self else "a leaf tensor"
      raise RuntimeError(f"{what} that requires grad is used in an in-place operation; do it under no_grad() or use assign()")
    if not tracked: new = new.detach()
    if root is not self:   # write through the view steps: the values along the chain, then their inverses backwards
      chain = [root]
      for step in self._view[:-1]: chain.append(chain[-1]._step(step))
      for step, parent in zip(reversed(self._view), reversed(chain)): new = parent._unstep(step, new)
    if Capture.active is not None: Capture.active.updated(root, root.lazydata)   # compute.jit replays updates of arguments
    if tracked: root.lazydata, root._ctx, root.requires_grad = new.lazydata, new._ctx, new.requires_grad or root.requires_grad
    else: root.lazydata = new.lazydata
    if root._views is not None:
      for v in list(root._views.values()): v._refresh()
    return self

  def _unstep(self, step: tuple, value: Self) -> Self:
    """self with `value` written into the part that view `step` of self shows."""
    kind, *arg = step
    if kind == "reshape": return value.reshape(self.shape)
    if kind == "permute": return value.permute([arg[0].index(i) for i in range(self.ndim)])
    if kind == "getitem": return self._put(arg[0], value)
    if kind == "detach": return value
    if kind == "diagonal": return self._undiagonal(value, *arg)
    raise RuntimeError(f"cannot write into an expanded view: its elements share memory ({self.shape} expanded to {arg[0]}); "
                       "use .contiguous() first")

  def _refresh(self) -> None:
    """Make this view again from its root's current value (and autograd node)."""
    prev, TensorCore.grad_enabled = TensorCore.grad_enabled, True
    try:
      t = self._root()
      for step in self._view: t = t._step(step)
    finally: TensorCore.grad_enabled = prev
    self.lazydata, self._ctx, self.requires_grad = t.lazydata, t._ctx, t.requires_grad

  def assign(self, x) -> Self:
    """Replace this tensor's value (same shape; cast to this dtype) without recording it for autograd, e.g. for
    optimizer updates; views see it like any in-place update."""
    if not isinstance(x, TensorCore): x = type(self)(x, device=self.device, dtype=self.dtype)
    if x.shape != self.shape: raise ValueError(f"assign of shape {x.shape} to a tensor of shape {self.shape}")
    if x.device != self.device: raise ValueError(f"assign from {x.device} to a tensor on {self.device}; use .to() first")
    return self._write(x, tracked=False)

  def _inplace(self, result: Self) -> Self:
    """Store an op's result (broadcast to this shape only if it already is) in place."""
    if result.shape != self.shape:
      raise ValueError(f"in-place result of shape {result.shape} does not match the tensor's shape {self.shape} (no broadcasting of self)")
    return self._write(result)

  def __setitem__(self, idx, value) -> None:
    """In place, like PyTorch: views of this tensor (and the tensor it is a view of) see the change."""
    self._write(self._put(idx, value))

  def copy_(self, src) -> Self:
    """Copy src (broadcast to this shape, cast to this dtype) into this tensor, recorded for autograd."""
    return self._write(self._value_for(src, self.shape))

  def add_(self, x, alpha=1) -> Self: return self._inplace(self.add(x if alpha == 1 else x * alpha))
  def sub_(self, x, alpha=1) -> Self: return self._inplace(self.sub(x if alpha == 1 else x * alpha))
  def mul_(self, x) -> Self: return self._inplace(self.mul(x))
  def div_(self, x) -> Self: return self._inplace(self.div(x))
  def pow_(self, x) -> Self: return self._inplace(self.pow(x))
  def neg_(self) -> Self: return self._inplace(self.neg())
  def abs_(self) -> Self: return self._inplace(self.abs())
  def exp_(self) -> Self: return self._inplace(self.exp())
  def log_(self) -> Self: return self._inplace(self.log())
  def sqrt_(self) -> Self: return self._inplace(self.sqrt())
  def relu_(self) -> Self: return self._inplace(self.relu())
  def sigmoid_(self) -> Self: return self._inplace(self.sigmoid())
  def tanh_(self) -> Self: return self._inplace(self.tanh())
  def clamp_(self, min=None, max=None) -> Self: return self._inplace(self.clamp(min, max))
  clip_ = clamp_
  def maximum_(self, x) -> Self: return self._inplace(self.maximum(x))
  def minimum_(self, x) -> Self: return self._inplace(self.minimum(x))
  def floor_(self) -> Self: return self._inplace(self.floor())
  def masked_fill_(self, mask, value) -> Self: return self._inplace(self.masked_fill(mask, value))
  def scatter_(self, dim: int, index, src, reduce: str | None = None) -> Self:
    return self._inplace(self.scatter(dim, index, src, reduce))
  def fill_(self, value) -> Self:
    return self._write(type(self).full(self.shape, value, dtype=self.dtype, device=self.device))
  def zero_(self) -> Self: return self.fill_(False if self.dtype is dtypes.bool else 0)

  def __iadd__(self, x): return self.add_(x)
  def __isub__(self, x): return self.sub_(x)
  def __imul__(self, x): return self.mul_(x)
  def __itruediv__(self, x): return self.div_(x)
  def __ifloordiv__(self, x): return self._inplace(self.floordiv(x))
  def __imod__(self, x): return self._inplace(self.mod(x))
  def __ipow__(self, x): return self.pow_(x)
  def __iand__(self, x): return self._inplace(self & x)
  def __ior__(self, x): return self._inplace(self | x)
  def __ixor__(self, x): return self._inplace(self ^ x)
  def __imatmul__(self, x): return self._inplace(self @ x)
