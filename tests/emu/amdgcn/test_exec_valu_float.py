"""Vector float semantics (f16 / f32 / f64) against hand-computed bit patterns, one case per lane.
Facts: RDNA3 ISA guide chapter 6 and MODE (default compute mode: f32 denormals flushed, f16/f64 kept)."""
import math
import numpy as np
import pytest
from exec_helpers import run_wave, f32, f64, f16

M32 = 0xFFFFFFFF
INF, NINF, QNAN, NZERO = 0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000
DEN, NDEN = 0x00000001, 0x80000001


def vop(body: str, a=(), b=(), c=(), out=(3,), **kw):
  return run_wave(body, v={0: list(a), 1: list(b), 2: list(c)}, vout=out, sout=[10, 11], **kw)


def col(r, reg, n): return [int(x) for x in r.v[reg][:n]]


def test_f32_denormals_flushed_f16_f64_kept():         # fact 18
  r = run_wave("v_mul_f32 v3, v0, v1\nv_cvt_f32_f16 v4, v2\nv_add_f32 v5, v0, 0\nv_frexp_exp_i32_f64 v6, v[8:9]\nv_mul_f32 v7, v0, 0.5",
               v={0: [f32(2.0), DEN, f32(2.0 ** -126)], 1: [DEN, f32(1.0)], 2: [0x0001, 0x8001], 8: [1], 9: [0]}, vout=(3, 4, 5, 6, 7))
  assert col(r, 3, 2) == [0, 0]                          # 2.0 * denormal -> 0
  assert col(r, 4, 2) == [f32(2.0 ** -24), f32(-2.0 ** -24)]
  assert col(r, 5, 2)[1] == 0                            # a denormal input is flushed
  assert col(r, 6, 1) == [(-1073) & M32]                 # f64 minimum denormal
  assert col(r, 7, 3)[2] == 0                            # 2^-127 result is flushed to +0


def test_min_max_flush_denormals_to_signed_zero():     # fact 19
  r = vop("v_min_f32 v3, v0, v1\nv_max_f32 v4, v0, v1\nv_med3_f32 v5, v0, 1.0, 2.0\nv_min_f32_e64 v6, v0, v1",
          a=[DEN, NDEN, NDEN], b=[f32(1.0), f32(-1.0), f32(3.0)], out=(3, 4, 5, 6))
  assert col(r, 3, 1) == [0] and col(r, 4, 2)[1] == NZERO and col(r, 5, 3)[2] == f32(1.0) and col(r, 6, 1) == [0]


def test_min_max_nan_and_signed_zero():                # fact 20
  r = vop("v_min_f32 v3, v0, v1\nv_max_f32 v4, v0, v1\nv_med3_f32 v5, v0, v1, v2",
          a=[QNAN, f32(2.0), 0, NZERO], b=[f32(2.0), QNAN, NZERO, 0], c=[f32(5.0), f32(-1.0), f32(1.0), f32(1.0)], out=(3, 4, 5))
  assert col(r, 3, 4) == [f32(2.0), f32(2.0), NZERO, NZERO]
  assert col(r, 4, 4) == [f32(2.0), f32(2.0), 0, 0]
  assert col(r, 5, 2) == [f32(2.0), f32(-1.0)]           # any NaN: med3 = min3


def test_nan_result_is_first_nan_operand_quieted():    # fact 21
  r = vop("v_mul_f32 v3, v0, v1\nv_add_f32 v4, v0, v1\nv_fma_f32 v5, v1, v0, v2",
          a=[0x7F800001, 0xFF9F1800, f32(1.0), 0x7F800002], b=[f32(3.0), 0x7F811111, 0xFFC00123, 0x7FC00004], c=[0, 0, 0, 0x7F800005],
          out=(3, 4, 5))
  assert col(r, 3, 4) == [0x7FC00001, 0xFFDF1800, 0xFFC00123, 0x7FC00002]
  assert col(r, 4, 3) == [0x7FC00001, 0xFFDF1800, 0xFFC00123]
  assert col(r, 5, 4) == [0x7FC00001, 0x7FC11111, 0xFFC00123, 0x7FC00004]
  r = vop("v_add_f32 v3, v0, v1", a=[INF], b=[NINF])
  assert col(r, 3, 1) == [QNAN]                          # invalid operation: canonical quiet NaN



