"""Sweep every RDNA3 opcode field through LLVM 22's disassembler and derive the ISA tables.

For each encoding family and opcode value, an instruction is built with every operand field set to a
distinct probe value. LLVM's text gives the mnemonic; changing one field at a time shows which printed
operand that field is; probing the field with registers, inline constants and literals classifies it
(register file, width, how constants are typed). Nothing here is hand-typed per opcode: the per-family
probe values and the field layouts (encodings.py) are the only inputs.
"""
from __future__ import annotations
import itertools, re
from autogen.rdna3 import encodings
from autogen.rdna3.llvm import Disassembler, TARGETS

OPERAND_FIELDS = {   # family -> {field: kind}; kinds: src9/ssrc8 (register or constant), vgpr8, sgpr7
  "SOP2": {"sdst": "sgpr7", "ssrc0": "ssrc8", "ssrc1": "ssrc8"}, "SOP1": {"sdst": "sgpr7", "ssrc0": "ssrc8"},
  "SOPC": {"ssrc0": "ssrc8", "ssrc1": "ssrc8"}, "SOPK": {"sdst": "sgpr7", "simm16": "imm"}, "SOPP": {"simm16": "imm"},
  "SMEM": {"sdata": "sgpr7", "sbase": "sbase", "soffset": "sgpr7"},
  "VOP1": {"vdst": "vgpr8", "src0": "src9"}, "VOP2": {"vdst": "vgpr8", "src0": "src9", "vsrc1": "vgpr8"},
  "VOPC": {"src0": "src9", "vsrc1": "vgpr8"},
  "VOP3": {"vdst": "vgpr8", "src0": "src9", "src1": "src9", "src2": "src9", "sdst": "sgpr7"},
  "VOP3P": {"vdst": "vgpr8", "src0": "src9", "src1": "src9", "src2": "src9"},
  "VINTERP": {"vdst": "vgpr8", "src0": "src9", "src1": "src9", "src2": "src9"}, "LDSDIR": {"vdst": "vgpr8"},
  "DS": {"addr": "vgpr8", "data0": "vgpr8", "data1": "vgpr8", "vdst": "vgpr8"},
  "FLAT": {"addr": "vgpr8", "data": "vgpr8", "saddr": "sgpr7", "vdst": "vgpr8"},
  "MUBUF": {"vaddr": "vgpr8", "vdata": "vgpr8", "srsrc": "srsrc", "soffset": "ssrc8"},
  "MTBUF": {"vaddr": "vgpr8", "vdata": "vgpr8", "srsrc": "srsrc", "soffset": "ssrc8"},
  "EXP": {"vsrc0": "vgpr8", "vsrc1": "vgpr8", "vsrc2": "vgpr8", "vsrc3": "vgpr8"},
}
# probe values: distinct per field, aligned to 4 registers (so 64..512-bit register tuples stay aligned)
BASE = {
  "SOP2": dict(sdst=16, ssrc0=32, ssrc1=48), "SOP1": dict(sdst=16, ssrc0=32), "SOPC": dict(ssrc0=32, ssrc1=48),
  "SOPK": dict(sdst=16, simm16=0x1234), "SOPP": dict(simm16=0),
  "SMEM": dict(sdata=16, sbase=16, soffset=48, offset=0x10),
  "VOP1": dict(vdst=40, src0=0x10a), "VOP2": dict(vdst=40, src0=0x10a, vsrc1=20), "VOPC": dict(src0=0x10a, vsrc1=20),
  "VOP3": dict(vdst=40, src0=0x10a, src1=0x114, src2=0x11e), "VINTERP": dict(vdst=40, src0=0x10a, src1=0x114, src2=0x11e),
  "VOP3P": dict(vdst=40, src0=0x10a, src1=0x114, src2=0x11e, opsel_hi=3, opsel_hi2=1), "LDSDIR": dict(vdst=40),
  "DS": dict(addr=12, data0=20, data1=28, vdst=40), "FLAT": dict(addr=12, data=20, saddr=encodings.NULL, vdst=40),
  "MUBUF": dict(vaddr=12, vdata=20, srsrc=4, soffset=32), "MTBUF": dict(vaddr=12, vdata=20, srsrc=4, soffset=32, format=1),
  "EXP": dict(vsrc0=12, vsrc1=20, vsrc2=28, vsrc3=36, en=15),
}
# sub-families: FLAT's seg field selects FLAT/SCRATCH/GLOBAL; a VOPD half is probed with v_dual_mov_b32 as the other
PSEUDO = {"SCRATCH": ("FLAT", {"seg": 1}), "GLOBAL": ("FLAT", {"seg": 2}),
          "VOPDX": ("VOPD", {"opy": 8, "src0y": 0x10D, "vdsty": 15, "vdstx": 30}),
          "VOPDY": ("VOPD", {"opx": 8, "src0x": 0x10A, "vdsty": 15, "vdstx": 30})}
