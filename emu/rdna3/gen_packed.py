"""C for VOP3P: packed 16-bit math, dot products, FMA_MIX and WMMA.

Packed ops compute a low and a high 16-bit result; OPSEL picks the half each source feeds to the low
result, OPSEL_HI the half it feeds to the high result; NEG / NEG_HI flip the sign of that half (float ops).
Inline constants (fact 39): f16 ops see the f16 value in the low half and 0 in the high half; integer
packed ops see the 32-bit pattern (a float constant is its raw f32 bits). DOT*_IU take the signedness of
each source from its NEG bit; FMA_MIX reads a source as f16 when its OPSEL_HI bit is set and NEG_HI means abs.
"""
from __future__ import annotations
from emu.rdna3 import operands as O
from emu.rdna3.gen_vector import lane_loop, subst

# per-half semantics of the packed ops (a, b, c: 16-bit values; CL: clamp bit)
PK = {
  "v_pk_mad_i16": "CL ? sat_i16((i64)(i16)a * (i16)b + (i16)c) : (a * b + c) & 0xffffu",
  "v_pk_mul_lo_u16": "(a * b) & 0xffffu",
  "v_pk_add_i16": "CL ? sat_i16((i64)(i16)a + (i16)b) : (a + b) & 0xffffu",
  "v_pk_sub_i16": "CL ? sat_i16((i64)(i16)a - (i16)b) : (a - b) & 0xffffu",
  "v_pk_lshlrev_b16": "(b << (a & 15)) & 0xffffu",
  "v_pk_lshrrev_b16": "b >> (a & 15)",
  "v_pk_ashrrev_i16": "(u32)((i16)b >> (a & 15)) & 0xffffu",
  "v_pk_max_i16": "(i16)a > (i16)b ? a : b",
  "v_pk_min_i16": "(i16)a < (i16)b ? a : b",
  "v_pk_mad_u16": "CL ? sat_u16((i64)a * b + c) : (a * b + c) & 0xffffu",
  "v_pk_add_u16": "CL ? sat_u16((i64)a + b) : (a + b) & 0xffffu",
  "v_pk_sub_u16": "CL ? sat_u16((i64)a - b) : (a - b) & 0xffffu",
  "v_pk_max_u16": "a > b ? a : b",
  "v_pk_min_u16": "a < b ? a : b",
  "v_pk_fma_f16": "fma16(a, b, c, FI16, FO16)",
  "v_pk_add_f16": "add16(a, b, FI16, FO16)",
  "v_pk_mul_f16": "mul16(a, b, FI16, FO16)",
  "v_pk_min_f16": "minmax16(a, b, FI16, IEEE, 0)",
  "v_pk_max_f16": "minmax16(a, b, FI16, IEEE, 1)",
}
NSRC = {"v_pk_mad_i16": 3, "v_pk_mad_u16": 3, "v_pk_fma_f16": 3}
DOT = {  # name -> (element bits, signedness taken from NEG)
  "v_dot4_i32_iu8": (8, True), "v_dot4_u32_u8": (8, False), "v_dot8_i32_iu4": (4, True), "v_dot8_u32_u4": (4, False)}
WMMA = {"v_wmma_f32_16x16x16_f16": 0, "v_wmma_f32_16x16x16_bf16": 1, "v_wmma_f16_16x16x16_f16": 2,
        "v_wmma_bf16_16x16x16_bf16": 3, "v_wmma_i32_16x16x16_iu8": 4, "v_wmma_i32_16x16x16_iu4": 5}


def word(code: int, literal: int | None, f16: bool) -> str:
  """32-bit value of a VOP3P source (lane expression)."""
  if code >= 256: return f"V({code - 256}, l)"
  if f16 and (v := O.inline_const(code, 16)) is not None: return f"{v:#x}u"
  return O.scalar(code, 32, literal)


def packed(inst, f: dict) -> str:
  op, cl = inst.op, f["clmp"]
  is_f = op.endswith("_f16")
  n = NSRC.get(op, 2)
  codes = [f["src0"], f["src1"], f["src2"]][:n]
  opsel_hi = f["opsel_hi"] | f["opsel_hi2"] << 2
  body = [f"u32 w{i} = {word(c, inst.literal, is_f)};" for i, c in enumerate(codes)]
  halves = []
  for h, sel in (("lo", f["opsel"]), ("hi", opsel_hi)):
    names = {}
    for i in range(n):
      e = f"(w{i} >> 16)" if sel >> i & 1 else f"(w{i} & 0xffffu)"
      neg = (f["neg"] if h == "lo" else f["neg_hi"]) >> i & 1
      if neg and is_f: e = f"({e} ^ 0x8000u)"
      names["abc"[i]] = e
    r = subst(PK[op], CL=str(cl), **names)
    if cl and is_f: r = f"clamp16({r})"
    halves.append(f"(({r}) & 0xffffu)")
  body.append(f"u32 r = {halves[0]} | {halves[1]} << 16;")
  body.append(f"V({f['vdst']}, l) = ((ex >> l) & 1) ? r : V({f['vdst']}, l);")
  return lane_loop([], body)


