"""Per-lane semantics of the RDNA3 VALU opcodes (VOP1/VOP2/VOP3/VOPC and the VOPD halves) as C expressions.

OPS[name] = (dst type, source types, C expression). Types: f16 f32 f64 (float), i16 u16 b16, i32 u32 b32,
i64 u64 b64; a 16-bit value sits in the low bits of a u32, a 64-bit one is a u64. In the expression
a, b, c are the sources after abs/neg, D is the old destination (accumulating ops), K the literal of
FMAMK/FMAAK, MB the lane's bit of the condition mask (VCC or the VOP3 SGPR operand), CL the clamp bit,
l the lane; FI32/FO32/FI16/FO16/FI64/FO64 are the MODE denormal flags (flush inputs / outputs) and
IEEE the MODE.IEEE bit. Floats follow the RDNA3 ISA guide chapter 6 through the helpers in c/*.h.
Compares produce one bit per lane: CMP[name] = (source type, C condition).
"""
from __future__ import annotations

OPS: dict[str, tuple[str, tuple[str, ...], str]] = {}


def op(name: str, dst: str, srcs: str, expr: str) -> None:
  OPS[name] = (dst, tuple(srcs.split()), expr)


# ---- moves and conversions (VOP1) ----
op("v_mov_b32", "b32", "b32", "a")
op("v_mov_b16", "b16", "b16", "a")
op("v_cvt_i32_f64", "i32", "f64", "cvt_i32_f64(a, FI64)")
op("v_cvt_u32_f64", "u32", "f64", "cvt_u32_f64(a, FI64)")
op("v_cvt_f64_i32", "f64", "i32", "UD((double)(i32)a)")
op("v_cvt_f64_u32", "f64", "u32", "UD((double)a)")
op("v_cvt_f32_i32", "f32", "i32", "cvt_f32_i32(a, FO32)")
op("v_cvt_f32_u32", "f32", "u32", "cvt_f32_u32(a, FO32)")
op("v_cvt_u32_f32", "u32", "f32", "cvt_u32_f32(a, FI32)")
op("v_cvt_i32_f32", "i32", "f32", "cvt_i32_f32(a, FI32)")
op("v_cvt_nearest_i32_f32", "i32", "f32", "cvt_i32_f64v(floor((double)F(ftz32(a, FI32)) + 0.5))")
op("v_cvt_floor_i32_f32", "i32", "f32", "cvt_i32_f64v(floor((double)F(ftz32(a, FI32))))")
op("v_cvt_off_f32_i4", "f32", "b32", "U((float)(i32)sext(a & 15, 4) / 16.0f)")
op("v_cvt_f16_f32", "f16", "f32", "cvt_f16_f32(a, FI32, FO16)")
op("v_cvt_f32_f16", "f32", "f16", "cvt_f32_f16(a, FI16, FO32)")
op("v_cvt_f32_f64", "f32", "f64", "cvt_f32_f64(a, FI64, FO32)")
op("v_cvt_f64_f32", "f64", "f32", "cvt_f64_f32(a, FI32, FO64)")
for k in range(4): op(f"v_cvt_f32_ubyte{k}", "f32", "b32", f"U((float)((a >> {8 * k}) & 0xff))")
op("v_cvt_f16_u16", "f16", "u16", "cvt_f16_u16(a, FO16)")
op("v_cvt_f16_i16", "f16", "i16", "cvt_f16_i16(a, FO16)")
op("v_cvt_u16_f16", "u16", "f16", "cvt_u16_f16(a, FI16)")
op("v_cvt_i16_f16", "i16", "f16", "cvt_i16_f16(a, FI16)")
op("v_cvt_norm_i16_f16", "i16", "f16", "cvt_norm_i16(F(h2f(ftz16(a, FI16))))")
op("v_cvt_norm_u16_f16", "u16", "f16", "cvt_norm_u16(F(h2f(ftz16(a, FI16))))")
op("v_cvt_i32_i16", "i32", "i16", "sext(a, 16)")
op("v_cvt_u32_u16", "u32", "u16", "a")
op("v_sat_pk_u8_i16", "b16", "b32", "sat_pk_u8_i16(a)")
for p, w in (("32", "f32"), ("64", "f64"), ("16", "f16")):
  fi, fo = ("FI32", "FO32") if p == "32" else (f"FI{p}", f"FO{p}")
  for k, r in enumerate(("trunc", "ceil", "rndne", "floor")): op(f"v_{r}_{w}", w, w, f"round{p}(a, {fi}, {k})")
  op(f"v_fract_{w}", w, w, f"fract{p}(a, {fi}, {fo})")
