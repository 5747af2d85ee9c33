"""Scalar ALU, SMEM and control flow (SOP1/SOP2/SOPK/SOPC/SOPP/SMEM) against hand-computed bit patterns.
Facts: RDNA3 ISA guide chapter 4 (scalar ops)."""
import pytest
from exec_helpers import run_wave

M32 = 0xFFFFFFFF


# (instruction, s0, s1, expected s2, expected SCC)
SOP2_CASES = [
  ("s_add_u32", 0xFFFFFFFF, 2, 1, 1), ("s_add_u32", 5, 7, 12, 0),                      # fact 1: SCC = carry-out
  ("s_sub_u32", 1, 2, 0xFFFFFFFF, 1), ("s_sub_u32", 9, 2, 7, 0),
  ("s_add_i32", 0x7FFFFFFF, 1, 0x80000000, 1), ("s_add_i32", 0x80000000, M32, 0x7FFFFFFF, 1), ("s_add_i32", 1, 1, 2, 0),
  ("s_sub_i32", 0x80000000, 1, 0x7FFFFFFF, 1), ("s_sub_i32", 5, 7, 0xFFFFFFFE, 0),
  ("s_max_i32", 5, 5, 5, 0), ("s_max_i32", 6, 5, 6, 1), ("s_max_i32", M32, 1, 1, 0),    # fact 2: strict compare
  ("s_max_u32", 7, 7, 7, 0), ("s_max_u32", M32, 1, M32, 1),
  ("s_min_i32", M32, 1, M32, 1), ("s_min_i32", 3, 3, 3, 0), ("s_min_u32", M32, 1, 1, 0),
  ("s_absdiff_i32", 45, 0x80000001, 0x7FFFFFD4, 1), ("s_absdiff_i32", 0x80000000, 1, 0x7FFFFFFF, 1),   # fact 3
  ("s_absdiff_i32", 4, 4, 0, 0),
  ("s_lshl_b32", 1, 33, 2, 1), ("s_lshr_b32", 0x80000000, 31, 1, 1), ("s_ashr_i32", 0x80000000, 4, 0xF8000000, 1),
  ("s_lshl_b32", 0x80000000, 1, 0, 0),
  ("s_and_b32", 0xF0, 0x3C, 0x30, 1), ("s_or_b32", 0xF0, 0x0F, 0xFF, 1), ("s_xor_b32", 5, 5, 0, 0),
  ("s_nand_b32", M32, M32, 0, 0), ("s_nor_b32", 0, 0, M32, 1), ("s_xnor_b32", 0, M32, 0, 0),
  ("s_and_not1_b32", 0xFF, 0x0F, 0xF0, 1), ("s_or_not1_b32", 0, M32, 0, 0),
  ("s_bfe_u32", 0xABCD1234, (8 << 16) | 4, 0x23, 1), ("s_bfe_i32", 0x00000F00, (4 << 16) | 8, 0xFFFFFFFF, 1),
  ("s_bfe_u32", 0xFFFF, 0, 0, 0),
  ("s_bfm_b32", 4, 8, 0xF00, None), ("s_mul_i32", 0xFFFFFFFE, 3, 0xFFFFFFFA, None),
  ("s_mul_hi_u32", 0x80000000, 4, 2, None), ("s_mul_hi_i32", 0x80000000, 4, 0xFFFFFFFE, None),
  ("s_lshl1_add_u32", 0x80000000, 1, 1, 1), ("s_lshl4_add_u32", 3, 2, 50, 0),
  ("s_pack_ll_b32_b16", 0x1111AAAA, 0x2222BBBB, 0xBBBBAAAA, None), ("s_pack_lh_b32_b16", 0x1111AAAA, 0x2222BBBB, 0x2222AAAA, None),
  ("s_pack_hh_b32_b16", 0x1111AAAA, 0x2222BBBB, 0x22221111, None),
]


