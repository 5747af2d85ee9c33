"""GFX 11.0 (GC 11.0), the graphics/compute IP block (Linux gfx_v11_0.c): the GC hub, the RS64 MEC (compute
micro-engine) and its hardware queue (HQD), programmed directly from a v11 compute MQD (no KIQ/MES), GFX clock gating,
and the AM driver's boot marks in two GC scratch registers (gfx_v11_0.c gfx_v11_0_compute_mqd_init, gfx_v11_0_kiq_init_register)."""
from __future__ import annotations
import ctypes
from typing import TYPE_CHECKING
import numpy as np
from autogen.amd import gc_11_0_0, soc21_enum, v11_structs, soc15_ih_clientid as ih_client, irqsrcs_gfx_11_0_0 as irq_src
from drivers.amd.am.ip_block import IPBlock
if TYPE_CHECKING: from drivers.amd.am.ih_v6_0 import Entry

MEC_ME, MEC_PIPE, MEC_QUEUE = 1, 0, 0
DOORBELL_MEC_RING0 = 3              # AMDGPU_NAVI10_DOORBELL_MEC_RING0 (amdgpu_doorbell.h): 64-bit doorbell slot 3 of BAR2
MQD_HEADER = 0xC0310800             # v11 compute MQD header (gfx_v11_0_compute_mqd_init)
EOP_SIZE = 4096
# the MEC doorbell range, in BAR2 bytes: 0 up to 0xF8 holds slot 3 (tinygrad's am/ip.py; Linux ends it at
# its KIQ/user-queue range instead, gfx_v11_0_cp_set_doorbell_range)
DOORBELL_RANGE_UPPER = 0xF8
N_VMIDS = 16
PIPE_PRIORITY_HIGH, QUEUE_PRIORITY_MAXIMUM = 2, 15   # AMDGPU_GFX_PIPE_PRIO_HIGH, AMDGPU_GFX_QUEUE_PRIORITY_MAXIMUM (amdgpu_gfx.h)
DEQUEUE_RESET_WAVES = 2             # CP_HQD_DEQUEUE_REQUEST: drain and reset the queue's waves (gfx_v11_0_soft_reset writes 0x2)


