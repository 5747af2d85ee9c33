"""IH 6.0 (OSSSYS 6.0), the interrupt-handler IP block (Linux ih_v6_0.c): the two rings the GPU writes 32-byte entries
into, and the driver's walk over ring 0 to find faults (ih_v6_0_irq_init; entry layout: amdgpu_ih.c's decode). What
an entry means is the GFX block's to say (its generation's client and source ids: GFXv11_0.interrupt), as Linux's IP
blocks register their own interrupt sources."""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np
from autogen.amd import osssys_6_0_0
from drivers.amd.am.ip_block import IPBlock

RING_SIZE = 256 << 10
ENTRY_DWORDS = 8
MC_SPACE_GPA = 4          # IH_RB_CNTL.MC_SPACE: the ring is addressed by MC address (ih_v6_0_rb_cntl: 4 unless bus addresses)
MSI_STORM_DELAY = 3       # IH_MSI_STORM_CTRL.DELAY: spacing of page-fault interrupts, against MSI storms (ih_v6_0_irq_init)


def ring_regs(oss) -> tuple[tuple, tuple]:
  """(base, base_hi, cntl, wptr, rptr, doorbell_rptr) of ring 0 and ring 1 in an OSSSYS register module."""
  return ((oss.regIH_RB_BASE, oss.regIH_RB_BASE_HI, oss.regIH_RB_CNTL, oss.regIH_RB_WPTR, oss.regIH_RB_RPTR, oss.regIH_DOORBELL_RPTR),
          (oss.regIH_RB_BASE_RING1, oss.regIH_RB_BASE_HI_RING1, oss.regIH_RB_CNTL_RING1, oss.regIH_RB_WPTR_RING1,
           oss.regIH_RB_RPTR_RING1, oss.regIH_DOORBELL_RPTR_RING1))


@dataclass
class Entry:
  client: int
  source: int
  ring: int
  vmid: int
  pasid: int
  data: tuple[int, int, int, int]


class IHv6_0(IPBlock):
  IP = "OSSSYS"
  oss = osssys_6_0_0          # the register module of this version

  def sw_init(self) -> None:
    mm = self.core.mm
    self.rings = [mm.palloc(RING_SIZE, boot=True, zero=True) for _ in range(2)]
    self.wptr_pages = [mm.palloc(4096, boot=True, zero=True) for _ in range(2)]
    self.rptr = 0

  def hw_init(self) -> None:
    """ih_v6_0_irq_init: both rings (ring 0 with the write-pointer writeback and overflow handling, ring 1 draining when
    full), then the storm controls, then the rings on."""
    c = self.core
    for i, (ring, wp, (base, base_hi, cntl, wptr, rptr, doorbell_rptr)) in enumerate(zip(self.rings, self.wptr_pages, ring_regs(self.oss))):
      mc = c.mc(ring)
      self.w(base, (mc >> 8) & 0xFFFFFFFF)
      self.w(base_hi, mc >> 40)
      ring_fields = dict(MC_SPACE=MC_SPACE_GPA, WPTR_OVERFLOW_CLEAR=1, RB_SIZE=(RING_SIZE // 4).bit_length() - 1, MC_SNOOP=1)
      if i == 0: ring_fields.update(WPTR_OVERFLOW_ENABLE=1, RPTR_REARM=1)
      else: ring_fields.update(RB_FULL_DRAIN_ENABLE=1)
      self.w(cntl, **ring_fields)
      if i == 0:
        self.w(self.oss.regIH_RB_WPTR_ADDR_LO, c.mc(wp) & 0xFFFFFFFF)
        self.w(self.oss.regIH_RB_WPTR_ADDR_HI, c.mc(wp) >> 32)
      for reg in (wptr, rptr, doorbell_rptr): self.w(reg, 0)
    self.rmw(self.oss.regIH_STORM_CLIENT_LIST_CNTL, CLIENT18_IS_STORM_CLIENT=1)
    self.rmw(self.oss.regIH_INT_FLOOD_CNTL, FLOOD_CNTL_ENABLE=1)
    self.rmw(self.oss.regIH_MSI_STORM_CTRL, DELAY=MSI_STORM_DELAY)
    self.rmw(self.oss.regIH_RB_CNTL, RB_ENABLE=1, ENABLE_INTR=1)
    self.rmw(self.oss.regIH_RB_CNTL_RING1, RB_ENABLE=1)
    self.rptr = 0

  # partial boot: the rings from scratch again, as ih_v6_0_resume does (it is ih_v6_0_hw_init): sw_init cleared them, so
  # the read and write pointers an earlier instance left go back to 0 too
  resume = hw_init

  def entries(self) -> list[Entry]:
    """New entries of ring 0 since the last call (the driver's read pointer then follows the write pointer)."""
    c = self.core
    wptr = self.oss.regIH_RB_WPTR.decode(self.r(self.oss.regIH_RB_WPTR))["OFFSET"] << 2
    out = []
    while self.rptr != wptr:   # entry by entry: where VRAM is reached over a bus (USB), only the new ones are read
      at = self.rings[0] + self.rptr
      dw = [int(x) for x in c.vram[at:at + 4 * ENTRY_DWORDS].view(np.uint32)]
      out.append(Entry(dw[0] & 0xFF, (dw[0] >> 8) & 0xFF, (dw[0] >> 16) & 0xFF, (dw[0] >> 24) & 0xF, dw[3] & 0xFFFF, tuple(dw[4:8])))
      self.rptr = (self.rptr + ENTRY_DWORDS * 4) % RING_SIZE
    if out: self.w(self.oss.regIH_RB_RPTR, OFFSET=self.rptr >> 2)
    return out

  def faults(self) -> list[str]:
    """What the new entries of ring 0 report going wrong, in the GFX block's words (completions are no faults)."""
    return [what for e in self.entries() if (what := self.core.gfx.interrupt(e)) is not None]

  def hw_fini(self) -> None:
    """Drain ring 0; a fault among what is left (one no wait collected) leaves the device in error state, so the next
    instance resets it rather than resuming it."""
    if self.faults(): self.core.is_err_state = True
