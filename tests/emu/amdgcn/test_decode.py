"""Decoder unit tests: words encoded by hand from the RDNA3 ISA guide's field layouts (ch. 16), each checked for
the family, opcode, fields, size, literal/DPP/VOPD parts it must decode to."""
import struct
import pytest
from emu.amdgcn.decode import DecodeError, decode, decode_all, inline_constant, sext, NULL


def w(*words: int) -> bytes:
  return struct.pack(f"<{len(words)}I", *words)


def test_vop2_add_f32_fields():
  # VOP2: op[30:25]=3 (v_add_f32), vdst[24:17]=0, vsrc1[16:9]=2, src0[8:0]=0x101 (v1)
  i = decode(w(3 << 25 | 2 << 9 | 0x101))
  assert (i.enc, i.op, i.opcode, i.size) == ("VOP2", "v_add_f32", 3, 4)
  assert i.fields == {"src0": 0x101, "vsrc1": 2, "vdst": 0}
  assert [(o.field, o.kind, o.bits) for o in i.operands] == [("vdst", "vgpr", 32), ("src0", "src", 32), ("vsrc1", "vgpr", 32)]


def test_sop1_mov_inline_constant():
  i = decode(w(0xBE800000 | 5 << 16 | 0x81))   # s_mov_b32 s5, 1: SOP1 op[15:8]=0, sdst[22:16]=5, ssrc0=129 (1)
  assert (i.enc, i.op, i.size, i.fields["sdst"], i.fields["ssrc0"]) == ("SOP1", "s_mov_b32", 4, 5, 0x81)
  assert inline_constant(i.fields["ssrc0"]) == 1


def test_literal_follows_vop1():
  i = decode(w(0x7E000000 | 1 << 17 | 1 << 9 | 0xFF, 0x12345678))   # v_mov_b32 v1, 0x12345678
  assert (i.op, i.size, i.literal) == ("v_mov_b32", 8, 0x12345678)


def test_missing_literal_is_an_error():
  with pytest.raises(DecodeError, match="literal dword missing"): decode(w(0x7E000000 | 1 << 17 | 1 << 9 | 0xFF))


def test_vop3_modifiers():
  # v_add_f32_e64 v0, -v1, |v2| clamp: op[25:16]=0x103, clmp[15], abs[10:8]=0b010; neg[31:29]=0b001
  i = decode(w(0xD5038200, 0x20020501))
  assert (i.enc, i.op, i.opcode, i.size) == ("VOP3", "v_add_f32", 0x103, 8)
  assert (i.fields["clmp"], i.fields["abs"], i.fields["neg"], i.fields["src0"], i.fields["src1"]) == (1, 2, 1, 0x101, 0x102)


def test_vop3sd_carry_out():
  i = decode(w(0xD4000000 | 0x300 << 16 | 4 << 8, 0x101 | 0x102 << 9))   # v_add_co_u32 v0, s4, v1, v2
  assert (i.enc, i.op, i.fields["sdst"], i.fields["vdst"]) == ("VOP3SD", "v_add_co_u32", 4, 0)
  assert "abs" not in i.fields and [o.field for o in i.operands][:2] == ["vdst", "sdst"]


def test_vopc_promoted_keeps_vop3_enc():
  i = decode(w(0xD4000000 | 0x11 << 16 | 0x6A, 0x101 | 0x102 << 9))   # v_cmp_lt_f32_e64 vcc_lo, v1, v2
  assert (i.enc, i.op) == ("VOP3", "v_cmp_lt_f32")
  assert i.operands[0] == ("vdst", "sgpr", 32, "", "")


def test_vop3p_packed():
  i = decode(w(0xCC000000 | 0xF << 16 | 1 << 14, 0x101 | 0x102 << 9 | 3 << 27))   # v_pk_add_f16 v0, v1, v2
  assert (i.enc, i.op, i.fields["opsel_hi"], i.fields["opsel_hi2"], i.fields["neg_hi"]) == ("VOP3P", "v_pk_add_f16", 3, 1, 0)


def test_dpp16_dword():
  # v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2]: src0=250, then src0[7:0], dpp_ctrl[16:8], bank_mask[27:24], row_mask[31:28]
  i = decode(w(0x7E000000 | 1 << 17 | 1 << 9 | 250, 0xFF00B102))
  assert i.size == 8 and i.literal is None
  assert i.dpp == {"src0": 2, "ctrl": 0xB1, "fi": 0, "bound_ctrl": 0, "src0_neg": 0, "src0_abs": 0, "src1_neg": 0,
                   "src1_abs": 0, "bank_mask": 0xF, "row_mask": 0xF}


