"""Source/destination operand encodings of RDNA3 (the 9-bit SRC field, RDNA3 ISA guide section 3.6 and
the "SSRC/VSRC" operand table) turned into C expressions for the block compiler.

Codes: 0-105 SGPRs, 106/107 VCC, 108-123 TTMP, 124 NULL, 125 M0, 126/127 EXEC, 128-192 integers 0..64,
193-208 integers -1..-16, 233/234 DPP8(FI), 235-238 apertures, 240-248 float constants, 250 DPP16,
251 VCCZ, 252 EXECZ, 253 SCC, 255 literal, 256-511 VGPRs.
"""
from __future__ import annotations
from emu.amdgcn.decode import (NULL, SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE, PRIVATE_LIMIT, VCCZ, EXECZ,
                              SCC, LITERAL, inline_constant)


class Unsupported(ValueError):
  """An encoding the emulator cannot execute (reported with the instruction and its PC)."""


def inline_const(code: int, width: int) -> int | None:
  """Value of an inline constant as a `width`-bit pattern (None if `code` is not one). Integers are
  sign-extended; float constants use the operand width's format (f16 / f32 / f64; facts 5 and 39)."""
  return inline_constant(code, width, True)


def c_int(v: int, width: int) -> str:
  return f"{v:#x}ull" if width == 64 else f"{v:#x}u"


def scalar(code: int, width: int, literal: int | None, float_lit64: bool = False) -> str:
  """C expression for a non-VGPR source as a `width`-bit value (u32 for <= 32 bits, u64 for 64)."""
  if code < 128 and code != NULL:
    if width == 64: return f"S64({code})"
    return f"(S({code}) & 0xffffu)" if width == 16 else f"S({code})"
  if code == NULL: return c_int(0, width)
  if (v := inline_const(code, width)) is not None: return c_int(v, width)
  if code == LITERAL:
    if literal is None: raise Unsupported("literal operand without a literal dword")
    if width == 64: return c_int(literal << 32 if float_lit64 else literal, 64)
    return c_int(literal & 0xFFFF if width == 16 else literal, width)
  if code == SCC: return "(u32)w->scc" if width != 64 else "(u64)w->scc"
  if code == VCCZ: return "(u32)(VCC == 0)" if width != 64 else "(u64)(VCC == 0)"
  if code == EXECZ: return "(u32)(EXEC == 0)" if width != 64 else "(u64)(EXEC == 0)"
  if code in (SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE, PRIVATE_LIMIT):
    hi = "w->d->shared_hi" if code in (SHARED_BASE, SHARED_LIMIT) else "w->d->private_hi"
    if width == 64: return f"((u64){hi} << 32{' | 0xffffffffull' if code in (SHARED_LIMIT, PRIVATE_LIMIT) else ''})"
    return f"({hi})"
  raise Unsupported(f"source operand code {code} is not valid here")


def is_vgpr(code: int) -> bool: return code >= 256


def vgpr(code: int, width: int, hi: bool = False, lane: str = "l") -> str:
  r = code - 256
  if width == 64: return f"V64({r}, {lane})"
  if width == 16: return f"(V({r}, {lane}) >> 16)" if hi else f"(V({r}, {lane}) & 0xffffu)"
  return f"V({r}, {lane})"


def src(code: int, width: int, literal: int | None, float_lit64: bool = False, hi: bool = False, lane: str = "l") -> str:
  """Lane expression for a VALU source (VGPR or scalar)."""
  if is_vgpr(code): return vgpr(code, width, hi, lane)
  e = scalar(code, width if width != 16 or not hi else 32, literal, float_lit64)
  return f"({e} >> 16)" if width == 16 and hi else e


def sdst_regs(code: int, width: int) -> list[int]:
  """SGPR numbers a scalar destination writes (NULL writes nothing)."""
  if code == NULL: return []
  if code >= 128: raise Unsupported(f"scalar destination code {code} is not writable")
  return list(range(code, code + max(1, width // 32)))