@pytest.mark.parametrize("chunk", range(0, len(SOP2_CASES), 16))
def test_sop2_results_and_scc(chunk):
  cases = SOP2_CASES[chunk:chunk + 16]
  body, sout = [], []
  for i, (op, a, b, _, _) in enumerate(cases):
    body += [f"s_mov_b32 s0, {a:#x}", f"s_mov_b32 s1, {b:#x}", "s_mov_b32 s90, 0", "s_cmp_eq_u32 s90, 1",  # SCC = 0
             f"{op} s{10 + i}, s0, s1", f"s_cselect_b32 s{40 + i}, 1, 0"]
    sout += [10 + i, 40 + i]
  r = run_wave("\n".join(body), sout=sout)
  for i, (op, a, b, want, scc) in enumerate(cases):
    assert r.s[10 + i] == want, f"{op} {a:#x} {b:#x}: got {r.s[10 + i]:#x}, want {want:#x}"
    if scc is not None: assert r.s[40 + i] == scc, f"{op} {a:#x} {b:#x}: SCC {r.s[40 + i]}, want {scc}"
    else: assert r.s[40 + i] == 0, f"{op} must not write SCC"


def test_carry_chain_addc_subb():
  r = run_wave("s_add_u32 s0, -1, 1\ns_addc_u32 s1, 0, 0\ns_sub_u32 s2, 0, 1\ns_subb_u32 s3, 5, 0\ns_subb_u32 s4, 0, 0",
               sout=[0, 1, 2, 3, 4])
  assert (r.s[0], r.s[1], r.s[2], r.s[3], r.s[4]) == (0, 1, M32, 4, 0)
  assert r.scc == 0


def test_null_sdst_discards_result_but_writes_scc():   # fact 4
  r = run_wave("s_mov_b32 s5, 7\ns_add_u32 null, -1, 2\ns_mov_b32 s6, null", sout=[5, 6])
  assert r.scc == 1 and r.s[5] == 7 and r.s[6] == 0


def test_64bit_operand_literals_and_constants():       # fact 5
  r = run_wave("s_mov_b64 s[0:1], 0xffffffff\ns_mov_b64 s[2:3], -1\ns_mov_b64 s[4:5], 1.0\ns_mov_b64 s[6:7], 0.5",
               sout=[0, 1, 2, 3, 4, 5, 6, 7])
  assert (r.s[0], r.s[1]) == (M32, 0)
  assert (r.s[2], r.s[3]) == (M32, M32)
  assert (r.s[4], r.s[5]) == (0, 0x3FF00000)
  assert (r.s[6], r.s[7]) == (0, 0x3FE00000)


def test_bitset_uses_low_bits_and_bfe_i64_sign_extends():   # fact 6
  r = run_wave("s_mov_b32 s0, 0\ns_bitset1_b32 s0, 37\ns_mov_b32 s1, -1\ns_bitset0_b32 s1, 31\n"
               "s_mov_b64 s[2:3], 0x80\ns_bfe_i64 s[4:5], s[2:3], 0x40004", sout=[0, 1, 4, 5])
  assert r.s[0] == 1 << 5 and r.s[1] == 0x7FFFFFFF
  assert (r.s[4], r.s[5]) == (0xFFFFFFF8, M32)     # bits [7:4] of 0x80 = 0b1000: the field sign bit is set -> -8


