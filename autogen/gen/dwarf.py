"""A shared library's DWARF debug info -> one Python module of explicit-offset ctypes records (autogen.clayout), enum
constants, prototypes of exported functions and the types of exported data.

Only the compile units that define the wanted functions are read (found through .debug_aranges from the functions'
.dynsym addresses), and of each only its top-level DIEs; types are followed lazily from there. Named records and enums
come from the first of those units that defines them completely; nested unnamed ones are named `parent_member` (or
`parent__N` for an unnamed member, which is also anonymous in ctypes). Every record is built with autogen.clayout
before the file is written, so a layout ctypes cannot reproduce fails generation, and each exported datum's type must
have the size .dynsym gives it.
"""
from __future__ import annotations
import base64, ctypes, hashlib, io, pathlib, re, struct
from dataclasses import dataclass
from importlib import metadata
from elftools.dwarf.die import DIE
from elftools.elf.elffile import ELFFile
from autogen.gen.headers import HeadersMissing, Package
from autogen.gen.pyexpr import pyname
from autogen.gen.writer import GENERATOR_VERSION, Module

RECORD_TAGS = {"DW_TAG_structure_type": "Structure", "DW_TAG_union_type": "Union"}
QUALIFIERS = ("DW_TAG_const_type", "DW_TAG_volatile_type", "DW_TAG_restrict_type", "DW_TAG_atomic_type", "DW_TAG_typedef")
# DW_ATE_* (DWARF 5, 7.8): base type encodings
ATE_BOOL, ATE_FLOAT, ATE_SIGNED, ATE_SIGNED_CHAR, ATE_UNSIGNED, ATE_UNSIGNED_CHAR = 2, 4, 5, 6, 7, 8
INTS = {1: "8", 2: "16", 4: "32", 8: "64"}
STT_FUNC = 2                                           # elf.h: a symbol's type, the low 4 bits of st_info


class DwarfError(RuntimeError):
  """The library's debug info lacks something the generator was asked for, or has a form it does not read."""


def _name(die: DIE) -> str | None:
  a = die.attributes.get("DW_AT_name")
  return a.value.decode() if a else None


def _type(die: DIE) -> DIE | None:
  return die.get_DIE_from_attribute("DW_AT_type") if "DW_AT_type" in die.attributes else None


def _strip(die: DIE | None) -> DIE | None:
  while die is not None and die.tag in QUALIFIERS: die = _type(die)
  return die


@dataclass(frozen=True)
class Wheel:
  """The installed wheel that ships the library: what the generated header names and pins."""
  dist: str
  version: str
  tag: str
  library: pathlib.Path
  sha256: str

  @property
  def filename(self) -> str: return f"{self.dist}-{self.version}-{self.tag}.whl"


def installed_wheel(dist: str, library: str) -> Wheel:
  """The wheel `dist` as installed, with the sha256 of its file `library` (a path inside the wheel), checked against the
  wheel's RECORD so a library changed after installation is refused."""
  try: d = metadata.distribution(dist)
  except metadata.PackageNotFoundError: raise HeadersMissing(f"the {dist} wheel is not installed: run scripts/setup.sh") from None
  tag = next(line.split(":", 1)[1].strip() for line in (d.read_text("WHEEL") or "").splitlines() if line.startswith("Tag:"))
  entry = next((f for f in d.files or () if str(f) == library), None)
  if entry is None or entry.hash is None: raise DwarfError(f"{dist} {d.version} has no {library} in its RECORD")
  path = pathlib.Path(entry.locate())
  sha = hashlib.sha256(path.read_bytes()).digest()
  if base64.urlsafe_b64encode(sha).rstrip(b"=").decode() != entry.hash.value:
    raise DwarfError(f"{path} differs from the file {dist} {d.version}'s RECORD lists: reinstall {dist}=={d.version}")
  return Wheel(dist, d.version, tag, path, sha.hex())


