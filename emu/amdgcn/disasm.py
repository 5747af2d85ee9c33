"""Disassembler printing LLVM 22's syntax (`llvm-objdump --mcpu=gfx1100` text, one line per
instruction): true16 halves (v1.l / v1.h), lit(...) for literals that look like inline constants, source
modifiers, DPP16/DPP8 controls, VOPD `::`, and the symbolic s_waitcnt / s_delay_alu / sendmsg / hwreg forms.

Operand kinds and per-opcode modifier behaviour come from the instruction's target's tables (autogen/amdgcn/<isa>/tables.py,
swept from LLVM 22); the printing rules below are LLVM's AMDGPU instruction printer conventions for gfx11, and gfx12's where its field
layouts differ (cache policy th/scope, SMEM offsets, VDSDIR waits), checked word by word against LLVM in
tests/emu/amdgcn/test_disasm_llvm.py.
"""
from __future__ import annotations
from functools import cache
from emu.amdgcn.decode import Inst, Operand, decode, scalar_reg, table, FLOAT_CONSTS
from emu.amdgcn import symbols, targets


def disasm(code: bytes | memoryview, target: str = targets.DEFAULT) -> list[str]:
  """One line of LLVM-syntax text per instruction in `code` (decoded back to back for `target`: gfx1100, RDNA3.5's
  gfx1150 / gfx1151, RDNA4's gfx1200 / gfx1201)."""
  code, out, off = bytes(code), [], 0
  while off < len(code):
    inst = decode(code, off, target)
    out.append(format_inst(inst))
    off += inst.size
  return out


@cache
def _mods(spec: str) -> dict[str, str]:
  """An instruction's modifier behaviour per bit ('p' printed, '-' ignored, 'x' rejected by LLVM, 'f' fake16 fallback)."""
  return dict(kv.split("=") for kv in spec.split()) if spec else {}


# ---- registers and constants -------------------------------------------------------------------------------
_SRC_NAMES = {230: "src_flat_scratch_base_lo", 231: "src_flat_scratch_base_hi", 235: "src_shared_base",
              236: "src_shared_limit", 237: "src_private_base", 238: "src_private_limit", 239: "src_pops_exiting_wave_id",
              251: "src_vccz", 252: "src_execz", 253: "src_scc", 254: "src_lds_direct"}
_FLOATS = {240: "0.5", 241: "-0.5", 242: "1.0", 243: "-1.0", 244: "2.0", 245: "-2.0", 246: "4.0", 247: "-4.0"}


def sgpr(code: int, bits: int) -> str | None:
  """Name of scalar register (tuple) `code` (0..127) of `bits` width, as LLVM prints it (a misaligned tuple aligned
  down; LLVM's C API adds a '; Warning: ...' note there, which llvm-mc and llvm-objdump do not print)."""
  return scalar_reg(code, bits)


def sgpr_operand(v: int, op: Operand, lit: int | None) -> str:
  """A scalar register field; LLVM notes registers the operand's class excludes (e.g. m0 as an s_load destination)
  and prints a constant code in an SGPR-only field as an invalid immediate."""
  cls, codes = op.note[4:].split("@") if op.note.startswith("bad=") else ("", "")
  if v >= 128:
    text = src(v, Operand(op.field, "src", op.bits, "none", ""), lit)
    return text + (f"/*Invalid register, operand has '{cls}' register class*/" if cls and v == 254 else "")
  if op.bits == 96 and 108 <= v <= 123:   # a ttmp triple: LLVM prints the 256-bit ttmp tuple and notes the class
    first = (v - 108) & ~3
    return f"ttmp[{first}:{first + 7}]/*Invalid register, operand has 'SReg_96' register class*/" if first + 8 <= 16 else f"<bad sgpr {v}>"
  name = sgpr(v, op.bits) or f"<bad sgpr {v}>"
  if str(v) in codes.split("."): name += f"/*Invalid register, operand has '{cls}' register class*/"
  return name


def vgpr(n: int, bits: int, hi: bool = False) -> str:
  if bits == 16: return f"v{n}.{'h' if hi else 'l'}"
  return f"v{n}" if bits <= 32 else f"v[{n}:{n + bits // 32 - 1}]"


