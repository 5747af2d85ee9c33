"""GFX (GC 11.0): the GC hub, the RS64 MEC (compute micro-engine) and its hardware queue (HQD), programmed
directly from a v11 compute MQD (no KIQ/MES), plus GFX clock gating (reference/amd_driver.md 2.10-2.12)."""
from __future__ import annotations
import ctypes
from typing import TYPE_CHECKING
import numpy as np
from autogen.amd import gc_11_0_0 as gc, nbio_4_3_0 as nbio, mmhub_3_0_0 as mmhub, v11_structs as v11
if TYPE_CHECKING: from drivers.amd.am.amdev import AMDev

MEC_ME, MEC_PIPE, MEC_QUEUE = 1, 0, 0
DOORBELL_MEC_RING0 = 3              # AMDGPU_NAVI10_DOORBELL_MEC_RING0: 64-bit doorbell slot 3 of BAR2
MQD_HEADER = 0xC0310800             # v11 compute MQD header value (gfx_v11_0_compute_mqd_init)
DOORBELL_RANGE_UPPER = 0xF8
N_VMIDS = 16
# MQD dwords from cp_mqd_base_addr_lo to cp_hqd_pq_wptr_hi are the register image of CP_MQD_BASE_ADDR..CP_HQD_PQ_WPTR_HI
HQD_FIRST = v11.v11_compute_mqd.cp_mqd_base_addr_lo.offset // 4
HQD_LAST = v11.v11_compute_mqd.cp_hqd_pq_wptr_hi.offset // 4


