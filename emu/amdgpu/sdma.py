"""The SDMA 6.0 engine (queue 0): linear copies, writes, fences, traps, polls and timestamps.

Packet fields are decoded with the dword/mask/shift triples of sdma_v6_0_0_pkt_open.h (SDMA_PKT_<PKT>_<DW>_<field>).
Pointers count bytes. Unsupported opcodes stop the queue with an error naming them.
"""
from __future__ import annotations
import numpy as np

from autogen import pktfields
from autogen.amd import sdma_v6_0_0_pkt_open as sdma_defs
from emu.ring import RingError, Stalled
from emu.amdgpu.engine import GPUEngine
from emu.amdgpu.pm4 import COMPARE
from emu.amdgpu.registers import Block, storage
from emu.pci import ModelError

OPNAMES = {v: k[8:] for k, v in vars(sdma_defs).items() if k.startswith("SDMA_OP_") and isinstance(v, int)}


def field(pkt: np.ndarray, name: str) -> int:
  """SDMA packet field `name` = '<PACKET>_<DWORD>_<field>' as sdma_v6_0_0_pkt_open.h names it."""
  return pktfields.get(sdma_defs, f"SDMA_PKT_{name}", pkt)


class SDMAEngine(GPUEngine):
  unit = 1
  kind = "sdma"
  SIZES = {sdma_defs.SDMA_OP_NOP: 1, sdma_defs.SDMA_OP_COPY: 7, sdma_defs.SDMA_OP_FENCE: 4, sdma_defs.SDMA_OP_TRAP: 2,
           sdma_defs.SDMA_OP_POLL_REGMEM: 6,
           sdma_defs.SDMA_OP_TIMESTAMP: 3, sdma_defs.SDMA_OP_COND_EXE: 5}

  def packet(self, words: np.ndarray, pos: int) -> int:
    hdr = words[pos:]
    op, sub = int(hdr[0]) & 0xFF, (int(hdr[0]) >> 8) & 0xFF
    if op == sdma_defs.SDMA_OP_WRITE and len(hdr) >= 4: ndw = 4 + field(hdr, "WRITE_UNTILED_DW_3_count") + 1
    elif op == sdma_defs.SDMA_OP_NOP: ndw = 1 + field(hdr, "NOP_HEADER_count")
    elif op in self.SIZES: ndw = self.SIZES[op]
    else: raise RingError(f"{self.qname}: unsupported SDMA opcode {op} ({OPNAMES.get(op, 'unknown')}) at ring byte {self.rptr}")
    if len(hdr) < ndw: raise RingError(f"{self.qname}: SDMA packet at ring byte {self.rptr} needs {ndw * 4} bytes, only {len(hdr) * 4} written")
    pkt = hdr[:ndw]
    if op == sdma_defs.SDMA_OP_COPY:
      if sub != sdma_defs.SDMA_SUBOP_COPY_LINEAR: raise RingError(f"{self.qname}: SDMA COPY sub-op {sub} is not modelled (only COPY_LINEAR)")
      self.mem.copy(field(pkt, "COPY_LINEAR_DST_ADDR_LO_dst_addr_31_0") | field(pkt, "COPY_LINEAR_DST_ADDR_HI_dst_addr_63_32") << 32,
                    field(pkt, "COPY_LINEAR_SRC_ADDR_LO_src_addr_31_0") | field(pkt, "COPY_LINEAR_SRC_ADDR_HI_src_addr_63_32") << 32,
                    field(pkt, "COPY_LINEAR_COUNT_count") + 1)
    elif op == sdma_defs.SDMA_OP_WRITE:
      dst = field(pkt, "WRITE_UNTILED_DST_ADDR_LO_dst_addr_31_0") | field(pkt, "WRITE_UNTILED_DST_ADDR_HI_dst_addr_63_32") << 32
      self.mem.write(dst, pkt[4:].tobytes())
    elif op == sdma_defs.SDMA_OP_FENCE:
      addr = field(pkt, "FENCE_ADDR_LO_addr_31_0") | field(pkt, "FENCE_ADDR_HI_addr_63_32") << 32
      self.mem.write(addr, field(pkt, "FENCE_DATA_data").to_bytes(4, "little"))
    elif op == sdma_defs.SDMA_OP_TRAP: self.gpu.interrupt("SDMA_TRAP", field(pkt, "TRAP_INT_CONTEXT_int_context"), self.qname)
    elif op == sdma_defs.SDMA_OP_POLL_REGMEM: self._poll(pkt)
    elif op == sdma_defs.SDMA_OP_COND_EXE: return ndw + self._cond_exe(pkt, len(hdr) - ndw)
    elif op == sdma_defs.SDMA_OP_TIMESTAMP:
      if sub != sdma_defs.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL: raise RingError(f"{self.qname}: SDMA TIMESTAMP sub-op {sub} is not modelled")
      addr = field(pkt, "TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO_write_addr_31_3") << 3 | \
             field(pkt, "TIMESTAMP_GET_GLOBAL_WRITE_ADDR_HI_write_addr_63_32") << 32
      self.mem.write(addr, self.gpu.clock().to_bytes(8, "little"))
    return ndw


  def _poll(self, pkt: np.ndarray) -> None:
    func = field(pkt, "POLL_REGMEM_HEADER_func")
    if not field(pkt, "POLL_REGMEM_HEADER_mem_poll"): raise RingError(f"{self.qname}: register POLL_REGMEM is not modelled")
    addr = field(pkt, "POLL_REGMEM_ADDR_LO_addr_31_0") | field(pkt, "POLL_REGMEM_ADDR_HI_addr_63_32") << 32
    value = int.from_bytes(self.mem.read(addr, 4), "little")
    if func not in COMPARE: raise RingError(f"{self.qname}: POLL_REGMEM function {func} is reserved")
    if not COMPARE[func](value & field(pkt, "POLL_REGMEM_MASK_mask"), field(pkt, "POLL_REGMEM_VALUE_value")): raise Stalled


  def _cond_exe(self, pkt: np.ndarray, following: int) -> int:
    """COND_EXE: the next exec_count dwords run if the dword at addr equals reference, else they are skipped (as
    amdgpu's sdma_v6_0_ring_init_cond_exec uses it: reference 1 at a flag the driver clears to skip). -> dwords skipped"""
    addr = field(pkt, "COND_EXE_ADDR_LO_addr_31_0") | field(pkt, "COND_EXE_ADDR_HI_addr_63_32") << 32
    if addr & 3: raise RingError(f"{self.qname}: COND_EXE address {addr:#x} is not dword aligned")
    count = field(pkt, "COND_EXE_EXEC_COUNT_exec_count")
    if int.from_bytes(self.mem.read(addr, 4), "little") == field(pkt, "COND_EXE_REFERENCE_reference"): return 0
    if count > following: raise RingError(f"{self.qname}: COND_EXE at ring byte {self.rptr} skips {count} dwords, only {following} written")
    return count


