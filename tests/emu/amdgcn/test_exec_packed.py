"""VOP3P (packed math, dot products, FMA_MIX, WMMA), VOPD dual issue, DPP16/DPP8 and cross-lane VALU ops.
Facts: RDNA3 ISA guide chapters 6-7 (DPP, WMMA layout)."""
import numpy as np
from exec_helpers import run_wave, raw, f32, f16

M32 = 0xFFFFFFFF


def col(r, reg, n=32): return [int(x) for x in r.v[reg][:n]]


def pk(lo: int, hi: int) -> int: return lo | hi << 16


def test_pk_f16_math_with_op_sel_and_neg():
  a, b = pk(f16(1.5), f16(-2.0)), pk(f16(4.0), f16(0.25))
  r = run_wave("v_pk_add_f16 v3, v0, v1\nv_pk_mul_f16 v4, v0, v1 op_sel:[1,0] op_sel_hi:[0,1]\n"
               "v_pk_fma_f16 v5, v0, v1, v0 neg_lo:[1,0,0] neg_hi:[0,0,1]\n"
               "v_pk_max_f16 v6, v0, v1", v={0: [a], 1: [b]}, vout=(3, 4, 5, 6))
  assert col(r, 3, 1) == [pk(f16(5.5), f16(-1.75))]
  assert col(r, 4, 1) == [pk(f16(-8.0), f16(0.375))]          # lo = a.hi * b.lo, hi = a.lo * b.hi
  assert col(r, 5, 1) == [pk(f16(-4.5), f16(1.5))]            # lo = -1.5*4 + 1.5, hi = -2*0.25 - (-2)
  assert col(r, 6, 1) == [pk(f16(4.0), f16(0.25))]


def test_vop3p_inline_constants():                    # fact 39
  r = run_wave("v_pk_add_f16 v3, v0, 1.0\nv_pk_add_u16 v4, v0, 2.0\nv_pk_add_u16 v5, v0, 1", v={0: [pk(f16(1.0), f16(2.0))]}, vout=(3, 4, 5))
  assert col(r, 3, 1) == [pk(f16(2.0), f16(2.0))]             # f16 constant: low half only, high half 0
  assert col(r, 4, 1) == [pk(f16(1.0), f16(2.0) + 0x4000)]    # integer op: raw f32 bits 0x40000000
  assert col(r, 5, 1) == [pk(f16(1.0) + 1, f16(2.0))]


def test_pk_integer_ops_and_clamp():
  r = run_wave("v_pk_add_i16 v3, v0, v1 clamp\nv_pk_sub_u16 v4, v0, v1 clamp\nv_pk_lshlrev_b16 v5, v1, v0\nv_pk_mad_u16 v6, v0, v1, v1\n"
               "v_pk_ashrrev_i16 v7, v1, v0\nv_pk_max_i16 v8, v0, v1\nv_pk_mul_lo_u16 v9, v0, v1",
               v={0: [pk(0x7FFF, 0x8000)], 1: [pk(2, 0x1)]}, vout=(3, 4, 5, 6, 7, 8, 9))
  assert col(r, 3, 1) == [pk(0x7FFF, 0x8001)]
  assert col(r, 4, 1) == [pk(0x7FFD, 0x7FFF)]
  assert col(r, 5, 1) == [pk(0xFFFC, 0x0000)]
  assert col(r, 6, 1) == [pk(0x0000, 0x8001)]
  assert col(r, 7, 1) == [pk(0x1FFF, 0xC000)]
  assert col(r, 8, 1) == [pk(0x7FFF, 0x0001)]
  assert col(r, 9, 1) == [pk(0xFFFE, 0x8000)]


