"""Element types: what a tensor holds, how kernels store and compute it, and numpy-style promotion."""
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


class dtypes:
  bool = DType("bool", 1, "b", np.bool_, 0)
  uint8 = DType("uint8", 1, "u", np.uint8, 1)
  int8 = DType("int8", 1, "i", np.int8, 1)
  int32 = DType("int32", 4, "i", np.int32, 3)
  float16 = DType("float16", 2, "f", np.float16, 1)
  bfloat16 = DType("bfloat16", 2, "f", None, 2)
  float32 = DType("float32", 4, "f", np.float32, 3)
  default_float = float32
  default_int = int32
  all: tuple[DType, ...] = ()

  @staticmethod
  def from_np(d) -> DType:
    """The dtype for a numpy dtype; float64/int64/... narrow to float32/int32 (kernels have no 64-bit types)."""
    d = np.dtype(d)
    for t in dtypes.all:
      if t.np is not None and np.dtype(t.np) == d: return t
    if d.kind == "f": return dtypes.float32
    if d.kind in "iu": return dtypes.int32
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


dtypes.all = (dtypes.bool, dtypes.uint8, dtypes.int8, dtypes.int32, dtypes.float16, dtypes.bfloat16, dtypes.float32)
_KIND_ORDER = {"b": 0, "u": 1, "i": 1, "f": 2}


def promote(a: DType, b: DType) -> DType:
  """The common type of two tensor dtypes, like numpy, narrowed to the supported set
  (int8+uint8 -> int32, float16+bfloat16 -> float32, int32+float16 -> float32)."""
  if a is b: return a
  ka, kb = _KIND_ORDER[a.kind], _KIND_ORDER[b.kind]
  if ka != kb: hi, lo = (a, b) if ka > kb else (b, a)
  else: hi, lo = (a, b) if a.priority >= b.priority else (b, a)
  if hi.kind == "f":
    if lo.kind == "f" and lo.priority == hi.priority: return dtypes.float32   # float16 with bfloat16
    if lo.kind in "ui" and lo.itemsize >= hi.itemsize: return dtypes.float32  # int32 does not fit a half
    return hi
  if hi.is_int and lo.is_int and hi.kind != lo.kind and hi.itemsize == lo.itemsize: return dtypes.int32  # int8 with uint8
  return hi


def scalar_dtype(x: bool | int | float) -> DType:
  return dtypes.bool if isinstance(x, (bool, np.bool_)) else dtypes.int32 if isinstance(x, (int, np.integer)) else dtypes.float32


def promote_scalar(t: DType, x: bool | int | float) -> DType:
  """A Python scalar adapts to the tensor's type ("weak" scalars, numpy 2 rules), except that a float scalar
  makes an integer/bool tensor float and an int scalar makes a bool tensor int."""
  s = scalar_dtype(x)
  if _KIND_ORDER[s.kind] > _KIND_ORDER[t.kind]: return dtypes.default_float if s.is_float else dtypes.default_int
  return t