class SDMAModel(Block):
  """SDMA0's registers on the PCI function (gc_11_0_0 SDMA0_*; amd_driver.md 2.10-2.11). Queue 0 only:
  RB_CNTL.RB_ENABLE starts an SDMAEngine with ring = RB_BASE/_HI << 8 of 4 << RB_SIZE bytes, read pointer
  (bytes, u64) written back to RB_RPTR_ADDR_LO/HI, write pointer polled at RB_WPTR_POLL_ADDR_LO/HI, doorbell at
  BAR2 byte DOORBELL_OFFSET.OFFSET * 4 when DOORBELL.ENABLE. The queue runs while the F32 engine is unhalted
  (F32_CNTL.HALT = 0; SDMA 7: MCU_CNTL.HALT, which needs the SDMA firmware the PSP loaded); clearing RB_ENABLE stops it.
  RB_RPTR/_HI read the live read pointer. HALT is 1 out of reset."""
  name = ip = "SDMA0"

  def __init__(self, dev):
    super().__init__(dev)
    self.gc = gc = dev.chip.reg("GC")
    self.STORAGE = storage(gc, *(f"SDMA0_QUEUE0_{n}" for n in ("RB_BASE", "RB_BASE_HI", "RB_RPTR_ADDR_LO", "RB_RPTR_ADDR_HI",
                           "RB_WPTR_POLL_ADDR_LO", "RB_WPTR_POLL_ADDR_HI", "RB_WPTR", "RB_WPTR_HI", "DOORBELL", "DOORBELL_OFFSET",
                           "MINOR_PTR_UPDATE", "IB_CNTL")), "SDMA0_WATCHDOG_CNTL", "SDMA0_UTCL1_CNTL", "SDMA0_UTCL1_PAGE",
                           "SDMA0_CNTL", "SDMA0_RLC_CGCG_CTRL", "SDMA1_RLC_CGCG_CTRL")
    # the engine's halt control: SDMA 6's F32 (SDMA0_F32_CNTL), SDMA 7's MCU (SDMA0_MCU_CNTL); HALT is bit 0 of both
    self.halt_reg = gc.regSDMA0_F32_CNTL if dev.chip.versions["SDMA0"] < (7, 0, 0) else gc.regSDMA0_MCU_CNTL
    self.queue: SDMAEngine | None = None
    self.stale = False

  def handlers(self):
    return {self.addr(self.gc.regSDMA0_QUEUE0_RB_CNTL): (None, self._rb_cntl),
            self.addr(self.halt_reg): (None, self._f32_cntl),
            self.addr(self.gc.regSDMA0_QUEUE0_RB_RPTR): (lambda a: self._rptr() & 0xFFFFFFFF, None),
            self.addr(self.gc.regSDMA0_QUEUE0_RB_RPTR_HI): (lambda a: self._rptr() >> 32, None),
            self.addr(self.gc.regSDMA0_STATUS_REG): (self._status, None)}

  def power_on(self) -> None:
    self.set(self.halt_reg, self.halt_reg.encode(HALT=1))

  def _rptr(self) -> int:
    if self.queue is not None: return self.queue.rptr
    return self.get(self.gc.regSDMA0_QUEUE0_RB_RPTR_HI) << 32 | self.get(self.gc.regSDMA0_QUEUE0_RB_RPTR)

  def _status(self, addr: int) -> int:
    busy = self.queue is not None and self.queue.busy
    return 0 if busy else self.gc.regSDMA0_STATUS_REG.encode(IDLE=1, RB_EMPTY=1, RB_CMD_IDLE=1, IB_CMD_IDLE=1, BLOCK_IDLE=1)

  def _f32_cntl(self, addr: int, value: int) -> None:
    if self.get(self.halt_reg) & 1 and not value & 1 and not self.dev.gfx.autoloaded:
      raise ModelError(f"{self.halt_reg.name}.HALT cleared but the SDMA firmware is not loaded (PSP LOAD_IP_FW SDMA_UCODE_TH0/TH1, "
                       "then AUTOLOAD_RLC)")
    self.regs[addr] = value
    self._evaluate()

  def _rb_cntl(self, addr: int, value: int) -> None:
    self.regs[addr] = value
    if not value & 1: self.stale = False
    self._evaluate()

  def _evaluate(self) -> None:
    """The queue runs iff RB_ENABLE and the F32 is unhalted."""
    cntl = self.gc.regSDMA0_QUEUE0_RB_CNTL.decode(self.get(self.gc.regSDMA0_QUEUE0_RB_CNTL))
    run = bool(cntl["RB_ENABLE"]) and not self.get(self.halt_reg) & 1
    if run and self.queue is None and not self.stale: self.queue = self._start(cntl)
    elif not run and self.queue is not None: self._stop()

  def _start(self, cntl: dict[str, int]) -> SDMAEngine:
    if cntl["RB_VMID"]: raise ModelError("SDMA0_QUEUE0_RB_CNTL.RB_VMID: only VMID 0 queues are modelled")
    if not cntl["RPTR_WRITEBACK_ENABLE"]:
      raise ModelError("SDMA0_QUEUE0_RB_CNTL.RPTR_WRITEBACK_ENABLE is 0: the model always writes the read pointer back")
    if not self.get(self.gc.regSDMA0_QUEUE0_DOORBELL) & self.gc.regSDMA0_QUEUE0_DOORBELL.mask("ENABLE"):
      raise ModelError("SDMA0 queue 0 enabled without SDMA0_QUEUE0_DOORBELL.ENABLE (queues without a doorbell are not modelled)")
    r = self.get
    q = SDMAEngine(self.dev.gpu, "SDMA0 queue0", (r(self.gc.regSDMA0_QUEUE0_RB_BASE_HI) << 32 | r(self.gc.regSDMA0_QUEUE0_RB_BASE)) << 8,
                  4 << cntl["RB_SIZE"], r(self.gc.regSDMA0_QUEUE0_RB_RPTR_ADDR_HI) << 32 | (r(self.gc.regSDMA0_QUEUE0_RB_RPTR_ADDR_LO) & ~3),
                  r(self.gc.regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI) << 32 | (r(self.gc.regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO) & ~3))
    q.rptr = r(self.gc.regSDMA0_QUEUE0_RB_RPTR_HI) << 32 | r(self.gc.regSDMA0_QUEUE0_RB_RPTR)
    q.doorbell_offset = self.gc.regSDMA0_QUEUE0_DOORBELL_OFFSET.decode(r(self.gc.regSDMA0_QUEUE0_DOORBELL_OFFSET))["OFFSET"] * 4
    self.dev.gpu.add_engine(q)
    self.dev.bind_doorbell(q.doorbell_offset, q)
    return q

  def _stop(self) -> None:
    q, self.queue = self.queue, None
    self.dev.gpu.remove_engine(q, wait=False)
    self.dev.unbind_doorbell(q.doorbell_offset, q)
    self.set(self.gc.regSDMA0_QUEUE0_RB_RPTR, q.rptr & 0xFFFFFFFF)
    self.set(self.gc.regSDMA0_QUEUE0_RB_RPTR_HI, q.rptr >> 32)

  def reset(self) -> None:
    """GRBM_SOFT_RESET.SOFT_RESET_SDMA0: the queue stops and its ring registers are disabled."""
    if self.queue is not None: self._stop()
    if self.stale: self.dev.unbind_stale(("SDMA", 0))
    self.stale = False
    self.set(self.gc.regSDMA0_QUEUE0_RB_CNTL, self.get(self.gc.regSDMA0_QUEUE0_RB_CNTL) & ~1)

  def attach(self) -> None:
    """A new process opened the device: a ring left enabled has no engine here; it is stale until reset."""
    if self.get(self.gc.regSDMA0_QUEUE0_RB_CNTL) & 1 and not self.get(self.halt_reg) & 1:
      self.stale = True
      offset = self.gc.regSDMA0_QUEUE0_DOORBELL_OFFSET.decode(self.get(self.gc.regSDMA0_QUEUE0_DOORBELL_OFFSET))["OFFSET"] * 4
      self.dev.mark_stale(offset, ("SDMA", 0), "SDMA0 queue 0")

  def stop_all(self) -> None:
    if self.queue is not None: self.dev.gpu.remove_engine(self.queue, wait=False)
    self.queue, self.stale = None, False
