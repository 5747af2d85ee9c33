"""RDNA3 (gfx11) instruction encodings: how each family is recognised and where its fields sit.

Hand-written facts (no registry ships AMD's machine-readable ISA): AMD "RDNA3 Instruction Set Architecture"
reference guide, chapter 16 "Microcode Formats", cross-checked bit by bit against LLVM 22's gfx1100
disassembler (autogen/amdgcn/gen.py flips each bit). Field names are the guide's, lowercased. A field is
(dword index, low bit, width); dword 1 is the second dword of a 64-bit encoding.
"""
from __future__ import annotations

F = tuple[int, int, int]

FIELDS: dict[str, dict[str, F]] = {
  "SOP2": {"ssrc0": (0, 0, 8), "ssrc1": (0, 8, 8), "sdst": (0, 16, 7), "op": (0, 23, 7)},
  "SOPK": {"simm16": (0, 0, 16), "sdst": (0, 16, 7), "op": (0, 23, 5)},
  "SOP1": {"ssrc0": (0, 0, 8), "op": (0, 8, 8), "sdst": (0, 16, 7)},
  "SOPC": {"ssrc0": (0, 0, 8), "ssrc1": (0, 8, 8), "op": (0, 16, 7)},
  "SOPP": {"simm16": (0, 0, 16), "op": (0, 16, 7)},
  "SMEM": {"sbase": (0, 0, 6), "sdata": (0, 6, 7), "dlc": (0, 13, 1), "glc": (0, 14, 1), "op": (0, 18, 8),
           "offset": (1, 0, 21), "soffset": (1, 25, 7)},
  "VOP1": {"src0": (0, 0, 9), "op": (0, 9, 8), "vdst": (0, 17, 8)},
  "VOP2": {"src0": (0, 0, 9), "vsrc1": (0, 9, 8), "vdst": (0, 17, 8), "op": (0, 25, 6)},
  "VOPC": {"src0": (0, 0, 9), "vsrc1": (0, 9, 8), "op": (0, 17, 8)},
  "VOP3": {"vdst": (0, 0, 8), "abs": (0, 8, 3), "opsel": (0, 11, 4), "clmp": (0, 15, 1), "op": (0, 16, 10),
           "src0": (1, 0, 9), "src1": (1, 9, 9), "src2": (1, 18, 9), "omod": (1, 27, 2), "neg": (1, 29, 3)},
  "VOP3SD": {"vdst": (0, 0, 8), "sdst": (0, 8, 7), "clmp": (0, 15, 1), "op": (0, 16, 10),
             "src0": (1, 0, 9), "src1": (1, 9, 9), "src2": (1, 18, 9), "omod": (1, 27, 2), "neg": (1, 29, 3)},
  "VOP3P": {"vdst": (0, 0, 8), "neg_hi": (0, 8, 3), "opsel": (0, 11, 3), "opsel_hi2": (0, 14, 1), "clmp": (0, 15, 1),
            "op": (0, 16, 7), "src0": (1, 0, 9), "src1": (1, 9, 9), "src2": (1, 18, 9), "opsel_hi": (1, 27, 2), "neg": (1, 29, 3)},
  "VOPD": {"src0x": (0, 0, 9), "vsrc1x": (0, 9, 8), "opy": (0, 17, 5), "opx": (0, 22, 4),
           "src0y": (1, 0, 9), "vsrc1y": (1, 9, 8), "vdsty": (1, 17, 7), "vdstx": (1, 24, 8)},
  "VINTERP": {"vdst": (0, 0, 8), "waitexp": (0, 8, 3), "opsel": (0, 11, 4), "clmp": (0, 15, 1), "op": (0, 16, 7),
              "src0": (1, 0, 9), "src1": (1, 9, 9), "src2": (1, 18, 9), "neg": (1, 29, 3)},
  "LDSDIR": {"vdst": (0, 0, 8), "attrchan": (0, 8, 2), "attr": (0, 10, 6), "waitvdst": (0, 16, 4), "op": (0, 20, 2)},
  "DS": {"offset0": (0, 0, 8), "offset1": (0, 8, 8), "gds": (0, 17, 1), "op": (0, 18, 8),
         "addr": (1, 0, 8), "data0": (1, 8, 8), "data1": (1, 16, 8), "vdst": (1, 24, 8)},
  "FLAT": {"offset": (0, 0, 13), "dlc": (0, 13, 1), "glc": (0, 14, 1), "slc": (0, 15, 1), "seg": (0, 16, 2), "op": (0, 18, 7),
           "addr": (1, 0, 8), "data": (1, 8, 8), "saddr": (1, 16, 7), "sve": (1, 23, 1), "vdst": (1, 24, 8)},
  "MUBUF": {"offset": (0, 0, 12), "slc": (0, 12, 1), "dlc": (0, 13, 1), "glc": (0, 14, 1), "lds": (0, 16, 1), "op": (0, 18, 8),
            "vaddr": (1, 0, 8), "vdata": (1, 8, 8), "srsrc": (1, 16, 5), "tfe": (1, 21, 1), "offen": (1, 22, 1),
            "idxen": (1, 23, 1), "soffset": (1, 24, 8)},
  "MTBUF": {"offset": (0, 0, 12), "slc": (0, 12, 1), "dlc": (0, 13, 1), "glc": (0, 14, 1), "op": (0, 15, 4), "format": (0, 19, 7),
            "vaddr": (1, 0, 8), "vdata": (1, 8, 8), "srsrc": (1, 16, 5), "tfe": (1, 21, 1), "offen": (1, 22, 1),
            "idxen": (1, 23, 1), "soffset": (1, 24, 8)},
  "MIMG": {"nsa": (0, 0, 1), "dim": (0, 2, 3), "unorm": (0, 7, 1), "dmask": (0, 8, 4), "slc": (0, 12, 1), "dlc": (0, 13, 1),
           "glc": (0, 14, 1), "r128": (0, 15, 1), "a16": (0, 16, 1), "d16": (0, 17, 1), "op": (0, 18, 8),
           "vaddr": (1, 0, 8), "vdata": (1, 8, 8), "srsrc": (1, 16, 5), "tfe": (1, 21, 1), "lwe": (1, 22, 1), "ssamp": (1, 26, 5)},
  "EXP": {"en": (0, 0, 4), "target": (0, 4, 6), "done": (0, 11, 1), "row": (0, 13, 1),
          "vsrc0": (1, 0, 8), "vsrc1": (1, 8, 8), "vsrc2": (1, 16, 8), "vsrc3": (1, 24, 8)},
}
# VOP3SD shares VOP3's opcode space: which opcodes use it is a property of the opcode (taken from the tables).
WORDS = {"SOP2": 1, "SOPK": 1, "SOP1": 1, "SOPC": 1, "SOPP": 1, "VOP1": 1, "VOP2": 1, "VOPC": 1, "LDSDIR": 1}   # others: 2 (MIMG: 2 + NSA)

