"""RDNA4 (gfx1201) execution against numpy: the instructions RDNA4 renamed run their RDNA3 semantics
(emu/amdgcn/gfx12.py), gfx12's own 64-bit scalar ops, the 96-bit global and buffer encodings (24-bit offsets, th bit 0
returning an atomic's old value), SMEM's 24-bit offset, the workgroup ids in ttmp9 / ttmp7; what is not modelled is
refused by name."""
import numpy as np
import pytest
from exec_helpers import assemble, run_wave
from autogen.amdgcn.gfx11 import tables as t11
from autogen.amdgcn.gfx12 import tables as t12
from emu.amdgcn import Memory, run, WaveTrap, gfx12
from emu.amdgcn.decode import _base

T = "gfx1201"
M32, M64 = 0xFFFFFFFF, (1 << 64) - 1


def test_renamed_instructions_have_their_rdna3_counterpart():
  rdna3 = {_base(e[0]) for fam in t11.OPS.values() for e in fam.values()}
  rdna3 |= {_base(e[0]) for ov in t11.TARGET_OPS.values() for fam in ov.values() for e in fam.values() if e}
  renamed = {op: new for fam in t12.OPS.values() for e in fam.values() if (new := gfx12.same_as(op := _base(e[0])))}
  assert len(renamed) > 40 and {op: new for op, new in renamed.items() if new not in rdna3} == {}
  assert renamed["s_add_co_ci_u32"] == "s_addc_u32" and renamed["v_dual_max_num_f32"] == "v_dual_max_f32"


def test_scalar_integer_ops_match_numpy():
  rng = np.random.default_rng(10)
  a, b = (int(x) for x in rng.integers(0, 1 << 32, 2, dtype=np.uint64))
  c, d = (int(x) for x in rng.integers(0, 1 << 63, 2, dtype=np.uint64) * 2 + 1)
  r = run_wave("""
    s_add_co_u32 s20, s10, s11
    s_cselect_b32 s21, 1, 0
    s_sub_co_u32 s22, s10, s11
    s_add_co_ci_u32 s23, s10, s11
    s_sub_co_i32 s24, s10, s11
    s_add_nc_u64 s[26:27], s[12:13], s[14:15]
    s_sub_nc_u64 s[28:29], s[12:13], s[14:15]
    s_mul_u64 s[30:31], s[12:13], s[14:15]""", s={10: a, 11: b, 12: c, 14: d}, sout=range(20, 32), target=T)
  s = r.s
  assert s[20] == (a + b) & M32 and s[21] == (a + b) >> 32 and s[22] == (a - b) & M32
  assert s[23] == (a + b + (a < b)) & M32                          # carry in: the SCC s_sub_co_u32 left (borrow)
  assert s[24] == (a - b) & M32
  for lo, want in ((26, c + d), (28, c - d), (30, c * d)): assert s[lo] | s[lo + 1] << 32 == want & M64


def test_vector_ops_match_numpy():
  rng = np.random.default_rng(11)
  a, b, c = rng.standard_normal((3, 32)).astype(np.float32)
  a[3], b[5] = np.nan, np.nan
  u, v = rng.integers(0, 1 << 32, (2, 32), dtype=np.uint64)
  w = rng.integers(0, 1 << 63, 32, dtype=np.uint64)
  bits = lambda x: [int(e) for e in x.view(np.uint32)]
  r = run_wave("""
    v_add_f32 v10, v0, v1
    v_fma_f32 v11, v0, v1, v2
    v_min_num_f32 v12, v0, v1
    v_max_num_f32 v13, v0, v1
    v_dual_max_num_f32 v14, v0, v1 :: v_dual_min_num_f32 v15, v1, v0
    v_mad_co_u64_u32 v[16:17], null, v4, v5, v[6:7]""",
               v={0: bits(a), 1: bits(b), 2: bits(c), 4: [int(x) for x in u], 5: [int(x) for x in v],
                  6: [int(x) & M32 for x in w], 7: [int(x) >> 32 for x in w]}, vout=range(10, 18), target=T)
  f = lambda reg: r.v[reg].view(np.float32)
  np.testing.assert_array_equal(f(10), a + b)
  np.testing.assert_array_equal(f(11), (a.astype(np.float64) * b + c).astype(np.float32))   # exact product, one rounding
  for reg, want in ((12, np.fmin(a, b)), (15, np.fmin(a, b)), (13, np.fmax(a, b)), (14, np.fmax(a, b))):   # NaN: the other one
    np.testing.assert_array_equal(f(reg), want)
  want = [(int(x) * int(y) + int(z)) & M64 for x, y, z in zip(u, v, w)]
  assert [int(lo) | int(hi) << 32 for lo, hi in zip(r.v[16], r.v[17])] == want