def _inline_int(v: int) -> bool:
  """A 32-bit value an integer inline constant (-16..64) encodes."""
  return v <= 64 or v >= 0xFFFFFFF0


def _inline32(v: int) -> bool:
  """LLVM isInlinableLiteral32: integers -16..64 and the f32 inline floats (incl. 1/(2*pi))."""
  return _inline_int(v) or v in _F32_INLINE


def _inline16(v: int, bf: bool = False) -> bool:
  return v <= 64 or v >= 0xFFF0 or v in (_BF16_INLINE if bf else _F16_INLINE)


_F32_INLINE = {c[1] for c in FLOAT_CONSTS.values()}
_F16_INLINE = {c[0] for c in FLOAT_CONSTS.values()}
_BF16_INLINE = {c[1] >> 16 for c in FLOAT_CONSTS.values() if c[1] & 0xFFFF == 0} | {0x3E22}
_F64_INLINE = {c[2]: _FLOATS.get(k, "0.15915494309189532") for k, c in FLOAT_CONSTS.items()}


def literal(v: int, typ: str) -> str:
  """How LLVM prints a 32-bit literal for an operand of constant type `typ` (lit() marks a literal that an inline
  constant could have encoded)."""
  if typ == "f16":
    return f"lit({v:#x})" if _inline16(v & 0xFFFF) else f"{v & 0xFFFF:#x}"
  if typ == "i16":
    return f"lit({v:#x})" if _inline32(v) else f"{v & 0xFFFF:#x}"
  if typ == "bf16":
    return f"lit({v:#x})" if _inline16(v & 0xFFFF, bf=True) else f"{v:#x}"
  if typ == "f64":
    return _F64_INLINE.get(v << 32) or ("0" if v == 0 else f"{v:#x}")
  if typ == "pk_f16":   # VOP3P: an inline constant fills the low half only
    return f"lit({v:#x})" if _inline_int(v) or v in _F16_INLINE else f"{v:#x}"
  if typ == "pk_bf16":
    return f"lit({v:#x})" if _inline_int(v) or v in _BF16_INLINE else f"{v:#x}"
  if typ == "pk_f16_rep":   # v_pk_fmac_f16 (VOP2): a float constant replicated into both halves
    return f"lit({v:#x})" if _inline_int(v) or (v >> 16 == v & 0xFFFF and v & 0xFFFF in _F16_INLINE) else f"{v:#x}"
  if typ == "none": return inline_value(v) or f"{v:#x}"
  if typ == "b64": return f"lit({v:#x})" if v <= 64 else f"{v:#x}"
  return f"lit({v:#x})" if _inline32(v) else f"{v:#x}"


def inline_value(v: int) -> str | None:
  """A 32-bit value printed as the inline constant it equals (LLVM does this for literals of operands that take no
  constants at all, next to its /*Invalid immediate*/ note)."""
  if v <= 64: return str(v)
  if v >= 0xFFFFFFF0: return str(v - (1 << 32))
  return next((_FLOATS.get(k, "0.15915494") for k, c in FLOAT_CONSTS.items() if c[1] == v), None)


def inline_text(code: int, typ: str) -> str:
  """An inline constant (128..208 integers, 240..248 floats) as LLVM prints it for an operand of type `typ`."""
  if code <= 208: return str(code - 128 if code <= 192 else 192 - code)
  if typ == "i16": return f"{FLOAT_CONSTS[code][0]:#x}"
  if code == 248: return "0.15915494309189532" if typ in ("f64", "b64") else "0.15915494"
  return _FLOATS[code]


