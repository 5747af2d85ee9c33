"""The host shared objects CPU kernels come in, checked before the dynamic loader sees them.

The loader maps each PT_LOAD segment of the file; a segment that ends past the end of a truncated file is mapped
anyway and the first touch of it kills the process with SIGBUS. So every table and segment must lie inside the file,
and the file must be a shared object for this host's machine. Parsed with pyelftools (ELF gABI, "ELF Header",
"Program Header", "Section Header"). Not checked: the contents of the dynamic section, relocations and symbols.
"""
from __future__ import annotations
import io, platform

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

EHDR_SIZE = 64   # Elf64_Ehdr
MACHINES = {"x86_64": "EM_X86_64", "AMD64": "EM_X86_64", "aarch64": "EM_AARCH64", "arm64": "EM_AARCH64"}


class SharedObjectError(ValueError):
  """Bytes that are not a shared object this host can load; the message says what is wrong."""


def check_shared_object(lib: bytes) -> None:
  """Raise SharedObjectError unless `lib` is a whole ELF shared object for this host's machine."""
  size = len(lib)
  if lib[:4] != b"\x7fELF": raise SharedObjectError(f"it is not an ELF file (it starts with {lib[:4]!r})")
  if size < EHDR_SIZE: raise SharedObjectError(f"the file is {size} bytes, shorter than the {EHDR_SIZE}-byte ELF header: it is truncated")
  try:
    elf = ELFFile(io.BytesIO(lib))
    h = elf.header
  except (ELFError, ValueError, EOFError) as e: raise SharedObjectError(f"its ELF header is malformed ({e})") from None
  if elf.elfclass != 64 or not elf.little_endian:
    raise SharedObjectError(f"it is a {elf.elfclass}-bit {'little' if elf.little_endian else 'big'}-endian ELF, not 64-bit little-endian")
  if h.e_type != "ET_DYN": raise SharedObjectError(f"it is of type {h.e_type}, not a shared object (ET_DYN)")
  if (want := MACHINES.get(platform.machine())) is not None and h.e_machine != want:
    raise SharedObjectError(f"it is for {h.e_machine}, this host is {want}")
  for what, off, num, entsize in (("program", h.e_phoff, h.e_phnum, h.e_phentsize), ("section", h.e_shoff, h.e_shnum, h.e_shentsize)):
    if off + num * entsize > size:
      raise SharedObjectError(f"its {what} header table ({num} x {entsize} bytes at offset {off}) ends past the end of "
                              f"the {size}-byte file: it is truncated")
  try:
    parts = [(f"segment {i} ({s['p_type']})", s["p_offset"], s["p_filesz"]) for i, s in enumerate(elf.iter_segments())]
    parts += [(f"section {s.name or i}", s["sh_offset"], s["sh_size"]) for i, s in enumerate(elf.iter_sections()) if s["sh_type"] != "SHT_NOBITS"]
  except (ELFError, ValueError, EOFError) as e: raise SharedObjectError(f"its headers are malformed ({e})") from None
  for what, off, n in parts:
    if off + n > size: raise SharedObjectError(f"its {what} ({n} bytes at offset {off}) ends past the end of the {size}-byte file: it is truncated")