def test_f16_nan_result_is_first_nan_operand_quieted():   # fact 21 in f16: quiet bit 0x200, sign and payload kept
  h = lambda reg, n: [x & 0xFFFF for x in col(r, reg, n)]
  a = [0x7C01, f16(1.0), 0x7E10, 0x7C00, 0xFD55, f16(2.0)]
  b = [f16(3.0), 0xFD55, 0x7C02, 0xFC00, 0x7E01, f16(-1.0)]
  c = [0, 0, 0, 0, 0x7C03, 0xFC07]
  r = vop("v_add_f16 v3, v0, v1\nv_mul_f16 v4, v1, v0\nv_fma_f16 v5, v0, v1, v2\nv_fma_f16 v6, v2, v1, v0", a=a, b=b, c=c, out=(3, 4, 5, 6))
  assert h(3, 6) == [0x7E01, 0xFF55, 0x7E10, 0x7E00, 0xFF55, f16(1.0)]      # src0 before src1 even if src1 is the sNaN
  assert h(4, 6)[:3] == [0x7E01, 0xFF55, 0x7E02]                            # operands swapped: the other NaN wins
  assert h(5, 6)[4:] == [0xFF55, 0xFE07] and h(6, 6)[4:] == [0x7E03, 0xFE07]   # fma: src0, src1, src2 order
  r = run_wave("v_pk_add_f16 v3, v0, v1\nv_pk_fma_f16 v4, v1, v0, v2", v={0: [0x3C007C01], 1: [0x7D003C00], 2: [0xFC05FC06]}, vout=(3, 4))
  assert col(r, 3, 1) == [0x7F007E01] and col(r, 4, 1) == [0x7F007E01]     # per half: lo from v0, hi from v1


@pytest.mark.parametrize("ieee", [1, 0])
def test_min_max_signaling_nan_per_ieee_mode(ieee):      # RDNA3.5 ISA guide, V_MIN_F32 / V_MAX_F32 pseudocode (16.7)
  # IEEE mode (the compute default): an sNaN operand gives that NaN quieted (src0 checked first), a qNaN the other
  # operand; IEEE off: any NaN gives the other operand, two NaNs src0 as it is
  a = [0x7F800001, f32(1.0), 0x7FC00002, 0x7F800003, 0xFF800004]
  b = [f32(1.0), 0x7F800005, 0x7F800006, 0x7FC00007, 0xFFC00008]
  setmode = "" if ieee else "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 9, 1), 0\n"
  r = vop(setmode + "v_min_f32 v3, v0, v1\nv_max_f32 v4, v0, v1", a=a, b=b, out=(3, 4))
  if ieee: want = [0x7FC00001, 0x7FC00005, 0x7FC00006, 0x7FC00003, 0xFFC00004]
  else: want = [f32(1.0), f32(1.0), 0x7FC00002, 0x7F800003, 0xFF800004]
  assert col(r, 3, 5) == want and col(r, 4, 5) == want


def test_min_max_signaling_nan_f64_f16():
  snan64, qnan64, snan16 = 0x7FF0000000000001, 0x7FF8000000000002, 0x7C01
  lo, hi = lambda xs: [x & M32 for x in xs], lambda xs: [x >> 32 for x in xs]
  a, b = [snan64, f64(2.0), qnan64], [f64(1.0), snan64, f64(3.0)]
  r = run_wave("v_min_f64 v[4:5], v[0:1], v[2:3]\nv_max_f16 v6, v7, v8\nv_min_f16 v9, v8, v7",
               v={0: lo(a), 1: hi(a), 2: lo(b), 3: hi(b), 7: [snan16, f16(1.0), 0x7E04], 8: [f16(1.0), 0xFC02, f16(5.0)]}, vout=(4, 5, 6, 9))
  assert [int(x) for x in r.u64(4)[:3]] == [0x7FF8000000000001, 0x7FF8000000000001, f64(3.0)]
  assert [x & 0xFFFF for x in col(r, 6, 3)] == [0x7E01, 0xFE02, f16(5.0)] and [x & 0xFFFF for x in col(r, 9, 3)] == [0x7E01, 0xFE02, f16(5.0)]

