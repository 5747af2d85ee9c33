"""The MEC compute queue's PM4 processor (gfx11): type-3 packets from the ring and from indirect buffers.

Packet layout: header = 3 << 30 | (payload dwords - 1) << 16 | opcode << 8 (nvd.h PACKET3); payloads as
nvd.h documents them. Every opcode not listed in HANDLERS stops the queue with an error naming it, and so does any
field value below that a compute queue cannot use or the model does not model.
- SET_SH_REG: only the COMPUTE_* registers emu/amdgpu/spi.py acts on; DISPATCH_DIRECT launches from them (spi.py).
- RELEASE_MEM: an end-of-pipe event (index 5: CACHE_FLUSH_TS, CACHE_FLUSH_AND_INV_TS_EVENT, BOTTOM_OF_PIPE_TS) or
  the end-of-shader CS_DONE (index 6, without cache actions); dispatches run to completion in order, so both find
  the earlier work done. Then the GCR cache actions (caches.py), then the write (DST_SEL 0 memory or 1 through L2;
  DATA_SEL 1 low 32 bits, 2 64 bits, 3/4 the 100 MHz counter, aligned to the size), then the interrupt (INT_SEL 1:
  interrupt only, DATA_SEL must be 0; 2: after the write; 3: the write, no interrupt). CACHE_POLICY has no effect.
- WRITE_DATA: DST_SEL 1 (memory, sync), 2 (through L2) or 5 (memory, async) from the ME (ENGINE_SEL 0, the only
  engine a compute queue has), to a dword-aligned address: the data dwords go out as one write (so two dwords to a
  peer's doorbell register are one 64-bit store: emu/topology.py), or with WR_ONE_ADDR each dword to the same address
  in turn. WR_CONFIRM (wait for the write to land before the next packet) and CACHE_POLICY change nothing here: writes
  land before the next packet either way. DST_SEL 0 (a register), 3 (GDS), 6 and 7 raise.
- EVENT_WRITE: CS_PARTIAL_FLUSH (index 4); THREAD_TRACE_FINISH (index 0) completes the thread traces (sqtt.py);
  PERFCOUNTER_START / STOP / SAMPLE (index 0) change nothing (perfcounters.py).
- COPY_DATA: a register (SRC_SEL 0 or 4) to memory (DST_SEL 2 or 5), one or two dwords: the thread trace's WPTR,
  STATUS and DROPPED_CNTR readback (mesa's ac_sqtt_copy_info_regs).
- ACQUIRE_MEM: COHER_CNTL 0 (gfx11 selects caches by GCR_CNTL), then GCR_CNTL's actions (caches.py) over the whole
  cache whatever COHER_BASE/SIZE and the range modes say.
"""
from __future__ import annotations
import numpy as np

