"""TensorCore: what every part of Tensor builds on. A tensor's state (its lazy graph node, autograd node and view
bookkeeping), realization and host transfer, factories, autograd, the elementwise ops, casts, and the views that
reshape, permute, expand, pad and shrink it. Tensor's mixins (movement, indexing, reductions, nnops, sorting, torchops,
inplace) are siblings on this class: each uses only what is defined or declared here, never another mixin, so the
declarations below list everything the mixins take from each other (tests/compute/test_imports.py checks it)."""
from __future__ import annotations
import math
from math import prod
import weakref
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Self, Sequence, TypeVar, cast
import numpy as np
from compute import function
from compute.args import torch_args
from compute.dtypes import DType, dtypes, promote, promote_scalar, check_fits
from compute.lazy import LazyBuffer, Ops
from compute.runtime import Device, buffer_from_numpy, buffer_to_numpy, run_schedule
from compute.schedule import create_schedule
from compute.shape import broadcast_shape

Scalar = bool | int | float

# (smallest, largest) value of integer lazy buffers whose values the host knows (uploaded data, aranges)
_known_range: weakref.WeakKeyDictionary[LazyBuffer, tuple[int, int]] = weakref.WeakKeyDictionary()


def _note_range(lb: LazyBuffer, lo: int | float, hi: int | float) -> None: _known_range[lb] = (int(lo), int(hi))


def known_range(lb: LazyBuffer) -> tuple[int, int] | None: return _known_range.get(lb)


_T = TypeVar("_T")


class ValuesIndices(NamedTuple, Generic[_T]):
  """What max/min(dim), sort, topk, kthvalue, median(dim) and mode return, like torch.return_types: unpack it or use
  .values and .indices (int64)."""
  values: _T
  indices: _T


def _host_array(data: Any, dtype: DType | None) -> tuple[np.ndarray, DType]:
  """numpy data and the tensor dtype for it. numpy arrays and scalars keep their dtype; Python numbers and lists of
  them get the defaults (bool, int32, float32), like PyTorch. Values that do not fit the dtype are an error."""
  numpy_data = isinstance(data, (np.ndarray, np.generic))
  try: arr = np.asarray(data)
  except Exception as e: raise TypeError(f"cannot make a Tensor from {type(data).__name__}: {e}") from None
  if arr.dtype == object and arr.size and all(isinstance(v, int) for v in arr.flat):
    big = max(arr.flat, key=lambda v: abs(v))
    raise OverflowError(f"value {big} does not fit int64 (range {dtypes.int64.min}..{dtypes.int64.max})")
  if arr.dtype == object or arr.dtype.kind not in "biuf":
    raise TypeError(f"cannot make a Tensor from {type(data).__name__} with numpy dtype {arr.dtype}: need numbers")
  if dtype is None:
    if numpy_data: dtype = dtypes.from_np(arr.dtype)
    else: dtype = dtypes.bool if arr.dtype.kind == "b" else dtypes.default_int if arr.dtype.kind in "iu" else dtypes.default_float
  if arr.size and dtype.np is not np.bool_ and not (dtype.np is not None and np.can_cast(arr.dtype, dtype.np, "safe")):
    vals = arr
    if arr.dtype.kind == "f":
      finite = np.isfinite(arr)
      if dtype.is_int and not finite.all(): raise ValueError(f"cannot convert non-finite floats to {dtype.name}")
      vals = arr[finite]
    if vals.size: check_fits(vals.min(), vals.max(), dtype, "value")
  return arr, dtype


def shape_arg(shape) -> tuple:
  """A shape or dims given as f(2, 3) or f((2, 3))."""
  return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)


def where(condition: TensorCore, input=None, other=None):
  """torch.where: input where `condition` is true (nonzero), other elsewhere, broadcast together (either may be a
  Python number); torch.where(condition) alone: the indices of its true elements, nonzero(as_tuple=True)."""
  if input is None and other is None: return condition.nonzero(as_tuple=True)
  if input is None or other is None: raise TypeError("where(cond, x, y) needs both x and y (or neither, for the indices of the true elements)")
  return condition._select(input, other)