def test_abs_neg_are_sign_bit_operations_on_nans():    # fact 22
  r = vop("v_add_f32_e64 v3, -|v0|, 0\nv_mul_f32_e64 v4, -v0, 1.0\nv_max_f32_e64 v5, |v0|, |v0|", a=[QNAN, NZERO, f32(-2.0)], out=(3, 4, 5))
  assert col(r, 3, 3) == [0xFFC00000, 0, f32(-2.0)]   # -|-0| + 0 = +0
  assert col(r, 4, 3) == [0xFFC00000, 0, f32(2.0)]
  assert col(r, 5, 3) == [QNAN, 0, f32(2.0)]


def test_float_clamp():                                # fact 23
  r = vop("v_mul_f32_e64 v3, v0, 1.0 clamp", a=[f32(2.0), f32(-0.5), NZERO, QNAN, f32(0.25)])
  assert col(r, 3, 5) == [f32(1.0), 0, 0, 0, f32(0.25)]


def test_omod_ignored():                               # fact 24
  r = vop("v_add_f32_e64 v3, v0, v1 mul:2\nv_add_f32_e64 v4, v0, v1 div:2", a=[f32(3.0)], b=[f32(1.0)], out=(3, 4))
  assert col(r, 3, 1) == [f32(4.0)] and col(r, 4, 1) == [f32(4.0)]


def test_float_to_int_truncates_and_saturates():       # fact 25
  vals = [QNAN, INF, NINF, f32(3e9), f32(-3e9), f32(-1.7), f32(2.9), f32(-0.5)]
  r = run_wave("v_cvt_i32_f32 v3, v0\nv_cvt_u32_f32 v4, v0\nv_cvt_i32_f64 v5, v[6:7]",
               v={0: vals, 6: [0, 0, 0, 0], 7: [0x7FF80000, 0x7FF00000, 0x41F00000, 0xC1F00000]}, vout=(3, 4, 5))
  assert col(r, 3, 8) == [0, 0x7FFFFFFF, 0x80000000, 0x7FFFFFFF, 0x80000000, M32, 2, 0]
  assert col(r, 4, 8) == [0, M32, 0, 3000000000, 0, 0, 2, 0]
  assert col(r, 5, 4) == [0, 0x7FFFFFFF, 0x7FFFFFFF, 0x80000000]   # NaN, +inf, 2^32, -2^32


def test_frexp():                                      # fact 26
  vals = [INF, QNAN, DEN, NZERO, f32(8.0), f32(-0.75)]
  r = vop("v_frexp_exp_i32_f32 v3, v0\nv_frexp_mant_f32 v4, v0", a=vals, out=(3, 4))
  assert col(r, 3, 6) == [0, 0, 0, 0, 4, 0]
  assert col(r, 4, 6) == [INF, QNAN, 0, NZERO, f32(0.5), f32(-0.75)]
  r = run_wave("v_frexp_exp_i32_f64 v3, v[0:1]\nv_frexp_mant_f64 v[4:5], v[0:1]", v={0: [0, 0, 1], 1: [0x7FF00000, 0x40200000, 0]},
               vout=(3, 4, 5))
  assert col(r, 3, 3) == [0, 4, (-1073) & M32]
  assert (col(r, 4, 3)[1], col(r, 5, 3)[1]) == (0, 0x3FE00000) and col(r, 5, 3)[2] == 0x3FE00000


def test_ldexp():                                      # fact 27
  r = vop("v_ldexp_f32 v3, v0, v1", a=[0, NZERO, INF, QNAN, DEN, f32(1.5), f32(1.0)], b=[5, 5, (-1000) & M32, 3, 100, 2, (-127) & M32])
  assert col(r, 3, 7) == [0, NZERO, INF, QNAN, 0, f32(6.0), 0]