for w in ("exp", "log", "rcp", "rsq", "sqrt", "sin", "cos"):
  op(f"v_{w}_f32", "f32", "f32", f"{w}32(a, FI32, FO32)")
  op(f"v_{w}_f16", "f16", "f16", f"un16(a, FI16, FO16, {w}32)")
op("v_rcp_iflag_f32", "f32", "f32", "rcp32(a, FI32, FO32)")
for w in ("rcp", "rsq", "sqrt"): op(f"v_{w}_f64", "f64", "f64", f"{w}64(a, FI64, FO64)")
op("v_not_b32", "b32", "b32", "~a")
op("v_not_b16", "b16", "b16", "~a & 0xffffu")
op("v_bfrev_b32", "b32", "b32", "brev32(a)")
op("v_clz_i32_u32", "i32", "u32", "clz32(a)")
op("v_ctz_i32_b32", "i32", "b32", "ctz32(a)")
op("v_cls_i32", "i32", "i32", "cls32(a)")
op("v_frexp_exp_i32_f64", "i32", "f64", "frexp_exp64(a, FI64)")
op("v_frexp_mant_f64", "f64", "f64", "frexp_mant64(a, FI64)")
op("v_frexp_exp_i32_f32", "i32", "f32", "frexp_exp32(a, FI32)")
op("v_frexp_mant_f32", "f32", "f32", "frexp_mant32(a, FI32)")
op("v_frexp_exp_i16_f16", "i16", "f16", "frexp_exp16(a, FI16)")
op("v_frexp_mant_f16", "f16", "f16", "frexp_mant16(a, FI16)")

