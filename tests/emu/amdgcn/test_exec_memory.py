"""Memory instructions (DS, GLOBAL, FLAT, SCRATCH, MUBUF) and memory-fault reporting.
Facts: RDNA3 ISA guide chapters 10-12."""
import numpy as np
import pytest
from exec_helpers import run_wave, assemble, read
from emu.amdgcn import Memory, run, WaveFault, WaveTrap, InstructionLimit

M32 = 0xFFFFFFFF


def col(r, reg, n=32): return [int(x) for x in r.v[reg][:n]]


def test_ds_offsets_and_2addr_scaling():               # fact 43
  r = run_wave("""
    v_lshlrev_b32 v1, 2, v0
    ds_store_b32 v1, v0 offset:256
    v_add_nc_u32 v2, 1000, v0
    ds_store_2addr_b32 v1, v2, v0 offset0:2 offset1:3
    ds_store_2addr_stride64_b32 v1, v2, v2 offset0:1 offset1:2
    s_waitcnt lgkmcnt(0)
    ds_load_b32 v3, v1 offset:256
    ds_load_2addr_b32 v[4:5], v1 offset0:2 offset1:3
    ds_load_2addr_stride64_b32 v[6:7], v1 offset0:1 offset1:2
    v_mov_b32 v8, v1
    ds_load_2addr_b32 v[8:9], v8 offset1:64
    s_waitcnt lgkmcnt(0)""", v={0: list(range(32))}, vout=(3, 4, 5, 6, 7, 8, 9), lds=4096)
  assert col(r, 3) == [1000 + l for l in range(32)]               # the stride64 store overwrote offset 256
  # lane l wrote 1000+l at byte 4l+8 and l at 4l+12, so lane l reads lane l+2 / l+3's values where they overlap
  assert col(r, 4, 2) == [1000, 1001] and col(r, 5, 1) == [1000 + 1]
  assert col(r, 6, 4) == [1000, 1001, 1002, 1003] and col(r, 7, 4) == [1000, 1001, 1002, 1003]
  assert col(r, 8, 3)[2] == 1000 and col(r, 9, 3)[2] == 1002   # 2ADDR load reads the address before writing v8


def test_ds_64bit_and_2addr_b64():
  r = run_wave("""
    v_lshlrev_b32 v1, 4, v0
    v_mov_b32 v2, v0
    v_not_b32 v3, v0
    ds_store_b64 v1, v[2:3]
    ds_store_2addr_b64 v1, v[2:3], v[2:3] offset0:64 offset1:65
    s_waitcnt lgkmcnt(0)
    ds_load_b64 v[4:5], v1
    ds_load_2addr_stride64_b64 v[6:9], v1 offset0:1 offset1:1
    ds_load_b128 v[10:13], v1
    s_waitcnt lgkmcnt(0)""", v={0: list(range(32))}, vout=(4, 5, 6, 7, 8, 9, 10, 11), lds=8192)
  assert col(r, 4, 3) == [0, 1, 2] and col(r, 5, 1) == [M32]
  assert col(r, 6, 2) == [0, 1] and col(r, 8, 2) == [0, 1]
  assert col(r, 10, 2) == [0, 1] and col(r, 11, 1) == [M32]


def test_ds_d16_loads_keep_the_other_half_and_d16_hi_stores_take_the_high_half():
  # RDNA3 ISA guide, DS opcodes: *_D16 loads write bits 15:0 of vdst and *_D16_HI loads bits 31:16, the other half
  # kept (i8: sign-extended to 16 bits); STORE_B8_D16_HI / STORE_B16_D16_HI store DATA[23:16] / DATA[31:16]
  body = ["v_mov_b32 v1, 0", "v_mov_b32 v2, 0x11111111", "ds_store_b32 v1, v2", "v_mov_b32 v2, 0x22222222",
          "ds_store_b32 v1, v2 offset:4", "v_mov_b32 v2, 0x80FF1122", "ds_store_b32 v1, v2 offset:8", "v_mov_b32 v2, 0xAABBCCDD",
          "ds_store_b16_d16_hi v1, v2 offset:1", "ds_store_b8_d16_hi v1, v2 offset:4"]
  loads = [("u8_d16", 11), ("u8_d16_hi", 11), ("i8_d16", 11), ("i8_d16_hi", 11), ("u16_d16", 10), ("u16_d16_hi", 10)]
  for k, (kind, off) in enumerate(loads): body += [f"v_mov_b32 v{3 + k}, 0x1234abcd", f"ds_load_{kind} v{3 + k}, v1 offset:{off}"]
  body += ["ds_load_b32 v10, v1", "ds_load_b32 v11, v1 offset:4", "s_waitcnt lgkmcnt(0)"]
  r = run_wave("\n".join(body), vout=(3, 4, 5, 6, 7, 8, 10, 11), lds=64, exec_mask=1)
  assert [col(r, k, 1)[0] for k in range(3, 9)] == [0x12340080, 0x0080ABCD, 0x1234FF80, 0xFF80ABCD, 0x123480FF, 0x80FFABCD]
  assert col(r, 10, 1) == [0x11AABB11] and col(r, 11, 1) == [0x222222BB]