def _exports(elf: ELFFile) -> dict[str, tuple[int, int, int]]:
  """{name: (type, st_value, st_size)} of each symbol .dynsym defines: Elf64_Sym entries (elf.h) read directly, which
  is many times faster than pyelftools' per-symbol parse."""
  if elf.elfclass != 64 or not elf.little_endian: raise DwarfError("only little-endian ELF64 libraries are read")
  dynsym = elf.get_section_by_name(".dynsym")
  names = elf.get_section(dynsym["sh_link"]).data()
  out = {}
  for st_name, st_info, _, st_shndx, st_value, st_size in struct.iter_unpack("<IBBHQQ", dynsym.data()):
    if st_shndx: out[names[st_name:names.index(b"\0", st_name)].decode()] = (st_info & 0xF, st_value, st_size)
  return out


class Dwarf:
  """The compile units of one library that define a set of exported functions, indexed by their top-level names."""

  def __init__(self, path: pathlib.Path, functions: tuple[str, ...], variables: tuple[str, ...] = ()):
    self.elf = ELFFile(io.BytesIO(path.read_bytes()))
    self.info = self.elf.get_dwarf_info()
    aranges = self.info.get_aranges()
    self.symbols = _exports(self.elf)
    self.units: list = []                                # the compile units read, in the order first needed
    self.functions: dict[str, DIE] = {}
    self.types: dict[str, DIE] = {}                      # record/enum tag or typedef name -> complete definition
    self.typedefs: dict[int, list[str]] = {}             # DIE offset of a record or enum -> typedef names of it
    self.variables: dict[str, DIE] = {}
    self.unnamed_enums: dict[str, DIE] = {}              # first enumerator -> an enum with neither tag nor typedef
    self._resolved: dict[tuple[int, bool], DIE | None] = {}
    for fn in functions:
      sym = self.symbols.get(fn)
      if sym is None or sym[0] != STT_FUNC: raise DwarfError(f"{path.name} exports no function {fn}")
      off = aranges.cu_offset_at_addr(sym[1])
      if off is None: raise DwarfError(f"{path.name}: no compile unit covers {fn} (.debug_aranges)")
      cu = self.info.get_CU_at(off)
      if cu not in self.units: self._index(cu)
      self.functions[fn] = self._subprogram(cu, fn)
    for v in variables:
      if v not in self.variables: raise DwarfError(f"no compile unit read declares the variable {v}")
      if v not in self.symbols: raise DwarfError(f"{path.name} does not export {v}")

  def _index(self, cu) -> None:
    self.units.append(cu)
    for die in cu.get_top_DIE().iter_children():
      name = _name(die)
      if name is None:
        if die.tag == "DW_TAG_enumeration_type" and (first := next(die.iter_children(), None)) is not None:
          self.unnamed_enums.setdefault(_name(first), die)
        continue
      if die.tag in RECORD_TAGS or die.tag == "DW_TAG_enumeration_type":
        if "DW_AT_declaration" not in die.attributes: self.types.setdefault(name, die)
      elif die.tag == "DW_TAG_typedef" and (t := _strip(die)) is not None:
        if t.tag in RECORD_TAGS or t.tag == "DW_TAG_enumeration_type":
          if "DW_AT_declaration" in t.attributes or name in self.types: continue
          self.types[name] = t = self.types.get(_name(t) or "", t)    # the definition already indexed under its tag
          self.typedefs.setdefault(t.offset, []).append(name)
      elif die.tag == "DW_TAG_variable" and "DW_AT_external" in die.attributes: self.variables.setdefault(name, die)

  @staticmethod
  def _subprogram(cu, fn: str) -> DIE:
    """The DIE that defines `fn` (its name, parameters and result; an inlined-and-out-of-line function's abstract one)."""
    for die in cu.get_top_DIE().iter_children():
      if die.tag == "DW_TAG_subprogram" and _name(die) == fn and "DW_AT_declaration" not in die.attributes: return die
    raise DwarfError(f"compile unit {_name(cu.get_top_DIE())} covers {fn}'s address but defines no {fn}")

  def type(self, name: str) -> DIE:
    if name not in self.types:
      raise DwarfError(f"no record or enum named {name} in {', '.join(_name(cu.get_top_DIE()) for cu in self.units)}: "
                       "add a function defined where it is used to the generator's function list")
    return self.types[name]

  def resolve(self, die: DIE | None, strict: bool = True) -> DIE | None:
    """A type without qualifiers and typedefs; a record or enum as its one definition (found by its tag or, if it
    has none, the typedef that names it), so every compile unit's copy of it is the same DIE. `strict`: a record
    declared but defined in no unit read is an error (else the declaration is returned)."""
    if die is None: return None
    key = (die.offset, strict)
    if key not in self._resolved: self._resolved[key] = self._resolve(die, strict)
    return self._resolved[key]

  def _resolve(self, die: DIE | None, strict: bool) -> DIE | None:
    typedef = None
    while die is not None and die.tag in QUALIFIERS:
      if die.tag == "DW_TAG_typedef": typedef = _name(die)
      die = _type(die)
    if die is None or die.tag not in RECORD_TAGS and die.tag != "DW_TAG_enumeration_type": return die
    name = _name(die) or typedef
    if name in self.types: return self.types[name]
    if strict and "DW_AT_declaration" in die.attributes: self.type(name)   # raises: says where it was looked for
    return die