def src(code: int, op: Operand, lit: int | None, hi: bool = False, fake16: bool = False, salu: bool = False) -> str:
  """A register-or-constant source (9-bit VOP / 8-bit SALU encoding) as LLVM prints it."""
  bits, typ = op.bits, op.type
  if code >= 256:
    n = code - 256
    if typ == "vraw": return vgpr(n, 16, hi)
    if bits == 16 and not fake16: return vgpr(n, 16, hi)
    return vgpr(n, 32 if bits == 16 else bits) + _vnote(op) + _lo128(op, n)
  if typ == "vraw": return vgpr(code & 0xFF, 16, hi)
  if code <= 127:
    name = sgpr(code, 32 if bits == 16 else bits)
    return (name or f"<bad sgpr {code}>") + _snote(op, code)
  if code == 255: text = literal(lit or 0, typ)
  elif code <= 208 or 240 <= code <= 248: text = inline_text(code, typ)
  elif code in _SRC_NAMES:
    if code == 254 and salu: return "src_lds_direct/*Invalid register, operand has 'SReg_32' register class*/"
    lds_bad = code == 254 and op.note and "Lds" not in op.note and not op.note.startswith("lo128=")   # classes that exclude src_lds_direct
    return _SRC_NAMES[code] + (f"/*Invalid register, operand has '{op.note[6:]}' register class*/" if lds_bad else "")
  else: text = f"<bad src {code}>"
  return text + ("/*Invalid immediate*/" if typ == "none" else "")


def _lo128(op: Operand, n: int) -> str:
  """LLVM's note for v128 and up in an operand that takes v0..v127 only (gfx12's fake16 16-bit operands)."""
  return f"/*Invalid register, operand has '{op.note[6:]}' register class*/" if n >= 128 and op.note.startswith("lo128=") else ""


def _vnote(op: Operand) -> str:
  return f"/*Invalid register, operand has '{op.note[6:]}' register class*/" if op.note.startswith("sonly=") else ""


def _snote(op: Operand, code: int = 0) -> str:
  """LLVM's note for a scalar register in a VGPR-only operand (null is accepted silently)."""
  ok = not op.note.startswith("vonly=") or code == 124
  return "" if ok else f"/*Invalid register, operand has '{op.note[6:]}' register class*/"


def with_mods(text: str, neg: bool, abs_: bool, code: int) -> str:
  """Float source modifiers: -x, |x|, -|x|; a negated constant prints as neg(c)."""
  if abs_: text = f"|{text}|"
  if neg: text = f"-{text}" if abs_ or code < 128 or code >= 256 or code in _SRC_NAMES or text.startswith("lit(") else f"neg({text})"
  return text


# ---- per-family formatting ---------------------------------------------------------------------------------
def format_inst(inst: Inst) -> str:
  fmt = _FORMATTERS.get(inst.enc, _fmt_generic)
  return fmt(inst)


def _join(name: str, ops: list[str], mods: list[str] | None = None) -> str:
  s = name + (" " + ", ".join(ops) if ops else "")
  return s + ("".join(" " + m for m in mods) if mods else "")


def _operands(inst: Inst, render=None) -> list[str]:
  out = []
  for op in inst.operands:
    if render and (t := render(op)) is not None: out.append(t)
    elif op.kind == "text": out.append(op.type)
    elif op.kind == "kimm": out.append(f"{inst.literal:#x}")
    elif op.kind == "src": out.append(src(inst.fields[op.field], op, inst.literal))
    elif op.kind == "vgpr": out.append(vgpr(inst.fields[op.field], op.bits) + _lo128(op, inst.fields[op.field]))
    elif op.kind == "sgpr": out.append(sgpr_operand(inst.fields[op.field], op, inst.literal))
    else: out.append(str(inst.fields[op.field]))
  return out


def _fmt_generic(inst: Inst) -> str:
  return _join(inst.name, _operands(inst))


def _fmt_sop(inst: Inst) -> str:
  def render(op: Operand):
    if op.kind == "src": return src(inst.fields[op.field], op, inst.literal, salu=True)
    if op.kind == "kimm":   # s_setreg_imm32_b32 prints an inline-constant value as such, s_fmaak/s_fmamk_f32 in hex
      return (inline_value(inst.literal) if inst.op == "s_setreg_imm32_b32" else None) or f"{inst.literal:#x}"
    if op.kind != "imm": return None
    return symbols.imm16(table(inst.target).symbols, inst.op, op.type, inst.fields[op.field])
  return _join(inst.name, _operands(inst, render))