from autogen.amd import nvd, soc21_enum
from emu.ring import RingError, Stalled
from emu.amdgpu.engine import GPUEngine
from emu.amdgpu.gpu import GPUModel
from emu.amdgpu.spi import SHRegisters

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
    self.sh = SHRegisters(gpu.gc, gpu.ip_bases["GC"], gpu.regs.name_of)   # this queue's COMPUTE_* registers
    self.ib: tuple[int, int, int] | None = None   # active indirect buffer: (va, dwords, position)

  def packet(self, words: np.ndarray, pos: int) -> int:
    hdr = int(words[pos])
    if hdr >> 30 != 3:
      raise RingError(f"{self.qname}: PM4 packet of type {hdr >> 30} (header {hdr:#010x}) at ring dword {self.rptr}: only type-3 packets are valid")
    n = ((hdr >> 16) & 0x3FFF) + 1
    if len(words) - pos < n + 1:
      raise RingError(f"{self.qname}: PM4 packet at ring dword {self.rptr} needs {n + 1} dwords, only {len(words) - pos} written")
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
    for i, v in enumerate(p[1:]): self.sh.write(base + i, v, f"{self.qname}: SET_SH_REG")

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
    def bad(msg: str): raise RingError(f"{self.qname}: RELEASE_MEM {msg}")
    event, index, gcr = p[0] & 0x3F, (p[0] >> 8) & 0xF, (p[0] >> 12) & 0xFFF
    dst_sel, int_sel, data_sel = (p[1] >> 16) & 3, (p[1] >> 24) & 7, (p[1] >> 29) & 7
    if p[0] & ~RELEASE_DW1_KNOWN: bad(f"dword 1 {p[0]:#010x} sets reserved bits {p[0] & ~RELEASE_DW1_KNOWN:#x}")
    if p[0] & nvd.PACKET3_RELEASE_MEM_EXECUTE: bad("EXECUTE (a queue phase update) is not modelled")
    if p[1] & ~RELEASE_DW2_KNOWN: bad(f"dword 2 {p[1]:#010x} sets reserved bits {p[1] & ~RELEASE_DW2_KNOWN:#x}")
    if index not in RELEASE_EVENTS: bad(f"event index {index}: a compute queue releases at end of pipe (5) or end of shader (6)")
    if event not in RELEASE_EVENTS[index]:
      bad(f"event {EVENT_NAMES.get(event, event)} with event index {index} is not {('an end-of-pipe', 'an end-of-shader')[index - 5]} "
          f"event of a compute queue (those: {', '.join(EVENT_NAMES[e] for e in RELEASE_EVENTS[index])})")
    if index == EVENT_INDEX_EOS and gcr: bad(f"{EVENT_NAMES[event]} (end of shader) with cache actions {gcr << 12:#x}: they are not modelled")
    actions = gcr_actions(gcr << 12, RELEASE_GCR, bad)
    if dst_sel > 1: bad(f"DST_SEL {dst_sel} (a queue write pointer) is not modelled: 0 (memory) and 1 (through L2) are")
    if data_sel and data_sel not in DATA_BYTES: bad(f"DATA_SEL {data_sel} is {'GDS data (not modelled)' if data_sel == 5 else 'reserved'}")
    if int_sel not in (0, 1, 2, 3): bad(f"INT_SEL {int_sel} (a conditional interrupt) is not modelled")
    if int_sel == 1 and data_sel: bad(f"INT_SEL 1 (interrupt only) with DATA_SEL {data_sel}: the interrupt-only release writes no data")
    # at the end of pipe every earlier dispatch is done (they run to completion in order); then the caches, the write
    # (after which INT_SEL 2 raises the interrupt), as the packet says
    self.gpu.shader_memory.perform("RELEASE_MEM", actions)
    if data_sel:
      addr, n = p[2] | p[3] << 32, DATA_BYTES[data_sel]
      if addr % n: bad(f"address {addr:#x} is not {n}-byte aligned for DATA_SEL {data_sel}")
      value = self.gpu.clock() if data_sel in (DATA_SEL_GPU_CLOCK, DATA_SEL_SYS_CLOCK) else p[4] | p[5] << 32
      self.mem.write(addr, (value & ((1 << 8 * n) - 1)).to_bytes(n, "little"))
    if int_sel in (1, 2): self.gpu.interrupt("CP_EOP", p[6], self.qname)

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
    if (mem_space, operation) != (1, 0):
      raise RingError(f"{self.qname}: WAIT_REG_MEM64 is modelled on memory only (mem_space 1, operation 0), got {mem_space}, {operation}")
    if p[1] & 7: raise RingError(f"{self.qname}: WAIT_REG_MEM64 address {p[2] << 32 | p[1]:#x} is not 8-byte aligned")
    value = int.from_bytes(self.mem.read(p[1] | p[2] << 32, 8), "little")
    if not COMPARE[func](value & (p[5] | p[6] << 32), p[3] | p[4] << 32): raise Stalled

  def _write_data(self, p: list[int]) -> None:
    if len(p) < 4: raise RingError(f"{self.qname}: WRITE_DATA takes a control dword, an address and at least one data dword, got {len(p)} dwords")
    dst_sel, engine = (p[0] >> 8) & 0xF, p[0] >> 30
    if p[0] & ~WRITE_DATA_KNOWN: raise RingError(f"{self.qname}: WRITE_DATA control {p[0]:#010x} sets reserved bits {p[0] & ~WRITE_DATA_KNOWN:#x}")
    if dst_sel not in WRITE_DATA_MEMORY:
      raise RingError(f"{self.qname}: WRITE_DATA DST_SEL {dst_sel} is not modelled (1 memory sync, 2 through L2, 5 memory async are)")
    if engine: raise RingError(f"{self.qname}: WRITE_DATA ENGINE_SEL {engine}: a compute queue has only the ME (0)")
    addr = p[1] | p[2] << 32
    if addr & 3: raise RingError(f"{self.qname}: WRITE_DATA address {addr:#x} is not dword aligned")
    data = np.array(p[3:], np.uint32)
    if p[0] & nvd.WR_ONE_ADDR:
      for d in data: self.mem.write(addr, d.tobytes())
    else: self.mem.write(addr, data.tobytes())

  def _acquire_mem(self, p: list[int]) -> None:
    # gfx10+ layout: COHER_CNTL (unused: 0), COHER_SIZE, COHER_SIZE_HI [7:0], COHER_BASE_LO, COHER_BASE_HI [23:0],
    # POLL_INTERVAL [15:0], GCR_CNTL [18:0] (nvd.h PACKET3_ACQUIRE_MEM_GCR_CNTL_*)
    if len(p) != 7: raise RingError(f"{self.qname}: ACQUIRE_MEM takes 7 payload dwords, got {len(p)}")
    def bad(msg: str): raise RingError(f"{self.qname}: ACQUIRE_MEM {msg}")
    if p[0]: bad(f"COHER_CNTL {p[0]:#x}: gfx11 selects the caches by GCR_CNTL (dword 7); dword 1 must be 0")
    if p[2] >> 8 or p[4] >> 24 or p[5] >> 16: bad("sets reserved bits of COHER_SIZE_HI, COHER_BASE_HI or POLL_INTERVAL")
    if p[6] & nvd.PACKET3_ACQUIRE_MEM_GCR_RANGE_IS_PA: bad("GCR_CNTL.RANGE_IS_PA (a physical address range) is not modelled")
    self.gpu.shader_memory.perform("ACQUIRE_MEM", gcr_actions(p[6], ACQUIRE_GCR, bad))

  def _event_write(self, p: list[int]) -> None:
    event, index = p[0] & 0x3F, (p[0] >> 8) & 0xF
    if (event, index) == (soc21_enum.THREAD_TRACE_FINISH, 0): return self.gpu.sqtt.finish()
    if (event, index) in PERFCOUNTER_EVENTS: return   # the counters are read directly (perfcounters.py)
    if (event, index) != (CS_PARTIAL_FLUSH, 4):
      raise RingError(f"{self.qname}: EVENT_WRITE event {event} index {index} is not modelled (only CS_PARTIAL_FLUSH, "
                      "THREAD_TRACE_FINISH and PERFCOUNTER_START/STOP/SAMPLE)")
    # dispatches run to completion before the next packet, so the partial flush is already done

  def _copy_data(self, p: list[int]) -> None:
    # COPY_DATA (nvd.h COPY_DATA_*): control SRC_SEL [3:0], DST_SEL [11:8], COUNT_SEL [16], WR_CONFIRM [20]; source
    # address lo/hi, destination address lo/hi. Modelled: a register (SRC_SEL 0, or 4: a performance counter register)
    # to memory (DST_SEL 2 through L2, 5 memory), 32 or 64 bits (COUNT_SEL: the register and the next one)
    if len(p) != 5: raise RingError(f"{self.qname}: COPY_DATA takes 5 payload dwords, got {len(p)}")
    src, dst, count = p[0] & 0xF, (p[0] >> 8) & 0xF, (p[0] >> 16) & 1
    if p[0] & ~COPY_DATA_KNOWN:
      raise RingError(f"{self.qname}: COPY_DATA control {p[0]:#010x} sets bits {p[0] & ~COPY_DATA_KNOWN:#x} that are not modelled")
    if src not in (0, 4): raise RingError(f"{self.qname}: COPY_DATA SRC_SEL {src} is not modelled (0 and 4, a register, are)")
    if dst not in (2, 5): raise RingError(f"{self.qname}: COPY_DATA DST_SEL {dst} is not modelled (2 and 5, memory, are)")
    addr = p[3] | p[4] << 32
    if addr & (4 << count) - 1: raise RingError(f"{self.qname}: COPY_DATA destination {addr:#x} is not {4 << count}-byte aligned")
    reg = p[1] & 0x3FFFF
    value = self.gpu.regs.read(reg) | (self.gpu.regs.read(reg + 1) << 32 if count else 0)
    self.mem.write(addr, value.to_bytes(4 << count, "little"))

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


