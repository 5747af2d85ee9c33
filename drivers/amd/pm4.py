"""The compute queue: hcq Queue commands encoded as gfx11 PM4 type-3 packets for the MEC.

Packet formats: nvd.h (autogen.amd.nvd); launch sequence: reference/amd_driver.md 1.7 and 5.1.
"""
from __future__ import annotations
from typing import TYPE_CHECKING

from autogen.amd import nvd, gc_11_0_0 as gc, nbio_4_3_0 as nbio
from drivers.hcq import Queue, Signal
if TYPE_CHECKING: from drivers.amd.device import AMDDevice, AMDProgram, AMDKernArgs

CACHE_FLUSH_AND_INV_TS_EVENT, CS_PARTIAL_FLUSH = 0x14, 0x7   # VGT_EVENT_TYPE (soc21_enum.h)
EVENT_INDEX_EOP, EVENT_INDEX_PARTIAL_FLUSH = 5, 4            # nvd.h EVENT_INDEX
WAIT_GE, WAIT_EQ = 5, 3                                      # WAIT_REG_MEM_FUNCTION (nvd.h)
DATA_SEL_64, DATA_SEL_TIMESTAMP, INT_SEL_NONE = 2, 3, 0      # RELEASE_MEM (nvd.h)
# ACQUIRE_MEM GCR_CNTL: invalidate GLI/GLM/GLK/GLV/GL1 (not L2) before a dispatch
GCR_INV = (nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1) |
           nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1) |
           nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1))
GCR_ALL = GCR_INV | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(1)
RELEASE_GCR = (nvd.PACKET3_RELEASE_MEM_GCR_GLV_INV | nvd.PACKET3_RELEASE_MEM_GCR_GL1_INV | nvd.PACKET3_RELEASE_MEM_GCR_GL2_INV |
               nvd.PACKET3_RELEASE_MEM_GCR_GLM_WB | nvd.PACKET3_RELEASE_MEM_GCR_GLM_INV | nvd.PACKET3_RELEASE_MEM_GCR_GL2_WB |
               nvd.PACKET3_RELEASE_MEM_GCR_SEQ)


class PM4Queue(Queue):
  kind = "compute"

  def __init__(self, device: AMDDevice):
    super().__init__(device)
    self.words: list[int] = []
    self.keep: list = []       # kernargs and signals the commands point at, alive until submission

  def pkt3(self, op: int, *payload: int) -> None:
    self.words += [nvd.PACKET3(op, len(payload) - 1), *(v & 0xFFFFFFFF for v in payload)]

  def sh_reg(self, reg, *values: int) -> None:
    self.pkt3(nvd.PACKET3_SET_SH_REG, self.device.gc_addr(reg) - nvd.PACKET3_SET_SH_REG_START, *values)

  def _acquire_mem(self, gcr: int) -> None:
    self.pkt3(nvd.PACKET3_ACQUIRE_MEM, 0, 0xFFFFFFFF, 0xFF, 0, 0, 0x0000000A, gcr)

  def _release_mem(self, addr: int, data_sel: int, value: int = 0) -> None:
    self.pkt3(nvd.PACKET3_RELEASE_MEM,
              nvd.PACKET3_RELEASE_MEM_EVENT_TYPE(CACHE_FLUSH_AND_INV_TS_EVENT) | nvd.PACKET3_RELEASE_MEM_EVENT_INDEX(EVENT_INDEX_EOP) | RELEASE_GCR,
              nvd.PACKET3_RELEASE_MEM_DATA_SEL(data_sel) | nvd.PACKET3_RELEASE_MEM_INT_SEL(INT_SEL_NONE),
              addr, addr >> 32, value, value >> 32, 0)

  def _exec(self, prg: AMDProgram, args: AMDKernArgs, global_size, local_size) -> None:
    self.keep.append(args)
    # the packets depend on the program, workgroup size and scratch only: encode them once, then patch the
    # user SGPRs (kernarg pointer, ...) and the grid into a copy for each launch
    key = (local_size, self.device.scratch.va)
    if (tmpl := prg.pm4_templates.get(key)) is None: tmpl = prg.pm4_templates[key] = self._exec_template(prg, local_size)
    words, user_at, grid_at = tmpl
    words = list(words)
    user = prg.user_sgprs(args)
    words[user_at:user_at + len(user)] = user
    words[grid_at:grid_at + 3] = global_size
    self.words += words

  def _exec_template(self, prg: AMDProgram, local_size) -> tuple[list[int], int, int]:
    saved, self.words = self.words, []
    kd, dev = prg.kernel.descriptor, self.device
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
    self.pkt3(nvd.PACKET3_EVENT_WRITE, nvd.EVENT_TYPE(CS_PARTIAL_FLUSH) | nvd.EVENT_INDEX(EVENT_INDEX_PARTIAL_FLUSH))
    tmpl, self.words = self.words, saved
    return tmpl, user_at, grid_at

  def _signal(self, sig: Signal, value: int) -> None:
    self.keep.append(sig)
    self._release_mem(sig.va, DATA_SEL_64, value)

  def _wait(self, sig: Signal, value: int) -> None:
    self.keep.append(sig)
    if value >= 1 << 32: raise ValueError(f"signal value {value:#x} does not fit the 32-bit compare of WAIT_REG_MEM")
    self.pkt3(nvd.PACKET3_WAIT_REG_MEM, nvd.WAIT_REG_MEM_MEM_SPACE(1) | nvd.WAIT_REG_MEM_FUNCTION(WAIT_GE),
              sig.va, sig.va >> 32, value, 0xFFFFFFFF, 0x4)

  def _timestamp(self, sig: Signal) -> None:
    self.keep.append(sig)
    self._release_mem(sig.timestamp_va, DATA_SEL_TIMESTAMP)

  def _memory_barrier(self) -> None:
    # HDP flush: write GPU_HDP_FLUSH_REQ, wait until GPU_HDP_FLUSH_DONE matches; then invalidate the caches
    req, done = (self.device.nbio_addr(r) for r in (nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ, nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE))
    self.pkt3(nvd.PACKET3_WAIT_REG_MEM, nvd.WAIT_REG_MEM_MEM_SPACE(0) | nvd.WAIT_REG_MEM_OPERATION(1) |
              nvd.WAIT_REG_MEM_FUNCTION(WAIT_EQ) | nvd.WAIT_REG_MEM_ENGINE(0), req, done, 0xFFFFFFFF, 0xFFFFFFFF, 0x20)
    self._acquire_mem(GCR_ALL)

  def _submit(self) -> None: self.device.compute_ring.submit(self.words, self.keep)