OPFIELD = {"VOPDX": "opx", "VOPDY": "opy"}
OPERAND_FIELDS.update(SCRATCH={"addr": "vgpr8", "data": "vgpr8", "saddr": "sgpr7", "vdst": "vgpr8"},
                      GLOBAL={"addr": "vgpr8", "data": "vgpr8", "saddr": "sgpr7", "vdst": "vgpr8"},
                      VOPDX={"vdstx": "vgpr8", "src0x": "src9", "vsrc1x": "vgpr8"},
                      VOPDY={"vdsty": "vgpr8", "src0y": "src9", "vsrc1y": "vgpr8"})
BASE.update(SCRATCH=dict(addr=12, data=20, saddr=32, vdst=40), GLOBAL=dict(addr=12, data=20, saddr=32, vdst=40),
            VOPDX=dict(src0x=0x10A, vsrc1x=20), VOPDY=dict(src0y=0x10D, vsrc1y=23))
# alternative base values tried when LLVM rejects the first (e.g. v_cmpx_*_e64 requires vdst = exec_lo)
RETRY = {"VOP3": [dict(vdst=encodings.EXEC_LO), dict(vdst=16)], "FLAT": [dict(saddr=32), dict(saddr=32, sve=1)],
         "DS": [dict(gds=1)], "SOPK": [dict(sdst=encodings.NULL)], "SOP1": [dict(sdst=encodings.NULL), dict(ssrc0=0)],
         "VOP1": [dict(vdst=0, src0=0)],
         "SCRATCH": [dict(saddr=encodings.NULL), dict(saddr=encodings.NULL, sve=1), dict(sve=1)], "GLOBAL": [dict(saddr=encodings.NULL)],
         "VOPDX": [dict(vsrc1x=0)], "VOPDY": [dict(vsrc1y=0)]}

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
  def __init__(self, dis: Disassembler | None = None):
    self.dis = dis or Disassembler()

  def words(self, fam: str, vals: dict, lit: int | None = None) -> list[int]:
    fmt, fixed = PSEUDO.get(fam, (fam, {}))
    ws = [encodings.PREFIX[fmt], 0]
    for k, v in {**fixed, **vals}.items():
      if k == "op" and fam in OPFIELD: k = OPFIELD[fam]
      if k == "op" and "op" not in encodings.FIELDS[fmt]: continue   # EXP: a single instruction
      if k == "sdst" and fam == "VOP3": encodings.put(ws, encodings.FIELDS["VOP3SD"]["sdst"], v)
      else: encodings.put(ws, encodings.FIELDS[fmt][k], v)
    ws = ws[:encodings.WORDS.get(fmt, 2)]
    return ws + ([lit] if lit is not None else [])

  def text(self, fam: str, vals: dict, lit: int | None = None, extra: int = 0x5A5A5A5A) -> tuple[int, str | None]:
    n, t = self.dis.words(*self.words(fam, vals, lit), extra, extra, extra)
    if n and fam in ("VOPDX", "VOPDY"): t = t.split(" :: ")[fam == "VOPDY"]   # one half of a dual instruction
    return n, t

  def base(self, fam: str, op: int) -> tuple[dict, str] | None:
    """First probe LLVM accepts: the family's base values, its retries, then with unused fields zeroed
    (LLVM rejects e.g. a DS store whose vdst field is not 0)."""
    fields = list(OPERAND_FIELDS.get(fam, {}))
    zeroings = [dict.fromkeys(c, 0) for k in range(1, len(fields) + 1) for c in itertools.combinations(fields, k)]
    for retry in [{}] + RETRY.get(fam, []) + zeroings:
      vals = dict(BASE[fam], op=op, **retry)
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
  vreg = None if salu else reg_shape(p.token(fam, dict(vals, **{field: encodings.VGPR0 + 10}), pos))
  sreg = reg_shape(p.token(fam, dict(vals, **{field: 16}), pos))
  bits = (vreg or sreg)[1]
  consts = tuple((p.token(fam, dict(vals, **{field: v}), pos, lit) or "X").split("/*")[0] for v, lit in CONST_PROBES)
  bad_const = "Invalid immediate" in (p.token(fam, dict(vals, **{field: 0xF0}), pos) or "")
  if all(c.startswith("v") for c in consts): ctype = "vraw"   # LLVM reads the low 8 bits as a VGPR whatever they are
  else: ctype = "none" if bad_const else CONST_TYPES.get(consts)   # 'none': LLVM prints constants with /*Invalid immediate*/
  if ctype is None: raise ValueError(f"{fam} {vals} {field}: unknown constant signature {consts}")
  spec = f"{field}:src{bits}/{ctype}"
  if vreg and vreg[2]: spec += f"/sonly={vreg[2]}"    # a VGPR here prints LLVM's 'Invalid register' comment
  if sreg and sreg[2]: spec += f"/vonly={sreg[2]}"
  return spec


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
  """Operand spec 'field:kind[/attr...]' (parsed by emu.rdna3.decode): v32 = 32-bit VGPR, s64 = SGPR pair,
  src16/f16 = register-or-constant source, imm/hex = immediate field printed in hex, ..."""
  tok = p.token(fam, vals, pos)
  if kind in ("src9", "ssrc8"):
    if reg_shape(p.token(fam, dict(vals, **{field: 16}), pos)) is None: return f"{field}:imm/{imm_style(tok)}"  # sendmsg id
    return classify_src(p, fam, vals, field, pos)
  if kind == "imm": return f"{field}:imm/{imm16_style(p, fam, vals, field, pos)}"
  shape = reg_shape(tok)
  if shape and shape[0] == "s":   # special registers this operand's class excludes (m0, exec...)
    notes = {c: m.group(1) for c in (encodings.VCC_LO, encodings.NULL, encodings.M0, encodings.EXEC_LO, encodings.EXEC_HI)
             if (m := re.search(r"operand has '(\w+)'", p.token(fam, dict(vals, **{field: c}), pos) or ""))}
    if notes: return f"{field}:s{shape[1]}/bad={next(iter(notes.values()))}@{'.'.join(map(str, notes))}"
  if shape is None and re.fullmatch(r"\d+", tok): return f"{field}:imm/{imm_style(tok)}"   # s_atc_probe's sdata
  if shape is None: raise ValueError(f"{fam} {vals}: {field} prints as {tok!r}")
  return f"{field}:{shape[0]}{shape[1]}" + (f"/note={shape[2]}" if shape[2] else "")


