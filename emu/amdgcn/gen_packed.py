"""C for VOP3P: packed 16-bit math, dot products, FMA_MIX and WMMA.

Packed ops compute a low and a high 16-bit result; OPSEL picks the half each source feeds to the low
result, OPSEL_HI the half it feeds to the high result; NEG / NEG_HI flip the sign of that half (float ops).
Inline constants (fact 39): f16 ops see the f16 value in the low half and 0 in the high half; integer
packed ops see the 32-bit pattern (a float constant is its raw f32 bits). DOT*_IU take the signedness of
each source from its NEG bit; FMA_MIX reads a source as f16 when its OPSEL_HI bit is set and NEG_HI means abs.
"""
from __future__ import annotations
from emu.amdgcn import operands, targets
from emu.amdgcn.gen_vector import Glue
from emu.amdgcn.valu_table import PK

NSRC = {"v_pk_mad_i16": 3, "v_pk_mad_u16": 3, "v_pk_fma_f16": 3}
DOT = {  # name -> (element bits, signedness taken from NEG)
  "v_dot4_i32_iu8": (8, True), "v_dot4_u32_u8": (8, False), "v_dot8_i32_iu4": (4, True), "v_dot8_u32_u4": (4, False)}
WMMA = {"v_wmma_f32_16x16x16_f16": 0, "v_wmma_f32_16x16x16_bf16": 1, "v_wmma_f16_16x16x16_f16": 2,
        "v_wmma_bf16_16x16x16_bf16": 3, "v_wmma_i32_16x16x16_iu8": 4, "v_wmma_i32_16x16x16_iu4": 5}


def word(g: Glue, code: int, literal: int | None, f16: bool) -> str:
  """W-lane array of a VOP3P source's 32-bit words (fact 39 for constants)."""
  if code >= 256: return f"(&w->v[{code - 256} * W])"
  t = g.temp("u32")
  v = operands.inline_const(code, 16) if f16 else None
  g.lines.append(f"g_bcast32({t}, {f'{v:#x}u' if v is not None else operands.scalar(code, 32, literal)});")
  return t


def half(g: Glue, src: str, hi: int, neg: int) -> str:
  t = g.temp("u32")
  g.lines.append(f"g_half({t}, {src}, {hi}, {0x8000 if neg else 0:#x}u);")
  return t


def packed(inst, f: dict, wave64: bool) -> str:
  op, g = inst.op, Glue(wave64)
  is_f = op.endswith("_f16")
  n = NSRC.get(op, 2)
  words = [word(g, c, inst.literal, is_f) for c in (f["src0"], f["src1"], f["src2"])[:n]]
  opsel_hi = f["opsel_hi"] | f["opsel_hi2"] << 2
  res = []
  for sel, neg in ((f["opsel"], f["neg"]), (opsel_hi, f["neg_hi"])):
    args = [half(g, wd, sel >> i & 1, is_f and neg >> i & 1) for i, wd in enumerate(words)] + ["0"] * (3 - n)
    r = g.temp("u32")
    g.lines.append(f"kh_{op}(w, {r}, {', '.join(args)}, {f['clmp']});")
    res.append(r)
  out = g.temp("u32")
  g.lines += [f"g_pack({out}, {res[0]}, {res[1]});", f"p_32(w, {f['vdst']}, {out}, ex);"]
  return g.text()


def dot(inst, f: dict, wave64: bool) -> str:
  op, g = inst.op, Glue(wave64)
  r = g.temp("u32")
  if op in DOT:
    bits, iu = DOT[op]
    a, b, c = (word(g, code, inst.literal, False) for code in (f["src0"], f["src1"], f["src2"]))
    sa, sb = (f["neg"] & 1, f["neg"] >> 1 & 1) if iu else (0, 0)
    g.lines.append(f"kd_idot(w, {r}, {a}, {b}, {c}, {bits}, {sa}, {sb}, {f['clmp']});")
  else:   # v_dot2_f32_f16 / _bf16: halves of src0/src1 per OPSEL/OPSEL_HI with NEG/NEG_HI; src2 is f32 (NEG_HI = abs)
    bf = op.endswith("bf16")
    opsel_hi = f["opsel_hi"] | f["opsel_hi2"] << 2
    ab = []
    for i, code in enumerate((f["src0"], f["src1"])):
      wd = word(g, code, inst.literal, not bf)
      lo, hi = half(g, wd, f["opsel"] >> i & 1, f["neg"] >> i & 1), half(g, wd, opsel_hi >> i & 1, f["neg_hi"] >> i & 1)
      p = g.temp("u32")
      g.lines.append(f"g_pack({p}, {lo}, {hi});")
      ab.append(p)
    c = word(g, f["src2"], inst.literal, False)
    if f["neg"] >> 2 & 1 or f["neg_hi"] >> 2 & 1:
      q = g.temp("u32")
      g.lines.append(f"g_mod32({q}, {c}, {0x7FFFFFFF if f['neg_hi'] >> 2 & 1 else 0xFFFFFFFF:#x}u, {0x80000000 if f['neg'] >> 2 & 1 else 0:#x}u);")
      c = q
    g.lines.append(f"kd_fdot2(w, {r}, {ab[0]}, {ab[1]}, {c}, {int(bf)}, {f['clmp']});")
  g.lines.append(f"p_32(w, {f['vdst']}, {r}, ex);")
  return g.text()


