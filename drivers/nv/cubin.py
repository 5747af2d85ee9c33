"""Cubin loading: the ELF NVRTC builds for one SM, read with pyelftools (reference nv_driver.md section 7).

Per kernel: `.text.<name>` (its SASS), `.nv.info.<name>` attributes (EIATTR records `{u8 format, u8 attribute, u16
size or value}`, then the data): PARAM_CBANK 0x0a (where the parameters sit in constant buffer 0, and their bytes),
KPARAM_INFO 0x17 (each parameter's ordinal, offset and size), REGCOUNT 0x2f and MIN_STACK_SIZE 0x12 (per kernel symbol,
in `.nv.info`), `.nv.shared.<name>` (static shared memory) and `.nv.constant0.<name>` (constant buffer 0's size); other
`.nv.constantN` sections are constant buffers the program carries. The program is uploaded as the file itself, so a
section's device address is the upload address plus its file offset; relocations into loaded sections are applied
(R_CUDA_64, R_CUDA_ABS32_LO_32 / HI_32, the types seen in NVRTC output), those into debug sections skipped.
A malformed cubin is a CubinError saying what is wrong.
"""
from __future__ import annotations
import io, struct
from dataclasses import dataclass, field

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

EM_CUDA = 190
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_PARAM_CBANK, EIATTR_KPARAM_INFO, EIATTR_MIN_STACK_SIZE, EIATTR_REGCOUNT = 0x0A, 0x17, 0x12, 0x2F
R_CUDA_64, R_CUDA_ABS32_LO_32, R_CUDA_ABS32_HI_32 = 2, 0x38, 0x39


class CubinError(ValueError):
  """The cubin cannot be loaded; the message says why."""


@dataclass
class Param:
  ordinal: int
  offset: int                            # from the start of the parameters (PARAM_CBANK's offset in cb0)
  size: int


@dataclass
class Kernel:
  name: str
  text_offset: int                       # file offset of .text.<name>
  text_size: int
  registers: int
  param_offset: int                      # where cb0 holds the parameters (0x210 on sm_90, 0x160 on sm_80/86)
  param_bytes: int
  params: list[Param]
  shared_bytes: int
  local_bytes: int                       # per thread (MIN_STACK_SIZE)
  cb0_bytes: int
  constants: dict[int, tuple[int, int]] = field(default_factory=dict)   # slot -> (file offset, bytes), slots >= 1


@dataclass
class Cubin:
  sm: int                                # 90 for sm_90
  data: bytes
  kernels: dict[str, Kernel]
  relocs: list[tuple[int, int, int]] = field(default_factory=list)   # (file offset, type, value less the upload base)

  def relocated(self, base: int) -> bytes:
    """The file with its loaded sections' relocations applied for an upload at `base`."""
    out = bytearray(self.data)
    for off, kind, value in self.relocs:
      v = value + base
      if kind == R_CUDA_64: struct.pack_into("<Q", out, off, v)
      else: struct.pack_into("<I", out, off, (v >> 32 if kind == R_CUDA_ABS32_HI_32 else v) & 0xFFFFFFFF)
    return bytes(out)


def _attrs(data: bytes, where: str) -> list[tuple[int, bytes]]:
  """The EIATTR records of an .nv.info section: (attribute, data; a 16-bit value inline as 2 bytes)."""
  out, p = [], 0
  while p < len(data):
    if p + 4 > len(data): raise CubinError(f"{where}: an attribute record is cut off at byte {p}")
    fmt, attr = data[p], data[p + 1]
    if fmt == EIFMT_SVAL:
      n = struct.unpack_from("<H", data, p + 2)[0]
      if p + 4 + n > len(data): raise CubinError(f"{where}: attribute {attr:#x} of {n} bytes runs past the section")
      out.append((attr, data[p + 4:p + 4 + n]))
      p += 4 + n
    elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
      out.append((attr, data[p + 2:p + 4]))
      p += 4
    else: raise CubinError(f"{where}: attribute {attr:#x} has format {fmt}, not one of EIFMT_NVAL/BVAL/HVAL/SVAL")
  return out


