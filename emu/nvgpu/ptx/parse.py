"""PTX text to kernels: the subset of the PTX ISA (8.x) that NVRTC emits for compute kernels.

Module level (ISA "PTX Module Directives", "Kernel and Function Directives"): .version, .target, .address_size,
`.visible/.weak .entry NAME(.param ...)` with performance directives (.maxntid, .reqntid, .minnctapersm, ...),
`.extern .shared` arrays (dynamic shared memory), module-level `.shared` variables and `.global` variables with their
initialisers (`= {1, 2, ...}`: integer or 0f/0d float literals; CUDA's math library keeps its tables there).
Module-level `.const` variables and `.func` definitions are recognised; a kernel that uses them is rejected by the
translator with a clear error (calls are not modelled).

Kernel body (ISA "Instruction Statements", "Variables"): `.reg .T %name<N>;` (registers %name0..%nameN-1) and
`.reg .T a, b;`, `.shared` / `.local` variables (`.align`, arrays), labels, predicated statements `@%p` / `@!%p`,
nested `{ }` scopes (inline asm), whose registers are renamed apart. Operands: registers, special registers
(%tid.x ...), integer literals (decimal, hex, octal, binary, with an optional U suffix), float literals
(0fXXXXXXXX, 0dXXXXXXXXXXXXXXXX, decimal), variable and parameter names, addresses `[base+offset]`, vectors
`{a, b}` and the `d|p` destination pair. Every statement keeps its source line for error messages.
"""
from __future__ import annotations
import re, struct
from dataclasses import dataclass, field

TYPES = {"b8": 1, "b16": 2, "b32": 4, "b64": 8, "b128": 16, "u8": 1, "u16": 2, "u32": 4, "u64": 8, "s8": 1, "s16": 2,
         "s32": 4, "s64": 8, "f16": 2, "f16x2": 4, "bf16": 2, "bf16x2": 4, "f32": 4, "f64": 8, "pred": 1, "tf32": 4}


class PtxError(ValueError):
  """PTX the engine cannot parse or run; the message names the construct and its line."""


@dataclass
class Op:
  kind: str          # reg, sreg, imm, fimm, sym, mem, vec, pair, not, sink
  v: object = None   # register / symbol name, int value, fimm (bits, width), mem (base Op | None, offset), list of Ops
  off: int = 0


@dataclass
class Inst:
  line: int
  text: str
  op: str
  mods: list[str]
  args: list[Op]
  pred: str | None = None
  neg: bool = False


@dataclass
class Var:
  name: str
  size: int
  align: int
  space: str
  init: bytes = b""              # a module-level .global's initial bytes (the rest of it is zero)


@dataclass
class Param:
  name: str
  type: str
  size: int
  align: int
  offset: int


@dataclass
class Kernel:
  name: str
  line: int
  params: list[Param] = field(default_factory=list)
  regs: dict[str, str] = field(default_factory=dict)       # register name -> type
  vars: list[Var] = field(default_factory=list)            # .shared / .local variables of the kernel
  body: list[Inst | str] = field(default_factory=list)     # instructions and label names
  directives: dict[str, list[int]] = field(default_factory=dict)

  @property
  def param_bytes(self) -> int: return max((p.offset + p.size for p in self.params), default=0)


@dataclass
class Module:
  version: str = ""
  target: str = ""
  kernels: dict[str, Kernel] = field(default_factory=dict)
  vars: list[Var] = field(default_factory=list)           # module-level .shared (and .global / .const) variables
  extern_shared: list[str] = field(default_factory=list)  # dynamic shared arrays (all at the end of static shared)
  funcs: list[str] = field(default_factory=list)


def _strip(text: str) -> str:
  """Remove comments, keeping line breaks so line numbers stay right."""
  text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
  return re.sub(r"//[^\n]*", "", text)


def int_literal(s: str) -> int | None:
  m = re.fullmatch(r"([-+]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9]\d*)U?", s)
  if not m: return None
  body = m.group(2)
  v = int(body, 16) if body[:2] in ("0x", "0X") else int(body, 2) if body[:2] in ("0b", "0B") else \
      int(body, 8) if body.startswith("0") and len(body) > 1 else int(body)
  return -v if m.group(1) == "-" else v


