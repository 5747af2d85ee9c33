"""gfx12 (RDNA4) thread-trace tokens: SQ_THREAD_TRACE layout 4. The token set is gfx11's (gfx11.py) with these layouts
changed (the layout facts of the open SQTT decoders, tinygrad's renderer/amd/sqtt.py): WAVESTART / WAVEEND have a 4-bit
WGP, INST a 3-bit delta at [5:3] and an 8-bit class at [19:12] (its own numbering, OPS), the timestamp tokens
TS_DELTA_S5_W2 / _W3 and TS_DELTA_OR_MARK, WAVEALLOC and PERF other sizes. Instruction tokens come as on gfx11.
"""
from __future__ import annotations
from drivers.amd.sqtt import gfx11
from drivers.amd.sqtt.tokens import Format, TokenType as T

LAYOUT = 4
CHANGED = [
  T("INST", 0b010, 3, 5, (3, 3), {"w64h": (6, 1), "wave": (7, 5), "op": (12, 8)}),
  T("WAVEEND", 0b10101, 5, 5, (5, 3), {"sa": (8, 1), "simd": (9, 2), "wgp": (11, 4), "wave": (15, 5)}),
  T("WAVESTART", 0b01100, 5, 8, (5, 2), {"sa": (7, 1), "simd": (8, 2), "wgp": (10, 4), "wave": (15, 5), "id": (20, 12)}),
  T("WAVEALLOC", 0b00101, 5, 6, (5, 3)),
  T("PERF", 0b10110, 5, 8, (7, 3), {"arg": (10, 22)}),
  T("TS_DELTA_S5_W2", 0b11100, 5, 10, (5, 2)),
  T("TS_DELTA_S5_W3", 0b00110, 5, 14, (7, 3)),
  T("TS_DELTA_OR_MARK", 0b0000001, 7, 16, (12, 52), {"rt": (7, 1), "pl": (8, 1), "tl": (9, 1)}, marker=(7, 8)),
]
TOKENS = [next((c for c in CHANGED if c.name == t.name), t) for t in gfx11.TOKENS]
FORMAT = Format("gfx12", TOKENS, "NOP")

OPS = {0x0: "SALU", 0x1: "SMEM", 0x2: "SMEM_STORE", 0x3: "BRANCH_TAKEN", 0x4: "BRANCH_NOT_TAKEN", 0x5: "CALL", 0x7: "SALU_NO_EXEC",
       0x9: "MESSAGE", 0xa: "VALU_1", 0xb: "VALU_TRANS", 0xc: "VALU_64_1", 0xd: "VALU_64_SHIFT", 0xe: "VALU_64_MAD", 0xf: "VALU_64",
       0x12: "VINTERP", 0x13: "BARRIER_WAIT", 0x1c: "FLAT_LOAD", **{0x1d + i: f"FLAT_STORE_{i + 1}" for i in range(4)},
       0x21: "VMEM_LOAD", 0x22: "VMEM_LOAD_VADDR", **{0x23 + i: f"VMEM_STORE_{i + 1}" for i in range(6)}, 0x29: "LDS_LOAD",
       **{0x2a + i: f"LDS_STORE_{i + 1}" for i in range(5)}, 0x2f: "BUFFER_LOAD", 0x30: "BUFFER_LOAD_2",
       **{0x31 + i: f"BUFFER_STORE_{i + 1}" for i in range(6)}, 0x6e: "LDS_DIRECT_LOAD", 0x6f: "LDS_PARAM_LOAD", 0x72: "SALU_EXEC",
       0x73: "VALU_EXEC", 0x74: "VALU_EXEC_2", 0x7a: "BARRIER_SIGNAL", 0x87: "DYNAMIC_VGPR", 0x8a: "BARRIER_JOIN",
       **{0x8c + i: f"WMMA_{8 << i}" for i in range(4)}, 0x92: "VALU_DPFP", 0x98: "SALU_FLOAT", 0x99: "VALU_SCALAR_TRANS",
       0x9b: "SALU_2", 0x9c: "SALU_5"}
OTHER_SIMD = (*range(0x50, 0x5a), *range(0xbc, 0xde), 0x77, 0x78)   # instructions of another SIMD (0x77/0x78: LDS)
SILENT = ("s_delay_alu", "s_wait_alu")   # issue no token on gfx12


def issues(t, word: int) -> list[tuple[int, str]]:
  """(slot on the traced SIMD, class) of each instruction issue a token reports."""
  if t.name == "INST":
    op = t.get(word, "op")
    return [] if op in OTHER_SIMD else [(t.get(word, "wave"), OPS.get(op, f"OP_{op:#x}"))]
  return gfx11.issues(t, word)
