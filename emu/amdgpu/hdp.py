"""HDP 6.0, the host data path: host writes through the BARs reach memory through it, and a flush makes them visible
to the GPU before it reads them. The model's memory is always coherent, so every flush completes at once; `flushes`
counts them (tests do). There is one flush rule, whichever way it is asked for:
- BIF_BX_PF0_GPU_HDP_FLUSH_REQ (nbio_4_3_0): each requested bit is reported in GPU_HDP_FLUSH_DONE at once. This is
  what a PM4 WAIT_REG_MEM write-then-wait sends, on the KFD and on the PCI interface alike, so the GPU model owns it;
- a write of any value to the remapped HDP_MEM_FLUSH_CNTL on BAR5 (NBIO's remap, nbio.py) calls `flush`.
HDP_MEM_POWER_CTRL (and HDP 7.0's HDP_CLK_CNTL) is configuration.
"""
from __future__ import annotations

from emu.amdgpu.registers import Block, storage


class HDPModel(Block):
  name = ip = "HDP"

  def __init__(self, dev):
    super().__init__(dev)
    self.nbio, self.hdp = dev.chip.reg("NBIO"), dev.chip.reg("HDP")
    self.STORAGE = storage(self.hdp, "HDP_MEM_POWER_CTRL", *(("HDP_CLK_CNTL",) if dev.chip.versions["HDP"] >= (7, 0, 0) else ()))
    self.flushes = 0

  def handlers(self):
    return {self.addr(self.nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ, "NBIO"): (None, self._flush_req),
            self.addr(self.nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE, "NBIO"): (None, None)}

  def flush(self) -> None:
    self.flushes += 1

  def _flush_req(self, addr: int, value: int) -> None:
    self.regs[addr] = value
    self.flush()
    self.regs[self.addr(self.nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE, "NBIO")] = value
