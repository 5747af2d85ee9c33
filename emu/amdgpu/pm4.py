"""The MEC compute queue's PM4 processor (gfx11): type-3 packets from the ring and from indirect buffers.

Packet layout: header = 3 << 30 | (payload dwords - 1) << 16 | opcode << 8 (nvd.h PACKET3); payloads as
nvd.h documents them. Every opcode not listed in HANDLERS stops the queue with an error naming it.
"""
from __future__ import annotations
import numpy as np

from autogen.amd import nvd
from emu.ring import RingError, Stalled
from emu.amdgpu.engine import GPUEngine
from emu.amdgpu.gpu import GPUModel

SH_REG_START, UCONFIG_REG_START = nvd.PACKET3_SET_SH_REG_START, nvd.PACKET3_SET_UCONFIG_REG_START
CS_PARTIAL_FLUSH = 7          # VGT_EVENT_TYPE (soc21_enum.h); EVENT_INDEX 4 = *_PARTIAL_FLUSH (nvd.h)
# WAIT_REG_MEM functions (nvd.h): 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >
COMPARE = {0: lambda v, r: True, 1: lambda v, r: v < r, 2: lambda v, r: v <= r, 3: lambda v, r: v == r,
           4: lambda v, r: v != r, 5: lambda v, r: v >= r, 6: lambda v, r: v > r}
OPNAMES = {v: k[8:] for k, v in vars(nvd).items() if k.startswith("PACKET3_") and isinstance(v, int) and 0 <= v < 256}