def sweep_op(p: Prober, fam: str, op: int) -> tuple | None:
  got = p.base(fam, op)
  if got is None or encodings.family(p.words(fam, got[0])[0]) != PSEUDO.get(fam, (fam,))[0]: return None
  vals, t0 = got
  name, toks, _ = split_operands(t0)
  if fam == "SOPP":   # one immediate whose printing depends on the opcode (waitcnt fields, sendmsg, branch offset...)
    return name, fam, (f"simm16:imm/{imm16_style(p, fam, vals, 'simm16', None)}",) if " " in (p.text(fam, dict(vals, simm16=1))[1] or "") else (), ""
  if fam == "EXP":   # 'exp <target> vsrc0, ..., vsrc3': the target name leads the first operand
    return name, fam, ("target:imm/exp",) + tuple(f"vsrc{i}:{reg_shape(t.split()[-1])[0]}32" for i, t in enumerate(toks)), ""
  ops: list = [None] * len(toks)
  enc = fam
  for field, kind in OPERAND_FIELDS.get(fam, {}).items():
    pos = p.position(fam, vals, t0, field, kind)
    if pos is None or ops[pos] is not None: continue
    if field == "sdst" and fam == "VOP3":   # VOP3SD: bits 14:8 are an SGPR destination, not abs/opsel
      if (reg_shape(p.token(fam, dict(vals, sdst=16), pos)) or "v")[0] != "s": continue
      enc = "VOP3SD"
    ops[pos] = operand(p, fam, vals, field, kind, pos)
  for i, o in enumerate(ops):   # unmapped: a literal operand (changes with the literal dword) or fixed text
    if o is None: ops[i] = ":kimm32" if p.token(fam, vals, i, 0x11223344) == "0x11223344" else f":={toks[i]}"
  return name, enc, tuple(ops), mod_effects(p, fam, enc, vals, t0)