def operand(s: str, line: int) -> Op:
  s = s.strip()
  if s == "_": return Op("sink")
  if s.startswith("[") and s.endswith("]"):
    inner = s[1:-1].replace(" ", "")
    m = re.fullmatch(r"([%$\w.]+)?(?:\+?([-+]?(?:0[xX][0-9a-fA-F]+|\d+)))?", inner)
    if not m or not (m.group(1) or m.group(2)): raise PtxError(f"line {line}: cannot parse the address {s!r}")
    base = operand(m.group(1), line) if m.group(1) else None
    if base is not None and base.kind == "imm": return Op("mem", None, base.v + (int_literal(m.group(2)) if m.group(2) else 0))
    return Op("mem", base, int_literal(m.group(2)) if m.group(2) else 0)
  if s.startswith("{") and s.endswith("}"): return Op("vec", [operand(x, line) for x in s[1:-1].split(",")])
  if "|" in s:
    a, b = s.split("|")
    return Op("pair", [operand(a, line), operand(b, line)])
  if s.startswith("!"): return Op("not", operand(s[1:], line))
  if (v := int_literal(s)) is not None: return Op("imm", v)
  if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", s): return Op("fimm", (int(s[2:], 16), 32))
  if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", s): return Op("fimm", (int(s[2:], 16), 64))
  if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", s):
    return Op("fimm", (struct.unpack("<Q", struct.pack("<d", float(s)))[0], 64))
  if re.fullmatch(r"%(tid|ntid|ctaid|nctaid)\.[xyz]|%(laneid|warpid|nwarpid|smid|nsmid|gridid|clock|clock64|"
                  r"lanemask_eq|lanemask_le|lanemask_lt|lanemask_ge|lanemask_gt|globaltimer|dynamic_smem_size|"
                  r"total_smem_size)", s):
    return Op("sreg", s)
  if re.fullmatch(r"[%$\w][%$\w.]*", s): return Op("reg" if s.startswith("%") else "sym", s)
  raise PtxError(f"line {line}: cannot parse the operand {s!r}")


def _split_args(s: str) -> list[str]:
  out, depth, cur = [], 0, ""
  for ch in s:
    if ch in "[{(": depth += 1
    elif ch in "]})": depth -= 1
    if ch == "," and depth == 0: out.append(cur); cur = ""
    else: cur += ch
  if cur.strip(): out.append(cur)
  return out


def _var(toks: list[str], space: str, line: int, init: str = "") -> tuple[Var, bool]:
  """A variable declaration's tokens after the state space: (.align N)? .T name([N])? -> (Var, is_unsized_array);
  `init`: the text after its `=`, a (nested) list of literals of type .T."""
  align, typ, i = 0, None, 0
  while i < len(toks) and toks[i].startswith("."):
    if toks[i] == ".align": align = int(toks[i + 1]); i += 2; continue
    if toks[i][1:] in TYPES: typ = toks[i][1:]
    i += 1
  if typ is None or i >= len(toks): raise PtxError(f"line {line}: cannot parse the {space} variable {' '.join(toks)!r}")
  name, n, unsized = toks[i], 1, False
  if i + 1 < len(toks) and toks[i + 1] == "[":
    if toks[i + 2] == "]": unsized = True; n = 0
    else: n = int_literal(toks[i + 2])
  data = b""
  if init:
    vals = re.findall(r"[^\s{},]+", init)
    if len(vals) > max(n, 1): raise PtxError(f"line {line}: {name} has {len(vals)} initial values for {max(n, 1)} elements")
    for v in vals:
      x = int_literal(v)
      if x is None and (fl := re.fullmatch(r"0([fd])([0-9a-fA-F]+)", v)) and TYPES[typ] == (4 if fl.group(1) == "f" else 8):
        x = int(fl.group(2), 16)
      if x is None: raise PtxError(f"line {line}: cannot parse the initial value {v!r} of {name} (.{typ})")
      data += (x & ((1 << 8 * TYPES[typ]) - 1)).to_bytes(TYPES[typ], "little")
  return Var(name, TYPES[typ] * n, align or TYPES[typ], space, data), unsized


