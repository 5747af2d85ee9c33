"""C headers -> one Python module of ctypes records, enum constants, integer macros and macro functions.

Every record is checked against clang's layout (size, alignment, each field's bit offset) by building the
generated classes before the file is written, so a ctypes layout that differs from C fails generation.
"""
from __future__ import annotations
import ctypes, pathlib
from dataclasses import dataclass
import clang.cindex as ci
from autogen.gen import cparse, headers, pyexpr
from autogen.gen.writer import Module

K = ci.TypeKind
SCALARS = {K.BOOL: "c_bool", K.CHAR_S: "c_char", K.SCHAR: "c_int8", K.CHAR_U: "c_char", K.UCHAR: "c_uint8",
           K.SHORT: "c_int16", K.USHORT: "c_uint16", K.INT: "c_int32", K.UINT: "c_uint32", K.LONG: "c_int64",
           K.ULONG: "c_uint64", K.LONGLONG: "c_int64", K.ULONGLONG: "c_uint64", K.FLOAT: "c_float",
           K.DOUBLE: "c_double", K.POINTER: "c_void_p"}


class LayoutMismatch(RuntimeError):
  """A generated ctypes record does not have clang's layout."""


def _key(c: ci.Cursor) -> int:
  return c.hash  # not the location: records made by one macro expansion share it (__DECLARE_FLEX_ARRAY)


def _unnamed(c: ci.Cursor) -> bool: return c.is_anonymous() or "(" in c.spelling


class Records:
  """Names and ctypes field lists for the records of one parse (plus the records they use from other headers)."""

  def __init__(self, hdr: cparse.Header, errors: list[tuple[str, int, str]] = ()):
    self.names: dict[int, str] = {}
    self.order: list[ci.Cursor] = []
    self.anon_fields: dict[int, dict[int, str]] = {}  # record -> {nested key: member name} for anonymous members
    self.errors = errors
    self.left_out: dict[int, str] = {}  # record -> why clang could not lay it out
    for rec in hdr.records:
      if not _unnamed(rec): self._add(rec)  # unnamed ones are reached (and named) through their parent

  def _add(self, rec: ci.Cursor) -> None:
    k = _key(rec)
    if k in self.anon_fields or k in self.left_out: return
    if why := _first_error(rec, self.errors):
      self.left_out[k] = why; return
    if not _unnamed(rec): self.names[k] = rec.spelling
    self.anon_fields[k] = {}
    nested = [(f, _record_of(f.type)) for f in rec.type.get_fields()]
    n_anon = 0
    for f, decl in nested:  # name unnamed nested records after their parent and member
      if decl is None or not _unnamed(decl): continue
      if "(" in f.spelling:
        member = f"_{n_anon}"; n_anon += 1
        self.anon_fields[k][_key(decl)] = member
        self.names[_key(decl)] = f"{self.names[k]}{member}"
      else: self.names[_key(decl)] = f"{self.names[k]}_{f.spelling}"
    for f, decl in nested:  # records used by fields come first (they may live in other headers)
      if decl is None: continue
      self._add(decl)
      if _key(decl) in self.left_out:
        self.left_out[k] = f"uses {decl.spelling}"; return
    self.order.append(rec)

  def ctype(self, t: ci.Type) -> str:
    t = t.get_canonical()
    if t.kind == K.RECORD: return self.names[_key(t.get_declaration())]
    if t.kind == K.ENUM: return self.ctype(t.get_declaration().enum_type)
    if t.kind == K.CONSTANTARRAY: return f"{_paren(self.ctype(t.element_type))} * {t.element_count}"
    if t.kind == K.INCOMPLETEARRAY: return f"{_paren(self.ctype(t.element_type))} * 0"
    if t.kind in (K.FUNCTIONPROTO, K.FUNCTIONNOPROTO): return "c_void_p"
    if t.kind in SCALARS: return SCALARS[t.kind]
    raise NotImplementedError(f"C type {t.spelling} ({t.kind}) has no ctypes mapping")

  def fields(self, rec: ci.Cursor) -> list[tuple[str, str, int | None, int]]:
    """(name, ctype, bit width or None, clang bit offset) for each member, anonymous members named _0, _1, ..."""
    out = []
    for f in rec.type.get_fields():
      if "(" in f.spelling: name = self.anon_fields[_key(rec)][_key(f.type.get_canonical().get_declaration())]
      else: name = pyexpr.pyname(f.spelling)
      out.append((name, self.ctype(f.type), f.get_bitfield_width() if f.is_bitfield() else None, f.get_field_offsetof()))
    return out


def _record_of(t: ci.Type) -> ci.Cursor | None:
  """The record declaration a field's type (or array element type) names, if any."""
  t = t.get_canonical()
  while t.kind in (K.CONSTANTARRAY, K.INCOMPLETEARRAY): t = t.element_type.get_canonical()
  return t.get_declaration() if t.kind == K.RECORD else None


def _paren(t: str) -> str: return f"({t})" if "*" in t else t