def test_cmp_class_masks_see_raw_denormals():          # fact 28
  vals = [0x7F800001, QNAN, NINF, f32(-1.0), NDEN, NZERO, 0, DEN, f32(1.0), INF]
  body = "\n".join(f"v_cmp_class_f32_e64 s{20 + k}, v0, {1 << k:#x}" for k in range(10))
  r = run_wave(body, v={0: vals}, sout=list(range(20, 30)), exec_mask=0x3FF)
  for k in range(10): assert r.s[20 + k] == 1 << k, f"class bit {k}: {r.s[20 + k]:#x}"
  r = run_wave("\n".join(f"v_cmp_class_f16_e64 s{20 + k}, v0, {1 << k:#x}" for k in range(10)),
               v={0: [0x7C01, 0x7E00, 0xFC00, 0xBC00, 0x8001, 0x8000, 0, 1, 0x3C00, 0x7C00]}, sout=list(range(20, 30)), exec_mask=0x3FF)
  for k in range(10): assert r.s[20 + k] == 1 << k, f"f16 class bit {k}: {r.s[20 + k]:#x}"


def test_ordered_and_unordered_compares():             # fact 29
  r = run_wave("v_cmp_lg_f32_e64 s20, v0, v1\nv_cmp_neq_f32_e64 s21, v0, v1\nv_cmp_nge_f32_e64 s22, v0, v1\n"
               "v_cmp_o_f32_e64 s23, v0, v1\nv_cmp_u_f32_e64 s24, v0, v1\nv_cmp_lt_f32_e64 s25, v0, v1",
               v={0: [QNAN, f32(1.0), f32(1.0), 0], 1: [f32(1.0), f32(2.0), f32(1.0), NZERO]}, sout=[20, 21, 22, 23, 24, 25], exec_mask=0xF)
  assert (r.s[20], r.s[21], r.s[22], r.s[23], r.s[24], r.s[25]) == (0b0010, 0b0011, 0b0011, 0b1110, 0b0001, 0b0010)


def test_div_scale_f32():                              # fact 32, read as in c/valu.h (div_scale32)
  # per lane (numerator, denominator); v3 = div_scale(num, den, num) -> s10, v4 = div_scale(den, den, num) -> s11
  # hw: measured on gfx1100 (tinygrad test/amd/hw/test_vop3.py TestDivScale); seq: what keeps LLVM's division
  # sequence correctly rounded (test_exec_kernels.py::test_division_is_correctly_rounded)
  one, mx = f32(1.0), 0x7F7FFFFF
  cases = [(0, one, QNAN, QNAN, 1),                                     # hw zero_numer
           (one, 0, QNAN, QNAN, 1),                                     # hw zero_denom
           (one, DEN, QNAN, QNAN, 1),                                   # hw denorm_denom (flushed: a zero)
           (mx, one, mx, f32(2.0 ** 64), 1),                            # hw large_exp_diff: only the denominator
           (f32(2.0 ** -126), one, f32(2.0 ** -62), one, 1),            # hw tiny_numer: exponent test -126, numerator only
           (one, f32(2.0 ** 127), one, f32(2.0 ** 63), 1),              # hw result_would_be_denorm; seq: 1/den denormal
           (f32(2.0 ** -100), f32(2.0 ** 30), f32(2.0 ** -36), f32(2.0 ** 30), 1),   # denormal quotient
           (f32(2.0 ** -110), f32(3.0), f32(2.0 ** -46), f32(3.0 * 2.0 ** 64), 0),   # seq: tiny numerator, both scaled
           (f32(960.0), f32(2.0 ** 127), f32(960.0 * 2.0 ** -64), f32(2.0 ** 63), 0), # seq: 1/den denormal, both scaled
           (f32(2.0), f32(4.0), f32(2.0), f32(4.0), 0)]                # hw vcc_zero / preserves_input
  num, den, want_n, want_d, vcc = zip(*cases)
  r = run_wave("v_div_scale_f32 v3, vcc_lo, v0, v1, v0\ns_mov_b32 s10, vcc_lo\nv_div_scale_f32 v4, vcc_lo, v1, v1, v0\ns_mov_b32 s11, vcc_lo",
               v={0: num, 1: den}, vout=(3, 4), sout=[10, 11], exec_mask=(1 << len(cases)) - 1)
  assert col(r, 3, len(cases)) == list(want_n) and col(r, 4, len(cases)) == list(want_d)
  assert r.s[10] == r.s[11] == sum(v << i for i, v in enumerate(vcc))


