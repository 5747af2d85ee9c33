"""The Adreno command processor (CP) of the KGSL model: it runs the indirect buffers GPU_COMMAND submits, in order,
on one thread, reading and writing through the model's GPU address map.

Packets (mesa adreno_pm4.xml via autogen.adreno; headers as mesa's cffdec.h checks them, parity included):
  type 4  register writes into the register file; a register outside the A6XX domain is an error;
  type 7  CP_NOP (skipped), CP_WAIT_FOR_IDLE and CP_WAIT_MEM_WRITES (no payload; a serial CP is always idle and its
          writes done), CP_EVENT_WRITE (a6xx: CACHE_FLUSH_TS with address and value, which writes the value once
          earlier writes are flushed; CACHE_FLUSH / CACHE_INVALIDATE without; a7xx CP_EVENT_WRITE7: the one-dword
          event form only), CP_MEM_WRITE, CP_REG_TO_MEM of the 64-bit always-on counter (19.2 MHz, from the host's
          monotonic clock), CP_WAIT_REG_MEM on memory (every cp_cond_function, unsigned or SIGNED_COMPARE, masked;
          the CP stalls until it holds), CP_MEMCPY, CP_LOAD_STATE6(_FRAG/_GEOM) (the state read from memory and kept),
          CP_EXEC_CS (refused: the ir3 executor skeleton, emu/kgsl/ir3.py, is not wired to the compute state).
Any other packet type or opcode, a parity error, a payload of the wrong length, a field the model does not act on
set (the event TIMESTAMP/IRQ bits, CP_REG_TO_MEM ACCUMULATE, register polling, WRITE_MEMORY) or an unmapped address
stops the context with a fault naming it (KGSL then reports the context reset).
Not modelled: caches (memory is coherent, so flushes and invalidates only check their encoding, and the objects'
cache modes change nothing), preemption,
the ringbuffer the kernel wraps IBs in, IB chaining (CP_INDIRECT_BUFFER inside an IB).
"""
from __future__ import annotations
import array, threading, time
from collections import deque
from typing import Callable

import autogen.adreno as A

AO_HZ = 19_200_000
_OPCODES = {v: k for k, v in vars(A).items() if k.startswith("CP_") and isinstance(v, int) and v < 0x80}
_REGS = {v: k.removeprefix("REG_A6XX_") for k, v in vars(A).items() if k.startswith("REG_A6XX_") and isinstance(v, int)
         and not k.endswith(("_STRIDE", "_LENGTH"))}


def bits(v: int, f: tuple[int, int]) -> int:
  hi, lo = f
  return v >> lo & ((1 << (hi - lo + 1)) - 1)


def odd_parity(v: int) -> int: return (v.bit_count() + 1) & 1


def always_on() -> int:
  """The always-on counter: 19.2 MHz ticks of the host's monotonic clock."""
  return time.monotonic_ns() * 24 // 1250


class CPFault(Exception):
  """A packet the CP rejects, or an access to an address the context has not mapped."""


class Stopped(Exception):
  """The model is shutting down while the CP stalls."""


class Dropped(Exception):
  """The context of the submission the CP stalls in was destroyed: the rest of it is not run."""


def _compare(function: int, value: int, ref: int, signed: bool) -> bool:
  if signed: value, ref = (value ^ 1 << 31) - (1 << 31), (ref ^ 1 << 31) - (1 << 31)
  return {A.WRITE_ALWAYS: True, A.WRITE_LT: value < ref, A.WRITE_LE: value <= ref, A.WRITE_EQ: value == ref,
          A.WRITE_NE: value != ref, A.WRITE_GE: value >= ref, A.WRITE_GT: value > ref}[function]