def _pack(rec: ci.Cursor) -> int | None:
  """ctypes `_pack_` for a record laid out tighter than its members' natural alignment (__packed, #pragma pack)."""
  natural = max((f.type.get_align() for f in rec.type.get_fields()), default=1)
  packed = any(c.kind == ci.CursorKind.PACKED_ATTR for c in rec.get_children())
  return 1 if packed else rec.type.get_align() if rec.type.get_align() < natural else None


@dataclass(frozen=True)
class CModule:
  """A generator: the headers (relative to a package root) that make up one generated module."""
  out: str                          # path under autogen/, e.g. "kfd.py" or "amd/discovery.py"
  package: str                      # "libc" (linux-libc-dev) or "source" (linux-source-6.12)
  headers: tuple[str, ...]
  include: tuple[str, ...] = ()     # extra include directories, relative to the package root
  kernel: bool = False              # kernel-internal header: needs cparse.KERNEL_PRELUDE
  kernel_state: bool = False        # also declares driver-state records that need kernel headers: skip and list those
  defines: tuple[str, ...] = ()     # -D options the header expects from the kernel build
  constants_only: bool = False      # kernel-internal header: only its enums and macros (its #includes are not followed)
  doc: str = ""

  def __call__(self, outdir: pathlib.Path) -> list[pathlib.Path]:
    libc, src = headers.packages()
    pkg = libc if self.package == "libc" else src
    incs = [pkg.path(d) for d in self.include] + [libc.root, libc.root / "x86_64-linux-gnu"]
    hdr = cparse.parse([pkg.path(h) for h in self.headers], incs, cparse.KERNEL_PRELUDE if self.kernel else "",
                       self.defines, tolerate_errors=self.kernel_state or self.constants_only,
                       blank_includes=self.constants_only)
    mod = Module(f"autogen/{self.out}", pkg, list(self.headers), self.doc)
    errors = [(d.location.file.name, d.location.line, d.spelling) for d in hdr.tu.diagnostics
              if d.severity >= ci.Diagnostic.Error and d.location.file and d.location.file.name in hdr.files]
    if self.constants_only: emit_constants(hdr, mod, errors)
    else: emit(hdr, mod, errors)
    path = outdir / self.out
    mod.write(path)
    return [path]


def _first_error(c: ci.Cursor, errors: list[tuple[str, int, str]]) -> str | None:
  """`file:line: message` of the first clang error inside a declaration, if any."""
  ext = c.extent
  return next((f"{pathlib.Path(f).name}:{ln}: {msg}" for f, ln, msg in errors
               if f == ext.start.file.name and ext.start.line <= ln <= ext.end.line), None)


def emit_enums(hdr: cparse.Header, mod: Module, ctypes_used: set[str], errors: list[tuple[str, int, str]] = ()) -> None:
  """Enum constants in source order, each enum followed by an alias naming its integer ctypes type."""
  for e in hdr.enums:
    if _first_error(e, errors): continue  # an enumerator clang could not evaluate (emit_constants lists it)
    t = SCALARS[e.enum_type.get_canonical().kind]
    named = not _unnamed(e)
    mod.section(f"enum {e.spelling if named else '(anonymous)'} ({t})")
    for c in e.get_children():
      if c.kind == ci.CursorKind.ENUM_CONSTANT_DECL:
        mod.const(c.spelling, c.enum_value, hexa=c.enum_value > 0xffff or any(t.spelling.startswith(("0x", "0X")) for t in c.get_tokens()))
    if named:
      mod.define(e.spelling, t); ctypes_used.add(t)


def emit(hdr: cparse.Header, mod: Module, errors: list[tuple[str, int, str]] = (), bit_ranges: bool = False) -> None:
  recs = Records(hdr, errors)
  ctypes_used: set[str] = set()
  emit_enums(hdr, mod, ctypes_used)
  # records
  for rec in recs.order:
    name, fields = recs.names[_key(rec)], recs.fields(rec)
    base = "Union" if rec.kind == ci.CursorKind.UNION_DECL else "Structure"
    ctypes_used.add(base)
    lines = [f"class {name}({base}):"]
    if pack := _pack(rec): lines.append(f"  _pack_ = {pack}")
    anon = [f[0] for f in fields if f[0] in recs.anon_fields[_key(rec)].values()]
    if anon: lines.append(f"  _anonymous_ = {tuple(anon)!r}")
    if not fields: lines.append("  _fields_ = []")
    else:
      lines.append("  _fields_ = [")
      for fname, ft, bits, _ in fields:
        ctypes_used.update(w for w in ft.replace("(", " ").replace(")", " ").split() if w.startswith("c_"))
        lines.append(f"    ({fname!r}, {ft}{'' if bits is None else f', {bits}'}),")
      lines.append("  ]")
    mod.block(name, "\n".join(lines), layout=(rec.type.get_size(), rec.type.get_align(), fields))
  if recs.left_out:
    mod.section("records left out: kernel driver state that clang cannot lay out without kernel-internal headers\n# "
                + "\n# ".join(sorted(f"{c.spelling}: {why}" for c in hdr.records if (why := recs.left_out.get(_key(c))))))
  # typedefs that name something other than a same-named record
  for td in hdr.typedefs:
    t = td.underlying_typedef_type.get_canonical()
    if t.kind == K.RECORD and recs.names.get(_key(t.get_declaration())) == td.spelling: continue
    try: target = recs.ctype(t)
    except (NotImplementedError, KeyError): continue  # e.g. a typedef of a record defined in no target header
    mod.define(td.spelling, target)
    ctypes_used.update(w for w in target.replace("(", " ").replace(")", " ").split() if w.startswith("c_"))
  emit_macros(hdr, mod, bit_ranges)
  mod.imports("ctypes", sorted(ctypes_used))
  check_layouts(mod)