def test_sop1_bit_ops():
  r = run_wave("s_mov_b32 s0, 0x00F0\ns_brev_b32 s1, s0\ns_bcnt1_i32_b32 s2, s0\ns_ctz_i32_b32 s3, s0\ns_clz_i32_u32 s4, s0\n"
               "s_ctz_i32_b32 s5, 0\ns_cls_i32 s6, -1\ns_cls_i32 s7, 0x40000000\ns_sext_i32_i8 s8, 0x80\ns_sext_i32_i16 s9, 0x8000\n"
               "s_abs_i32 s10, 0x80000000\ns_wqm_b32 s11, 0x11\ns_quadmask_b32 s12, 0x0F00F010\ns_not_b32 s13, 0\n"
               "s_bitreplicate_b64_b32 s[14:15], 0x80000003\ns_bcnt0_i32_b64 s16, 0",
               sout=list(range(17)))
  s = r.s
  assert s[1] == 0x0F000000 and s[2] == 4 and s[3] == 4 and s[4] == 24 and s[5] == M32 and s[6] == M32 and s[7] == 1
  assert s[8] == 0xFFFFFF80 and s[9] == 0xFFFF8000 and s[10] == 0x80000000 and s[11] == 0xFF
  assert s[12] == 0b01001010 and s[13] == M32 and (s[14], s[15]) == (0xF, 0xC0000000) and s[16] == 64


def test_cmov_cselect_and_sopc():
  r = run_wave("s_mov_b32 s0, 1\ns_cmp_lt_i32 -1, 0\ns_cmov_b32 s0, 5\ns_cselect_b32 s1, 10, 20\n"
               "s_cmp_lt_u32 -1, 0\ns_cselect_b32 s2, 10, 20\ns_bitcmp1_b32 0x10, 4\ns_cselect_b32 s3, 1, 0\n"
               "s_mov_b32 s4, 0\ns_mov_b32 s5, 1\ns_cmp_lg_u64 s[4:5], 0\ns_cselect_b32 s6, 1, 0\ns_bitcmp0_b64 s[4:5], 32\ns_cselect_b32 s7, 1, 0",
               sout=[0, 1, 2, 3, 6, 7])
  assert (r.s[0], r.s[1], r.s[2], r.s[3], r.s[6], r.s[7]) == (5, 10, 20, 1, 1, 0)


def test_sopk():
  r = run_wave("s_movk_i32 s0, 0x8000\ns_mov_b32 s1, 10\ns_addk_i32 s1, 0xfffe\ns_mov_b32 s2, 0x7fffffff\ns_addk_i32 s2, 1\n"
               "s_cselect_b32 s3, 1, 0\ns_mulk_i32 s1, 3\ns_cmpk_eq_u32 s1, 24\ns_cselect_b32 s4, 1, 0\n"
               "s_mov_b32 s5, -1\ns_cmpk_lt_i32 s5, 0\ns_cselect_b32 s6, 1, 0", sout=[0, 1, 2, 3, 4, 6])
  assert r.s[0] == 0xFFFF8000 and r.s[1] == 24 and r.s[2] == 0x80000000 and r.s[3] == 1 and r.s[4] == 1 and r.s[6] == 1


def test_saveexec_family():
  r = run_wave("s_mov_b32 s0, 0xff\ns_and_saveexec_b32 s1, s0\ns_mov_b32 s2, exec_lo\n"
               "s_or_saveexec_b32 s3, 0x100\ns_mov_b32 s4, exec_lo\ns_and_not1_saveexec_b32 s5, -1\ns_cselect_b32 s7, 1, 0\n"
               "s_mov_b32 s6, exec_lo\ns_mov_b32 exec_lo, 0xf0\ns_and_not0_wrexec_b32 s8, 0x30\ns_mov_b32 s9, exec_lo",
               sout=[1, 2, 3, 4, 5, 6, 7, 8, 9], exec_mask=0xFFFF)
  s = r.s
  assert (s[1], s[2], s[3], s[4]) == (0xFFFF, 0xFF, 0xFF, 0x1FF)
  assert s[5] == 0x1FF and s[6] == ~0x1FF & M32 and s[7] == 1
  assert s[8] == 0xC0 and s[9] == 0xC0