@dataclass(frozen=True)
class DwarfModule:
  """A generator: the records, enums, exported functions and data of one library's DWARF that make one module."""
  out: str                          # path under autogen/, e.g. "mesa.py"
  dist: str                         # the wheel that ships the library
  library: str                      # its path inside the wheel
  functions: tuple[str, ...]
  records: tuple[str, ...]
  enums: tuple[str, ...] = ()       # besides those the records and functions use; `name:FIRST_ENUMERATOR` for an enum
                                    # whose typedef no unit read uses (the compiler then leaves the enum unnamed)
  variables: tuple[str, ...] = ()
  doc: str = ""

  def __call__(self, outdir: pathlib.Path) -> list[pathlib.Path]:
    wheel = installed_wheel(self.dist, self.library)
    text = Emitter(Dwarf(wheel.library, self.functions, self.variables), wheel, self).text()
    path = outdir / self.out
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return [path]


class DwarfSource(Module):
  """writer.Module with a header that names the wheel, the library's sha256 and the compile units read."""

  def __init__(self, label: str, wheel: Wheel, units: list[str], doc: str):
    super().__init__(label, Package(wheel.dist, wheel.version, wheel.library.parent, "", origin=f"PyPI wheel {wheel.filename}"),
                     units, doc)
    self.wheel = wheel

  def header(self) -> str:
    units = "".join(f"#   {u}\n" for u in self.header_paths)
    doc = f'"""{self.doc}"""\n' if self.doc else ""
    return (f"# Generated by `python -m autogen` (generator version {GENERATOR_VERSION}); do not edit.\n{self._source()}\n"
            f"# library: {self.wheel.library.parent.name}/{self.wheel.library.name} sha256 {self.wheel.sha256}\n"
            f"# compile units (DWARF):\n{units}{doc}")


