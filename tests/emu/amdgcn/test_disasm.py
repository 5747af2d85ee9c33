"""Disassembler output for hand-encoded words, in LLVM 22's syntax (reference texts: llvm-mc-22 -mcpu=gfx1100
--show-encoding, and LLVM's gfx11 conventions for true16, lit() and DPP)."""
import struct
from emu.amdgcn.disasm import disasm


def w(*words: int) -> bytes:
  return struct.pack(f"<{len(words)}I", *words)


def test_toolchain_reference_listing():
  code = bytes.fromhex("0105000681008 0be0000 52dc00000001 0082 03d5 01050220 0101 08ca 040b0200 f70389bf 0000b0bf".replace(" ", ""))
  assert disasm(code) == ["v_add_f32_e32 v0, v1, v2", "s_mov_b32 s0, 1", "global_load_b32 v1, v0, s[0:1]",
                          "v_add_f32_e64 v0, -v1, |v2| clamp", "v_dual_mov_b32 v0, v1 :: v_dual_add_f32 v3, v4, v5",
                          "s_waitcnt vmcnt(0)", "s_endpgm"]


def test_literals_and_inline_constants():
  assert disasm(w(0x7E0202FF, 0x12345678)) == ["v_mov_b32_e32 v1, 0x12345678"]
  assert disasm(w(0x7E0202FF, 0x3F800000)) == ["v_mov_b32_e32 v1, lit(0x3f800000)"]   # 1.0 could have been inline
  assert disasm(w(0x7E0202F8)) == ["v_mov_b32_e32 v1, 0.15915494"]                    # 1/(2*pi)
  assert disasm(w(0xD7270005, 0x000204F8)) == ["v_add_f64 v[5:6], 0.15915494309189532, v[2:3]"]


def test_true16_halves():
  assert disasm(w(0x640A04FF, 0x3C00)) == ["v_add_f16_e32 v5.l, lit(0x3c00), v2.l"]
  assert disasm(w(0x640B04FF, 0x3C00)) == ["v_add_f16_e32 v5.l, lit(0x3c00), v2.h"]   # vsrc1 bit 7: high half
  assert disasm(w(0xD5320805, 0x00020501)) == ["v_add_f16_e64 v5.l, v1.h, v2.l op_sel:[1,0,0]"]


def test_dpp_forms():
  assert disasm(w(0x7E0202FA, 0xFF08B102)) == ["v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf bound_ctrl:1"]
  assert disasm(w(0x06020AEA, 0x00FAC688)) == ["v_add_f32_dpp v1, v136, v5 dpp8:[6,0,3,5,7,1,0,0] fi:1"]
  assert disasm(w(0x06020AFA, 0xFF015F02)) == ["v_add_f32_dpp v1, v2, v5 row_share:15 row_mask:0xf bank_mask:0xf"]


def test_scalar_symbolic_immediates():
  assert disasm(w(0xBF890007)) == ["s_waitcnt vmcnt(0) lgkmcnt(0)"]
  assert disasm(w(0xBF870091)) == ["s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)"]
  assert disasm(w(0xBFB60001)) == ["s_sendmsg sendmsg(MSG_INTERRUPT)"]
  assert disasm(w(0xB8801841)) == ["s_getreg_b32 s0, hwreg(HW_REG_MODE, 1, 4)"]



def test_misaligned_register_tuples_print_the_instruction_only():
  # hardware ignores the low bits; LLVM prints the aligned tuple, and llvm-mc / llvm-objdump print no warning text
  assert disasm(w(0xBE800101)) == ["s_mov_b64 s[0:1], s[0:1]"]
  assert disasm(w(0x92893F09)) == ["s_or_not1_b64 s[8:9], s[8:9], s[62:63]"]
