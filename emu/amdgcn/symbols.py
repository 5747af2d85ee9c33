"""Symbolic immediates of gfx11 as LLVM 22 prints them: s_waitcnt counters, s_delay_alu, s_waitcnt_depctr,
sendmsg, hwreg, s_version, DPP controls, MTBUF formats, export targets. Field layouts: RDNA3 ISA guide (SOPP /
SOPK descriptions); the names themselves are swept from LLVM into the target's tables (autogen/amdgcn/<isa>/tables.py
SYMBOLS), passed in as `names`."""
from __future__ import annotations

Names = dict[str, dict[int, str]]

# s_delay_alu (guide: SOPP S_DELAY_ALU): instid0 [3:0], instskip [6:4], instid1 [10:7]
_INSTID = ("NO_DEP", "VALU_DEP_1", "VALU_DEP_2", "VALU_DEP_3", "VALU_DEP_4", "TRANS32_DEP_1", "TRANS32_DEP_2",
           "TRANS32_DEP_3", "FMA_ACCUM_CYCLE_1", "SALU_CYCLE_1", "SALU_CYCLE_2", "SALU_CYCLE_3")
_INSTSKIP = ("SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4")
# s_waitcnt_depctr fields (name, low bit, width), in LLVM's print order; each defaults to its all-ones value
_DEPCTR = (("depctr_hold_cnt", 7, 1), ("depctr_sa_sdst", 0, 1), ("depctr_va_vdst", 12, 4), ("depctr_va_sdst", 9, 3),
           ("depctr_va_ssrc", 8, 1), ("depctr_va_vcc", 1, 1), ("depctr_vm_vsrc", 2, 3))
_DEPCTR_MASK = sum(((1 << w) - 1) << lo for _, lo, w in _DEPCTR)
# s_waitcnt (gfx11): vmcnt [15:10], expcnt [2:0], lgkmcnt [9:4]
_WAITCNT = (("vmcnt", 10, 6), ("expcnt", 0, 3), ("lgkmcnt", 4, 6))
_VERSION_FLAGS = ((0x2000, "UC_VERSION_W64_BIT"), (0x4000, "UC_VERSION_W32_BIT"), (0x8000, "UC_VERSION_MDP_BIT"))


def signed(v: int, bits: int) -> int:
  return v - (1 << bits) if v >> (bits - 1) & 1 else v


def hex_signed(v: int, bits: int) -> str:
  s = signed(v, bits)
  return f"-{-s:#x}" if s < 0 else f"{s:#x}"


def _counters(v: int, fields) -> list[str]:
  """LLVM prints the counters that are not at their maximum; all of them if none is waited on."""
  vals = [(name, (v >> lo) & ((1 << w) - 1), (1 << w) - 1) for name, lo, w in fields]
  shown = [f"{n}({x})" for n, x, mx in vals if x != mx]
  return shown or [f"{n}({x})" for n, x, _ in vals]


def waitcnt(v: int) -> str:
  return " ".join(_counters(v, _WAITCNT))


def depctr(v: int) -> str:
  if v & ~_DEPCTR_MASK & 0xFFFF: return f"{v:#x}"
  return " ".join(_counters(v, _DEPCTR))


def delay_alu(v: int) -> str:
  parts = []
  for name, x, table in (("instid0", v & 0xF, _INSTID), ("instskip", (v >> 4) & 7, _INSTSKIP), ("instid1", (v >> 7) & 0xF, _INSTID)):
    if x: parts.append(f"{name}({table[x]})" if x < len(table) else f"{name}(/* invalid {name.rstrip('01')} value */)")
  return " | ".join(parts) or "0"


def sendmsg(names: Names, v: int) -> str:
  msg = v & 0xFF
  if msg in names["SENDMSG"]: return f"sendmsg({names['SENDMSG'][msg]})"
  return f"sendmsg({msg}, 0, 0)" if v == msg else str(v)


def hwreg(names: Names, v: int) -> str:
  rid, off, size = v & 0x3F, (v >> 6) & 0x1F, ((v >> 11) & 0x1F) + 1
  name = names["HWREG"].get(rid, str(rid))
  return f"hwreg({name})" if off == 0 and size == 32 else f"hwreg({name}, {off}, {size})"