class Emitter:
  """Renders the module: enums, then every record (declared first, so pointers may name later ones), then prototypes."""

  def __init__(self, dw: Dwarf, wheel: Wheel, spec: DwarfModule):
    self.dw, self.spec = dw, spec
    self.names: dict[int, str] = {}          # record DIE offset -> Python class name
    self.records: list[DIE] = []             # in dependency order: by-value members before their parent
    self.enums: dict[int, DIE] = {}          # DIE offset -> enum, for the enums section
    units = [_name(cu.get_top_DIE()).removeprefix("../") for cu in dw.units]
    self.mod = DwarfSource(f"autogen/{spec.out}", wheel, units, spec.doc)
    for name in spec.records:
      if dw.type(name).tag not in RECORD_TAGS: raise DwarfError(f"{name} is an enum, not a record")
      self._need_record(dw.type(name), name)
    used = [_type(dw.variables[v]) for v in spec.variables]            # records passed, returned or exported by value
    for fn in dw.functions.values(): used += [_type(fn)] + [_type(p) for p in fn.iter_children() if p.tag == "DW_TAG_formal_parameter"]
    for t in used:
      while (s := dw.resolve(t)) is not None and s.tag == "DW_TAG_array_type": t = _type(s)
      if s is not None and s.tag in RECORD_TAGS: self._need_record(s)
    self.enum_names: dict[int, str] = {}     # DIE offset -> the name the generator's spec gives an unnamed enum
    for name in spec.enums:
      name, _, first = name.partition(":")
      if first and first not in dw.unnamed_enums: raise DwarfError(f"no unnamed enum starts with {first} (for {name})")
      t = dw.unnamed_enums[first] if first else dw.type(name)
      if first: self.enum_names[t.offset] = name
      self.enums.setdefault(t.offset, t)

  # ---- which records: the named ones and all they hold by value
  def _record_name(self, die: DIE, parent: str = "", member: str = "") -> str:
    if (n := _name(die)) is not None: return n
    if names := self.dw.typedefs.get(die.offset): return names[0]
    if not parent: raise DwarfError(f"an unnamed record at DIE {die.offset:#x} is used outside any named one")
    return f"{parent}_{member}"

  def _need_record(self, die: DIE, name: str | None = None, parent: str = "", member: str = "") -> None:
    if die.offset in self.names: return
    self.names[die.offset] = name = name or self._record_name(die, parent, member)
    anon = 0
    for m in die.iter_children():
      if m.tag != "DW_TAG_member": continue
      t = self.dw.resolve(_type(m))
      while t.tag == "DW_TAG_array_type": t = self.dw.resolve(_type(t))
      if t.tag in RECORD_TAGS:
        mname = _name(m)
        if mname is None: mname, anon = f"_{anon}", anon + 1
        self._need_record(t, parent=name, member=mname)
      elif t.tag == "DW_TAG_enumeration_type": self.enums.setdefault(t.offset, t)
    self.records.append(die)

  # ---- types
  def ctype(self, die: DIE | None) -> str:
    """The ctypes expression for a DWARF type (void, as a function's result, is None)."""
    t = self.dw.resolve(die)
    if t is None: return "None"
    if t.tag == "DW_TAG_base_type": return self._base(t)
    if t.tag == "DW_TAG_enumeration_type":
      self.enums.setdefault(t.offset, t)
      return self._enum_name(t) or self._enum_base(t)
    if t.tag in RECORD_TAGS: return self.names[t.offset]
    if t.tag == "DW_TAG_array_type":
      dims = [c for c in t.iter_children() if c.tag == "DW_TAG_subrange_type"]
      out = self.ctype(_type(t))
      for d in reversed(dims):
        if "DW_AT_count" in d.attributes: n = d.attributes["DW_AT_count"].value
        elif "DW_AT_upper_bound" in d.attributes: n = d.attributes["DW_AT_upper_bound"].value + 1
        else: n = 0                            # a flexible array member
        out = f"{_paren(out)} * {n}"
      return out
    if t.tag == "DW_TAG_pointer_type": return self._pointer(_type(t))
    if t.tag == "DW_TAG_subroutine_type": return "c_void_p"
    raise DwarfError(f"DWARF type {t.tag} at DIE {t.offset:#x} has no ctypes mapping")

  def _pointer(self, target: DIE | None) -> str:
    t = self.dw.resolve(target, strict=False)
    if t is None or t.tag == "DW_TAG_subroutine_type": return "c_void_p"
    if t.tag == "DW_TAG_base_type" and _name(t) == "char": return "c_char_p"
    if t.tag in RECORD_TAGS and t.offset not in self.names: return "c_void_p"   # a record not laid out here: a handle
    if t.tag == "DW_TAG_pointer_type" and self._pointer(_type(t)) == "c_void_p": return "c_void_p"
    return f"POINTER({self.ctype(target)})"

  def _base(self, t: DIE) -> str:
    enc, size = t.attributes["DW_AT_encoding"].value, t.attributes["DW_AT_byte_size"].value
    if enc == ATE_BOOL: out = "c_bool"
    elif enc == ATE_FLOAT: out = {4: "c_float", 8: "c_double", 16: "c_longdouble"}[size]
    elif enc == ATE_SIGNED_CHAR and _name(t) == "char": out = "c_char"
    elif enc in (ATE_SIGNED, ATE_SIGNED_CHAR) and size in INTS: out = f"c_int{INTS[size]}"
    elif enc in (ATE_UNSIGNED, ATE_UNSIGNED_CHAR) and size in INTS: out = f"c_uint{INTS[size]}"
    elif enc in (ATE_SIGNED, ATE_UNSIGNED) and size == 16: out = "c_uint64 * 2"   # __int128
    else: raise DwarfError(f"base type {_name(t)} (encoding {enc}, {size} bytes) has no ctypes mapping")
    return out

  def _enum_base(self, t: DIE) -> str:
    if (b := self.dw.resolve(_type(t))) is not None: return self._base(b)
    size = t.attributes["DW_AT_byte_size"].value
    signed = any(c.attributes["DW_AT_const_value"].value < 0 for c in t.iter_children())
    return f"c_{'' if signed else 'u'}int{INTS[size]}"

  def _enum_name(self, t: DIE) -> str | None:
    return _name(t) or next(iter(self.dw.typedefs.get(t.offset, ())), None) or self.enum_names.get(t.offset)

  # ---- records
  def _members(self, die: DIE, name: str) -> tuple[list[tuple[int, str, str]], list[str], list[str]]:
    """(byte offset, name, ctype) of the plain members, `name:bit:width` of the bit fields (those of anonymous
    members hoisted, ctypes does not forward descriptors), the anonymous member names."""
    fields, bits, anonymous, n_anon = [], [], [], 0
    for m in die.iter_children():
      if m.tag != "DW_TAG_member": continue
      mname = _name(m)
      if "DW_AT_bit_size" in m.attributes:
        if "DW_AT_data_bit_offset" not in m.attributes: raise DwarfError(f"{name}.{mname}: a bit field without DW_AT_data_bit_offset")
        if mname is None: continue                                    # an unnamed bit field only pads
        sign = ":s" if self._signed(_type(m)) else ""
        bits.append(f"{pyname(mname)}:{m.attributes['DW_AT_data_bit_offset'].value}:{m.attributes['DW_AT_bit_size'].value}{sign}")
        continue
      off = m.attributes["DW_AT_data_member_location"].value if "DW_AT_data_member_location" in m.attributes else 0
      if not isinstance(off, int): raise DwarfError(f"{name}.{mname}: a member location that is not a constant")
      if mname is None:
        mname, n_anon = f"_{n_anon}", n_anon + 1
        anonymous.append(mname)
        sub = self.dw.resolve(_type(m))
        for item in self._members(sub, mname)[1]:
          bname, bit, rest = item.split(":", 2)
          bits.append(f"{bname}:{int(bit) + 8 * off}:{rest}")
      fields.append((off, pyname(mname), self.ctype(_type(m))))
    return fields, bits, anonymous

  def _signed(self, die: DIE) -> bool:
    """Whether a bit field of this type sign-extends (a signed integer, or an enum whose underlying type is)."""
    t = self.dw.resolve(die)
    if t.tag == "DW_TAG_enumeration_type": return self._enum_base(t).startswith("c_int")
    return t.tag == "DW_TAG_base_type" and t.attributes["DW_AT_encoding"].value in (ATE_SIGNED, ATE_SIGNED_CHAR)

  def _record(self, die: DIE) -> str:
    name, size = self.names[die.offset], die.attributes["DW_AT_byte_size"].value
    fields, bits, anonymous = self._members(die, name)
    tail = "]"
    if bits: tail += ",\n       " + _wrap(bits, 'bits="', '"')
    if anonymous: tail += f", anonymous={tuple(anonymous)!r}"
    if not fields: return f"record({name}, {size}, [{tail})"
    return "\n".join([f"record({name}, {size}, ["] + [f"  ({off}, {f!r}, {t})," for off, f, t in fields] + [tail + ")"])

  # ---- prototypes
  def _cdecl(self, die: DIE | None) -> str:
    """A C spelling of a type for the prototype comments."""
    if die is None: return "void"
    if die.tag == "DW_TAG_pointer_type": return self._cdecl(_type(die)) + " *"
    if die.tag == "DW_TAG_const_type": return "const " + self._cdecl(_type(die))
    if die.tag in ("DW_TAG_volatile_type", "DW_TAG_restrict_type", "DW_TAG_atomic_type"): return self._cdecl(_type(die))
    if die.tag == "DW_TAG_subroutine_type": return "void (*)()"
    kind = {"DW_TAG_structure_type": "struct ", "DW_TAG_union_type": "union ", "DW_TAG_enumeration_type": "enum "}.get(die.tag, "")
    return kind + (_name(die) or "(unnamed)")

  def _prototype(self, fn: str, die: DIE) -> tuple[str, str]:
    params = [p for p in die.iter_children() if p.tag in ("DW_TAG_formal_parameter", "DW_TAG_unspecified_parameters")]
    cparams = [("..." if p.tag == "DW_TAG_unspecified_parameters" else f"{self._cdecl(_type(p))} {_name(p) or ''}".replace("* ", "*").strip())
               for p in params]
    comment = f"# {self._cdecl(_type(die))} {fn}({', '.join(cparams) or 'void'})".replace("* ", "*")
    args = [self.ctype(_type(p)) for p in params if p.tag == "DW_TAG_formal_parameter"]
    return comment, f"  {fn!r}: ({self.ctype(_type(die))}, ({', '.join(args)}{',' if len(args) == 1 else ''})),"

  def text(self) -> str:
    records = [self._record(die) for die in self.records]
    protos = [self._prototype(fn, die) for fn, die in self.dw.functions.items()]
    data = {v: self.ctype(_type(self.dw.variables[v])) for v in self.spec.variables}
    mod = self.mod
    mod.section(f"the build these bindings describe: another {mod.wheel.library.name} may lay records out differently")
    mod.define("WHEEL", repr(mod.wheel.filename))
    mod.define("LIBRARY_SHA256", repr(mod.wheel.sha256))
    for t in sorted(self.enums.values(), key=lambda d: (self._enum_name(d) or "", d.offset)):
      name, base = self._enum_name(t), self._enum_base(t)
      mod.section(f"enum {name or '(anonymous)'} ({base})")
      for c in t.iter_children():
        if c.tag == "DW_TAG_enumerator": mod.const(_name(c), c.attributes["DW_AT_const_value"].value)
      for alias in [n for n in [_name(t), self.enum_names.get(t.offset)] if n] + self.dw.typedefs.get(t.offset, []):
        mod.define(alias, base)
    mod.section("records (autogen.clayout: members at their byte offsets, bit fields by bit offset)")
    classes = [f"class {self.names[d.offset]}({RECORD_TAGS[d.tag]}): pass" for d in self.records]
    for die, line in zip(self.records, classes): mod._claim(self.names[die.offset], line)   # NameClash if an enum took it
    mod.parts.append("\n".join(classes))
    for die, text in zip(self.records, records): mod.block(f"record {self.names[die.offset]}", text)
    mod.section("exported functions: {name: (restype, argtypes)}, for autogen.clayout.load")
    mod.parts.append("PROTOTYPES = {\n" + "\n".join(f"{c}\n{line}" for c, line in protos) + "\n}")
    mod.section("exported data: {name: ctypes type}, for type.in_dll(lib, name)")
    mod.parts.append("VARIABLES = {\n" + "".join(f"  {v!r}: {t},\n" for v, t in data.items()) + "}")
    words = set(re.findall(r"\b(?:c_\w+|POINTER|Structure|Union)\b", "\n".join(mod.parts)))
    mod.imports("ctypes", sorted(w for w in words if hasattr(ctypes, w)))
    mod.imports("autogen.clayout", ["record"])
    ns = mod.execute()                     # lays every record out: autogen.clayout.LayoutError names what is off
    for v, t in data.items():
      if (want := self.dw.symbols[v][2]) != (got := ctypes.sizeof(ns["VARIABLES"][v])):
        raise DwarfError(f"{v}: its declared type {t} is {got} bytes, .dynsym says {want}")
    return mod.text()


def _paren(t: str) -> str: return f"({t})" if "*" in t else t


def _wrap(items: list[str], start: str, end: str, width: int = 140) -> str:
  """`start` + items joined by spaces, as adjacent string literals of at most `width` columns."""
  lines, cur = [], start
  for it in items:
    if len(cur) + len(it) + 1 > width: lines.append(cur + ' "'); cur = '"'
    cur += ("" if cur.endswith('"') else " ") + it
  return "\n       ".join(lines + [cur + end])
