"""SDMA 7.0, the system-DMA IP block of GC 12 GPUs (Linux sdma_v7_0.c): SDMA 6.0's engine and queue 0 setup on
gc_12_0_0's registers; the engine is an MCU (SDMA0_MCU_CNTL, RB_CNTL.MCU_WPTR_POLL_ENABLE) and UTCL1_PAGE keeps only the
L2 policies (sdma_v7_0_gfx_resume)."""
from autogen.amd import gc_12_0_0
from drivers.amd.am.sdma_v6_0 import SDMAv6_0


class SDMAv7_0(SDMAv6_0):
  gc = gc_12_0_0
  UTCL1_PAGE_EXTRA: dict[str, int] = {}
  WPTR_POLL = "MCU_WPTR_POLL_ENABLE"

  def unhalt(self) -> None: self.rmw(self.gc.regSDMA0_MCU_CNTL, HALT=0, RESET=0)