def test_div_scale_f64():                              # fact 32 in f64: 2^128, exponent tests -1022 / 53
  one, mx = f64(1.0), 0x7FEFFFFFFFFFFFFF
  cases = [(0, one, 0x7FF8000000000000, 0x7FF8000000000000, 1), (mx, one, mx, f64(2.0 ** 128), 1),
           (f64(2.0 ** -1022), one, f64(2.0 ** -894), one, 1), (one, f64(2.0 ** 1023), one, f64(2.0 ** 895), 1),
           (f64(2.0 ** -1000), f64(3.0), f64(2.0 ** -872), f64(3.0 * 2.0 ** 128), 0),
           (f64(2.0 ** 100), f64(2.0 ** 1023), f64(2.0 ** -28), f64(2.0 ** 895), 0), (f64(2.0), f64(4.0), f64(2.0), f64(4.0), 0)]
  num, den, want_n, want_d, vcc = zip(*cases)
  lo, hi = lambda xs: [x & M32 for x in xs], lambda xs: [x >> 32 for x in xs]
  r = run_wave("v_div_scale_f64 v[4:5], vcc_lo, v[0:1], v[2:3], v[0:1]\ns_mov_b32 s10, vcc_lo\n"
               "v_div_scale_f64 v[6:7], vcc_lo, v[2:3], v[2:3], v[0:1]\ns_mov_b32 s11, vcc_lo",
               v={0: lo(num), 1: hi(num), 2: lo(den), 3: hi(den)}, vout=(4, 5, 6, 7), sout=[10, 11], exec_mask=(1 << len(cases)) - 1)
  n = len(cases)
  assert [int(x) for x in r.u64(4)[:n]] == list(want_n) and [int(x) for x in r.u64(6)[:n]] == list(want_d)
  assert r.s[10] == r.s[11] == sum(v << i for i, v in enumerate(vcc))


def test_div_fmas_rounds_a_denormal_result_once():
  # the scaled fma is rounded once: (a*b + c) * 2^-64 lies just below the midpoint of two f32 denormals, while
  # a*b + c rounded to f32 first would land on it (and round to even); f64 likewise with 2^-128
  c32, c64 = f32(2.0 ** -70 + 3 * 2.0 ** -86), f64(2.0 ** -920 + 3 * 2.0 ** -947)
  r = run_wave("s_denorm_mode 15\ns_mov_b32 vcc_lo, 1\nv_div_fmas_f32 v3, v0, v1, v2\nv_div_fmas_f64 v[4:5], v[6:7], v[8:9], v[10:11]",
               v={0: [f32(-2.0 ** -50)], 1: [f32(2.0 ** -50)], 2: [c32], 6: [0], 7: [f64(-2.0 ** -490) >> 32], 8: [0],
                  9: [f64(2.0 ** -490) >> 32], 10: [c64 & M32], 11: [c64 >> 32]}, vout=(3, 4, 5))
  assert col(r, 3, 1) == [0x8001]                        # 2^-134 + 2^-149 (double rounding: + 2^-148)
  assert int(r.u64(4)[0]) == 0x4000001                   # 2^-1048 + 2^-1074


def test_div_scale_f64_literal_is_the_high_half():    # RDNA3 ISA guide: an F64 operand's literal is its high 32 bits
  # clang emits these for x / 7.0: the denominator 7.0 (0x401C000000000000) as the literal 0x401c0000
  r = run_wave("v_div_scale_f64 v[4:5], vcc_lo, v[0:1], 0x401c0000, v[0:1]\ns_mov_b32 s10, vcc_lo\n"
               "v_div_scale_f64 v[6:7], vcc_lo, 0x401c0000, 0x401c0000, v[0:1]",
               v={0: [0], 1: [f64(3.0) >> 32]}, vout=(4, 5, 6, 7), sout=[10], exec_mask=0x1)
  assert (col(r, 4, 1), col(r, 5, 1), r.s[10] & 1) == ([0], [f64(3.0) >> 32], 0)   # 3 / 7: no scaling needed
  assert (col(r, 6, 1), col(r, 7, 1)) == ([0], [f64(7.0) >> 32])


