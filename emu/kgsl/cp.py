"""The Adreno command processor (CP) of the KGSL model: it runs the indirect buffers GPU_COMMAND submits, reading and
writing through the model's GPU address map.

Ringbuffers and preemption (a6xx and a7xx with ADRENO_PREEMPTION, as the a630 has: adreno-gpulist.h): KGSL keeps
several ringbuffers (emu.kgsl.kernel) and puts a context on the one of its priority level (adreno_dispatch.c
dispatch_get_rb: priority // 4, ringbuffer 0 the highest); each ringbuffer runs its submissions in order. The CP runs
the highest-priority ringbuffer that holds work (adreno_a6xx_preempt.c a6xx_next_ringbuffer), so work on a higher one
preempts a lower one, which resumes where it stopped once the higher ones are empty; a higher ringbuffer that stalls
keeps the CP. Where it switches: at the end of every submission (the CP_CONTEXT_SWITCH_YIELD KGSL ends each with:
a6xx_preemption_post_ibsubmit), and, for contexts created with KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN, inside their IBs
too: the model's preemption points there are packet boundaries and each poll of a CP_WAIT_REG_MEM that does not hold.

Packets (mesa adreno_pm4.xml via autogen.adreno; headers as mesa's cffdec.h checks them, parity included):
  type 4  register writes into the register file; a register outside the A6XX domain is an error;
  type 7  CP_NOP (skipped), CP_WAIT_FOR_IDLE and CP_WAIT_MEM_WRITES (no payload; a serial CP is always idle and its
          writes done), CP_EVENT_WRITE (a6xx: CACHE_FLUSH_TS with address and value, which writes the value once
          earlier writes are flushed; CACHE_FLUSH / CACHE_INVALIDATE without; a7xx CP_EVENT_WRITE7: the one-dword
          event form only), CP_MEM_WRITE, CP_REG_TO_MEM of the 64-bit always-on counter (19.2 MHz, from the host's
          monotonic clock), CP_WAIT_REG_MEM on memory (every cp_cond_function, unsigned or SIGNED_COMPARE, masked;
          the ringbuffer stalls until it holds), CP_MEMCPY, CP_LOAD_STATE6(_FRAG/_GEOM) (the state read from memory and
          kept; constants at DST_OFF), CP_EXEC_CS (the compute dispatch the registers and state describe: emu.kgsl.sp, on the
          ir3 core emu.kgsl.ir3; it runs to completion before the next packet).
Any other packet type or opcode, a parity error, a payload of the wrong length, a field the model does not act on
set (the event TIMESTAMP/IRQ bits, CP_REG_TO_MEM ACCUMULATE, register polling, WRITE_MEMORY) or an unmapped address
stops the context with a fault naming it (KGSL then reports the context reset).
Not modelled: caches (memory is coherent, so flushes and invalidates only check their encoding, and the objects'
cache modes change nothing), the time a switch takes, the ringbuffer the kernel wraps IBs in, IB chaining
(CP_INDIRECT_BUFFER inside an IB).
"""
from __future__ import annotations
import array, threading, time
from collections import deque
from typing import Callable, Generator

from autogen import adreno
from emu.kgsl.sp import DispatchError, exec_cs

AO_HZ = 19_200_000
_OPCODES = {v: k for k, v in vars(adreno).items() if k.startswith("CP_") and isinstance(v, int) and v < 0x80}
_REGS = {v: k.removeprefix("REG_A6XX_") for k, v in vars(adreno).items() if k.startswith("REG_A6XX_") and isinstance(v, int)
         and not k.endswith(("_STRIDE", "_LENGTH"))}
_REGS.update({r + 1: _REGS[r] + "_HI" for r in adreno.REG64_A6XX})


def bits(v: int, f: tuple[int, int]) -> int:
  hi, lo = f
  return v >> lo & ((1 << (hi - lo + 1)) - 1)


def odd_parity(v: int) -> int: return (v.bit_count() + 1) & 1


def always_on() -> int:
  """The always-on counter: 19.2 MHz ticks of the host's monotonic clock."""
  return time.monotonic_ns() * 24 // 1250


class CPFault(Exception):
  """A packet the CP rejects, or an access to an address the context has not mapped."""


def _compare(function: int, value: int, ref: int, signed: bool) -> bool:
  if signed: value, ref = (value ^ 1 << 31) - (1 << 31), (ref ^ 1 << 31) - (1 << 31)
  return {adreno.WRITE_ALWAYS: True, adreno.WRITE_LT: value < ref, adreno.WRITE_LE: value <= ref, adreno.WRITE_EQ: value == ref,
          adreno.WRITE_NE: value != ref, adreno.WRITE_GE: value >= ref, adreno.WRITE_GT: value > ref}[function]