def mix(inst, f: dict, wave64: bool) -> str:
  op, g = inst.op, Glue(wave64)
  opsel_hi = f["opsel_hi"] | f["opsel_hi2"] << 2
  args = []
  for i, code in enumerate((f["src0"], f["src1"], f["src2"])):
    is16 = opsel_hi >> i & 1
    wd, t = word(g, code, inst.literal, bool(is16)), g.temp("u32")
    if is16: g.lines += [f"g_half({t}, {wd}, {f['opsel'] >> i & 1}, 0);", f"g_h2f({t}, {t}, FI16);"]
    else: g.lines.append(f"g_ftz32({t}, {wd}, FI32);")
    if f["neg_hi"] >> i & 1 or f["neg"] >> i & 1:
      g.lines.append(f"g_mod32({t}, {t}, {0x7FFFFFFF if f['neg_hi'] >> i & 1 else 0xFFFFFFFF:#x}u, {0x80000000 if f['neg'] >> i & 1 else 0:#x}u);")
    args.append(t)
  r = g.temp("u32")
  g.lines.append(f"kd_mix(w, {r}, {', '.join(args)}, {int(op != 'v_fma_mix_f32')}, {f['clmp']});")
  if op == "v_fma_mix_f32": g.lines.append(f"p_32(w, {f['vdst']}, {r}, ex);")
  else: g.lines.append(f"p_16(w, {f['vdst']}, {int(op == 'v_fma_mixhi_f16')}, {r}, ex);")
  return g.text()


def wmma(inst, f: dict) -> str:
  kind = WMMA[inst.op]
  a, b, c = f["src0"], f["src1"], f["src2"]
  if a < 256 or b < 256: raise operands.Unsupported(f"{inst.op}: A and B must be VGPRs")
  if c >= 256: cexpr, cconst = c - 256, "0"
  else:   # fact 42: an inline-constant C is that constant for every accumulator element
    v = operands.inline_const(c, 16 if kind in (2, 3) else 32)
    if v is None: raise operands.Unsupported(f"{inst.op}: C must be a VGPR or an inline constant")
    cexpr, cconst = -1, f"{v:#x}u"
  if targets.get(inst.target).isa == "gfx12":   # its own lane layouts (c/wmma.c); C's neg / abs bits are not modelled
    if f["neg"] & 4 or f["neg_hi"]: raise operands.Unsupported(f"{inst.op}: neg_lo[2] / neg_hi (C's modifiers) are not supported")
    return f"wmma(w, {kind | 8}, {f['vdst']}, {a - 256}, {b - 256}, {cexpr}, {cconst}, 0, {f['neg'] & 3}, {f['clmp']});"
  return f"wmma(w, {kind}, {f['vdst']}, {a - 256}, {b - 256}, {cexpr}, {cconst}, {f['opsel'] >> 2 & 1}, {f['neg'] & 3}, {f['clmp']});"


def gen(inst, wave64: bool) -> str:
  f = inst.fields
  if inst.dpp is not None: raise operands.Unsupported(f"{inst.op} with DPP is not supported by the emulator")
  if inst.op in PK: return packed(inst, f, wave64)
  if inst.op in DOT or inst.op in ("v_dot2_f32_f16", "v_dot2_f32_bf16"): return dot(inst, f, wave64)
  if inst.op.startswith("v_fma_mix"): return mix(inst, f, wave64)
  if inst.op in WMMA: return wmma(inst, f)
  raise operands.Unsupported(f"{inst.op} is not supported by the emulator")
