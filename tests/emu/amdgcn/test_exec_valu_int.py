"""Vector integer ALU (VOP1/VOP2/VOP3/VOP3SD/VOPC) against hand-computed bit patterns, one test case per lane.
Facts: RDNA3 ISA guide chapter 6."""
from exec_helpers import run_wave, raw

M32 = 0xFFFFFFFF


def lanes(body: str, a=(), b=(), c=(), exec_mask=None, out=(3,), s=None):
  r = run_wave(body, v={0: list(a), 1: list(b), 2: list(c)}, vout=out, exec_mask=exec_mask, sout=[10, 11], s=s)
  return r


def test_shifts_use_low_5_bits():                      # fact 9
  r = lanes("v_lshlrev_b32 v3, v0, v1\nv_lshrrev_b32 v4, v0, v1\nv_ashrrev_i32 v5, v0, v1\nv_alignbit_b32 v6, v1, v2, v0",
            a=[0, 1, 31, 32, 33], b=[0x80000001] * 5, c=[0x12345678] * 5, out=(3, 4, 5, 6))
  assert list(r.v[3][:5]) == [0x80000001, 2, 0x80000000, 0x80000001, 2]
  assert list(r.v[4][:5]) == [0x80000001, 0x40000000, 1, 0x80000001, 0x40000000]
  assert list(r.v[5][:5]) == [0x80000001, 0xC0000000, M32, 0x80000001, 0xC0000000]
  assert list(r.v[6][:5]) == [0x12345678, 0x891A2B3C, 0x00000002, 0x12345678, 0x891A2B3C]


def test_bfe_width_and_sign():                         # fact 10
  r = lanes("v_bfe_u32 v3, v0, v1, v2\nv_bfe_i32 v4, v0, v1, v2", a=[0xF0F0F0F0] * 4, b=[4, 4, 0, 28], c=[4, 0, 32, 4], out=(3, 4))
  assert list(r.v[3][:4]) == [0xF, 0, 0, 0xF]          # width 32 & 31 = 0 -> 0
  assert list(r.v[4][:4]) == [M32, 0, 0, M32]


def test_perm_b32_selectors():                         # fact 11
  sels = [0x03020100, 0x07060504, 0x08090A0B, 0x0C0D0E0F, 0x00010C0D]
  r = lanes("v_perm_b32 v3, v0, v1, v2", a=[0x8899AABB] * 5, b=[0x44556677] * 5, c=sels)
  # bytes of {S0, S1}: 0-3 = 77 66 55 44, 4-7 = BB AA 99 88; 8-11 -> sign of bytes 1/3/5/7 as 00/FF
  assert list(r.v[3][:5]) == [0x44556677, 0x8899AABB, 0x0000FFFF, 0x00FFFFFF, 0x776600FF]


def test_carry_out_is_masked_by_exec_and_clears_inactive_lanes():   # fact 12
  r = lanes("s_mov_b32 vcc_lo, -1\nv_add_co_u32 v3, vcc_lo, v0, v1\ns_mov_b32 s10, vcc_lo\n"
            "s_mov_b32 s11, -1\nv_add_co_ci_u32 v4, s11, v0, v1, s11", a=[M32] * 32, b=[1] * 32, exec_mask=0x0F0F0F0F, out=(3, 4))
  assert r.s[10] == 0x0F0F0F0F and r.s[11] == 0x0F0F0F0F
  assert int(r.v[3][0]) == 0 and int(r.v[4][0]) == 1


def test_carry_in_and_out_e32_uses_vcc():
  r = lanes("s_mov_b32 vcc_lo, 0x5\nv_add_co_ci_u32 v3, vcc_lo, v0, v1, vcc_lo\ns_mov_b32 s10, vcc_lo\n"
            "s_mov_b32 vcc_lo, 0x3\nv_sub_co_ci_u32 v4, vcc_lo, v0, v1, vcc_lo\ns_mov_b32 s11, vcc_lo",
            a=[M32, M32, 5, 0], b=[0, 1, 5, 0], out=(3, 4))
  assert list(r.v[3][:4]) == [0, 0, 11, 0] and r.s[10] & 0xF == 0b0011
  assert list(r.v[4][:4]) == [0xFFFFFFFE, 0xFFFFFFFD, 0, 0] and r.s[11] & 0xF == 0