def emit_constants(hdr: cparse.Header, mod: Module, errors: list[tuple[str, int, str]]) -> None:
  """Enums and macros only, of a header parsed without its includes; what needed them is listed, not guessed."""
  ctypes_used: set[str] = set()
  emit_enums(hdr, mod, ctypes_used, errors)
  emit_macros(hdr, mod)
  objs = [m.name for m in hdr.macros if m.params is None and m.body and m.name not in mod.names]
  skipped = [e.spelling if not _unnamed(e) else f"(enum at {pathlib.Path(e.location.file.name).name}:{e.location.line})"
             for e in hdr.enums if _first_error(e, errors)]
  if objs or skipped:
    mod.section("left out: they need the kernel definitions the header #includes, or are not integers: "
                + " ".join(skipped + objs))
  mod.imports("ctypes", sorted(ctypes_used))


def bit_range(body: list[str]) -> tuple[list[str], list[str]] | None:
  """The (high, low) token lists of an NVIDIA field-range macro body, `hi:lo` or `MW(hi:lo)`; None for other bodies."""
  if len(body) > 3 and body[0] == "MW" and body[1] == "(" and body[-1] == ")": body = body[2:-1]
  if body.count(":") != 1 or "?" in body: return None
  i = body.index(":")
  return (body[:i], body[i + 1:]) if i and i < len(body) - 1 else None


def emit_macros(hdr: cparse.Header, mod: Module, bit_ranges: bool = False) -> None:
  """Integer object-like macros (values computed by clang) and translatable function-like macros.
  `bit_ranges`: NVIDIA's `hi:lo` / `MW(hi:lo)` field ranges become (hi, lo) tuples (functions of the index for
  indexed fields such as QMD constant buffers)."""
  objs = [m for m in hdr.macros if m.params is None and m.body]
  vals = {m.name: v for m in objs if (v := cparse.literal_value(m.body)) is not None}
  ranges = {m.name: r for m in objs if bit_ranges and m.name not in vals and (r := bit_range(m.body))}
  vals.update(cparse.evaluate_macros(hdr, [m.name for m in objs if m.name not in vals and m.name not in ranges]))
  mod.section("macros")
  for m in objs:
    if m.name in vals: mod.const(m.name, vals[m.name], hexa=any(t.lower().startswith("0x") for t in m.body) or vals[m.name] > 0xffff)
    elif m.name in ranges:
      hi, lo = (eval(pyexpr.translate([], side, set(), set()) or "None") for side in ranges[m.name])
      if isinstance(hi, int) and isinstance(lo, int): mod.define(m.name, f"({hi}, {lo})")
  funcs = {m.name for m in hdr.macros if m.params is not None}
  known = set(mod.names)
  done = False
  todo = [m for m in hdr.macros if m.params is not None]
  while not done:  # a macro may call one defined after it: translate until nothing changes
    done = True
    for m in list(todo):
      if bit_ranges and (r := bit_range(m.body)):
        sides = [pyexpr.translate(m.params, side, known, funcs & known) for side in r]
        expr = None if None in sides else f"({sides[0]}, {sides[1]})"
      else: expr = pyexpr.translate(m.params, m.body, known, funcs & (known | {m.name}))
      if expr is not None:
        mod.function(m.name, [pyexpr.pyname(p) for p in m.params], expr, order=(m.file, m.line))
        known.add(m.name); todo.remove(m); done = False
  if todo:
    mod.section("function-like macros not translated (strings, casts, ?:, names from other headers): "
                + " ".join(sorted(m.name for m in todo)))


def check_layouts(mod: Module) -> None:
  """Build the module's classes and compare sizes, alignments and field offsets with clang's."""
  ns = mod.execute()
  for name, (size, align, fields) in mod.layouts.items():
    cls = ns[name]
    if ctypes.sizeof(cls) != size or ctypes.alignment(cls) != align:
      raise LayoutMismatch(f"{mod.path}: {name} is {ctypes.sizeof(cls)} bytes aligned {ctypes.alignment(cls)} in ctypes, "
                           f"{size} aligned {align} in C")
    for fname, _, bits, bitoff in fields:
      cf = getattr(cls, fname)
      got = cf.offset * 8 + ((cf.size & 0xffff) if bits is not None else 0)
      if got != bitoff or (bits is not None and cf.size >> 16 != bits):
        raise LayoutMismatch(f"{mod.path}: {name}.{fname} at bit {got} in ctypes, {bitoff} in C")