class CommandProcessor:
  """`translate(va, n, write=False)` -> a memoryview of n bytes of GPU memory (raises CPFault when unmapped, or for a
  write to read-only memory);
  `retire(ctx, ts)` / `fault(ctx, message)` report each submission's end."""
  def __init__(self, gen: int, translate: Callable[..., memoryview], retire: Callable[[int, int], None],
               fault: Callable[[int, str], None]):
    self.gen, self.translate, self.retire, self.fault = gen, translate, retire, fault
    self.regs: dict[int, int] = {}
    self.state: dict[tuple[int, int], bytes] = {}           # (state block, state type) -> what CP_LOAD_STATE6 loaded
    self.pending: deque[tuple[int, int, list[tuple[int, int]]]] = deque()   # (context, timestamp, [(IB va, bytes)])
    self.cv = threading.Condition()
    self.stopping = False
    self.stalled_on: str | None = None                      # what a CP_WAIT_REG_MEM waits for, while it does
    self.current: int | None = None                         # the context of the submission being run
    self.dropped = False                                    # that context was dropped meanwhile
    self.thread = threading.Thread(target=self._run, name="kgsl-cp", daemon=True)
    self.thread.start()

  def submit(self, ctx: int, ts: int, ibs: list[tuple[int, int]]) -> None:
    with self.cv:
      self.pending.append((ctx, ts, ibs))
      self.cv.notify_all()

  def drop(self, ctx: int) -> None:
    """Forget the context's queued submissions (it faulted or was destroyed); one stalled in a wait ends there."""
    with self.cv:
      self.pending = deque(p for p in self.pending if p[0] != ctx)
      if self.current == ctx: self.dropped = True
      self.cv.notify_all()

  def stop(self) -> None:
    with self.cv:
      self.stopping = True
      self.cv.notify_all()
    self.thread.join()

  def _run(self) -> None:
    while True:
      with self.cv:
        while not self.pending and not self.stopping: self.cv.wait()
        if self.stopping: return
        ctx, ts, ibs = self.pending[0]
        self.current, self.dropped = ctx, False
      try:
        for va, n in ibs: self.execute(va, n)
      except Stopped: return
      except Dropped: continue
      except CPFault as e:
        self.drop(ctx)
        self.fault(ctx, f"timestamp {ts}: {e}")
        continue
      with self.cv:
        if self.pending and self.pending[0][1:] == (ts, ibs): self.pending.popleft()
      self.retire(ctx, ts)

  # --- packets
  def execute(self, va: int, nbytes: int) -> None:
    words = memoryview(bytes(self.translate(va, nbytes))).cast("I")
    i = 0
    while i < len(words):
      hdr, at = words[i], va + 4 * i
      kind = hdr >> 28
      if kind == 4:
        n, reg = hdr & 0x7F, hdr >> 8 & 0x7FFFF
        if hdr >> 7 & 1 != odd_parity(n) or hdr >> 27 & 1 != odd_parity(reg):
          raise CPFault(f"type-4 header {hdr:#010x} at {at:#x} fails its parity check")
        payload = words[i + 1:i + 1 + n]
        if len(payload) < n: raise CPFault(f"type-4 packet at {at:#x} runs past the end of its IB")
        for k, v in enumerate(payload):
          if reg + k not in _REGS: raise CPFault(f"type-4 write to register {reg + k:#x}, which is not in the A6XX register domain")
          self.regs[reg + k] = v
      elif kind == 7:
        n, op = hdr & 0x3FFF, hdr >> 16 & 0x7F
        if hdr >> 24 & 0xF or hdr >> 15 & 1 != odd_parity(n) or hdr >> 23 & 1 != odd_parity(op):
          raise CPFault(f"type-7 header {hdr:#010x} at {at:#x} fails its parity check or has reserved bits 27:24 set")
        payload = list(words[i + 1:i + 1 + n])
        if len(payload) < n: raise CPFault(f"type-7 packet at {at:#x} runs past the end of its IB")
        self.opcode(op, payload, at)
      else: raise CPFault(f"packet header {hdr:#010x} at {at:#x} is type {kind}: a6xx/a7xx IBs hold type-4 and type-7 packets")
      i += 1 + n

  def opcode(self, op: int, p: list[int], at: int) -> None:
    name = _OPCODES.get(op, f"opcode {op:#x}")
    def need(*counts: int) -> None:
      if len(p) not in counts: raise CPFault(f"{name} at {at:#x} carries {len(p)} dwords, not {' or '.join(map(str, counts))}")
    if op == A.CP_NOP: return
    if op in (A.CP_WAIT_FOR_IDLE, A.CP_WAIT_MEM_WRITES): return need(0)
    if op == A.CP_EVENT_WRITE: return self._event(p, at, need)
    if op == A.CP_MEM_WRITE:
      if len(p) < 3: raise CPFault(f"CP_MEM_WRITE at {at:#x} carries no data")
      self._write(p[0] | p[1] << 32, p[2:])
    elif op == A.CP_REG_TO_MEM:
      need(3)
      reg, cnt, b64, acc = (bits(p[0], f) for f in (A.CP_REG_TO_MEM_0_REG, A.CP_REG_TO_MEM_0_CNT, A.CP_REG_TO_MEM_0_64B,
                                                    A.CP_REG_TO_MEM_0_ACCUMULATE))
      if (reg, cnt, b64, acc) != (A.REG_A6XX_CP_ALWAYS_ON_COUNTER_LO, 2, 1, 0):
        raise CPFault(f"CP_REG_TO_MEM of register {reg:#x} (CNT {cnt}, 64B {b64}, ACCUMULATE {acc}): the model reads only "
                      "the 64-bit CP_ALWAYS_ON_COUNTER (CNT 2, 64B, no ACCUMULATE)")
      t = always_on()
      self._write(p[1] | p[2] << 32, [t & 0xFFFFFFFF, t >> 32])
    elif op == A.CP_WAIT_REG_MEM:
      need(6)
      self._wait_reg_mem(p, at)
    elif op == A.CP_MEMCPY:
      need(5)
      n, src, dst = p[0], p[1] | p[2] << 32, p[3] | p[4] << 32
      if src % 4 or dst % 4: raise CPFault(f"CP_MEMCPY of {src:#x} to {dst:#x}: addresses must be dword-aligned")
      if n: self.translate(dst, 4 * n, True)[:] = bytes(self.translate(src, 4 * n))
    elif op in (A.CP_LOAD_STATE6_FRAG, A.CP_LOAD_STATE6_GEOM, A.CP_LOAD_STATE6):
      self._load_state(p, at, name)
    elif op == A.CP_EXEC_CS:
      need(4)
      raise CPFault(f"CP_EXEC_CS of {p[1]}x{p[2]}x{p[3]} workgroups at {at:#x}: running ir3 kernels is not modelled (the "
                    "ir3 executor, emu/kgsl/ir3.py, runs straight-line cat0-cat2 code and is not wired to the compute state)")
    else: raise CPFault(f"{name} at {at:#x} is not a packet the KGSL model executes")

  def _write(self, addr: int, dwords: list[int]) -> None:
    if addr % 4: raise CPFault(f"write to {addr:#x}: the CP writes dword-aligned memory")
    self.translate(addr, 4 * len(dwords), True)[:] = array.array("I", dwords).tobytes()

  def _event(self, p: list[int], at: int, need) -> None:
    ev = bits(p[0], A.CP_EVENT_WRITE_0_EVENT) if p else None
    need(1, 4) if self.gen == 6 else need(1)
    if p[0] & ~0xFF:
      raise CPFault(f"CP_EVENT_WRITE{'7' if self.gen == 7 else ''} at {at:#x} sets bits {p[0] & ~0xFF:#x} beyond EVENT "
                    "(TIMESTAMP/IRQ, or a7xx write fields): not modelled")
    ts_events, plain = (A.CACHE_FLUSH_TS,), (A.CACHE_FLUSH, A.CACHE_INVALIDATE)
    if self.gen == 7:
      if ev not in ts_events + plain: raise CPFault(f"CP_EVENT_WRITE7 event {ev} at {at:#x} is not one the model executes")
      return
    if ev in ts_events and len(p) == 4: self._write(p[1] | p[2] << 32, [p[3]])
    elif ev in ts_events: raise CPFault(f"CP_EVENT_WRITE CACHE_FLUSH_TS at {at:#x} without its address and value")
    elif ev in plain and len(p) == 1: return
    else: raise CPFault(f"CP_EVENT_WRITE event {ev} with {len(p)} dwords at {at:#x} is not one the model executes")

  def _wait_reg_mem(self, p: list[int], at: int) -> None:
    fn, signed, mem, scratch, wr = (bits(p[0], f) for f in (
      A.CP_WAIT_REG_MEM_0_FUNCTION, A.CP_WAIT_REG_MEM_0_SIGNED_COMPARE, A.CP_WAIT_REG_MEM_0_POLL_MEMORY,
      A.CP_WAIT_REG_MEM_0_POLL_SCRATCH, A.CP_WAIT_REG_MEM_0_WRITE_MEMORY))
    if (mem, scratch, wr) != (1, 0, 0) or p[0] & ~0x11F or fn > A.WRITE_GT:
      raise CPFault(f"CP_WAIT_REG_MEM at {at:#x} with flags {p[0]:#x}: the model polls memory only (POLL_MEMORY, a "
                    "cp_cond_function, optional SIGNED_COMPARE)")
    addr, ref, mask = p[1] | p[2] << 32, p[3], p[4]
    if addr % 4: raise CPFault(f"CP_WAIT_REG_MEM on {addr:#x}: the address must be dword-aligned")
    word = self.translate(addr, 4).cast("I")
    nap = 0.0
    while not _compare(fn, word[0] & mask, ref & mask, bool(signed)):
      self.stalled_on = f"CP_WAIT_REG_MEM at {at:#x}: [{addr:#x}] & {mask:#x} (now {word[0]:#x}) vs {ref:#x}"
      with self.cv:
        if self.stopping: raise Stopped
        if self.dropped: raise Dropped
        self.cv.wait(nap)
      nap = min(nap * 2 + 1e-5, 1e-3)
    self.stalled_on = None

  def _load_state(self, p: list[int], at: int, name: str) -> None:
    if not p: raise CPFault(f"{name} at {at:#x} carries no dwords")
    typ, src, block, units = (bits(p[0], f) for f in (A.CP_LOAD_STATE6_0_STATE_TYPE, A.CP_LOAD_STATE6_0_STATE_SRC,
                                                       A.CP_LOAD_STATE6_0_STATE_BLOCK, A.CP_LOAD_STATE6_0_NUM_UNIT))
    # unit sizes (reference §3.2 step 7): shader code in 128-byte units, constants in vec4s (16 bytes)
    size = units * (128 if typ == A.ST6_SHADER else 16)
    if src == A.SS6_INDIRECT:
      if len(p) != 3: raise CPFault(f"{name} SS6_INDIRECT at {at:#x} carries {len(p)} dwords, not 3")
      data = bytes(self.translate(p[1] | p[2] << 32, size))
    elif src == A.SS6_DIRECT:
      if len(p) != 3 + size // 4: raise CPFault(f"{name} SS6_DIRECT at {at:#x}: {len(p) - 3} data dwords for {units} units")
      data = array.array("I", p[3:]).tobytes()
    else: raise CPFault(f"{name} at {at:#x} with STATE_SRC {src}: only SS6_DIRECT and SS6_INDIRECT are modelled")
    self.state[(block, typ)] = data