MOD_FIELDS = {  # modifier fields whose effect is probed bit by bit (VOP3P probes start from opsel_hi = all ones)
  "VOP3": ("neg", "abs", "opsel", "clmp", "omod"), "VOP3SD": ("neg", "clmp", "omod"),
  "VOP3P": ("neg", "neg_hi", "opsel", "opsel_hi", "opsel_hi2", "clmp"), "VINTERP": ("neg", "opsel", "clmp"),
}
DPP_PROBE = 0xFF00E400   # DPP16 dword: quad_perm identity, all rows and banks enabled


def mod_effects(p: Prober, fam: str, enc: str, vals: dict, t0: str) -> str:
  """Per modifier bit, what LLVM does when it is set: p = printed, - = ignored, x = rejected, f = the op falls back to
  its 'fake16' form (16-bit registers printed as 32-bit ones). E.g. 'neg=pp- abs=pp- opsel=---- clmp=p omod=p'."""
  out, lists, sel = [], {}, ""
  for field in MOD_FIELDS.get(enc, ()):
    width = (encodings.FIELDS[enc][field][2]) if field != "omod" else 1
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
    dv = dict(vals, src0=encodings.DPP16)
    n, t1 = p.text(fam, dv, DPP_PROBE)
    if n:
      chars = ""
      for b in range(4):
        n, t = p.text(fam, dv, DPP_PROBE | 1 << (20 + b))
        chars += "x" if not n else "-" if t == t1 else "p"
      out.append(f"dpp={chars}")
  return " ".join(out + [f"n_{k}={v}" for k, v in sorted(lists.items())])


def sweep_family(p: Prober, fam: str) -> dict[int, tuple]:
  fmt = PSEUDO.get(fam, (fam,))[0]
  nbits = encodings.FIELDS[fmt].get(OPFIELD.get(fam, "op"), (0, 0, 0))[2]
  return {op: r for op in range(1 << nbits) if (r := sweep_op(p, fam, op))}


FAMILIES = ("SOP2", "SOPK", "SOP1", "SOPC", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3P", "VOPDX", "VOPDY",
            "VINTERP", "LDSDIR", "DS", "FLAT", "SCRATCH", "GLOBAL", "MUBUF", "MTBUF", "EXP")


