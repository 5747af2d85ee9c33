"""GFX 11.0.0 (GC): GRBM, the RLC, and the MEC with its hardware queue descriptors (HQDs), gc_11_0_0 registers.

- GRBM_GFX_CNTL selects which copy of a banked register BAR5 reaches: MEID/PIPEID/QUEUEID for the HQD
  registers (CP_MQD_BASE_ADDR .. CP_HQD_PQ_WPTR_HI; MEID must be 1, the MEC) and for the per-pipe
  CP_MEC_RS64_PRGRM_CNTR_START/_HI, VMID for SH_MEM_CONFIG/SH_MEM_BASES.
- RLC: after the PSP's AUTOLOAD_RLC, RLC_RLCS_BOOTLOAD_STATUS reads BOOTLOAD_COMPLETE | GFX_INIT_DONE |
  RLC_GPM_IRAM_LOADED/DONE and CP_STAT reads 0 while no queue is busy (CP_BUSY, bit 31, while one is, and
  before the autoload). RLC_SAFE_MODE: a write with CMD (bit 0) is acknowledged by the RLC clearing CMD,
  once the RLC runs.
- MEC: CP_MEC_RS64_CNTL (MEC_HALT, MEC_PIPEn_RESET, MEC_PIPEn_ACTIVE); halting or resetting a pipe drops
  its queues. The pipe runs only if its program counter start is the RS64 MEC firmware's entry point
  (0x7000000003000 >> 2: PRGRM_CNTR_START 0xc00, _HI 0x1c000, gc_11_0_0_mec.bin's gfx v2.0 header).
- HQD: writing CP_HQD_ACTIVE = 1 starts a PM4 queue (emu/amdgpu/pm4.py) from the selected HQD registers:
  ring = CP_HQD_PQ_BASE/_HI << 8, 4 << (PQ_CONTROL.QUEUE_SIZE + 1) bytes; read pointer written back to
  PQ_RPTR_REPORT_ADDR/_HI, write pointer polled at PQ_WPTR_POLL_ADDR/_HI (both in dwords, u64); doorbell at
  BAR2 byte PQ_DOORBELL_CONTROL.DOORBELL_OFFSET * 4 (DOORBELL_EN required, inside
  CP_MEC_DOORBELL_RANGE_LOWER..UPPER). Only VMID 0 PM4 queues are modelled (no AQL). The MEC must be
  running (above), else the write raises. CP_HQD_DEQUEUE_REQUEST (any DEQUEUE_REQ) stops the queue after
  the packet in flight; CP_HQD_ACTIVE reads 1 until it has stopped. CP_HQD_PQ_RPTR reads the live read pointer.
- GRBM_SOFT_RESET: SOFT_RESET_CP/CPC/CPF/CPG drop every MEC queue; SOFT_RESET_SDMA0 resets SDMA0.
- SPI_COMPUTE_QUEUE_RESET: resets the waves of a dequeued queue (the model's waves are gone already);
  reads back 0.
"""
from __future__ import annotations
from typing import TYPE_CHECKING

from emu.amdgpu.firmware import MEC_ENTRY
from emu.amdgpu.gpu import BANK_SH_MEM
from emu.amdgpu.pm4 import PM4Engine
from emu.amdgpu.registers import Block, storage
from emu.pci import ModelError
if TYPE_CHECKING: from emu.amdgpu.function import GPUFunction

PIPES, QUEUES, VMIDS = 4, 8, 16    # the register file's HQD banks: the most pipes and queues of any chip modelled
# MEC pipes by GC major (gfx_v11_0.c / gfx_v12_0.c num_pipe_per_mec; both generations' headers list their CP_ME1_PIPE<p>_INT_CNTL)
MEC_PIPES = {11: (4, 8), 12: (2, 4)}    # (pipes, queues per pipe)
BANK_HQD, BANK_PC = 0, BANK_SH_MEM + VMIDS * 2


