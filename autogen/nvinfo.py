"""The attribute records of a cubin's `.nv.info` / `.nv.info.<kernel>` sections (EIATTR, reference nv_driver.md
section 7): `{u8 format, u8 attribute, u16 size or value}`, then `size` bytes for EIFMT_SVAL. Read by the driver's
cubin loader and by the GPU model, which checks a QMD against the cubin it launches."""
from __future__ import annotations
import struct

EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_PARAM_CBANK, EIATTR_MIN_STACK_SIZE, EIATTR_KPARAM_INFO, EIATTR_REGCOUNT = 0x0A, 0x12, 0x17, 0x2F


def records(data: bytes, where: str) -> list[tuple[int, bytes]]:
  """(attribute, data) of each record (an inline 16-bit value as its 2 bytes); ValueError naming `where` if malformed."""
  out, p = [], 0
  while p < len(data):
    if p + 4 > len(data): raise ValueError(f"{where}: an attribute record is cut off at byte {p}")
    fmt, attr = data[p], data[p + 1]
    if fmt == EIFMT_SVAL:
      n = struct.unpack_from("<H", data, p + 2)[0]
      if p + 4 + n > len(data): raise ValueError(f"{where}: attribute {attr:#x} of {n} bytes runs past the section")
      out.append((attr, data[p + 4:p + 4 + n]))
      p += 4 + n
    elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
      out.append((attr, data[p + 2:p + 4]))
      p += 4
    else: raise ValueError(f"{where}: attribute {attr:#x} has format {fmt}, not one of EIFMT_NVAL/BVAL/HVAL/SVAL")
  return out


def per_symbol(data: bytes, symbols: dict[int, str], attrs: tuple[int, ...]) -> dict[str, dict[int, int]]:
  """From `.nv.info`: {kernel symbol: {attribute: u32 value}} of the `{u32 symbol, u32 value}` records in `attrs`
  (REGCOUNT, MIN_STACK_SIZE)."""
  out: dict[str, dict[int, int]] = {}
  for attr, d in records(data, ".nv.info"):
    if attr in attrs and len(d) >= 8:
      sym, value = struct.unpack_from("<II", d)
      out.setdefault(symbols.get(sym, ""), {})[attr] = value
  return out
