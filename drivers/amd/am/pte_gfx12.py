"""The gfx12 PTE layout (amdgpu_vm.h, gmc_v12_0.c): MTYPE in bits 54-55 (AMDGPU_PTE_MTYPE_GFX12), the huge-leaf marker
AMDGPU_PDE_PTE_GFX12 at bit 63."""
from autogen.amd import amdgpu_vm as vm
from drivers.amd.am.pte import PTELayout


class PTEgfx12(PTELayout):
  MTYPE_MASK = vm.AMDGPU_PTE_MTYPE_GFX12_MASK
  MTYPE_UC = 3                      # soc24_enum.h MTYPE_UC (gmc_v12_0.c maps AMDGPU_VM_MTYPE_UC to it)
  PDE_PTE = vm.AMDGPU_PDE_PTE_GFX12
