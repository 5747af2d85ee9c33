"""C records with explicit offsets, as autogen.gen.dwarf writes them from a library's DWARF debug info.

`record(cls, size, fields, bits)` lays out a ctypes Structure or Union from (byte offset, name, ctype) triples: the
gaps become `_pad<offset>` byte arrays, so each member lands at exactly the offset the compiler gave it, and the size
and every offset are asserted when the module is imported. Bit fields are never ctypes bit fields (whose packing is
ctypes' guess, not the compiler's): `bits` is a `name:bit_offset:width` spec (bit 0 = bit 0 of byte 0, little-endian;
`name:bit_offset:width:s` for a signed field), each read and written through a `BitField` on the class; their bytes lie
in the padding.
"""
from __future__ import annotations
import ctypes, hashlib, pathlib
from typing import Any


class LayoutError(RuntimeError):
  """ctypes places a member elsewhere than the compiler did."""


class LibraryMismatch(RuntimeError):
  """The library is another build than the one the bindings were generated from: its records may differ."""


class BitField:
  """A C bit field at a bit offset from the start of its record; a value that does not fit the field is an error."""
  __slots__ = ("name", "offset", "width", "signed")

  def __init__(self, name: str, offset: int, width: int, signed: bool = False):
    self.name, self.offset, self.width, self.signed = name, offset, width, signed

  def _span(self, obj: ctypes.Structure | ctypes.Union) -> tuple[int, int, int]:
    lo, hi = self.offset // 8, (self.offset + self.width + 7) // 8
    return ctypes.addressof(obj) + lo, hi - lo, self.offset % 8

  def __get__(self, obj: Any, owner: type | None = None) -> Any:
    if obj is None: return self
    addr, n, shift = self._span(obj)
    v = int.from_bytes(ctypes.string_at(addr, n), "little") >> shift & ((1 << self.width) - 1)
    return v - (1 << self.width) if self.signed and v >> (self.width - 1) else v

  def __set__(self, obj: Any, value: int) -> None:
    lo = -(1 << (self.width - 1)) if self.signed else 0
    if not lo <= int(value) < lo + (1 << self.width):
      kind = "signed" if self.signed else "unsigned"
      raise ValueError(f"{type(obj).__name__}.{self.name} is {self.width} bit(s) wide, {kind}; {value} does not fit")
    addr, n, shift = self._span(obj)
    mask = (1 << self.width) - 1
    word = int.from_bytes(ctypes.string_at(addr, n), "little") & ~(mask << shift) | (int(value) & mask) << shift
    ctypes.memmove(addr, word.to_bytes(n, "little"), n)

  def __repr__(self) -> str: return f"<BitField {self.name} bits {self.offset}+{self.width}{' signed' if self.signed else ''}>"


def record(cls: type, size: int, fields: list[tuple[int, str, Any]], bits: str = "", anonymous: tuple[str, ...] = ()) -> None:
  """Give `cls` (an empty Structure or Union subclass) the members at the given byte offsets and bit fields."""
  union = issubclass(cls, ctypes.Union)
  out: list[tuple[str, Any]] = []
  at = 0
  for off, name, ctype in fields:
    if not union and off > at: out.append((f"_pad{at}", ctypes.c_uint8 * (off - at)))
    out.append((name, ctype))
    at = max(at, off + ctypes.sizeof(ctype))
  if union: out.append(("_size", ctypes.c_uint8 * size))
  elif at < size: out.append((f"_pad{at}", ctypes.c_uint8 * (size - at)))
  if any(off % ctypes.alignment(t) for off, _, t in fields): cls._pack_ = 1   # a packed C record
  if anonymous: cls._anonymous_ = anonymous
  cls._fields_ = out
  for item in bits.split():
    name, off, width, *sign = item.split(":")
    setattr(cls, name, BitField(name, int(off), int(width), sign == ["s"]))
  wrong = [f"{n} at {getattr(cls, n).offset}, not {off}" for off, n, _ in fields if getattr(cls, n).offset != off]
  if ctypes.sizeof(cls) != size: wrong.append(f"size {ctypes.sizeof(cls)}, not {size}")
  if wrong: raise LayoutError(f"{cls.__name__}: ctypes puts {'; '.join(wrong)}")


def load(path: pathlib.Path, sha256: str, prototypes: dict[str, tuple[Any, tuple[Any, ...]]]) -> ctypes.CDLL:
  """The library at `path` with `prototypes` ({name: (restype, argtypes)}) bound, if it is the build (`sha256`) the
  bindings describe; LibraryMismatch otherwise (a struct offset from another build would corrupt memory silently)."""
  got = hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
  if got != sha256:
    raise LibraryMismatch(f"{path} has sha256 {got}, but the bindings were generated from the build with sha256 {sha256}: "
                          "install the pinned wheel (scripts/setup.sh), or regenerate them from this one (python -m autogen)")
  lib = ctypes.CDLL(str(path))
  for name, (restype, argtypes) in prototypes.items():
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = restype, list(argtypes)
  return lib
