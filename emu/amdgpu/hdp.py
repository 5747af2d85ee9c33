"""HDP 6.0, the host data path: host writes through the BARs reach memory through it, and a flush makes them visible
to the GPU before it reads them. The model's memory is always coherent, so every flush completes at once; `flushes`
counts them (tests do). There is one flush rule, whichever way it is asked for:
- BIF_BX_PF0_GPU_HDP_FLUSH_REQ (nbio_4_3_0): each requested bit is reported in GPU_HDP_FLUSH_DONE at once. This is
  what a PM4 WAIT_REG_MEM write-then-wait sends, on the KFD and on the PCI interface alike, so the GPU model owns it;
- a write of any value to the remapped HDP_MEM_FLUSH_CNTL on BAR5 (NBIO's remap, nbio.py) calls `flush`.
HDP_MEM_POWER_CTRL is configuration.
"""
from __future__ import annotations

from autogen.amd import nbio_4_3_0 as nbio, hdp_6_0_0 as hdp
from emu.amdgpu.registers import Block, storage


class HDPModel(Block):
  name = ip = "HDP"
  STORAGE = storage(hdp, "HDP_MEM_POWER_CTRL")

  def __init__(self, dev):
    super().__init__(dev)
    self.flushes = 0

  def handlers(self):
    return {self.addr(nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ, "NBIO"): (None, self._flush_req),
            self.addr(nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE, "NBIO"): (None, None)}

  def flush(self) -> None:
    self.flushes += 1

  def _flush_req(self, addr: int, value: int) -> None:
    self.regs[addr] = value
    self.flush()
    self.regs[self.addr(nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE, "NBIO")] = value
