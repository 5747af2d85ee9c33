"""QCOMDevice: the queue API on an Adreno a6xx/a7xx GPU through KGSL (drivers.qcom.kgsl), over the kernel or its model.

Queues: each queue kind has its own KGSL context and command arena, so the two run independently, as the contexts of
two priority levels do: KGSL runs each level's contexts on its own ringbuffer, and the CP runs the highest one with
work, preempting lower ones (drivers.qcom.kgsl). The copy context outranks the compute one: copies, signals and waits
on the copy queue run while the compute queue stalls in a wait. A copy-queue submission is therefore never handed to
KGSL while one of its waits does not hold yet (it would stall its ringbuffer and starve the compute queue, whose work
may be what it waits for): it is held on the host, with every later copy submission behind it, and handed over once
its waits hold (as mesa's vk_queue holds wait-before-signal submissions in its submit thread).
Commands are CP packets (drivers.qcom.cp) written into a command arena in GPU memory (a Ring: each submission is one
contiguous indirect buffer, NOP-padded at the arena's end) and handed to KGSL by one IOCTL_KGSL_GPU_COMMAND per
submission: KGSL has no user ring. Each IB ends with a CP_MEM_WRITE of the arena's write pointer after it, which is
the ring's read pointer (how far the CP has read), so a submit makes exactly one system call.
- signal: CP_WAIT_FOR_IDLE, a CACHE_FLUSH_TS event (a6xx: written to a scratch fence; a7xx: CP_EVENT_WRITE7, event
  only), CP_WAIT_MEM_WRITES, the always-on counter to the signal's timestamp (CP_REG_TO_MEM), then the 64-bit value
  (CP_MEM_WRITE, its two dwords in one packet);
- wait: CP_WAIT_REG_MEM, WRITE_GE on memory: one dword is compared, so a wait value must fit 32 bits;
- timestamp: CP_WAIT_FOR_IDLE, then CP_REG_TO_MEM of CP_ALWAYS_ON_COUNTER (19.2 MHz) to the signal's +8;
- memory barrier: CACHE_FLUSH_TS, CACHE_INVALIDATE, CP_WAIT_MEM_WRITES, CP_WAIT_FOR_IDLE (reference §3.2).
Copies. Adreno memory is unified (reference §3.3): every buffer is a GPU object mapped to the CPU at its GPU address,
so copyin/copyout and transfers between buffers of one device are CPU copies after the queues drained (what the facts'
driver does). The copy queue exists to order copies with signals and waits inside a command stream: it copies with
CP_MEMCPY, which moves whole dwords between dword-aligned addresses; a copy it cannot express (any other size or
offset) is done by the host at its place in the stream (HostCopier).
Kernels: compute.nir text compiled by ir3 (drivers.qcom.compiler), dispatched as drivers.qcom.program encodes it (a6xx).
"""
from __future__ import annotations
import functools, threading, time, weakref
from collections import deque
from typing import Sequence

import numpy as np
from autogen import adreno
from drivers.hcq import Device, Signal
from drivers.hcq.buffer import Buffer
from drivers.hcq.program import KernArgs
from drivers.hcq.ring import Ring, RingQueue, RingSealed
from drivers.qcom import cp
from drivers.qcom.compiler import IR3Compiler
from drivers.qcom.program import QCOMProgram
from drivers.qcom.kgsl import COPY_PRIORITY, KGSL, GPUObject, PAGE
from drivers.system.dma import host_pages

ARENA_SIZE = 1 << 20                     # bytes of command arena
MAX_MEMCPY_DWORDS = 1 << 30              # per CP_MEMCPY packet (DWORDS is 32 bits; 4 GiB chunks keep addresses simple)
TRAILER_DWORDS = 5                       # the CP_MEM_WRITE of the read pointer that ends every IB
HELD_NAP_MAX_S = 1e-3                    # how often held copy submissions look at their waits again, at most
HOST_COPY_NAP_S = 1e-3                   # how long the host copier sleeps between looks at its mailbox, at most


def sync_values(words, waits: list[tuple[Signal, int]], signals: list[tuple[Signal, int]]) -> tuple[list, list]:
  """The (signal, value) pairs of a stream's waits and signals, read from its words (where replays patch them): a wait's
  value is one dword, a signal's two."""
  return ([(s, int(words[i])) for s, i in waits], [(s, int(words[i]) | int(words[i + 1]) << 32) for s, i in signals])


