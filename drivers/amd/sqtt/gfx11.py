"""gfx11 (RDNA3) thread-trace tokens: SQ_THREAD_TRACE layout 3 (the LAYOUT_HEADER's layout field).

Token types (code/bits, length in nibbles, delta and fields: the layout facts of the open SQTT decoders, tinygrad's
renderer/amd/sqtt.py). Instruction issues are reported only for the waves of the one SIMD SQ_THREAD_TRACE_MASK selects
(SA_SEL, WGP_SEL, SIMD_SEL): INST (with an operation class), VALUINST (a VALU instruction), IMMEDIATE (an instruction the
sequencer completes itself: s_nop, s_waitcnt, ...) and IMMEDIATE_MASK (one such issue for each wave of a mask); their
`wave` is the slot on that SIMD. WAVESTART / WAVEEND are reported for every wave of the shader engine.
"""
from __future__ import annotations
from drivers.amd.sqtt.tokens import Format, TokenType as T

LAYOUT = 3
TOKENS = [
  T("NOP", 0b0000, 4, 1),
  T("TS_DELTA_SHORT", 0b1000, 4, 2, (4, 4), delta_add=4),
  T("VALUINST", 0b011, 3, 3, (3, 3), {"flag": (6, 1), "wave": (7, 5)}),
  T("INST", 0b010, 3, 5, (4, 3), {"flag1": (3, 1), "flag2": (7, 1), "wave": (8, 5), "op": (13, 7)}),
  T("VMEMEXEC", 0b1111, 4, 2, (4, 2), {"src": (6, 2)}),
  T("ALUEXEC", 0b1110, 4, 2, (4, 2), {"src": (6, 2)}),
  T("IMMEDIATE", 0b1101, 4, 3, (4, 3), {"wave": (7, 5)}),
  T("REG", 0b1001, 4, 16, (4, 3), {"slot": (7, 3), "hi_byte": (8, 8), "subop": (16, 16), "val32": (32, 32)}),
  T("IMMEDIATE_MASK", 0b00100, 5, 6, (5, 3), {"mask": (8, 16)}),
  T("WAVERDY", 0b10100, 5, 6, (5, 3), {"mask": (8, 16)}),
  T("WAVEEND", 0b10101, 5, 5, (5, 3), {"sa": (8, 1), "simd": (9, 2), "wgp": (11, 3), "wave": (15, 5)}),
  T("WAVESTART", 0b01100, 5, 8, (5, 2), {"sa": (7, 1), "simd": (8, 2), "wgp": (10, 3), "wave": (13, 5), "id": (18, 14)}),
  T("WAVEALLOC", 0b00101, 5, 5, (5, 3)),
  T("PERF", 0b10110, 5, 7, (5, 3), {"arg": (8, 20)}),
  T("TS_DELTA_S5_W2", 0b11100, 5, 12, (5, 2)),
  T("TS_DELTA_S5_W3", 0b00110, 5, 13, (5, 3)),
  T("TS_DELTA_S8_W3", 0b0100001, 7, 18, (8, 3)),
  T("TS_WAVE_STATE", 0b1010001, 7, 6, (7, 9), {"coarse": (16, 8)}),
  T("UTILCTR", 0b0110001, 7, 12, (7, 2), {"ctr": (9, 39)}),
  T("SNAPSHOT", 0b1110001, 7, 16, (7, 3), {"snap": (10, 54)}),
  T("TS_DELTA_OR_MARK", 0b0000001, 7, 12, (12, 36), {"pl": (8, 1), "rt": (9, 1)}, marker=(9, 8)),
  T("LAYOUT_HEADER", 0b0010001, 7, 16, None, {"layout": (7, 6), "simd": (13, 2), "group": (15, 3), "sel_a": (28, 4), "sel_b": (33, 4)}),
  T("EVENT", 0b01100001, 8, 6, (8, 3), {"event": (11, 13)}),
  T("EVENT_BIG", 0b11100001, 8, 8, (8, 3), {"event": (11, 21)}),
]
FORMAT = Format("gfx11", TOKENS, "NOP")

# INST.op: the class of the issued instruction. 0x50-0x66 report an instruction of another SIMD (not a wave of the
# traced one). Sizes of the memory classes (a store's data dwords, GLOBAL with/without an SGPR base) as the decoders list.
OPS = {0x0: "SALU", 0x1: "SMEM", 0x3: "BRANCH_TAKEN", 0x4: "BRANCH_NOT_TAKEN", 0x5: "CALL", 0x9: "MESSAGE", 0xb: "VALU_TRANS",
       0xd: "VALU_64_SHIFT", 0xe: "VALU_64_MAD", 0xf: "VALU_64", 0x12: "VINTERP", 0x13: "BARRIER",
       0x1c: "FLAT_LOAD", **{0x1d + i: f"FLAT_STORE_{i + 1}" for i in range(4)},
       0x21: "GLOBAL_LOAD", 0x22: "GLOBAL_LOAD_VADDR", **{0x24 + i: f"GLOBAL_STORE_{i + 2}" for i in range(5)},
       0x29: "LDS_LOAD", **{0x2a + i: f"LDS_STORE_{i + 1}" for i in range(5)}, 0x72: "SALU_EXEC", 0x73: "VALU_EXEC"}
OTHER_SIMD = range(0x50, 0x67)
SILENT = ("s_delay_alu",)       # instructions that issue no token


def issues(t, word: int) -> list[tuple[int, str]]:
  """(slot on the traced SIMD, class) of each instruction issue a token reports (none for the other tokens)."""
  name = t.name
  if name == "INST":
    op = t.get(word, "op")
    return [] if op in OTHER_SIMD else [(t.get(word, "wave"), OPS.get(op, f"OP_{op:#x}"))]
  if name == "VALUINST": return [(t.get(word, "wave"), "VALU")]
  if name == "IMMEDIATE": return [(t.get(word, "wave"), "IMMEDIATE")]
  if name == "IMMEDIATE_MASK":
    mask = t.get(word, "mask")
    return [(i, "IMMEDIATE") for i in range(16) if mask >> i & 1]
  return []