def test_global_buffer_and_scalar_loads_with_gfx12_offsets():
  r = run_wave("""
    v_lshlrev_b32 v1, 2, v0
    s_add_nc_u64 s[4:5], s[0:1], 0x1000
    global_load_b32 v2, v1, s[4:5] offset:-0x1000
    v_mov_b32 v3, 100
    global_atomic_add_u32 v5, v1, v3, s[0:1] offset:128 th:TH_ATOMIC_RETURN
    global_atomic_add_u32 v1, v3, s[0:1] offset:128
    global_load_b32 v6, v1, s[0:1] offset:128
    s_sub_nc_u64 s[4:5], s[0:1], 0x180000
    s_load_b32 s20, s[4:5], 0x180004
    s_mov_b64 s[8:9], s[0:1]
    s_mov_b32 s10, 16
    s_mov_b32 s11, 0x30000000
    buffer_load_b32 v7, v1, s[8:11], null offen
    s_wait_loadcnt 0x0
    s_wait_kmcnt 0x0""", v={0: list(range(32)), 1: [1000 + i for i in range(32)], 5: [7] * 32}, vout=(2, 5, 6, 7), sout=(20,),
               target=T)
  assert list(r.v[2]) == list(range(32))                            # -0x1000: a 24-bit signed offset
  assert list(r.v[5]) == [1000 + i for i in range(32)]             # th:TH_ATOMIC_RETURN: the old value
  assert list(r.v[6]) == [1200 + i for i in range(32)]             # both adds applied
  assert r.s[20] == 1                                               # 0x180004: beyond gfx11's 21-bit SMEM offset
  assert list(r.v[7][:6]) == [0, 1, 2, 3, 0, 0]                    # num_records = 16 bytes: lanes 4+ read 0


def test_workgroup_ids_arrive_in_ttmp9_and_ttmp7():
  code = assemble("""
    s_and_b32 s4, ttmp7, 0xffff
    s_lshr_b32 s5, ttmp7, 16
    s_mul_i32 s4, s4, 3
    s_mul_i32 s5, s5, 6
    s_add_co_i32 s4, s4, s5
    s_add_co_i32 s4, s4, ttmp9
    s_lshl_b32 s4, s4, 4
    s_add_co_u32 s0, s0, s4
    s_add_co_ci_u32 s1, s1, 0
    v_dual_mov_b32 v1, ttmp9 :: v_dual_mov_b32 v2, ttmp7
    v_dual_mov_b32 v3, s2 :: v_dual_mov_b32 v4, 0
    global_store_b96 v4, v[1:3], s[0:1]
    s_endpgm
""", cpu=T)
  mem = Memory()
  pc, out = mem.alloc(len(code)), mem.alloc(16 * 12)
  mem.write(pc, code)
  run(mem, pc=pc, grid=(3, 2, 2), user_sgprs=[out & M32, out >> 32], target=T)
  got = np.frombuffer(mem.read(out, 16 * 12), np.uint32).reshape(12, 4)[:, :3]
  want = [(x, y | z << 16, 0) for z in range(2) for y in range(2) for x in range(3)]   # s2: no id after the user SGPRs
  assert [tuple(int(v) for v in row) for row in got] == want


def test_named_barriers_are_refused():
  code = assemble("s_barrier_signal 1\ns_barrier_wait 1\ns_endpgm", cpu=T)
  mem = Memory()
  pc = mem.alloc(len(code))
  mem.write(pc, code)
  with pytest.raises(WaveTrap, match="named barrier"): run(mem, pc=pc, target=T)


# RDNA4 WMMA register layouts. Spot cells transcribed from AMD's matrix instruction calculator (ROCm
# amd_matrix_instruction_calculator, --architecture rdna4 --register-layout): (matrix, type, wave, row, col) -> (VGPR, lane, low bit)
CALCULATOR = {("A", 16, 32, 0, 4): (0, 16, 0), ("A", 16, 32, 0, 8): (2, 0, 0), ("A", 16, 32, 1, 15): (3, 17, 16),
              ("A", 8, 32, 0, 4): (1, 0, 0), ("A", 8, 32, 0, 8): (0, 16, 0), ("A", 4, 32, 0, 8): (0, 16, 0),
              ("A", 16, 64, 0, 8): (0, 32, 0), ("A", 16, 64, 0, 12): (0, 48, 0), ("A", 8, 64, 0, 4): (0, 32, 0), ("A", 4, 64, 0, 8): (0, 16, 0),
              ("D", 32, 32, 8, 0): (0, 16, 0), ("D", 16, 32, 1, 0): (0, 0, 16), ("D", 16, 32, 8, 3): (0, 19, 0),
              ("D", 32, 64, 4, 0): (0, 32, 0), ("D", 32, 64, 8, 1): (0, 17, 0), ("D", 32, 64, 12, 0): (0, 48, 0)}


