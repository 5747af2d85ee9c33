"""The copy queue: hcq Queue commands encoded as SDMA 6.0 packets (sdma_v6_0_0_pkt_open.h)."""
from __future__ import annotations
from typing import TYPE_CHECKING

from autogen import pktfields
from autogen.amd import sdma_v6_0_0_pkt_open as sdma_defs
from drivers.hcq import Signal
from drivers.hcq.ring import Ring, RingQueue
if TYPE_CHECKING: from drivers.amd.device import AMDDevice

MAX_COPY = sdma_defs.SDMA_PKT_COPY_LINEAR_COUNT_count_mask + 1   # COPY_LINEAR count holds bytes - 1: at most 1 GiB per packet
# POLL_REGMEM func 5 is ">=": the header names the field only; the functions are PM4 WAIT_REG_MEM's (nvd.h), as
# sdma_v6_0_ring_emit_pipeline_sync's FUNC(3) "equal" shows
POLL_GE, POLL_EQ = 5, 3
# retry count and poll interval of Linux's own memory polls (sdma_v6_0_ring_emit_pipeline_sync)
POLL_INTERVAL, POLL_RETRY = 0x04, 0xFFF


def pkt(name: str, ndw: int, **fields: int) -> list[int]:
  return pktfields.encode(sdma_defs, f"SDMA_PKT_{name}", ndw, **fields)


NOP = pkt("NOP", 1, HEADER_op=sdma_defs.SDMA_OP_NOP)[0]   # a one-dword NOP: what the ring pads its tail with


class SDMAQueue(RingQueue):
  """Each packet is added with _packet: SDMA packets never straddle the ring's end."""
  kind = "copy"
  device: AMDDevice

  @property
  def ring(self) -> Ring: return self.device.sdma_ring

  def _copy(self, dest_va: int, src_va: int, size: int) -> None:
    for off in range(0, size, MAX_COPY):
      n = min(MAX_COPY, size - off)
      s, d = src_va + off, dest_va + off
      self._patch_point("src", len(self.words) + sdma_defs.SDMA_PKT_COPY_LINEAR_SRC_ADDR_LO_src_addr_31_0_offset, 64, off)
      self._patch_point("dest", len(self.words) + sdma_defs.SDMA_PKT_COPY_LINEAR_DST_ADDR_LO_dst_addr_31_0_offset, 64, off)
      self._packet(pkt("COPY_LINEAR", 7, HEADER_op=sdma_defs.SDMA_OP_COPY, HEADER_sub_op=sdma_defs.SDMA_SUBOP_COPY_LINEAR,
                              COUNT_count=n - 1, SRC_ADDR_LO_src_addr_31_0=s & 0xFFFFFFFF, SRC_ADDR_HI_src_addr_63_32=s >> 32,
                              DST_ADDR_LO_dst_addr_31_0=d & 0xFFFFFFFF, DST_ADDR_HI_dst_addr_63_32=d >> 32))

  def _signal(self, sig: Signal, value: int) -> None:
    # a 64-bit value in one linear WRITE packet (FENCE writes only 32 bits)
    self._patch_point("value", len(self.words) + 4, 64)   # the data dwords follow the 4-dword header
    self._packet(pkt("WRITE_UNTILED", 4, HEADER_op=sdma_defs.SDMA_OP_WRITE, DST_ADDR_LO_dst_addr_31_0=sig.va & 0xFFFFFFFF,
                            DST_ADDR_HI_dst_addr_63_32=sig.va >> 32, DW_3_count=1) + [value & 0xFFFFFFFF, value >> 32])

  def _wait(self, sig: Signal, value: int) -> None:
    """POLL_REGMEM compares one dword, so a 64-bit sig >= value is: the high dword >= value's, then, only if it
    equals value's (COND_EXE), the low dword >= value's. One ring unit, so COND_EXE's skip never crosses ring padding.
    Exact for a signal that reaches the value in its window of 2^32; one that leaps from below the value to a later
    window with a smaller low dword while the queue polls the low dword stalls it until the low dword gets there."""
    hi, lo = value >> 32, value & 0xFFFFFFFF
    poll = lambda va, ref: pkt("POLL_REGMEM", 6, HEADER_op=sdma_defs.SDMA_OP_POLL_REGMEM, HEADER_func=POLL_GE, HEADER_mem_poll=1,
                               ADDR_LO_addr_31_0=va & 0xFFFFFFFF, ADDR_HI_addr_63_32=va >> 32, VALUE_value=ref,
                               MASK_mask=0xFFFFFFFF, DW5_interval=POLL_INTERVAL, DW5_retry_count=POLL_RETRY)
    high, low = poll(sig.va + 4, hi), poll(sig.va, lo)
    cond = pkt("COND_EXE", 5, HEADER_op=sdma_defs.SDMA_OP_COND_EXE, ADDR_LO_addr_31_0=(sig.va + 4) & 0xFFFFFFFF,
               ADDR_HI_addr_63_32=(sig.va + 4) >> 32, REFERENCE_reference=hi, EXEC_COUNT_exec_count=len(low))
    value_at, ref_at = sdma_defs.SDMA_PKT_POLL_REGMEM_VALUE_value_offset, sdma_defs.SDMA_PKT_COND_EXE_REFERENCE_reference_offset
    self._patch_point("value", ((len(self.words) + value_at, 32), (len(self.words) + len(high) + ref_at, 32),
                                (len(self.words) + len(high) + len(cond) + value_at, 0)), 64)
    self._packet(high + cond + low)

  def poll(self, va: int, value: int, func: int = POLL_EQ) -> SDMAQueue:
    """Stall the queue until the dword at `va` compares to `value` (POLL_REGMEM on memory; POLL_EQ, POLL_GE)."""
    self._packet(pkt("POLL_REGMEM", 6, HEADER_op=sdma_defs.SDMA_OP_POLL_REGMEM, HEADER_func=func, HEADER_mem_poll=1,
                  ADDR_LO_addr_31_0=va & 0xFFFFFFFF, ADDR_HI_addr_63_32=va >> 32, VALUE_value=value,
                  MASK_mask=0xFFFFFFFF, DW5_interval=POLL_INTERVAL, DW5_retry_count=POLL_RETRY))
    return self

  def fence(self, va: int, value: int) -> SDMAQueue:
    """Write the dword `value` at `va` once the packets before it are done (FENCE)."""
    self._packet(pkt("FENCE", 4, HEADER_op=sdma_defs.SDMA_OP_FENCE, ADDR_LO_addr_31_0=va & 0xFFFFFFFF, ADDR_HI_addr_63_32=va >> 32,
                  DATA_data=value))
    return self

  def _timestamp(self, sig: Signal) -> None:
    a = sig.timestamp_va
    self._packet(pkt("TIMESTAMP_GET_GLOBAL", 3, HEADER_op=sdma_defs.SDMA_OP_TIMESTAMP, HEADER_sub_op=sdma_defs.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL,
                            WRITE_ADDR_LO_write_addr_31_3=(a & 0xFFFFFFFF) >> 3, WRITE_ADDR_HI_write_addr_63_32=a >> 32))