class GFX:
  def __init__(self, adev: AMDev):
    self.adev = adev
    self.mqd = adev.mm.palloc(ctypes.sizeof(v11.v11_compute_mqd), boot=True, zero=True)
    self.eop = adev.mm.palloc(4096, boot=True, zero=True)
    self.queue: dict | None = None

  def w(self, reg, value=None, **fields) -> None: self.adev.wreg("GC", reg, value, **fields)
  def r(self, reg) -> int: return self.adev.rreg("GC", reg)
  def select(self, me: int = 0, pipe: int = 0, queue: int = 0, vmid: int = 0) -> None:
    self.w(gc.regGRBM_GFX_CNTL, MEID=me, PIPEID=pipe, QUEUEID=queue, VMID=vmid)

  def init_hw(self) -> None:
    a = self.adev
    a.wait("GC", gc.regCP_STAT, 0xFFFFFFFF, 0, "RLC autoload (CP still busy)")
    a.gmc.init_hub("GC")
    if a.partial_boot:
      self.reset_mec()
      return
    self._config_mec()
    self.w(gc.regRLC_CNTL, RLC_ENABLE_F32=1)
    a.rmw("GC", gc.regRLC_SRM_CNTL, SRM_ENABLE=1, AUTO_INCR_ADDR=1)
    self.w(gc.regRLC_SPM_MC_CNTL, RLC_SPM_VMID=0xF)
    # doorbell routing (S2A): port 0 -> the CP (MEC doorbells), port 3 -> the CP as well (awid 6)
    a.wreg("NBIO", nbio.regS2A_DOORBELL_ENTRY_0_CTRL, S2A_DOORBELL_PORT0_ENABLE=1, S2A_DOORBELL_PORT0_AWID=3, S2A_DOORBELL_PORT0_AWADDR_31_28_VALUE=3)
    a.wreg("NBIO", nbio.regS2A_DOORBELL_ENTRY_3_CTRL, S2A_DOORBELL_PORT3_ENABLE=1, S2A_DOORBELL_PORT3_AWID=6, S2A_DOORBELL_PORT3_AWADDR_31_28_VALUE=3)
    a.rmw("GC", gc.regGRBM_CNTL, READ_TIMEOUT=0xFF)
    for vmid in range(N_VMIDS):   # 64-bit addressing, unaligned access; LDS aperture 0x1000..., scratch 0x2000...
      self.select(vmid=vmid)
      self.w(gc.regSH_MEM_CONFIG, ALIGNMENT_MODE=3, INITIAL_INST_PREFETCH=3)
      self.w(gc.regSH_MEM_BASES, SHARED_BASE=1, PRIVATE_BASE=2)
    self.select()
    self.w(gc.regCP_MEC_DOORBELL_RANGE_LOWER, 0)
    self.w(gc.regCP_MEC_DOORBELL_RANGE_UPPER, DOORBELL_RANGE_UPPER)
    self._enable_mec()

  def _config_mec(self) -> None:
    self.select(me=MEC_ME, pipe=MEC_PIPE)
    start = self.adev.fw.mec_start >> 2   # the program counter counts dwords
    self.w(gc.regCP_MEC_RS64_PRGRM_CNTR_START, start & 0xFFFFFFFF)
    self.w(gc.regCP_MEC_RS64_PRGRM_CNTR_START_HI, start >> 32)
    self.select()
    self.adev.rmw("GC", gc.regCP_MEC_RS64_CNTL, MEC_PIPE0_RESET=1)
    self.adev.rmw("GC", gc.regCP_MEC_RS64_CNTL, MEC_PIPE0_RESET=0)

  def _enable_mec(self) -> None:
    self.w(gc.regCP_MEC_RS64_CNTL, MEC_PIPE0_ACTIVE=1)

  def reset_mec(self) -> None:
    """Dequeue, soft-reset the CP, then configure and start the MEC again (partial boot and recovery)."""
    self.dequeue()
    self.adev.rmw("GC", gc.regGRBM_SOFT_RESET, SOFT_RESET_CP=1, SOFT_RESET_CPC=1)
    self.adev.rmw("GC", gc.regGRBM_SOFT_RESET, SOFT_RESET_CP=0, SOFT_RESET_CPC=0)
    self._config_mec()
    self._enable_mec()

  def setup_ring(self, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int) -> int:
    """Program HQD (me 1, pipe 0, queue 0) for a PM4 ring; returns the doorbell's byte offset in BAR2."""
    a = self.adev
    mqd = v11.v11_compute_mqd(header=MQD_HEADER)
    mc = a.mc(self.mqd)
    mqd.cp_mqd_base_addr_lo, mqd.cp_mqd_base_addr_hi = mc & 0xFFFFFFFC, mc >> 32
    mqd.cp_hqd_persistent_state = gc.regCP_HQD_PERSISTENT_STATE.encode(PRELOAD_REQ=1, PRELOAD_SIZE=0x55)
    mqd.cp_hqd_pipe_priority, mqd.cp_hqd_queue_priority = 2, 0xF
    mqd.cp_hqd_quantum = gc.regCP_HQD_QUANTUM.encode(QUANTUM_EN=1, QUANTUM_SCALE=1, QUANTUM_DURATION=1)
    mqd.cp_hqd_pq_base_lo, mqd.cp_hqd_pq_base_hi = (ring_va >> 8) & 0xFFFFFFFF, ring_va >> 40
    mqd.cp_hqd_pq_rptr_report_addr_lo, mqd.cp_hqd_pq_rptr_report_addr_hi = rptr_va & 0xFFFFFFFC, rptr_va >> 32
    mqd.cp_hqd_pq_wptr_poll_addr_lo, mqd.cp_hqd_pq_wptr_poll_addr_hi = wptr_va & 0xFFFFFFF8, wptr_va >> 32
    mqd.cp_hqd_pq_doorbell_control = gc.regCP_HQD_PQ_DOORBELL_CONTROL.encode(DOORBELL_OFFSET=DOORBELL_MEC_RING0 * 2, DOORBELL_EN=1)
    mqd.cp_hqd_pq_control = gc.regCP_HQD_PQ_CONTROL.encode(QUEUE_SIZE=(ring_size // 4).bit_length() - 2, RPTR_BLOCK_SIZE=5)
    mqd.cp_hqd_ib_control = gc.regCP_HQD_IB_CONTROL.encode(MIN_IB_AVAIL_SIZE=3)
    mqd.cp_mqd_control = gc.regCP_MQD_CONTROL.encode(PRIV_STATE=1)
    eop = a.mc(self.eop)
    mqd.cp_hqd_eop_base_addr_lo, mqd.cp_hqd_eop_base_addr_hi = (eop >> 8) & 0xFFFFFFFF, eop >> 40
    mqd.cp_hqd_eop_control = gc.regCP_HQD_EOP_CONTROL.encode(EOP_SIZE=(4096 // 4).bit_length() - 2)
    for se in range(4): setattr(mqd, f"compute_static_thread_mgmt_se{se}", 0xFFFFFFFF)
    a.vram[self.mqd:self.mqd + ctypes.sizeof(mqd)] = np.frombuffer(bytes(mqd), np.uint8)
    a.hdp_flush()
    self.select(me=MEC_ME, pipe=MEC_PIPE, queue=MEC_QUEUE)
    words = np.frombuffer(bytes(mqd), np.uint32)
    for i in range(HQD_FIRST, HQD_LAST + 1): a.wdword(a.addr("GC", gc.regCP_MQD_BASE_ADDR) + i - HQD_FIRST, int(words[i]))
    self.w(gc.regCP_HQD_ACTIVE, ACTIVE=1)
    self.select()
    self.queue = dict(ring_va=ring_va, ring_size=ring_size, rptr_va=rptr_va, wptr_va=wptr_va)
    return DOORBELL_MEC_RING0 * 8

  def dequeue(self) -> None:
    self.select(me=MEC_ME, pipe=MEC_PIPE, queue=MEC_QUEUE)
    if self.r(gc.regCP_HQD_ACTIVE) & 1:
      self.w(gc.regCP_HQD_DEQUEUE_REQUEST, DEQUEUE_REQ=2)      # 2: drain and reset the queue's waves
      self.w(gc.regSPI_COMPUTE_QUEUE_RESET, RESET=1)
      if not self.adev.is_err_state: self.adev.wait("GC", gc.regCP_HQD_ACTIVE, 1, 0, "HQD dequeue")
    self.select()

  def fini_hw(self) -> None: self.dequeue()

  def set_clockgating(self) -> None:
    a = self.adev
    a.wreg("MMHUB", mmhub.regMM_ATC_L2_MISC_CG, ENABLE=1, MEM_LS_ENABLE=1)
    self.w(gc.regRLC_SAFE_MODE, CMD=1, MESSAGE=1)                      # enter RLC safe mode
    a.wait("GC", gc.regRLC_SAFE_MODE, gc.regRLC_SAFE_MODE.mask("CMD"), 0, "RLC safe mode")
    a.rmw("GC", gc.regRLC_CGCG_CGLS_CTRL, CGCG_EN=1, CGLS_EN=1, CGLS_REP_COMPANSAT_DELAY=0xF, CGCG_GFX_IDLE_THRESHOLD=0x36)
    a.rmw("GC", gc.regCP_RB_WPTR_POLL_CNTL, POLL_FREQUENCY=0x100, IDLE_POLL_COUNT=0x90)
    a.rmw("GC", gc.regCP_INT_CNTL, CMP_BUSY_INT_ENABLE=1, CNTX_BUSY_INT_ENABLE=1, CNTX_EMPTY_INT_ENABLE=1)
    for sdma in (gc.regSDMA0_RLC_CGCG_CTRL, gc.regSDMA1_RLC_CGCG_CTRL): a.rmw("GC", sdma, CGCG_INT_ENABLE=1)
    a.rmw("GC", gc.regRLC_CGTT_MGCG_OVERRIDE, PERFMON_CLOCK_STATE=1)
    self.w(gc.regRLC_SAFE_MODE, CMD=1)                                 # leave safe mode (MESSAGE = 0)