def lay_ab(bits: int, wave: int, i: int, k: int) -> tuple[int, int, int]:
  """(VGPR, lane, low bit) of element k of row i of A (column i of B)."""
  e, cs = 32 // bits, 4 if bits == 16 else 8
  q = k // cs
  pos = q // 2 * cs + k % cs
  v, lane, nv = pos // e, i + 16 * (q % 2), 8 // e
  return (v - nv // 2, lane + 32, pos % e * bits) if wave == 64 and nv > 1 and v >= nv // 2 else (v, lane, pos % e * bits)


def lay_d(bits: int, wave: int, m: int, n: int) -> tuple[int, int, int]:
  v, lane, lo, nv = ((m % 8) // 2, n + 16 * (m // 8), 16 * (m % 2), 4) if bits == 16 else (m % 8, n + 16 * (m // 8), 0, 8)
  return (v - nv // 2, lane + 32, lo) if wave == 64 and v >= nv // 2 else (v, lane, lo)


def test_wmma_layouts_are_the_calculators():
  for (mat, bits, wave, r, c), want in CALCULATOR.items(): assert (lay_ab if mat == "A" else lay_d)(bits, wave, r, c) == want


def _pack(regs: dict, base: int, wave: int, cells) -> None:
  """Place values into per-lane VGPR inputs: cells yields ((VGPR, lane, low bit), bits, value)."""
  for (v, lane, lo), bits, val in cells:
    row = regs.setdefault(base + v, [0] * wave)
    row[lane] |= (int(val) & ((1 << bits) - 1)) << lo


@pytest.mark.parametrize("wave", [32, 64])
def test_wmma_f32_f16_with_gfx12_layouts_matches_numpy(wave):
  rng = np.random.default_rng(12)
  A, B = rng.standard_normal((2, 16, 16)).astype(np.float16)
  C = rng.standard_normal((16, 16)).astype(np.float32)
  v: dict = {}
  _pack(v, 0, wave, ((lay_ab(16, wave, i, k), 16, A[i, k].view(np.uint16)) for i in range(16) for k in range(16)))
  _pack(v, 4, wave, ((lay_ab(16, wave, j, k), 16, B[k, j].view(np.uint16)) for j in range(16) for k in range(16)))
  _pack(v, 8, wave, ((lay_d(32, wave, m, n), 32, C[m, n].view(np.uint32)) for m in range(16) for n in range(16)))
  nd = 8 if wave == 32 else 4
  na = 4 if wave == 32 else 2
  body = f"v_wmma_f32_16x16x16_f16 v[16:{15 + nd}], v[0:{na - 1}], v[4:{3 + na}], v[8:{7 + nd}]"
  r = run_wave(body, v=v, vout=tuple(range(16, 16 + nd)), wave64=wave == 64, target=T)
  D = np.array([[r.v[16 + lay_d(32, wave, m, n)[0]][lay_d(32, wave, m, n)[1]] for n in range(16)] for m in range(16)], np.uint32)
  np.testing.assert_array_equal(D.view(np.float32), (A.astype(np.float64) @ B.astype(np.float64) + C).astype(np.float32))


def test_wmma_f16_results_are_packed_and_iu8_signedness_from_neg():
  rng = np.random.default_rng(13)
  A, B = rng.standard_normal((2, 16, 16)).astype(np.float16)
  v: dict = {}
  _pack(v, 0, 32, ((lay_ab(16, 32, i, k), 16, A[i, k].view(np.uint16)) for i in range(16) for k in range(16)))
  _pack(v, 4, 32, ((lay_ab(16, 32, j, k), 16, B[k, j].view(np.uint16)) for j in range(16) for k in range(16)))
  r = run_wave("v_wmma_f16_16x16x16_f16 v[16:19], v[0:3], v[4:7], 0", v=v, vout=(16, 17, 18, 19), target=T)
  D = np.array([[(int(r.v[16 + (c := lay_d(16, 32, m, n))[0]][c[1]]) >> c[2]) & 0xFFFF for n in range(16)] for m in range(16)], np.uint16)
  np.testing.assert_array_equal(D.view(np.float16), (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float16))
  Ai = rng.integers(-128, 128, (16, 16))
  Bi = rng.integers(0, 256, (16, 16))
  v = {}
  _pack(v, 0, 32, ((lay_ab(8, 32, i, k), 8, Ai[i, k]) for i in range(16) for k in range(16)))
  _pack(v, 2, 32, ((lay_ab(8, 32, j, k), 8, Bi[k, j]) for j in range(16) for k in range(16)))
  r = run_wave("v_wmma_i32_16x16x16_iu8 v[8:15], v[0:1], v[2:3], 0 neg_lo:[1,0,0]", v=v, vout=tuple(range(8, 16)), target=T)
  D = np.array([[r.v[8 + lay_d(32, 32, m, n)[0]].view(np.int32)[lay_d(32, 32, m, n)[1]] for n in range(16)] for m in range(16)])
  np.testing.assert_array_equal(D, Ai @ Bi)