def sweep_symbols(p: Prober) -> dict[str, dict[int, str]]:
  """Names LLVM prints for symbolic immediates: hwreg ids, sendmsg ids, s_version codes, export targets, MTBUF formats."""
  def names(words, pick) -> dict[int, str]:
    out = {}
    for v, ws in words:
      n, t = p.dis.words(*ws, 0)
      if n and (name := pick(t)): out[v] = name
    return out
  return {
    "HWREG": names(((i, [0xB8800000 | 31 << 11 | i]) for i in range(64)),
                   lambda t: re.search(r"hwreg\((HW_REG_\w+)\)", t) and re.search(r"hwreg\((\w+)", t).group(1)),
    "SENDMSG": names(((i, [0xBFB60000 | i]) for i in range(256)),
                     lambda t: re.search(r"sendmsg\((MSG_\w+)\)", t) and re.search(r"sendmsg\((\w+)", t).group(1)),
    "VERSION": names(((i, [0xB0800000 | i]) for i in range(256)), lambda t: re.fullmatch(r"s_version (UC_\w+)", t) and t.split()[1]),
    "EXP_TARGET": names(((i, [0xF8000000 | i << 4, 0]) for i in range(64)), lambda t: None if "invalid_target" in t else t.split()[1]),
    "BUF_FORMAT": names(((i, [0xE8000000 | i << 19, 0]) for i in range(128)), lambda t: (re.search(r"format:\[(\w+)\]", t) or [None, None])[1]),
  }


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
      if n: obs[nsa, a16, dim, encodings.mimg_vdata(dmask, d16, tfe, gather)] = counts(t)   # (d16 is invalid for some ops)
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


def sweep(cpu: str) -> tuple[dict, dict, dict]:
  """Everything the tables hold for one target: (OPS with the encoding per entry, MIMG, SYMBOLS)."""
  p = Prober(Disassembler(cpu))
  return {fam: sweep_family(p, fam) for fam in FAMILIES}, sweep_mimg(p), sweep_symbols(p)


def _entry(e: tuple) -> str:
  name, _, ops, mods = e
  return f"({name!r}, {ops!r}" + (f", {mods!r})" if mods else ")")


def overlay(base: dict, ops: dict) -> dict[str, dict[int, tuple | None]]:
  """The entries of `ops` that differ from `base` (None: the opcode is no instruction there), per family."""
  out = {}
  for fam in FAMILIES:
    b, o = base[fam], ops[fam]
    diff = {op: o.get(op) for op in sorted(set(b) | set(o)) if b.get(op) != o.get(op)}
    if any(e is not None and e[1] == "VOP3SD" for e in diff.values()):
      raise ValueError(f"{fam}: a target-specific VOP3SD opcode is not representable in the overlay")
    if diff: out[fam] = diff
  return out


def generate() -> str:
  """Source text of autogen/rdna3/tables.py: the gfx1100 tables, then per other target (RDNA3.5) what differs."""
  version = Disassembler().version()
  (base, mimg, symbols), overlays, targets = sweep(TARGETS[0]), {}, {TARGETS[0]: None}
  for cpu in TARGETS[1:]:
    ops, m, sy = sweep(cpu)
    if (m, sy) != (mimg, symbols): raise ValueError(f"{cpu}: image ops or symbolic names differ from {TARGETS[0]}'s")
    ov = overlay(base, ops)
    targets[cpu] = next((k for k, v in overlays.items() if v == ov), cpu)   # equal sweeps share one overlay
    overlays.setdefault(targets[cpu], ov)
  out = [f'"""RDNA3 (gfx11) opcode tables. GENERATED by `python -m autogen.rdna3` from LLVM {version}\'s gfx1100',
         'disassembler (libLLVM, Debian libllvm22): do not edit. OPS[family][opcode] = (LLVM mnemonic, operand specs in',
         "LLVM's print order); spec grammar in emu/rdna3/decode.py (parse_spec). VOP3SD: the VOP3 opcodes whose bits 14:8",
         "are an SGPR destination (carry-out / VCC-like output) instead of abs/opsel. TARGET_OPS: what the same sweep with",
         'another CPU (RDNA3.5) finds different, per family (None: no instruction there); TARGETS names each target\'s."""',
         "", f'LLVM_VERSION = "{version}"', "", "OPS = {"]
  sd = []
  for fam in FAMILIES:
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
