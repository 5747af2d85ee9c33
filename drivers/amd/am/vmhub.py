"""A VM hub (the GC hub or the MM hub): its GART/VM enable in the named steps of Linux's mmhub_v3_0_gart_enable /
gfxhub_v3_0_gart_enable, the TLB flush of gmc_v11_0_flush_vm_hub, and the L2 protection-fault registers.

Both hubs have the same registers under their own prefixes (GCVM_/GCMC_ in GC, MMVM_/MMMC_ in MMHUB): each subclass
(gfxhub_v3_0.py, mmhub_v3_0.py) names its own by the step names (R). Everything runs in VMID 0
(gfxhub_v3_0.c, mmhub_v3_0.c *_gart_enable)."""
from __future__ import annotations
from types import SimpleNamespace
from typing import TYPE_CHECKING
from drivers.amd.am.ip_block import IPRegisters
from drivers.amd.am.mm import VA_BASE
if TYPE_CHECKING: from drivers.amd.am.core import AMCore

VA_END = (1 << 47) - 1          # context 0 covers [VA_BASE, 0x7fff_ffff_ffff]
N_ENGINES = 18                  # invalidation engines per hub (mmhub_v3_0_program_invalidation)
PAGE_TABLE_DEPTH = 3            # VM_CONTEXT0_CNTL: 4 levels, PDB2 -> PTB (mm.SHIFTS)
# VM_CONTEXT0_CNTL: each of the seven kinds of protection fault raises an interrupt and is redirected to the dummy page
# (tinygrad's am/ip.py; Linux sets them for contexts 1-15 in gfxhub_v3_0_setup_vmid_config)
FAULT_ENABLES = ("RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT", "RANGE_PROTECTION_FAULT_ENABLE_DEFAULT",
                 "DUMMY_PAGE_PROTECTION_FAULT_ENABLE_INTERRUPT", "DUMMY_PAGE_PROTECTION_FAULT_ENABLE_DEFAULT",
                 "PDE0_PROTECTION_FAULT_ENABLE_INTERRUPT", "PDE0_PROTECTION_FAULT_ENABLE_DEFAULT",
                 "VALID_PROTECTION_FAULT_ENABLE_INTERRUPT", "VALID_PROTECTION_FAULT_ENABLE_DEFAULT",
                 "READ_PROTECTION_FAULT_ENABLE_INTERRUPT", "READ_PROTECTION_FAULT_ENABLE_DEFAULT",
                 "WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT", "WRITE_PROTECTION_FAULT_ENABLE_DEFAULT",
                 "EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT", "EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT")


