"""GMC 11.0, the memory-controller IP block of GC 11 GPUs (Linux gmc_v11_0.c): where VRAM sits in the MC address space,
the scratch and dummy pages the hubs point at, VMID 0 page-table updates and the TLB flushes of both hubs
(gmc_v11_0.c gmc_v11_0_gart_enable, gmc_v11_0_flush_gpu_tlb). The hubs themselves are the core's gfxhub and mmhub helpers."""
from __future__ import annotations
import numpy as np
from autogen.amd import gc_11_0_0 as gc, mmhub_3_0_0 as mmhub
from drivers.amd.am.ip_block import IPBlock
from drivers.amd.am.mm import PAGE

# GMC 11's two VM hubs have the same registers under their own names. The name the hub steps use (vmhub.py) ->
# (the GFXHUB 3.0 register, in GC; the MMHUB 3.0 register)
HUB_REGS = {
  "AGP_BASE": (gc.regGCMC_VM_AGP_BASE, mmhub.regMMMC_VM_AGP_BASE),
  "AGP_BOT": (gc.regGCMC_VM_AGP_BOT, mmhub.regMMMC_VM_AGP_BOT),
  "AGP_TOP": (gc.regGCMC_VM_AGP_TOP, mmhub.regMMMC_VM_AGP_TOP),
  "SYSTEM_APERTURE_LOW_ADDR": (gc.regGCMC_VM_SYSTEM_APERTURE_LOW_ADDR, mmhub.regMMMC_VM_SYSTEM_APERTURE_LOW_ADDR),
  "SYSTEM_APERTURE_HIGH_ADDR": (gc.regGCMC_VM_SYSTEM_APERTURE_HIGH_ADDR, mmhub.regMMMC_VM_SYSTEM_APERTURE_HIGH_ADDR),
  "SYSTEM_APERTURE_DEFAULT_ADDR_LSB": (gc.regGCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB, mmhub.regMMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB),
  "SYSTEM_APERTURE_DEFAULT_ADDR_MSB": (gc.regGCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB, mmhub.regMMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB),
  "L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32": (gc.regGCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32, mmhub.regMMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32),
  "L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32": (gc.regGCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32, mmhub.regMMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32),
  "L2_PROTECTION_FAULT_CNTL": (gc.regGCVM_L2_PROTECTION_FAULT_CNTL, mmhub.regMMVM_L2_PROTECTION_FAULT_CNTL),
  "L2_PROTECTION_FAULT_CNTL2": (gc.regGCVM_L2_PROTECTION_FAULT_CNTL2, mmhub.regMMVM_L2_PROTECTION_FAULT_CNTL2),
  "L2_PROTECTION_FAULT_STATUS": (gc.regGCVM_L2_PROTECTION_FAULT_STATUS, mmhub.regMMVM_L2_PROTECTION_FAULT_STATUS),
  "L2_PROTECTION_FAULT_ADDR_LO32": (gc.regGCVM_L2_PROTECTION_FAULT_ADDR_LO32, mmhub.regMMVM_L2_PROTECTION_FAULT_ADDR_LO32),
  "L2_PROTECTION_FAULT_ADDR_HI32": (gc.regGCVM_L2_PROTECTION_FAULT_ADDR_HI32, mmhub.regMMVM_L2_PROTECTION_FAULT_ADDR_HI32),
  "MX_L1_TLB_CNTL": (gc.regGCMC_VM_MX_L1_TLB_CNTL, mmhub.regMMMC_VM_MX_L1_TLB_CNTL),
  "L2_CNTL": (gc.regGCVM_L2_CNTL, mmhub.regMMVM_L2_CNTL),
  "L2_CNTL2": (gc.regGCVM_L2_CNTL2, mmhub.regMMVM_L2_CNTL2),
  "L2_CNTL3": (gc.regGCVM_L2_CNTL3, mmhub.regMMVM_L2_CNTL3),
  "L2_CNTL4": (gc.regGCVM_L2_CNTL4, mmhub.regMMVM_L2_CNTL4),
  "L2_CNTL5": (gc.regGCVM_L2_CNTL5, mmhub.regMMVM_L2_CNTL5),
  "CONTEXT0_CNTL": (gc.regGCVM_CONTEXT0_CNTL, mmhub.regMMVM_CONTEXT0_CNTL),
  "CONTEXT0_PAGE_TABLE_START_ADDR_LO32": (gc.regGCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32, mmhub.regMMVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32),
  "CONTEXT0_PAGE_TABLE_START_ADDR_HI32": (gc.regGCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32, mmhub.regMMVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32),
  "CONTEXT0_PAGE_TABLE_END_ADDR_LO32": (gc.regGCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32, mmhub.regMMVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32),
  "CONTEXT0_PAGE_TABLE_END_ADDR_HI32": (gc.regGCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32, mmhub.regMMVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32),
  "CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32": (gc.regGCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32, mmhub.regMMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32),
  "CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32": (gc.regGCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32, mmhub.regMMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32),
  "CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32":
    (gc.regGCVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32, mmhub.regMMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32),
  "CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32":
    (gc.regGCVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32, mmhub.regMMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32),
  "CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32":
    (gc.regGCVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32, mmhub.regMMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32),
  "CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32":
    (gc.regGCVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32, mmhub.regMMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32),
  "CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32": (gc.regGCVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32,
                                            mmhub.regMMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32),
  "CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32": (gc.regGCVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32,
                                            mmhub.regMMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32),
  "INVALIDATE_ENG0_ADDR_RANGE_LO32": (gc.regGCVM_INVALIDATE_ENG0_ADDR_RANGE_LO32, mmhub.regMMVM_INVALIDATE_ENG0_ADDR_RANGE_LO32),
  "INVALIDATE_ENG0_ADDR_RANGE_HI32": (gc.regGCVM_INVALIDATE_ENG0_ADDR_RANGE_HI32, mmhub.regMMVM_INVALIDATE_ENG0_ADDR_RANGE_HI32),
  "INVALIDATE_ENG1_ADDR_RANGE_LO32": (gc.regGCVM_INVALIDATE_ENG1_ADDR_RANGE_LO32, mmhub.regMMVM_INVALIDATE_ENG1_ADDR_RANGE_LO32),
  "INVALIDATE_ENG17_REQ": (gc.regGCVM_INVALIDATE_ENG17_REQ, mmhub.regMMVM_INVALIDATE_ENG17_REQ),
  "INVALIDATE_ENG17_ACK": (gc.regGCVM_INVALIDATE_ENG17_ACK, mmhub.regMMVM_INVALIDATE_ENG17_ACK),
}


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