class _Parser:
  """Statements (text, line) of the stripped source: `{`, `}`, `label:`, and text ending at `;` (or, for a kernel
  header at module level, at its `{`)."""
  def __init__(self, text: str):
    self.text = re.sub(r"^[ \t]*\.(loc|file|section)\b[^\n]*", "", _strip(text), flags=re.M)   # debug info
    self.pos, self.ln = 0, 1

  def _skip(self) -> None:
    m = re.compile(r"\s*").match(self.text, self.pos)
    self.ln += m.group(0).count("\n"); self.pos = m.end()

  def stmt(self, header: bool = False) -> tuple[str, int]:
    """The next statement; '' at the end of the text."""
    self._skip()
    if self.pos >= len(self.text): return "", self.ln
    ln, c = self.ln, self.text[self.pos]
    if c in "{}": self.pos += 1; return c, ln
    if m := re.compile(r"([$\w]+)\s*:(?!:)").match(self.text, self.pos): self.pos = m.end(); return m.group(0), ln
    if header and re.compile(r"\.(version|target|address_size)\b").match(self.text, self.pos):
      m = re.compile(r"\n").search(self.text, self.pos)    # these module directives end at the line's end
    else: m = re.compile(r"[;{]" if header else r";").search(self.text, self.pos)
    if m and m.group(0) == "{" and "=" in self.text[self.pos:m.start()]:   # a variable's initialiser, not a body
      m = re.compile(r";").search(self.text, self.pos)
    end = m.start() if m else len(self.text)
    out = self.text[self.pos:end]
    self.ln += out.count("\n")
    self.pos = end + (1 if m and m.group(0) in ";\n" else 0)
    self.ln += bool(m and m.group(0) == "\n")
    return " ".join(out.split()), ln

  def module(self) -> Module:
    m = Module()
    while True:
      st, ln = self.stmt(header=True)
      if not st: return m
      words = st.split()
      quals = []
      while words and words[0] in (".visible", ".weak", ".extern"): quals.append(words.pop(0))
      kind = words[0] if words else st
      if kind == ".version": m.version = words[1]
      elif kind == ".target": m.target = " ".join(words[1:])
      elif kind == ".address_size":
        if words[1] != "64": raise PtxError(f"line {ln}: .address_size {words[1]}: only 64-bit addressing is modelled")
      elif kind == ".entry": k = self.kernel(" ".join(words[1:]), ln); m.kernels[k.name] = k
      elif kind == ".func":
        m.funcs.append(re.search(r"([$\w]+)\s*\(", st + "(").group(1) if "(" in st else words[-1])
        if self.pos < len(self.text) and self.text[self.pos] == "{": self.skip_scope()
      elif kind in (".shared", ".global", ".const"):
        decl, _, init = st.partition("=")
        var, unsized = _var(_words(decl)[1 + len(quals):], kind[1:], ln, init)
        if kind == ".shared" and (unsized or ".extern" in quals): m.extern_shared.append(var.name)
        else: m.vars.append(var)
      else: raise PtxError(f"line {ln}: unexpected {st[:40]!r} at module level")

  def skip_scope(self) -> None:
    depth = 0
    while True:
      st, _ = self.stmt()
      if not st: return
      depth += (st == "{") - (st == "}")
      if depth == 0: return

  def kernel(self, header: str, ln: int) -> Kernel:
    m = re.fullmatch(r"([$\w]+)\s*(?:\((.*)\))?\s*(.*)", header, re.S)
    if not m: raise PtxError(f"line {ln}: cannot parse the kernel header {header[:60]!r}")
    k = Kernel(m.group(1), ln)
    off = 0
    for decl in _split_args(m.group(2) or ""):
      toks = _words(decl)
      if not toks or toks[0] != ".param": raise PtxError(f"line {ln}: cannot parse the parameter {decl.strip()!r}")
      align, typ, name, n, j = 0, None, None, 1, 1
      while j < len(toks):
        t = toks[j]
        if t == ".align": align = int(toks[j + 1]); j += 2; continue
        if t.startswith(".") and t[1:] in TYPES: typ = t[1:]
        elif t == "[": n = int_literal(toks[j + 1]); j += 2
        elif not t.startswith(".") and t != "]": name = t
        j += 1
      if typ is None or name is None: raise PtxError(f"line {ln}: cannot parse the parameter {decl.strip()!r}")
      size, align = TYPES[typ] * n, align or TYPES[typ]
      off = (off + align - 1) // align * align
      k.params.append(Param(name, typ, size, align, off))
      off += size
    for d in re.finditer(r"\.(\w+)((?:\s*,?\s*\d+)*)", m.group(3)):    # performance tuning directives
      k.directives[d.group(1)] = [int(x) for x in re.findall(r"\d+", d.group(2))]
    if self.stmt()[0] != "{": raise PtxError(f"line {ln}: kernel {k.name}: expected '{{' after the header")
    self.body(k)
    return k

  def body(self, k: Kernel) -> None:
    scopes: list[dict[str, str]] = [{}]
    nscope = 0
    def reg(name: str) -> str:
      for s in reversed(scopes):
        if name in s: return s[name]
      return name
    def rename(o: Op) -> Op:     # registers may be named without '%' (inline asm scopes)
      if o.kind == "reg" or (o.kind == "sym" and any(o.v in s for s in scopes)): return Op("reg", reg(o.v))
      if o.kind == "mem" and o.v is not None: return Op("mem", rename(o.v), o.off)
      if o.kind in ("vec", "pair"): return Op(o.kind, [rename(x) for x in o.v])
      if o.kind == "not": return Op("not", rename(o.v))
      return o
    while True:
      st, ln = self.stmt()
      if not st: raise PtxError(f"kernel {k.name} (line {k.line}): missing closing '}}'")
      if st == "{": nscope += 1; scopes.append({}); continue
      if st == "}":
        scopes.pop()
        if not scopes: return
        continue
      if st.endswith(":"): k.body.append(st[:-1].strip()); continue
      words = _words(st)
      if words[0].startswith(".reg."): words = [".reg", words[0][4:], *words[1:]]   # '.reg.b32 x' (inline asm)
      if words[0] == ".reg":
        typ = words[1][1:]
        if typ not in TYPES: raise PtxError(f"line {ln}: unknown register type {words[1]!r}")
        for decl in "".join(words[2:]).split(","):
          if mm := re.fullmatch(r"([%\w$]+)<(\d+)>", decl): names = [f"{mm.group(1)}{i}" for i in range(int(mm.group(2)))]
          else: names = [decl]
          for n in names:
            u = n if len(scopes) == 1 else f"{n}$s{nscope}"
            scopes[-1][n] = u
            k.regs[u] = typ
        continue
      if words[0] in (".shared", ".local"):
        var, unsized = _var(words[1:], words[0][1:], ln)
        if unsized: raise PtxError(f"line {ln}: an unsized {words[0]} array inside a kernel is not valid PTX")
        k.vars.append(var)
        continue
      if words[0] == ".pragma": continue
      if words[0].startswith("."): raise PtxError(f"line {ln}: directive {words[0]!r} inside a kernel is not supported")
      pred, neg, text = None, False, st
      if mm := re.match(r"@\s*(!?)\s*([%$\w]+)\s+", st):
        neg, pred, st = mm.group(1) == "!", reg(mm.group(2)), st[mm.end():]
      opcode, _, argtext = st.partition(" ")
      parts = opcode.split(".")
      args = [rename(operand(a, ln)) for a in _split_args(argtext)]
      k.body.append(Inst(ln, text, parts[0], parts[1:], args, pred, neg))


def _words(s: str) -> list[str]:
  """Declaration words, with [ and ] apart: '.b8 x[16]' -> ['.b8', 'x', '[', '16', ']']."""
  return re.findall(r"\[|\]|[^\s\[\]]+", s)


def parse(text: str) -> Module:
  """Parse PTX source text; PtxError on anything outside the supported grammar."""
  return _Parser(text).module()
