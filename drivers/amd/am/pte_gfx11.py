"""The gfx10/gfx11 PTE layout (amdgpu_vm.h, gmc_v11_0.c): MTYPE in bits 48-50 (AMDGPU_PTE_MTYPE_NV10), the huge-leaf
marker AMDGPU_PDE_PTE at bit 54; MTYPE values of soc21_enum.h."""
from autogen.amd import amdgpu_vm as vm, soc21_enum
from drivers.amd.am.pte import PTELayout


class PTEgfx11(PTELayout):
  MTYPE_MASK = vm.AMDGPU_PTE_MTYPE_NV10_MASK
  MTYPE_UC = soc21_enum.MTYPE_UC
  PDE_PTE = vm.AMDGPU_PDE_PTE
