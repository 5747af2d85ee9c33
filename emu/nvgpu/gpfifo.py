"""A channel's host (PBDMA): GPFIFO entries from USERD GPPut, the pushbuffer segments they point at, and the host
class methods (clc56f.h / clc86f.h, which agree on every field used here; reference nv_driver.md section 4).

- GPFIFO: `entries` 8-byte entries at the channel's GPU VA; USERD GPPut (0x8c) is the next entry software writes,
  GPGet (0x88) the next the engine reads (both entry indices modulo the ring). ENTRY0.GET 31:2 | ENTRY1.GET_HI 7:0
  is the segment's address, ENTRY1.LENGTH 30:10 its dwords; a zero-length entry is a control entry (only OPCODE NOP
  is modelled). LEVEL (main or subroutine) and SYNC do not change what a serial model does.
- Method headers: SEC_OP 31:29 INC_METHOD, NON_INC_METHOD, ONE_INC, IMMD_DATA_METHOD (data in 28:16), END_PB_SEGMENT;
  SEC_OP 0 with TERT_OP 0 and no count (header 0) is a NOP. COUNT 28:16, SUBCHANNEL 15:13, ADDRESS 11:0 (dwords).
- Methods below 0x100 are host methods on every subchannel; SET_OBJECT (0) binds a subchannel to one of the channel's
  engine objects; other methods go to the bound class (a subchannel with none, or a method the class model does not
  implement, stops the channel with an error naming both).
- SEM_ADDR_HI holds address bits 39:32 (clc56f.h) or 56:32 (clc86f.h). SEM_EXECUTE: RELEASE writes SEM_PAYLOAD (32- or 64-bit by PAYLOAD_SIZE) at
SEM_ADDR, with RELEASE_TIMESTAMP the
  PTIMER ns at +8 (a 16-byte semaphore); ACQUIRE (==), ACQ_STRICT_GEQ (>=), ACQ_CIRC_GEQ (wrapping >=, in the payload's
  width) and ACQ_AND (& != 0) wait until the semaphore satisfies them. REDUCTION IADD adds the payload (signed and
  unsigned agree modulo the width) and, being a release, takes RELEASE_TIMESTAMP too (dev_pbdma.ref.txt): one lock makes
  every channel's semaphore read-modify-write atomic against the others' releases (a CPU store is not ordered by it).
  NON_STALL_INTERRUPT counts an interrupt.
A channel that stops (a bad method, a fault) gets RM's error notification: NvNotification (nvgputypes.h) at the start
of its error notifier, timeStamp, info32 = the error (nverror.h: ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT for an MMU fault,
ROBUST_CHANNEL_GR_EXCEPTION otherwise), info16 0, then a nonzero status (RM's exact status value is not in the facts:
the model writes 1).
Not modelled: ACQ_NOR and the reductions other than IADD (refused), subdevice masks, CRC entries, the ACQUIRE_SWITCH_TSG time-slicing.
"""
from __future__ import annotations
import struct, threading, time
from typing import Callable

import numpy as np

from autogen.nv import classes as cl
from emu.nvgpu.rm import Channel, GPFIFO_ENTRY
from emu.ring import Memory, RingEngine, RingError, Stalled

GPGET, GPPUT = 0x88, 0x8c                 # Nvc86fControl_struct (USERD)
HOST_METHODS = 0x100                      # methods below this go to host, whatever the subchannel
SEM = ("SEM_ADDR_LO", "SEM_ADDR_HI", "SEM_PAYLOAD_LO", "SEM_PAYLOAD_HI")
ROBUST_CHANNEL_GR_EXCEPTION, ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT = 13, 31   # nverror.h (580.142)
NOTIFICATION = struct.Struct("<QIHH")     # NvNotification: timeStamp, info32, info16, status
HOST_NAMES = {getattr(cl, f"NVC56F_{n}"): n for n in ("SET_OBJECT", "NOP", "NON_STALL_INTERRUPT", "WFI", "SEM_EXECUTE", *SEM)}

SEMAPHORES = threading.Lock()         # semaphore releases and reductions of every channel, one at a time


def bits(v: int, f: tuple[int, int]) -> int:
  """Field (hi, lo) of a method value, as autogen.nv gives them."""
  return v >> f[1] & ((1 << (f[0] - f[1] + 1)) - 1)


def acquired(op: int, value: int, payload: int, width: int) -> bool:
  if op == cl.NVC56F_SEM_EXECUTE_OPERATION_ACQUIRE: return value == payload
  if op == cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ: return value >= payload
  if op == cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ: return (value - payload) % (1 << width) < 1 << (width - 1)
  return value & payload != 0            # ACQ_AND