def _fmt_sopp(inst: Inst) -> str:
  if not inst.operands: return inst.name
  v = inst.fields["simm16"]
  text = symbols.imm16(table(inst.target).symbols, inst.op, inst.operands[0].type, v)
  return f"{inst.name} {text}" if text is not None else inst.name


def _fmt_vop_e32(inst: Inst) -> str:
  """VOP1 / VOP2 / VOPC, incl. their DPP16 / DPP8 forms. 16-bit VGPR fields use bit 7 for the high half."""
  f, dpp = inst.fields, inst.dpp
  dm = _mods(inst.mods).get("dpp", "----")   # DPP16 src0_neg, src0_abs, src1_neg, src1_abs
  def render(op: Operand):
    if op.kind == "vgpr" and op.bits == 16:
      v = f[op.field]
      return vgpr(v & 0x7F, 16, bool(v & 0x80))
    if op.field == "src0" and dpp is not None:
      t = vgpr(dpp["src0"] & (0x7F if op.bits == 16 else 0xFF), op.bits, bool(dpp["src0"] & 0x80) and op.bits == 16)
      if op.bits != 16: t += _lo128(op, dpp["src0"]).replace("'VS_32_Lo128'", "'VGPR_32_Lo128'")   # DPP src0: a VGPR operand
      if "src0_neg" in dpp: t = with_mods(t, dpp["src0_neg"] and dm[0] == "p", dpp["src0_abs"] and dm[1] == "p", 256)
      return t
    if op.field == "src0" and op.kind == "src" and op.bits == 16 and f["src0"] >= 256:
      v = f["src0"] - 256
      return vgpr(v & 0x7F, 16, bool(v & 0x80))
    return None
  ops = _operands(inst, render)
  if dpp is not None and "src1_neg" in dpp and inst.enc != "VOP1":
    i = next(k for k, o in enumerate(inst.operands) if o.field == "vsrc1")
    ops[i] = with_mods(ops[i], dpp["src1_neg"] and dm[2] == "p", dpp["src1_abs"] and dm[3] == "p", 256)
    if ops[i].endswith("|") and inst.op == "v_cndmask_b32" and targets.get(inst.target).isa == "gfx12":   # LLVM 22 gfx12 printer
      ops[i], ops[i + 1] = ops[i][:-1], ops[i + 1] + "|"                                        # closes |..| after vcc_lo
  name = inst.name
  if dpp is not None:
    if inst.enc == "VOPC": name = name.removesuffix("_e32")
    else: name = name.removesuffix("_e32") + "_dpp"
  return _join(name, ops, _dpp_text(dpp) if dpp else None)


def _dpp_text(dpp: dict) -> list[str]:
  if "sel" in dpp:
    return [f"dpp8:[{','.join(map(str, dpp['sel']))}]"] + (["fi:1"] if dpp["fi"] else [])
  out = [symbols.dpp_ctrl(dpp["ctrl"]), f"row_mask:{dpp['row_mask']:#x}", f"bank_mask:{dpp['bank_mask']:#x}"]
  if dpp["bound_ctrl"]: out.append("bound_ctrl:1")
  if dpp["fi"]: out.append("fi:1")
  return out


