"""mlx5_ifc.h -> autogen.bitlayout.BitLayout tables (plus its enums and macros).

mlx5_ifc.h describes big-endian, bit-granular layouts with `u8 name[N]` meaning "an N-bit field": parsed
with u8 as a byte, clang's byte offsets and sizes of `struct mlx5_ifc_X_bits` are the bit offsets and widths.
Fields named reserved* are padding and are left out of the tables (each layout keeps its total size).
"""
from __future__ import annotations
import pathlib, re
from dataclasses import dataclass
import clang.cindex as ci
from autogen.gen import cparse, headers
from autogen.gen.cmodule import K, emit_enums, emit_macros
from autogen.gen.writer import Module

_BITS = re.compile(r"^mlx5_ifc_(\w+)_bits$")


class BadBitLayout(RuntimeError):
  """A field of an mlx5_ifc record is not a u8 array or a nested _bits record."""


def short_name(rec: ci.Cursor, parent: str = "", field: str = "") -> str:
  m = _BITS.match(rec.spelling)
  return m.group(1) if m else f"{parent}_{field}"  # an unnamed record is named after its parent and member


def _field_spec(name: str, off: int, t: ci.Type, owner: str, nested: list) -> str:
  """`name:off:width[*count][:layout]` for one member of type `t` (canonical)."""
  count = None
  if t.kind in (K.CONSTANTARRAY, K.INCOMPLETEARRAY) and t.element_type.get_canonical().kind != K.UCHAR:
    count = t.element_count if t.kind == K.CONSTANTARRAY else 0
    t = t.element_type.get_canonical()
  n = "" if count is None else f"*{count}"
  if t.kind in (K.CONSTANTARRAY, K.INCOMPLETEARRAY) and t.element_type.get_canonical().kind == K.UCHAR:
    return f"{name}:{off}:{t.element_count if t.kind == K.CONSTANTARRAY else 0}{n}"
  if t.kind == K.RECORD:
    decl = t.get_declaration()
    sub = short_name(decl, owner, name)
    if not _BITS.match(decl.spelling): nested.append((decl, sub))
    return f"{name}:{off}:{t.get_size()}{n}:{sub}"
  raise BadBitLayout(f"{owner}.{name} has type {t.spelling}: expected u8[N] or a struct/union mlx5_ifc_*_bits")


def layout_fields(rec: ci.Cursor, owner: str, nested: list, base: int = 0) -> list[str]:
  out = []
  for f in rec.type.get_fields():
    off = base + f.get_field_offsetof() // 8  # bytes of u8 in the parse = bits of the device layout
    t = f.type.get_canonical()
    if "(" in f.spelling: out += layout_fields(t.get_declaration(), owner, nested, off)  # anonymous member: flatten
    elif not f.spelling.startswith("reserved"): out.append(_field_spec(f.spelling, off, t, owner, nested))
  return out


def _wrap(spec: list[str], width: int = 110) -> str:
  lines, cur = [], ""
  for item in spec:
    if cur and len(cur) + len(item) + 1 > width: lines.append(cur + " "); cur = item
    else: cur = f"{cur} {item}" if cur else item
  lines.append(cur)
  return repr(lines[0]) if len(lines) == 1 else "(\n  " + "\n  ".join(repr(ln) for ln in lines) + ")"


@dataclass(frozen=True)
class BitLayoutModule:
  out: str
  headers: tuple[str, ...]
  doc: str = ""

  def __call__(self, outdir: pathlib.Path) -> list[pathlib.Path]:
    libc, src = headers.packages()
    hdr = cparse.parse([src.path(h) for h in self.headers], [libc.root, libc.root / "x86_64-linux-gnu"], cparse.KERNEL_PRELUDE)
    mod = Module(f"autogen/{self.out}", src, list(self.headers), self.doc)
    ctypes_used: set[str] = set()
    emit_enums(hdr, mod, ctypes_used)
    mod.section("bit layouts: NAME = BitLayout(NAME, size in bits, 'field:bit offset:bit width[*count][:layout] ...')")
    mod.parts.append("LAYOUTS: dict[str, BitLayout] = {}")
    todo = [(r, short_name(r)) for r in hdr.records if _BITS.match(r.spelling)]
    defined, used = set(), set()
    while todo:
      rec, name = todo.pop(0)
      nested: list = []
      spec = layout_fields(rec, name, nested)
      mod.define(name, f"BitLayout({name!r}, {rec.type.get_size()}, {_wrap(spec)}, LAYOUTS)")
      defined.add(name)
      used.update(f.split(":")[3] for f in spec if f.count(":") == 3)
      todo[:0] = nested
    if missing := used - defined: raise BadBitLayout(f"layouts used but defined in no listed header: {sorted(missing)}")
    emit_macros(hdr, mod)
    mod.imports("autogen.bitlayout", ["BitLayout"])
    mod.imports("ctypes", sorted(ctypes_used))
    path = outdir / self.out
    mod.write(path)
    return [path]
