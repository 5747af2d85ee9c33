"""Sweep every opcode field of an AMD GPU ISA generation through LLVM 22's disassembler and derive the ISA tables.

For each encoding family and opcode value, an instruction is built with every operand field set to a
distinct probe value. LLVM's text gives the mnemonic; changing one field at a time shows which printed
operand that field is; probing the field with registers, inline constants and literals classifies it
(register file, width, how constants are typed). Nothing here is hand-typed per opcode: the per-family
probe values (<isa>/probes.py) and the field layouts (<isa>/encodings.py) are the only inputs.
"""
from __future__ import annotations
import importlib, itertools, re
from types import ModuleType
from autogen.amdgcn.llvm import Disassembler

_REG = re.compile(r"^(?P<f>[vs])(?:(?P<n>\d+)(?P<h>\.[lh])?|\[(?P<lo>\d+):(?P<hi>\d+)\])$")
CONST_PROBES = ((0xF0, None), (0xF8, None), (0xC1, None), (0xFF, 0x3E22F983), (0xFF, 0x3FF00000), (0xFF, 0x3C00),
                (0xFF, 0x3F800000), (0xFF, 0x3F80), (0xFF, 0x3C003C00))
# constant-printing signature (see CONST_PROBES) -> operand value type, as LLVM's printer types it
CONST_TYPES = {
  ("0.5", "0.15915494", "-1", "lit(0x3e22f983)", "0x3ff00000", "0x3c00", "lit(0x3f800000)", "0x3f80", "0x3c003c00"): "b32",
  ("0.5", "0.15915494", "-1", "0xf983", "lit(0x3ff00000)", "lit(0x3c00)", "lit(0x3f800000)", "0x3f80", "lit(0x3c003c00)"): "f16",
  ("0x3800", "0x3118", "-1", "lit(0x3e22f983)", "0x0", "0x3c00", "lit(0x3f800000)", "0x3f80", "0x3c00"): "i16",
  ("0.5", "0.15915494309189532", "-1", "0x3e22f983", "1.0", "0x3c00", "0x3f800000", "0x3f80", "0x3c003c00"): "f64",
  ("0.5", "0.15915494309189532", "-1", "0x3e22f983", "0x3ff00000", "0x3c00", "0x3f800000", "0x3f80", "0x3c003c00"): "b64",
  ("0.5", "0.15915494", "-1", "0x3e22f983", "0x3ff00000", "lit(0x3c00)", "0x3f800000", "0x3f80", "0x3c003c00"): "pk_f16",
  ("0.5", "0.15915494", "-1", "0x3e22f983", "0x3ff00000", "0x3c00", "0x3f800000", "0x3f80", "lit(0x3c003c00)"): "pk_f16_rep",
  ("0.5", "0.15915494", "-1", "0x3e22f983", "0x3ff00000", "0x3c00", "0x3f800000", "lit(0x3f80)", "0x3c003c00"): "pk_bf16",
  ("0.5", "0.15915494", "-1", "0x3e22f983", "lit(0x3ff00000)", "0x3c00", "lit(0x3f800000)", "lit(0x3f80)", "0x3c003c00"): "bf16",
}


def split_operands(text: str) -> tuple[str, list[str], str]:
  """'name op, op, op mods' -> (name, [op...], mods). Commas inside (), [] and /* */ don't split."""
  name, _, rest = text.partition(" ")
  toks, cur, depth, i = [], "", 0, 0
  while i < len(rest):
    if rest.startswith("/*", i): depth += 1; cur += "/*"; i += 2; continue
    if rest.startswith("*/", i): depth -= 1; cur += "*/"; i += 2; continue
    c = rest[i]
    depth += c in "([" ; depth -= c in ")]"
    if depth == 0 and rest.startswith(", ", i): toks.append(cur); cur = ""; i += 2; continue
    cur += c; i += 1
  mods = ""
  if cur:   # modifiers follow the last operand after a space (outside brackets/comments)
    depth, j = 0, 0
    while j < len(cur):
      if cur.startswith("/*", j): depth += 1; j += 2; continue
      if cur.startswith("*/", j): depth -= 1; j += 2; continue
      depth += cur[j] in "([" ; depth -= cur[j] in ")]"
      if depth == 0 and cur[j] == " ": cur, mods = cur[:j], cur[j + 1:]; break
      j += 1
    toks.append(cur)
  return name, toks, mods