def gcr_actions(gcr: int, layout: dict[str, tuple[int, int]], bad) -> list[str]:
  """The cache actions a GCR field asks for, by name (range modes count as the whole cache: the model invalidates all)."""
  known = sum(((1 << w) - 1) << s for s, w in layout.values())
  if gcr & ~known: bad(f"GCR bits {gcr & ~known:#x} are reserved")
  f = {name: (gcr >> s) & ((1 << w) - 1) for name, (s, w) in layout.items()}
  if f.get("GL2_DISCARD"): bad("GL2_DISCARD (dropping dirty L2 lines unwritten) is not modelled")
  if f["SEQ"] == 3: bad("GCR SEQ 3 is reserved (0 parallel, 1 forward, 2 reverse)")
  if "GLI_INV" not in layout and f["GL2_RANGE"]: bad(f"GL2_RANGE {f['GL2_RANGE']}: a release has no address range")
  return [name for name, v in f.items() if v and name.endswith(("_INV", "_WB"))]


# GCR fields: ACQUIRE_MEM's GCR_CNTL and RELEASE_MEM's dword-1 copy (bits 23:12, without GLI/GLK/GL1_RANGE), (shift, width)
ACQUIRE_GCR = {"GLI_INV": (0, 2), "GL1_RANGE": (2, 2), "GLM_WB": (4, 1), "GLM_INV": (5, 1), "GLK_WB": (6, 1), "GLK_INV": (7, 1),
               "GLV_INV": (8, 1), "GL1_INV": (9, 1), "GL2_US": (10, 1), "GL2_RANGE": (11, 2), "GL2_DISCARD": (13, 1),
               "GL2_INV": (14, 1), "GL2_WB": (15, 1), "SEQ": (16, 2), "RANGE_IS_PA": (18, 1)}
