"""The compute queue: hcq Queue commands encoded as PM4 type-3 packets for the MEC.

The packets come from the device's PM4 format module (`device.pm4`, picked by the GC version: drivers/amd/ip.py), the
registers they name from its GC and NBIO register modules (`device.regs`); launch sequence: mesa radeonsi si_compute.c
and Linux gfx_v11_0.c's ring emitters.
"""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING

from drivers.hcq import Signal
from drivers.hcq.ring import Ring, RingQueue
if TYPE_CHECKING: from drivers.amd.device import AMDDevice, AMDProgram, AMDKernArgs

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
    """Every packet goes through here: its header, then the payload dwords."""
    self.words += [self.device.pm4.header(op, len(payload)), *(v & 0xFFFFFFFF for v in payload)]

  def sh_reg(self, reg, *values: int) -> None:
    self.pkt3(*self.device.pm4.set_sh_reg(self.device.gc_addr(reg), *values))

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
    f, gc = dev.pm4, dev.regs.gc
    self.pkt3(*f.acquire_mem(f.GCR_INV))
    rsrc2 = kd.compute_pgm_rsrc2 | gc.regCOMPUTE_PGM_RSRC2.encode(LDS_SIZE=(kd.group_segment_fixed_size + 511) // 512)
    self.sh_reg(gc.regCOMPUTE_PGM_LO, prg.code_va >> 8, prg.code_va >> 40)
    self.sh_reg(gc.regCOMPUTE_PGM_RSRC1, kd.compute_pgm_rsrc1, rsrc2)
    self.sh_reg(gc.regCOMPUTE_PGM_RSRC3, kd.compute_pgm_rsrc3)
    self.sh_reg(gc.regCOMPUTE_TMPRING_SIZE, dev.tmpring_size(kd.private_segment_fixed_size))
    self.sh_reg(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO, dev.scratch.va >> 8, dev.scratch.va >> 40)
    self.sh_reg(gc.regCOMPUTE_RESTART_X, 0, 0, 0)
    n_user = prg.n_user_sgprs
    user_at = len(self.words) + f.SET_SH_REG_VALUES_AT
    if n_user: self.sh_reg(gc.regCOMPUTE_USER_DATA_0, *([0] * n_user))
    self.sh_reg(gc.regCOMPUTE_RESOURCE_LIMITS, 0)
    self.sh_reg(gc.regCOMPUTE_START_X, 0, 0, 0, *local_size, 0, 0)
    initiator = gc.regCOMPUTE_DISPATCH_INITIATOR.encode(COMPUTE_SHADER_EN=1, FORCE_START_AT_000=1, CS_W32_EN=int(kd.wave32))
    grid_at = len(self.words) + f.DISPATCH_DIM_AT
    self.pkt3(*f.dispatch_direct(initiator))
    self.pkt3(*f.cs_partial_flush())
    tmpl, self.words = self.words, saved
    return tmpl, user_at, grid_at

  def _signal(self, sig: Signal, value: int) -> None:
    f = self.device.pm4
    self._patch_point("value", len(self.words) + f.RELEASE_MEM_DATA_AT, 64)
    self.pkt3(*f.release_mem(sig.va, f.DATA_SEL_64, value))

  def _wait(self, sig: Signal, value: int) -> None:
    # a 64-bit compare of the whole signal
    f = self.device.pm4
    self._patch_point("value", len(self.words) + f.WAIT64_REFERENCE_AT, 64)
    self.pkt3(*f.wait_mem64_ge(sig.va, value))

  def _rdma(self, cmds) -> None:
    # the kernels before it are done (each launch ends with CS_PARTIAL_FLUSH) and their results written back from L2
    # to memory the NIC reads (the barrier's GL2_WB); then WRITE_DATA the WQE into the NIC's send queue (host memory)
    # and the doorbell into its BAR (one 64-bit store: both data dwords in one write), each confirmed before the next
    # packet, and WAIT_REG_MEM until the completion word matches
    f = self.device.pm4
    self._memory_barrier()
    for va, data in [*cmds.writes, cmds.doorbell]:
      if va % 4 or len(data) % 4: raise ValueError(f"WRITE_DATA writes whole dwords at dword-aligned addresses: {len(data)} bytes at {va:#x}")
      self.pkt3(*f.write_data(va, list(struct.unpack(f"<{len(data) // 4}I", data))))
    va, mask, value = cmds.done
    self.pkt3(*f.wait_mem_eq(va, mask, value))

  def _timestamp(self, sig: Signal) -> None:
    f = self.device.pm4
    self.pkt3(*f.release_mem(sig.timestamp_va, f.DATA_SEL_TIMESTAMP))

  def _hdp_flush(self) -> None:
    # write GPU_HDP_FLUSH_REQ, wait until GPU_HDP_FLUSH_DONE matches
    nbio = self.device.regs.nbio
    self.pkt3(*self.device.pm4.hdp_flush(self.device.nbio_addr(nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ),
                                         self.device.nbio_addr(nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE)))

  def _memory_barrier(self) -> None:
    self._hdp_flush()
    self.pkt3(*self.device.pm4.acquire_mem(self.device.pm4.GCR_ALL))   # then write back and invalidate every cache level

  def hdp_flush_words(self) -> list[int]:
    """The encoded HDP flush alone (AMDDevice keeps it for the submissions that start with it)."""
    saved, self.words = self.words, []
    self._hdp_flush()
    words, self.words = self.words, saved
    return words
