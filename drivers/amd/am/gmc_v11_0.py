"""GMC 11.0, the memory-controller IP block of GC 11 GPUs (Linux gmc_v11_0.c): where VRAM sits in the MC address space,
the scratch and dummy pages the hubs point at, VMID 0 page-table updates and the TLB flushes of both hubs
(gmc_v11_0.c gmc_v11_0_gart_enable, gmc_v11_0_flush_gpu_tlb). The hubs themselves are the core's gfxhub and mmhub helpers."""
from __future__ import annotations
import numpy as np
from drivers.amd.am.ip_block import IPBlock
from drivers.amd.am.mm import PAGE


class GMCv11_0(IPBlock):
  def sw_init(self) -> None:
    c = self.core
    self.fb_base = c.mmhub.fb_location()
    self.fb_end = self.fb_base + c.vram_size - 1
    self.memscratch = c.mm.palloc(PAGE, boot=True, zero=True)   # where accesses outside the system aperture land
    self.dummy = c.mm.palloc(PAGE, boot=True, zero=True)        # where faulting accesses land

  def hw_init(self) -> None:
    """The MM hub now; the GC hub comes up with GFX, after the RLC autoload (gfx_v11_0.py)."""
    self.core.mmhub.gart_enable()

  def set_clockgating(self) -> None: self.core.mmhub.update_clock_gating()

  def flush_tlb(self, vmid: int = 0) -> None:
    """After page-table changes: flush HDP (the tables are written through BAR0), then invalidate every enabled hub."""
    self.core.hdp_flush()
    for hub in (self.core.gfxhub, self.core.mmhub):
      if hub.enabled: hub.flush_tlb(vmid)

  def map(self, va: int, pages: np.ndarray, system: bool, uncached: bool = False) -> None:
    self.core.mm.map(va, pages, system, uncached)
    self.flush_tlb()

  def unmap(self, va: int, npages: int) -> None:
    self.core.mm.unmap(va, npages)
    self.flush_tlb()