def test_div_fmas_scales_by_vcc():                     # fact 33
  r = run_wave("s_mov_b32 vcc_lo, 0x3\nv_div_fmas_f32 v3, v0, v1, v2\nv_div_fmas_f64 v[4:5], v[6:7], v[8:9], v[10:11]",
               v={0: [f32(1.0)] * 3, 1: [f32(1.0)] * 3, 2: [f32(1.0), f32(2.0), f32(1.0)],
                  6: [0] * 3, 7: [0x3FF00000] * 3, 8: [0] * 3, 9: [0x3FF00000] * 3, 10: [0] * 3, 11: [0x3FF00000, 0x40000000, 0x3FF00000]},
               vout=(3, 4, 5))
  assert col(r, 3, 3) == [f32(2.0 ** -63), f32(3.0 * 2.0 ** 64), f32(2.0)]
  assert col(r, 5, 3) == [f64(2.0 ** -127) >> 32, f64(3.0 * 2.0 ** 128) >> 32, f64(2.0) >> 32]


def test_div_fixup():                                  # fact 34
  q = [f32(1.0), f32(1.0), f32(1.0), f32(1.0), f32(1.0), QNAN, f32(1.5)]
  den = [f32(2.0), 0x7FC00007, 0, INF, NZERO, f32(2.0), f32(2.0)]
  num = [0x7F800003, f32(1.0), 0, INF, f32(1.0), f32(-3.0), f32(-3.0)]
  r = vop("v_div_fixup_f32 v3, v0, v1, v2", a=q, b=den, c=num)
  assert col(r, 3, 7) == [0x7FC00003, 0x7FC00007, 0xFFC00000, 0xFFC00000, NINF, NINF, f32(-1.5)]


def test_special_values():                             # fact 35
  r = vop("v_rcp_f32 v3, v0\nv_rsq_f32 v4, v0\nv_sqrt_f32 v5, v0\nv_log_f32 v6, v0\nv_exp_f32 v7, v0\nv_fract_f32 v8, v0\n"
          "v_ceil_f32 v9, v0\nv_floor_f32 v12, v0\nv_trunc_f32 v13, v0\nv_rndne_f32 v14, v0",
          a=[INF, NINF, 0, NZERO, f32(-1.0), f32(-1.25), f32(-0.1), f32(2.5)], out=(3, 4, 5, 6, 7, 8, 9, 12, 13, 14))
  assert col(r, 3, 4) == [0, NZERO, INF, NINF]
  assert col(r, 4, 4)[0] == 0 and col(r, 4, 4)[3] == NINF
  assert col(r, 5, 5)[3] == NZERO and col(r, 5, 5)[4] & 0x7FC00000 == QNAN
  assert col(r, 6, 3)[2] == NINF and col(r, 7, 2)[1] == 0
  assert col(r, 8, 6)[5] == f32(0.75) and col(r, 8, 1)[0] & 0x7FC00000 == QNAN
  assert col(r, 9, 7)[6] == NZERO and col(r, 12, 4)[3] == NZERO and col(r, 13, 7)[6] == NZERO
  assert col(r, 14, 8)[7] == f32(2.0)


def test_mullit_guard():                               # fact 36
  r = vop("v_mullit_f32 v3, v0, v1, v2", a=[f32(2.0)] * 4, b=[f32(3.0)] * 4, c=[0, QNAN, f32(-1.0), f32(1.0)])
  assert col(r, 3, 4) == [0xFF7FFFFF, 0xFF7FFFFF, 0xFF7FFFFF, f32(6.0)]


def test_norm_conversions():                           # fact 37
  r = vop("v_cvt_norm_i16_f16 v3, v0\nv_cvt_norm_u16_f16 v4, v0", a=[0xBC00, 0x3C00, 0x3800], out=(3, 4))
  assert [x & 0xFFFF for x in col(r, 3, 3)] == [0x8001, 0x7FFF, 0x4000]
  assert [x & 0xFFFF for x in col(r, 4, 3)] == [0, 0xFFFF, 0x8000]


