"""The lazy graph: every tensor operation adds a node; nothing runs until a tensor is realized.

A node is a leaf (a realized BUFFER, a CONST, an ARANGE), an elementwise op, a REDUCE, a COPY to
another device, a CONTIGUOUS (forced materialization) or a VIEW: movement ops over a non-view base,
kept both as the op list (arg, replayed onto loads by the scheduler) and as the resulting tracker (st).
Once realized, a node turns into a BUFFER leaf and drops its sources, so its inputs can be freed.
"""
from __future__ import annotations
from enum import Enum, auto
from math import prod
from typing import Any
from compute.dtypes import DType, dtypes
from compute.shape import ShapeTracker


class Ops(Enum):
  BUFFER = auto(); CONST = auto(); ARANGE = auto(); VIEW = auto(); COPY = auto(); CONTIGUOUS = auto(); REDUCE = auto()
  # elementwise, unary
  NEG = auto(); NOT = auto(); EXP = auto(); LOG = auto(); EXP2 = auto(); LOG2 = auto(); SIN = auto(); COS = auto()
  SQRT = auto(); RECIP = auto(); TRUNC = auto(); CAST = auto()
  # binary
  ADD = auto(); SUB = auto(); MUL = auto(); DIV = auto(); IDIV = auto(); MOD = auto(); MAX = auto(); MIN = auto()
  CMPLT = auto(); CMPLE = auto(); CMPEQ = auto(); CMPNE = auto(); AND = auto(); OR = auto(); XOR = auto()
  # ternary
  WHERE = auto()


UNARY = {Ops.NEG, Ops.NOT, Ops.EXP, Ops.LOG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.SQRT, Ops.RECIP, Ops.TRUNC, Ops.CAST}
BINARY = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.MIN, Ops.CMPLT, Ops.CMPLE, Ops.CMPEQ, Ops.CMPNE,
          Ops.AND, Ops.OR, Ops.XOR}
COMPARE = {Ops.CMPLT, Ops.CMPLE, Ops.CMPEQ, Ops.CMPNE}
ELEMENTWISE = UNARY | BINARY | {Ops.WHERE}
# f(0, 0, ...) == 0: padding may be pushed through these to their inputs' loads
ZERO_PRESERVING = {Ops.NEG, Ops.ADD, Ops.SUB, Ops.MUL, Ops.AND, Ops.OR, Ops.XOR, Ops.MAX, Ops.MIN, Ops.SQRT, Ops.SIN, Ops.TRUNC,
                   Ops.CAST, Ops.WHERE, Ops.IDIV, Ops.MOD, Ops.CMPLT, Ops.CMPNE}