class GFXModel(Block):
  name = ip = "GC"

  def __init__(self, dev: GPUFunction):
    super().__init__(dev)
    self.gc, (self.pipes, self.pipe_queues) = (gc := dev.chip.reg("GC")), MEC_PIPES[dev.chip.versions["GC"][0]]
    self.STORAGE = storage(gc, "GRBM_GFX_CNTL", "GRBM_GFX_INDEX", "GRBM_CNTL", "CP_MEC_DOORBELL_RANGE_LOWER",
                           "CP_MEC_DOORBELL_RANGE_UPPER", "CP_INT_CNTL", "CP_RB_WPTR_POLL_CNTL", "TCP_CNTL", "RLC_CNTL",
                           "RLC_SRM_CNTL", "RLC_SPM_MC_CNTL", "RLC_CGCG_CGLS_CTRL", "RLC_CGTT_MGCG_OVERRIDE",
                           *(f"CP_ME1_PIPE{p}_INT_CNTL" for p in range(self.pipes)), *(f"SCRATCH_REG{i}" for i in range(8)))
    self.bootload_done = gc.regRLC_RLCS_BOOTLOAD_STATUS.encode(BOOTLOAD_COMPLETE=1, GFX_INIT_DONE=1, RLC_GPM_IRAM_LOADED=1,
                                                              RLC_GPM_IRAM_DONE=1)
    self.cp_busy = gc.regCP_STAT.mask("CP_BUSY")
    self.soft_reset_cp = gc.regGRBM_SOFT_RESET.encode(SOFT_RESET_CP=1, SOFT_RESET_CPF=1, SOFT_RESET_CPC=1, SOFT_RESET_CPG=1)
    self.queues: dict[tuple[int, int], PM4Engine] = {}
    self.stale: set[tuple[int, int]] = set()      # active HQDs a previous process left without an engine here
    self.first, self.last = self.addr(gc.regCP_MQD_BASE_ADDR), self.addr(self.gc.regCP_HQD_PQ_WPTR_HI)

  def handlers(self):
    bank_write = lambda a, v: self.regs.__setitem__(self._hqd_slot(a), v)
    h = {a: (lambda a: self.regs[self._hqd_slot(a)], bank_write) for a in range(self.first, self.last + 1)}
    h[self.addr(self.gc.regCP_HQD_ACTIVE)] = (self._active_read, self._active_write)
    h[self.addr(self.gc.regCP_HQD_DEQUEUE_REQUEST)] = (None, self._dequeue)
    h[self.addr(self.gc.regCP_HQD_PQ_RPTR)] = (self._rptr_read, bank_write)
    for reg in (self.gc.regSH_MEM_CONFIG, self.gc.regSH_MEM_BASES):
      h[self.addr(reg)] = (lambda a: self.regs[self._vmid_slot(a)], lambda a, v: self.regs.__setitem__(self._vmid_slot(a), v))
    for reg in (self.gc.regCP_MEC_RS64_PRGRM_CNTR_START, self.gc.regCP_MEC_RS64_PRGRM_CNTR_START_HI):
      h[self.addr(reg)] = (lambda a: self.regs[self._pc_slot(a)], lambda a, v: self.regs.__setitem__(self._pc_slot(a), v))
    h[self.addr(self.gc.regCP_STAT)] = (self._cp_stat, self._read_only)
    h[self.addr(self.gc.regGRBM_STATUS)] = (lambda a: self._cp_stat(a) and self.gc.regGRBM_STATUS.encode(CP_BUSY=1, GUI_ACTIVE=1), self._read_only)
    h[self.addr(self.gc.regRLC_RLCS_BOOTLOAD_STATUS)] = (None, self._read_only)
    h[self.addr(self.gc.regRLC_SAFE_MODE)] = (None, self._safe_mode)
    h[self.addr(self.gc.regCP_MEC_RS64_CNTL)] = (None, self._mec_cntl)
    h[self.addr(self.gc.regGRBM_SOFT_RESET)] = (None, self._soft_reset)
    h[self.addr(self.gc.regSPI_COMPUTE_QUEUE_RESET)] = (None, lambda a, v: None)
    return h

  def _read_only(self, addr: int, value: int) -> None: raise ModelError(f"{self.regs.name_of(addr)} is read-only")

  # --- banked registers
  def _select(self) -> dict[str, int]: return self.gc.regGRBM_GFX_CNTL.decode(self.get(self.gc.regGRBM_GFX_CNTL))

  def _me1(self, addr: int) -> dict[str, int]:
    sel = self._select()
    if sel["MEID"] != 1:
      raise ModelError(f"{self.regs.name_of(addr)} with GRBM_GFX_CNTL.MEID = {sel['MEID']}: select the MEC (MEID 1) first")
    if sel["PIPEID"] >= self.pipes or sel["QUEUEID"] >= self.pipe_queues:
      raise ModelError(f"{self.regs.name_of(addr)} with GRBM_GFX_CNTL pipe {sel['PIPEID']} queue {sel['QUEUEID']}: this MEC has "
                       f"{self.pipes} pipes of {self.pipe_queues} queues")
    return sel

  def _hqd_slot(self, addr: int, pipe_queue: tuple[int, int] | None = None) -> int:
    if pipe_queue is None:
      sel = self._me1(addr)
      pipe_queue = (sel["PIPEID"], sel["QUEUEID"])
    return self.regs.bank(BANK_HQD + (pipe_queue[0] * QUEUES + pipe_queue[1]) * 64 + addr - self.first)

  def _vmid_slot(self, addr: int) -> int:
    return self.dev.gpu.sh_mem_slot(self._select()["VMID"], addr != self.addr(self.gc.regSH_MEM_CONFIG))

  def _pc_slot(self, addr: int) -> int:
    return self.regs.bank(BANK_PC + self._me1(addr)["PIPEID"] * 2 + (addr != self.addr(self.gc.regCP_MEC_RS64_PRGRM_CNTR_START)))

  def hqd(self, pq: tuple[int, int], reg) -> int: return self.regs[self._hqd_slot(self.addr(reg), pq)]
  def _set_hqd(self, pq: tuple[int, int], reg, v: int) -> None: self.regs[self._hqd_slot(self.addr(reg), pq)] = v

  # --- RLC and CP status
  @property
  def autoloaded(self) -> bool: return self.get(self.gc.regRLC_RLCS_BOOTLOAD_STATUS) == self.bootload_done

  def rlc_autoload_done(self) -> None: self.set(self.gc.regRLC_RLCS_BOOTLOAD_STATUS, self.bootload_done)

  def _cp_stat(self, addr: int) -> int:
    if not self.autoloaded or any(q.busy for q in self.queues.values()): return self.cp_busy
    return 0

  def _safe_mode(self, addr: int, value: int) -> None:
    self.regs[addr] = value & ~1 if self.autoloaded else value   # the RLC acknowledges by clearing CMD

  # --- MEC
  def _mec_cntl(self, addr: int, value: int) -> None:
    self.regs[addr] = value
    f = self.gc.regCP_MEC_RS64_CNTL.decode(value)
    for pq in list(self.queues) + list(self.stale):
      if f["MEC_HALT"] or f[f"MEC_PIPE{pq[0]}_RESET"]: self._drop(pq)

  def _mec_not_running(self, pipe: int) -> str | None:
    if not self.autoloaded: return "the RLC has not autoloaded the GFX firmware (PSP LOAD_IP_FW ... + AUTOLOAD_RLC)"
    f = self.gc.regCP_MEC_RS64_CNTL.decode(self.get(self.gc.regCP_MEC_RS64_CNTL))
    if f["MEC_HALT"]: return "CP_MEC_RS64_CNTL.MEC_HALT is set"
    if f[f"MEC_PIPE{pipe}_RESET"] or not f[f"MEC_PIPE{pipe}_ACTIVE"]:
      return f"MEC pipe {pipe} is not running (CP_MEC_RS64_CNTL.MEC_PIPE{pipe}_ACTIVE=1 and _RESET=0 needed)"
    pc = self.regs[self.regs.bank(BANK_PC + pipe * 2 + 1)] << 32 | self.regs[self.regs.bank(BANK_PC + pipe * 2)]
    if pc != MEC_ENTRY >> 2:
      return f"CP_MEC_RS64_PRGRM_CNTR_START(_HI) of pipe {pipe} is {pc:#x}; the MEC firmware entry point is {MEC_ENTRY:#x} >> 2 = {MEC_ENTRY >> 2:#x}"
    return None

  # --- HQDs
  def _active_read(self, addr: int) -> int:
    sel = self._me1(addr)
    pq = (sel["PIPEID"], sel["QUEUEID"])
    if (q := self.queues.get(pq)) is not None and q.stopping and not q.is_alive(): self._retire(pq)
    return self.hqd(pq, self.gc.regCP_HQD_ACTIVE)

  def _active_write(self, addr: int, value: int) -> None:
    sel = self._me1(addr)
    pq = (sel["PIPEID"], sel["QUEUEID"])
    if not value & 1:
      self._drop(pq)
      return self._set_hqd(pq, self.gc.regCP_HQD_ACTIVE, value)
    if pq in self.queues or pq in self.stale:
      raise ModelError(f"CP_HQD_ACTIVE=1 for MEC pipe {pq[0]} queue {pq[1]}, which is already active: dequeue it first")
    self.queues[pq] = self._start(pq)
    self._set_hqd(pq, self.gc.regCP_HQD_ACTIVE, value)

  def _start(self, pq: tuple[int, int]) -> PM4Engine:
    where = f"CP_HQD_ACTIVE=1 for MEC pipe {pq[0]} queue {pq[1]}"
    if why := self._mec_not_running(pq[0]): raise ModelError(f"{where}: {why}")
    r = lambda reg: self.hqd(pq, reg)
    if self.gc.regCP_HQD_VMID.decode(r(self.gc.regCP_HQD_VMID))["VMID"]: raise ModelError(f"{where}: only VMID 0 queues are modelled")
    if r(self.gc.regCP_HQD_AQL_CONTROL) & self.gc.regCP_HQD_AQL_CONTROL.mask("CONTROL0_EN"): raise ModelError(f"{where}: AQL queues are not modelled")
    db = self.gc.regCP_HQD_PQ_DOORBELL_CONTROL.decode(r(self.gc.regCP_HQD_PQ_DOORBELL_CONTROL))
    if not db["DOORBELL_EN"]: raise ModelError(f"{where}: CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_EN is 0 (queues without a doorbell are not modelled)")
    doorbell = db["DOORBELL_OFFSET"] * 4
    lo, hi = self.get(self.gc.regCP_MEC_DOORBELL_RANGE_LOWER) & ~3, self.get(self.gc.regCP_MEC_DOORBELL_RANGE_UPPER) & ~3
    if not lo <= doorbell <= hi:
      raise ModelError(f"{where}: doorbell byte {doorbell:#x} is outside CP_MEC_DOORBELL_RANGE [{lo:#x}, {hi:#x}]: the MEC would never see it")
    ring = (r(self.gc.regCP_HQD_PQ_BASE_HI) << 32 | r(self.gc.regCP_HQD_PQ_BASE)) << 8
    size = 4 << (self.gc.regCP_HQD_PQ_CONTROL.decode(r(self.gc.regCP_HQD_PQ_CONTROL))["QUEUE_SIZE"] + 1)
    rptr_va = r(self.gc.regCP_HQD_PQ_RPTR_REPORT_ADDR_HI) << 32 | (r(self.gc.regCP_HQD_PQ_RPTR_REPORT_ADDR) & ~3)
    wptr_va = r(self.gc.regCP_HQD_PQ_WPTR_POLL_ADDR_HI) << 32 | (r(self.gc.regCP_HQD_PQ_WPTR_POLL_ADDR) & ~7)
    q = PM4Engine(self.dev.gpu, f"MEC pipe{pq[0]} queue{pq[1]}", ring, size, rptr_va, wptr_va)
    q.rptr, q.doorbell_offset = r(self.gc.regCP_HQD_PQ_RPTR), doorbell
    self.dev.gpu.add_engine(q)
    self.dev.bind_doorbell(doorbell, q)
    return q

  def _dequeue(self, addr: int, value: int) -> None:
    sel = self._me1(addr)
    pq = (sel["PIPEID"], sel["QUEUEID"])
    self._set_hqd(pq, self.gc.regCP_HQD_DEQUEUE_REQUEST, value)
    if not self.gc.regCP_HQD_DEQUEUE_REQUEST.decode(value)["DEQUEUE_REQ"]: return
    if (q := self.queues.get(pq)) is not None: q.request_stop()
    elif pq in self.stale: self._drop(pq)

  def _rptr_read(self, addr: int) -> int:
    sel = self._me1(addr)
    pq = (sel["PIPEID"], sel["QUEUEID"])
    if (q := self.queues.get(pq)) is not None: return q.rptr % (q.ring_size // 4)
    return self.hqd(pq, self.gc.regCP_HQD_PQ_RPTR)

  def _retire(self, pq: tuple[int, int]) -> None:
    """A stopped queue's HQD goes inactive; its doorbell is free again."""
    q = self.queues.pop(pq)
    self.dev.gpu.remove_engine(q, wait=False)
    self.dev.unbind_doorbell(q.doorbell_offset, q)
    self._set_hqd(pq, self.gc.regCP_HQD_PQ_RPTR, q.rptr % (q.ring_size // 4))
    self._set_hqd(pq, self.gc.regCP_HQD_ACTIVE, 0)
    self._set_hqd(pq, self.gc.regCP_HQD_DEQUEUE_REQUEST, 0)

  def _drop(self, pq: tuple[int, int]) -> None:
    """Deactivate at once (reset, halt): the engine is told to stop and forgotten."""
    if pq in self.queues: self._retire(pq)
    if pq in self.stale:
      self.stale.discard(pq)
      self.dev.unbind_stale(("MEC", pq))
    self._set_hqd(pq, self.gc.regCP_HQD_ACTIVE, 0)

  def _soft_reset(self, addr: int, value: int) -> None:
    self.regs[addr] = value
    if value & self.soft_reset_cp:
      for pq in list(self.queues) + list(self.stale): self._drop(pq)
    if value & self.gc.regGRBM_SOFT_RESET.mask("SOFT_RESET_SDMA0"): self.dev.sdma.reset()

  def attach(self) -> None:
    """A new process opened the device: HQDs left active have no engine here; they are stale until reset."""
    for p in range(self.pipes):
      for q in range(self.pipe_queues):
        if self.hqd((p, q), self.gc.regCP_HQD_ACTIVE) & 1:
          self.stale.add((p, q))
          db = self.gc.regCP_HQD_PQ_DOORBELL_CONTROL.decode(self.hqd((p, q), self.gc.regCP_HQD_PQ_DOORBELL_CONTROL))
          self.dev.mark_stale(db["DOORBELL_OFFSET"] * 4, ("MEC", (p, q)), f"MEC pipe {p} queue {q}")

  def stop_all(self) -> None:
    for q in self.queues.values(): self.dev.gpu.remove_engine(q, wait=False)
    self.queues.clear()
    self.stale.clear()