def test_null_carry_destination_discards_it():
  r = lanes("s_mov_b32 vcc_lo, 0x1234\nv_add_co_u32 v3, null, v0, v1\ns_mov_b32 s10, vcc_lo", a=[M32], b=[5])
  assert r.s[10] == 0x1234 and int(r.v[3][0]) == 4


def test_sources_read_before_destination_write():     # fact 13
  r = lanes("s_mov_b32 s8, 1\nv_add_co_u32 v0, vcc_lo, s8, v0\ns_mov_b32 s10, vcc_lo\nv_mov_b32 v3, v0", a=[M32, 7])
  assert int(r.v[3][0]) == 0 and int(r.v[3][1]) == 8 and r.s[10] & 3 == 1


def test_integer_clamp_saturates():                    # fact 14
  r = lanes("v_add_nc_u32 v3, v0, v1 clamp\nv_sub_nc_u32 v4, v1, v0 clamp\nv_add_nc_i32 v5, v0, v1 clamp\n"
            "v_mad_u16 v6, v0, 2, 0 clamp\nv_mad_u16 v7, v0, 2, 0\nv_add_co_u32 v8, vcc_lo, v0, v1 clamp",
            a=[M32, 0x7FFFFFFF, 0xFFFF], b=[2, 1, 1], out=(3, 4, 5, 6, 7, 8))
  assert list(r.v[3][:3]) == [M32, 0x80000000, 0x10000]
  assert list(r.v[4][:3]) == [0, 0, 0]
  assert list(r.v[5][:3]) == [1, 0x7FFFFFFF, 0x10000]
  assert int(r.v[6][2]) & 0xFFFF == 0xFFFF and int(r.v[7][2]) & 0xFFFF == 0xFFFE
  assert list(r.v[8][:3]) == [M32, 0x80000000, 0x10000]


def test_mad_i32_i16_and_i24_clamp():                  # fact 15
  r = lanes("v_mad_i32_i24 v3, v0, v1, v2 clamp\nv_mad_i32_i16 v4, v0, v1, v2 clamp\n" + raw("v_mad_i32_i16 v5, v0, v1, 0", 0, 1 << 29),
            a=[0x7FFFFF, 0x800000, 0x7FFF], b=[0x7FFFFF, 0x7FFFFF, 2], c=[0x7FFFFFFF, 0x80000000, 0], out=(3, 4, 5))
  assert list(r.v[3][:3]) == [0x7FFFFFFF, 0x80000000, 0xFFFE]
  assert int(r.v[4][2]) == 0xFFFE and int(r.v[5][2]) == 0xFFFFFFFE   # neg flips bit 15: 0x7FFF -> 0xFFFF = -1


def test_integer_compare_abs_neg_are_bit_operations():   # fact 16
  r = lanes(raw("v_cmp_eq_i32_e64 s10, v0, v1", 1 << 8) + "\n" + raw("v_cmp_eq_u32_e64 s11, v0, v1", 1 << 8),
            a=[0x80000001, 0x80000000], b=[1, 0])
  assert r.s[10] & 3 == 0b11 and r.s[11] & 3 == 0b11   # abs clears bit 31: |0x80000001| = 1, |0x80000000| = 0


def test_clz_ctz_of_zero():                            # fact 17
  r = lanes("v_clz_i32_u32 v3, v0\nv_ctz_i32_b32 v4, v0\nv_cls_i32 v5, v0", a=[0, 1, 0x80000000, M32], out=(3, 4, 5))
  assert list(r.v[3][:4]) == [M32, 31, 0, 0]
  assert list(r.v[4][:4]) == [M32, 0, 31, 0]
  assert list(r.v[5][:4]) == [M32, 31, 1, M32]   # leading bits equal to the sign bit, sign excluded


