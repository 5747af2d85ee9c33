"""The register file of the emulated GPU and the shape of its IP blocks (QEMU's MemoryRegionOps, per register).

Storage is one u32 per dword address (the address a driver computes as `IP base[segment] + offset`,
soc15_common.h SOC15_REG_OFFSET), in a MAP_SHARED sparse file when the device persists across processes: a
store is on disk the moment it is made, so a driver killed with -9 leaves its registers behind exactly as
hardware would. Registers that hardware banks behind a selector (per-queue HQD registers selected by
GRBM_GFX_CNTL, per-VMID SH_MEM_*) keep their copies in the `banks` area after the flat space.

Every IP block declares the registers it owns: a read/write handler where the hardware does something
on the access, plain storage where the register only holds configuration the driver writes and reads
back. An access to an address no block declares raises `ModelError` naming the register. The file is the GPU
model's (gpu.py): its engines (PM4 register writes and waits) and the PCI function (BAR5, the indirect windows)
reach registers through the same `read`/`write`, under the same lock.
"""
from __future__ import annotations
import mmap, os, threading
from typing import Callable, Iterable

import numpy as np

from autogen.regfields import Reg
from emu.amdgpu.vram import map_file
from emu.pci import ModelError

FLAT_DWORDS = 1 << 27        # every NBIO/MP/GC segment base of Navi31 (IP_BASES) + offset lies below 2^27
BANK_DWORDS = 1 << 16        # banked register copies
REG_FILE_BYTES = (FLAT_DWORDS + BANK_DWORDS) * 4

Read = Callable[[int], int]
Write = Callable[[int, int], None]


class RegisterFile:
  """u32 storage by dword address (`bank(i)` is the i-th dword of the banked area), and the decode of every
  address a block declares (`map`). `names`: (generated register module, segment bases) pairs for messages."""
  def __init__(self, path: str | None = None, names: Iterable[tuple[object, tuple[int, ...]]] = ()):
    self.path, self.names = path, tuple(names)
    self._mm = map_file(path, REG_FILE_BYTES)
    self.u32 = np.frombuffer(self._mm, np.uint32)
    self.decode: dict[int, tuple[Block, Read | None, Write | None]] = {}
    self.windows: list[Callable[[int], tuple[Read, Write] | None]] = []
    self.lock = threading.RLock()      # the device's register and state lock (engines, interrupts and BARs share it)

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

  # --- decode
  def map(self, block: Block) -> None:
    for addr, ops in block.decode().items():
      if addr in self.decode: raise AssertionError(f"register {addr:#x} claimed by {self.decode[addr][0].name} and {block.name}")
      self.decode[addr] = (block, *ops)

  def window(self, find: Callable[[int], tuple[Read, Write] | None]) -> None:
    """A mapping that moves with register contents (NBIO's remapped HDP flush registers): `find(addr)` -> its
    (read, write) when it sits at `addr`; consulted before the fixed decode."""
    self.windows.append(find)

  def _ops(self, addr: int, what: str) -> tuple[Read | None, Write | None]:
    for find in self.windows:
      if (ops := find(addr)) is not None: return ops
    if (ops := self.decode.get(addr)) is None:
      where = "beyond the register space" if addr >= FLAT_DWORDS else self.name_of(addr)
      raise ModelError(f"{what} of {where}: not modelled by the emulated GPU. If the hardware treats it as "
                       "plain configuration, add it to the owning block's STORAGE (emu/amdgpu/*.py)")
    return ops[1:]

  def read(self, addr: int) -> int:
    with self.lock:
      read, _ = self._ops(addr, "read")
      return read(addr) if read is not None else self[addr]

  def write(self, addr: int, value: int) -> None:
    with self.lock:
      _, write = self._ops(addr, "write")
      if write is not None: write(addr, value & 0xFFFFFFFF)
      else: self[addr] = value

  def name_of(self, addr: int) -> str:
    names = reg_name(addr, self.names)
    return f"{names} (dword {addr:#x})" if names else f"dword {addr:#x} (no register of this GPU is there)"


class Block:
  """One IP block of a device `dev` (which has `regs`, the register file, and `ip_bases`). Subclasses list STORAGE
  (registers that are plain configuration) and return their active registers from `handlers()`; `ip` names the
  block's segment base table from IP discovery."""
  name = "?"
  ip = "?"
  STORAGE: tuple[Reg, ...] = ()

  def __init__(self, dev):
    self.dev, self.regs, self.bases = dev, dev.regs, dev.ip_bases[self.ip]

  def addr(self, reg: Reg, ip: str | None = None) -> int:
    """Dword address of `reg` in this block's segments, or in IP `ip`'s (a register another block's header lists)."""
    return reg.addr(self.bases if ip is None else self.dev.ip_bases[ip])

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
           if k.startswith("reg") and isinstance(v, Reg) and v.offset is not None and v.base_idx is not None and v.base_idx < len(bases)
           and v.addr(bases) == addr]
  return "/".join(names[:3])
