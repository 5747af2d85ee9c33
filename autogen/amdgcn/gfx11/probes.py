"""How autogen/amdgcn/gen.py probes gfx11 instructions through LLVM's disassembler: the operand fields of each
family and the probe values they start from (distinct per field, aligned to 4 registers so 64..512-bit register tuples
stay aligned), the alternatives tried when LLVM rejects them, the modifier fields swept bit by bit, and the words whose
printing names the symbolic immediates. Field layouts: encodings.py."""
from __future__ import annotations
from autogen.amdgcn.gfx11 import encodings

OPERAND_FIELDS = {   # family -> {field: kind}; kinds: src9/ssrc8 (register or constant), vgpr8, sgpr7
  "SOP2": {"sdst": "sgpr7", "ssrc0": "ssrc8", "ssrc1": "ssrc8"}, "SOP1": {"sdst": "sgpr7", "ssrc0": "ssrc8"},
  "SOPC": {"ssrc0": "ssrc8", "ssrc1": "ssrc8"}, "SOPK": {"sdst": "sgpr7", "simm16": "imm"}, "SOPP": {"simm16": "imm"},
  "SMEM": {"sdata": "sgpr7", "sbase": "sbase", "soffset": "sgpr7"},
  "VOP1": {"vdst": "vgpr8", "src0": "src9"}, "VOP2": {"vdst": "vgpr8", "src0": "src9", "vsrc1": "vgpr8"},
  "VOPC": {"src0": "src9", "vsrc1": "vgpr8"},
  "VOP3": {"vdst": "vgpr8", "src0": "src9", "src1": "src9", "src2": "src9", "sdst": "sgpr7"},
  "VOP3P": {"vdst": "vgpr8", "src0": "src9", "src1": "src9", "src2": "src9"},
  "VINTERP": {"vdst": "vgpr8", "src0": "src9", "src1": "src9", "src2": "src9"}, "LDSDIR": {"vdst": "vgpr8"},
  "DS": {"addr": "vgpr8", "data0": "vgpr8", "data1": "vgpr8", "vdst": "vgpr8"},
  "FLAT": {"addr": "vgpr8", "data": "vgpr8", "saddr": "sgpr7", "vdst": "vgpr8"},
  "MUBUF": {"vaddr": "vgpr8", "vdata": "vgpr8", "srsrc": "srsrc", "soffset": "ssrc8"},
  "MTBUF": {"vaddr": "vgpr8", "vdata": "vgpr8", "srsrc": "srsrc", "soffset": "ssrc8"},
  "EXP": {"vsrc0": "vgpr8", "vsrc1": "vgpr8", "vsrc2": "vgpr8", "vsrc3": "vgpr8"},
}
# probe values per family
BASE = {
  "SOP2": dict(sdst=16, ssrc0=32, ssrc1=48), "SOP1": dict(sdst=16, ssrc0=32), "SOPC": dict(ssrc0=32, ssrc1=48),
  "SOPK": dict(sdst=16, simm16=0x1234), "SOPP": dict(simm16=0),
  "SMEM": dict(sdata=16, sbase=16, soffset=48, offset=0x10),
  "VOP1": dict(vdst=40, src0=0x10a), "VOP2": dict(vdst=40, src0=0x10a, vsrc1=20), "VOPC": dict(src0=0x10a, vsrc1=20),
  "VOP3": dict(vdst=40, src0=0x10a, src1=0x114, src2=0x11e), "VINTERP": dict(vdst=40, src0=0x10a, src1=0x114, src2=0x11e),
  "VOP3P": dict(vdst=40, src0=0x10a, src1=0x114, src2=0x11e, opsel_hi=3, opsel_hi2=1), "LDSDIR": dict(vdst=40),
  "DS": dict(addr=12, data0=20, data1=28, vdst=40), "FLAT": dict(addr=12, data=20, saddr=encodings.NULL, vdst=40),
  "MUBUF": dict(vaddr=12, vdata=20, srsrc=4, soffset=32), "MTBUF": dict(vaddr=12, vdata=20, srsrc=4, soffset=32, format=1),
  "EXP": dict(vsrc0=12, vsrc1=20, vsrc2=28, vsrc3=36, en=15),
}
# sub-families: FLAT's seg field selects FLAT/SCRATCH/GLOBAL; a VOPD half is probed with v_dual_mov_b32 as the other
PSEUDO = {"SCRATCH": ("FLAT", {"seg": 1}), "GLOBAL": ("FLAT", {"seg": 2}),
          "VOPDX": ("VOPD", {"opy": 8, "src0y": 0x10D, "vdsty": 15, "vdstx": 30}),
          "VOPDY": ("VOPD", {"opx": 8, "src0x": 0x10A, "vdsty": 15, "vdstx": 30})}
