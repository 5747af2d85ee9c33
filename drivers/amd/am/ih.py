"""IH (OSSSYS 6.0): the interrupt-handler rings the GPU writes 32-byte entries into, and the driver's walk
over them to find faults (reference/amd_driver.md 2.10, 2.12; entry layout: amdgpu_ih.c's decode)."""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING
import numpy as np
from autogen.amd import osssys_6_0_0 as oss, soc15_ih_clientid as cid, irqsrcs_gfx_11_0_0 as src
if TYPE_CHECKING: from drivers.amd.am.amdev import AMDev

RING_SIZE = 256 << 10
ENTRY_DWORDS = 8
MC_SPACE_GPA = 4          # IH_RB_CNTL.MC_SPACE: the ring is addressed by MC address


@dataclass
class Entry:
  client: int
  source: int
  ring: int
  vmid: int
  pasid: int
  data: tuple[int, int, int, int]

  @property
  def is_fault(self) -> bool:
    """Completion interrupts (end of pipe, SDMA trap) are not errors; everything else the driver raised is."""
    return self.source not in (src.GFX_11_0_0__SRCID__CP_EOP_INTERRUPT, src.GFX_11_0_0__SRCID__SDMA_TRAP)

  def describe(self) -> str:
    if self.client in (cid.SOC21_IH_CLIENTID_GFX, cid.SOC21_IH_CLIENTID_VMC) and self.source == src.GFX_11_0_0__SRCID__UTCL2_FAULT:
      va = self.data[0] << 12 | (self.data[1] & 0xF) << 44
      hub = "GC" if self.client == cid.SOC21_IH_CLIENTID_GFX else "MM"
      return f"GPU page fault at {va:#x} ({'write' if self.data[1] & 0x20 else 'read'}, {hub} hub, vmid {self.vmid})"
    if self.source == src.GFX_11_0_0__SRCID__SQ_INTERRUPT_ID: return f"shader (SQ) error interrupt, data {self.data[0]:#x}"
    if self.source == src.GFX_11_0_0__SRCID__CP_BAD_OPCODE_ERROR: return "the command processor met a bad PM4 opcode"
    return f"interrupt from client {self.client:#x} source {self.source} (data {', '.join(hex(d) for d in self.data)})"


class IH:
  def __init__(self, adev: AMDev):
    self.adev = adev
    self.rings = [adev.mm.palloc(RING_SIZE, boot=True, zero=True) for _ in range(2)]
    self.wptr_pages = [adev.mm.palloc(4096, boot=True, zero=True) for _ in range(2)]
    self.rptr = 0

  def init_hw(self) -> None:
    a = self.adev
    for i, (ring, wp) in enumerate(zip(self.rings, self.wptr_pages)):
      sfx = "_RING1" if i else ""
      reg = lambda n: getattr(oss, f"regIH_{n}{sfx}")
      mc = a.mc(ring)
      a.wreg("OSSSYS", reg("RB_BASE"), (mc >> 8) & 0xFFFFFFFF)
      a.wreg("OSSSYS", reg("RB_BASE_HI"), mc >> 40)
      ring_fields = dict(MC_SPACE=MC_SPACE_GPA, WPTR_OVERFLOW_CLEAR=1, RB_SIZE=(RING_SIZE // 4).bit_length() - 1, MC_SNOOP=1)
      if i == 0: ring_fields.update(WPTR_OVERFLOW_ENABLE=1, RPTR_REARM=1)
      else: ring_fields.update(RB_FULL_DRAIN_ENABLE=1)
      a.wreg("OSSSYS", reg("RB_CNTL"), **ring_fields)
      if i == 0:
        a.wreg("OSSSYS", oss.regIH_RB_WPTR_ADDR_LO, a.mc(wp) & 0xFFFFFFFF)
        a.wreg("OSSSYS", oss.regIH_RB_WPTR_ADDR_HI, a.mc(wp) >> 32)
      for n in ("RB_WPTR", "RB_RPTR", "DOORBELL_RPTR"): a.wreg("OSSSYS", reg(n), 0)
    a.rmw("OSSSYS", oss.regIH_STORM_CLIENT_LIST_CNTL, CLIENT18_IS_STORM_CLIENT=1)
    a.rmw("OSSSYS", oss.regIH_INT_FLOOD_CNTL, FLOOD_CNTL_ENABLE=1)
    a.rmw("OSSSYS", oss.regIH_MSI_STORM_CTRL, DELAY=3)
    a.rmw("OSSSYS", oss.regIH_RB_CNTL, RB_ENABLE=1, ENABLE_INTR=1)
    a.rmw("OSSSYS", oss.regIH_RB_CNTL_RING1, RB_ENABLE=1)
    self.rptr = 0

  def entries(self) -> list[Entry]:
    """New entries of ring 0 since the last call (the driver's read pointer then follows the write pointer)."""
    a = self.adev
    wptr = oss.regIH_RB_WPTR.decode(a.rreg("OSSSYS", oss.regIH_RB_WPTR))["OFFSET"] << 2
    ring = a.vram[self.rings[0]:self.rings[0] + RING_SIZE].view(np.uint32)
    out = []
    while self.rptr != wptr:
      dw = [int(x) for x in ring[self.rptr // 4:self.rptr // 4 + ENTRY_DWORDS]]
      out.append(Entry(dw[0] & 0xFF, (dw[0] >> 8) & 0xFF, (dw[0] >> 16) & 0xFF, (dw[0] >> 24) & 0xF, dw[3] & 0xFFFF, tuple(dw[4:8])))
      self.rptr = (self.rptr + ENTRY_DWORDS * 4) % RING_SIZE
    if out: a.wreg("OSSSYS", oss.regIH_RB_RPTR, OFFSET=self.rptr >> 2)
    return out

  def drain(self) -> None:
    self.entries()