class CommandArena(Ring):
  """The command arena of one context as a Ring whose doorbell is IOCTL_KGSL_GPU_COMMAND of the IB just written.
  With `hold`, a submission is kept on the host (with every later one behind it) while one of its waits neither holds
  in memory nor is met by a signal of a submission handed over before it (the context runs those first, in order); a
  thread of its own (`_release`) hands the held ones over as they become ready."""
  def __init__(self, device: QCOMDevice, name: str, ctx: int, hold: bool):
    self.gpu, self.ctx, self.hold = device.gpu, ctx, hold
    self.arena = device.gpu.alloc(ARENA_SIZE)
    self.rptr_sig = device.new_signal(0, f"{name} read pointer")
    self.sublock = threading.Lock()
    self.held: deque[tuple[list, list, Sequence, Sequence]] = deque()   # (packets, keep, waits, signals)
    self.promised: weakref.WeakKeyDictionary[Signal, int] = weakref.WeakKeyDictionary()   # what handed-over IBs write last
    self.releasing = False                                  # the thread that hands held submissions over runs
    self.ib_bytes = 0
    super().__init__(device, name, self.arena.view.view, self.rptr_sig._mem, None, self._publish, 4, 0)

  def submit(self, packets, keep: list, waits: Sequence[tuple[Signal, int]] = (), signals: Sequence[tuple[Signal, int]] = ()) -> None:
    """All of `packets` as one IB, ended by the write of the read pointer it leaves; `waits` / `signals`: the
    (signal, value) pairs its CP_WAIT_REG_MEMs wait for / its CP_MEM_WRITEs set."""
    with self.sublock:
      if self.hold and (self.held or not self._ready(waits)):   # a copy: the caller may patch or extend its words
        self.held.append(([np.array(p, np.uint32) for p in packets], keep, waits, signals))
        if not self.releasing:
          self.releasing = True
          threading.Thread(target=self._release, name=f"{self.device.name} held {self.name} work", daemon=True).start()
      else: self._put(packets, keep, signals)

  def _ready(self, waits: Sequence[tuple[Signal, int]]) -> bool:
    return all(s.value >= v or self.promised.get(s, -1) >= v for s, v in waits)

  def _release(self) -> None:
    """Hand KGSL the held submissions as they become ready, in order, until none is held."""
    nap = 0.0
    while True:
      with self.sublock:
        try:
          while self.held and self._ready(self.held[0][2]):
            packets, keep, _, signals = self.held.popleft()
            self._put(packets, keep, signals)
        except Exception as e:
          self.held.clear()
          self.device.report_fault(f"{self.name} queue: handing a held submission to KGSL failed: {e}")
        if not self.held:
          self.releasing = False
          return
      time.sleep(nap)
      nap = min(nap * 2 + 1e-6, HELD_NAP_MAX_S)

  def drop_held(self) -> None:
    with self.sublock: self.held.clear()

  def _put(self, packets, keep: list, signals: Sequence[tuple[Signal, int]]) -> None:
    words = np.concatenate([np.asarray(p, np.uint32) for p in packets]) if packets else np.zeros(0, np.uint32)
    n = len(words) + TRAILER_DWORDS
    tail = (self.size - self.put * 4 % self.size) // 4
    after = self.put + (tail if n > tail else 0) + n
    ib = np.concatenate([words, np.asarray(cp.mem_write(self.rptr_sig.va, after & 0xFFFFFFFF, after >> 32), np.uint32)])
    self.ib_bytes = ib.nbytes
    super().submit([ib], keep)
    for sig, v in signals: self.promised[sig] = v

  def _publish(self, put: int) -> None:
    start = (put * 4 - self.ib_bytes) % self.size
    self.gpu.submit(self.arena.va + start, self.ib_bytes, self.ctx)


class QCOMSealed(RingSealed):
  """A sealed stream that hands its arena the values its waits and signals have now (patched by a replay)."""
  def __init__(self, q: QCOMQueue):
    super().__init__(q.ring, q.kind, q.words, q.patches, q.keep)
    self.waits, self.signals = q.waits, q.signals

  def submit(self) -> None:
    self.device.check_faults()
    self.ring.submit(self.packets, self.keep, *sync_values(self.words, self.waits, self.signals))


