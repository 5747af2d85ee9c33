"""How autogen/amdgcn/gen.py probes gfx12 instructions through LLVM's disassembler: gfx11's probes (gfx11/probes.py)
with the families whose fields gfx12 moved or renamed (SMEM, the 96-bit FLAT and buffer encodings, DS without gds) and
the MTBUF words that print the buffer formats. Field layouts: encodings.py."""
from __future__ import annotations
from autogen.amdgcn.gfx11 import probes as gfx11
from autogen.amdgcn.gfx12 import encodings

OPERAND_FIELDS = {**gfx11.OPERAND_FIELDS,
                  "MUBUF": {"vaddr": "vgpr8", "vdata": "vgpr8", "srsrc": "srsrc", "soffset": "sgpr7"},
                  "MTBUF": {"vaddr": "vgpr8", "vdata": "vgpr8", "srsrc": "srsrc", "soffset": "sgpr7"}}
BASE = {**gfx11.BASE, "SMEM": dict(sdata=16, sbase=16, soffset=48, offset=0x10)}
PSEUDO, OPFIELD = gfx11.PSEUDO, gfx11.OPFIELD
RETRY = {**gfx11.RETRY, "DS": []}
MOD_FIELDS, DPP_PROBE = gfx11.MOD_FIELDS, gfx11.DPP_PROBE
FAMILIES = gfx11.FAMILIES
SYMBOL_WORDS = {**gfx11.SYMBOL_WORDS, "BUF_FORMAT": (range(128), lambda i: [encodings.PREFIX["MTBUF"], i << 23, 0])}
# opcodes whose literal-operand form crashes LLVM 22's disassembler (s_barrier_signal .. s_get_barrier_state): probed
# with inline constants only
LITERAL_CRASH = {"SOP1": range(0x4E, 0x53)}