# ---- two-source arithmetic (VOP2 and their VOP3 forms) ----
op("v_cndmask_b32", "b32", "b32 b32", "MB ? b : a")
op("v_cndmask_b16", "b16", "b16 b16", "MB ? b : a")
op("v_add_f32", "f32", "f32 f32", "add32(a, b, FI32, FO32)")
op("v_sub_f32", "f32", "f32 f32", "sub32(a, b, FI32, FO32)")
op("v_subrev_f32", "f32", "f32 f32", "sub32(b, a, FI32, FO32)")
op("v_mul_f32", "f32", "f32 f32", "mul32(a, b, FI32, FO32)")
op("v_mul_dx9_zero_f32", "f32", "f32 f32", "mul32_dx9(a, b, FI32, FO32)")
op("v_fmac_f32", "f32", "f32 f32", "fma32(a, b, D, FI32, FO32)")
op("v_fmac_dx9_zero_f32", "f32", "f32 f32", "fma32_dx9(a, b, D, FI32, FO32)")
op("v_fmamk_f32", "f32", "f32 f32", "fma32(a, K, b, FI32, FO32)")
op("v_fmaak_f32", "f32", "f32 f32", "fma32(a, b, K, FI32, FO32)")
op("v_min_f32", "f32", "f32 f32", "min32(a, b, FI32, IEEE)")
op("v_max_f32", "f32", "f32 f32", "max32(a, b, FI32, IEEE)")
op("v_ldexp_f32", "f32", "f32 i32", "ldexp32(a, (i32)b, FI32, FO32)")
op("v_cvt_pk_rtz_f16_f32", "b32", "f32 f32", "f2h(ftz32(a, FI32), 1) | f2h(ftz32(b, FI32), 1) << 16")
op("v_add_f16", "f16", "f16 f16", "add16(a, b, FI16, FO16)")
op("v_sub_f16", "f16", "f16 f16", "sub16(a, b, FI16, FO16)")
op("v_subrev_f16", "f16", "f16 f16", "sub16(b, a, FI16, FO16)")
op("v_mul_f16", "f16", "f16 f16", "mul16(a, b, FI16, FO16)")
op("v_fmac_f16", "f16", "f16 f16", "fma16(a, b, D, FI16, FO16)")
op("v_fmamk_f16", "f16", "f16 f16", "fma16(a, K & 0xffffu, b, FI16, FO16)")
op("v_fmaak_f16", "f16", "f16 f16", "fma16(a, b, K & 0xffffu, FI16, FO16)")
op("v_max_f16", "f16", "f16 f16", "minmax16(a, b, FI16, IEEE, 1)")
op("v_min_f16", "f16", "f16 f16", "minmax16(a, b, FI16, IEEE, 0)")
op("v_ldexp_f16", "f16", "f16 i16", "ldexp16(a, (i16)b, FI16, FO16)")
op("v_pk_fmac_f16", "b32", "b32 b32", "fma16(a & 0xffffu, b & 0xffffu, D & 0xffffu, FI16, FO16) | fma16(a >> 16, b >> 16, D >> 16, FI16, FO16) << 16")
op("v_dot2acc_f32_f16", "f32", "b32 b32", "dot2_f32_f16(a, b, D, FI16, FO32)")
op("v_dot2acc_f32_bf16", "f32", "b32 b32", "dot2_f32_bf16(a, b, D, FO32)")
op("v_mul_i32_i24", "i32", "i32 i32", "(u32)((i32)sext(a, 24) * (i32)sext(b, 24))")
op("v_mul_hi_i32_i24", "i32", "i32 i32", "(u32)(((i64)(i32)sext(a, 24) * (i32)sext(b, 24)) >> 32)")
op("v_mul_u32_u24", "u32", "u32 u32", "(a & 0xffffffu) * (b & 0xffffffu)")
op("v_mul_hi_u32_u24", "u32", "u32 u32", "(u32)(((u64)(a & 0xffffffu) * (b & 0xffffffu)) >> 32)")
op("v_min_i32", "i32", "i32 i32", "(i32)a < (i32)b ? a : b")
op("v_max_i32", "i32", "i32 i32", "(i32)a > (i32)b ? a : b")
op("v_min_u32", "u32", "u32 u32", "a < b ? a : b")
op("v_max_u32", "u32", "u32 u32", "a > b ? a : b")
op("v_lshlrev_b32", "b32", "u32 b32", "b << (a & 31)")
op("v_lshrrev_b32", "b32", "u32 b32", "b >> (a & 31)")
op("v_ashrrev_i32", "i32", "u32 i32", "(u32)((i32)b >> (a & 31))")
op("v_and_b32", "b32", "b32 b32", "a & b")
op("v_or_b32", "b32", "b32 b32", "a | b")
op("v_xor_b32", "b32", "b32 b32", "a ^ b")
op("v_xnor_b32", "b32", "b32 b32", "~(a ^ b)")
op("v_add_nc_u32", "u32", "u32 u32", "CL ? sat_u32((u64)a + b) : a + b")
op("v_sub_nc_u32", "u32", "u32 u32", "CL ? (a < b ? 0 : a - b) : a - b")
op("v_subrev_nc_u32", "u32", "u32 u32", "CL ? (b < a ? 0 : b - a) : b - a")
op("v_add_nc_i32", "i32", "i32 i32", "CL ? sat_i32((i64)(i32)a + (i32)b) : a + b")
op("v_sub_nc_i32", "i32", "i32 i32", "CL ? sat_i32((i64)(i32)a - (i32)b) : a - b")
op("v_add_nc_u16", "u16", "u16 u16", "CL ? sat_u16((i64)a + b) : (a + b) & 0xffffu")
op("v_sub_nc_u16", "u16", "u16 u16", "CL ? sat_u16((i64)a - b) : (a - b) & 0xffffu")
op("v_add_nc_i16", "i16", "i16 i16", "CL ? sat_i16((i64)(i16)a + (i16)b) : (a + b) & 0xffffu")
op("v_sub_nc_i16", "i16", "i16 i16", "CL ? sat_i16((i64)(i16)a - (i16)b) : (a - b) & 0xffffu")
op("v_mul_lo_u16", "u16", "u16 u16", "(a * b) & 0xffffu")
op("v_and_b16", "b16", "b16 b16", "a & b")
op("v_or_b16", "b16", "b16 b16", "a | b")
op("v_xor_b16", "b16", "b16 b16", "a ^ b")
op("v_lshlrev_b16", "b16", "u16 b16", "(b << (a & 15)) & 0xffffu")
op("v_lshrrev_b16", "b16", "u16 b16", "b >> (a & 15)")
op("v_ashrrev_i16", "i16", "u16 i16", "(u32)((i16)b >> (a & 15)) & 0xffffu")
op("v_max_u16", "u16", "u16 u16", "a > b ? a : b")
op("v_min_u16", "u16", "u16 u16", "a < b ? a : b")
op("v_max_i16", "i16", "i16 i16", "(i16)a > (i16)b ? a : b")
op("v_min_i16", "i16", "i16 i16", "(i16)a < (i16)b ? a : b")
op("v_lshlrev_b64", "b64", "u32 b64", "b << (a & 63)")
op("v_lshrrev_b64", "b64", "u32 b64", "b >> (a & 63)")
op("v_ashrrev_i64", "i64", "u32 i64", "(u64)((i64)b >> (a & 63))")
op("v_add_f64", "f64", "f64 f64", "add64(a, b, FI64, FO64)")
op("v_mul_f64", "f64", "f64 f64", "mul64(a, b, FI64, FO64)")
op("v_min_f64", "f64", "f64 f64", "minmax64(a, b, FI64, IEEE, 0)")
op("v_max_f64", "f64", "f64 f64", "minmax64(a, b, FI64, IEEE, 1)")
op("v_ldexp_f64", "f64", "f64 i32", "ldexp64(a, (i32)b, FI64, FO64)")
op("v_trig_preop_f64", "f64", "f64 u32", "trig_preop64(ftz64(a, FI64), b)")
op("v_mul_lo_u32", "u32", "u32 u32", "a * b")
op("v_mul_hi_u32", "u32", "u32 u32", "(u32)(((u64)a * b) >> 32)")
op("v_mul_hi_i32", "i32", "i32 i32", "(u32)(((i64)(i32)a * (i32)b) >> 32)")
op("v_bfm_b32", "b32", "u32 u32", "((1u << (a & 31)) - 1) << (b & 31)")
op("v_bcnt_u32_b32", "u32", "b32 u32", "(u32)__builtin_popcount(a) + b")
op("v_mbcnt_lo_u32_b32", "u32", "b32 u32", "(u32)__builtin_popcount(a & (l >= 32 ? 0xffffffffu : (1u << l) - 1)) + b")
op("v_mbcnt_hi_u32_b32", "u32", "b32 u32", "(u32)__builtin_popcount(a & (l < 32 ? 0 : (1u << (l - 32)) - 1)) + b")
op("v_cvt_pk_norm_i16_f32", "b32", "f32 f32", "cvt_norm_i16(F(ftz32(a, FI32))) | cvt_norm_i16(F(ftz32(b, FI32))) << 16")
op("v_cvt_pk_norm_u16_f32", "b32", "f32 f32", "cvt_norm_u16(F(ftz32(a, FI32))) | cvt_norm_u16(F(ftz32(b, FI32))) << 16")
op("v_cvt_pk_norm_i16_f16", "b32", "f16 f16", "cvt_norm_i16(F(h2f(ftz16(a, FI16)))) | cvt_norm_i16(F(h2f(ftz16(b, FI16)))) << 16")
op("v_cvt_pk_norm_u16_f16", "b32", "f16 f16", "cvt_norm_u16(F(h2f(ftz16(a, FI16)))) | cvt_norm_u16(F(h2f(ftz16(b, FI16)))) << 16")
op("v_cvt_pk_i16_f32", "b32", "f32 f32", "cvt_i16_f32(a, FI32) | cvt_i16_f32(b, FI32) << 16")
op("v_cvt_pk_u16_f32", "b32", "f32 f32", "cvt_u16_f32(a, FI32) | cvt_u16_f32(b, FI32) << 16")
op("v_qsad_pk_u16_u8", "b64", "b64 u32 b64", "qsad_pk(a, b, c, 0)")
op("v_mqsad_pk_u16_u8", "b64", "b64 u32 b64", "qsad_pk(a, b, c, 1)")
op("v_cvt_pk_u16_u32", "b32", "u32 u32", "sat_u16(a) | sat_u16(b) << 16")
op("v_cvt_pk_i16_i32", "b32", "i32 i32", "sat_i16((i32)a) | sat_i16((i32)b) << 16")
op("v_pack_b32_f16", "b32", "f16 f16", "(a & 0xffffu) | b << 16")

