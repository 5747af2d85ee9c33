"""Element types: what a tensor holds, how kernels store and compute it, numpy-style promotion, and range checks
(data that does not fit its dtype is an error, never a silent wrap)."""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np


@dataclass(frozen=True, eq=False)
class DType:
  name: str
  itemsize: int
  kind: str          # "b" bool, "u" unsigned int, "i" signed int, "f" float
  np: type | None    # numpy equivalent (None: bfloat16, which numpy lacks; stored as uint16 bits)
  priority: int      # order inside a kind, for promotion

  @property
  def is_float(self) -> bool: return self.kind == "f"
  @property
  def is_int(self) -> bool: return self.kind in "ui"
  def __repr__(self) -> str: return f"dtypes.{self.name}"
  def __reduce__(self): return (getattr, (dtypes, self.name))

  @property
  def min(self) -> int | float:
    """The smallest value (most negative finite float)."""
    if self.kind == "b": return 0
    if self.is_int: return int(np.iinfo(self.np).min)
    return -self.max
  @property
  def max(self) -> int | float:
    if self.kind == "b": return 1
    if self.is_int: return int(np.iinfo(self.np).max)
    return float(np.finfo(self.np).max) if self.np is not None else float.fromhex("0x1.fep127")   # bfloat16: 8 exponent bits


class dtypes:
  bool = DType("bool", 1, "b", np.bool_, 0)
  uint8 = DType("uint8", 1, "u", np.uint8, 1)
  int8 = DType("int8", 1, "i", np.int8, 1)
  uint32 = DType("uint32", 4, "u", np.uint32, 3)
  int32 = DType("int32", 4, "i", np.int32, 3)
  int64 = DType("int64", 8, "i", np.int64, 4)
  float16 = DType("float16", 2, "f", np.float16, 1)
  bfloat16 = DType("bfloat16", 2, "f", None, 2)
  float32 = DType("float32", 4, "f", np.float32, 3)
  float64 = DType("float64", 8, "f", np.float64, 4)
  default_float = float32
  default_int = int32
  all: tuple[DType, ...] = ()

  @staticmethod
  def from_np(d) -> DType:
    """The dtype for a numpy dtype: the same type, or the smallest supported one holding every value of it
    (int16 -> int32, uint16 -> int32, uint64 -> int64: values beyond int64 are caught by check_fits)."""
    d = np.dtype(d)
    for t in dtypes.all:
      if t.np is not None and np.dtype(t.np) == d: return t
    if d.kind in "iu" and d.itemsize <= 2: return dtypes.int32
    if d.kind in "iu" and d.itemsize == 8: return dtypes.int64
    raise TypeError(f"numpy dtype {d} has no tensor equivalent; supported: {', '.join(t.name for t in dtypes.all)}")

  @staticmethod
  def get(d: DType | str | type | np.dtype | None) -> DType | None:
    """Accepts a DType, its name ('float32'), or a numpy dtype; anything else is a clear error."""
    if d is None or isinstance(d, DType): return d
    if isinstance(d, str):
      if (t := getattr(dtypes, d, None)) in dtypes.all: return t
      raise TypeError(f"unknown dtype {d!r}; supported: {', '.join(t.name for t in dtypes.all)}")
    try: nd = np.dtype(d)
    except TypeError: raise TypeError(f"{d!r} is not a dtype; supported: {', '.join(t.name for t in dtypes.all)}") from None
    t = next((t for t in dtypes.all if t.np is not None and np.dtype(t.np) == nd), None)
    if t is None: raise TypeError(f"dtype {nd} is not supported; supported: {', '.join(t.name for t in dtypes.all)}")
    return t


dtypes.all = (dtypes.bool, dtypes.uint8, dtypes.int8, dtypes.uint32, dtypes.int32, dtypes.int64, dtypes.float16, dtypes.bfloat16,
              dtypes.float32, dtypes.float64)
_KIND_ORDER = {"b": 0, "u": 1, "i": 1, "f": 2}


def promote(a: DType, b: DType) -> DType:
  """The common type of two tensor dtypes. Inside a kind the wider type wins; signed with unsigned gives the smallest
  signed type holding both (int8+uint8 -> int32, for want of int16; int32+uint32 -> int64); an integer with a float
  gives the float, at least float32 when the integer is as wide (int32+float16 -> float32, int64+float32 -> float32,
  like PyTorch); float16 with bfloat16 gives float32."""
  if a is b: return a
  ka, kb = _KIND_ORDER[a.kind], _KIND_ORDER[b.kind]
  if ka != kb: hi, lo = (a, b) if ka > kb else (b, a)
  else: hi, lo = (a, b) if a.priority >= b.priority else (b, a)
  if hi.kind == "f":
    if lo.kind == "f" and lo.priority == hi.priority: return dtypes.float32   # float16 with bfloat16
    if lo.kind in "ui" and lo.itemsize >= hi.itemsize: return dtypes.float32  # int32 does not fit a half
    return hi
  if hi.is_int and lo.is_int and hi.kind != lo.kind:
    s, u = (hi, lo) if hi.kind == "i" else (lo, hi)
    if s.itemsize > u.itemsize: return s
    return dtypes.int32 if u.itemsize < 4 else dtypes.int64
  return hi


def scalar_dtype(x: bool | int | float | np.generic) -> DType:
  return dtypes.bool if isinstance(x, (bool, np.bool_)) else dtypes.int32 if isinstance(x, (int, np.integer)) else dtypes.float32


def promote_scalar(t: DType, x: bool | int | float | np.generic) -> DType:
  """A Python scalar adapts to the tensor's type ("weak" scalars, numpy 2 rules), except that a float scalar
  makes an integer/bool tensor float and an int scalar makes a bool tensor int."""
  s = scalar_dtype(x)
  if _KIND_ORDER[s.kind] > _KIND_ORDER[t.kind]: return dtypes.default_float if s.is_float else dtypes.default_int
  return t


def check_fits(lo, hi, dtype: DType, what: str = "value") -> None:
  """Raise OverflowError unless every value in [lo, hi] fits `dtype`: integers must be in range; floats must be
  finite (and in range) for an integer type, and a finite value must not overflow to infinity in a float type
  (rounding is fine). `lo`/`hi` are Python or numpy scalars."""
  if dtype is dtypes.bool: return
  for v in (lo, hi):
    if isinstance(v, (float, np.floating)) and v != v:
      if dtype.is_int: raise ValueError(f"cannot convert non-finite floats to {dtype.name}")
      continue
    if dtype.is_int:
      if isinstance(v, (float, np.floating)) and not np.isfinite(v): raise ValueError(f"cannot convert non-finite floats to {dtype.name}")
      # a float fits when its truncation (what a cast keeps) is in range
      iv = int(v)
      if not dtype.min <= iv <= dtype.max:
        raise OverflowError(f"{what} {_show(v)} does not fit {dtype.name} (range {dtype.min}..{dtype.max})")
    elif np.isfinite(v) and abs(float(v)) > dtype.max and _rounds_to_inf(float(v), dtype):
      raise OverflowError(f"{what} {_show(v)} does not fit {dtype.name} (largest finite {dtype.max:g})")


def _rounds_to_inf(v: float, dtype: DType) -> bool:
  if dtype.np is not None:
    with np.errstate(over="ignore"): return bool(np.isinf(np.asarray(v).astype(dtype.np)))
  return abs(v) >= float.fromhex("0x1.ffp127")   # bfloat16: half an ulp above its largest finite value


def _show(v) -> str: return repr(v.item() if isinstance(v, np.generic) else v)
