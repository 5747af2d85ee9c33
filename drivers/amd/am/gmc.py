"""GMC: the MM and GC hubs (MMHUB 3.0 / GC 11 VM registers), VMID 0 page tables, TLB flushes
(reference/amd_driver.md 2.6-2.7)."""
from __future__ import annotations
from typing import TYPE_CHECKING
import numpy as np
from autogen.amd import mmhub_3_0_0 as mmhub, gc_11_0_0 as gc
from drivers.amd.am.mm import VA_BASE, PAGE
if TYPE_CHECKING: from drivers.amd.am.amdev import AMDev

HUBS = {"MM": ("MMHUB", mmhub), "GC": ("GC", gc)}
VA_END = (1 << 47) - 1          # context 0 covers [VA_BASE, 0x7fff_ffff_ffff]
ENGINE = 17                     # the invalidation engine the driver owns
N_ENGINES = 18


class GMC:
  def __init__(self, adev: AMDev):
    self.adev = adev
    self.fb_base = (adev.rreg("MMHUB", mmhub.regMMMC_VM_FB_LOCATION_BASE) & 0xFFFFFF) << 24
    self.fb_end = self.fb_base + adev.vram_size - 1
    self.memscratch = adev.mm.palloc(PAGE, boot=True, zero=True)   # where accesses outside the aperture land
    self.dummy = adev.mm.palloc(PAGE, boot=True, zero=True)        # where faulting accesses land
    self.hubs_ready: set[str] = set()

  def reg(self, hub: str, name: str):
    return getattr(HUBS[hub][1], f"reg{hub}{name}")

  def w(self, hub: str, name: str, value: int | None = None, **fields) -> None:
    self.adev.wreg(HUBS[hub][0], self.reg(hub, name), value, **fields)

  def rmw(self, hub: str, name: str, **fields) -> None: self.adev.rmw(HUBS[hub][0], self.reg(hub, name), **fields)

  def init_hw(self) -> None: self.init_hub("MM")

  def init_hub(self, hub: str) -> None:
    adev = self.adev
    self.w(hub, "MC_VM_AGP_BASE", 0); self.w(hub, "MC_VM_AGP_BOT", 0xFFFFFF); self.w(hub, "MC_VM_AGP_TOP", 0)
    self.w(hub, "MC_VM_SYSTEM_APERTURE_LOW_ADDR", self.fb_base >> 18)
    self.w(hub, "MC_VM_SYSTEM_APERTURE_HIGH_ADDR", self.fb_end >> 18)
    scratch, dummy = adev.mc(self.memscratch), adev.mc(self.dummy)
    self.w(hub, "MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB", (scratch >> 12) & 0xFFFFFFFF)
    self.w(hub, "MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB", scratch >> 44)
    self.w(hub, "VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32", (dummy >> 12) & 0xFFFFFFFF)
    self.w(hub, "VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", dummy >> 44)
    self.rmw(hub, "VM_L2_PROTECTION_FAULT_CNTL2", ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY=1)
    self.rmw(hub, "MC_VM_MX_L1_TLB_CNTL", ENABLE_L1_TLB=1, SYSTEM_ACCESS_MODE=3, ENABLE_ADVANCED_DRIVER_MODEL=1, MTYPE=3)
    self.rmw(hub, "VM_L2_CNTL", ENABLE_L2_CACHE=1, ENABLE_DEFAULT_PAGE_OUT_TO_SYSTEM_MEMORY=1, CONTEXT1_IDENTITY_ACCESS_MODE=1)
    self.rmw(hub, "VM_L2_CNTL2", INVALIDATE_ALL_L1_TLBS=1, INVALIDATE_L2_CACHE=1)
    self.w(hub, "VM_L2_CNTL3", BANK_SELECT=9, L2_CACHE_BIGK_FRAGMENT_SIZE=6, L2_CACHE_BIGK_ASSOCIATIVITY=1, L2_CACHE_4K_ASSOCIATIVITY=1)
    self.w(hub, "VM_L2_CNTL4", 1)
    self.w(hub, "VM_L2_CNTL5", WALKER_PRIORITY_CLIENT_ID=0x1FF)
    start, end = VA_BASE >> 12, VA_END >> 12
    self.w(hub, "VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", start & 0xFFFFFFFF); self.w(hub, "VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32", start >> 32)
    self.w(hub, "VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", end & 0xFFFFFFFF); self.w(hub, "VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32", end >> 32)
    root = adev.mm.root | 1   # the PDB2 as a valid page-directory entry (a VRAM address)
    self.w(hub, "VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", root & 0xFFFFFFFF); self.w(hub, "VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32", root >> 32)
    cntl = self.reg(hub, "VM_CONTEXT0_CNTL")
    faults = {f: 1 for f in cntl.fields if f.endswith(("_PROTECTION_FAULT_ENABLE_INTERRUPT", "_PROTECTION_FAULT_ENABLE_DEFAULT"))}
    self.w(hub, "VM_CONTEXT0_CNTL", ENABLE_CONTEXT=1, PAGE_TABLE_DEPTH=3, **faults)
    self.w(hub, "VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32", 0xFFFFFFFF)
    self.w(hub, "VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32", 0xF)
    for name in ("VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32", "VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32",
                 "VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32", "VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32"): self.w(hub, name, 0)
    for e in range(N_ENGINES):
      self.w(hub, f"VM_INVALIDATE_ENG{e}_ADDR_RANGE_LO32", 0xFFFFFFFF)
      self.w(hub, f"VM_INVALIDATE_ENG{e}_ADDR_RANGE_HI32", 0x1F)
    self.hubs_ready.add(hub)

  def flush_tlb(self, vmid: int = 0) -> None:
    """Invalidate both hubs' TLBs for `vmid` after page-table changes (engine 17, semaphore on the MM hub)."""
    self.adev.hdp_flush()
    for hub in ("GC", "MM"):
      if hub not in self.hubs_ready: continue
      ip = HUBS[hub][0]
      if hub == "MM": self.adev.wait(ip, self.reg(hub, f"VM_INVALIDATE_ENG{ENGINE}_SEM"), 1, 1, "mm flush_tlb semaphore")
      self.w(hub, f"VM_INVALIDATE_ENG{ENGINE}_REQ", PER_VMID_INVALIDATE_REQ=1 << vmid, INVALIDATE_L2_PTES=1, INVALIDATE_L2_PDE0=1,
             INVALIDATE_L2_PDE1=1, INVALIDATE_L2_PDE2=1, INVALIDATE_L1_PTES=1)
      self.adev.wait(ip, self.reg(hub, f"VM_INVALIDATE_ENG{ENGINE}_ACK"), 1 << vmid, 1 << vmid, f"{hub.lower()} flush_tlb")
      if hub == "MM":
        self.w(hub, f"VM_INVALIDATE_ENG{ENGINE}_SEM", 0)
        self.rmw(hub, "VM_L2_BANK_SELECT_RESERVED_CID2", RESERVED_CACHE_PRIVATE_INVALIDATION=1)
        self.adev.rreg(ip, self.reg(hub, "VM_L2_BANK_SELECT_RESERVED_CID2"))

  def map(self, va: int, pages: np.ndarray, system: bool, uncached: bool = False) -> None:
    self.adev.mm.map(va, pages, system, uncached)
    self.flush_tlb()

  def unmap(self, va: int, npages: int) -> None:
    self.adev.mm.unmap(va, npages)
    self.flush_tlb()

  def fault(self, hub: str = "GC") -> tuple[int, int] | None:
    """(status, faulting VA) from the L2 protection-fault registers, clearing them; None when clear."""
    ip = HUBS[hub][0]
    status = self.adev.rreg(ip, self.reg(hub, "VM_L2_PROTECTION_FAULT_STATUS"))
    if not status: return None
    lo = self.adev.rreg(ip, self.reg(hub, "VM_L2_PROTECTION_FAULT_ADDR_LO32"))
    hi = self.adev.rreg(ip, self.reg(hub, "VM_L2_PROTECTION_FAULT_ADDR_HI32"))
    self.rmw(hub, "VM_L2_PROTECTION_FAULT_CNTL", CLEAR_PROTECTION_FAULT_STATUS_ADDR=1)
    return status, (hi << 32 | lo) << 12