def _fmt_vop3(inst: Inst) -> str:
  """VOP3 / VOP3SD (incl. VOP1/2/C promoted to e64 and the e64 DPP forms)."""
  f, dpp = inst.fields, inst.dpp
  mods = _mods(inst.mods)
  neg, abs_, opsel = f["neg"], f.get("abs", 0), f.get("opsel", 0)
  nm, am, om = mods.get("neg", ""), mods.get("abs", ""), mods.get("opsel", "")
  fake16 = any(c == "f" and opsel >> i & 1 for i, c in enumerate(om))
  def render(op: Operand):
    if op.kind == "src":
      i = int(op.field[-1])
      hi = bool(opsel >> i & 1) and op.bits == 16
      if op.field == "src0" and dpp is not None: t = vgpr(dpp["src0"], 32 if op.bits == 16 and fake16 else op.bits, hi)
      else: t = src(f[op.field], op, inst.literal, hi, fake16)
      return with_mods(t, bool(neg >> i & 1) and nm[i:i + 1] == "p", bool(abs_ >> i & 1) and am[i:i + 1] == "p",
                       f[op.field] if not (op.field == "src0" and dpp) else 256)
    if op.field == "vdst" and op.kind == "vgpr":
      return vgpr(f["vdst"], 32 if op.bits == 16 and fake16 else op.bits, bool(opsel >> 3 & 1))
    return None
  ops = _operands(inst, render)
  tail = []
  if not fake16 and (t := _sel_list(mods, opsel)): tail.append(t)
  if inst.op in ("v_cvt_sr_fp8_f32", "v_cvt_sr_bf8_f32") and opsel >> 2: tail.append(f"byte_sel:{opsel >> 2}")   # gfx12: the
  if inst.op in ("v_cvt_f32_fp8", "v_cvt_f32_bf8") and opsel & 3:          # byte written / read, in opsel (LLVM: byte_sel)
    tail.append(f"byte_sel:{(opsel & 1) << 1 | (opsel >> 1 & 1)}")
  if f["clmp"] and mods.get("clmp") == "p": tail.append("clamp")
  if f["omod"] and mods.get("omod") == "p": tail.append(("", "mul:2", "mul:4", "div:2")[f["omod"]])
  name = inst.name
  if dpp is not None:
    name = (name if name.endswith("_e64") else name + "_e64") + "_dpp"
    tail += _dpp_text(dpp)
  return _join(name, ops, tail)


def _sel_list(mods: dict, opsel: int) -> str | None:
  """op_sel:[...] of VOP3 / VINTERP: the table's sel map says which list entry each opsel bit is ('-': not shown)."""
  sel = mods.get("sel")
  if not sel: return None
  bits = [0] * int(mods["n_op_sel"])
  for b, idx in enumerate(sel):
    if idx != "-": bits[int(idx)] = opsel >> b & 1
  return f"op_sel:[{','.join(map(str, bits))}]" if any(bits) else None


def _fmt_vop3p(inst: Inst) -> str:
  f, dpp = inst.fields, inst.dpp
  mods = _mods(inst.mods)
  srcs = [o for o in inst.operands if o.kind == "src"]
  n = len(srcs)
  def render(op: Operand):
    if op.kind == "src":
      i = int(op.field[-1])
      if op.field == "src0" and dpp is not None: t, code = vgpr(dpp["src0"], op.bits), 256
      else:
        code = f[op.field]
        dpp_v = dpp is not None and op.field == "src1" and code < 256 and inst.op.startswith("v_fma_mix")   # a VGPR
        t = src(code, op, inst.literal) + ("/*Invalid register, operand has 'VGPR_32' register class*/" if dpp_v else "")
      if inst.op.startswith("v_fma_mix"):   # mix ops: neg_hi is abs, neg is neg (guide: VOP3P MIX)
        return with_mods(t, bool(f["neg"] >> i & 1), bool(f["neg_hi"] >> i & 1), code)
      return t
    return None
  ops = _operands(inst, render)
  tail = []
  def field(name: str, mod: str, v: int, default: int) -> None:
    """A per-source bit list, printed when some bit the op uses differs from its default."""
    k = int(mods.get(f"n_{name}", n))
    bits = [v >> i & 1 if i < len(mod) and mod[i] == "p" else default for i in range(k)]
    if any(b != default for b in bits): tail.append(f"{name}:[{','.join(map(str, bits))}]")
  mix = inst.op.startswith("v_fma_mix")
  field("op_sel", mods.get("opsel", ""), f["opsel"], 0)
  field("op_sel_hi", mods.get("opsel_hi", "") + mods.get("opsel_hi2", ""), f["opsel_hi"] | f["opsel_hi2"] << 2, 0 if mix else 1)
  if not mix:
    field("neg_lo", mods.get("neg", ""), f["neg"], 0)
    field("neg_hi", mods.get("neg_hi", ""), f["neg_hi"], 0)
  if f["clmp"] and mods.get("clmp") == "p": tail.append("clamp")
  if dpp is not None: tail += _dpp_text(dpp)
  return _join(inst.name + ("_e64_dpp" if dpp is not None else ""), ops, tail)