class PM4Engine(GPUEngine):
  """One HQD of the MEC (me 1, pipe 0): pointers count dwords."""
  unit = 4

  def __init__(self, gpu: GPUModel, name: str, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int):
    super().__init__(gpu, name, ring_va, ring_size, rptr_va, wptr_va)
    self.sh: dict[int, int] = {}                 # this pipe's SH (COMPUTE_*) registers
    self.ib: tuple[int, int, int] | None = None   # active indirect buffer: (va, dwords, position)

  def packet(self, words: np.ndarray, pos: int) -> int:
    hdr = int(words[pos])
    if hdr >> 30 != 3: raise RingError(f"{self.qname}: PM4 packet of type {hdr >> 30} (header {hdr:#010x}) at ring dword {self.rptr}: only type-3 packets are valid")
    n = ((hdr >> 16) & 0x3FFF) + 1
    if len(words) - pos < n + 1: raise RingError(f"{self.qname}: PM4 packet at ring dword {self.rptr} needs {n + 1} dwords, only {len(words) - pos} written")
    self.execute(hdr, words[pos + 1:pos + 1 + n], in_ib=False)
    return n + 1

  def execute(self, hdr: int, body: np.ndarray, in_ib: bool) -> None:
    op = (hdr >> 8) & 0xFF
    handler = HANDLERS.get(op)
    if handler is None:
      raise RingError(f"{self.qname}: unsupported PM4 opcode {op:#x} ({OPNAMES.get(op, 'unknown')}) with {len(body)} payload dwords")
    if in_ib and op == nvd.PACKET3_INDIRECT_BUFFER: raise RingError(f"{self.qname}: nested INDIRECT_BUFFER is not supported by the MEC")
    handler(self, [int(x) for x in body])

  # --- packets
  def _nop(self, p: list[int]) -> None: pass

  def _set_sh_reg(self, p: list[int]) -> None:
    base = SH_REG_START + (p[0] & 0xFFFF)
    for i, v in enumerate(p[1:]): self.sh[base + i] = v

  def _set_uconfig_reg(self, p: list[int]) -> None:
    base = UCONFIG_REG_START + (p[0] & 0xFFFF)
    for i, v in enumerate(p[1:]): self.gpu.regs.write(base + i, v)

  def _dispatch_direct(self, p: list[int]) -> None:
    if len(p) != 4: raise RingError(f"{self.qname}: DISPATCH_DIRECT takes 4 payload dwords, got {len(p)}")
    grid = tuple(p[:3])
    if 0 in grid: return   # an empty grid launches nothing
    self.gpu.dispatch(self.sh, grid, p[3], self.qname)

  def _release_mem(self, p: list[int]) -> None:
    if len(p) != 7: raise RingError(f"{self.qname}: RELEASE_MEM takes 7 payload dwords, got {len(p)}")
    data_sel, int_sel = (p[1] >> 29) & 7, (p[1] >> 24) & 7
    addr = p[2] | p[3] << 32
    if data_sel == 1: self.mem.write(addr, p[4].to_bytes(4, "little"))
    elif data_sel == 2: self.mem.write(addr, (p[4] | p[5] << 32).to_bytes(8, "little"))
    elif data_sel in (3, 4): self.mem.write(addr, self.gpu.clock().to_bytes(8, "little"))
    elif data_sel != 0: raise RingError(f"{self.qname}: RELEASE_MEM data_sel {data_sel} is reserved")
    if int_sel in (1, 2): self.gpu.interrupt("CP_EOP", p[6], self.qname)
    elif int_sel != 0: raise RingError(f"{self.qname}: RELEASE_MEM int_sel {int_sel} is not modelled")

  def _wait_reg_mem(self, p: list[int]) -> None:
    if len(p) != 6: raise RingError(f"{self.qname}: WAIT_REG_MEM takes 6 payload dwords, got {len(p)}")
    func, mem_space, operation = p[0] & 7, (p[0] >> 4) & 1, (p[0] >> 6) & 3
    ref, mask = p[3], p[4]
    if func not in COMPARE: raise RingError(f"{self.qname}: WAIT_REG_MEM function {func} is reserved")
    if mem_space:
      value = int.from_bytes(self.mem.read((p[1] & ~3) | p[2] << 32, 4), "little")
    else:
      if operation == 1: self.gpu.regs.write(p[1] & 0x3FFFF, ref)   # write reg0, then wait on reg1
      value = self.gpu.regs.read(p[2] & 0x3FFFF if operation == 1 else p[1] & 0x3FFFF)
    if not COMPARE[func](value & mask, ref): raise Stalled

  def _wait_reg_mem64(self, p: list[int]) -> None:
    """WAIT_REG_MEM with a 64-bit reference and mask (payload dwords 3-4, 5-6) on a 64-bit memory value."""
    if len(p) != 8: raise RingError(f"{self.qname}: WAIT_REG_MEM64 takes 8 payload dwords, got {len(p)}")
    func, mem_space, operation = p[0] & 7, (p[0] >> 4) & 3, (p[0] >> 6) & 3
    if func not in COMPARE: raise RingError(f"{self.qname}: WAIT_REG_MEM64 function {func} is reserved")
    if (mem_space, operation) != (1, 0): raise RingError(f"{self.qname}: WAIT_REG_MEM64 is modelled on memory only (mem_space 1, operation 0), got {mem_space}, {operation}")
    if p[1] & 7: raise RingError(f"{self.qname}: WAIT_REG_MEM64 address {p[2] << 32 | p[1]:#x} is not 8-byte aligned")
    value = int.from_bytes(self.mem.read(p[1] | p[2] << 32, 8), "little")
    if not COMPARE[func](value & (p[5] | p[6] << 32), p[3] | p[4] << 32): raise Stalled

  def _acquire_mem(self, p: list[int]) -> None:
    # cache invalidate/writeback (GCR_CNTL): the model's memory is always coherent
    if len(p) != 7: raise RingError(f"{self.qname}: ACQUIRE_MEM takes 7 payload dwords, got {len(p)}")

  def _event_write(self, p: list[int]) -> None:
    event, index = p[0] & 0x3F, (p[0] >> 8) & 0xF
    if (event, index) != (CS_PARTIAL_FLUSH, 4):
      raise RingError(f"{self.qname}: EVENT_WRITE event {event} index {index} is not modelled (only CS_PARTIAL_FLUSH)")
    # dispatches run to completion before the next packet, so the partial flush is already done

  def _indirect_buffer(self, p: list[int]) -> None:
    if len(p) != 3: raise RingError(f"{self.qname}: INDIRECT_BUFFER takes 3 payload dwords, got {len(p)}")
    if not p[2] & nvd.INDIRECT_BUFFER_VALID: raise RingError(f"{self.qname}: INDIRECT_BUFFER without the VALID bit")
    va, ndw = (p[0] & ~3) | (p[1] & 0xFFFF) << 32, p[2] & 0xFFFFF
    if self.ib is None or self.ib[:2] != (va, ndw): self.ib = (va, ndw, 0)
    words = np.frombuffer(self.mem.read(va, ndw * 4), np.uint32)
    pos = self.ib[2]
    while pos < ndw:
      hdr = int(words[pos])
      if hdr >> 30 != 3: raise RingError(f"{self.qname}: PM4 packet of type {hdr >> 30} in the IB at {va:#x} + {pos * 4:#x}")
      n = ((hdr >> 16) & 0x3FFF) + 1
      if pos + 1 + n > ndw: raise RingError(f"{self.qname}: PM4 packet overruns the end of the IB at {va:#x}")
      self.execute(hdr, words[pos + 1:pos + 1 + n], in_ib=True)   # a Stalled wait resumes here: self.ib keeps pos
      pos += n + 1
      self.ib = (va, ndw, pos)
    self.ib = None


HANDLERS = {nvd.PACKET3_NOP: PM4Engine._nop, nvd.PACKET3_SET_SH_REG: PM4Engine._set_sh_reg,
            nvd.PACKET3_SET_UCONFIG_REG: PM4Engine._set_uconfig_reg, nvd.PACKET3_DISPATCH_DIRECT: PM4Engine._dispatch_direct,
            nvd.PACKET3_RELEASE_MEM: PM4Engine._release_mem, nvd.PACKET3_WAIT_REG_MEM: PM4Engine._wait_reg_mem,
            nvd.PACKET3_ACQUIRE_MEM: PM4Engine._acquire_mem, nvd.PACKET3_EVENT_WRITE: PM4Engine._event_write,
            nvd.PACKET3_INDIRECT_BUFFER: PM4Engine._indirect_buffer, nvd.PACKET3_WAIT_REG_MEM64: PM4Engine._wait_reg_mem64}