# Source-operand encodings (9-bit VOP sources; SALU sources are the low 8 bits). Guide section 3.6 / 4.
SGPR_MAX, VCC_LO, VCC_HI, TTMP0, NULL, M0, EXEC_LO, EXEC_HI = 105, 106, 107, 108, 124, 125, 126, 127
INT_CONST_LO, INT_CONST_HI = 128, 208     # 128..192 = 0..64, 193..208 = -1..-16
DPP8, DPP8FI = 233, 234
SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE, PRIVATE_LIMIT, POPS_EXITING_WAVE_ID = 235, 236, 237, 238, 239
FLOAT_CONST_LO, FLOAT_CONST_HI = 240, 248  # 0.5 -0.5 1.0 -1.0 2.0 -2.0 4.0 -4.0 1/(2*pi)
DPP16 = 250
VCCZ, EXECZ, SCC, LDS_DIRECT, LITERAL = 251, 252, 253, 254, 255
VGPR0 = 256


def mimg_vdata(dmask: int, d16: int, tfe: int, gather: bool) -> int:
  """VGPRs of an image result (guide: MIMG VDATA): one per dmask channel (gather4 and msaa_load: always 4), half
  that packed with d16, plus one for the tfe status."""
  n = 4 if gather else max(bin(dmask).count("1"), 1)
  return ((n + 1) // 2 if d16 else n) + tfe


def family(w0: int) -> str | None:
  """Encoding family of an instruction from its first dword (guide ch. 16: the fixed ENCODING bits)."""
  if not w0 >> 31:
    op = (w0 >> 25) & 0x3F
    return "VOP1" if op == 0x3F else "VOPC" if op == 0x3E else "VOP2"
  if w0 >> 30 == 0b10:
    if w0 >> 28 == 0b1011:
      top9 = w0 >> 23
      return {0x17D: "SOP1", 0x17E: "SOPC", 0x17F: "SOPP"}.get(top9, "SOPK")
    return "SOP2"
  top6 = w0 >> 26
  if w0 >> 23 == 0x1A7 and 0x20 <= (w0 >> 16) & 0x7F <= 0x22:
    return "VOP3P"   # LLVM also decodes v_fma_mix* in the GFX9-style VOP3P slot (bits 31:23 = 0x1A7)
  if top6 == 0b110011:   # bits 31:24 (VINTERP), 31:23 (VOP3P), 31:22 (LDSDIR) are the fixed encoding
    if w0 >> 24 == 0xCD: return "VINTERP"
    return "VOP3P" if w0 >> 23 == 0x198 else "LDSDIR" if w0 >> 22 == 0x338 else None
  return {0b110010: "VOPD", 0b110101: "VOP3", 0b110110: "DS", 0b110111: "FLAT", 0b111000: "MUBUF", 0b111010: "MTBUF",
          0b111100: "MIMG", 0b111101: "SMEM", 0b111110: "EXP"}.get(top6)


def get(ws: list[int] | tuple[int, ...], f: F) -> int:
  w, lo, n = f
  return (ws[w] >> lo) & ((1 << n) - 1)


def put(ws: list[int], f: F, v: int) -> None:
  w, lo, n = f
  m = ((1 << n) - 1) << lo
  ws[w] = (ws[w] & ~m) | ((v << lo) & m)


PREFIX = {"SOP2": 0x80000000, "SOPK": 0xB0000000, "SOP1": 0xBE800000, "SOPC": 0xBF000000, "SOPP": 0xBF800000,
          "SMEM": 0xF4000000, "VOP1": 0x7E000000, "VOP2": 0, "VOPC": 0x7C000000, "VOP3": 0xD4000000, "VOP3SD": 0xD4000000,
          "VOP3P": 0xCC000000, "VOPD": 0xC8000000, "VINTERP": 0xCD000000, "LDSDIR": 0xCE000000, "DS": 0xD8000000,
          "FLAT": 0xDC000000, "MUBUF": 0xE0000000, "MTBUF": 0xE8000000, "MIMG": 0xF0000000, "EXP": 0xF8000000}