class LazyBuffer:
  __slots__ = ("device", "shape", "dtype", "op", "arg", "srcs", "buffer", "st", "__weakref__")

  def __init__(self, device: str, shape: tuple[int, ...], dtype: DType, op: Ops, arg: Any = None,
               srcs: tuple[LazyBuffer, ...] = (), buffer=None, st: ShapeTracker | None = None):
    self.device, self.shape, self.dtype, self.op, self.arg, self.srcs = device, tuple(shape), dtype, op, arg, srcs
    self.buffer, self.st = buffer, st

  def __repr__(self) -> str: return f"<LB {self.op.name} {self.shape} {self.dtype.name} {self.device}>"

  @property
  def realized(self) -> bool: return self.buffer is not None
  @property
  def tracker(self) -> ShapeTracker:
    """A VIEW's ShapeTracker (how it reads its base)."""
    if self.st is None: raise RuntimeError(f"internal: {self!r} is no view and has no ShapeTracker")
    return self.st
  @property
  def base(self) -> LazyBuffer: return self.srcs[0] if self.op is Ops.VIEW else self
  @property
  def size(self) -> int: return prod(self.shape)

  # --- leaves
  @staticmethod
  def from_buffer(buf, shape: tuple[int, ...], dtype: DType) -> LazyBuffer:
    return LazyBuffer(buf.device, shape, dtype, Ops.BUFFER, buffer=buf)

  @staticmethod
  def const(value: Any, dtype: DType, shape: tuple[int, ...], device: str) -> LazyBuffer:
    value = bool(value) if dtype is dtypes.bool else int(value) if dtype.is_int else float(value)
    lb = LazyBuffer(device, (), dtype, Ops.CONST, value)
    return lb.reshape((1,) * len(shape)).expand(tuple(shape)) if shape else lb

  @staticmethod
  def arange(n: int, start: float, step: float, dtype: DType, device: str) -> LazyBuffer:
    """start + step*i for i in range(n), computed inside whatever kernel reads it."""
    return LazyBuffer(device, (n,), dtype, Ops.ARANGE, (start, step))

  def is_const(self, value: Any = None) -> bool:
    b = self.base
    return b.op is Ops.CONST and (value is None or b.arg == value) and (self.op is not Ops.VIEW or not _has_pad(self.tracker))

  # --- compute
  def alu(self, op: Ops, *others: LazyBuffer, dtype: DType | None = None) -> LazyBuffer:
    srcs = (self, *others)
    for s in srcs:
      if s.shape != self.shape or s.device != self.device:
        raise RuntimeError(f"internal: {op.name} on {[x.shape for x in srcs]} {[x.device for x in srcs]}")
    out = dtypes.bool if op in COMPARE else dtype or (srcs[1].dtype if op is Ops.WHERE else self.dtype)
    return LazyBuffer(self.device, self.shape, out, op, None, srcs)

  def cast(self, dtype: DType) -> LazyBuffer:
    if dtype is self.dtype: return self
    if self.is_const(): return LazyBuffer.const(self.base.arg, dtype, self.shape, self.device)
    return LazyBuffer(self.device, self.shape, dtype, Ops.CAST, dtype, (self,))

  def reduce(self, op: Ops, axes: tuple[int, ...]) -> LazyBuffer:
    axes = tuple(sorted(a for a in axes if self.shape[a] != 1))
    if not axes: return self
    shape = tuple(1 if i in axes else n for i, n in enumerate(self.shape))
    return LazyBuffer(self.device, shape, self.dtype, Ops.REDUCE, (op, axes), (self,))

  def copy_to(self, device: str) -> LazyBuffer:
    return LazyBuffer(device, self.shape, self.dtype, Ops.COPY, None, (self.contiguous(),))

  def contiguous(self) -> LazyBuffer:
    if self.op is not Ops.VIEW and self.op not in (Ops.CONST, Ops.ARANGE): return self
    return LazyBuffer(self.device, self.shape, self.dtype, Ops.CONTIGUOUS, None, (self,))

  # --- movement (shapes are checked by the Tensor layer)
  def _view(self, op: str, arg: Any, shape: tuple[int, ...]) -> LazyBuffer:
    base = self.base
    st = (self.tracker if self.op is Ops.VIEW else ShapeTracker.contiguous(self.shape)).apply(op, arg)
    if st.shape != tuple(shape): raise RuntimeError(f"internal: view {op} gave {st.shape}, expected {shape}")
    if st.is_contiguous and st.shape == base.shape: return base
    ops = (self.arg if self.op is Ops.VIEW else ()) + ((op, arg),)
    return LazyBuffer(self.device, shape, self.dtype, Ops.VIEW, ops, (base,), st=st)

  def reshape(self, shape: tuple[int, ...]) -> LazyBuffer:
    return self if tuple(shape) == self.shape else self._view("reshape", tuple(shape), tuple(shape))
  def permute(self, order: tuple[int, ...]) -> LazyBuffer:
    if tuple(order) == tuple(range(len(order))): return self
    return self._view("permute", tuple(order), tuple(self.shape[i] for i in order))
  def expand(self, shape: tuple[int, ...]) -> LazyBuffer:
    return self if tuple(shape) == self.shape else self._view("expand", tuple(shape), tuple(shape))
  def pad(self, pads: tuple[tuple[int, int], ...]) -> LazyBuffer:
    if all(p == (0, 0) for p in pads): return self
    return self._view("pad", tuple(pads), tuple(n + b + a for n, (b, a) in zip(self.shape, pads)))
  def shrink(self, bounds: tuple[tuple[int, int], ...]) -> LazyBuffer:
    if all(b == (0, n) for b, n in zip(bounds, self.shape)): return self
    return self._view("shrink", tuple(bounds), tuple(e - s for s, e in bounds))
  def flip(self, axes: tuple[int, ...]) -> LazyBuffer:
    axes = tuple(a for a in axes if self.shape[a] > 1)
    return self._view("flip", axes, self.shape) if axes else self
  def window(self, axis: int, k: int, stride: int, dilation: int) -> LazyBuffer:
    o = (self.shape[axis] - dilation * (k - 1) - 1) // stride + 1
    return self._view("window", (axis, k, stride, dilation), self.shape[:axis] + (o, k) + self.shape[axis + 1:])


def _has_pad(st: ShapeTracker) -> bool: return any(v.valid or v.empty for v in st.views)