def test_branches_and_vccz_uses_vcc_lo_in_wave32():    # fact 7
  body = """
    s_mov_b32 s0, 0
    s_mov_b32 vcc_lo, 0
    s_mov_b32 vcc_hi, 1
    s_cbranch_vccnz skip
    s_add_u32 s0, s0, 1
  skip:
    s_mov_b32 s1, 3
  loop:
    s_add_u32 s0, s0, 10
    s_sub_u32 s1, s1, 1
    s_cmp_lg_u32 s1, 0
    s_cbranch_scc1 loop
    s_mov_b32 exec_lo, 0
    s_cbranch_execz out
    s_add_u32 s0, s0, 1000
  out:
    s_mov_b32 exec_lo, -1
  """
  r = run_wave(body, sout=[0])
  assert r.s[0] == 31


def test_call_return_getpc_setpc_swappc():
  body = """
    s_mov_b32 s10, 0
    s_call_b64 s[30:31], func
    s_add_u32 s10, s10, 100
    s_getpc_b64 s[4:5]
  here:
    s_add_u32 s4, s4, func - here
    s_addc_u32 s5, s5, 0
    s_swappc_b64 s[30:31], s[4:5]
    s_add_u32 s10, s10, 1000
    s_branch done
  func:
    s_add_u32 s10, s10, 1
    s_setpc_b64 s[30:31]
  done:
  """
  r = run_wave(body, sout=[10])
  assert r.s[10] == 1102


def test_smem_loads_offsets_and_soffset():              # fact 8
  data = [i * 3 + 1 for i in range(64)]   # the harness's input array: v0's 32 lanes, then v1's; s[0:1] points at it
  r = run_wave("""
    s_load_b32 s4, s[0:1], 0x8
    s_load_b64 s[6:7], s[0:1], 0x10
    s_mov_b32 s20, 0x40
    s_load_b256 s[8:15], s[0:1], s20 offset:0x4
    s_add_u32 s2, s0, 0x20
    s_addc_u32 s3, s1, 0
    s_load_b32 s16, s[2:3], -0x8
    s_load_b512 s[32:47], s[0:1], 0x80
    s_waitcnt lgkmcnt(0)""", v={0: data[:32], 1: data[32:]}, sout=[4, 6, 7, *range(8, 16), 16, *range(32, 48)])
  assert r.s[4] == data[2] and (r.s[6], r.s[7]) == (data[4], data[5])
  assert [r.s[i] for i in range(8, 16)] == data[17:25]
  assert r.s[16] == data[6]
  assert [r.s[i] for i in range(32, 48)] == data[32:48]


def test_getreg_setreg_mode_and_denorm_mode():
  r = run_wave("s_getreg_b32 s0, hwreg(HW_REG_MODE)\ns_denorm_mode 0xf\ns_getreg_b32 s1, hwreg(HW_REG_MODE, 4, 4)\n"
               "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0\ns_getreg_b32 s2, hwreg(HW_REG_MODE)", sout=[0, 1, 2])
  assert r.s[0] == 0x2C0 and r.s[1] == 0xF and r.s[2] == 0x200


def test_instruction_count_matches_executed_instructions():
  r = run_wave("s_mov_b32 s0, 4\nl:\ns_sub_u32 s0, s0, 1\ns_cmp_lg_u32 s0, 0\ns_cbranch_scc1 l")
  body_only = run_wave("")
  assert r.stats.wave_instructions - body_only.stats.wave_instructions == 1 + 4 * 3


def test_s_buffer_load_reads_zero_past_num_records():
  data = [0x100 + i for i in range(32)]
  r = run_wave("s_mov_b32 s4, s0\ns_and_b32 s5, s1, 0xffff\ns_mov_b32 s6, 12\ns_mov_b32 s7, 0\n"
               "s_buffer_load_b128 s[8:11], s[4:7], 0x4\ns_buffer_load_b32 s12, s[4:7], 0x0\ns_waitcnt lgkmcnt(0)",
               v={0: data}, sout=[8, 9, 10, 11, 12])
  assert [r.s[i] for i in (8, 9, 10, 11)] == [0x101, 0x102, 0, 0] and r.s[12] == 0x100
