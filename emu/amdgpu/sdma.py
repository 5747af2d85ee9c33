"""The SDMA 6.0 engine (queue 0): linear copies, writes, fences, traps, polls and timestamps.

Packet fields are decoded with the dword/mask/shift triples of sdma_v6_0_0_pkt_open.h (SDMA_PKT_<PKT>_<DW>_<field>).
Pointers count bytes. Unsupported opcodes stop the queue with an error naming them.
"""
from __future__ import annotations
import numpy as np

from autogen import pktfields
from autogen.amd import sdma_v6_0_0_pkt_open as S
from emu.amdgpu.engine import RingEngine, EngineError, Stalled
from emu.amdgpu.pm4 import COMPARE

OPNAMES = {v: k[8:] for k, v in vars(S).items() if k.startswith("SDMA_OP_") and isinstance(v, int)}


def field(pkt: np.ndarray, name: str) -> int:
  """SDMA packet field `name` = '<PACKET>_<DWORD>_<field>' as sdma_v6_0_0_pkt_open.h names it."""
  return pktfields.get(S, f"SDMA_PKT_{name}", pkt)


class SDMAQueue(RingEngine):
  unit = 1
  SIZES = {S.SDMA_OP_NOP: 1, S.SDMA_OP_COPY: 7, S.SDMA_OP_FENCE: 4, S.SDMA_OP_TRAP: 2, S.SDMA_OP_POLL_REGMEM: 6,
           S.SDMA_OP_TIMESTAMP: 3}

  def packet(self, rptr: int, wptr: int) -> int:
    hdr = self.fetch(rptr, 1)
    op, sub = int(hdr[0]) & 0xFF, (int(hdr[0]) >> 8) & 0xFF
    if op == S.SDMA_OP_WRITE: ndw = 4 + field(self.fetch(rptr, 4), "WRITE_UNTILED_DW_3_count") + 1
    elif op == S.SDMA_OP_NOP: ndw = 1 + field(hdr, "NOP_HEADER_count")
    elif op in self.SIZES: ndw = self.SIZES[op]
    else: raise EngineError(f"{self.qname}: unsupported SDMA opcode {op} ({OPNAMES.get(op, 'unknown')}) at ring byte {rptr}")
    if wptr - rptr < ndw * 4: raise EngineError(f"{self.qname}: SDMA packet at ring byte {rptr} needs {ndw * 4} bytes, only {wptr - rptr} written")
    pkt = self.fetch(rptr, ndw)
    if op == S.SDMA_OP_COPY:
      if sub != S.SDMA_SUBOP_COPY_LINEAR: raise EngineError(f"{self.qname}: SDMA COPY sub-op {sub} is not modelled (only COPY_LINEAR)")
      self._copy(field(pkt, "COPY_LINEAR_SRC_ADDR_LO_src_addr_31_0") | field(pkt, "COPY_LINEAR_SRC_ADDR_HI_src_addr_63_32") << 32,
                 field(pkt, "COPY_LINEAR_DST_ADDR_LO_dst_addr_31_0") | field(pkt, "COPY_LINEAR_DST_ADDR_HI_dst_addr_63_32") << 32,
                 field(pkt, "COPY_LINEAR_COUNT_count") + 1)
    elif op == S.SDMA_OP_WRITE:
      dst = field(pkt, "WRITE_UNTILED_DST_ADDR_LO_dst_addr_31_0") | field(pkt, "WRITE_UNTILED_DST_ADDR_HI_dst_addr_63_32") << 32
      self.gpu.mmu.write(dst, pkt[4:].tobytes(), self.qname)
    elif op == S.SDMA_OP_FENCE:
      addr = field(pkt, "FENCE_ADDR_LO_addr_31_0") | field(pkt, "FENCE_ADDR_HI_addr_63_32") << 32
      self.gpu.mmu.write(addr, field(pkt, "FENCE_DATA_data").to_bytes(4, "little"), self.qname)
    elif op == S.SDMA_OP_TRAP: self.gpu.interrupt("SDMA_TRAP", field(pkt, "TRAP_INT_CONTEXT_int_context"))
    elif op == S.SDMA_OP_POLL_REGMEM: self._poll(pkt)
    elif op == S.SDMA_OP_TIMESTAMP:
      if sub != S.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL: raise EngineError(f"{self.qname}: SDMA TIMESTAMP sub-op {sub} is not modelled")
      addr = field(pkt, "TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO_write_addr_31_3") << 3 | \
             field(pkt, "TIMESTAMP_GET_GLOBAL_WRITE_ADDR_HI_write_addr_63_32") << 32
      self.gpu.mmu.write(addr, self.gpu.clock().to_bytes(8, "little"), self.qname)
    return ndw * 4

  def _copy(self, src: int, dst: int, n: int) -> None:
    self.gpu.mmu.copy(dst, src, n, self.qname)

  def _poll(self, pkt: np.ndarray) -> None:
    func = field(pkt, "POLL_REGMEM_HEADER_func")
    if not field(pkt, "POLL_REGMEM_HEADER_mem_poll"): raise EngineError(f"{self.qname}: register POLL_REGMEM is not modelled")
    addr = field(pkt, "POLL_REGMEM_ADDR_LO_addr_31_0") | field(pkt, "POLL_REGMEM_ADDR_HI_addr_63_32") << 32
    value = int.from_bytes(self.gpu.mmu.read(addr, 4, self.qname), "little")
    if func not in COMPARE: raise EngineError(f"{self.qname}: POLL_REGMEM function {func} is reserved")
    if not COMPARE[func](value & field(pkt, "POLL_REGMEM_MASK_mask"), field(pkt, "POLL_REGMEM_VALUE_value")): raise Stalled