class Prober:
  """Probes one ISA generation's encodings (`isa`: its autogen.amdgcn package) on one LLVM processor."""
  def __init__(self, isa: ModuleType, cpu: str):
    self.enc, self.pr, self.dis = isa.encodings, isa.probes, Disassembler(cpu)

  def words(self, fam: str, vals: dict, lit: int | None = None) -> list[int]:
    fmt, fixed = self.pr.PSEUDO.get(fam, (fam, {}))
    ws = [self.enc.PREFIX[fmt], 0, 0]
    for k, v in {**fixed, **vals}.items():
      if k == "op" and fam in self.pr.OPFIELD: k = self.pr.OPFIELD[fam]
      if k == "op" and "op" not in self.enc.FIELDS[fmt]: continue   # EXP: a single instruction
      if k == "sdst" and fam == "VOP3": self.enc.put(ws, self.enc.FIELDS["VOP3SD"]["sdst"], v)
      else: self.enc.put(ws, self.enc.FIELDS[fmt][k], v)
    ws = ws[:self.enc.WORDS.get(fmt, 2)]
    return ws + ([lit] if lit is not None else [])

  def text(self, fam: str, vals: dict, lit: int | None = None, extra: int = 0x5A5A5A5A) -> tuple[int, str | None]:
    n, t = self.dis.words(*self.words(fam, vals, lit), extra, extra, extra)
    if n and fam in ("VOPDX", "VOPDY"): t = t.split(" :: ")[fam == "VOPDY"]   # one half of a dual instruction
    return n, t

  def base(self, fam: str, op: int) -> tuple[dict, str] | None:
    """First probe LLVM accepts: the family's base values, its retries, then with unused fields zeroed
    (LLVM rejects e.g. a DS store whose vdst field is not 0)."""
    fields = list(self.pr.OPERAND_FIELDS.get(fam, {}))
    zeroings = [dict.fromkeys(c, 0) for k in range(1, len(fields) + 1) for c in itertools.combinations(fields, k)]
    for retry in [{}] + self.pr.RETRY.get(fam, []) + zeroings:
      vals = dict(self.pr.BASE[fam], op=op, **retry)
      n, t = self.text(fam, vals)
      if n: return vals, t
    return None

  def position(self, fam: str, vals: dict, t0: str, field: str, kind: str) -> int | None:
    """Index of the printed operand that `field` controls (None: the field is not printed)."""
    alt = dict(vals)
    alt[field] = vals.get(field, 0) + (4 if kind in ("vgpr8", "src9", "ssrc8", "sgpr7") else 1)
    if kind == "sbase": alt[field] = vals.get(field, 0) + 2
    n, t1 = self.text(fam, alt)
    if not n: return None
    _, a, _ = split_operands(t0)
    _, b, _ = split_operands(t1)
    diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    return diff[0] if len(diff) == 1 and len(a) == len(b) else None

  def token(self, fam: str, vals: dict, pos: int, lit: int | None = None) -> str | None:
    n, t = self.text(fam, vals, lit)
    if not n: return None
    toks = split_operands(t)[1]
    return toks[pos] if pos < len(toks) else None