class VMHub(IPRegisters):
  NAME: str                                          # "GC" or "MM", for messages
  R: SimpleNamespace                                 # the hub's registers by the names the steps below use

  def __init__(self, core: AMCore):
    super().__init__(core)
    self.enabled = False

  def gart_enable(self) -> None:
    """The hub's VM setup, step by step. Linux programs the GART aperture first; this driver does it after the caches
    (the order of tinygrad's am/ip.py init_hub). Either way context 0 is enabled only by enable_system_domain, after
    its window and root are in place. Linux's setup_vmid_config (contexts 1-15) has no counterpart: all runs in VMID 0."""
    self.init_system_aperture_regs()
    self.init_tlb_regs()
    self.init_cache_regs()
    self.init_gart_aperture_regs()
    self.enable_system_domain()
    self.disable_identity_aperture()
    self.program_invalidation()
    self.enabled = True

  def init_system_aperture_regs(self) -> None:
    """AGP off (BOT above TOP), the system aperture over VRAM (MC addresses in it bypass translation, 256 KiB units),
    and where accesses outside it or faulting accesses land."""
    gmc = self.core.gmc
    self.w(self.R.AGP_BASE, 0); self.w(self.R.AGP_BOT, 0xFFFFFF); self.w(self.R.AGP_TOP, 0)
    self.w(self.R.SYSTEM_APERTURE_LOW_ADDR, gmc.fb_base >> 18)
    self.w(self.R.SYSTEM_APERTURE_HIGH_ADDR, gmc.fb_end >> 18)
    scratch, dummy = self.core.mc(gmc.memscratch), self.core.mc(gmc.dummy)
    self.w(self.R.SYSTEM_APERTURE_DEFAULT_ADDR_LSB, (scratch >> 12) & 0xFFFFFFFF)
    self.w(self.R.SYSTEM_APERTURE_DEFAULT_ADDR_MSB, scratch >> 44)
    self.w(self.R.L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32, (dummy >> 12) & 0xFFFFFFFF)
    self.w(self.R.L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32, dummy >> 44)
    self.rmw(self.R.L2_PROTECTION_FAULT_CNTL2, ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY=1)

  def init_tlb_regs(self) -> None:
    """L1 TLB on, advanced driver model, uncached default MTYPE: the fields and values of mmhub_v3_0_init_tlb_regs."""
    self.rmw(self.R.MX_L1_TLB_CNTL, ENABLE_L1_TLB=1, SYSTEM_ACCESS_MODE=3, ENABLE_ADVANCED_DRIVER_MODEL=1, MTYPE=self.core.pte.MTYPE_UC)

  def init_cache_regs(self) -> None:
    """The L2 as mmhub_v3_0_init_cache_regs leaves it: CNTL3-5 are the header defaults (0x80100007, 0xc1, 0x3fe0) with
    bank select 9 / big-K fragment size 6 and the VMC taps' physical-request bits cleared."""
    self.rmw(self.R.L2_CNTL, ENABLE_L2_CACHE=1, ENABLE_DEFAULT_PAGE_OUT_TO_SYSTEM_MEMORY=1, CONTEXT1_IDENTITY_ACCESS_MODE=1)
    self.rmw(self.R.L2_CNTL2, INVALIDATE_ALL_L1_TLBS=1, INVALIDATE_L2_CACHE=1)
    self.w(self.R.L2_CNTL3, BANK_SELECT=9, L2_CACHE_BIGK_FRAGMENT_SIZE=6, L2_CACHE_BIGK_ASSOCIATIVITY=1, L2_CACHE_4K_ASSOCIATIVITY=1)
    self.w(self.R.L2_CNTL4, L2_CACHE_4K_PARTITION_COUNT=1)
    self.w(self.R.L2_CNTL5, WALKER_PRIORITY_CLIENT_ID=0x1FF)

  def init_gart_aperture_regs(self) -> None:
    """Context 0's VA window (in 4 KiB pages) and its root page directory (a valid PDE: VRAM address | 1)."""
    start, end, root = VA_BASE >> 12, VA_END >> 12, self.core.mm.root | 1
    self.w(self.R.CONTEXT0_PAGE_TABLE_START_ADDR_LO32, start & 0xFFFFFFFF); self.w(self.R.CONTEXT0_PAGE_TABLE_START_ADDR_HI32, start >> 32)
    self.w(self.R.CONTEXT0_PAGE_TABLE_END_ADDR_LO32, end & 0xFFFFFFFF); self.w(self.R.CONTEXT0_PAGE_TABLE_END_ADDR_HI32, end >> 32)
    self.w(self.R.CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32, root & 0xFFFFFFFF); self.w(self.R.CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32, root >> 32)

  def enable_system_domain(self) -> None:
    self.w(self.R.CONTEXT0_CNTL, ENABLE_CONTEXT=1, PAGE_TABLE_DEPTH=PAGE_TABLE_DEPTH, **{f: 1 for f in FAULT_ENABLES})

  def disable_identity_aperture(self) -> None:
    """An empty identity aperture: LOW above HIGH (the values of mmhub_v3_0_disable_identity_aperture)."""
    self.w(self.R.CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32, 0xFFFFFFFF)
    self.w(self.R.CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32, 0xF)
    self.w(self.R.CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32, 0)
    self.w(self.R.CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32, 0)
    self.w(self.R.CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32, 0)
    self.w(self.R.CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32, 0)

  def program_invalidation(self) -> None:
    """Every invalidation engine covers the whole address range (mmhub_v3_0_program_invalidation: 0xffffffff, 0x1f)."""
    step = self.R.INVALIDATE_ENG1_ADDR_RANGE_LO32.offset - self.R.INVALIDATE_ENG0_ADDR_RANGE_LO32.offset
    lo, hi = self.core.addr(self.IP, self.R.INVALIDATE_ENG0_ADDR_RANGE_LO32), self.core.addr(self.IP, self.R.INVALIDATE_ENG0_ADDR_RANGE_HI32)
    for e in range(N_ENGINES):
      self.core.wdword(lo + e * step, 0xFFFFFFFF)
      self.core.wdword(hi + e * step, 0x1F)

  def flush_tlb(self, vmid: int) -> None:
    """Invalidate the L2 PTEs/PDEs and the L1 TLBs for `vmid` through engine 17 and wait for its ack."""
    self.w(self.R.INVALIDATE_ENG17_REQ, PER_VMID_INVALIDATE_REQ=1 << vmid, INVALIDATE_L2_PTES=1, INVALIDATE_L2_PDE0=1,
           INVALIDATE_L2_PDE1=1, INVALIDATE_L2_PDE2=1, INVALIDATE_L1_PTES=1)
    self.wait(self.R.INVALIDATE_ENG17_ACK, 1 << vmid, 1 << vmid, f"{self.NAME.lower()} flush_tlb")

  def fault(self) -> tuple[int, int] | None:
    """(status, faulting VA) from the L2 protection-fault registers, clearing them; None when clear."""
    if not (status := self.fault_status()): return None
    lo, hi = self.r(self.R.L2_PROTECTION_FAULT_ADDR_LO32), self.r(self.R.L2_PROTECTION_FAULT_ADDR_HI32)
    self.rmw(self.R.L2_PROTECTION_FAULT_CNTL, CLEAR_PROTECTION_FAULT_STATUS_ADDR=1)
    return status, (hi << 32 | lo) << 12

  def fault_status(self) -> int: return self.r(self.R.L2_PROTECTION_FAULT_STATUS)

  def fault_kind(self, status: int) -> str:
    """What a VM_L2_PROTECTION_FAULT_STATUS value says went wrong: PERMISSION_FAULTS bit 0 VALID (nothing valid mapped),
    bits 1-3 the READ / WRITE / EXECUTE permission a mapped page lacks; WALKER_ERROR a page-table walk the hub rejected;
    MAPPING_ERROR alone an address outside the VM range."""
    f = self.R.L2_PROTECTION_FAULT_STATUS.decode(status)
    perm = f["PERMISSION_FAULTS"]
    if perm & 1: return "not present"
    if perm: return "no " + "/".join(n for b, n in ((2, "read"), (4, "write"), (8, "execute")) if perm & b) + " permission"
    if f["WALKER_ERROR"]: return "page-table walk error"
    return "outside the VM range" if f["MAPPING_ERROR"] else "unknown fault"