def test_dot_products():
  a = [0x01_02_03_FF, 0x7F7F7F7F]
  b = [0x01_01_01_02, 0x81818181]
  r = run_wave("v_dot4_i32_iu8 v3, v0, v1, v2 neg_lo:[1,1,0]\nv_dot4_u32_u8 v4, v0, v1, v2\nv_dot4_i32_iu8 v5, v0, v1, v2 neg_lo:[1,0,0]\n"
               "v_dot2_f32_f16 v6, v7, v8, 1.0\nv_dot8_u32_u4 v9, v0, v1, 0\nv_dot8_i32_iu4 v12, v0, v1, 0 neg_lo:[1,1,0]",
               v={0: a, 1: b, 2: [10, 10], 7: [pk(f16(2.0), f16(3.0))] * 2, 8: [pk(f16(0.5), f16(-1.0))] * 2}, vout=(3, 4, 5, 6, 9, 12))
  sb = lambda x: x - 256 if x > 127 else x
  bytes_ = lambda w: [(w >> (8 * k)) & 0xFF for k in range(4)]
  dot = lambda x, y, fx, fy: sum(fx(p) * fy(q) for p, q in zip(bytes_(x), bytes_(y)))
  assert col(r, 3, 2) == [(10 + dot(a[i], b[i], sb, sb)) & M32 for i in range(2)]
  assert col(r, 4, 2) == [(10 + dot(a[i], b[i], int, int)) & M32 for i in range(2)]
  assert col(r, 5, 2) == [(10 + dot(a[i], b[i], sb, int)) & M32 for i in range(2)]
  assert col(r, 6, 1) == [f32(1.0 + 2.0 * 0.5 - 3.0)]
  nib = lambda w: [(w >> (4 * k)) & 0xF for k in range(8)]
  s4 = lambda x: x - 16 if x > 7 else x
  assert col(r, 9, 1) == [sum(p * q for p, q in zip(nib(a[0]), nib(b[0])))]
  assert col(r, 12, 1) == [sum(s4(p) * s4(q) for p, q in zip(nib(a[0]), nib(b[0]))) & M32]


def test_dot4_clamp_saturates():
  r = run_wave("v_dot4_i32_iu8 v3, v0, v0, v1 neg_lo:[1,1,0] clamp", v={0: [0x80808080], 1: [0x7FFFFFF0]}, vout=(3,))
  assert col(r, 3, 1) == [0x7FFFFFFF]


def test_fma_mix():
  r = run_wave("v_fma_mix_f32 v3, v0, v1, v2 op_sel_hi:[1,1,0]\nv_fma_mix_f32 v4, v0, v1, v2 op_sel:[1,0,0] op_sel_hi:[1,1,0]\n"
               "v_mov_b32 v5, 0xbeef0000\nv_fma_mixlo_f16 v5, v2, v2, v2\nv_mov_b32 v6, 0xbeef\nv_fma_mixhi_f16 v6, v2, v2, -v2",
               v={0: [pk(f16(1.5), f16(-2.0))], 1: [pk(f16(4.0), 0)], 2: [f32(3.0)]}, vout=(3, 4, 5, 6))
  assert col(r, 3, 1) == [f32(9.0)] and col(r, 4, 1) == [f32(-5.0)]
  assert col(r, 5, 1) == [0xBEEF0000 | f16(12.0)] and col(r, 6, 1) == [f16(6.0) << 16 | 0xBEEF]


