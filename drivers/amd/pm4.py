"""The compute queue: hcq Queue commands encoded as gfx11 PM4 type-3 packets for the MEC.

Packet formats: nvd.h (autogen.amd.nvd); launch sequence: mesa radeonsi si_compute.c and Linux gfx_v11_0.c's ring emitters.
"""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING

from autogen.amd import nvd, gc_11_0_0 as gc, nbio_4_3_0 as nbio, soc21_enum
from drivers.hcq import Signal
from drivers.hcq.ring import Ring, RingQueue
if TYPE_CHECKING: from drivers.amd.device import AMDDevice, AMDProgram, AMDKernArgs

# field values nvd.h gives only in comments (no macro to take them from):
EVENT_INDEX_EOP = 5              # RELEASE_MEM event_index for end-of-pipe (TS) events, as gfx_v11_0_ring_emit_fence uses
EVENT_INDEX_PARTIAL_FLUSH = 4    # EVENT_WRITE EVENT_INDEX "4 - *S_PARTIAL_FLUSH"
WAIT_EQ, WAIT_GE = 3, 5          # WAIT_REG_MEM_FUNCTION "3 - ==", "5 - >="
MEM_SPACE_REG, MEM_SPACE_MEM = 0, 1   # WAIT_REG_MEM_MEM_SPACE "0 - reg", "1 - mem"
OP_WRITE_WAIT = 1                # WAIT_REG_MEM_OPERATION "1 - wr_wait_wr_reg": write reg0, then wait on reg1
ENGINE_ME = 0                    # WAIT_REG_MEM_ENGINE / WRITE_DATA_ENGINE_SEL "0 - me"
DST_SEL_MEM_ASYNC = 5            # WRITE_DATA_DST_SEL "5 - memory (async - direct)"
DATA_SEL_64, DATA_SEL_TIMESTAMP = 2, 3   # RELEASE_MEM_DATA_SEL "2 - send 64bit data", "3 - send 64bit GPU counter value"
INT_SEL_NONE = 0                 # RELEASE_MEM_INT_SEL "0 - none"
# poll intervals (in CP clocks) Linux uses: 4 for memory waits (gfx_v11_0_ring_emit_pipeline_sync), 0x20 for the HDP
# flush (gfx_v11_0_ring_emit_hdp_flush), 0xA for ACQUIRE_MEM (gfx_v11_0_emit_mem_sync)
POLL_MEM, POLL_HDP, POLL_ACQUIRE = 0x4, 0x20, 0xA
# ACQUIRE_MEM GCR_CNTL: invalidate GLI/GLM/GLK/GLV/GL1 (not L2) before a dispatch
GCR_INV = (nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1) |
           nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1) |
           nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1))
GCR_ALL = GCR_INV | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(1)
RELEASE_GCR = (nvd.PACKET3_RELEASE_MEM_GCR_GLV_INV | nvd.PACKET3_RELEASE_MEM_GCR_GL1_INV | nvd.PACKET3_RELEASE_MEM_GCR_GL2_INV |
               nvd.PACKET3_RELEASE_MEM_GCR_GLM_WB | nvd.PACKET3_RELEASE_MEM_GCR_GLM_INV | nvd.PACKET3_RELEASE_MEM_GCR_GL2_WB |
               nvd.PACKET3_RELEASE_MEM_GCR_SEQ)