# ---- three-source (VOP3 only) ----
op("v_fma_f32", "f32", "f32 f32 f32", "fma32(a, b, c, FI32, FO32)")
op("v_fma_dx9_zero_f32", "f32", "f32 f32 f32", "fma32_dx9(a, b, c, FI32, FO32)")
op("v_fma_f64", "f64", "f64 f64 f64", "fma64(a, b, c, FI64, FO64)")
op("v_fma_f16", "f16", "f16 f16 f16", "fma16(a, b, c, FI16, FO16)")
op("v_mullit_f32", "f32", "f32 f32 f32", "mullit32(a, b, c, FI32, FO32)")
op("v_mad_i32_i24", "i32", "i32 i32 i32",
   "CL ? sat_i32((i64)(i32)sext(a, 24) * (i32)sext(b, 24) + (i32)c) : (u32)((i32)sext(a, 24) * (i32)sext(b, 24) + (i32)c)")
op("v_mad_u32_u24", "u32", "u32 u32 u32", "CL ? sat_u32((u64)(a & 0xffffffu) * (b & 0xffffffu) + c) : (a & 0xffffffu) * (b & 0xffffffu) + c")
op("v_mad_u16", "u16", "u16 u16 u16", "CL ? sat_u16((i64)a * b + c) : (a * b + c) & 0xffffu")
op("v_mad_i16", "i16", "i16 i16 i16", "CL ? sat_i16((i64)(i16)a * (i16)b + (i16)c) : (u32)((i16)a * (i16)b + (i16)c) & 0xffffu")
op("v_mad_u32_u16", "u32", "u16 u16 u32", "CL ? sat_u32((u64)a * b + c) : a * b + c")
op("v_mad_i32_i16", "i32", "i16 i16 i32", "CL ? sat_i32((i64)(i16)a * (i16)b + (i32)c) : (u32)((i32)(i16)a * (i16)b + (i32)c)")
op("v_bfe_u32", "u32", "u32 u32 u32", "bfe_u32(a, b, c)")
op("v_bfe_i32", "i32", "i32 u32 u32", "bfe_i32(a, b, c)")
op("v_bfi_b32", "b32", "b32 b32 b32", "(a & b) | (~a & c)")
op("v_lerp_u8", "u32", "b32 b32 b32", "lerp_u8(a, b, c)")
op("v_alignbit_b32", "b32", "b32 b32 u32", "alignbit(a, b, c)")
op("v_alignbyte_b32", "b32", "b32 b32 u32", "alignbyte(a, b, c)")
op("v_perm_b32", "b32", "b32 b32 b32", "perm_b32(a, b, c)")
op("v_xor3_b32", "b32", "b32 b32 b32", "a ^ b ^ c")
op("v_or3_b32", "b32", "b32 b32 b32", "a | b | c")
op("v_and_or_b32", "b32", "b32 b32 b32", "(a & b) | c")
op("v_lshl_or_b32", "b32", "b32 u32 b32", "(a << (b & 31)) | c")
op("v_xad_u32", "u32", "u32 u32 u32", "(a ^ b) + c")
op("v_lshl_add_u32", "u32", "u32 u32 u32", "(a << (b & 31)) + c")
op("v_add_lshl_u32", "u32", "u32 u32 u32", "(a + b) << (c & 31)")
op("v_add3_u32", "u32", "u32 u32 u32", "a + b + c")
op("v_sad_u8", "u32", "b32 b32 u32", "sad_u8(a, b, c)")
op("v_sad_hi_u8", "u32", "b32 b32 u32", "(sad_u8(a, b, 0) << 16) + c")
op("v_sad_u16", "u32", "b32 b32 u32", "sad_u16(a, b, c)")
op("v_sad_u32", "u32", "u32 u32 u32", "absdiff8(a, b) + c")
op("v_msad_u8", "u32", "b32 b32 u32", "msad_u8(a, b, c)")
op("v_cvt_pk_u8_f32", "b32", "f32 u32 b32", "cvt_pk_u8_f32(a, b, c, FI32)")
op("v_div_fixup_f32", "f32", "f32 f32 f32", "div_fixup32(a, b, c, FI32, FO32)")
op("v_div_fixup_f64", "f64", "f64 f64 f64", "div_fixup64(a, b, c, FI64, FO64)")
op("v_div_fixup_f16", "f16", "f16 f16 f16", "div_fixup16(a, b, c, FI16, FO16)")
op("v_div_fmas_f32", "f32", "f32 f32 f32", "div_fmas32(a, b, c, VB, FI32, FO32)")
op("v_div_fmas_f64", "f64", "f64 f64 f64", "div_fmas64(a, b, c, VB, FI64, FO64)")
op("v_cubeid_f32", "f32", "f32 f32 f32", "cubeid32(a, b, c)")
op("v_cubesc_f32", "f32", "f32 f32 f32", "cubesc32(a, b, c)")
op("v_cubetc_f32", "f32", "f32 f32 f32", "cubetc32(a, b, c)")
op("v_cubema_f32", "f32", "f32 f32 f32", "cubema32(a, b, c)")
op("v_dot2_f16_f16", "f16", "b32 b32 f16", "dot2_f16_f16(a, b, c, FI16, FO16)")
op("v_dot2_bf16_bf16", "b16", "b32 b32 b16", "dot2_bf16_bf16(a, b, c)")
for w, p, fl in (("f32", "32", "FI32"), ("f16", "16", "FI16")):
  mn = (lambda x, y: f"min32({x}, {y}, {fl}, IEEE)") if p == "32" else (lambda x, y: f"minmax16({x}, {y}, {fl}, IEEE, 0)")
  mx = (lambda x, y: f"max32({x}, {y}, {fl}, IEEE)") if p == "32" else (lambda x, y: f"minmax16({x}, {y}, {fl}, IEEE, 1)")
  op(f"v_min3_{w}", w, f"{w} {w} {w}", mn(mn("a", "b"), "c"))
  op(f"v_max3_{w}", w, f"{w} {w} {w}", mx(mx("a", "b"), "c"))
  op(f"v_med3_{w}", w, f"{w} {w} {w}", f"med3_{p}(a, b, c, {fl}, IEEE)")
  op(f"v_maxmin_{w}", w, f"{w} {w} {w}", mn(mx("a", "b"), "c"))
  op(f"v_minmax_{w}", w, f"{w} {w} {w}", mx(mn("a", "b"), "c"))