class QCOMQueue(RingQueue):
  """The CP packet encoder for both queue kinds (each submits to its own context's arena)."""
  device: QCOMDevice

  def __init__(self, device: QCOMDevice):
    super().__init__(device)
    self.waits: list[tuple[Signal, int]] = []          # (signal, index of the value its CP_WAIT_REG_MEM compares with)
    self.signals: list[tuple[Signal, int]] = []        # (signal, index of the value's low dword its CP_MEM_WRITE writes)

  @property
  def ring(self) -> CommandArena:
    if (arena := self.device.arenas.get(self.kind)) is None: raise RuntimeError(f"{self.device.name} is closed")
    return arena

  def _flush(self) -> None:
    gen = self.device.gen
    self.words += cp.event_write(gen, adreno.CACHE_FLUSH_TS, self.device.fence.va) if gen == 6 else cp.event_write(gen, adreno.CACHE_FLUSH_TS)

  def _signal(self, sig: Signal, value: int) -> None:
    self.words += cp.wait_for_idle()
    self._flush()
    self.words += cp.wait_mem_writes() + cp.always_on_to_mem(sig.timestamp_va)
    self.signals.append((sig, len(self.words) + 3))
    self._patch_point("value", len(self.words) + 3, 64)
    self.words += cp.mem_write(sig.va, value & 0xFFFFFFFF, value >> 32)

  def _wait(self, sig: Signal, value: int) -> None:
    if value >> 32:
      raise ValueError(f"wait for {value:#x} on {self.device.name}: CP_WAIT_REG_MEM compares one dword, so QCOM waits take "
                       "values below 2^32")
    self.waits.append((sig, len(self.words) + 4))
    self._patch_point("value", len(self.words) + 4, 32)
    self.words += cp.wait_reg_mem(sig.va, value)

  def _timestamp(self, sig: Signal) -> None:
    self.words += cp.wait_for_idle() + cp.always_on_to_mem(sig.timestamp_va)

  def _memory_barrier(self) -> None:
    self._flush()
    self.words += cp.event_write(self.device.gen, adreno.CACHE_INVALIDATE) + cp.wait_mem_writes() + cp.wait_for_idle()

  def _copy(self, dest_va: int, src_va: int, size: int) -> None:
    if dest_va % 4 or src_va % 4 or size % 4: return self.device.host_copier.encode(self, dest_va, src_va, size)
    for off in range(0, size, 4 * MAX_MEMCPY_DWORDS):
      n, at = min(4 * MAX_MEMCPY_DWORDS, size - off), len(self.words)
      self._patch_point("src", at + 2, 64, off)
      self._patch_point("dest", at + 4, 64, off)
      self.words += cp.memcpy(dest_va + off, src_va + off, n // 4)

  def _submit(self) -> None: self.ring.submit(self.packets, self.keep, *sync_values(self.words, self.waits, self.signals))
  def _seal(self) -> QCOMSealed: return QCOMSealed(self)


class HostCopier:
  """Copies CP_MEMCPY cannot express (it moves whole dwords between dword-aligned addresses: adreno_pm4.xml CP_MEMCPY),
  done by the host through the CPU mappings of unified memory at their place in the command stream: once earlier
  commands are done and written, the CP writes the request (destination, source, size) into its queue kind's mailbox,
  raises the mailbox's flag and waits until the flag is down again; this thread, started with the first such copy,
  copies and lowers it. A queue kind's IBs run in order and stall on each request, so a mailbox holds at most one."""
  KINDS, SLOT = ("compute", "copy"), 32   # a mailbox: the flag (u32) at 0, the request (3 x u64) at 8

  def __init__(self, device: QCOMDevice):
    self.device, self.obj = device, device.gpu.alloc(PAGE, uncached=True)
    view = self.obj.view.view
    self.boxes = [(view[i:i + 4].cast("I"), view[i + 8:i + 32].cast("Q")) for i in range(0, len(self.KINDS) * self.SLOT, self.SLOT)]
    self.stopping = False
    self.thread = threading.Thread(target=self._run, name=f"{device.name} host copies", daemon=True)
    self.thread.start()

  def encode(self, q: QCOMQueue, dest_va: int, src_va: int, size: int) -> None:
    box = self.obj.va + self.KINDS.index(q.kind) * self.SLOT
    q.words += cp.wait_for_idle()
    q._flush()
    q.words += cp.wait_mem_writes()
    at = len(q.words)
    q._patch_point("dest", at + 3, 64)
    q._patch_point("src", at + 5, 64)
    q.words += cp.mem_write(box + 8, *(w for v in (dest_va, src_va, size) for w in (v & 0xFFFFFFFF, v >> 32)))
    q.words += cp.wait_mem_writes() + cp.mem_write(box, 1) + cp.wait_reg_mem(box, 0, function=adreno.WRITE_EQ)
    q.words += cp.event_write(self.device.gen, adreno.CACHE_INVALIDATE)   # later reads see what the host wrote

  def _run(self) -> None:
    nap = 0.0
    while not self.stopping:
      if not any(flag[0] for flag, _ in self.boxes):
        time.sleep(nap)
        nap = min(nap * 2 + 1e-6, HOST_COPY_NAP_S)
        continue
      for flag, request in self.boxes:
        if not flag[0]: continue
        dest, src, size = request
        try: self.device.host_range(dest, size)[:] = self.device.host_range(src, size)
        except ValueError as e: self.device.report_fault(f"host copy of {size} bytes from {src:#x} to {dest:#x}: {e}")
        flag[0] = 0
      nap = 0.0

  def stop(self) -> None:
    self.stopping = True
    self.thread.join()
    self.device.gpu.free(self.obj)


class QCOMComputeQueue(QCOMQueue):
  kind = "compute"

  def _exec(self, prg: QCOMProgram, args: KernArgs, global_size, local_size) -> None:
    """The program's dispatch (drivers.qcom.program), after earlier work is done and its writes visible."""
    self._hold(prg)   # (Queue.exec holds the arguments)
    words, at = prg.dispatch(args.va, global_size, local_size)
    self.words += cp.wait_for_idle()
    for i, addend in at: self._patch_point("args", len(self.words) + i, 64, addend)
    self.words += words


class QCOMCopyQueue(QCOMQueue):
  kind = "copy"


class QCOMDevice(Device):
  def __init__(self, name: str, gpu: KGSL):
    self.gpu, self.arch, self.gen = gpu, gpu.arch, gpu.generation
    self.arenas: dict[str, CommandArena] = {}
    self._host_copier: HostCopier | None = None
    try:
      super().__init__(name)
      self.fence = self.new_signal(0, "flush fence")         # where a6xx's CACHE_FLUSH_TS events write
      self.arenas["compute"] = CommandArena(self, "compute", gpu.ctx, hold=False)
      self.arenas["copy"] = CommandArena(self, "copy", gpu.create_context(COPY_PRIORITY), hold=True)
    except BaseException:
      self._shutdown()
      raise

  def _alloc(self, size: int, host: bool):
    obj = self.gpu.alloc(size, uncached=host)
    return obj.va, obj.view.view[:size], obj

  def _free(self, obj: GPUObject) -> None: self.gpu.free(obj)

  def _import_host(self, view: memoryview) -> tuple[int, GPUObject]:
    addr, size, offset = host_pages(view)
    obj = self.gpu.import_host(addr, size)
    return obj.va + offset, obj

  def _signal_chunk(self) -> tuple[memoryview, int]:
    obj = self.gpu.alloc(PAGE, uncached=True)
    return obj.view.view, obj.va

  def _kernarg_chunk(self, size: int) -> tuple[memoryview, int]:
    obj = self.gpu.alloc(size)
    return obj.view.view, obj.va

  @property
  def host_copier(self) -> HostCopier:
    with self._lock:
      if self._host_copier is None: self._host_copier = HostCopier(self)
      return self._host_copier

  def host_range(self, va: int, size: int) -> memoryview:
    """The CPU mapping of [va, va + size), which must lie in one buffer of this device."""
    with self._lock: bufs = list(self._buffers)
    if (b := next((b for b in bufs if b.host_view is not None and b.va <= va and va + size <= b.va + b.size), None)) is None:
      raise ValueError(f"[{va:#x}, +{size}) lies in no buffer of {self.name}")
    return b.host_view[va - b.va:va - b.va + size]

  def _copy_sync(self, dest: Buffer, src: Buffer) -> None:
    """Unified memory: a CPU copy once earlier work is done (reference §3.3)."""
    self.synchronize()
    dest.host_view[:src.size] = src.host_view[:src.size]

  @property
  def gpu_id(self) -> int: return int(self.arch[1:])      # 630 for an a630
  @functools.cached_property
  def compiler(self) -> IR3Compiler: return IR3Compiler(str(self.gpu_id))   # NIR -> ir3 for the GPU (drivers.qcom.compiler)
  def program(self, name: str, lib: bytes) -> QCOMProgram:
    self._check_open()
    return QCOMProgram(self, name, lib)
  def compute_queue(self) -> QCOMComputeQueue: return QCOMComputeQueue(self)
  def copy_queue(self) -> QCOMCopyQueue: return QCOMCopyQueue(self)
  def ticks_to_us(self, ticks: int) -> float: return ticks * 1e6 / cp.ALWAYS_ON_HZ

  def _poll_faults(self) -> str | None:
    for kind, arena in self.arenas.items():
      if (stat := self.gpu.reset_status(arena.ctx)) != 0:
        return (f"KGSL reset the {kind} queue's context {arena.ctx} after a GPU fault (reset status {stat}: guilty); its "
                "later work is dropped")
    return None

  def _progress(self) -> tuple: return tuple(a.rptr for a in self.arenas.values())

  def _stop_queues(self) -> None:
    for arena in self.arenas.values(): arena.drop_held()     # held copy submissions are dropped with the rest
    self.gpu.destroy_contexts()                               # KGSL drops the contexts' queued IBs
    self.arenas = {}
    if self._host_copier is not None: self._host_copier.stop()

  def _shutdown(self) -> None: self.gpu.close()