def reg_shape(tok: str | None) -> tuple[str, int, str] | None:
  """'v10' -> ('v', 32, ''), 'v[10:11]' -> ('v', 64, ''), 'v10.l' -> ('v', 16, ''); the register class named in
  an LLVM '/*Invalid register, operand has X register class*/' comment is returned third."""
  if tok is None: return None
  note = ""
  if m := re.search(r"/\*Invalid register, operand has '(\w+)' register class\*/", tok): note, tok = m.group(1), tok[:m.start()]
  m = _REG.match(tok)
  if not m: return None
  if m.group("n") is not None: return m.group("f"), 16 if m.group("h") else 32, note
  return m.group("f"), 32 * (int(m.group("hi")) - int(m.group("lo")) + 1), note


def classify_src(p: Prober, fam: str, vals: dict, field: str, pos: int) -> str:
  """A 9-bit (VOP) or 8-bit (SALU) source: width, how its constants print, which register file LLVM flags."""
  salu = fam in ("SOP1", "SOP2", "SOPC")
  vreg = None if salu else reg_shape(p.token(fam, dict(vals, **{field: p.enc.VGPR0 + 10}), pos))
  sreg = reg_shape(p.token(fam, dict(vals, **{field: 16}), pos))
  bits = (vreg or sreg)[1]
  probes = CONST_PROBES
  if vals["op"] in getattr(p.pr, "LITERAL_CRASH", {}).get(fam, ()): probes = CONST_PROBES[:3]   # LLVM crashes on a literal here
  consts = tuple((p.token(fam, dict(vals, **{field: v}), pos, lit) or "X").split("/*")[0] for v, lit in probes)
  bad_const = "Invalid immediate" in (p.token(fam, dict(vals, **{field: 0xF0}), pos) or "")
  if all(c.startswith("v") for c in consts): ctype = "vraw"   # LLVM reads the low 8 bits as a VGPR whatever they are
  else: ctype = "none" if bad_const else CONST_TYPES.get(consts) or next((t for k, t in CONST_TYPES.items() if k[:len(consts)] == consts), None)
  # 'none': LLVM prints constants with /*Invalid immediate*/; without the literal probes the first type the inline ones match
  if ctype is None: raise ValueError(f"{fam} {vals} {field}: unknown constant signature {consts}")
  spec = f"{field}:src{bits}/{ctype}"
  if vreg and vreg[2]: spec += f"/sonly={vreg[2]}"    # a VGPR here prints LLVM's 'Invalid register' comment
  if sreg and sreg[2]: spec += f"/vonly={sreg[2]}"
  return spec + _lo128(p, fam, vals, field, pos, p.enc.VGPR0, spec)


def _lo128(p: Prober, fam: str, vals: dict, field: str, pos: int, vgpr0: int, spec: str) -> str:
  """'/lo128=<class>' when LLVM notes VGPRs from v128 up as outside the operand's class (gfx12's fake16 16-bit
  operands take v0..v127 only) and the operand has no other note."""
  if fam in ("SOP1", "SOP2", "SOPC"): return ""
  shape = reg_shape(p.token(fam, dict(vals, **{field: vgpr0 + 130}), pos))
  if not shape or not shape[2] or shape[0] != "v" or spec.endswith(f"={shape[2]}"): return ""
  if "=" in spec: raise ValueError(f"{fam} {vals} {field}: a second register class note ({shape[2]}) on {spec}")
  return f"/lo128={shape[2]}"


IMM_STYLES = {("1", "64", "0x41", "0xffff"): "u16", ("0x1", "0x40", "0x41", "0xffff"): "hex", ("1", "64", "65", "65535"): "dec"}


def imm16_style(p: Prober, fam: str, vals: dict, field: str, pos: int | None) -> str:
  """How LLVM prints a 16-bit immediate field: u16 (decimal up to 64, else hex), hex, dec, or a symbolic form."""
  toks = []
  for v in (1, 0x40, 0x41, 0xFFFF):
    n, t = p.text(fam, dict(vals, **{field: v}))
    toks.append(t.split(" ", 1)[1] if pos is None else split_operands(t)[1][pos])
  return IMM_STYLES.get(tuple(toks)) or imm_style(toks[0])


