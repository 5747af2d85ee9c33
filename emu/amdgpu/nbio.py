"""NBIO 4.3: the PCIe bridge interface (BIF/RCC registers, nbio_4_3_0) of the PCI function.

- RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE (dword 0xde3): VRAM size in MiB, read-only.
- BIF_BX_PF0_MM_INDEX/MM_INDEX_HI/MM_DATA: indirect access for small-BAR hosts. MM_DATA reaches VRAM byte
  address (MM_INDEX_HI << 31 | MM_INDEX[30:0]) when MM_INDEX.MM_APER (bit 31) is set, else the register at
  byte offset MM_INDEX[30:0].
- BIF_BX_PF0_RSMU_INDEX/RSMU_DATA: RSMU_INDEX holds a register byte address; RSMU_DATA reads/writes that
  register. This is how registers beyond the 1 MiB BAR5 (S2A doorbell routing, RCC straps) are reached.
- BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL / _REG_FLUSH_CNTL: the BAR5 byte offsets at which the HDP flush
  registers are remapped; at power-on 0x7F000 and 0x7F004 (the MMIO register hole Linux programs). A write
  of any value to the remapped HDP_MEM_FLUSH_CNTL flushes the host data path (hdp.py, the one flush rule; its
  GPU_HDP_FLUSH_REQ/DONE pair is the GPU model's); the remapped HDP_REG_FLUSH_CNTL has nothing to flush. Both read 0.
- RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN: doorbell writes through BAR2 are dropped with an error while 0.
- BIF_BX0_BIF_DOORBELL_INT_CNTL: the *_CLEAR bits (16-18) act and read back 0; no RAS event is ever raised.
"""
from __future__ import annotations
from typing import TYPE_CHECKING

from emu.amdgpu.registers import Block, Read, Write, storage
from emu.pci import ModelError
if TYPE_CHECKING: from emu.amdgpu.function import GPUFunction

HDP_REMAP_MEM, HDP_REMAP_REG = 0x7F000, 0x7F004   # MMIO_REG_HOLE_OFFSET + KFD_MMIO_REMAP_HDP_{MEM,REG}_FLUSH_CNTL
DOORBELL_INT_CLEAR_BITS = 0x70000
# the S2A doorbell routing registers (ports 0-3) by register module: nbio_4_3_0_offset.h, nbif_6_3_1_offset.h
S2A_DOORBELL = {"nbio_4_3_0": "S2A_DOORBELL_ENTRY_{}_CTRL", "nbif_6_3_1": "GDC_S2A0_S2A_DOORBELL_ENTRY_{}_CTRL"}


class NBIOModel(Block):
  name = ip = "NBIO"

  def __init__(self, dev: GPUFunction):
    super().__init__(dev)
    self.nbio = nbio = dev.chip.reg("NBIO")
    self.STORAGE = storage(nbio, "BIF_BX_PF0_MM_INDEX", "BIF_BX_PF0_MM_INDEX_HI", "BIF_BX_PF0_RSMU_INDEX",
                           "BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL", "BIF_BX0_REMAP_HDP_REG_FLUSH_CNTL",
                           "RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", "RCC_DEV0_EPF2_STRAP2",
                           *(S2A_DOORBELL[dev.chip.regs["NBIO"]].format(i) for i in range(4)))
    hdp = dev.gpu.hdp
    self._mem_flush, self._reg_flush = (_zero, lambda a, v: hdp.flush()), (_zero, _ignore)   # the register cache: nothing to flush
    dev.regs.window(self._remapped)

  def handlers(self):
    return {self.addr(self.nbio.regRCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE): (lambda a: self.dev.gpu.vram.size >> 20, self._memsize),
            self.addr(self.nbio.regBIF_BX_PF0_MM_DATA): (self._mm_read, self._mm_write),
            self.addr(self.nbio.regBIF_BX_PF0_RSMU_DATA): (self._rsmu_read, self._rsmu_write),
            self.addr(self.nbio.regBIF_BX0_BIF_DOORBELL_INT_CNTL): (None, lambda a, v: self.regs.__setitem__(a, v & ~DOORBELL_INT_CLEAR_BITS))}

  def power_on(self) -> None:
    self.set(self.nbio.regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL, HDP_REMAP_MEM)
    self.set(self.nbio.regBIF_BX0_REMAP_HDP_REG_FLUSH_CNTL, HDP_REMAP_REG)

  def _memsize(self, addr: int, value: int) -> None:
    raise ModelError("RCC_CONFIG_MEMSIZE is read-only (it reports the VRAM size in MiB)")

  # --- indirect access
  def _mm_target(self) -> tuple[bool, int]:
    index = self.get(self.nbio.regBIF_BX_PF0_MM_INDEX)
    return bool(index >> 31), (self.get(self.nbio.regBIF_BX_PF0_MM_INDEX_HI) << 31) | (index & 0x7FFFFFFF)

  def _mm_read(self, addr: int) -> int:
    vram, at = self._mm_target()
    if vram: return int.from_bytes(self.dev.gpu.vram.read(at, 4), "little")
    return self.regs.read(at >> 2)

  def _mm_write(self, addr: int, value: int) -> None:
    vram, at = self._mm_target()
    if vram: self.dev.gpu.vram.write(at, value.to_bytes(4, "little"))
    else: self.regs.write(at >> 2, value)

  def _rsmu_read(self, addr: int) -> int: return self.regs.read(self.get(self.nbio.regBIF_BX_PF0_RSMU_INDEX) >> 2)
  def _rsmu_write(self, addr: int, value: int) -> None: self.regs.write(self.get(self.nbio.regBIF_BX_PF0_RSMU_INDEX) >> 2, value)

  # --- the HDP flush registers, remapped into the MMIO hole
  def _remapped(self, addr: int) -> tuple[Read, Write] | None:
    if addr * 4 == self.get(self.nbio.regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL) & 0x7FFFC: return self._mem_flush
    if addr * 4 == self.get(self.nbio.regBIF_BX0_REMAP_HDP_REG_FLUSH_CNTL) & 0x7FFFC: return self._reg_flush
    return None

  def doorbells_enabled(self) -> bool: return bool(self.get(self.nbio.regRCC_DEV0_EPF0_RCC_DOORBELL_APER_EN) & 1)


def _zero(addr: int) -> int: return 0
def _ignore(addr: int, value: int) -> None: pass