def test_ds_atomics_and_rtn():                        # facts 43, 44
  r = run_wave("""
    v_mov_b32 v1, 0
    v_mov_b32 v2, 5
    ds_store_b32 v1, v2
    ds_store_b32 v1, v2 offset:4
    ds_store_b32 v1, v1 offset:8
    s_waitcnt lgkmcnt(0)
    v_mov_b32 v3, 77
    ds_add_u32 v1, v0
    ds_inc_rtn_u32 v4, v1, v2 offset:4
    ds_dec_rtn_u32 v5, v1, v2 offset:8
    ds_max_rtn_i32 v6, v1, v0 offset:12
    ds_cmpstore_rtn_b32 v7, v1, v0, v1 offset:16
    s_waitcnt lgkmcnt(0)
    ds_load_b32 v8, v1
    ds_load_b32 v9, v1 offset:4
    ds_load_b32 v10, v1 offset:16
    s_waitcnt lgkmcnt(0)""", v={0: list(range(32))}, vout=(3, 4, 5, 6, 7, 8, 9, 10), lds=256)
  assert col(r, 3, 1) == [77]                                  # non-RTN atomics leave vdst alone
  assert col(r, 8, 1) == [5 + sum(range(32))]
  # inc: mem = mem >= 5 ? 0 : mem + 1, in lane order from 5
  seq, m = [], 5
  for _ in range(32): seq.append(m); m = 0 if m >= 5 else m + 1
  assert col(r, 4) == seq and col(r, 9, 1) == [m]
  seq, m = [], 0
  for _ in range(32): seq.append(m); m = 5 if m == 0 or m > 5 else m - 1
  assert col(r, 5) == seq
  assert col(r, 6, 3) == [0, 0, 1]
  assert col(r, 7, 3) == [0, 0, 1] and col(r, 10, 1) == [1]    # cmpstore: data0 = new value, data1 = compare value


def test_ds_permute_bpermute_swizzle():
  r = run_wave("""
    v_sub_nc_u32 v1, 31, v0
    v_lshlrev_b32 v1, 2, v1
    v_mul_u32_u24 v2, v0, 10
    ds_permute_b32 v3, v1, v2
    ds_bpermute_b32 v4, v1, v2
    ds_swizzle_b32 v5, v2 offset:swizzle(QUAD_PERM, 1, 0, 3, 2)
    ds_swizzle_b32 v6, v2 offset:swizzle(BITMASK_PERM, "01pip")
    s_waitcnt lgkmcnt(0)""", v={0: list(range(32))}, vout=(3, 4, 5, 6))
  assert col(r, 3) == [(31 - l) * 10 for l in range(32)] and col(r, 4) == [(31 - l) * 10 for l in range(32)]
  assert col(r, 5, 4) == [10, 0, 30, 20]
  assert col(r, 6) == [(((l & 0b00111) | 0b01000) ^ 0b00010 | (l & 0b100000)) * 10 for l in range(32)]   # and/or/xor masks


def test_lds_shared_across_waves_with_barrier():      # fact 46
  mem = Memory()
  code = assemble("""
    v_lshlrev_b32 v1, 2, v0
    ds_store_b32 v1, v0
    s_waitcnt lgkmcnt(0)
    s_barrier
    v_sub_nc_u32 v2, 127, v0
    v_lshlrev_b32 v2, 2, v2
    ds_load_b32 v3, v2
    s_waitcnt lgkmcnt(0)
    s_barrier
    ds_store_b32 v1, v3
    s_waitcnt lgkmcnt(0)
    s_barrier
    ds_load_b32 v4, v2
    s_waitcnt lgkmcnt(0)
    global_store_b32 v1, v4, s[0:1]
    s_endpgm""")
  pc = mem.alloc(len(code)); mem.write(pc, code)
  out = mem.alloc(4 * 128)
  st = run(mem, pc=pc, block=(128, 1, 1), grid=(2, 1, 1), user_sgprs=[out & M32, out >> 32], lds_bytes=512)
  assert st.waves == 8 and list(read(mem, out, np.uint32, 128)) == list(range(128))