def test_dpp8_lane_selects():
  sel = (7, 6, 5, 4, 3, 2, 1, 0)
  dword = 3 | sum(s << (8 + 3 * k) for k, s in enumerate(sel))
  i = decode(w(3 << 25 | 1 << 17 | 2 << 9 | 234, dword))   # v_add_f32_dpp ... dpp8 with fi (src0=234)
  assert (i.op, i.size, i.dpp) == ("v_add_f32", 8, {"src0": 3, "sel": sel, "fi": 1})


def test_vopd_pair():
  # v_dual_mov_b32 v0, v1 :: v_dual_add_f32 v3, v4, v5 (LLVM's own encoding of that text: 01 01 08 ca 04 0b 02 00)
  i = decode(bytes([0x01, 0x01, 0x08, 0xCA, 0x04, 0x0B, 0x02, 0x00]))
  assert (i.enc, i.size) == ("VOPD", 8)
  assert i.vopd == (("v_dual_mov_b32", {"vdst": 0, "src0": 0x101, "vsrc1": 0}),
                    ("v_dual_add_f32", {"vdst": 3, "src0": 0x104, "vsrc1": 5}))


def test_vopd_fmaak_literal():
  i = decode(w(0xC8000000 | 1 << 22 | 8 << 17 | 2 << 9 | 0x101, 4 << 24 | 2 << 17 | 0x103, 0x40490FDB))
  assert (i.size, i.literal, i.vopd[0][0], i.vopd[1][1]["vdst"]) == (12, 0x40490FDB, "v_dual_fmaak_f32", 5)


def test_smem_load():
  i = decode(w(0xF4000000 | 1 << 18 | 2 << 6, NULL << 25 | 0x1FFFF0))   # s_load_b64 s[2:3], s[0:1], -0x10
  assert (i.enc, i.op, i.fields["sdata"], i.fields["sbase"], i.fields["soffset"]) == ("SMEM", "s_load_b64", 2, 0, NULL)
  assert sext(i.fields["offset"], 21) == -0x10


def test_ds_and_flat_segments():
  i = decode(w(0xD8000000 | 0x36 << 18 | 16, 1 << 24))   # ds_load_b32 v1, v0 offset:16
  assert (i.enc, i.op, i.fields["offset0"], i.fields["vdst"]) == ("DS", "ds_load_b32", 16, 1)
  for seg, enc in ((0, "FLAT"), (1, "SCRATCH"), (2, "GLOBAL")):
    i = decode(w(0xDC000000 | 0x14 << 18 | seg << 16, 1 << 24 | NULL << 16))
    assert (i.enc, i.op) == (enc, f"{enc.lower()}_load_b32")
  with pytest.raises(DecodeError, match="seg=3"): decode(w(0xDC000000 | 0x14 << 18 | 3 << 16, 0))


def test_mubuf_fields():
  i = decode(w(0xE0000000 | 0x14 << 18 | 0x123, 0x80 << 24 | 1 << 22 | 1 << 16 | 1 << 8))   # buffer_load_b32 offen
  assert (i.enc, i.op, i.fields["offset"], i.fields["offen"], i.fields["srsrc"], i.fields["soffset"]) == \
    ("MUBUF", "buffer_load_b32", 0x123, 1, 1, 0x80)


def test_sopp_and_sopk():
  i = decode(w(0xBF8903F7))   # s_waitcnt vmcnt(0)
  assert (i.enc, i.op, i.fields["simm16"]) == ("SOPP", "s_waitcnt", 0x3F7)
  i = decode(w(0xB0000000 | 3 << 16 | 0xFFFF))   # s_movk_i32 s3, 0xffff
  assert (i.enc, i.op, sext(i.fields["simm16"], 16)) == ("SOPK", "s_movk_i32", -1)


def test_inline_constants():
  assert inline_constant(248, 64) == 0x3FC45F306DC9C882 and inline_constant(248, 16) == 0x3118
  assert inline_constant(193) == 0xFFFFFFFF and inline_constant(208, 64) == (1 << 64) - 16
  assert inline_constant(242, 32, fp=False) == 0x3F800000 and inline_constant(5) is None


