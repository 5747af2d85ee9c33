"""SDMA 6.0 engine 0, queue 0: engine setup and the ring registers (reference/amd_driver.md 2.10-2.11)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from autogen.amd import gc_11_0_0 as gc, nbio_4_3_0 as nbio
if TYPE_CHECKING: from drivers.amd.am.amdev import AMDev

DOORBELL_SDMA_ENGINE0 = 0x100          # AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0: 64-bit slot 0x100 (byte 0x800) of BAR2
WATCHDOG_HANG_COUNT = 100              # x 100 ms


class SDMA:
  def __init__(self, adev: AMDev):
    self.adev = adev
    self.ring: dict | None = None

  def w(self, reg, value=None, **fields) -> None: self.adev.wreg("GC", reg, value, **fields)

  def init_hw(self) -> None:
    a = self.adev
    a.rmw("GC", gc.regSDMA0_WATCHDOG_CNTL, QUEUE_HANG_COUNT=WATCHDOG_HANG_COUNT)
    a.rmw("GC", gc.regSDMA0_UTCL1_CNTL, RESP_MODE=3, REDO_DELAY=9)
    a.rmw("GC", gc.regSDMA0_UTCL1_PAGE, RD_L2_POLICY=2, WR_L2_POLICY=3, LLC_NOALLOC=1)
    a.rmw("GC", gc.regSDMA0_F32_CNTL, HALT=0, TH1_RESET=0)
    a.rmw("GC", gc.regSDMA0_CNTL, TRAP_ENABLE=1)
    # doorbell routing (S2A) port 2 -> SDMA: 4 doorbells from slot 0x200 (dwords)
    a.wreg("NBIO", nbio.regS2A_DOORBELL_ENTRY_2_CTRL, S2A_DOORBELL_PORT2_ENABLE=1, S2A_DOORBELL_PORT2_AWID=0xE,
           S2A_DOORBELL_PORT2_RANGE_OFFSET=DOORBELL_SDMA_ENGINE0 * 2, S2A_DOORBELL_PORT2_RANGE_SIZE=4,
           S2A_DOORBELL_PORT2_AWADDR_31_28_VALUE=3)

  def setup_ring(self, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int) -> int:
    """Program queue 0's ring; returns the doorbell's byte offset in BAR2."""
    self.w(gc.regSDMA0_QUEUE0_MINOR_PTR_UPDATE, 1)
    for r in (gc.regSDMA0_QUEUE0_RB_RPTR, gc.regSDMA0_QUEUE0_RB_RPTR_HI, gc.regSDMA0_QUEUE0_RB_WPTR, gc.regSDMA0_QUEUE0_RB_WPTR_HI): self.w(r, 0)
    self.w(gc.regSDMA0_QUEUE0_RB_BASE, (ring_va >> 8) & 0xFFFFFFFF)
    self.w(gc.regSDMA0_QUEUE0_RB_BASE_HI, ring_va >> 40)
    self.w(gc.regSDMA0_QUEUE0_RB_RPTR_ADDR_LO, rptr_va & 0xFFFFFFFC); self.w(gc.regSDMA0_QUEUE0_RB_RPTR_ADDR_HI, rptr_va >> 32)
    self.w(gc.regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO, wptr_va & 0xFFFFFFFC); self.w(gc.regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI, wptr_va >> 32)
    self.adev.rmw("GC", gc.regSDMA0_QUEUE0_DOORBELL_OFFSET, OFFSET=DOORBELL_SDMA_ENGINE0 * 2)
    self.adev.rmw("GC", gc.regSDMA0_QUEUE0_DOORBELL, ENABLE=1)
    self.w(gc.regSDMA0_QUEUE0_MINOR_PTR_UPDATE, 0)
    self.w(gc.regSDMA0_QUEUE0_RB_CNTL, RB_ENABLE=1, RB_SIZE=(ring_size // 4).bit_length() - 1, F32_WPTR_POLL_ENABLE=1,
           RPTR_WRITEBACK_ENABLE=1, RPTR_WRITEBACK_TIMER=4, RB_PRIV=1)
    self.adev.rmw("GC", gc.regSDMA0_QUEUE0_IB_CNTL, IB_ENABLE=1)
    self.ring = dict(ring_va=ring_va, ring_size=ring_size)
    return DOORBELL_SDMA_ENGINE0 * 8

  def fini_hw(self) -> None:
    """Stop the ring, then soft-reset the engine (SDMA 6: GRBM_SOFT_RESET.SOFT_RESET_SDMA0)."""
    self.adev.rmw("GC", gc.regSDMA0_QUEUE0_RB_CNTL, RB_ENABLE=0)
    self.adev.rmw("GC", gc.regSDMA0_QUEUE0_IB_CNTL, IB_ENABLE=0)
    self.adev.rmw("GC", gc.regSDMA0_QUEUE0_DOORBELL, ENABLE=0)
    self.adev.rmw("GC", gc.regGRBM_SOFT_RESET, SOFT_RESET_SDMA0=1)
    self.adev.rmw("GC", gc.regGRBM_SOFT_RESET, SOFT_RESET_SDMA0=0)
    self.ring = None