for t, ct in (("i32", "i32"), ("u32", "u32"), ("i16", "i16"), ("u16", "u16")):
  mn, mx = (lambda x, y: f"(({ct}){x} < ({ct}){y} ? {x} : {y})"), (lambda x, y: f"(({ct}){x} > ({ct}){y} ? {x} : {y})")
  op(f"v_min3_{t}", t, f"{t} {t} {t}", mn(mn("a", "b"), "c"))
  op(f"v_max3_{t}", t, f"{t} {t} {t}", mx(mx("a", "b"), "c"))
  op(f"v_med3_{t}", t, f"{t} {t} {t}", f"(med3_i32((i32)({ct})a, (i32)({ct})b, (i32)({ct})c) & {'0xffffu' if '16' in t else '0xffffffffu'})"
     if t[0] == "i" else "med3_u32(a, b, c)")
  if "32" in t:
    op(f"v_maxmin_{t}", t, f"{t} {t} {t}", mn(mx("a", "b"), "c"))
    op(f"v_minmax_{t}", t, f"{t} {t} {t}", mx(mn("a", "b"), "c"))

# ---- compares (VOPC and VOP3): C statements that set `cond` for one lane ----
CMP: dict[str, tuple[str, str]] = {}
FCOND = {"f": "0", "lt": "x < y", "eq": "x == y", "le": "x <= y", "gt": "x > y", "lg": "(x < y || x > y)", "ge": "x >= y",
         "o": "(x == x && y == y)", "u": "(x != x || y != y)", "nge": "!(x >= y)", "nlg": "!(x < y || x > y)", "ngt": "!(x > y)",
         "nle": "!(x <= y)", "neq": "!(x == y)", "nlt": "!(x < y)", "t": "1"}
