"""GMC 12.0, the memory-controller IP block of GC 12 GPUs (Linux gmc_v12_0.c): the same steps as GMC 11.0
(gmc_v12_0_gart_enable, gmc_v12_0_flush_gpu_tlb) over the GFXHUB 12.0 and MMHUB 4.1 helpers; the PTE layout differs
(gmc_v12_0.c: ip_table.PTE picks pte_gfx12)."""
from __future__ import annotations
from drivers.amd.am.gmc_v11_0 import GMCv11_0


class GMCv12_0(GMCv11_0):
  pass
