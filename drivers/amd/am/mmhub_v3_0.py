"""MMHUB 3.0: the VM hub of the memory controller's other clients (firmware, IH, ...) (Linux mmhub_v3_0.c), the
steps of vmhub.VMHub on its MMVM_/MMMC_ registers, plus what only this hub has: the frame-buffer location, the
invalidation semaphore and private invalidation of the TLB flush, and its clock gating."""
from types import SimpleNamespace
from autogen.amd import mmhub_3_0_0 as mmhub
from drivers.amd.am.gmc_v11_0 import HUB_REGS
from drivers.amd.am.vmhub import VMHub


class MMHUBv3_0(VMHub):
  IP, NAME = "MMHUB", "MM"
  R = SimpleNamespace(**{name: regs[1] for name, regs in HUB_REGS.items()})

  def fb_location(self) -> int:
    """The MC address of VRAM offset 0: MMMC_VM_FB_LOCATION_BASE in 16 MiB units (mmhub_v3_0_get_fb_location)."""
    reg = mmhub.regMMMC_VM_FB_LOCATION_BASE
    return (self.r(reg) & reg.mask("FB_BASE")) << 24

  def flush_tlb(self, vmid: int) -> None:
    """gmc_v11_0_flush_vm_hub on the MM hub: engine 17 under its semaphore, then a private invalidation
    (VM_L2_BANK_SELECT_RESERVED_CID2) and a read back to know it is done."""
    self.wait(mmhub.regMMVM_INVALIDATE_ENG17_SEM, 1, 1, "mm flush_tlb semaphore")
    super().flush_tlb(vmid)
    self.w(mmhub.regMMVM_INVALIDATE_ENG17_SEM, 0)
    self.rmw(mmhub.regMMVM_L2_BANK_SELECT_RESERVED_CID2, RESERVED_CACHE_PRIVATE_INVALIDATION=1)
    self.r(mmhub.regMMVM_L2_BANK_SELECT_RESERVED_CID2)

  def update_clock_gating(self) -> None:
    """The ATC L2's medium-grain clock gating and memory light sleep (mmhub_v3_0_update_medium_grain_clock_gating,
    _light_sleep)."""
    self.w(mmhub.regMM_ATC_L2_MISC_CG, ENABLE=1, MEM_LS_ENABLE=1)