def imm_style(tok: str) -> str:
  if re.fullmatch(r"0x[0-9a-f]+", tok): return "hex"
  if re.fullmatch(r"-?\d+", tok): return "dec"
  m = re.match(r"([a-z_]+)\(", tok)
  return m.group(1) if m else "sym"


def operand(p: Prober, fam: str, vals: dict, field: str, kind: str, pos: int) -> str:
  """Operand spec 'field:kind[/attr...]' (parsed by emu.amdgcn.decode): v32 = 32-bit VGPR, s64 = SGPR pair,
  src16/f16 = register-or-constant source, imm/hex = immediate field printed in hex, ..."""
  tok = p.token(fam, vals, pos)
  if kind in ("src9", "ssrc8"):
    if reg_shape(p.token(fam, dict(vals, **{field: 16}), pos)) is None: return f"{field}:imm/{imm_style(tok)}"  # sendmsg id
    return classify_src(p, fam, vals, field, pos)
  if kind == "imm": return f"{field}:imm/{imm16_style(p, fam, vals, field, pos)}"
  shape = reg_shape(tok)
  if shape and shape[0] == "s":   # special registers this operand's class excludes (m0, exec...)
    notes = {c: m.group(1) for c in (p.enc.VCC_LO, p.enc.NULL, p.enc.M0, p.enc.EXEC_LO, p.enc.EXEC_HI)
             if (m := re.search(r"operand has '(\w+)'", p.token(fam, dict(vals, **{field: c}), pos) or ""))}
    if notes: return f"{field}:s{shape[1]}/bad={next(iter(notes.values()))}@{'.'.join(map(str, notes))}"
  if shape is None and re.fullmatch(r"\d+", tok): return f"{field}:imm/{imm_style(tok)}"   # s_atc_probe's sdata
  if shape is None: raise ValueError(f"{fam} {vals}: {field} prints as {tok!r}")
  spec = f"{field}:{shape[0]}{shape[1]}" + (f"/note={shape[2]}" if shape[2] else "")
  return spec + (_lo128(p, fam, vals, field, pos, 0, spec) if kind == "vgpr8" else "")


def sweep_op(p: Prober, fam: str, op: int) -> tuple | None:
  got = p.base(fam, op)
  if got is None or p.enc.family(p.words(fam, got[0])[0]) != p.pr.PSEUDO.get(fam, (fam,))[0]: return None
  vals, t0 = got
  name, toks, _ = split_operands(t0)
  if fam == "SOPP":   # one immediate whose printing depends on the opcode (waitcnt fields, sendmsg, branch offset...)
    return name, fam, (f"simm16:imm/{imm16_style(p, fam, vals, 'simm16', None)}",) if " " in (p.text(fam, dict(vals, simm16=1))[1] or "") else (), ""
  if fam == "EXP":   # 'exp <target> vsrc0, ..., vsrc3': the target name leads the first operand
    return name, fam, ("target:imm/exp",) + tuple(f"vsrc{i}:{reg_shape(t.split()[-1])[0]}32" for i, t in enumerate(toks)), ""
  ops: list = [None] * len(toks)
  enc = fam
  for field, kind in p.pr.OPERAND_FIELDS.get(fam, {}).items():
    pos = p.position(fam, vals, t0, field, kind)
    if pos is None or ops[pos] is not None: continue
    if field == "sdst" and fam == "VOP3":   # VOP3SD: bits 14:8 are an SGPR destination, not abs/opsel
      if (reg_shape(p.token(fam, dict(vals, sdst=16), pos)) or "v")[0] != "s": continue
      enc = "VOP3SD"
    ops[pos] = operand(p, fam, vals, field, kind, pos)
  for i, o in enumerate(ops):   # unmapped: a literal operand (changes with the literal dword) or fixed text
    if o is None: ops[i] = ":kimm32" if p.token(fam, vals, i, 0x11223344) == "0x11223344" else f":={toks[i]}"
  return name, enc, tuple(ops), mod_effects(p, fam, enc, vals, t0)