ICOND = {"f": "0", "lt": "x < y", "eq": "x == y", "le": "x <= y", "gt": "x > y", "ne": "x != y", "ge": "x >= y", "t": "1"}
FLOAD = {"f16": "float x = F(h2f(ftz16(a, FI16))), y = F(h2f(ftz16(b, FI16)));",
         "f32": "float x = F(ftz32(a, FI32)), y = F(ftz32(b, FI32));",
         "f64": "double x = D(ftz64(a, FI64)), y = D(ftz64(b, FI64));"}
for t, load in FLOAD.items():
  for c, e in FCOND.items(): CMP[f"v_cmp_{c}_{t}"] = (t, f"{{ {load} cond = {e}; }}")
  CMP[f"v_cmp_class_{t}"] = (t, f"cond = (class{t[1:]}(a) & b) != 0;")
for t in ("i16", "u16", "i32", "u32", "i64", "u64"):
  for c, e in ICOND.items(): CMP[f"v_cmp_{c}_{t}"] = (t, f"{{ {t} x = ({t})a, y = ({t})b; cond = {e}; }}")


def cmp_srcs(name: str) -> tuple[str, str]:
  """Source types of a compare: class compares take a u32 mask as the second operand."""
  t = CMP[name][0]
  return (t, "u32") if "_class_" in name else (t, t)


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
