"""The register file of the emulated Navi31 and the shape of its IP blocks (QEMU's MemoryRegionOps, per register).

Storage is one u32 per dword address (the address a driver computes as `IP base[segment] + offset`,
reference/amd_driver.md 2.3), in a MAP_SHARED sparse file when the device persists across processes: a
store is on disk the moment it is made, so a driver killed with -9 leaves its registers behind exactly as
hardware would. Registers that hardware banks behind a selector (per-queue HQD registers selected by
GRBM_GFX_CNTL, per-VMID SH_MEM_*) keep their copies in the `banks` area after the flat space.

Every IP block declares the registers it owns: a read/write handler where the hardware does something
on the access, plain storage where the register only holds configuration the driver writes and reads
back. An access to an address no block declares raises `ModelError` naming the register.
"""
from __future__ import annotations
import mmap, os
from typing import Callable, Iterable

import numpy as np

from autogen.regfields import Reg
from emu.amdgpu.vram import map_file

FLAT_DWORDS = 1 << 27        # every NBIO/MP/GC segment base of Navi31 (IP_BASES) + offset lies below 2^27
BANK_DWORDS = 1 << 16        # banked register copies
REG_FILE_BYTES = (FLAT_DWORDS + BANK_DWORDS) * 4

Read = Callable[[int], int]
Write = Callable[[int, int], None]


class ModelError(RuntimeError):
  """An access the emulated hardware rejects (unmodelled register, bad value for a register's function)."""


class RegisterFile:
  """u32 storage by dword address; `bank(i)` is the i-th dword of the banked area."""
  def __init__(self, path: str | None = None):
    self.path = path
    self._mm = map_file(path, REG_FILE_BYTES)
    self.u32 = np.frombuffer(self._mm, np.uint32)

  def __getitem__(self, addr: int) -> int: return int(self.u32[addr])
  def __setitem__(self, addr: int, value: int) -> None: self.u32[addr] = value & 0xFFFFFFFF

  def bank(self, index: int) -> int: return FLAT_DWORDS + index

  def clear(self) -> None:
    """Every register to 0 without touching every page: drop the file's blocks (a hole reads as zeros)."""
    if self.path is None: self._mm.madvise(mmap.MADV_DONTNEED)   # private anonymous pages drop back to zero-fill
    else:
      os.truncate(self.path, 0)
      os.truncate(self.path, REG_FILE_BYTES)

  def close(self) -> None:
    del self.u32
    self._mm.close()


class Block:
  """One IP block of a device `dev` (which has `regs` and `ip_bases`). Subclasses list STORAGE (registers that are
  plain configuration) and return their active registers from `handlers()`; `ip` names the block's segment base
  table from IP discovery."""
  name = "?"
  ip = "?"
  STORAGE: tuple[Reg, ...] = ()

  def __init__(self, dev):
    self.dev, self.regs, self.bases = dev, dev.regs, dev.ip_bases[self.ip]

  def addr(self, reg: Reg) -> int: return reg.addr(self.bases)

  def get(self, reg: Reg) -> int: return self.regs[self.addr(reg)]
  def set(self, reg: Reg, value: int) -> None: self.regs[self.addr(reg)] = value

  def handlers(self) -> dict[int, tuple[Read | None, Write | None]]:
    """{dword address: (read, write)}: None means plain storage for that direction."""
    return {}

  def decode(self) -> dict[int, tuple[Read | None, Write | None]]:
    out = {self.addr(r): (None, None) for r in self.STORAGE}
    out.update(self.handlers())
    return out

  def power_on(self) -> None:
    """Registers that hold non-zero values out of reset (the register file is all zeros before this)."""


def storage(module, *names: str) -> tuple[Reg, ...]:
  """Registers of a generated module by name (without the reg prefix), for a block's STORAGE list."""
  return tuple(getattr(module, f"reg{n}") for n in names)


def reg_name(addr: int, modules: Iterable[tuple[object, tuple[int, ...]]]) -> str:
  """The header name(s) of the register at a dword address, for error messages."""
  names = [k[3:] for mod, bases in modules for k, v in vars(mod).items()
           if k.startswith("reg") and isinstance(v, Reg) and v.offset is not None and v.base_idx is not None and v.base_idx < len(bases) and v.addr(bases) == addr]
  return "/".join(names[:3])