def dot(inst, f: dict) -> str:
  op, cl = inst.op, f["clmp"]
  codes = [f["src0"], f["src1"], f["src2"]]
  if op in DOT:
    bits, iu = DOT[op]
    sa, sb = (f["neg"] & 1, f["neg"] >> 1 & 1) if iu else (0, 0)
    body = [f"u32 a = {word(codes[0], inst.literal, False)}, b = {word(codes[1], inst.literal, False)}, c = {word(codes[2], inst.literal, False)};",
            f"i64 s = {'(i64)(i32)c' if iu else '(i64)c'};",
            f"for (int k = 0; k < {32 // bits}; k++) {{ i64 x = (a >> ({bits} * k)) & {(1 << bits) - 1}, y = (b >> ({bits} * k)) & {(1 << bits) - 1};",
            f"if ({sa} && x >> {bits - 1}) x -= {1 << bits}; if ({sb} && y >> {bits - 1}) y -= {1 << bits}; s += x * y; }}",
            f"u32 r = {cl} ? {'sat_i32(s)' if iu else 'sat_u32((u64)s)'} : (u32)s;"]
  else:   # v_dot2_f32_f16 / v_dot2_f32_bf16: halves of src0/src1 per OPSEL/OPSEL_HI, NEG/NEG_HI per half
    bf = op.endswith("bf16")
    opsel_hi = f["opsel_hi"] | f["opsel_hi2"] << 2
    body = [f"u32 w{i} = {word(c, inst.literal, not bf and i < 2)};" for i, c in enumerate(codes)]
    for i in range(2):
      lo = f"(w{i} >> 16)" if f["opsel"] >> i & 1 else f"(w{i} & 0xffffu)"
      hi = f"(w{i} >> 16)" if opsel_hi >> i & 1 else f"(w{i} & 0xffffu)"
      if f["neg"] >> i & 1: lo = f"({lo} ^ 0x8000u)"
      if f["neg_hi"] >> i & 1: hi = f"({hi} ^ 0x8000u)"
      body.append(f"u32 {'ab'[i]} = {lo} | {hi} << 16;")
    c = "w2"
    if f["neg_hi"] >> 2 & 1: c = f"({c} & 0x7fffffffu)"
    if f["neg"] >> 2 & 1: c = f"({c} ^ 0x80000000u)"
    fn = "dot2_f32_bf16(a, b, c, FO32)" if bf else "dot2_f32_f16(a, b, c, FI16, FO32)"
    body += [f"u32 c = {c};", f"u32 r = {'clamp32(' + fn + ')' if cl else fn};"]
  body.append(f"V({f['vdst']}, l) = ((ex >> l) & 1) ? r : V({f['vdst']}, l);")
  return lane_loop([], body)


def mix(inst, f: dict) -> str:
  op, cl = inst.op, f["clmp"]
  opsel_hi = f["opsel_hi"] | f["opsel_hi2"] << 2
  body = []
  for i, code in enumerate((f["src0"], f["src1"], f["src2"])):
    is16 = opsel_hi >> i & 1
    v = word(code, inst.literal, bool(is16))
    e = (f"h2f(ftz16(({v}) >> 16, FI16))" if f["opsel"] >> i & 1 else f"h2f(ftz16(({v}) & 0xffffu, FI16))") if is16 else f"ftz32({v}, FI32)"
    if f["neg_hi"] >> i & 1: e = f"({e} & 0x7fffffffu)"
    if f["neg"] >> i & 1: e = f"({e} ^ 0x80000000u)"
    body.append(f"u32 {'abc'[i]} = {e};")
  d = f["vdst"]
  if op == "v_fma_mix_f32":
    body += [f"u32 r = fma32(a, b, c, 0, FO32);{' r = clamp32(r);' if cl else ''}", f"V({d}, l) = ((ex >> l) & 1) ? r : V({d}, l);"]
  else:   # one rounding to f16 from the exact-in-f64 product
    body += ["double x = __builtin_fma((double)F(a), (double)F(b), (double)F(c));",
             "u32 r = x != x ? nan3_16(f2h(a, 0), f2h(b, 0), f2h(c, 0)) : ftz16(d2h(UD(x)), FO16);" + (" r = clamp16(r);" if cl else "")]
    merge = f"(V({d}, l) & 0xffffu) | r << 16" if op == "v_fma_mixhi_f16" else f"(V({d}, l) & 0xffff0000u) | r"
    body.append(f"V({d}, l) = ((ex >> l) & 1) ? {merge} : V({d}, l);")
  return lane_loop([], body)


def wmma(inst, f: dict) -> str:
  kind = WMMA[inst.op]
  a, b, c = f["src0"], f["src1"], f["src2"]
  if a < 256 or b < 256: raise O.Unsupported(f"{inst.op}: A and B must be VGPRs")
  if c >= 256: cexpr, cconst = c - 256, "0"
  else:   # fact 42: an inline-constant C is that constant for every accumulator element
    v = O.inline_const(c, 16 if kind in (2, 3) else 32)
    if v is None: raise O.Unsupported(f"{inst.op}: C must be a VGPR or an inline constant")
    cexpr, cconst = -1, f"{v:#x}u"
  return f"wmma(w, {kind}, {f['vdst']}, {a - 256}, {b - 256}, {cexpr}, {cconst}, {f['opsel'] >> 2 & 1}, {f['neg'] & 3}, {f['clmp']});"


def gen(inst) -> str:
  f = inst.fields
  if inst.dpp is not None: raise O.Unsupported(f"{inst.op} with DPP is not supported by the emulator")
  if inst.op in PK: return packed(inst, f)
  if inst.op in DOT or inst.op in ("v_dot2_f32_f16", "v_dot2_f32_bf16"): return dot(inst, f)
  if inst.op.startswith("v_fma_mix"): return mix(inst, f)
  if inst.op in WMMA: return wmma(inst, f)
  raise O.Unsupported(f"{inst.op} is not supported by the emulator")