RELEASE_GCR = {"GLM_WB": (12, 1), "GLM_INV": (13, 1), "GLV_INV": (14, 1), "GL1_INV": (15, 1), "GL2_US": (16, 1),
               "GL2_RANGE": (17, 2), "GL2_DISCARD": (19, 1), "GL2_INV": (20, 1), "GL2_WB": (21, 1), "SEQ": (22, 2)}
EVENT_INDEX_EOP, EVENT_INDEX_EOS = 5, 6     # RELEASE_MEM event index: end of pipe (*_TS events), end of shader (*_DONE)
RELEASE_EVENTS = {EVENT_INDEX_EOP: (soc21_enum.CACHE_FLUSH_TS, soc21_enum.CACHE_FLUSH_AND_INV_TS_EVENT, soc21_enum.BOTTOM_OF_PIPE_TS),
                  EVENT_INDEX_EOS: (soc21_enum.CS_DONE,)}   # the graphics ones (PS_DONE, FLUSH_AND_INV_CB_DATA_TS, ...) excluded
EVENT_NAMES = {v: k for k, v in vars(soc21_enum).items() if k in ("CACHE_FLUSH_TS", "CACHE_FLUSH_AND_INV_TS_EVENT", "BOTTOM_OF_PIPE_TS",
                                                           "CS_DONE", "PS_DONE", "CS_PARTIAL_FLUSH", "FLUSH_AND_INV_CB_DATA_TS")}
# RELEASE_MEM DATA_SEL: 0 none, 1 low 32 bits of the data, 2 64-bit data, 3 64-bit GPU clock, 4 64-bit system clock
# (the model has one 100 MHz counter for both); 5 GDS data; 6-7 reserved
DATA_SEL_GPU_CLOCK, DATA_SEL_SYS_CLOCK = 3, 4
DATA_BYTES = {1: 4, 2: 8, DATA_SEL_GPU_CLOCK: 8, DATA_SEL_SYS_CLOCK: 8}
# RELEASE_MEM dword 1: EVENT_TYPE [5:0], EVENT_INDEX [11:8], GCR [23:12], CACHE_POLICY [26:25], EXECUTE [28];
# dword 2: DST_SEL [17:16], INT_SEL [26:24], DATA_SEL [31:29]
RELEASE_DW1_KNOWN = 0x3F | 0xF << 8 | 0xFFF << 12 | 3 << 25 | nvd.PACKET3_RELEASE_MEM_EXECUTE
RELEASE_DW2_KNOWN = 3 << 16 | 7 << 24 | 7 << 29
# WRITE_DATA control (nvd.h WRITE_DATA_*): DST_SEL [11:8], WR_ONE_ADDR [16], WR_CONFIRM [20], CACHE_POLICY [26:25],
# ENGINE_SEL [31:30]; DST_SEL 1 memory (sync), 2 TC/L2, 5 memory (async)
WRITE_DATA_KNOWN = 0xF << 8 | nvd.WR_ONE_ADDR | nvd.WR_CONFIRM | 3 << 25 | 3 << 30
WRITE_DATA_MEMORY = (1, 2, 5)
COPY_DATA_KNOWN = 0xF | 0xF << 8 | 1 << 16 | 1 << 20
PERFCOUNTER_EVENTS = {(soc21_enum.PERFCOUNTER_START, 0), (soc21_enum.PERFCOUNTER_STOP, 0), (soc21_enum.PERFCOUNTER_SAMPLE, 0)}


HANDLERS = {nvd.PACKET3_NOP: PM4Engine._nop, nvd.PACKET3_SET_SH_REG: PM4Engine._set_sh_reg,
            nvd.PACKET3_SET_UCONFIG_REG: PM4Engine._set_uconfig_reg, nvd.PACKET3_DISPATCH_DIRECT: PM4Engine._dispatch_direct,
            nvd.PACKET3_RELEASE_MEM: PM4Engine._release_mem, nvd.PACKET3_WAIT_REG_MEM: PM4Engine._wait_reg_mem,
            nvd.PACKET3_ACQUIRE_MEM: PM4Engine._acquire_mem, nvd.PACKET3_EVENT_WRITE: PM4Engine._event_write,
            nvd.PACKET3_INDIRECT_BUFFER: PM4Engine._indirect_buffer, nvd.PACKET3_WAIT_REG_MEM64: PM4Engine._wait_reg_mem64,
            nvd.PACKET3_WRITE_DATA: PM4Engine._write_data, nvd.PACKET3_COPY_DATA: PM4Engine._copy_data}