def _wmma_inputs(rng):
  A = rng.standard_normal((16, 16)).astype(np.float16)
  B = rng.standard_normal((16, 16)).astype(np.float16)
  C = rng.standard_normal((16, 16)).astype(np.float32)
  v = {}
  for i in range(8):   # lane m < 16 holds row m of A / column m of B, two K values per VGPR; lanes 16-31 repeat them
    v[i] = [int(A[l % 16, 2 * i:2 * i + 2].view(np.uint32)[0]) for l in range(32)]
    v[8 + i] = [int(np.ascontiguousarray(B[2 * i:2 * i + 2, l % 16]).view(np.uint32)[0]) for l in range(32)]
    v[16 + i] = [int(C[2 * i + l // 16, l % 16].view(np.uint32)) for l in range(32)]   # row = 2*i + lane/16
  return A, B, C, v


def test_wmma_f32_f16_matches_numpy():
  A, B, C, v = _wmma_inputs(np.random.default_rng(1))
  r = run_wave("v_wmma_f32_16x16x16_f16 v[16:23], v[0:7], v[8:15], v[16:23]", v=v, vout=tuple(range(16, 24)))
  D = np.zeros((16, 16), np.float32)
  for i in range(8):
    for l in range(32): D[2 * i + l // 16, l % 16] = r.v[16 + i].view(np.float32)[l]
  want = (A.astype(np.float64) @ B.astype(np.float64) + C).astype(np.float32)
  np.testing.assert_array_equal(D, want)


def test_wmma_inline_constant_c():                    # fact 42
  A, B, _, v = _wmma_inputs(np.random.default_rng(2))
  r = run_wave("v_wmma_f32_16x16x16_f16 v[16:23], v[0:7], v[8:15], 0", v=v, vout=tuple(range(16, 24)))
  D = np.zeros((16, 16), np.float32)
  for i in range(8):
    for l in range(32): D[2 * i + l // 16, l % 16] = r.v[16 + i].view(np.float32)[l]
  np.testing.assert_array_equal(D, (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32))


def test_wmma_i32_iu8_signedness_from_neg():
  rng = np.random.default_rng(3)
  A = rng.integers(-128, 128, (16, 16)).astype(np.int8)
  B = rng.integers(0, 256, (16, 16)).astype(np.uint8)
  v = {}
  for i in range(4):   # four K values (bytes) per VGPR
    v[i] = [int(A[l % 16, 4 * i:4 * i + 4].view(np.uint32)[0]) for l in range(32)]
    v[4 + i] = [int(np.ascontiguousarray(B[4 * i:4 * i + 4, l % 16]).view(np.uint32)[0]) for l in range(32)]
  r = run_wave("v_wmma_i32_16x16x16_iu8 v[8:15], v[0:3], v[4:7], 0 neg_lo:[1,0,0]", v=v, vout=tuple(range(8, 16)))
  D = np.zeros((16, 16), np.int64)
  for i in range(8):
    for l in range(32): D[2 * i + l // 16, l % 16] = r.v[8 + i].view(np.int32)[l]
  np.testing.assert_array_equal(D, A.astype(np.int64) @ B.astype(np.int64))


def test_vopd_reads_sources_before_writes():
  r = run_wave("v_dual_mul_f32 v0, v1, v2 :: v_dual_add_f32 v3, v0, v4\nv_dual_mov_b32 v6, v0 :: v_dual_fmac_f32 v5, v1, v2",
               v={0: [f32(10.0)], 1: [f32(2.0)], 2: [f32(3.0)], 4: [f32(1.0)], 5: [f32(0.5)]}, vout=(0, 3, 5, 6))
  assert col(r, 0, 1) == [f32(6.0)] and col(r, 3, 1) == [f32(11.0)] and col(r, 5, 1) == [f32(6.5)] and col(r, 6, 1) == [f32(6.0)]


def test_vopd_fmaak_cndmask_and_int_ops():
  r = run_wave("s_mov_b32 vcc_lo, 2\nv_dual_fmaak_f32 v4, v0, v1, 0x40000000 :: v_dual_cndmask_b32 v5, v1, v0\n"
               "v_dual_mov_b32 v6, v2 :: v_dual_add_nc_u32 v7, v3, v2\nv_dual_mul_f32 v8, v0, v1 :: v_dual_lshlrev_b32 v9, 4, v2",
               v={0: [f32(3.0), f32(3.0)], 1: [f32(0.5), f32(0.5)], 2: [7, 7], 3: [1, 1]}, vout=(4, 5, 6, 7, 8, 9), exec_mask=3)
  assert col(r, 4, 2) == [f32(3.5)] * 2 and col(r, 5, 2) == [f32(0.5), f32(3.0)]
  assert col(r, 6, 2) == [7, 7] and col(r, 7, 2) == [8, 8] and col(r, 8, 2) == [f32(1.5)] * 2 and col(r, 9, 2) == [112, 112]


def test_dpp16_quad_perm_shift_masks_and_bound_ctrl():   # fact 47
  lanes = list(range(100, 132))
  r = run_wave("v_mov_b32 v1, -1\nv_mov_b32_dpp v1, v0 quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf\n"
               "v_mov_b32 v2, -1\nv_mov_b32_dpp v2, v0 row_shl:1 row_mask:0xf bank_mask:0xf bound_ctrl:1\n"
               "v_mov_b32 v3, -1\nv_mov_b32_dpp v3, v0 row_shr:2 row_mask:0xf bank_mask:0xf\n"
               "v_mov_b32 v4, -1\nv_mov_b32_dpp v4, v0 row_ror:4 row_mask:0x2 bank_mask:0x5\n"
               "v_mov_b32 v5, -1\nv_mov_b32_dpp v5, v0 row_mirror row_mask:0xf bank_mask:0xf\n"
               "v_mov_b32 v6, -1\nv_mov_b32_dpp v6, v0 row_share:3 row_mask:0xf bank_mask:0xf\n"
               "v_mov_b32 v7, -1\nv_mov_b32_dpp v7, v0 row_xmask:1 row_mask:0xf bank_mask:0xf",
               v={0: lanes}, vout=(1, 2, 3, 4, 5, 6, 7))
  assert col(r, 1, 8) == [103, 102, 101, 100, 107, 106, 105, 104]
  assert col(r, 2)[14:17] == [115, 0, 117]                        # bound_ctrl: out-of-row lanes read 0
  assert col(r, 3)[0:3] == [M32, M32, 100] and col(r, 3)[16:19] == [M32, M32, 116]   # no bound_ctrl: keep dst
  assert col(r, 4)[0:2] == [M32, M32] and col(r, 4)[16:24] == [128, 129, 130, 131, M32, M32, M32, M32]
  assert col(r, 5)[0:2] == [115, 114]
  assert col(r, 6)[0:2] == [103, 103] and col(r, 6)[16] == 119
  assert col(r, 7)[0:4] == [101, 100, 103, 102]


def test_dpp8_and_vop3_dpp_and_vopc_dpp():
  r = run_wave("v_mov_b32_dpp v1, v0 dpp8:[7,6,5,4,3,2,1,0]\nv_add_f32_e64_dpp v2, v3, v4 quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf\n"
               "v_cmp_lt_f32_dpp vcc_lo, v3, v4 quad_perm:[0,0,0,0] row_mask:0xf bank_mask:0xf\ns_mov_b32 s10, vcc_lo",
               v={0: list(range(32)), 3: [f32(x) for x in range(32)], 4: [f32(0.5)] * 32}, vout=(1, 2), sout=[10])
  assert col(r, 1, 16) == [7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8]
  assert col(r, 2, 4) == [f32(3.5), f32(2.5), f32(1.5), f32(0.5)]
  assert r.s[10] == 0x0000000F                                    # every lane compares its quad's lane 0: only 0.0 < 0.5
  # 0x142 broadcasts lane 0 of each row (raw DPP control: LLVM has no gfx11 syntax for it)
  code = raw("v_mov_b32_dpp v5, v0 quad_perm:[0,0,0,0] row_mask:0xf bank_mask:0xf", 0, 0x142 << 8)
  r = run_wave(code, v={0: list(range(32))}, vout=(5,))
  assert col(r, 5) == [0] * 16 + [16] * 16


def test_permlane16_x16_and_permlane64():
  sel = sum(((15 - k) & 15) << (4 * k) for k in range(16))
  r = run_wave(f"s_mov_b32 s0, {sel & M32:#x}\ns_mov_b32 s1, {sel >> 32:#x}\nv_permlane16_b32 v1, v0, s0, s1\nv_permlanex16_b32 v2, v0, s0, s1",
               v={0: list(range(32))}, vout=(1, 2))
  assert col(r, 1) == [15 - l % 16 + (l & 16) for l in range(32)]
  assert col(r, 2) == [15 - l % 16 + ((l & 16) ^ 16) for l in range(32)]
  r = run_wave("v_permlane64_b32 v1, v0", v={0: list(range(64))}, vout=(1,), wave64=True)
  assert col(r, 1, 64) == [l ^ 32 for l in range(64)]
  r = run_wave("v_mov_b32 v1, v0\nv_permlane64_b32 v1, v0", v={0: list(range(32))}, vout=(1,))   # fact 41: no-op in wave32
  assert col(r, 1) == list(range(32))


def test_wave64_exec_vcc_and_compares():
  r = run_wave("v_cmp_gt_u32 vcc, v0, 40\ns_mov_b64 s[10:11], vcc\nv_cndmask_b32 v1, 0, 1, vcc\nv_add_co_u32 v2, s[12:13], v0, -1",
               v={0: list(range(64))}, vout=(1, 2), sout=[10, 11, 12, 13], wave64=True, exec_mask=(1 << 64) - 1 - 1)
  mask = sum(1 << l for l in range(41, 64))
  assert r.s[10] | r.s[11] << 32 == mask and col(r, 1, 64) == [1 if l > 40 and l else 0 for l in range(64)]
  assert r.s[12] | r.s[13] << 32 == (1 << 64) - 2   # lanes 1-63 carry; lane 0 is inactive (bit cleared)


def test_wmma_f16_result_in_low_halves_keeps_high_halves():
  A, B, _, v = _wmma_inputs(np.random.default_rng(7))
  C = np.random.default_rng(8).standard_normal((16, 16)).astype(np.float16)
  for i in range(8): v[16 + i] = [0xBEEF0000 | int(C[2 * i + l // 16, l % 16].view(np.uint16)) for l in range(32)]
  r = run_wave("v_wmma_f16_16x16x16_f16 v[16:23], v[0:7], v[8:15], v[16:23]", v=v, vout=tuple(range(16, 24)))
  D = np.zeros((16, 16), np.float16)
  for i in range(8):
    assert all(int(x) >> 16 == 0xBEEF for x in r.v[16 + i])
    for l in range(32): D[2 * i + l // 16, l % 16] = np.uint16(int(r.v[16 + i][l]) & 0xFFFF).view(np.float16)
  want = (A.astype(np.float64) @ B.astype(np.float64) + C.astype(np.float64)).astype(np.float16)
  np.testing.assert_array_equal(D, want)
