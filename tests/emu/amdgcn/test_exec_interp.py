"""Pixel parameter interpolation executed the way the AMD "RDNA3.5" ISA guide describes it (gfx11's LDSDIR and VINTERP
are the same): LDS_DIRECT_LOAD (12.4), LDS_PARAM_LOAD's per-quad primitive addressing (12.2.1, 3.4.3) and the
V_INTERP_* FMAs that unpack its quads (12.3); expected values computed independently with numpy."""
import struct
import numpy as np
import pytest
from exec_helpers import run_wave, assemble, f32, f16
from emu.amdgcn import Memory, WaveTrap, dispatch

DEAD = 0xDEADBEEF


def col(r, reg, n=32): return [int(x) for x in r.v[reg][:n]]


def test_lds_direct_load_types_broadcast_per_quad():
  # M0 = {type[18:16], byte address[15:0]}: 0 u8, 1 u16, 2 b32, 4 i8, 5 i16; a quad with one active lane is written whole
  body = ["v_mov_b32 v1, 0", "v_mov_b32 v2, 0x1234f0f0", "ds_store_b32 v1, v2 offset:8", "s_waitcnt lgkmcnt(0)"]
  for k, t in enumerate((0, 1, 2, 4, 5)): body += [f"s_mov_b32 m0, {t << 16 | 8:#x}", f"lds_direct_load v{3 + k}"]
  r = run_wave("\n".join(body + ["s_waitcnt expcnt(0)"]), v={k: DEAD for k in range(3, 8)}, vout=range(3, 8), lds=64,
               exec_mask=0x00000F10)
  quads = [DEAD] * 4 + [1] * 8 + [DEAD] * 20                        # lane 4 -> quad 1, lanes 8-11 -> quad 2
  for reg, val in zip(range(3, 8), (0xF0, 0xF0F0, 0x1234F0F0, 0xFFFFFFF0, 0xFFFFF0F0)):
    assert col(r, reg) == [val if q == 1 else DEAD for q in quads]


@pytest.mark.parametrize("m0", [3 << 16, 6 << 16, 1 << 19 | 2 << 16, 2 << 16 | 2])
def test_lds_direct_load_rejects_reserved_m0(m0):   # types 3, 6, 7 reserved; M0[31:19] zero; dword-aligned address
  with pytest.raises(WaveTrap, match="M0 holds reserved bits"):
    run_wave(f"s_mov_b32 m0, {m0:#x}\nlds_direct_load v1\ns_waitcnt expcnt(0)", lds=64)


def _kernel(mem: Memory, code: bytes, rsrc1: int) -> int:
  """A 64-byte kernel descriptor (wave32, 64 bytes of LDS) with `code` right after it."""
  kd = mem.alloc(256 + len(code))
  mem.write(kd, struct.pack("<IIIIq", 64, 0, 0, 0, 256) + bytes(20) + struct.pack("<IIIH", 0, rsrc1, 0, 1 << 10) + bytes(6))
  mem.write(kd + 256, code)
  return kd


def test_ldsdir_loads_are_not_supported_in_wgp_mode():   # guide 2.3
  code = assemble("s_mov_b32 m0, 0x20000\nlds_direct_load v1\ns_waitcnt expcnt(0)\ns_endpgm")
  mem = Memory()
  dispatch(mem, _kernel(mem, code, 0), (1, 1, 1), (32, 1, 1))
  with pytest.raises(WaveTrap, match="not supported in WGP mode"):
    dispatch(mem, _kernel(mem, code, 1 << 29), (1, 1, 1), (32, 1, 1))


def test_lds_param_load_addresses_primitives_per_quad_and_interpolates():
  # LDS dword i holds float(i). M0: param offset 128, new_prim_mask bit 2: quads 0-1 are primitive 0, quads 2-7
  # primitive 1 (two primitives). attr1.z of primitive p, vertex value k (P0, P10, P20) is dword
  # 128/4 + 1 * 2 * 12 + p * 12 + 4 * k + 2; lane 3 of each quad gets 0. Quad 3 has no active lane (not written),
  # quad 4 only lane 17 (written whole, and read by V_INTERP from its inactive lanes).
  body = ["v_lshlrev_b32 v5, 2, v0", "v_cvt_f32_u32 v6, v0"]
  for k in range(4): body += [f"ds_store_b32 v5, v6 offset:{128 * k}", "v_add_f32 v6, 32.0, v6"]
  exec_ = 0xFFF20FFF
  body += ["s_waitcnt lgkmcnt(0)", f"s_mov_b32 exec_lo, {exec_:#x}", f"s_mov_b32 m0, {1 << 17 | 128:#x}", "lds_param_load v2, attr1.z",
           "s_waitcnt expcnt(0)",
           "v_interp_p10_f32 v7, v2, v3, v2", "v_interp_p2_f32 v8, v2, v4, v7"]
  rng = np.random.default_rng(3)
  i_, j_ = (rng.integers(-16, 16, 32) / 8).astype(np.float32), (rng.integers(-16, 16, 32) / 8).astype(np.float32)
  r = run_wave("\n".join(body), v={2: DEAD, 3: [f32(x) for x in i_], 4: [f32(x) for x in j_], 7: DEAD, 8: DEAD},
               vout=(2, 7, 8), lds=512)
  param = np.zeros(32, np.float32)
  for l in range(32):
    q, k = l // 4, l % 4
    param[l] = 0 if k == 3 else 32 + 24 + (q >= 2) * 12 + 4 * k + 2
  written = [q != 3 for q in range(8) for _ in range(4)]
  assert col(r, 2) == [f32(p) if wr else DEAD for p, wr in zip(param, written)]
  p0, p10, p20 = (np.repeat(param[k::4], 4) for k in range(3))
  tmp = (p10 * i_ + p0).astype(np.float32)                       # exact: small integers times multiples of 1/8
  res = (p20 * j_ + tmp).astype(np.float32)
  active = [exec_ >> l & 1 for l in range(32)]
  assert col(r, 7) == [f32(x) if a else DEAD for x, a in zip(tmp, active)]
  assert col(r, 8) == [f32(x) if a else DEAD for x, a in zip(res, active)]


