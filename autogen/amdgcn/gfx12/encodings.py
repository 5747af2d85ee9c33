"""RDNA4 (gfx12) instruction encodings: how each family is recognised and where its fields sit.

Hand-written facts: AMD "RDNA4 Instruction Set Architecture" reference guide, chapter "Microcode Formats", checked bit by
bit against LLVM 22's gfx1200 disassembler. What differs from gfx11 (gfx11/encodings.py): SMEM's opcode, th/scope
cache controls and 24-bit offset; the 96-bit VFLAT/VGLOBAL/VSCRATCH (family FLAT, seg picks the segment), VBUFFER
(MUBUF / MTBUF by bits 21:18) and VIMAGE / VSAMPLE encodings; DS without gds; LDSDIR (VDSDIR) with wait_vm_vsrc.
The scalar and vector ALU encodings and the operand codes are gfx11's. A field is (dword index, low bit, width).
"""
from __future__ import annotations
from autogen.amdgcn.gfx11.encodings import (F, get, put, SGPR_MAX, VCC_LO, VCC_HI, TTMP0, NULL, M0, EXEC_LO, EXEC_HI,
                                            INT_CONST_LO, INT_CONST_HI, DPP8, DPP8FI, SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE,
                                            PRIVATE_LIMIT, POPS_EXITING_WAVE_ID, FLOAT_CONST_LO, FLOAT_CONST_HI, DPP16, VCCZ,
                                            EXECZ, SCC, LDS_DIRECT, LITERAL, VGPR0, mimg_vdata)
from autogen.amdgcn.gfx11 import encodings as gfx11

__all__ = ["F", "FIELDS", "WORDS", "RESERVED", "PREFIX", "family", "get", "put", "mimg_vdata", "SGPR_MAX", "VCC_LO", "VCC_HI",
           "TTMP0", "NULL", "M0", "EXEC_LO", "EXEC_HI", "INT_CONST_LO", "INT_CONST_HI", "DPP8", "DPP8FI", "SHARED_BASE",
           "SHARED_LIMIT", "PRIVATE_BASE", "PRIVATE_LIMIT", "POPS_EXITING_WAVE_ID", "FLOAT_CONST_LO", "FLOAT_CONST_HI", "DPP16",
           "VCCZ", "EXECZ", "SCC", "LDS_DIRECT", "LITERAL", "VGPR0"]

_CPOL = {"scope": (1, 18, 2), "th": (1, 20, 3)}   # VFLAT / VBUFFER / VIMAGE cache policy: bits 51:50, 54:52
_BUF = {"soffset": (0, 0, 7), "nv": (0, 7, 1), "op": (0, 14, 8), "tfe": (0, 22, 1), "vdata": (1, 0, 8), "srsrc": (1, 11, 5), **_CPOL,
        "offen": (1, 30, 1), "idxen": (1, 31, 1), "vaddr": (2, 0, 8), "offset": (2, 8, 24)}
FIELDS: dict[str, dict[str, F]] = {
  **{k: gfx11.FIELDS[k] for k in ("SOP2", "SOPK", "SOP1", "SOPC", "SOPP", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P",
                                  "VOPD", "VINTERP", "EXP")},
  "SMEM": {"sbase": (0, 0, 6), "sdata": (0, 6, 7), "op": (0, 13, 6), "nv": (0, 20, 1), "scope": (0, 21, 2), "th": (0, 23, 2),
           "offset": (1, 0, 24), "scale_offset": (1, 24, 1), "soffset": (1, 25, 7)},
  "LDSDIR": {"vdst": (0, 0, 8), "attrchan": (0, 8, 2), "attr": (0, 10, 6), "waitvdst": (0, 16, 4), "op": (0, 20, 2),
             "waitvsrc": (0, 23, 1)},
  "DS": {"offset0": (0, 0, 8), "offset1": (0, 8, 8), "op": (0, 18, 8), "addr": (1, 0, 8), "data0": (1, 8, 8), "data1": (1, 16, 8),
         "vdst": (1, 24, 8)},
  "FLAT": {"saddr": (0, 0, 7), "nv": (0, 7, 1), "op": (0, 14, 8), "seg": (0, 24, 2), "vdst": (1, 0, 8), "scale_offset": (1, 16, 1),
           "sve": (1, 17, 1), **_CPOL, "data": (1, 23, 8), "addr": (2, 0, 8), "offset": (2, 8, 24)},
  "MUBUF": _BUF,
  "MTBUF": {**_BUF, "op": (0, 14, 4), "format": (1, 23, 7)},
}
# fields LLVM requires to be zero (it rejects the word otherwise): DS's former gds bit, LDSDIR bit 22, srsrc's high bits
RESERVED: dict[str, tuple[F, ...]] = {"DS": ((0, 17, 1),), "LDSDIR": ((0, 22, 1),), "MUBUF": ((1, 16, 2),), "MTBUF": ((1, 16, 2),)}
WORDS = {**gfx11.WORDS, "FLAT": 3, "MUBUF": 3, "MTBUF": 3}   # others: 2


def family(w0: int) -> str | None:
  """Encoding family of an instruction from its first dword (guide: the fixed ENCODING bits)."""
  top6 = w0 >> 26
  if top6 == 0b111011: return "FLAT"
  if top6 == 0b110001: return "MTBUF" if (w0 >> 18) & 0xF == 0b1000 else "MUBUF"
  if w0 >> 24 == 0xCE: return "LDSDIR"   # bits 31:24 (gfx11: 31:22; gfx12 uses bit 23 for wait_vm_vsrc)
  if top6 in (0b110100, 0b111001): return None   # VIMAGE, VSAMPLE: not decoded yet
  if top6 in (0b110111, 0b111000, 0b111010, 0b111100): return None   # gfx11's FLAT, MUBUF, MTBUF, MIMG slots
  return gfx11.family(w0)


PREFIX = {**{k: v for k, v in gfx11.PREFIX.items() if k not in ("FLAT", "MUBUF", "MTBUF", "MIMG")},
          "FLAT": 0xEC000000, "MUBUF": 0xC4000000, "MTBUF": 0xC4200000}