def test_compare_result_masked_by_exec_and_cmpx_writes_exec_only():   # facts 30, 31
  r = lanes("s_mov_b32 vcc_lo, -1\nv_cmp_lt_u32 vcc_lo, v0, v1\ns_mov_b32 s10, vcc_lo\n"
            "s_mov_b32 s12, 0xabcd\nv_cmpx_lt_u32_e64 v0, v1\ns_mov_b32 s11, exec_lo",
            a=list(range(32)), b=[16] * 32, exec_mask=0x00FF00FF)
  assert r.s[10] == 0x000000FF and r.s[11] == 0xFF


def test_cmpx_e64_does_not_write_sdst():
  r = run_wave("s_mov_b32 s20, 0x1234\nv_cmpx_eq_u32_e64 v0, 0", v={0: [0, 1, 0]}, sout=[20], exec_mask=0x7)
  assert r.s[20] == 0x1234 and r.exec == 0b101


def test_mul_family():
  r = lanes("v_mul_lo_u32 v3, v0, v1\nv_mul_hi_u32 v4, v0, v1\nv_mul_hi_i32 v5, v0, v1\nv_mul_u32_u24 v6, v0, v1\n"
            "v_mul_i32_i24 v7, v0, v1\nv_mul_hi_u32_u24 v8, v0, v1\nv_mad_u64_u32 v[10:11], null, v0, v1, v[0:1]",
            a=[0xFFFFFFFF, 0x00FFFFFF, 0x80000000], b=[0xFFFFFFFF, 0x00FFFFFF, 2], out=(3, 4, 5, 6, 7, 8, 10, 11))
  assert list(r.v[3][:3]) == [1, 0xFE000001, 0]
  assert list(r.v[4][:3]) == [0xFFFFFFFE, 0xFFFF, 1]
  assert list(r.v[5][:3]) == [0, 0xFFFF, 0xFFFFFFFF]
  assert list(r.v[6][:3]) == [0xFE000001, 0xFE000001, 0]
  assert list(r.v[7][:3]) == [1, 1, 0]
  assert list(r.v[8][:3]) == [0xFFFF, 0xFFFF, 0]
  # v[0:1] as the 64-bit addend: lane 0 = 0xFFFFFFFF | 0xFFFFFFFF << 32
  assert (int(r.v[10][0]), int(r.v[11][0])) == (0, 0xFFFFFFFE)


def test_64bit_shifts_and_compares():
  r = lanes("v_lshlrev_b64 v[4:5], v2, v[0:1]\nv_ashrrev_i64 v[6:7], v2, v[0:1]\nv_cmp_gt_i64_e64 s10, v[0:1], 0",
            a=[1, 0, 0x80000000], b=[0, 0x80000000, 0], c=[32, 4, 65], out=(4, 5, 6, 7))
  assert (int(r.v[4][0]), int(r.v[5][0])) == (0, 1)
  assert (int(r.v[6][1]), int(r.v[7][1])) == (0, 0xF8000000)
  assert (int(r.v[4][2]), int(r.v[5][2])) == (0, 1)
  assert r.s[10] & 7 == 0b101


def test_min_max_med3_and_three_input_logic():
  r = lanes("v_med3_i32 v3, v0, v1, v2\nv_med3_u32 v4, v0, v1, v2\nv_max3_i32 v5, v0, v1, v2\nv_min3_u32 v6, v0, v1, v2\n"
            "v_xor3_b32 v7, v0, v1, v2\nv_add3_u32 v8, v0, v1, v2\nv_lshl_add_u32 v9, v0, 4, v2\nv_and_or_b32 v12, v0, v1, v2\n"
            "v_bfi_b32 v13, v0, v1, v2\nv_bcnt_u32_b32 v14, v0, v1\nv_sad_u8 v15, v0, v1, v2",
            a=[M32, 5], b=[3, 0x01020304], c=[7, 0x10], out=(3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15))
  assert list(r.v[3][:2]) == [3, 0x10] and list(r.v[4][:2]) == [7, 0x10]
  assert list(r.v[5][:2]) == [7, 0x01020304] and list(r.v[6][:2]) == [3, 5]
  assert int(r.v[7][0]) == M32 ^ 3 ^ 7 and int(r.v[8][0]) == 9 and int(r.v[9][0]) == 0xFFFFFFF7
  assert int(r.v[12][0]) == 7 and int(r.v[13][0]) == 3 and int(r.v[14][0]) == 35
  assert int(r.v[15][1]) == (5 - 4) + 3 + 2 + 1 + 0x10