class GFXv11_0(IPBlock):
  IP = "GC"
  gc, enums, MQD = gc_11_0_0, soc21_enum, v11_structs.v11_compute_mqd     # this version's registers, field values, compute MQD

  def sw_init(self) -> None:
    mm = self.core.mm
    self.mqd = mm.palloc(ctypes.sizeof(self.MQD), boot=True, zero=True)
    self.eop = mm.palloc(EOP_SIZE, boot=True, zero=True)

  def select(self, me: int = 0, pipe: int = 0, queue: int = 0, vmid: int = 0) -> None:
    """soc21_grbm_select: which ME/pipe/queue (or VMID) the banked registers that follow address."""
    self.w(self.gc.regGRBM_GFX_CNTL, MEID=me, PIPEID=pipe, QUEUEID=queue, VMID=vmid)

  # --- boot marks (the AM driver's convention; they survive across processes)
  # SCRATCH_REG7 = the AM version that booted the GPU, SCRATCH_REG6 = 1 while a driver runs (or it ended dirty)
  def marks(self) -> tuple[int, int]: return self.r(self.gc.regSCRATCH_REG7), self.r(self.gc.regSCRATCH_REG6)
  def set_mark(self, running: int, booted: int | None = None) -> None:
    if booted is not None: self.w(self.gc.regSCRATCH_REG7, booted)
    self.w(self.gc.regSCRATCH_REG6, running)

  # --- interrupts (the GC 11 sources: irqsrcs_gfx_11_0_0.h; clients: soc15_ih_clientid.h SOC21_IH_CLIENTID_*)
  @staticmethod
  def interrupt(e: Entry) -> str | None:
    """What an IH entry reports going wrong; None for a completion (end of pipe, SDMA trap), which is no fault."""
    if e.source in (irq_src.GFX_11_0_0__SRCID__CP_EOP_INTERRUPT, irq_src.GFX_11_0_0__SRCID__SDMA_TRAP): return None
    if e.client in (ih_client.SOC21_IH_CLIENTID_GFX, ih_client.SOC21_IH_CLIENTID_VMC) and e.source == irq_src.GFX_11_0_0__SRCID__UTCL2_FAULT:
      va = e.data[0] << 12 | (e.data[1] & 0xF) << 44
      hub = "GC" if e.client == ih_client.SOC21_IH_CLIENTID_GFX else "MM"
      return f"GPU page fault at {va:#x} ({'write' if e.data[1] & 0x20 else 'read'}, {hub} hub, vmid {e.vmid})"
    if e.source == irq_src.GFX_11_0_0__SRCID__SQ_INTERRUPT_ID: return f"shader (SQ) error interrupt, data {e.data[0]:#x}"
    if e.source == irq_src.GFX_11_0_0__SRCID__CP_BAD_OPCODE_ERROR: return "the command processor met a bad PM4 opcode"
    return f"interrupt from client {e.client:#x} source {e.source} (data {', '.join(hex(d) for d in e.data)})"

  # --- lifecycle
  def _wait_rlc_autoload(self) -> None:
    """The PSP's AUTOLOAD_RLC started the RLC, which brings the CP up: wait until CP_STAT is idle
    (gfx_v11_0_wait_for_rlc_autoload_complete)."""
    self.wait(self.gc.regCP_STAT, 0xFFFFFFFF, 0, "RLC autoload (CP still busy)")

  def hw_init(self) -> None:
    self._wait_rlc_autoload()
    self.core.gfxhub.gart_enable()
    self._config_mec()
    self.w(self.gc.regRLC_CNTL, RLC_ENABLE_F32=1)
    self.rmw(self.gc.regRLC_SRM_CNTL, SRM_ENABLE=1, AUTO_INCR_ADDR=1)        # gfx_v11_0_rlc_enable_srm
    self.w(self.gc.regRLC_SPM_MC_CNTL, RLC_SPM_VMID=0xF)                    # "init spm vmid with 0xf" (gfx_v11_0_rlc_init)
    self.core.nbio.gc_doorbell_init()
    self.rmw(self.gc.regGRBM_CNTL, READ_TIMEOUT=0xFF)                       # gfx_v11_0_constants_init
    for vmid in range(N_VMIDS):   # DEFAULT_SH_MEM_CONFIG of gfx_v11_0; LDS aperture at 1 << 48, scratch at 2 << 48 (reference 2.10)
      self.select(vmid=vmid)
      self.w(self.gc.regSH_MEM_CONFIG, ADDRESS_MODE=self.enums.SH_MEM_ADDRESS_MODE_64,
             ALIGNMENT_MODE=self.enums.SH_MEM_ALIGNMENT_MODE_UNALIGNED, INITIAL_INST_PREFETCH=3)
      self.w(self.gc.regSH_MEM_BASES, SHARED_BASE=1, PRIVATE_BASE=2)
    self.select()
    self.w(self.gc.regCP_MEC_DOORBELL_RANGE_LOWER, 0)
    self.w(self.gc.regCP_MEC_DOORBELL_RANGE_UPPER, DOORBELL_RANGE_UPPER)
    self._enable_mec()

  def resume(self) -> None:
    """Partial boot: the MEC firmware is loaded; bring the GC hub up and restart the MEC clean."""
    self._wait_rlc_autoload()
    self.core.gfxhub.gart_enable()
    self.soft_reset()

  def hw_fini(self) -> None: self.dequeue()

  def soft_reset(self) -> None:
    """Dequeue, soft-reset the CP (GRBM_SOFT_RESET), then configure and start the MEC again (the partial boot)."""
    self.dequeue()
    self.rmw(self.gc.regGRBM_SOFT_RESET, SOFT_RESET_CP=1, SOFT_RESET_CPC=1)
    self.rmw(self.gc.regGRBM_SOFT_RESET, SOFT_RESET_CP=0, SOFT_RESET_CPC=0)
    self._config_mec()
    self._enable_mec()

  def set_clockgating(self) -> None:
    """Coarse-grain clock gating and light sleep, CP polling and interrupts, inside RLC safe mode
    (gfx_v11_0_update_gfx_clock_gating and the functions it calls)."""
    self.w(self.gc.regRLC_SAFE_MODE, CMD=1, MESSAGE=1)                                      # gfx_v11_0_set_safe_mode
    self.wait(self.gc.regRLC_SAFE_MODE, self.gc.regRLC_SAFE_MODE.mask("CMD"), 0, "RLC safe mode")
    self.rmw(self.gc.regRLC_CGCG_CGLS_CTRL, CGCG_EN=1, CGLS_EN=1, CGLS_REP_COMPANSAT_DELAY=0xF, CGCG_GFX_IDLE_THRESHOLD=0x36)
    self.rmw(self.gc.regCP_RB_WPTR_POLL_CNTL, POLL_FREQUENCY=0x100, IDLE_POLL_COUNT=0x90)   # "IDLE_POLL_COUNT(0x00900100)"
    self.rmw(self.gc.regCP_INT_CNTL, CMP_BUSY_INT_ENABLE=1, CNTX_BUSY_INT_ENABLE=1, CNTX_EMPTY_INT_ENABLE=1)
    for sdma in (self.gc.regSDMA0_RLC_CGCG_CTRL, self.gc.regSDMA1_RLC_CGCG_CTRL): self.rmw(sdma, CGCG_INT_ENABLE=1)
    self.rmw(self.gc.regRLC_CGTT_MGCG_OVERRIDE, PERFMON_CLOCK_STATE=1)   # perfmon clock left running (gfx_v11_0_update_perf_clk off)
    self.w(self.gc.regRLC_SAFE_MODE, CMD=1)                                                 # gfx_v11_0_unset_safe_mode

  # --- the MEC and its queue
  def _config_mec(self) -> None:
    """The RS64 MEC's program counter start (in dwords) from the firmware header, then a pulse of the pipe reset
    (as gfx_v11_0_config_gfx_rs64 does for the MEC)."""
    self.select(me=MEC_ME, pipe=MEC_PIPE)
    start = self.core.fw.mec_start >> 2
    self.w(self.gc.regCP_MEC_RS64_PRGRM_CNTR_START, start & 0xFFFFFFFF)
    self.w(self.gc.regCP_MEC_RS64_PRGRM_CNTR_START_HI, start >> 32)
    self.select()
    self.rmw(self.gc.regCP_MEC_RS64_CNTL, MEC_PIPE0_RESET=1)
    self.rmw(self.gc.regCP_MEC_RS64_CNTL, MEC_PIPE0_RESET=0)

  def _enable_mec(self) -> None:
    self.w(self.gc.regCP_MEC_RS64_CNTL, MEC_PIPE0_ACTIVE=1)

  def setup_ring(self, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int) -> int:
    """Program HQD (me 1, pipe 0, queue 0) for a PM4 ring; returns the doorbell's byte offset in BAR2. The MQD is
    gfx_v11_0_compute_mqd_init's, with KFD's quantum and preload (kfd_mqd_manager_v11.c init_mqd)."""
    c = self.core
    mqd = self.MQD(header=MQD_HEADER)
    mc = c.mc(self.mqd)
    mqd.cp_mqd_base_addr_lo, mqd.cp_mqd_base_addr_hi = mc & 0xFFFFFFFC, mc >> 32
    mqd.cp_hqd_persistent_state = self.gc.regCP_HQD_PERSISTENT_STATE.encode(PRELOAD_REQ=1, PRELOAD_SIZE=0x55)
    mqd.cp_hqd_pipe_priority, mqd.cp_hqd_queue_priority = PIPE_PRIORITY_HIGH, QUEUE_PRIORITY_MAXIMUM
    mqd.cp_hqd_quantum = self.gc.regCP_HQD_QUANTUM.encode(QUANTUM_EN=1, QUANTUM_SCALE=1, QUANTUM_DURATION=1)
    mqd.cp_hqd_pq_base_lo, mqd.cp_hqd_pq_base_hi = (ring_va >> 8) & 0xFFFFFFFF, ring_va >> 40
    mqd.cp_hqd_pq_rptr_report_addr_lo, mqd.cp_hqd_pq_rptr_report_addr_hi = rptr_va & 0xFFFFFFFC, rptr_va >> 32
    mqd.cp_hqd_pq_wptr_poll_addr_lo, mqd.cp_hqd_pq_wptr_poll_addr_hi = wptr_va & 0xFFFFFFF8, wptr_va >> 32
    mqd.cp_hqd_pq_doorbell_control = self.gc.regCP_HQD_PQ_DOORBELL_CONTROL.encode(DOORBELL_OFFSET=DOORBELL_MEC_RING0 * 2, DOORBELL_EN=1)
    # ring of 2^(QUEUE_SIZE+1) dwords; the rptr is reported every 2^(RPTR_BLOCK_SIZE+1) = 64 dwords (reference 2.11)
    mqd.cp_hqd_pq_control = self.gc.regCP_HQD_PQ_CONTROL.encode(QUEUE_SIZE=(ring_size // 4).bit_length() - 2, RPTR_BLOCK_SIZE=5)
    mqd.cp_hqd_ib_control = self.gc.regCP_HQD_IB_CONTROL.encode(MIN_IB_AVAIL_SIZE=3)
    mqd.cp_mqd_control = self.gc.regCP_MQD_CONTROL.encode(PRIV_STATE=1)
    eop = c.mc(self.eop)
    mqd.cp_hqd_eop_base_addr_lo, mqd.cp_hqd_eop_base_addr_hi = (eop >> 8) & 0xFFFFFFFF, eop >> 40
    mqd.cp_hqd_eop_control = self.gc.regCP_HQD_EOP_CONTROL.encode(EOP_SIZE=(EOP_SIZE // 4).bit_length() - 2)   # 2^(EOP_SIZE+1) dwords
    mqd.compute_static_thread_mgmt_se0 = mqd.compute_static_thread_mgmt_se1 = 0xFFFFFFFF   # every CU of every SE
    mqd.compute_static_thread_mgmt_se2 = mqd.compute_static_thread_mgmt_se3 = 0xFFFFFFFF
    c.vram[self.mqd:self.mqd + ctypes.sizeof(mqd)] = np.frombuffer(bytes(mqd), np.uint8)
    c.hdp_flush()
    self.select(me=MEC_ME, pipe=MEC_PIPE, queue=MEC_QUEUE)
    words = np.frombuffer(bytes(mqd), np.uint32)
    first = c.addr("GC", self.gc.regCP_MQD_BASE_ADDR)
    # MQD dwords from cp_mqd_base_addr_lo to cp_hqd_pq_wptr_hi are the register image of CP_MQD_BASE_ADDR..CP_HQD_PQ_WPTR_HI
    hqd_first, hqd_last = self.MQD.cp_mqd_base_addr_lo.offset // 4, self.MQD.cp_hqd_pq_wptr_hi.offset // 4
    for i in range(hqd_first, hqd_last + 1): c.wdword(first + i - hqd_first, int(words[i]))
    self.w(self.gc.regCP_HQD_ACTIVE, ACTIVE=1)
    self.select()
    return DOORBELL_MEC_RING0 * 8

  def dequeue(self) -> None:
    self.select(me=MEC_ME, pipe=MEC_PIPE, queue=MEC_QUEUE)
    if self.r(self.gc.regCP_HQD_ACTIVE) & 1:
      self.w(self.gc.regCP_HQD_DEQUEUE_REQUEST, DEQUEUE_REQ=DEQUEUE_RESET_WAVES)
      self.w(self.gc.regSPI_COMPUTE_QUEUE_RESET, RESET=1)
      if not self.core.is_err_state: self.wait(self.gc.regCP_HQD_ACTIVE, 1, 0, "HQD dequeue")
    self.select()