class PM4Queue(RingQueue):
  kind = "compute"
  posts_rdma = True

  def __init__(self, device: AMDDevice):
    super().__init__(device)
    # host writes to VRAM (kernel arguments, code) pass through the HDP; with no host-side flush before the doorbell
    # every submission starts with the GPU-side one: once per submission, as Linux flushes once per job
    # (amdgpu_device_flush_hdp in amdgpu_ib_schedule)
    self.words += device.pm4_hdp_flush or ()

  @property
  def ring(self) -> Ring: return self.device.compute_ring   # one run a submission: PM4 packets may wrap

  def pkt3(self, op: int, *payload: int) -> None:
    self.words += [nvd.PACKET3(op, len(payload) - 1), *(v & 0xFFFFFFFF for v in payload)]

  def sh_reg(self, reg, *values: int) -> None:
    self.pkt3(nvd.PACKET3_SET_SH_REG, self.device.gc_addr(reg) - nvd.PACKET3_SET_SH_REG_START, *values)

  def _acquire_mem(self, gcr: int) -> None:
    # COHER_CNTL 0, then COHER_SIZE/_HI and COHER_BASE/_HI covering the whole address space (nvd.h ACQUIRE_MEM layout)
    self.pkt3(nvd.PACKET3_ACQUIRE_MEM, 0, 0xFFFFFFFF, 0xFF, 0, 0, POLL_ACQUIRE, gcr)

  def _release_mem(self, addr: int, data_sel: int, value: int = 0) -> None:
    self.pkt3(nvd.PACKET3_RELEASE_MEM,
              nvd.PACKET3_RELEASE_MEM_EVENT_TYPE(soc21_enum.CACHE_FLUSH_AND_INV_TS_EVENT) | nvd.PACKET3_RELEASE_MEM_EVENT_INDEX(EVENT_INDEX_EOP)
              | RELEASE_GCR,
              nvd.PACKET3_RELEASE_MEM_DATA_SEL(data_sel) | nvd.PACKET3_RELEASE_MEM_INT_SEL(INT_SEL_NONE),
              addr, addr >> 32, value, value >> 32, 0)

  def _exec(self, prg: AMDProgram, args: AMDKernArgs, global_size, local_size) -> None:
    # the packets depend on the program, workgroup size and scratch only (encoded once by _encode_launch): patch the
    # user SGPRs (kernarg pointer, ...) and the grid into a copy for each launch
    words, user_at, grid_at = self.encoded_launch(prg, local_size)
    words = list(words)
    user = prg.user_sgprs(args)
    words[user_at:user_at + len(user)] = user
    words[grid_at:grid_at + 3] = global_size
    tools = [t for t in (self.device.perf_counters, self.device.thread_trace) if t is not None]   # drivers/amd/profiler.py
    for t in tools: t.start(self, prg)
    for i, addend in prg.user_args: self._patch_point("args", len(self.words) + user_at + i, 64, addend)
    self.words += words
    for t in reversed(tools): t.stop(self)

  def _launch_state(self) -> int: return self.device.scratch.va   # a larger scratch moves COMPUTE_DISPATCH_SCRATCH_BASE

  def _encode_launch(self, prg: AMDProgram, local_size) -> tuple[list[int], int, int]:
    saved, self.words = self.words, []
    kd, dev = prg.kernel.descriptor, self.device
    # The one cache invalidation a launch needs: earlier kernels' results are in L2, which every CU shares, so
    # invalidating the per-CU/SE caches (GL1, GLV, GLK, GLM, GLI) before the dispatch is enough (gfx_v11_0.c
    # gfx_v11_0_emit_mem_sync). Host visibility is the end-of-submission RELEASE_MEM's job (it writes L2 back), and host
    # writes reach VRAM through one HDP flush per submission (_submit), so a launch needs no memory_barrier; Linux
    # likewise syncs caches once per job (gfx_v11_0_emit_mem_sync), not per dispatch.
    self._acquire_mem(GCR_INV)
    rsrc2 = kd.compute_pgm_rsrc2 | gc.regCOMPUTE_PGM_RSRC2.encode(LDS_SIZE=(kd.group_segment_fixed_size + 511) // 512)
    self.sh_reg(gc.regCOMPUTE_PGM_LO, prg.code_va >> 8, prg.code_va >> 40)
    self.sh_reg(gc.regCOMPUTE_PGM_RSRC1, kd.compute_pgm_rsrc1, rsrc2)
    self.sh_reg(gc.regCOMPUTE_PGM_RSRC3, kd.compute_pgm_rsrc3)
    self.sh_reg(gc.regCOMPUTE_TMPRING_SIZE, dev.tmpring_size(kd.private_segment_fixed_size))
    self.sh_reg(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO, dev.scratch.va >> 8, dev.scratch.va >> 40)
    self.sh_reg(gc.regCOMPUTE_RESTART_X, 0, 0, 0)
    n_user = prg.n_user_sgprs
    user_at = len(self.words) + 2
    if n_user: self.sh_reg(gc.regCOMPUTE_USER_DATA_0, *([0] * n_user))
    self.sh_reg(gc.regCOMPUTE_RESOURCE_LIMITS, 0)
    self.sh_reg(gc.regCOMPUTE_START_X, 0, 0, 0, *local_size, 0, 0)
    initiator = gc.regCOMPUTE_DISPATCH_INITIATOR.encode(COMPUTE_SHADER_EN=1, FORCE_START_AT_000=1, CS_W32_EN=int(kd.wave32))
    grid_at = len(self.words) + 1
    self.pkt3(nvd.PACKET3_DISPATCH_DIRECT, 0, 0, 0, initiator)
    self.pkt3(nvd.PACKET3_EVENT_WRITE, nvd.EVENT_TYPE(soc21_enum.CS_PARTIAL_FLUSH) | nvd.EVENT_INDEX(EVENT_INDEX_PARTIAL_FLUSH))
    tmpl, self.words = self.words, saved
    return tmpl, user_at, grid_at

  def _signal(self, sig: Signal, value: int) -> None:
    self._patch_point("value", len(self.words) + 5, 64)   # RELEASE_MEM payload dwords 4-5 (after header, event, sel, addr)
    self._release_mem(sig.va, DATA_SEL_64, value)

  def _wait(self, sig: Signal, value: int) -> None:
    # WAIT_REG_MEM64 compares the whole 64-bit signal (payload: control, address lo/hi, reference lo/hi, mask lo/hi,
    # poll interval; the layout of WAIT_REG_MEM with 64-bit reference and mask)
    self._patch_point("value", len(self.words) + 4, 64)   # payload dwords 3-4: the reference
    self.pkt3(nvd.PACKET3_WAIT_REG_MEM64, nvd.WAIT_REG_MEM_MEM_SPACE(MEM_SPACE_MEM) | nvd.WAIT_REG_MEM_FUNCTION(WAIT_GE),
              sig.va, sig.va >> 32, value & 0xFFFFFFFF, value >> 32, 0xFFFFFFFF, 0xFFFFFFFF, POLL_MEM)

  def _rdma(self, cmds) -> None:
    # the kernels before it are done (each launch ends with CS_PARTIAL_FLUSH) and their results written back from L2
    # to memory the NIC reads (the barrier's GL2_WB); then WRITE_DATA the WQE into the NIC's send queue (host memory)
    # and the doorbell into its BAR (one 64-bit store: both data dwords in one write), each confirmed before the next
    # packet, and WAIT_REG_MEM until the completion word matches (nvd.h PACKET3_WAIT_REG_MEM)
    self._memory_barrier()
    for va, data in [*cmds.writes, cmds.doorbell]:
      if va % 4 or len(data) % 4: raise ValueError(f"WRITE_DATA writes whole dwords at dword-aligned addresses: {len(data)} bytes at {va:#x}")
      self.pkt3(nvd.PACKET3_WRITE_DATA, nvd.WRITE_DATA_DST_SEL(DST_SEL_MEM_ASYNC) | nvd.WR_CONFIRM | nvd.WRITE_DATA_ENGINE_SEL(ENGINE_ME),
                va, va >> 32, *struct.unpack(f"<{len(data) // 4}I", data))
    va, mask, value = cmds.done
    self.pkt3(nvd.PACKET3_WAIT_REG_MEM, nvd.WAIT_REG_MEM_MEM_SPACE(MEM_SPACE_MEM) | nvd.WAIT_REG_MEM_FUNCTION(WAIT_EQ) |
              nvd.WAIT_REG_MEM_ENGINE(ENGINE_ME), va, va >> 32, value, mask, POLL_MEM)

  def _timestamp(self, sig: Signal) -> None:
    self._release_mem(sig.timestamp_va, DATA_SEL_TIMESTAMP)

  def _hdp_flush(self) -> None:
    # write GPU_HDP_FLUSH_REQ, wait until GPU_HDP_FLUSH_DONE matches (all client bits as reference and mask,
    # gfx_v11_0_ring_emit_hdp_flush)
    req, done = (self.device.nbio_addr(r) for r in (nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ, nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE))
    self.pkt3(nvd.PACKET3_WAIT_REG_MEM, nvd.WAIT_REG_MEM_MEM_SPACE(MEM_SPACE_REG) | nvd.WAIT_REG_MEM_OPERATION(OP_WRITE_WAIT) |
              nvd.WAIT_REG_MEM_FUNCTION(WAIT_EQ) | nvd.WAIT_REG_MEM_ENGINE(ENGINE_ME), req, done, 0xFFFFFFFF, 0xFFFFFFFF, POLL_HDP)

  def _memory_barrier(self) -> None:
    self._hdp_flush()
    self._acquire_mem(GCR_ALL)   # then write back and invalidate every cache level

  def hdp_flush_words(self) -> list[int]:
    """The encoded HDP flush alone (AMDDevice keeps it for the submissions that start with it)."""
    saved, self.words = self.words, []
    self._hdp_flush()
    words, self.words = self.words, saved
    return words
