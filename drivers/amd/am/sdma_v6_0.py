"""SDMA 6.0, the system-DMA IP block (Linux sdma_v6_0.c): engine 0's setup and its queue 0 ring registers
(sdma_v6_0_gfx_resume). The SDMA registers live in GC."""
from __future__ import annotations
from autogen.amd import gc_11_0_0
from drivers.amd.am.ip_block import IPBlock

DOORBELL_SDMA_ENGINE0 = 0x100          # AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 (amdgpu_doorbell.h): 64-bit slot 0x100 (byte 0x800) of BAR2
DOORBELL_RANGE = 4                     # doorbells routed to the engine (S2A port 2 range size)
WATCHDOG_HANG_COUNT = 100              # x 100 ms: a queue stuck 10 s is hung (sdma_v6_0_gfx_resume: usec_timeout / 100000)
# UTCL1: RESP_MODE 3 (non-copy addresses), REDO_DELAY 9 (sdma_v6_0_gfx_resume); the L2 policies of sdma_common.h:
CACHE_READ_POLICY_L2_DEFAULT, CACHE_WRITE_POLICY_L2_DEFAULT = 2, 3     # ..._L2__NOA, ..._L2__BYPASS
RPTR_WRITEBACK_TIMER = 4               # RB_CNTL.RPTR_WRITEBACK_TIMER, the value of sdma_v6_0_mqd_init


class SDMAv6_0(IPBlock):
  IP = "GC"
  gc = gc_11_0_0              # the register module of this version (the SDMA registers live in GC)
  UTCL1_PAGE_EXTRA = {"LLC_NOALLOC": 1}       # sdma_v6_0_gfx_resume: no last-level-cache allocation
  WPTR_POLL = "F32_WPTR_POLL_ENABLE"          # RB_CNTL: the engine polls the write pointer in memory

  def hw_init(self) -> None:
    """sdma_v6_0_gfx_resume's engine part: watchdog, UTCL1, unhalt, traps, and the doorbell routing."""
    self.rmw(self.gc.regSDMA0_WATCHDOG_CNTL, QUEUE_HANG_COUNT=WATCHDOG_HANG_COUNT)
    self.rmw(self.gc.regSDMA0_UTCL1_CNTL, RESP_MODE=3, REDO_DELAY=9)
    self.rmw(self.gc.regSDMA0_UTCL1_PAGE, RD_L2_POLICY=CACHE_READ_POLICY_L2_DEFAULT, WR_L2_POLICY=CACHE_WRITE_POLICY_L2_DEFAULT,
             **self.UTCL1_PAGE_EXTRA)
    self.unhalt()
    self.rmw(self.gc.regSDMA0_CNTL, TRAP_ENABLE=1)
    self.core.nbio.sdma_doorbell_range(DOORBELL_SDMA_ENGINE0 * 2, DOORBELL_RANGE)   # in dwords

  def unhalt(self) -> None: self.rmw(self.gc.regSDMA0_F32_CNTL, HALT=0, TH1_RESET=0)

  resume = hw_init   # partial boot: the last instance's hw_fini soft-reset the engine, so it starts as from cold

  def hw_fini(self) -> None: self.stop_queue()

  def soft_reset(self) -> None:
    """GRBM_SOFT_RESET.SOFT_RESET_SDMA0 pulse (sdma_v6_0_soft_reset)."""
    self.rmw(self.gc.regGRBM_SOFT_RESET, SOFT_RESET_SDMA0=1)
    self.rmw(self.gc.regGRBM_SOFT_RESET, SOFT_RESET_SDMA0=0)

  def setup_ring(self, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int) -> int:
    """Program queue 0's ring (sdma_v6_0_gfx_resume's ring part); returns the doorbell's byte offset in BAR2."""
    self.w(self.gc.regSDMA0_QUEUE0_MINOR_PTR_UPDATE, 1)   # the pointers change together: hold their update
    gc = self.gc
    for r in (gc.regSDMA0_QUEUE0_RB_RPTR, gc.regSDMA0_QUEUE0_RB_RPTR_HI, gc.regSDMA0_QUEUE0_RB_WPTR, gc.regSDMA0_QUEUE0_RB_WPTR_HI): self.w(r, 0)
    self.w(self.gc.regSDMA0_QUEUE0_RB_BASE, (ring_va >> 8) & 0xFFFFFFFF)
    self.w(self.gc.regSDMA0_QUEUE0_RB_BASE_HI, ring_va >> 40)
    self.w(self.gc.regSDMA0_QUEUE0_RB_RPTR_ADDR_LO, rptr_va & 0xFFFFFFFC); self.w(self.gc.regSDMA0_QUEUE0_RB_RPTR_ADDR_HI, rptr_va >> 32)
    self.w(self.gc.regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO, wptr_va & 0xFFFFFFFC); self.w(self.gc.regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI, wptr_va >> 32)
    self.rmw(self.gc.regSDMA0_QUEUE0_DOORBELL_OFFSET, OFFSET=DOORBELL_SDMA_ENGINE0 * 2)
    self.rmw(self.gc.regSDMA0_QUEUE0_DOORBELL, ENABLE=1)
    self.w(self.gc.regSDMA0_QUEUE0_MINOR_PTR_UPDATE, 0)
    self.w(self.gc.regSDMA0_QUEUE0_RB_CNTL, RB_ENABLE=1, RB_SIZE=(ring_size // 4).bit_length() - 1, **{self.WPTR_POLL: 1},
           RPTR_WRITEBACK_ENABLE=1, RPTR_WRITEBACK_TIMER=RPTR_WRITEBACK_TIMER, RB_PRIV=1)   # ring of 2^RB_SIZE dwords
    self.rmw(self.gc.regSDMA0_QUEUE0_IB_CNTL, IB_ENABLE=1)
    return DOORBELL_SDMA_ENGINE0 * 8

  def stop_queue(self) -> None:
    """Stop queue 0's ring, IBs and doorbell, then soft-reset the engine (sdma_v6_0_gfx_stop, then the SDMA 6 reset)."""
    self.rmw(self.gc.regSDMA0_QUEUE0_RB_CNTL, RB_ENABLE=0)
    self.rmw(self.gc.regSDMA0_QUEUE0_IB_CNTL, IB_ENABLE=0)
    self.rmw(self.gc.regSDMA0_QUEUE0_DOORBELL, ENABLE=0)
    self.soft_reset()