OPFIELD = {"VOPDX": "opx", "VOPDY": "opy"}
OPERAND_FIELDS.update(SCRATCH={"addr": "vgpr8", "data": "vgpr8", "saddr": "sgpr7", "vdst": "vgpr8"},
                      GLOBAL={"addr": "vgpr8", "data": "vgpr8", "saddr": "sgpr7", "vdst": "vgpr8"},
                      VOPDX={"vdstx": "vgpr8", "src0x": "src9", "vsrc1x": "vgpr8"},
                      VOPDY={"vdsty": "vgpr8", "src0y": "src9", "vsrc1y": "vgpr8"})
BASE.update(SCRATCH=dict(addr=12, data=20, saddr=32, vdst=40), GLOBAL=dict(addr=12, data=20, saddr=32, vdst=40),
            VOPDX=dict(src0x=0x10A, vsrc1x=20), VOPDY=dict(src0y=0x10D, vsrc1y=23))
# alternative base values tried when LLVM rejects the first (e.g. v_cmpx_*_e64 requires vdst = exec_lo)
RETRY = {"VOP3": [dict(vdst=encodings.EXEC_LO), dict(vdst=16)], "FLAT": [dict(saddr=32), dict(saddr=32, sve=1)],
         "DS": [dict(gds=1)], "SOPK": [dict(sdst=encodings.NULL)], "SOP1": [dict(sdst=encodings.NULL), dict(ssrc0=0)],
         "VOP1": [dict(vdst=0, src0=0)],
         "SCRATCH": [dict(saddr=encodings.NULL), dict(saddr=encodings.NULL, sve=1), dict(sve=1)], "GLOBAL": [dict(saddr=encodings.NULL)],
         "VOPDX": [dict(vsrc1x=0)], "VOPDY": [dict(vsrc1y=0)]}
MOD_FIELDS = {  # modifier fields whose effect is probed bit by bit (VOP3P probes start from opsel_hi = all ones)
  "VOP3": ("neg", "abs", "opsel", "clmp", "omod"), "VOP3SD": ("neg", "clmp", "omod"),
  "VOP3P": ("neg", "neg_hi", "opsel", "opsel_hi", "opsel_hi2", "clmp"), "VINTERP": ("neg", "opsel", "clmp"),
}
DPP_PROBE = 0xFF00E400   # DPP16 dword: quad_perm identity, all rows and banks enabled
# the families swept, in table order
FAMILIES = ("SOP2", "SOPK", "SOP1", "SOPC", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3P", "VOPDX", "VOPDY",
            "VINTERP", "LDSDIR", "DS", "FLAT", "SCRATCH", "GLOBAL", "MUBUF", "MTBUF", "EXP")
# symbolic immediates: name -> (values, words encoding an instruction that prints value v symbolically); s_getreg_b32
# (hwreg), s_sendmsg, s_version, exp (targets), tbuffer_load_format_x (formats)
SYMBOL_WORDS = {
  "HWREG": (range(64), lambda i: [0xB8800000 | 31 << 11 | i]), "SENDMSG": (range(256), lambda i: [0xBFB60000 | i]),
  "VERSION": (range(256), lambda i: [0xB0800000 | i]), "EXP_TARGET": (range(64), lambda i: [0xF8000000 | i << 4, 0]),
  "BUF_FORMAT": (range(128), lambda i: [0xE8000000 | i << 19, 0]),
}
