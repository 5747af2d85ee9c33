"""Bit-granular big-endian layouts, as mlx5_ifc.h declares them (`u8 name[N]` = an N-bit field).

Bit 0 is the most significant bit of byte 0, so a field at bit offset `off` of width `w` lies in the
big-endian bit string at [off, off + w): for fields inside one dword this is exactly MLX5_SET/MLX5_GET
(dword off/32, shift 32 - off%32 - w), for 64-bit aligned ones MLX5_SET64. Layouts nest: a field may be
another layout (`qpc.log_sq_size`) or an array of fields or layouts (`pas[3]`, `klm[1].va`).
"""
from __future__ import annotations
import re

_PATH = re.compile(r"(\w+)(?:\[(\d+)\])?$")


class BitLayout:
  __slots__ = ("name", "bits", "_spec", "_fields", "_registry")

  def __init__(self, name: str, bits: int, spec: str, registry: dict[str, "BitLayout"]):
    """`spec`: `name:offset:width[:layout]` or, for arrays, `name:offset:width*count[:layout]` (widths per element)."""
    self.name, self.bits, self._spec, self._registry = name, bits, spec, registry
    self._fields: dict[str, tuple[int, int, int | None, str | None]] | None = None
    registry[name] = self

  @property
  def nbytes(self) -> int: return self.bits // 8

  @property
  def fields(self) -> dict[str, tuple[int, int, int | None, str | None]]:
    """{field: (bit offset, bit width of one element, count or None, nested layout name or None)}."""
    if self._fields is None:
      self._fields = {}
      for item in self._spec.split():
        name, off, width, *sub = item.split(":")
        w, _, n = width.partition("*")
        self._fields[name] = (int(off), int(w), int(n) if n else None, sub[0] if sub else None)
    return self._fields

  def locate(self, path: str) -> tuple[int, int, "BitLayout | None"]:
    """(bit offset, bit width, nested layout) of a dotted path such as `qpc.log_sq_size` or `pas[2]`."""
    layout, off, width, sub = self, 0, self.bits, self
    for part in path.split("."):
      if layout is None: raise KeyError(f"{self.name}.{path}: {part!r} is inside a plain field")
      if not (m := _PATH.match(part)) or m.group(1) not in layout.fields:
        raise KeyError(f"{layout.name} has no field {part!r}; fields: {', '.join(layout.fields)}")
      foff, fwidth, count, subname = layout.fields[m.group(1)]
      if m.group(2) is not None:
        if count is None: raise KeyError(f"{layout.name}.{m.group(1)} is not an array")
        i = int(m.group(2))
        if count and i >= count: raise KeyError(f"{layout.name}.{m.group(1)}[{i}] is past its {count} elements")
        foff += i * fwidth
      elif count is not None: fwidth *= count  # the whole array
      off, width = off + foff, fwidth
      layout = sub = self._registry[subname] if subname and (count is None or m.group(2) is not None) else None
    return off, width, sub

  def get(self, buf: bytes | bytearray | memoryview, path: str) -> int:
    off, width, _ = self.locate(path)
    lo, hi = off // 8, (off + width + 7) // 8
    if hi > len(buf): raise ValueError(f"{self.name}.{path} ends at byte {hi}; the buffer has {len(buf)}")
    return (int.from_bytes(buf[lo:hi], "big") >> (hi * 8 - off - width)) & ((1 << width) - 1)

  def set(self, buf: bytearray | memoryview, path: str, value: int) -> None:
    off, width, _ = self.locate(path)
    if not 0 <= value < 1 << width: raise ValueError(f"{self.name}.{path} is {width} bit(s) wide; {value:#x} does not fit")
    lo, hi = off // 8, (off + width + 7) // 8
    if hi > len(buf): raise ValueError(f"{self.name}.{path} ends at byte {hi}; the buffer has {len(buf)}")
    shift, mask = hi * 8 - off - width, (1 << width) - 1
    word = int.from_bytes(buf[lo:hi], "big") & ~(mask << shift) | value << shift
    buf[lo:hi] = word.to_bytes(hi - lo, "big")

  def build(self, values: dict[str, int] | None = None, nbytes: int | None = None, **kw: int) -> bytearray:
    """A zeroed buffer (the layout's size unless `nbytes`) with the given paths set: `build({"qpc.pd": 3}, opcode=0x500)`."""
    buf = bytearray(self.nbytes if nbytes is None else nbytes)
    for path, v in {**(values or {}), **kw}.items(): self.set(buf, path, v)
    return buf

  def decode(self, buf: bytes | bytearray | memoryview) -> dict[str, int]:
    """Every plain (non-array, non-nested) top-level field's value."""
    return {n: self.get(buf, n) for n, (_, _, count, sub) in self.fields.items() if count is None and sub is None}

  def __repr__(self) -> str: return f"<BitLayout {self.name} {self.bits} bits, {len(self.fields)} fields>"