def version(names: Names, v: int) -> str:
  if v & 0x1F00: return f"{v:#x}"
  text = names["VERSION"].get(v & 0xFF, str(v & 0xFF))
  for bit, name in _VERSION_FLAGS:
    if v & bit: text = f"({text})|{name}" if "|" in text else f"{text}|{name}"
  return text


def imm16(names: Names, op: str, style: str, v: int) -> str | None:
  """Text of a 16-bit immediate operand; `style` is the table's print style for the opcode."""
  if op == "s_waitcnt": return waitcnt(v)
  if op in ("s_waitcnt_depctr", "s_wait_alu"): return depctr(v)   # gfx12 names it s_wait_alu
  if op == "s_delay_alu": return delay_alu(v)
  if style == "sendmsg": return sendmsg(names, v)
  if style == "hwreg": return hwreg(names, v)
  if op == "s_version": return version(names, v)
  if op.startswith("s_endpgm") and not v: return None
  if style == "u16": return str(v) if v <= 64 else f"{v:#x}"
  if style == "dec": return str(v)
  return f"{v:#x}"


def dpp_ctrl(c: int) -> str:
  """DPP16 dpp_ctrl field (guide: DPP16 "DPP_CTRL enumeration")."""
  if c <= 0xFF: return f"quad_perm:[{c & 3},{c >> 2 & 3},{c >> 4 & 3},{c >> 6 & 3}]"
  kind, n = c >> 4, c & 0xF
  if kind == 0x10 and n: return f"row_shl:{n}"
  if kind == 0x11 and n: return f"row_shr:{n}"
  if kind == 0x12 and n: return f"row_ror:{n}"
  if c in (0x130, 0x134):
    return "/* wave_shl is not supported starting from GFX10 */" if c == 0x130 else "/* wave_rol is not supported starting from GFX10 */"
  if c in (0x138, 0x13C):
    return "/* wave_shr is not supported starting from GFX10 */" if c == 0x138 else "/* wave_ror is not supported starting from GFX10 */"
  if c == 0x140: return "row_mirror"
  if c == 0x141: return "row_half_mirror"
  if c in (0x142, 0x143): return "/* row_bcast is not supported starting from GFX10 */"
  if kind == 0x15: return f"row_share:{n}"
  if kind == 0x16: return f"row_xmask:{n}"
  return "/* Invalid dpp_ctrl value */"


def buf_format(names: Names, v: int) -> str | None:
  if v == 1: return None   # BUF_FMT_8_UNORM is the default LLVM leaves out
  return f"format:[{names['BUF_FORMAT'][v]}]" if v in names["BUF_FORMAT"] else f"format:{v}"


def exp_target(names: Names, v: int) -> str:
  return names["EXP_TARGET"].get(v, f"invalid_target_{v}")


def swizzle(v: int) -> str:
  """ds_swizzle_b32 offset (guide: DS_SWIZZLE_B32): FFT / rotate / quad-permute modes by the top bits, else the
  bitmask mode (and [4:0], or [9:5], xor [14:10]) printed as LLVM's SWAP / REVERSE / BROADCAST / BITMASK_PERM."""
  if v >= 0xE000: return f"swizzle(FFT,{v & 0x1F})"
  if v >= 0xC000: return f"swizzle(ROTATE,{v >> 10 & 1},{v >> 5 & 0x1F})"
  if v >= 0x8000:
    if v & 0x7F00: return str(v)   # neither quad-permute nor rotate/FFT: LLVM prints the raw offset
    return f"swizzle(QUAD_PERM,{v & 3},{v >> 2 & 3},{v >> 4 & 3},{v >> 6 & 3})"
  a, o, x = v & 0x1F, v >> 5 & 0x1F, v >> 10 & 0x1F
  if a == 0x1F and o == 0 and x and x & (x - 1) == 0: return f"swizzle(SWAP,{x})"
  if a == 0x1F and o == 0 and x and x & (x + 1) == 0: return f"swizzle(REVERSE,{x + 1})"
  size = (~a & 0x1F) + 1
  if x == 0 and size > 1 and size & (size - 1) == 0 and o < size: return f"swizzle(BROADCAST,{size},{o})"
  bits = ""
  for i in range(4, -1, -1):
    ab, ob, xb = a >> i & 1, o >> i & 1, x >> i & 1
    bits += str((ob ^ xb) if not ab or ob else "pi"[xb]) if not ab or ob else "pi"[xb]
  return f'swizzle(BITMASK_PERM,"{bits}")'