def mod_effects(p: Prober, fam: str, enc: str, vals: dict, t0: str) -> str:
  """Per modifier bit, what LLVM does when it is set: p = printed, - = ignored, x = rejected, f = the op falls back to
  its 'fake16' form (16-bit registers printed as 32-bit ones). E.g. 'neg=pp- abs=pp- opsel=---- clmp=p omod=p'."""
  out, lists, sel = [], {}, ""
  for field in p.pr.MOD_FIELDS.get(enc, ()):
    width = (p.enc.FIELDS[enc][field][2]) if field != "omod" else 1
    chars = ""
    for b in range(width):
      v = (1 << b) if field != "omod" else 1
      if field in ("opsel_hi", "opsel_hi2"): v = vals[field] ^ (1 << b)
      n, t = p.text(fam, dict(vals, **{field: v}))
      chars += "x" if not n else "-" if t == t0 else "f" if ".l" in t0 and ".l" not in t and ".h" not in t else "p"
      for name, items in re.findall(r"(\w+):\[([\d,]+)\]", t or ""): lists[name] = items.count(",") + 1
      if field == "opsel" and enc != "VOP3P":   # which op_sel:[...] entry this bit shows up as (VOP3 / VINTERP)
        m = re.search(r"op_sel:\[([\d,]+)\]", t or "")
        sel += str(m.group(1).split(",").index("1")) if m and m.group(1).count("1") == 1 else "-"
    out.append(f"{field}={chars}")
  if sel.strip("-"): out.append(f"sel={sel}")
  if enc in ("VOP1", "VOP2", "VOPC"):   # DPP16 form: src0 = 250; the DPP dword's src0/src1 neg and abs bits 20..23
    dv = dict(vals, src0=p.enc.DPP16)
    n, t1 = p.text(fam, dv, p.pr.DPP_PROBE)
    if n:
      chars = ""
      for b in range(4):
        n, t = p.text(fam, dv, p.pr.DPP_PROBE | 1 << (20 + b))
        chars += "x" if not n else "-" if t == t1 else "p"
      out.append(f"dpp={chars}")
  return " ".join(out + [f"n_{k}={v}" for k, v in sorted(lists.items())])


def sweep_family(p: Prober, fam: str) -> dict[int, tuple]:
  fmt = p.pr.PSEUDO.get(fam, (fam,))[0]
  nbits = p.enc.FIELDS[fmt].get(p.pr.OPFIELD.get(fam, "op"), (0, 0, 0))[2]
  return {op: r for op in range(1 << nbits) if (r := sweep_op(p, fam, op))}


SYMBOL_PICK = {   # symbolic immediate -> its name in LLVM's text (None: printed as a number, or invalid)
  "HWREG": lambda t: re.search(r"hwreg\((HW_REG_\w+)\)", t) and re.search(r"hwreg\((\w+)", t).group(1),
  "SENDMSG": lambda t: re.search(r"sendmsg\((MSG_\w+)\)", t) and re.search(r"sendmsg\((\w+)", t).group(1),
  "VERSION": lambda t: re.fullmatch(r"s_version (UC_\w+)", t) and t.split()[1],
  "EXP_TARGET": lambda t: None if "invalid_target" in t else t.split()[1],
  "BUF_FORMAT": lambda t: (re.search(r"format:\[(\w+)\]", t) or [None, None])[1],
}