def _fmt_vopd(inst: Inst) -> str:
  """'x-half :: y-half'; inst.operands holds the X operands then the Y ones (fields vdstx/src0x/..., vdsty/...)."""
  halves = []
  k = len(table(inst.target).ops["VOPDX"][inst.fields["opx"]].operands)
  for name, (_, fields), specs in zip(inst.name.split(" :: "), inst.vopd, (inst.operands[:k], inst.operands[k:])):
    ops = []
    for op in specs:
      if op.kind == "kimm": ops.append(f"{inst.literal:#x}")
      elif op.kind == "text": ops.append(op.type)
      elif op.kind == "src": ops.append(src(fields["src0"], op, inst.literal))
      else: ops.append(vgpr(fields[op.field[:-1]], op.bits))   # vdstx -> the half's vdst, vsrc1y -> vsrc1
    halves.append(_join(name, ops))
  return " :: ".join(halves)


def _fmt_smem(inst: Inst) -> str:
  f = inst.fields
  if not inst.operands: return inst.name   # s_gl1_inv, s_dcache_inv: LLVM prints no fields
  gfx12 = "th" in f   # gfx12: 24-bit offset, th/scope cache policy (encodings.py)
  bits = 24 if gfx12 else 21
  def render(op: Operand):
    if op.field == "sbase": return sgpr(f["sbase"] * 2, op.bits)
    if op.kind == "imm": return symbols.imm16(table(inst.target).symbols, inst.op, "u16", f[op.field])   # s_atc_probe's 7-bit probe mode
    if op.kind == "text": return symbols.hex_signed(f["offset"], bits)   # s_prefetch_*: the offset stands where LLVM printed it
    return None
  ops = _operands(inst, render)
  tail = []
  if any(o.kind == "text" for o in inst.operands): pass
  elif f["soffset"] == 124 and (f["offset"] or gfx12): ops[-1] = symbols.hex_signed(f["offset"], bits)   # no soffset: the offset stands in
  elif f["offset"] or gfx12: tail.append(f"offset:{symbols.hex_signed(f['offset'], bits)}")
  if gfx12: tail += [] if inst.op.startswith(("s_prefetch", "s_buffer_prefetch", "s_atc_probe")) else _cpol(inst)   # none printed for these
  else: tail += [b for b in ("glc", "dlc") if f[b]]
  return _join(inst.name, ops, tail)


_TH_LOAD = {1: "NT", 2: "HT", 4: "NT_RT", 5: "RT_NT", 6: "NT_HT", 7: "NT_WB"}


def _cpol(inst: Inst) -> list[str]:
  """gfx12 cache policy as LLVM prints it (AMDGPUInstPrinter::printCPol / printTH): scale_offset, th (load, store or
  atomic names by the instruction), scope, nv."""
  f, out = inst.fields, []
  if f.get("scale_offset"): out.append("scale_offset")
  th, scope = f["th"], f["scope"]
  if th:
    if "_atomic_" in inst.op:
      if th & 4: t = (f"CASCADE{'_NT' if th & 2 else '_RT'}") if scope >= 2 else f"{th:#x}"
      elif th & 2: t = "NT" + ("_RETURN" if th & 1 else "")
      else: t = "RETURN"
      out.append(f"th:TH_ATOMIC_{t}")
    else:
      store = "store" in inst.op
      if not store and th == 7: out.append(f"th:{th:#x}")
      else:
        name = ("BYPASS" if scope == 3 else "WB" if store else "LU") if th == 3 else _TH_LOAD[th]
        out.append(f"th:TH_{'STORE' if store else 'LOAD'}_{name}")
  if scope: out.append(f"scope:SCOPE_{('CU', 'SE', 'DEV', 'SYS')[scope]}")
  if f.get("nv"): out.append("nv")
  return out