def test_16bit_result_keeps_high_half():               # fact 38
  r = vop("v_mov_b32 v3, 0xdead0000\nv_cvt_f16_f32 v3, v0\nv_mov_b32 v4, 0xdead\nv_cvt_f16_f32_e64 v4.h, v0\n"
          "v_mov_b32 v5, 0xbeef0000\nv_add_f16 v5.h, v1.h, v1.l", a=[f32(1.0)], b=[0x40003C00], out=(3, 4, 5))
  assert col(r, 3, 1) == [0xDEAD3C00] and col(r, 4, 1) == [0x3C00DEAD] and col(r, 5, 1) == [0x42000000]


def test_cvt_pk_rtz_rounds_toward_zero():              # fact 40
  x = f32(1.0 + 0.75 * 2.0 ** -10)
  r = vop("v_cvt_pk_rtz_f16_f32 v3, v0, v1\nv_cvt_f16_f32 v4, v0", a=[x, f32(-70000.0)], b=[f32(-2.0), f32(1e-8)], out=(3, 4))
  assert col(r, 3, 2) == [0xC0003C00, 0x00007BFF | 0x8000] and col(r, 4, 1)[0] & 0xFFFF == 0x3C01


def test_f16_arithmetic_rounds_once_and_keeps_denormals():
  r = vop("v_add_f16 v3, v0, v1\nv_mul_f16 v4, v0, v1\nv_fma_f16 v5, v0, v1, v2",
          a=[f16(1.0), 0x0001, f16(65504.0), f16(0.1)], b=[f16(2.0 ** -11), 0x0001, f16(2.0), f16(3.0)], c=[0, 0, 0, f16(-0.3)],
          out=(3, 4, 5))
  half = lambda reg, n: [x & 0xFFFF for x in col(r, reg, n)]
  assert half(3, 3) == [0x3C00, 0x0002, 0x7BFF]       # 1 + 2^-11 ties to even; denormals add exactly; 65506 -> 65504
  assert half(4, 3) == [0x1000, 0x0000, 0x7C00]       # 2^-11; 2^-48 underflows to 0; overflow to inf
  h = lambda x: float(np.frombuffer(x.to_bytes(2, "little"), np.float16)[0])
  assert half(5, 4)[3] == f16(h(f16(0.1)) * h(f16(3.0)) + h(f16(-0.3)))   # exact product + c, rounded once


def test_f64_arithmetic():
  a, b = 1.0 / 3.0, 2.0 ** -1074
  r = run_wave("v_add_f64 v[4:5], v[0:1], v[2:3]\nv_mul_f64 v[6:7], v[0:1], v[2:3]\nv_fma_f64 v[8:9], v[0:1], v[0:1], v[2:3]\n"
               "v_min_f64 v[10:11], v[0:1], v[2:3]\nv_rcp_f64 v[12:13], v[0:1]",
               v={0: [f64(a) & M32, f64(3.0) & M32], 1: [f64(a) >> 32, f64(3.0) >> 32], 2: [f64(b) & M32, 0], 3: [f64(b) >> 32, 0xFFF00000]},
               vout=(4, 5, 6, 7, 8, 9, 10, 11, 12, 13))
  u = lambda lo, hi, i=0: int(r.v[lo][i]) | int(r.v[hi][i]) << 32
  assert u(4, 5) == f64(a + b) and u(6, 7) == f64(a * b) and u(8, 9) == f64(a * a)   # a*a + 2^-1074 rounds back to a*a
  assert u(10, 11) == f64(b) and u(12, 13) == f64(3.0)
  assert u(4, 5, 1) == f64(-math.inf)


def test_trig_preop_returns_2_over_pi_bits():
  # (2/pi) bits 0-52, scaled by 2^-53: the first 53 bits of 0xA2F9836E4E441529...
  r = run_wave("v_trig_preop_f64 v[4:5], v[0:1], v2", v={0: [0, 0], 1: [0x3FF00000] * 2, 2: [0, 1]}, vout=(4, 5))
  lo = lambda i: int(r.v[4][i]) | int(r.v[5][i]) << 32
  first = 0xA2F9836E4E441529 >> 11
  assert lo(0) == f64(first * 2.0 ** -53)
  second = ((0xA2F9836E4E441529 << 64 | 0xFC2757D1F534DDC0) >> (128 - 106)) & ((1 << 53) - 1)
  assert lo(1) == f64(second * 2.0 ** -106)