def sweep_symbols(p: Prober) -> dict[str, dict[int, str]]:
  """Names LLVM prints for symbolic immediates (hwreg ids, sendmsg ids, s_version codes, export targets, buffer
  formats), from the words the ISA's probes.SYMBOL_WORDS give for each value."""
  out: dict[str, dict[int, str]] = {}
  for kind, (values, words) in p.pr.SYMBOL_WORDS.items():
    out[kind] = {}
    for v in values:
      n, t = p.dis.words(*words(v), 0)
      if n and (name := SYMBOL_PICK[kind](t)): out[kind][v] = name
  return out


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def sweep_mimg(p: Prober) -> dict[int, tuple]:
  """Image ops. LLVM prints the VGPR counts of vdata and the address from dmask/d16/tfe and from dim/a16 (the
  address count is per opcode); when it has no instruction variant with those counts it falls back to one fixed
  variant per opcode and NSA form. Recorded per opcode: name, flags, the vdata sizes it has, the fallback
  (vdata, vaddr) pair per form, and the address VGPR count per (a16, dim) per form ('-': no variant, fallback)."""
  def counts(t: str) -> tuple[int, int] | None:
    if not t: return None
    vd, rest = t.split(None, 1)[1].split(", ", 1)
    va = split_operands("x " + rest)[1][0]
    def regs(tok: str) -> int:
      return sum(int(m.group(2)) - int(m.group(1)) + 1 if (m := re.match(r"v\[(\d+):(\d+)\]", e)) else 1
                 for e in (tok[1:-1] if tok.startswith("[") else tok).split(", "))
    return regs(vd), regs(va)
  out = {}
  for op in range(256):
    base = dict(op=op, vaddr=10, vdata=20, srsrc=3, ssamp=0, dmask=1)
    n, t = p.text("MIMG", base, 0x0D0C0B0A)
    if not n: continue
    name, ssamp = t.split()[0], t.split(", ")[3:4] != []
    gather = counts(t)[0] == 4
    obs = {}
    for nsa, a16, dim, dmask, d16, tfe in itertools.product((0, 1), (0, 1), range(8), (1, 3, 7, 15), (0, 1), (0, 1)):
      n, t = p.text("MIMG", dict(base, nsa=nsa, a16=a16, dim=dim, dmask=dmask, d16=d16, tfe=tfe), 0x0D0C0B0A)
      if n: obs[nsa, a16, dim, p.enc.mimg_vdata(dmask, d16, tfe, gather)] = counts(t)   # (d16 is invalid for some ops)
    fall = [next((o for (ns, *_, v), o in obs.items() if ns == nsa and o and o[0] != v), (1, 1)) for nsa in (0, 1)]
    addr = [["-"] * 16 for _ in (0, 1)]
    vset = set()
    for (nsa, a16, dim, v), o in obs.items():
      if o and o[0] == v and o != fall[nsa]: addr[nsa][a16 * 8 + dim] = _DIGITS[o[1]]; vset.add(v)
    for (nsa, a16, dim, v), o in obs.items():   # every observation must follow that model
      a = addr[nsa][a16 * 8 + dim]
      want = (v, _DIGITS.index(a)) if a != "-" and v in vset else fall[nsa]
      if o is not None and o != want: raise ValueError(f"MIMG {name}: {nsa, a16, dim, v} prints {o}, model says {want}")
    flags = ("ssamp " if ssamp else "") + ("gather " if gather else "")
    out[op] = (name, flags.strip(), "".join(map(str, sorted(vset))), f"{fall[0][0]}{_DIGITS[fall[0][1]]}",
               f"{fall[1][0]}{_DIGITS[fall[1][1]]}", "".join(addr[0]), "".join(addr[1]))
  return out


def sweep(isa: ModuleType, cpu: str) -> tuple[dict, dict, dict]:
  """Everything the tables hold for one LLVM processor: (OPS with the encoding per entry, MIMG, SYMBOLS)."""
  p = Prober(isa, cpu)
  return {fam: sweep_family(p, fam) for fam in p.pr.FAMILIES}, sweep_mimg(p) if "MIMG" in p.enc.FIELDS else {}, sweep_symbols(p)


def _entry(e: tuple) -> str:
  name, _, ops, mods = e
  return f"({name!r}, {ops!r}" + (f", {mods!r})" if mods else ")")