def load(data: bytes) -> Cubin:
  """Parse a cubin; CubinError if it is not one or lacks what a launch needs."""
  if data[:4] != b"\x7fELF": raise CubinError("not an ELF file (want NVRTC's CUBIN output, nvrtcGetCUBIN)")
  try:
    elf = ELFFile(io.BytesIO(data))
    if elf.elfclass != 64 or elf["e_machine"] not in ("EM_CUDA", EM_CUDA):
      raise CubinError(f"an ELF{elf.elfclass} file for machine {elf['e_machine']}, not a 64-bit CUDA cubin (EM_CUDA)")
    secs = {s.name: s for s in elf.iter_sections()}
    symtab = elf.get_section_by_name(".symtab")
    syms = {i: s.name for i, s in enumerate(symtab.iter_symbols())} if symtab is not None else {}
    per_sym: dict[str, dict[int, bytes]] = {}
    if ".nv.info" in secs:
      for attr, d in _attrs(secs[".nv.info"].data(), ".nv.info"):
        if attr in (EIATTR_REGCOUNT, EIATTR_MIN_STACK_SIZE) and len(d) >= 8:
          per_sym.setdefault(syms.get(struct.unpack_from("<I", d)[0], ""), {})[attr] = d[4:8]
    kernels = {}
    for name, s in secs.items():
      if not name.startswith(".text."): continue
      k = name[len(".text."):]
      info = f".nv.info.{k}"
      if info not in secs: raise CubinError(f"kernel {k}: no {info} section (its parameter layout)")
      attrs = _attrs(secs[info].data(), info)
      cbank = next((d for a, d in attrs if a == EIATTR_PARAM_CBANK), None)
      if cbank is None or len(cbank) < 8: raise CubinError(f"kernel {k}: {info} has no PARAM_CBANK attribute (0x0a)")
      _, poff, psize = struct.unpack_from("<IHH", cbank)
      params = []
      for a, d in attrs:
        if a != EIATTR_KPARAM_INFO: continue
        if len(d) < 12: raise CubinError(f"kernel {k}: a KPARAM_INFO attribute of {len(d)} bytes (want 12)")
        _, ordinal, off, flags = struct.unpack_from("<IHHI", d)
        params.append(Param(ordinal, off, flags >> 18 & 0x3FFF))
      params.sort(key=lambda p: p.ordinal)
      if [p.ordinal for p in params] != list(range(len(params))) or any(p.offset + p.size > psize for p in params):
        raise CubinError(f"kernel {k}: its KPARAM_INFO attributes do not describe parameters 0..{len(params) - 1} inside {psize} bytes")
      regs = per_sym.get(k, {}).get(EIATTR_REGCOUNT)
      if regs is None: raise CubinError(f"kernel {k}: .nv.info has no REGCOUNT attribute (0x2f) for it")
      cb0 = secs.get(f".nv.constant0.{k}")
      if cb0 is None or cb0["sh_size"] < poff + psize:
        raise CubinError(f"kernel {k}: no .nv.constant0.{k} section holding its {psize} parameter bytes at {poff:#x}")
      shared = secs.get(f".nv.shared.{k}")
      kern = Kernel(k, s["sh_offset"], s["sh_size"], struct.unpack("<I", regs)[0], poff, psize, params,
                    shared["sh_size"] if shared is not None else 0,
                    struct.unpack("<I", per_sym[k].get(EIATTR_MIN_STACK_SIZE, bytes(4)))[0], cb0["sh_size"])
      for n, c in secs.items():
        if n.startswith(".nv.constant") and not n.startswith(".nv.constant0"):
          slot, _, owner = n[len(".nv.constant"):].partition(".")
          if slot.isdigit() and owner in ("", k): kern.constants[int(slot)] = (c["sh_offset"], c["sh_size"])
      kernels[k] = kern
    if not kernels: raise CubinError("the cubin has no kernels (.text.<name> sections)")
    cub = Cubin(elf["e_flags"] & 0xFF, bytes(data), kernels, _relocations(elf))
  except (ELFError, struct.error, KeyError) as e: raise CubinError(f"malformed cubin: {type(e).__name__}: {e}") from None
  return cub


def _relocations(elf: ELFFile) -> list[tuple[int, int, int]]:
  """(file offset, type, target address less the upload base) of every relocation into a loaded section."""
  sections = list(elf.iter_sections())
  symtab = elf.get_section_by_name(".symtab")
  out = []
  for rs in sections:
    if rs["sh_type"] not in ("SHT_REL", "SHT_RELA"): continue
    target = sections[rs["sh_info"]]
    if not target.name.startswith((".text.", ".nv.constant")): continue   # debug info is not uploaded for use
    for r in rs.iter_relocations():
      kind = r["r_info_type"]
      if kind not in (R_CUDA_64, R_CUDA_ABS32_LO_32, R_CUDA_ABS32_HI_32):
        raise CubinError(f"relocation type {kind:#x} in {rs.name} is not one this loader applies (R_CUDA_64, ABS32_LO/HI_32)")
      sym = symtab.get_symbol(r["r_info_sym"])
      if not isinstance(sym["st_shndx"], int): raise CubinError(f"a relocation in {rs.name} names undefined symbol {sym.name!r}")
      value = sections[sym["st_shndx"]]["sh_offset"] + sym["st_value"] + (r["r_addend"] if r.is_RELA() else 0)
      out.append((target["sh_offset"] + r["r_offset"], kind, value))
  return out