PREEMPT, STALL = "preempt", "stall"   # what a submission stops at: a preemption point with higher work waiting, a failed poll


class Submission:
  """One GPU_COMMAND on a ringbuffer: its context, timestamp, IBs [(va, bytes)], and whether the CP may switch
  ringbuffers inside it (KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN)."""
  def __init__(self, ctx: int, ts: int, ibs: list[tuple[int, int]], finegrain: bool):
    self.ctx, self.ts, self.ibs, self.finegrain = ctx, ts, ibs, finegrain


class CommandProcessor:
  """`translate(va, n, write=False)` -> a memoryview of n bytes of GPU memory (raises CPFault when unmapped, or for a
  write to read-only memory);
  `retire(ctx, ts)` / `fault(ctx, message)` report each submission's end."""
  def __init__(self, gen: int, ringbuffers: int, translate: Callable[..., memoryview], retire: Callable[[int, int], None],
               fault: Callable[[int, str], None]):
    self.gen, self.translate, self.retire, self.fault = gen, translate, retire, fault
    self.regs: dict[int, int] = {}
    self.state: dict[tuple[int, int], bytes | bytearray] = {}   # (state block, state type) -> what CP_LOAD_STATE6 loaded
    self.rbs: list[deque[Submission]] = [deque() for _ in range(ringbuffers)]   # 0: the highest priority
    self.cv = threading.Condition()
    self.stopping = False
    self.stalls: dict[int, str] = {}                        # ringbuffer -> the CP_WAIT_REG_MEM it stalls in
    self.thread = threading.Thread(target=self._run, name="kgsl-cp", daemon=True)
    self.thread.start()

  @property
  def stalled_on(self) -> str | None:
    """What CP_WAIT_REG_MEMs the ringbuffers stall in, if any."""
    return "; ".join(f"ringbuffer {rb}: {w}" for rb, w in sorted(self.stalls.items())) or None

  def submit(self, rb: int, ctx: int, ts: int, ibs: list[tuple[int, int]], finegrain: bool) -> None:
    if not 0 <= rb < len(self.rbs): raise ValueError(f"ringbuffer {rb}: the CP has {len(self.rbs)}")
    with self.cv:
      self.rbs[rb].append(Submission(ctx, ts, ibs, finegrain))
      self.cv.notify_all()

  def drop(self, ctx: int) -> None:
    """Forget the context's queued submissions (it faulted or was destroyed); one stalled in a wait ends there."""
    with self.cv:
      for q in self.rbs:
        if any(s.ctx == ctx for s in q):
          kept = [s for s in q if s.ctx != ctx]
          q.clear()
          q.extend(kept)
      self.cv.notify_all()

  def stop(self) -> None:
    with self.cv:
      self.stopping = True
      self.cv.notify_all()
    self.thread.join()

  def _outranked(self, rb: int) -> bool:
    """Does a ringbuffer of higher priority than `rb` hold work?"""
    return any(self.rbs[:rb])

  def _run(self) -> None:
    """Run the highest-priority ringbuffer with work up to its next preemption point, then choose again. A submission
    preempted or stalled there is kept (its generator) and resumes where it stopped."""
    running: dict[int, tuple[Submission, Generator[str, None, None]]] = {}
    held: int | None = None                                 # a ringbuffer stalled where it cannot be preempted
    nap = 0.0
    while True:
      with self.cv:
        while True:
          if self.stopping: return
          for r, (sub, steps) in list(running.items()):     # submissions dropped meanwhile end here
            if not self.rbs[r] or self.rbs[r][0] is not sub:
              steps.close()
              del running[r]
              self.stalls.pop(r, None)
              if held == r: held = None
          rb = held if held is not None else next((r for r, q in enumerate(self.rbs) if q), None)
          if rb is not None: break
          self.cv.wait()
        sub = self.rbs[rb][0]
      if rb not in running: running[rb] = (sub, self._steps(sub, rb))
      try: point = next(running[rb][1])
      except StopIteration:
        del running[rb]
        with self.cv:
          if self.rbs[rb] and self.rbs[rb][0] is sub: self.rbs[rb].popleft()
        held, nap = None, 0.0
        self.retire(sub.ctx, sub.ts)
        continue
      except CPFault as e:
        del running[rb]
        self.stalls.pop(rb, None)
        held, nap = None, 0.0
        self.drop(sub.ctx)
        self.fault(sub.ctx, f"timestamp {sub.ts}: {e}")
        continue
      held = None if sub.finegrain else rb
      if point == STALL:
        with self.cv:
          if held is not None or not self._outranked(rb): self.cv.wait(nap)   # a submit or drop wakes it at once
        nap = min(nap * 2 + 1e-5, 1e-3)
      else: nap = 0.0

  def _steps(self, sub: Submission, rb: int) -> Generator[str, None, None]:
    for va, n in sub.ibs: yield from self.execute(va, n, rb, sub.finegrain)

  # --- packets
  def execute(self, va: int, nbytes: int, rb: int, finegrain: bool) -> Generator[str, None, None]:
    """Run one IB of a submission on ringbuffer `rb`, yielding at its preemption points (see the module docstring)."""
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
        if op == adreno.CP_WAIT_REG_MEM: yield from self._wait_reg_mem(payload, at, rb)
        else: self.opcode(op, payload, at)
      else: raise CPFault(f"packet header {hdr:#010x} at {at:#x} is type {kind}: a6xx/a7xx IBs hold type-4 and type-7 packets")
      i += 1 + n
      if finegrain and self._outranked(rb): yield PREEMPT

  def opcode(self, op: int, p: list[int], at: int) -> None:
    name = _OPCODES.get(op, f"opcode {op:#x}")
    def need(*counts: int) -> None:
      if len(p) not in counts: raise CPFault(f"{name} at {at:#x} carries {len(p)} dwords, not {' or '.join(map(str, counts))}")
    if op == adreno.CP_NOP: return
    if op in (adreno.CP_WAIT_FOR_IDLE, adreno.CP_WAIT_MEM_WRITES): return need(0)
    if op == adreno.CP_EVENT_WRITE: return self._event(p, at, need)
    if op == adreno.CP_MEM_WRITE:
      if len(p) < 3: raise CPFault(f"CP_MEM_WRITE at {at:#x} carries no data")
      self._write(p[0] | p[1] << 32, p[2:])
    elif op == adreno.CP_REG_TO_MEM:
      need(3)
      reg, cnt, b64, acc = (bits(p[0], f) for f in (adreno.CP_REG_TO_MEM_0_REG, adreno.CP_REG_TO_MEM_0_CNT, adreno.CP_REG_TO_MEM_0_64B,
                                                    adreno.CP_REG_TO_MEM_0_ACCUMULATE))
      if (reg, cnt, b64, acc) != (adreno.REG_A6XX_CP_ALWAYS_ON_COUNTER_LO, 2, 1, 0):
        raise CPFault(f"CP_REG_TO_MEM of register {reg:#x} (CNT {cnt}, 64B {b64}, ACCUMULATE {acc}): the model reads only "
                      "the 64-bit CP_ALWAYS_ON_COUNTER (CNT 2, 64B, no ACCUMULATE)")
      t = always_on()
      self._write(p[1] | p[2] << 32, [t & 0xFFFFFFFF, t >> 32])
    elif op == adreno.CP_MEMCPY:
      need(5)
      n, src, dst = p[0], p[1] | p[2] << 32, p[3] | p[4] << 32
      if src % 4 or dst % 4: raise CPFault(f"CP_MEMCPY of {src:#x} to {dst:#x}: addresses must be dword-aligned")
      if n: self.translate(dst, 4 * n, True)[:] = bytes(self.translate(src, 4 * n))
    elif op in (adreno.CP_LOAD_STATE6_FRAG, adreno.CP_LOAD_STATE6_GEOM, adreno.CP_LOAD_STATE6):
      self._load_state(p, at, name)
    elif op == adreno.CP_EXEC_CS:
      need(4)
      if p[0]: raise CPFault(f"CP_EXEC_CS at {at:#x} with dword 0 = {p[0]:#x}: not modelled")
      try: exec_cs(self.gen, self.regs, self.state.get((adreno.SB6_CS_SHADER, adreno.ST6_SHADER)),
                   bytes(self.state.get((adreno.SB6_CS_SHADER, adreno.ST6_CONSTANTS), b"")), (p[1], p[2], p[3]),
                   lambda va, n, write: self.translate(va, n, write))
      except DispatchError as e: raise CPFault(f"CP_EXEC_CS of {p[1]}x{p[2]}x{p[3]} workgroups at {at:#x}: {e}") from None
    else: raise CPFault(f"{name} at {at:#x} is not a packet the KGSL model executes")

  def _write(self, addr: int, dwords: list[int]) -> None:
    if addr % 4: raise CPFault(f"write to {addr:#x}: the CP writes dword-aligned memory")
    self.translate(addr, 4 * len(dwords), True)[:] = array.array("I", dwords).tobytes()

  def _event(self, p: list[int], at: int, need) -> None:
    ev = bits(p[0], adreno.CP_EVENT_WRITE_0_EVENT) if p else None
    need(1, 4) if self.gen == 6 else need(1)
    if p[0] & ~0xFF:
      raise CPFault(f"CP_EVENT_WRITE{'7' if self.gen == 7 else ''} at {at:#x} sets bits {p[0] & ~0xFF:#x} beyond EVENT "
                    "(TIMESTAMP/IRQ, or a7xx write fields): not modelled")
    ts_events, plain = (adreno.CACHE_FLUSH_TS,), (adreno.CACHE_FLUSH, adreno.CACHE_INVALIDATE)
    if self.gen == 7:
      if ev not in ts_events + plain: raise CPFault(f"CP_EVENT_WRITE7 event {ev} at {at:#x} is not one the model executes")
      return
    if ev in ts_events and len(p) == 4: self._write(p[1] | p[2] << 32, [p[3]])
    elif ev in ts_events: raise CPFault(f"CP_EVENT_WRITE CACHE_FLUSH_TS at {at:#x} without its address and value")
    elif ev in plain and len(p) == 1: return
    else: raise CPFault(f"CP_EVENT_WRITE event {ev} with {len(p)} dwords at {at:#x} is not one the model executes")

  def _wait_reg_mem(self, p: list[int], at: int, rb: int) -> Generator[str, None, None]:
    """Poll memory until the condition holds, yielding STALL after each poll that fails."""
    if len(p) != 6: raise CPFault(f"CP_WAIT_REG_MEM at {at:#x} carries {len(p)} dwords, not 6")
    fn, signed, mem, scratch, wr = (bits(p[0], f) for f in (
      adreno.CP_WAIT_REG_MEM_0_FUNCTION, adreno.CP_WAIT_REG_MEM_0_SIGNED_COMPARE, adreno.CP_WAIT_REG_MEM_0_POLL_MEMORY,
      adreno.CP_WAIT_REG_MEM_0_POLL_SCRATCH, adreno.CP_WAIT_REG_MEM_0_WRITE_MEMORY))
    if (mem, scratch, wr) != (1, 0, 0) or p[0] & ~0x11F or fn > adreno.WRITE_GT:
      raise CPFault(f"CP_WAIT_REG_MEM at {at:#x} with flags {p[0]:#x}: the model polls memory only (POLL_MEMORY, a "
                    "cp_cond_function, optional SIGNED_COMPARE)")
    addr, ref, mask = p[1] | p[2] << 32, p[3], p[4]
    if addr % 4: raise CPFault(f"CP_WAIT_REG_MEM on {addr:#x}: the address must be dword-aligned")
    word = self.translate(addr, 4).cast("I")
    while not _compare(fn, word[0] & mask, ref & mask, bool(signed)):
      self.stalls[rb] = f"CP_WAIT_REG_MEM at {at:#x}: [{addr:#x}] & {mask:#x} (now {word[0]:#x}) vs {ref:#x}"
      yield STALL
    self.stalls.pop(rb, None)

  def _load_state(self, p: list[int], at: int, name: str) -> None:
    if not p: raise CPFault(f"{name} at {at:#x} carries no dwords")
    typ, src, block, units = (bits(p[0], f) for f in (adreno.CP_LOAD_STATE6_0_STATE_TYPE, adreno.CP_LOAD_STATE6_0_STATE_SRC,
                                                       adreno.CP_LOAD_STATE6_0_STATE_BLOCK, adreno.CP_LOAD_STATE6_0_NUM_UNIT))
    # unit sizes (reference §3.2 step 7): shader code in 128-byte units, constants in vec4s (16 bytes)
    size = units * (128 if typ == adreno.ST6_SHADER else 16)
    if src == adreno.SS6_INDIRECT:
      if len(p) != 3: raise CPFault(f"{name} SS6_INDIRECT at {at:#x} carries {len(p)} dwords, not 3")
      data = bytes(self.translate(p[1] | p[2] << 32, size))
    elif src == adreno.SS6_DIRECT:
      if len(p) != 3 + size // 4: raise CPFault(f"{name} SS6_DIRECT at {at:#x}: {len(p) - 3} data dwords for {units} units")
      data = array.array("I", p[3:]).tobytes()
    else: raise CPFault(f"{name} at {at:#x} with STATE_SRC {src}: only SS6_DIRECT and SS6_INDIRECT are modelled")
    off = bits(p[0], adreno.CP_LOAD_STATE6_0_DST_OFF)
    if typ == adreno.ST6_CONSTANTS:       # DST_OFF: the first vec4 written; the rest of the const file keeps its contents
      file = self.state.setdefault((block, typ), bytearray())
      if len(file) < 16 * off + size: file.extend(bytes(16 * off + size - len(file)))
      file[16 * off:16 * off + size] = data
    elif off: raise CPFault(f"{name} at {at:#x}: DST_OFF {off} for state type {typ}: only constants are loaded at an offset")
    else: self.state[(block, typ)] = data