def test_errors_name_offset_and_words():
  with pytest.raises(DecodeError, match=r"offset 0x4: .*opcode 0x3d .*0x7a000000"):
    decode(w(0xBFB00000, 0x7A000000), 4)   # VOP2 opcode 0x3d does not exist
  with pytest.raises(DecodeError, match="dword-aligned"): decode(w(0, 0), 2)


def test_decode_all_walks_sizes():
  prog = w(0x7E0202FF, 0x12345678, 0xD5038200, 0x20020501, 0xBFB00000)
  assert [(i.op, i.size) for i in decode_all(prog)] == [("v_mov_b32", 8), ("v_add_f32", 8), ("s_endpgm", 4)]


def test_sopc_and_vopc():
  i = decode(w(0xBF000000 | 0x10 << 16 | 0x80 << 8 | 2))   # s_cmp_eq_u64 s[2:3], 0: SOPC op[22:16]=0x10
  assert (i.enc, i.op, i.fields) == ("SOPC", "s_cmp_eq_u64", {"ssrc0": 2, "ssrc1": 0x80})
  assert [(o.kind, o.bits) for o in i.operands] == [("src", 64), ("src", 64)]
  i = decode(w(0x7C000000 | 0x11 << 17 | 2 << 9 | 0x101))   # v_cmp_lt_f32_e32 vcc_lo, v1, v2 (VOPC op[24:17])
  assert (i.enc, i.op, i.fields) == ("VOPC", "v_cmp_lt_f32", {"src0": 0x101, "vsrc1": 2})
  assert i.operands[0] == ("", "text", 0, "vcc_lo", "")   # the implicit VCC destination


def test_vinterp_ldsdir_exp():
  # v_interp_p10_f32 v5, v1, v2, v3 wait_exp:2: VINTERP op[22:16]=0, waitexp[10:8]
  i = decode(w(0xCD000000 | 2 << 8 | 5, 0x101 | 0x102 << 9 | 0x103 << 18))
  assert (i.enc, i.op, i.fields["waitexp"], i.fields["src2"], i.size) == ("VINTERP", "v_interp_p10_f32", 2, 0x103, 8)
  i = decode(w(0xCE000000 | 3 << 16 | 4 << 10 | 1 << 8 | 7))   # lds_param_load v7, attr4.y wait_vdst:3 (32-bit)
  assert (i.enc, i.op, i.size, i.fields["attr"], i.fields["attrchan"], i.fields["waitvdst"]) == ("LDSDIR", "lds_param_load", 4, 4, 1, 3)
  i = decode(w(0xF8000000 | 1 << 11 | 12 << 4 | 0xF, 0x04030201))   # exp pos0 v1, v2, v3, v4 done
  assert (i.enc, i.fields["target"], i.fields["done"], i.fields["vsrc3"]) == ("EXP", 12, 1, 4)


def test_mtbuf_format_and_mimg():
  i = decode(w(0xE8000000 | 0x22 << 19 | 1 << 15 | 16, 0x80 << 24 | 2 << 16 | 5 << 8 | 1))   # tbuffer_load_format_xy
  assert (i.enc, i.op, i.fields["format"], i.fields["offset"], i.fields["srsrc"]) == ("MTBUF", "tbuffer_load_format_xy", 0x22, 16, 2)
  # image_sample v[0:3], v[4:5], s[8:15], s[4:7] dmask:0xf dim:2D: op[25:18]=0x1b, dim[4:2]=1; NSA bit 0 adds a dword
  i = decode(w(0xF0000000 | 0x1B << 18 | 0xF << 8 | 1 << 2, 1 << 26 | 2 << 16 | 4))
  assert (i.enc, i.op, i.size, i.fields["dmask"], i.fields["dim"], i.fields["ssamp"]) == ("MIMG", "image_sample", 8, 15, 1, 1)
  i = decode(w(0xF0000000 | 0x1B << 18 | 0xF << 8 | 1 << 2 | 1, 1 << 26 | 2 << 16 | 4, 0x09))
  assert (i.size, i.fields["vaddr"], i.fields["vaddr1"]) == (12, 4, 9)


def test_reserved_source_encodings_rejected():
  with pytest.raises(DecodeError, match="src0 = 209 is a reserved operand encoding"):
    decode(w(0x7E000000 | 1 << 17 | 1 << 9 | 209))   # v_mov_b32 with source code 209 (guide: reserved)
  with pytest.raises(DecodeError, match="sdst = 107"):
    decode(w(0xBE800100 | 107 << 16))                 # s_mov_b64 into vcc_hi: not a register pair
