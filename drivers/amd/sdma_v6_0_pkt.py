"""The SDMA 6.0 packet format (sdma_v6_0_0_pkt_open.h, autogen.amd.sdma_v6_0_0_pkt_open): each builder returns the
dwords of one packet. drivers/amd/ip.py picks this module by the SDMA version; SDMAQueue (sdma.py) queues them."""
from __future__ import annotations
from autogen import pktfields
from autogen.amd import sdma_v6_0_0_pkt_open as sdma_defs

MAX_COPY = sdma_defs.SDMA_PKT_COPY_LINEAR_COUNT_count_mask + 1   # COPY_LINEAR count holds bytes - 1: at most 1 GiB per packet
# POLL_REGMEM func 5 is ">=": the header names the field only; the functions are PM4 WAIT_REG_MEM's (nvd.h), as
# sdma_v6_0_ring_emit_pipeline_sync's FUNC(3) "equal" shows
POLL_GE, POLL_EQ = 5, 3
# retry count and poll interval of Linux's own memory polls (sdma_v6_0_ring_emit_pipeline_sync)
POLL_INTERVAL, POLL_RETRY = 0x04, 0xFFF
# where a field sits, in dwords from the packet's first
COPY_SRC_AT = sdma_defs.SDMA_PKT_COPY_LINEAR_SRC_ADDR_LO_src_addr_31_0_offset
COPY_DST_AT = sdma_defs.SDMA_PKT_COPY_LINEAR_DST_ADDR_LO_dst_addr_31_0_offset
WRITE_DATA_AT = 4                 # WRITE_UNTILED: the data dwords follow the 4-dword header
POLL_VALUE_AT = sdma_defs.SDMA_PKT_POLL_REGMEM_VALUE_value_offset
COND_REFERENCE_AT = sdma_defs.SDMA_PKT_COND_EXE_REFERENCE_reference_offset


def pkt(name: str, ndw: int, **fields: int) -> list[int]:
  return pktfields.encode(sdma_defs, f"SDMA_PKT_{name}", ndw, **fields)


NOP = pkt("NOP", 1, HEADER_op=sdma_defs.SDMA_OP_NOP)[0]   # a one-dword NOP: what the ring pads its tail with


def copy_linear(dst: int, src: int, size: int) -> list[int]:
  """COPY_LINEAR of `size` bytes (at most MAX_COPY)."""
  return pkt("COPY_LINEAR", 7, HEADER_op=sdma_defs.SDMA_OP_COPY, HEADER_sub_op=sdma_defs.SDMA_SUBOP_COPY_LINEAR,
             COUNT_count=size - 1, SRC_ADDR_LO_src_addr_31_0=src & 0xFFFFFFFF, SRC_ADDR_HI_src_addr_63_32=src >> 32,
             DST_ADDR_LO_dst_addr_31_0=dst & 0xFFFFFFFF, DST_ADDR_HI_dst_addr_63_32=dst >> 32)


def write_u64(va: int, value: int) -> list[int]:
  """A 64-bit value in one linear WRITE packet (FENCE writes only 32 bits)."""
  return pkt("WRITE_UNTILED", 4, HEADER_op=sdma_defs.SDMA_OP_WRITE, DST_ADDR_LO_dst_addr_31_0=va & 0xFFFFFFFF,
             DST_ADDR_HI_dst_addr_63_32=va >> 32, DW_3_count=1) + [value & 0xFFFFFFFF, value >> 32]


def poll_mem(va: int, value: int, func: int) -> list[int]:
  """POLL_REGMEM on memory: stall until the dword at `va` compares to `value` (POLL_EQ, POLL_GE)."""
  return pkt("POLL_REGMEM", 6, HEADER_op=sdma_defs.SDMA_OP_POLL_REGMEM, HEADER_func=func, HEADER_mem_poll=1,
             ADDR_LO_addr_31_0=va & 0xFFFFFFFF, ADDR_HI_addr_63_32=va >> 32, VALUE_value=value,
             MASK_mask=0xFFFFFFFF, DW5_interval=POLL_INTERVAL, DW5_retry_count=POLL_RETRY)


def cond_exe(va: int, reference: int, count: int) -> list[int]:
  """COND_EXE: run the next `count` dwords only if the dword at `va` equals `reference`."""
  return pkt("COND_EXE", 5, HEADER_op=sdma_defs.SDMA_OP_COND_EXE, ADDR_LO_addr_31_0=va & 0xFFFFFFFF,
             ADDR_HI_addr_63_32=va >> 32, REFERENCE_reference=reference, EXEC_COUNT_exec_count=count)


def fence(va: int, value: int) -> list[int]:
  """FENCE: write the dword `value` at `va` once the packets before it are done."""
  return pkt("FENCE", 4, HEADER_op=sdma_defs.SDMA_OP_FENCE, ADDR_LO_addr_31_0=va & 0xFFFFFFFF, ADDR_HI_addr_63_32=va >> 32,
             DATA_data=value)


def timestamp(va: int) -> list[int]:
  """TIMESTAMP_GET_GLOBAL: the GPU clock to the u64 at `va` (8-byte aligned)."""
  return pkt("TIMESTAMP_GET_GLOBAL", 3, HEADER_op=sdma_defs.SDMA_OP_TIMESTAMP, HEADER_sub_op=sdma_defs.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL,
             WRITE_ADDR_LO_write_addr_31_3=(va & 0xFFFFFFFF) >> 3, WRITE_ADDR_HI_write_addr_63_32=va >> 32)