def test_lds_param_load_rejects_reserved_m0():   # offset[6:0] zero; wave32: new_prim_mask {8'b0, mask[7:1]}
  for m0 in (0x40, 1 << 23, 1 << 31):
    with pytest.raises(WaveTrap, match="M0 holds reserved bits"):
      run_wave(f"s_mov_b32 m0, {m0:#x}\nlds_param_load v1, attr0.x\ns_waitcnt expcnt(0)", lds=256)


def _interp(body: str, quad: list[int], lane: dict) -> object:
  """Run `body` on one quad: v2 holds the packed P0 / P10 / P20 words in lanes 0-2, `lane` the other inputs."""
  return run_wave(body, v={2: quad + [0], **lane}, vout=sorted(set(lane) | {10, 11}), exec_mask=0xF)


def test_interp_f16_halves_neg_and_destination_half():
  # P data as f16 pairs: lane k of the quad holds (low, high); op_sel[0] / [2] pick the high half of src0 / src2,
  # op_sel[3] the destination half of the f16 result (the other half kept); neg flips a source's sign bit
  lo_hi = lambda a, b: f16(a) | f16(b) << 16
  quad = [lo_hi(1.0, 3.0), lo_hi(2.0, -4.0), lo_hi(0.5, 8.0)]          # P0, P10, P20
  i_, j_ = 0.75, -0.25
  r = _interp("v_interp_p10_f16_f32 v10, v2, v3, v2 op_sel:[1,0,1,0]\nv_interp_p2_f16_f32 v11, v2, v4, v10 op_sel:[1,0,0,1]\n"
              "v_interp_p10_f16_f32 v12, -v2, v3, v2\nv_interp_p2_f16_f32 v13, v2, -v4, v12",
              quad, {3: f32(i_), 4: f32(j_), 11: 0x1234, 13: 0xABCD0000, 12: 0})
  tmp_hi = -4.0 * i_ + 3.0
  assert col(r, 10, 4) == [f32(tmp_hi)] * 4
  assert col(r, 11, 4) == [f16(8.0 * j_ + tmp_hi) << 16 | 0x1234] * 4
  tmp_lo = -2.0 * i_ + 1.0
  assert col(r, 12, 4) == [f32(tmp_lo)] * 4 and col(r, 13, 4) == [0xABCD0000 | f16(0.5 * -j_ + tmp_lo)] * 4


def test_interp_f16_result_rounded_once_and_rtz_forms():
  # p2_f16: P20 * J + tmp = 1 + 2^-11 + 2^-40 rounds once to 1 + 2^-10 (rounding tmp + product to f32 first would
  # leave the tie 1 + 2^-11, and even 1.0); the RTZ forms truncate: 1 + 0.75 * 2^-10 -> 1.0 (f16), 1 + 1.5 * 2^-24 -> 1.0 (f32)
  quad = [f16(1.0), f16(1.0), f16(2.0 ** -20)]
  r = _interp("v_interp_p2_f16_f32 v10, v2, v4, v5\nv_interp_p2_rtz_f16_f32 v11, v2, v6, v7\n"
              "v_interp_p10_rtz_f16_f32 v12, v2, v8, v2\nv_interp_p10_f16_f32 v13, v2, v8, v2",
              quad, {4: f32(2.0 ** -20), 5: f32(1 + 2.0 ** -11), 6: f32(0.75 * 2.0 ** -10 / 2.0 ** -20), 7: f32(1.0),
                     8: f32(1.5 * 2.0 ** -24), 12: 0, 13: 0})
  assert [x & 0xFFFF for x in col(r, 10, 4)] == [0x3C01] * 4
  assert r.v[11][0] & 0xFFFF == 0x3C00 and r.v[12][0] == f32(1.0) and r.v[13][0] == f32(1.0) + 1


def test_interp_reads_an_sgpr_barycentric_and_clamps():
  # tinygrad test/amd/hw/test_vinterp.py (gfx1100): src1 may be an SGPR (s2 = 2.0): P10 of lane 1, P0 of lane 0 of
  # each quad. LLVM's assembler refuses an SGPR there, so the word is patched (src1 field, bits 17:9 of dword 1).
  words = struct.unpack("<2I", assemble("v_interp_p10_f32 v4, v1, v3, v5"))
  sgpr = "\n".join(f".long {w:#x}" for w in (words[0], words[1] & ~(0x1FF << 9) | 2 << 9))
  clamp = assemble("v_interp_p10_f32 v6, v1, v3, v5 clamp")
  r = run_wave(f"s_mov_b32 s2, 2.0\n{sgpr}\n" + "\n".join(f".long {w:#x}" for w in struct.unpack("<2I", clamp)),
               v={1: [f32(100.0 + l) for l in range(8)], 5: [f32(10.0 + l) for l in range(8)], 3: f32(-1.0)}, vout=(4, 6), exec_mask=0xFF)
  assert col(r, 4, 8) == [f32(212.0)] * 4 + [f32(224.0)] * 4
  assert col(r, 6, 8) == [0] * 8                                       # 10 - 101 clamped to 0
