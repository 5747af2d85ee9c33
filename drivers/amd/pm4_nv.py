"""The PM4 packet format of gfx10 and later (nvd.h, autogen.amd.nvd): each builder returns (opcode, *payload) of one
type-3 packet, which PM4Queue.pkt3 frames with its header. drivers/amd/ip.py picks this module by the GC version.

Values nvd.h gives only in comments, and Linux's choices: gfx_v11_0.c's ring emitters (emit_fence, emit_mem_sync,
emit_hdp_flush, emit_pipeline_sync); the launch sequence: mesa radeonsi si_compute.c."""
from __future__ import annotations
from autogen.amd import nvd, soc21_enum

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
# where a field sits, in dwords from the packet's header
RELEASE_MEM_DATA_AT = 5          # RELEASE_MEM: header, event, sel, addr lo/hi, then the data
WAIT64_REFERENCE_AT = 4          # WAIT_REG_MEM64: header, control, addr lo/hi, then the reference
SET_SH_REG_VALUES_AT = 2         # SET_SH_REG: header, register offset, then the values
DISPATCH_DIM_AT = 1              # DISPATCH_DIRECT: header, then dim x/y/z

Packet = tuple[int, ...]   # (opcode, *payload dwords)


def header(op: int, payload_dwords: int) -> int: return nvd.PACKET3(op, payload_dwords - 1)


def set_sh_reg(reg_dword: int, *values: int) -> Packet:
  """Persistent shader registers from `reg_dword` (the register's dword address) on."""
  return (nvd.PACKET3_SET_SH_REG, reg_dword - nvd.PACKET3_SET_SH_REG_START, *values)


def acquire_mem(gcr: int) -> Packet:
  """COHER_CNTL 0, then COHER_SIZE/_HI and COHER_BASE/_HI covering the whole address space, the poll interval and the
  GCR_CNTL cache actions (nvd.h ACQUIRE_MEM layout)."""
  return (nvd.PACKET3_ACQUIRE_MEM, 0, 0xFFFFFFFF, 0xFF, 0, 0, POLL_ACQUIRE, gcr)


def release_mem(addr: int, data_sel: int, value: int = 0) -> Packet:
  """At end of pipe, write the caches back and `value` (DATA_SEL_64) or the GPU clock (DATA_SEL_TIMESTAMP) to `addr`."""
  return (nvd.PACKET3_RELEASE_MEM,
          nvd.PACKET3_RELEASE_MEM_EVENT_TYPE(soc21_enum.CACHE_FLUSH_AND_INV_TS_EVENT) | nvd.PACKET3_RELEASE_MEM_EVENT_INDEX(EVENT_INDEX_EOP)
          | RELEASE_GCR,
          nvd.PACKET3_RELEASE_MEM_DATA_SEL(data_sel) | nvd.PACKET3_RELEASE_MEM_INT_SEL(INT_SEL_NONE),
          addr, addr >> 32, value, value >> 32, 0)


def wait_mem64_ge(va: int, value: int) -> Packet:
  """WAIT_REG_MEM64 until the u64 at `va` >= value (payload: control, address lo/hi, reference lo/hi, mask lo/hi, poll
  interval; the layout of WAIT_REG_MEM with 64-bit reference and mask)."""
  return (nvd.PACKET3_WAIT_REG_MEM64, nvd.WAIT_REG_MEM_MEM_SPACE(MEM_SPACE_MEM) | nvd.WAIT_REG_MEM_FUNCTION(WAIT_GE),
          va, va >> 32, value & 0xFFFFFFFF, value >> 32, 0xFFFFFFFF, 0xFFFFFFFF, POLL_MEM)


def wait_mem_eq(va: int, mask: int, value: int) -> Packet:
  """WAIT_REG_MEM until (the dword at `va` & mask) == value."""
  return (nvd.PACKET3_WAIT_REG_MEM, nvd.WAIT_REG_MEM_MEM_SPACE(MEM_SPACE_MEM) | nvd.WAIT_REG_MEM_FUNCTION(WAIT_EQ) |
          nvd.WAIT_REG_MEM_ENGINE(ENGINE_ME), va, va >> 32, value, mask, POLL_MEM)


def write_data(va: int, dwords: list[int]) -> Packet:
  """WRITE_DATA of whole dwords to memory, confirmed before the next packet."""
  return (nvd.PACKET3_WRITE_DATA, nvd.WRITE_DATA_DST_SEL(DST_SEL_MEM_ASYNC) | nvd.WR_CONFIRM | nvd.WRITE_DATA_ENGINE_SEL(ENGINE_ME),
          va, va >> 32, *dwords)


def hdp_flush(req_dword: int, done_dword: int) -> Packet:
  """Write the HDP flush request register, wait until the done register matches (all client bits as reference and
  mask, gfx_v11_0_ring_emit_hdp_flush)."""
  return (nvd.PACKET3_WAIT_REG_MEM, nvd.WAIT_REG_MEM_MEM_SPACE(MEM_SPACE_REG) | nvd.WAIT_REG_MEM_OPERATION(OP_WRITE_WAIT) |
          nvd.WAIT_REG_MEM_FUNCTION(WAIT_EQ) | nvd.WAIT_REG_MEM_ENGINE(ENGINE_ME),
          req_dword, done_dword, 0xFFFFFFFF, 0xFFFFFFFF, POLL_HDP)


def dispatch_direct(initiator: int) -> Packet:
  """DISPATCH_DIRECT: the grid (workgroups in x, y, z: filled in per launch), then COMPUTE_DISPATCH_INITIATOR."""
  return (nvd.PACKET3_DISPATCH_DIRECT, 0, 0, 0, initiator)


def cs_partial_flush() -> Packet:
  """EVENT_WRITE CS_PARTIAL_FLUSH: the dispatch's waves are done before what follows."""
  return (nvd.PACKET3_EVENT_WRITE, nvd.EVENT_TYPE(soc21_enum.CS_PARTIAL_FLUSH) | nvd.EVENT_INDEX(EVENT_INDEX_PARTIAL_FLUSH))