def test_global_sub_dword_d16_and_offsets():          # fact 45
  r = run_wave("""
    v_mov_b32 v1, 0
    global_load_u8 v2, v1, s[0:1] offset:3
    global_load_i8 v3, v1, s[0:1] offset:3
    global_load_u16 v4, v1, s[0:1] offset:2
    global_load_i16 v5, v1, s[0:1] offset:2
    v_mov_b32 v6, 0x1234abcd
    global_load_d16_hi_b16 v6, v1, s[0:1]
    v_mov_b32 v7, 0x1234abcd
    global_load_d16_i8 v7, v1, s[0:1] offset:3
    v_mov_b32 v8, s0
    v_mov_b32 v9, s1
    global_load_b32 v10, v[8:9], off offset:4
    s_add_u32 s4, s0, 16
    s_addc_u32 s5, s1, 0
    global_load_b32 v11, v1, s[4:5] offset:-12
    s_waitcnt vmcnt(0)""", v={0: [0x80FF1122, 0x55667788]}, vout=(2, 3, 4, 5, 6, 7, 10, 11), exec_mask=1)
  assert col(r, 2, 1) == [0x80] and col(r, 3, 1) == [0xFFFFFF80] and col(r, 4, 1) == [0x80FF] and col(r, 5, 1) == [0xFFFF80FF]
  assert col(r, 6, 1) == [0x1122ABCD] and col(r, 7, 1) == [0x1234FF80]
  assert col(r, 10, 1) == [0x55667788] and col(r, 11, 1) == [0x55667788]
  # a 16-bit store at byte offset 3 spans two dwords
  r = run_wave("""
    v_mov_b32 v1, 3
    v_mov_b32 v2, 0xAABBCCDD
    global_store_b16 v1, v2, s[0:1]
    global_store_d16_hi_b8 v1, v2, s[0:1] offset:4
    s_waitcnt vmcnt(0)
    v_mov_b32 v1, 0
    global_load_b32 v3, v1, s[0:1]
    global_load_b32 v4, v1, s[0:1] offset:4
    global_load_b128 v[8:11], v1, s[0:1]
    s_waitcnt vmcnt(0)""", v={0: [0x11111111, 0x22222222], 5: [0x33333333, 0x44444444]}, vout=(3, 4, 8, 9, 10, 11), exec_mask=1)
  assert col(r, 3, 1) == [0xDD111111] and col(r, 4, 1) == [0xBB2222CC]
  assert col(r, 8, 1) == [0xDD111111] and col(r, 9, 1) == [0xBB2222CC]


def test_global_atomics_lane_order_and_returns():
  r = run_wave("""
    v_mov_b32 v1, 0
    global_atomic_add_u32 v2, v1, v0, s[0:1] glc
    global_atomic_max_i32 v1, v0, s[0:1] offset:4
    global_atomic_cmpswap_b32 v3, v1, v[4:5], s[0:1] offset:8 glc
    global_atomic_add_f32 v1, v6, s[0:1] offset:12
    global_atomic_inc_u32 v7, v1, v8, s[0:1] offset:16 glc
    s_waitcnt vmcnt(0)
    global_load_b128 v[10:13], v1, s[0:1]
    global_load_b32 v14, v1, s[0:1] offset:16
    s_waitcnt vmcnt(0)""", v={0: list(range(1, 33)), 4: [9] * 32, 5: [0] * 32, 6: [0x3F800000] * 32, 8: [3] * 32},
    vout=(2, 3, 7, 10, 11, 12, 13, 14))
  # the input array starts with v0's lanes (1..32): dword 0 = 1, dword 1 = 2, dword 2 = 3, dword 3 = 4, dword 4 = 5
  assert col(r, 2, 3) == [1, 2, 4]
  assert col(r, 10, 1) == [1 + sum(range(1, 33))] and col(r, 11, 1) == [32]
  assert col(r, 3, 2) == [3, 3] and col(r, 12, 1) == [3]        # compare value 0 never matches 3
  assert col(r, 13, 1) == [np.float32(np.frombuffer(np.uint32(4).tobytes(), np.float32)[0] + 32).view(np.uint32)]
  assert col(r, 7, 5) == [5, 0, 1, 2, 3] and col(r, 14, 1) == [(32 - 1) % 4]