class TensorCore:
  grad_enabled = True
  _rng = np.random.default_rng(0)
  __array_priority__ = 1000   # ndarray <op> Tensor gives a Tensor (numpy defers to the reflected operator)
  # _base/_view: the root tensor this one is a view of and the steps from it (movement.py); _views: a root's live views
  __slots__ = ("lazydata", "requires_grad", "grad", "_ctx", "_base", "_view", "_views", "__weakref__")

  if TYPE_CHECKING:   # what the mixins take from each other (and this class from them), each defined by one mixin
    def __getitem__(self, idx) -> Self: ...                                                      # indexing
    def _int_range(self) -> tuple[int, int]: ...
    def _put(self, idx, value) -> Self: ...
    def _value_for(self, value, shape: tuple[int, ...]) -> Self: ...
    def index_select(self, dim: int, index) -> Self: ...
    def masked_fill(self, mask: Self, value) -> Self: ...
    def scatter(self, dim: int, index, src, reduce: str | None = None) -> Self: ...
    def flip(self, *dims, axis=None) -> Self: ...                                                # movement
    def cat(self: TensorCore | Sequence[TensorCore], *others, dim: int = 0) -> Any: ...
    def stack(self: TensorCore | Sequence[TensorCore], *others, dim: int = 0) -> Any: ...
    def sum(self, dim=None, keepdim: bool = False, dtype=None) -> Self: ...                       # reductions
    def mean(self, dim=None, keepdim: bool = False, dtype=None) -> Self: ...
    def amax(self, dim=(), keepdim: bool = False) -> Self: ...
    def amin(self, dim=(), keepdim: bool = False) -> Self: ...
    def max(self, dim=None, keepdim: bool = False) -> Any: ...
    def min(self, dim=None, keepdim: bool = False) -> Any: ...
    def all(self, dim=None, keepdim: bool = False) -> Self: ...
    def any(self, dim=None, keepdim: bool = False) -> Self: ...
    def cumsum(self, dim: int = 0, dtype=None) -> Self: ...
    def norm(self, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Self: ...
    def _nonempty(self, dim, what: str) -> None: ...
    def matmul(self, w: Self) -> Self: ...                                                     # nnops
    def _diagonal(self, a: int, b: int) -> Self: ...
    def split(self, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Self, ...]: ...   # torchops
    def nonzero(self, *, as_tuple: bool = False) -> Any: ...
    def _undiagonal(self, value: Self, offset: int, a: int, b: int) -> Self: ...

  def __init__(self, data: Any, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool = False):
    dtype = dtypes.get(dtype)
    self.grad: Self | None = None
    self._ctx: function.Function | None = None
    self.requires_grad = requires_grad
    self._base: Self | None = None
    self._view: tuple[tuple, ...] = ()
    self._views: weakref.WeakValueDictionary[int, Any] | None = None
    if isinstance(data, LazyBuffer):
      self.lazydata = data
      return
    device = Device.canonicalize(device)
    if isinstance(data, TensorCore): data, dtype = data.numpy(), dtype or data.dtype
    arr, dtype = _host_array(data, dtype)
    self.lazydata = LazyBuffer.from_buffer(buffer_from_numpy(arr, dtype, device), arr.shape, dtype)
    if dtype.is_int and arr.size: _note_range(self.lazydata, arr.min(), arr.max())

  @classmethod
  def _from_lazy(cls, lb: LazyBuffer, requires_grad: bool = False) -> Self:
    t = cls(lb)
    t.requires_grad = requires_grad
    return t

  # --- properties
  @property
  def shape(self) -> tuple[int, ...]: return self.lazydata.shape
  @property
  def dtype(self) -> DType: return self.lazydata.dtype
  @property
  def device(self) -> str: return self.lazydata.device
  @property
  def ndim(self) -> int: return len(self.shape)
  def dim(self) -> int: return len(self.shape)
  ndimension = dim
  def numel(self) -> int: return prod(self.shape)
  nelement = numel
  def size(self, dim: int | None = None): return self.shape if dim is None else self.shape[self._axis(dim)]
  def element_size(self) -> int: return self.dtype.itemsize
  def is_floating_point(self) -> bool: return self.dtype.is_float
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __repr__(self) -> str:
    """The values, like torch: tensor([[1., 2.]], device='CPU'), with the dtype when it is not float32/int32/bool."""
    extra = [f"device='{self.device}'"]
    if self.numel() == 0 and self.ndim != 1: extra.append(f"size={self.shape}")
    if self.dtype not in (dtypes.float32, dtypes.int32, dtypes.bool): extra.append(f"dtype={self.dtype!r}")
    if self.requires_grad: extra.append(f"grad_fn=<{type(self._ctx).__name__}>" if self._ctx is not None else "requires_grad=True")
    return f"tensor({np.array2string(self.numpy(), separator=', ', prefix='tensor(')}, {', '.join(extra)})"
  def __hash__(self) -> int: return id(self)
  def __iter__(self):
    if self.ndim == 0: raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))

  # --- Python and numpy conversions
  def _scalar(self, what: str) -> Scalar:
    if self.numel() != 1: raise ValueError(f"only one-element tensors can be converted to Python {what}s, this one has shape {self.shape}")
    return self.item()
  def __float__(self) -> float: return float(self._scalar("float"))
  def __int__(self) -> int: return int(self._scalar("int"))
  def __index__(self) -> int:
    if self.dtype.is_float: raise TypeError(f"only integer tensors of a single element can be converted to an index, not {self.dtype.name}")
    return int(self._scalar("int"))
  def __bool__(self) -> bool:
    if self.numel() != 1: raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements (shape {self.shape}) is ambiguous; "
                                             "use .any() or .all()")
    return bool(self.item())
  def __array__(self, dtype=None, copy=None) -> np.ndarray:
    """np.asarray(t), np.allclose(t, a), ...: the values (read back from the device)."""
    out = self.numpy()
    return out if dtype is None else out.astype(dtype)

  # --- DLPack (the data-api array interchange protocol, dmlc/dlpack's DLManagedTensor): through a host copy
  def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """torch.from_dlpack(t), np.from_dlpack(t): the values as a new host (kDLCPU) array; no memory is shared, so
    copy=False is refused as the protocol says."""
    if copy is False: raise BufferError(f"a tensor on {self.device} exports a host copy through DLPack; call it with copy=None or True")
    if stream is not None: raise BufferError(f"the DLPack export is host memory (kDLCPU), which takes no stream, got stream={stream!r}")
    if dl_device is not None and tuple(dl_device) != self.__dlpack_device__(): raise BufferError(f"the DLPack export is on kDLCPU, not {dl_device}")
    if self.dtype is dtypes.bfloat16: raise BufferError("bfloat16 tensors export no DLPack (numpy, which holds the host copy, lacks it); cast first")
    return self.numpy().__dlpack__(max_version=max_version)

  def __dlpack_device__(self) -> tuple[int, int]: return (1, 0)   # (kDLCPU, 0): where the export lives

  @classmethod
  def from_dlpack(cls, ext: Any, device: str | None = None) -> Self:
    """A tensor (on `device`, else the default one) holding a copy of a DLPack producer's host data: a torch CPU tensor, a
    numpy array, ... (also compute.from_dlpack)."""
    try: arr = np.from_dlpack(ext)
    except (BufferError, TypeError, RuntimeError) as e:
      raise BufferError(f"from_dlpack reads host (kDLCPU) memory of numpy's dtypes: {e}; move the data to the CPU first (torch: .cpu())") from None
    return cls(arr, device=device)

  # --- realization and host transfer
  @staticmethod
  def realize_all(*tensors: TensorCore) -> None:
    """Realize several tensors with one schedule (shared work is computed once)."""
    targets, seen = [], set()
    for t in tensors:
      b = t.lazydata.base
      if not b.realized and id(b) not in seen: seen.add(id(b)); targets.append(b)
    if targets: run_schedule(create_schedule(targets))

  def realize(self, *others: Self) -> Self:
    TensorCore.realize_all(self, *others)
    return self

  def numpy(self) -> np.ndarray:
    lb = self.lazydata
    if (lb.op is Ops.VIEW and not lb.tracker.is_reshape_of(lb.base.shape)) or lb.base.op in (Ops.CONST, Ops.ARANGE): lb = lb.contiguous()
    TensorCore.realize_all(self._from_lazy(lb))
    return buffer_to_numpy(lb.base.buffer, self.shape, self.dtype)

  def tolist(self): return self.numpy().tolist()
  def item(self) -> Scalar:
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.numpy().reshape(()).item()

  def to(self, *args, device: str | None = None, dtype: DType | str | None = None, non_blocking: bool = False, copy: bool = False) -> Self:
    """to(device), to(dtype), to(device, dtype), to(other) (its device and dtype), or device=/dtype= keywords, like
    PyTorch; the same tensor when nothing changes (a new one with copy=True). non_blocking: copies are lazy anyway."""
    for a in args:
      if isinstance(a, TensorCore):
        if len(args) > 1: raise TypeError("to(other) takes only the tensor whose device and dtype to take")
        device, dtype = a.device, a.dtype
      elif isinstance(a, str) and getattr(dtypes, a, None) not in dtypes.all: device = a
      else:
        try: dtype = dtypes.get(a)
        except TypeError: raise TypeError(f"to() takes a device string, a dtype or a tensor, got {a!r}") from None
    out = self if dtype is None else self.cast(dtype)
    device = Device.canonicalize(device) if device is not None else self.device
    if device != out.device:
      Device[device]   # open it now: an unavailable device is an error here, not at the next realize
      out = function.Copy.apply(out, device=device)
    return out.clone() if copy and out is self else out

  def contiguous(self) -> Self: return function.Contiguous.apply(self)
  def clone(self) -> Self:
    """A copy with its own storage: in-place changes of either do not show in the other; gradients flow back."""
    return function.Contiguous.apply(self)
  def detach(self) -> Self:
    """The same values outside the autograd graph; like PyTorch it shares storage: in-place changes show in both."""
    return self._viewed(self._from_lazy(self.lazydata), ("detach",))

  # --- factories
  @classmethod
  def full(cls, shape, fill: Scalar, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool = False) -> Self:
    shape = shape_arg(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if any(not isinstance(s, int) or s < 0 for s in shape): raise ValueError(f"bad shape {shape}: need non-negative ints")
    dt = dtypes.get(dtype) or (dtypes.bool if isinstance(fill, bool) else dtypes.int32 if isinstance(fill, int) else dtypes.float32)
    check_fits(fill, fill, dt, "fill value")
    t = cls._from_lazy(LazyBuffer.const(fill, dt, shape, Device.canonicalize(device)))
    if requires_grad: t = t.contiguous().realize(); t.requires_grad = True
    return t

  @classmethod
  def zeros(cls, *shape, **kw) -> Self: return cls.full(shape_arg(shape), 0.0 if kw.get("dtype") is None else 0, **kw)
  @classmethod
  def ones(cls, *shape, **kw) -> Self: return cls.full(shape_arg(shape), 1.0 if kw.get("dtype") is None else 1, **kw)
  def zeros_like(self, **kw) -> Self: return type(self).full(self.shape, 0, **{"dtype": self.dtype, "device": self.device, **kw})
  def ones_like(self, **kw) -> Self: return type(self).full(self.shape, 1, **{"dtype": self.dtype, "device": self.device, **kw})
  def full_like(self, fill: Scalar, **kw) -> Self: return type(self).full(self.shape, fill, **{"dtype": self.dtype, "device": self.device, **kw})
  def rand_like(self, **kw) -> Self: return type(self).rand(self.shape, **{"dtype": self.dtype, "device": self.device, **kw})
  def randn_like(self, **kw) -> Self: return type(self).randn(self.shape, **{"dtype": self.dtype, "device": self.device, **kw})
  def new_full(self, size, fill: Scalar, **kw) -> Self: return type(self).full(size, fill, **{"dtype": self.dtype, "device": self.device, **kw})
  def new_zeros(self, *size, **kw) -> Self: return self.new_full(shape_arg(size), 0, **kw)
  def new_ones(self, *size, **kw) -> Self: return self.new_full(shape_arg(size), 1, **kw)
  def new_tensor(self, data, **kw) -> Self: return type(self)(data, **{"dtype": self.dtype, "device": self.device, **kw})

  @classmethod
  def arange(cls, start: Scalar, stop: Scalar | None = None, step: Scalar = 1, dtype=None, device: str | None = None) -> Self:
    if stop is None: start, stop = 0, start
    if step == 0: raise ValueError("arange step must not be 0")
    n = max(0, math.ceil((stop - start) / step))
    dt = dtypes.get(dtype) or (dtypes.float32 if any(isinstance(v, float) for v in (start, stop, step)) else dtypes.int32)
    if n: check_fits(start, start + step * (n - 1), dt, "arange value")
    out = cls._from_lazy(LazyBuffer.arange(n, start, step, dt, Device.canonicalize(device)))
    if dt.is_int and n: _note_range(out.lazydata, min(start, start + step * (n - 1)), max(start, start + step * (n - 1)))
    return out

  @classmethod
  def linspace(cls, start: float, end: float, steps: int, dtype=None, device: str | None = None) -> Self:
    """`steps` values from start to end inclusive, evenly spaced (float32 by default); the second half is counted back
    from end, so both ends are exact."""
    if not isinstance(steps, int) or steps < 0: raise ValueError(f"linspace steps must be a non-negative int, got {steps!r}")
    dt = dtypes.get(dtype) or dtypes.float32
    if steps <= 1: return cls.full((steps,), start, dtype=dt, device=device)
    step = (end - start) / (steps - 1)
    i = cls.arange(steps, device=device).cast(dtypes.float64 if dt is dtypes.float64 else dtypes.float32)
    return (i < steps // 2)._select(start + i * step, end - (steps - 1 - i) * step).cast(dt)

  @classmethod
  def logspace(cls, start: float, end: float, steps: int, base: float = 10.0, dtype=None, device: str | None = None) -> Self:
    return (base ** cls.linspace(start, end, steps, dtype=dtypes.float64, device=device)).cast(dtypes.get(dtype) or dtypes.float32)

  @classmethod
  def eye(cls, n: int, m: int | None = None, dtype=None, device: str | None = None) -> Self:
    m = n if m is None else m
    i, j = cls.arange(n, device=device).reshape(n, 1), cls.arange(m, device=device).reshape(1, m)
    return (i == j).cast(dtypes.get(dtype) or dtypes.float32)

  @staticmethod
  def manual_seed(seed: int) -> None: TensorCore._rng = np.random.default_rng(seed)

  @classmethod
  def _random(cls, fn: str, shape, seed, dtype, device, requires_grad, *args) -> Self:
    rng = TensorCore._rng if seed is None else np.random.default_rng(seed)
    arr = getattr(rng, fn)(*args, size=shape_arg(shape)).astype(np.float32)
    return cls(arr, device=device, dtype=dtype or dtypes.float32, requires_grad=requires_grad)

  @classmethod
  def rand(cls, *shape, seed: int | None = None, dtype=None, device=None, requires_grad=False) -> Self:
    """Uniform in [0, 1); `seed` makes it reproducible (else the generator set by manual_seed)."""
    return cls._random("random", shape, seed, dtype, device, requires_grad)
  @classmethod
  def randn(cls, *shape, seed: int | None = None, dtype=None, device=None, requires_grad=False) -> Self:
    return cls._random("standard_normal", shape, seed, dtype, device, requires_grad)
  @classmethod
  def uniform(cls, *shape, low=0.0, high=1.0, seed=None, dtype=None, device=None, requires_grad=False) -> Self:
    return cls._random("uniform", shape, seed, dtype, device, requires_grad, low, high)

  # --- autograd
  def backward(self, gradient: Self | None = None) -> Self:
    if gradient is None:
      if self.numel() != 1: raise ValueError(f"backward() without a gradient needs a one-element tensor, not shape {self.shape}")
      gradient = type(self).full(self.shape, 1.0, dtype=self.dtype, device=self.device)
    if gradient.shape != self.shape: raise ValueError(f"gradient shape {gradient.shape} does not match tensor shape {self.shape}")
    if self._ctx is None:   # a leaf: its own gradient
      if self.requires_grad: self.grad = gradient if self.grad is None else self.grad + gradient
      return self
    # the graph is made of Function nodes (each keeps its inputs' nodes as they were, so in-place updates later do
    # not change it); a node's gradient is complete once every node using it is done: reverse post-order
    order, seen, stack = [], set(), [(self._ctx, False)]
    while stack:
      n, done = stack.pop()
      if done: order.append(n); continue
      if id(n) in seen: continue
      if n.freed: raise RuntimeError("backward() through a graph an earlier backward() already freed; compute the forward again")
      seen.add(id(n))
      stack.append((n, True))
      stack.extend((p, False) for p in n.parent_ctxs if p is not None)
    grads: dict[int, LazyBuffer] = {id(self._ctx): gradient.lazydata}
    for ctx in reversed(order):
      g = grads.pop(id(ctx), None)
      if g is None: continue
      out = ctx.backward(g)
      out = out if isinstance(out, tuple) else (out,)
      for p, pctx, pg, need in zip(ctx.parents, ctx.parent_ctxs, out, ctx.needs_grad):
        if pg is None or not need: continue
        if pg.shape != p.shape: raise RuntimeError(f"internal: gradient {pg.shape} for input {p.shape} of {type(ctx).__name__}")
        if pctx is not None: grads[id(pctx)] = grads[id(pctx)].alu(Ops.ADD, pg) if id(pctx) in grads else pg
        else: p.grad = self._from_lazy(pg) if p.grad is None else self._from_lazy(p.grad.lazydata.alu(Ops.ADD, pg))
      ctx.free()
    return self

  # --- elementwise plumbing
  def _axis(self, a: int, n: int | None = None) -> int:
    n = self.ndim if n is None else n
    if not -max(n, 1) <= a < max(n, 1): raise IndexError(f"axis {a} is out of range for a tensor of shape {self.shape}")
    return a % max(n, 1)

  def _to_tensor(self, x) -> Self:
    if isinstance(x, TensorCore): return cast(Self, x)
    if isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating)):
      dt = promote_scalar(self.dtype, x)
      if dt.is_int: check_fits(x, x, dt, "Python scalar")
      return self._from_lazy(LazyBuffer.const(x, dt, (), self.device))
    return type(self)(x, device=self.device)

  def _broadcast(self, other, reverse: bool = False) -> tuple[Self, Self]:
    y = self._to_tensor(other)
    if y.device != self.device:
      raise RuntimeError(f"operands are on different devices ({self.device} and {y.device}); move one with .to()")
    dt = promote(self.dtype, y.dtype)
    x, y = self.cast(dt), y.cast(dt)
    shape = broadcast_shape(x.shape, y.shape)
    x, y = x._expand_to(shape), y._expand_to(shape)
    return (y, x) if reverse else (x, y)

  def _expand_to(self, shape: tuple[int, ...]) -> Self:
    if self.shape == shape: return self
    t = self.reshape((1,) * (len(shape) - self.ndim) + self.shape)
    return t.expand(shape)

  def _float(self) -> Self: return self if self.dtype.is_float else self.cast(dtypes.float32)

  def _unary(self, fn: type[function.Function]) -> Self: return fn.apply(self._float())

  def _cmp(self, op: Ops, other, reverse: bool = False) -> Self:
    x, y = self._broadcast(other, reverse)
    return self._from_lazy(x.lazydata.alu(op, y.lazydata))

  def cast(self, dtype: DType | str) -> Self:
    if (dt := dtypes.get(dtype)) is None: raise TypeError("cast needs a dtype, got None")
    if dt is self.dtype: return self
    if dt.is_float and self.dtype.is_float: return function.Cast.apply(self, dtype=dt)
    return self._from_lazy(self.lazydata.cast(dt))

  # --- arithmetic
  def add(self, x, reverse=False) -> Self: return function.Add.apply(*self._broadcast(x, reverse))
  def sub(self, x, reverse=False) -> Self:
    a, b = self._broadcast(x, reverse)
    if a.dtype is dtypes.bool: raise TypeError("subtraction of bool tensors is not supported; use ^ (xor) or cast first")
    return function.Sub.apply(a, b)
  def mul(self, x, reverse=False) -> Self: return function.Mul.apply(*self._broadcast(x, reverse))
  def div(self, x, reverse=False) -> Self:
    a, b = self._broadcast(x, reverse)
    return function.Div.apply(a._float(), b._float())
  def floordiv(self, x, reverse=False) -> Self:
    a, b = self._broadcast(x, reverse)
    if a.dtype.is_float: return (a / b).floor()
    return self._from_lazy(a.lazydata.alu(Ops.IDIV, b.lazydata))
  def mod(self, x, reverse=False) -> Self:
    a, b = self._broadcast(x, reverse)
    if a.dtype.is_float: return a - b * (a / b).floor()
    return self._from_lazy(a.lazydata.alu(Ops.MOD, b.lazydata))
  def pow(self, x, reverse=False) -> Self:
    if not reverse and isinstance(x, (int, float)) and not isinstance(x, bool):
      if x == 0: return self.ones_like()
      if x == 1: return self
      if x == 2: return self * self
      if x == 0.5: return self.sqrt()
      if x == -1: return self.reciprocal()
    base, e = self._broadcast(x, reverse)
    base, e = base._float(), e._float()
    mag = (e * base.abs().log()).exp()
    odd = (e.abs() % 2) == 1
    integral = e.trunc() == e
    neg = base < 0
    out = neg._select(integral._select(odd._select(-mag, mag), math.nan), mag)
    return (e == 0)._select(1.0, out)
  def neg(self) -> Self:
    if self.dtype is dtypes.bool: raise TypeError("negation of a bool tensor is not supported; use ~ (logical not)")
    return function.Neg.apply(self)
  def maximum(self, x) -> Self: return function.Maximum.apply(*self._broadcast(x))
  def minimum(self, x) -> Self: return function.Maximum.apply(*self._broadcast(x), op=Ops.MIN)
  def _select(self, x, y) -> Self:
    """self (a condition) chooses x where true, y where false; x and y broadcast together with it (torch.where(self, x, y))."""
    cond = self if self.dtype is dtypes.bool else self != 0
    if not isinstance(x, TensorCore) and not isinstance(y, TensorCore):
      x = cond._to_tensor(x)
      y = x._to_tensor(y)
    elif not isinstance(x, TensorCore): x = y._to_tensor(x)
    else: y = x._to_tensor(y)
    x, y = x._broadcast(y)
    shape = broadcast_shape(cond.shape, x.shape)
    return function.Where.apply(cond._expand_to(shape), x._expand_to(shape), y._expand_to(shape))
  def where(self, condition: Self, other) -> Self:
    """PyTorch's Tensor.where: self where `condition` (a bool tensor) is true, `other` elsewhere, broadcast together;
    torch.where(condition, self, other)."""
    if not isinstance(condition, TensorCore) or condition.dtype is not dtypes.bool:
      raise TypeError(f"Tensor.where(condition, other) takes a bool condition tensor, got {getattr(condition, 'dtype', type(condition).__name__)}: "
                      "it is self where condition, else other (PyTorch's); for condition ? x : y call compute.where(condition, x, y)")
    return condition._select(self, other)
  def logical_not(self) -> Self: return self._from_lazy(self.bool().lazydata.alu(Ops.NOT))
  def _bitwise(self, op: Ops, x, reverse=False) -> Self:
    a, b = self._broadcast(x, reverse)
    if a.dtype.is_float: raise TypeError(f"bitwise {op.name.lower()} needs bool or integer tensors, got {a.dtype.name}")
    return self._from_lazy(a.lazydata.alu(op, b.lazydata))

  __add__ = lambda self, x: self.add(x)
  __radd__ = lambda self, x: self.add(x, True)
  __sub__ = lambda self, x: self.sub(x)
  __rsub__ = lambda self, x: self.sub(x, True)
  __mul__ = lambda self, x: self.mul(x)
  __rmul__ = lambda self, x: self.mul(x, True)
  __truediv__ = lambda self, x: self.div(x)
  __rtruediv__ = lambda self, x: self.div(x, True)
  __floordiv__ = lambda self, x: self.floordiv(x)
  __rfloordiv__ = lambda self, x: self.floordiv(x, True)
  __mod__ = lambda self, x: self.mod(x)
  __rmod__ = lambda self, x: self.mod(x, True)
  __pow__ = lambda self, x: self.pow(x)
  __rpow__ = lambda self, x: self.pow(x, True)
  __neg__ = lambda self: self.neg()
  __matmul__ = lambda self, x: self.matmul(x)
  __rmatmul__ = lambda self, x: self._to_tensor(x).matmul(self)
  __lt__ = lambda self, x: self._cmp(Ops.CMPLT, x)
  __le__ = lambda self, x: self._cmp(Ops.CMPLE, x)
  __gt__ = lambda self, x: self._cmp(Ops.CMPLT, x, True)
  __ge__ = lambda self, x: self._cmp(Ops.CMPLE, x, True)
  def __eq__(self, x) -> Self: return self._cmp(Ops.CMPEQ, x)      # type: ignore[override]
  def __ne__(self, x) -> Self: return self._cmp(Ops.CMPNE, x)      # type: ignore[override]
  __and__ = lambda self, x: self._bitwise(Ops.AND, x)
  __or__ = lambda self, x: self._bitwise(Ops.OR, x)
  __xor__ = lambda self, x: self._bitwise(Ops.XOR, x)
  __rand__ = lambda self, x: self._bitwise(Ops.AND, x, True)
  __ror__ = lambda self, x: self._bitwise(Ops.OR, x, True)
  __rxor__ = lambda self, x: self._bitwise(Ops.XOR, x, True)
  def __invert__(self) -> Self:
    if self.dtype is dtypes.bool: return self.logical_not()
    if self.dtype.is_float: raise TypeError("~ needs a bool or integer tensor")
    return self ^ (-1 if self.dtype.kind == "i" else self.dtype.max)

  # --- unary math
  def exp(self) -> Self: return self._unary(function.Exp)
  def exp2(self) -> Self: return self._unary(function.Exp2)
  def log(self) -> Self: return self._unary(function.Log)
  def log2(self) -> Self: return self._unary(function.Log2)
  def sqrt(self) -> Self: return self._unary(function.Sqrt)
  def rsqrt(self) -> Self: return self.sqrt().reciprocal()
  def sin(self) -> Self: return self._unary(function.Sin)
  def cos(self) -> Self: return self._unary(function.Cos)
  def tan(self) -> Self: return self.sin() / self.cos()
  def reciprocal(self) -> Self: return self._unary(function.Recip)
  def relu(self) -> Self: return function.Relu.apply(self)
  def sigmoid(self) -> Self: return self._unary(function.Sigmoid)
  def tanh(self) -> Self: return 2.0 * (2.0 * self._float()).sigmoid() - 1.0
  def gelu(self) -> Self:
    """GELU, tanh approximation: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3)))."""
    x = self._float()
    return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
  def silu(self) -> Self: return self * self.sigmoid()
  def leaky_relu(self, neg_slope: float = 0.01) -> Self: return self.relu() - (-neg_slope * self).relu()
  def softplus(self) -> Self: return self.maximum(0) + (-self.abs()).exp().add(1).log()
  def abs(self) -> Self: return self.relu() + (-self).relu() if self.dtype.is_float else (self < 0)._select(-self, self)
  def sign(self) -> Self: return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
  def square(self) -> Self: return self * self
  def isnan(self) -> Self: return self != self if self.dtype.is_float else self.full_like(False, dtype=dtypes.bool)
  def isinf(self) -> Self: return self.abs() == math.inf if self.dtype.is_float else self.full_like(False, dtype=dtypes.bool)
  def isfinite(self) -> Self: return ~(self.isnan() | self.isinf())
  def _truth(self) -> Self: return self if self.dtype is dtypes.bool else self != 0
  def trunc(self) -> Self: return self._from_lazy(self.lazydata.alu(Ops.TRUNC)) if self.dtype.is_float else self
  def floor(self) -> Self:
    t = self.trunc()
    return (t > self)._select(t - 1, t) if self.dtype.is_float else self
  def ceil(self) -> Self:
    t = self.trunc()
    return (t < self)._select(t + 1, t) if self.dtype.is_float else self
  @torch_args
  def clamp(self, min=None, max=None) -> Self:
    """Elementwise max(min, ...) then min(..., max), like torch.clamp (NaN stays NaN; min > max gives max)."""
    if min is None and max is None: raise ValueError("clamp needs min or max (or both)")
    out = self if min is None else self.maximum(min)
    return out if max is None else out.minimum(max)
  clip = clamp

  # --- views: what PyTorch returns as a view sharing its input's storage (movement's docstring); pad and shrink
  def _viewed(self, out: Self, step: tuple) -> Self:
    """Register `out` (made from self by `step`, e.g. ("reshape", shape)) as a view of self's root tensor."""
    if out is self: return out
    root = self._base if self._base is not None else self
    steps: tuple[tuple, ...] = self._view + (step,)
    if root.requires_grad and not out.requires_grad and step[0] != "detach": steps += (("detach",),)   # made without gradients
    out._base, out._view = root, steps
    if root._views is None: root._views = weakref.WeakValueDictionary()   # by id: a WeakSet would compare tensors with ==
    root._views[id(out)] = out
    return out

  def _step(self, step: tuple) -> Self:
    """Apply one recorded view step again (to the root's new value)."""
    kind, *arg = step
    return self.detach() if kind == "detach" else getattr(self, kind)(*arg) if kind != "getitem" else self[arg[0]]

  def reshape(self, *shape) -> Self:
    shape = shape_arg(shape)
    if any(not isinstance(s, int) for s in shape): raise TypeError(f"reshape takes ints, got {shape}")
    if shape.count(-1) > 1: raise ValueError(f"reshape {self.shape} to {shape}: only one -1 allowed")
    if -1 in shape:
      rest = prod(s for s in shape if s != -1)
      if rest == 0 or self.numel() % rest: raise ValueError(f"cannot reshape tensor of shape {self.shape} into {shape}")
      shape = tuple(self.numel() // rest if s == -1 else s for s in shape)
    if any(s < 0 for s in shape) or prod(shape) != self.numel():
      raise ValueError(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) into {shape}")
    return self if shape == self.shape else self._viewed(function.Reshape.apply(self, shape=shape), ("reshape", shape))
  view = reshape

  def permute(self, *order) -> Self:
    order = tuple(self._axis(a) for a in shape_arg(order))
    if sorted(order) != list(range(self.ndim)): raise ValueError(f"permute {order} is not a permutation of the {self.ndim} axes of {self.shape}")
    return self if order == tuple(range(self.ndim)) else self._viewed(function.Permute.apply(self, order=order), ("permute", order))

  def transpose(self, dim0: int = 1, dim1: int = 0) -> Self:
    """Swap two dims (PyTorch's transpose; numpy's transpose(axes) is permute(axes))."""
    if not isinstance(dim0, int) or not isinstance(dim1, int):
      raise TypeError(f"transpose(dim0, dim1) swaps two dims, got {dim0!r}; use permute({dim0!r}) to reorder every dim")
    order = list(range(self.ndim))
    a, b = self._axis(dim0), self._axis(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)

  @property
  def T(self) -> Self: return self.permute(tuple(reversed(range(self.ndim))))

  def expand(self, *shape) -> Self:
    shape = shape_arg(shape)
    if len(shape) < self.ndim: raise ValueError(f"cannot expand shape {self.shape} to {shape}: fewer dims")
    full = (1,) * (len(shape) - self.ndim) + self.shape
    new = tuple(f if s == -1 else s for s, f in zip(shape, full))
    if any(f != n and f != 1 for f, n in zip(full, new)): raise ValueError(f"cannot expand shape {self.shape} to {shape}")
    t = self.reshape(full)
    return t if new == t.shape else self._viewed(function.Expand.apply(t, shape=new), ("expand", new))

  def pad(self, padding, value: float = 0.0) -> Self:
    """padding: ((before, after), ...) per dim from the first, or None for a dim; negative values crop."""
    if len(padding) > self.ndim: raise ValueError(f"pad {padding} has more entries than dims of {self.shape}")
    padding = [(0, 0) if p is None else tuple(p) for p in padding] + [(0, 0)] * (self.ndim - len(padding))
    if any(len(p) != 2 for p in padding): raise ValueError(f"pad needs (before, after) pairs, got {padding}")
    crop = tuple((max(0, -b), n - max(0, -a)) for n, (b, a) in zip(self.shape, padding))
    if any(e < s for s, e in crop): raise ValueError(f"pad {padding} crops more than the shape {self.shape} has")
    t = self.shrink(crop)
    pads = tuple((max(0, b), max(0, a)) for b, a in padding)
    if all(p == (0, 0) for p in pads): return t
    out = function.Pad.apply(t, pads=pads)
    if value == 0: return out
    inside = function.Pad.apply(t.ones_like(dtype=dtypes.bool), pads=pads)
    return inside._select(out, value)

  def shrink(self, bounds) -> Self:
    """bounds: ((start, end), ...) per dim, or None to keep a dim whole."""
    bounds = tuple((0, n) if b is None else tuple(b) for b, n in zip(bounds, self.shape)) + tuple((0, n) for n in self.shape[len(bounds):])
    if any(not 0 <= s <= e <= n for (s, e), n in zip(bounds, self.shape)):
      raise ValueError(f"shrink {bounds} is outside the shape {self.shape}")
    return self if all(b == (0, n) for b, n in zip(bounds, self.shape)) else function.Shrink.apply(self, bounds=bounds)

  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Self:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._axis(start_dim), self._axis(end_dim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  def unsqueeze(self, dim: int) -> Self:
    d = self._axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

  def squeeze(self, dim: int | None = None) -> Self:
    if dim is None: return self.reshape(tuple(n for n in self.shape if n != 1))
    d = self._axis(dim)
    return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])

  # --- casts by name, last: in the class body after them, `int` `float` and `bool` would name these methods
  def float(self) -> Self: return self.cast(dtypes.float32)
  def double(self) -> Self: return self.cast(dtypes.float64)
  def half(self) -> Self: return self.cast(dtypes.float16)
  def bfloat16(self) -> Self: return self.cast(dtypes.bfloat16)
  def long(self) -> Self: return self.cast(dtypes.int64)
  def int(self) -> Self: return self.cast(dtypes.int32)
  def char(self) -> Self: return self.cast(dtypes.int8)
  def byte(self) -> Self: return self.cast(dtypes.uint8)
  def bool(self) -> Self: return self.cast(dtypes.bool)
  def type_as(self, other: Self) -> Self: return self.cast(other.dtype)