def _fmt_ds(inst: Inst) -> str:
  f = inst.fields
  ops = _operands(inst)
  tail = []
  if "2addr" in inst.op:
    if f["offset0"]: tail.append(f"offset0:{f['offset0']}")
    if f["offset1"]: tail.append(f"offset1:{f['offset1']}")
  elif off := f["offset0"] | f["offset1"] << 8: tail.append(f"offset:{symbols.swizzle(off) if inst.op == 'ds_swizzle_b32' else off}")
  if f.get("gds"): tail.append("gds")
  return _join(inst.name, ops, tail)


def _fmt_flat(inst: Inst) -> str:
  """FLAT / GLOBAL / SCRATCH. GLOBAL without saddr takes a 64-bit VGPR address; SCRATCH prints its VGPR address only
  with SVE; atomics with glc return the old value into vdst (LLVM's _rtn form prints it first)."""
  f = inst.fields
  def render(op: Operand):
    if op.field == "saddr": return "off" if f["saddr"] == 124 else sgpr_operand(f["saddr"], op, None)
    if op.field == "addr" and inst.enc == "GLOBAL": return vgpr(f["addr"], 64 if f["saddr"] == 124 else 32)
    if op.kind == "text" and op.type == "off": return vgpr(f["addr"], 32) if f["sve"] else "off"
    return None
  ops = _operands(inst, render)
  gfx12 = "th" in f   # gfx12: signed 24-bit offsets, th/scope cache policy; th bit 0 returns an atomic's old value
  if "_atomic_" in inst.op and (f["th"] & 1 if gfx12 else f["glc"]):
    data = next(o for o in inst.operands if o.field == "data")
    ops.insert(0, vgpr(f["vdst"], data.bits // 2 if "cmpswap" in inst.op else data.bits))
  tail = []
  if f["offset"]: tail.append(f"offset:{symbols.signed(f['offset'], 24 if gfx12 else 13) if gfx12 or inst.enc != 'FLAT' else f['offset']}")
  tail += _cpol(inst) if gfx12 else [b for b in ("glc", "slc", "dlc") if f[b]]
  return _join(inst.name, ops, tail)


def _fmt_buf(inst: Inst) -> str:
  """MUBUF / MTBUF: the VGPR address is printed per offen/idxen; tfe adds one VGPR to vdata."""
  f = inst.fields
  if not inst.operands: return inst.name   # buffer_gl0_inv, buffer_gl1_inv
  def render(op: Operand):
    if op.field == "soffset": return src(f["soffset"], op, inst.literal, salu=True)
    if op.field == "vdata": return vgpr(f["vdata"], op.bits + 32 * f["tfe"])
    if op.field == "srsrc": return sgpr(f["srsrc"] * 4, op.bits)
    if op.kind == "text" and op.type == "off":
      if f["offen"] and f["idxen"]: return vgpr(f["vaddr"], 64)
      if f["offen"] or f["idxen"]: return vgpr(f["vaddr"], 32)
      return "off"
    return None
  ops = _operands(inst, render)
  tail = []
  if inst.enc == "MTBUF" and (t := symbols.buf_format(table(inst.target).symbols, f["format"])): tail.append(t)
  if f["idxen"]: tail.append("idxen")
  if f["offen"]: tail.append("offen")
  if f["offset"]: tail.append(f"offset:{f['offset']}")
  tail += _cpol(inst) if "th" in f else [b for b in ("glc", "slc", "dlc") if f[b]]   # gfx12: th/scope
  if f["tfe"]: tail.append("tfe")
  return _join(inst.name, ops, tail)


def _fmt_exp(inst: Inst) -> str:
  f = inst.fields
  regs = [vgpr(f[f"vsrc{i}"], 32) if f["en"] >> i & 1 else "off" for i in range(4)]
  tail = (["done"] if f["done"] else []) + (["row_en"] if f["row"] else [])
  return _join(f"{inst.name} {symbols.exp_target(table(inst.target).symbols, f['target'])}", [], [", ".join(regs)] + tail)


def _fmt_vinterp(inst: Inst) -> str:
  f = inst.fields
  mods = _mods(inst.mods)
  def render(op: Operand):
    if op.kind == "src":
      i = int(op.field[-1])
      t = src(f[op.field], op, inst.literal, bool(f["opsel"] >> i & 1))
      return with_mods(t, bool(f["neg"] >> i & 1), False, 256 if op.type == "vraw" else f[op.field])
    if op.field == "vdst" and op.bits == 16: return vgpr(f["vdst"], 16, bool(f["opsel"] >> 3 & 1))
    return None
  ops = _operands(inst, render)
  tail = []
  if f["clmp"]: tail.append("clamp")
  if t := _sel_list(mods, f["opsel"]): tail.append(t)
  tail.append(f"wait_exp:{f['waitexp']}")
  return _join(inst.name, ops, tail)


def _fmt_ldsdir(inst: Inst) -> str:
  f = inst.fields
  ops = [vgpr(f["vdst"], 32)]
  if inst.op.endswith("param_load"): ops.append(f"attr{f['attr']}.{'xyzw'[f['attrchan']]}")
  if "waitvsrc" in f: return _join(inst.name, ops, [f"wait_va_vdst:{f['waitvdst']}", f"wait_vm_vsrc:{f['waitvsrc']}"])   # gfx12
  return _join(inst.name, ops, [f"wait_vdst:{f['waitvdst']}"])


_DIMS = ("1D", "2D", "3D", "CUBE", "1D_ARRAY", "2D_ARRAY", "2D_MSAA", "2D_MSAA_ARRAY")


def _fmt_mimg(inst: Inst) -> str:
  """Image ops. VGPR counts follow dmask/d16/tfe and dim/a16; where LLVM has no variant with those counts it prints
  the opcode's fallback variant instead (the tables' MIMG)."""
  f = inst.fields
  tab = table(inst.target)
  name, flags, vset, fall0, fall1, addr0, addr1 = tab.mimg[inst.opcode]
  vd = tab.mimg_vdata(f["dmask"], f["d16"], f["tfe"], "gather" in flags)
  a = (addr1 if f["nsa"] else addr0)[f["a16"] * 8 + f["dim"]]
  if a == "-" or str(vd) not in vset:
    fall = fall1 if f["nsa"] else fall0
    vd, a = int(fall[0]), fall[1]
  na = int(a, 36)
  if f["nsa"]:
    regs = [f["vaddr"]] + [f[f"vaddr{i}"] for i in range(1, 5)]
    items = [vgpr(r, 32) for r in regs[:min(na, 5)]]
    if na > 5: items[4] = vgpr(regs[4], 32 * (na - 4))
    vaddr = f"[{', '.join(items)}]"
  else: vaddr = vgpr(f["vaddr"], 32 * na)
  ops = [vgpr(f["vdata"], 32 * vd), vaddr, sgpr(f["srsrc"] * 4, 256) or "<bad srsrc>"]
  if "ssamp" in flags: ops.append(sgpr(f["ssamp"] * 4, 128) or "<bad ssamp>")
  tail = ([f"dmask:{f['dmask']:#x}"] if f["dmask"] else []) + [f"dim:SQ_RSRC_IMG_{_DIMS[f['dim']]}"]
  tail += [m for m in ("unorm", "glc", "slc", "dlc", "r128", "a16", "tfe", "lwe", "d16") if f[m]]
  return _join(name + (" " if f["nsa"] and "ssamp" in flags else ""), ops, tail)   # LLVM's NSA sampler syntax


_FORMATTERS = {"SOP1": _fmt_sop, "SOP2": _fmt_sop, "SOPC": _fmt_sop, "SOPK": _fmt_sop, "SOPP": _fmt_sopp,
               "SMEM": _fmt_smem, "VOP1": _fmt_vop_e32, "VOP2": _fmt_vop_e32, "VOPC": _fmt_vop_e32,
               "VOP3": _fmt_vop3, "VOP3SD": _fmt_vop3, "VOP3P": _fmt_vop3p, "VOPD": _fmt_vopd, "DS": _fmt_ds,
               "FLAT": _fmt_flat, "GLOBAL": _fmt_flat, "SCRATCH": _fmt_flat, "MUBUF": _fmt_buf, "MTBUF": _fmt_buf,
               "EXP": _fmt_exp, "VINTERP": _fmt_vinterp, "LDSDIR": _fmt_ldsdir, "MIMG": _fmt_mimg}