class ClassModel:
  """An engine class bound to a subchannel: `method(addr, value)` executes one method (Stalled to retry it)."""
  name = "class"
  def method(self, addr: int, value: int) -> None: raise NotImplementedError


class GPFIFOEngine(RingEngine):
  unit = GPFIFO_ENTRY                    # the read pointer counts entries

  def __init__(self, ch: Channel, mem: Memory, classes: dict[int, Callable[[GPFIFOEngine], ClassModel]]):
    super().__init__(f"channel {ch.chid}", mem, ch.gpfifo_va, ch.entries * GPFIFO_ENTRY, 0, 0)
    self.ch, self.classes = ch, classes
    # SEM_ADDR_HI.OFFSET: 7:0 in clc56f.h (Ampere), 24:0 in clc86f.h (Hopper)
    self.sem_hi = cl.NVC86F_SEM_ADDR_HI_OFFSET if ch.cls == cl.HOPPER_CHANNEL_GPFIFO_A else cl.NVC56F_SEM_ADDR_HI_OFFSET
    self.userd, self.userd_off = ch.userd
    self.rptr = self._userd(GPGET)
    self.sub: dict[int, ClassModel] = {}
    self.sem = dict.fromkeys(SEM, 0)
    self.resume = self.done = 0          # dwords of the current segment, and of the current header's data, already executed
    self.nonstall = 0                    # NON_STALL_INTERRUPTs raised
    self.error: str | None = None
    self.changed = threading.Condition()

  # --- USERD
  def _userd(self, off: int) -> int:
    return int.from_bytes(self.userd.view[self.userd_off + off:self.userd_off + off + 4], "little")

  def read_wptr(self) -> int:
    put = self._userd(GPPUT)
    if put >= self.ch.entries: raise RingError(f"{self.qname}: GPPut {put} is past the {self.ch.entries}-entry GPFIFO")
    return self.rptr + (put - self.rptr) % self.ch.entries

  def write_rptr(self) -> None:
    self.userd.view[self.userd_off + GPGET:self.userd_off + GPGET + 4] = (self.rptr % self.ch.entries).to_bytes(4, "little")
    with self.changed: self.changed.notify_all()

  def report(self, message: str, address: int | None, kind: str) -> None:
    self.error = message
    if (n := self.ch.error_notifier) is not None and n.view is not None:
      code = ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT if kind == "fault" else ROBUST_CHANNEL_GR_EXCEPTION
      n.view[:NOTIFICATION.size] = NOTIFICATION.pack(time.time_ns(), code, 0, 1)
    with self.changed: self.changed.notify_all()

  def interrupt(self) -> None:
    self.nonstall += 1
    with self.changed: self.changed.notify_all()

  # --- GPFIFO entries
  def packet(self, words: np.ndarray, pos: int) -> int:
    e0, e1 = int(words[pos]), int(words[pos + 1])
    length = bits(e1, cl.NVC56F_GP_ENTRY1_LENGTH)
    if length == 0:
      if (op := bits(e1, cl.NVC56F_GP_ENTRY1_OPCODE)) != cl.NVC56F_GP_ENTRY1_OPCODE_NOP:
        raise RingError(f"{self.qname}: GPFIFO control entry {self.rptr} has opcode {op}; only NOP is modelled")
      return 2
    addr = (e0 & ~3) | bits(e1, cl.NVC56F_GP_ENTRY1_GET_HI) << 32
    seg = np.frombuffer(self.mem.read(addr, length * 4), np.uint32)
    while self.resume < length:
      self.resume += self._header(seg, self.resume, addr)
    self.resume = 0
    return 2

  def _header(self, seg: np.ndarray, i: int, base: int) -> int:
    """Execute the method header at seg[i] and its data; -> dwords used. A Stalled method leaves `resume` at its header
    and `done` at its data dword, so the retry continues with it."""
    h = int(seg[i])
    op, count = bits(h, cl.NVC56F_DMA_SEC_OP), bits(h, cl.NVC56F_DMA_METHOD_COUNT)
    sub, method = bits(h, cl.NVC56F_DMA_METHOD_SUBCHANNEL), bits(h, cl.NVC56F_DMA_METHOD_ADDRESS) << 2
    where = f"{self.qname}: pushbuffer dword {i} at {base + 4 * i:#x}"
    if h == 0: return 1                                          # NOP (SEC_OP GRP0_USE_TERT, TERT_OP INC_METHOD, count 0)
    if op == cl.NVC56F_DMA_SEC_OP_IMMD_DATA_METHOD:
      self._method(sub, method, count)
      return 1
    if op == cl.NVC56F_DMA_SEC_OP_END_PB_SEGMENT: return len(seg) - i
    if op not in (cl.NVC56F_DMA_SEC_OP_INC_METHOD, cl.NVC56F_DMA_SEC_OP_NON_INC_METHOD, cl.NVC56F_DMA_SEC_OP_ONE_INC):
      raise RingError(f"{where}: method header {h:#010x} has SEC_OP {op}, which is not modelled (subdevice masks, reserved)")
    if i + 1 + count > len(seg): raise RingError(f"{where}: method {method:#x} with {count} dwords runs past the {len(seg)}-dword segment")
    for k in range(self.done, count):
      step = k if op == cl.NVC56F_DMA_SEC_OP_INC_METHOD else min(k, 1) if op == cl.NVC56F_DMA_SEC_OP_ONE_INC else 0
      self.done = k                      # a Stalled method is retried from here, the ones before it done
      self._method(sub, method + 4 * step, int(seg[i + 1 + k]))
    self.done = 0
    return 1 + count

  def _method(self, sub: int, addr: int, value: int) -> None:
    if addr == cl.NVC56F_SET_OBJECT and sub:
      cls = bits(value, cl.NVC56F_SET_OBJECT_NVCLASS)
      if cls not in self.ch.engines:
        raise RingError(f"{self.qname}: SET_OBJECT on subchannel {sub} to class {cls:#x}, which the channel has no object of "
                        f"(it has {', '.join(f'{c:#x}' for c in self.ch.engines) or 'none'})")
      if cls not in self.classes: raise RingError(f"{self.qname}: SET_OBJECT to class {cls:#x}: its methods are not modelled")
      self.sub[sub] = self.classes[cls](self)
    elif addr < HOST_METHODS: self._host(addr, value)
    elif sub not in self.sub: raise RingError(f"{self.qname}: method {addr:#x} on subchannel {sub}, which no SET_OBJECT bound")
    else: self.sub[sub].method(addr, value)

  def _host(self, addr: int, value: int) -> None:
    name = HOST_NAMES.get(addr)
    if name is None or name == "SET_OBJECT": raise RingError(f"{self.qname}: host method {addr:#x} of class {self.ch.cls:#x} is not modelled")
    if name in SEM: self.sem[name] = value
    elif name == "NON_STALL_INTERRUPT": self.interrupt()
    elif name == "SEM_EXECUTE": self._sem_execute(value)
    # NOP, WFI: the model runs one method at a time, so everything before has completed

  def _sem_execute(self, v: int) -> None:
    op = bits(v, cl.NVC56F_SEM_EXECUTE_OPERATION)
    wide = bits(v, cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE) == cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT
    addr = (self.sem["SEM_ADDR_LO"] & ~3) | bits(self.sem["SEM_ADDR_HI"], self.sem_hi) << 32
    payload = self.sem["SEM_PAYLOAD_LO"] | (self.sem["SEM_PAYLOAD_HI"] << 32 if wide else 0)
    n = 8 if wide else 4
    red = op == cl.NVC56F_SEM_EXECUTE_OPERATION_REDUCTION
    if red and bits(v, cl.NVC56F_SEM_EXECUTE_REDUCTION) != cl.NVC56F_SEM_EXECUTE_REDUCTION_IADD:
      raise RingError(f"{self.qname}: SEM_EXECUTE reduction {bits(v, cl.NVC56F_SEM_EXECUTE_REDUCTION)} is not modelled (IADD is)")
    release = red or op == cl.NVC56F_SEM_EXECUTE_OPERATION_RELEASE
    stamp = release and bits(v, cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP)
    if addr % (16 if stamp else n):
      raise RingError(f"{self.qname}: semaphore at {addr:#x} is not {16 if stamp else n}-byte aligned", addr)
    if release:
      with SEMAPHORES:
        if red: payload = (int.from_bytes(self.mem.read(addr, n), "little") + payload) & ((1 << 8 * n) - 1)
        self.mem.write(addr, payload.to_bytes(n, "little"))
        if stamp: self.mem.write(addr + 8, time.monotonic_ns().to_bytes(8, "little"))   # the usermode PTIMER's clock
    elif op in (cl.NVC56F_SEM_EXECUTE_OPERATION_ACQUIRE, cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ,
                cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ, cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_AND):
      if not acquired(op, int.from_bytes(self.mem.read(addr, n), "little"), payload, 8 * n):
        raise Stalled
    else: raise RingError(f"{self.qname}: SEM_EXECUTE operation {op} is not modelled (RELEASE, REDUCTION, ACQUIRE, ACQ_STRICT_GEQ, "
                          "ACQ_CIRC_GEQ, ACQ_AND are)")