def test_mbcnt_counts_lower_lanes():
  r = lanes("v_mbcnt_lo_u32_b32 v3, -1, 0\ns_mov_b32 s20, 0x55555555\nv_mbcnt_lo_u32_b32 v4, s20, 100", out=(3, 4))
  r2 = run_wave("v_mbcnt_lo_u32_b32 v3, -1, 0\nv_mbcnt_hi_u32_b32 v3, -1, v3", vout=(3,), wave64=True)
  assert list(r.v[3]) == list(range(32)) and list(r.v[4]) == [100 + (l + 1) // 2 for l in range(32)]
  assert list(r2.v[3]) == list(range(64))


def test_16bit_ops_write_low_half_and_keep_high():     # fact 38 (integer forms)
  r = lanes("v_mov_b32 v3, 0xdead0000\nv_add_nc_u16 v3, v0, v1\nv_mov_b32 v4, 0xdead0000\nv_add_nc_u16 v4.h, v0.l, v1.l\n"
            "v_mov_b32 v5, 0x0000beef\nv_lshlrev_b16 v5.h, 4, v0.l", a=[0xFFFF0003], b=[0x0005], out=(3, 4, 5))
  assert int(r.v[3][0]) == 0xDEAD0008 and int(r.v[4][0]) == 0x00080000 and int(r.v[5][0]) == 0x0030BEEF


def test_readlane_writelane_readfirstlane():          # fact 41
  r = run_wave("v_readlane_b32 s10, v0, 5\nv_readfirstlane_b32 s11, v0\nv_mov_b32 v3, 0\nv_writelane_b32 v3, 77, 3\n"
               "s_mov_b32 exec_lo, 0\nv_readfirstlane_b32 s12, v0\ns_mov_b32 exec_lo, -1",
               v={0: [i * 10 for i in range(32)]}, vout=(3,), sout=[10, 11, 12], exec_mask=0xFFFFFFF0)
  assert r.s[10] == 50 and r.s[11] == 40 and r.s[12] == 0
  assert int(r.v[3][3]) == 77 and int(r.v[3][4]) == 0


def test_cndmask_uses_vcc_or_sgpr_mask():
  r = lanes("s_mov_b32 vcc_lo, 0x5\nv_cndmask_b32 v3, v0, v1, vcc_lo\ns_mov_b32 s20, 0x3\nv_cndmask_b32_e64 v4, v0, v1, s20",
            a=[1] * 4, b=[2] * 4, out=(3, 4))
  assert list(r.v[3][:4]) == [2, 1, 2, 1] and list(r.v[4][:4]) == [2, 2, 1, 1]


def test_swap_and_m0_relative_moves():
  r = run_wave("v_swap_b32 v1, v2\nv_swap_b16 v3.h, v4.l\ns_mov_b32 m0, 3\nv_movrels_b32 v5, v1\nv_movreld_b32 v10, v2",
               v={1: [11], 2: [22], 3: [0x33334444], 4: [0x55556666]}, vout=(1, 2, 3, 4, 5, 13))
  assert (int(r.v[1][0]), int(r.v[2][0])) == (22, 11)
  assert (int(r.v[3][0]), int(r.v[4][0])) == (0x66664444, 0x55553333)
  assert int(r.v[5][0]) == 0x55553333 and int(r.v[13][0]) == 11    # v5 = v[1 + m0] = v4; v[10 + m0] = v2