def test_scratch_private_per_lane_and_sve():          # fact 45
  r = run_wave("""
    v_mul_u32_u24 v1, v0, 3
    scratch_store_b32 off, v1, off offset:8
    v_mov_b32 v2, 4
    scratch_store_b32 v2, v0, off offset:8
    s_mov_b32 s4, 12
    scratch_load_b32 v3, off, s4
    scratch_load_b32 v4, off, off offset:8
    scratch_load_b64 v[5:6], v2, off offset:4
    s_waitcnt vmcnt(0)""", v={0: list(range(32))}, vout=(3, 4, 5, 6), scratch=64)
  assert col(r, 3) == list(range(32)) and col(r, 4) == [3 * l for l in range(32)]
  assert col(r, 5) == [3 * l for l in range(32)] and col(r, 6) == list(range(32))


def test_flat_apertures_reach_lds_scratch_and_global():
  r = run_wave("""
    s_mov_b64 s[4:5], src_shared_base
    s_mov_b64 s[6:7], src_private_base
    v_lshlrev_b32 v1, 2, v0
    v_mov_b32 v2, s5
    v_add_nc_u32 v3, 100, v0
    flat_store_b32 v[1:2], v3
    v_mov_b32 v4, 16
    v_mov_b32 v5, s7
    flat_store_b32 v[4:5], v0
    s_waitcnt vmcnt(0) lgkmcnt(0)
    ds_load_b32 v6, v1
    scratch_load_b32 v7, off, off offset:16
    v_mov_b32 v8, s0
    v_mov_b32 v9, s1
    flat_load_b32 v10, v[8:9]
    s_waitcnt vmcnt(0) lgkmcnt(0)""", v={0: list(range(32))}, vout=(6, 7, 10), sout=[5, 7], lds=128, scratch=32)
  assert r.s[5] == 0x10000 and r.s[7] == 0x20000                    # KFD's apertures: LDS at 1 << 48, scratch at 2 << 48
  assert col(r, 6) == [100 + l for l in range(32)] and col(r, 7) == list(range(32)) and col(r, 10) == [0] * 32


def test_buffer_loads_stores_and_out_of_range():
  r = run_wave("""
    s_mov_b32 s4, s0
    s_mov_b32 s5, s1
    s_mov_b32 s6, 16
    s_mov_b32 s7, 0x30000000
    v_lshlrev_b32 v1, 2, v0
    buffer_load_b32 v2, v1, s[4:7], 0 offen
    buffer_load_u16 v3, v1, s[4:7], 0 offen offset:2
    s_mov_b32 s8, 4
    buffer_load_b32 v4, off, s[4:7], s8 offset:4
    buffer_store_b32 v0, v1, s[4:7], 0 offen offset:64
    buffer_atomic_add_u32 v5, v1, s[4:7], 0 offen glc
    s_waitcnt vmcnt(0)
    buffer_load_b32 v6, v1, s[4:7], 0 offen
    s_waitcnt vmcnt(0)""", v={0: list(range(32)), 5: [10] * 32}, vout=(2, 3, 4, 5, 6), exec_mask=0x3F)
  assert col(r, 2, 6) == [0, 1, 2, 3, 0, 0]                    # num_records = 16 bytes: lanes 4+ read 0
  assert col(r, 3, 6) == [0, 0, 0, 0, 0, 0]
  assert col(r, 4, 1) == [2]
  assert col(r, 5, 6) == [0, 1, 2, 3, 10, 10]                  # out-of-range atomics do nothing (vdata unchanged)
  assert col(r, 6, 6) == [10, 11, 12, 13, 0, 0]


# ---- faults ----
def run_code(src: str, **kw):
  mem = Memory()
  code = assemble(src)
  pc = mem.alloc(len(code)); mem.write(pc, code)
  buf = mem.alloc(256)
  return mem, pc, buf, lambda: run(mem, pc=pc, user_sgprs=[buf & M32, buf >> 32], **kw)


def test_global_fault_names_wave_pc_instruction_and_address():
  mem, pc, buf, go = run_code("v_mov_b32 v1, 0\nv_lshlrev_b32 v0, 8, v0\nglobal_load_b32 v2, v0, s[0:1]\ns_endpgm", grid=(2, 1, 1))
  with pytest.raises(WaveFault) as e: go()
  err = e.value
  assert err.pc == pc + 8 and err.address == buf + 256 and err.workgroup == (0, 0, 0) and err.wave == 0
  assert "global_load_b32 v2, v0, s[0:1]" in str(err) and f"{buf + 256:#x}" in str(err) and f"{pc + 8:#x}" in str(err)