def overlay(families: tuple[str, ...], base: dict, ops: dict) -> dict[str, dict[int, tuple | None]]:
  """The entries of `ops` that differ from `base` (None: the opcode is no instruction there), per family."""
  out = {}
  for fam in families:
    b, o = base[fam], ops[fam]
    diff = {op: o.get(op) for op in sorted(set(b) | set(o)) if b.get(op) != o.get(op)}
    if any(e is not None and e[1] == "VOP3SD" for e in diff.values()):
      raise ValueError(f"{fam}: a target-specific VOP3SD opcode is not representable in the overlay")
    if diff: out[fam] = diff
  return out


def generate(name: str) -> str:
  """Source text of autogen/amdgcn/<name>/tables.py for ISA generation `name` (an autogen.amdgcn package): the tables
  of its first CPU, then per other CPU what differs."""
  isa = importlib.import_module(f"autogen.amdgcn.{name}")
  cpus, families = isa.CPUS, isa.probes.FAMILIES
  version = Disassembler(cpus[0]).version()
  (base, mimg, symbols), overlays, targets = sweep(isa, cpus[0]), {}, {cpus[0]: None}
  for cpu in cpus[1:]:
    ops, m, sy = sweep(isa, cpu)
    if (m, sy) != (mimg, symbols): raise ValueError(f"{cpu}: image ops or symbolic names differ from {cpus[0]}'s")
    ov = overlay(families, base, ops)
    targets[cpu] = next((k for k, v in overlays.items() if v == ov), cpu)   # equal sweeps share one overlay
    overlays.setdefault(targets[cpu], ov)
  out = [f'"""{name} opcode tables. GENERATED by `python -m autogen.amdgcn {name}` from LLVM {version}\'s {cpus[0]}',
         'disassembler (libLLVM, Debian libllvm22): do not edit. OPS[family][opcode] = (LLVM mnemonic, operand specs in',
         "LLVM's print order); spec grammar in emu/amdgcn/decode.py (parse_spec). VOP3SD: the VOP3 opcodes whose bits 14:8",
         "are an SGPR destination (carry-out / VCC-like output) instead of abs/opsel. TARGET_OPS: what the same sweep with",
         'another CPU finds different, per family (None: no instruction there); TARGETS names each CPU\'s (None: the base)."""',
         "", f'LLVM_VERSION = "{version}"', "", "OPS = {"]
  sd = []
  for fam in families:
    out.append(f'  "{fam}": {{')
    for op, e in base[fam].items():
      if e[1] == "VOP3SD": sd.append(op)
      out.append(f"    {op:#05x}: {_entry(e)},")
    out.append("  },")
  out += ["}", "", f"VOP3SD = frozenset({{{', '.join(f'{o:#05x}' for o in sd)}}})", "",
          "# image ops: (name, flags, vdata VGPR counts with a variant, fallback (vdata, vaddr) non-NSA, same NSA,",
          "#             vaddr VGPRs per a16*8+dim non-NSA ('-': fallback), same NSA); counts in base 36", "MIMG = {"]
  out += [f"  {op:#04x}: {entry!r}," for op, entry in mimg.items()]
  out += ["}", "", "# names LLVM prints for symbolic immediate values", "SYMBOLS = {"]
  for k, d in symbols.items():
    out.append(f'  "{k}": {{' + ", ".join(f"{v}: {n!r}" for v, n in d.items()) + "},")
  out += ["}", "", f"TARGETS = {targets!r}", "", "TARGET_OPS = {"]
  for name, ov in overlays.items():
    out.append(f'  "{name}": {{')
    for fam, entries in ov.items():
      out.append(f'    "{fam}": {{')
      out += [f"      {op:#05x}: {_entry(e) if e else None}," for op, e in entries.items()]
      out.append("    },")
    out.append("  },")
  out += ["}", ""]
  return "\n".join(out)