def test_store_fault_and_lds_and_scratch_out_of_range():
  _, pc, buf, go = run_code("v_mov_b32 v0, 0\nglobal_store_b32 v0, v0, s[0:1] offset:-4\ns_endpgm")
  with pytest.raises(WaveFault, match="global_store_b32"): go()
  _, pc, buf, go = run_code("v_mov_b32 v0, 60\nds_load_b64 v[2:3], v0\ns_endpgm", lds_bytes=64)
  with pytest.raises(WaveFault, match="LDS address 0x3c .*64 bytes"): go()
  _, pc, buf, go = run_code("scratch_load_b32 v1, off, off offset:16\ns_endpgm", scratch_bytes_per_lane=16)
  with pytest.raises(WaveFault, match="scratch"): go()


def test_smem_fault_and_misaligned_atomic():
  _, pc, buf, go = run_code("s_load_b32 s4, s[0:1], 0x1000\ns_endpgm")
  with pytest.raises(WaveFault, match="s_load_b32"): go()
  _, pc, buf, go = run_code("v_mov_b32 v0, 2\nglobal_atomic_add_u32 v0, v0, s[0:1]\ns_endpgm")
  with pytest.raises(WaveFault, match="misaligned"): go()


def test_trap_halt_jump_to_unmapped_and_instruction_limit():
  _, pc, buf, go = run_code("s_trap 2\ns_endpgm")
  with pytest.raises(WaveTrap, match="s_trap 2"): go()
  _, pc, buf, go = run_code("s_sethalt 1\ns_endpgm")
  with pytest.raises(WaveTrap, match="halted"): go()
  _, pc, buf, go = run_code("s_mov_b32 s2, 0\ns_mov_b32 s3, 0x100\ns_setpc_b64 s[2:3]")
  with pytest.raises(WaveFault, match="unmapped"): go()
  _, pc, buf, go = run_code("l:\ns_branch l", max_instructions=10000)
  with pytest.raises(InstructionLimit): go()


def test_running_off_the_end_reports_the_pc():
  mem = Memory()
  code = assemble("v_mov_b32 v0, 1\ns_code_end")   # s_code_end is the padding LLVM puts after the last function
  pc = mem.alloc(len(code)); mem.write(pc, code)
  with pytest.raises(WaveTrap, match="s_code_end") as e: run(mem, pc=pc)
  assert e.value.pc == pc + 4


def test_register_range_past_the_file_is_reported():
  from exec_helpers import raw
  mem = Memory()
  code = assemble(raw("global_load_b128 v[250:253], v0, s[0:1]", 0, 4 << 24) + "\ns_endpgm")   # vdst v254: v[254:257]
  pc = mem.alloc(len(code)); mem.write(pc, code)
  with pytest.raises(WaveTrap, match="v256 is outside the register file"): run(mem, pc=pc)


def test_waves_are_time_sliced_so_a_spin_wait_on_lds_completes():
  # wave 0 spins until wave 1 (scheduled after it) stores a flag in LDS: no barrier involved
  mem = Memory()
  code = assemble("""
    v_mov_b32 v1, 0
    v_readfirstlane_b32 s4, v0
    s_cmp_eq_u32 s4, 0
    s_cbranch_scc0 writer
  spin:
    ds_load_b32 v2, v1
    s_waitcnt lgkmcnt(0)
    v_readfirstlane_b32 s5, v2
    s_cmp_eq_u32 s5, 0
    s_cbranch_scc1 spin
    s_endpgm
  writer:
    v_mov_b32 v2, 1
    ds_store_b32 v1, v2
    s_endpgm""")
  pc = mem.alloc(len(code)); mem.write(pc, code)
  st = run(mem, pc=pc, block=(64, 1, 1), lds_bytes=64)
  assert st.wave_instructions > 65536


def test_ds_append_returns_the_counter_before_the_wave_added_its_lanes():
  r = run_wave("s_mov_b32 m0, 0\nv_mov_b32 v1, 0\nv_mov_b32 v2, 5\nds_store_b32 v1, v2 offset:8\ns_waitcnt lgkmcnt(0)\n"
               "ds_append v3 offset:8\nds_consume v4 offset:8\ns_waitcnt lgkmcnt(0)\nds_load_b32 v5, v1 offset:8\ns_waitcnt lgkmcnt(0)",
               vout=(3, 4, 5), lds=64, exec_mask=0xFF)
  assert col(r, 3, 2) == [5, 5] and col(r, 4, 1) == [13] and col(r, 5, 1) == [5]
