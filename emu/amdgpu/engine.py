"""A ring-buffer engine (the MEC's HQD, an SDMA queue): a worker thread that fetches packets between its
read and write pointers, wakes on its doorbell, and stalls (without blocking the host) on waits.

Pointers live in memory the driver shares with the engine, as on hardware: the engine polls the write
pointer at `wptr_va` and writes its read pointer back to `rptr_va` after each packet. Units differ per
engine (`unit`: 4 for the MEC, which counts dwords; 1 for SDMA, which counts bytes).
"""
from __future__ import annotations
import threading, time
from typing import TYPE_CHECKING
import numpy as np

from emu.amdgpu.mmu import GPUPageFault
if TYPE_CHECKING: from emu.amdgpu.gpu import AMDGPU


class EngineError(RuntimeError):
  """A malformed packet or unsupported opcode: the queue stops, as a real engine would hang."""


class KernelError(RuntimeError):
  """A shader wave faulted or trapped during a dispatch; its queue stops."""
  def __init__(self, msg: str, va: int | None):
    super().__init__(msg)
    self.va = va


class Stalled(Exception):
  """Raised by a packet handler whose wait condition is not met yet; the packet is retried."""


class RingEngine(threading.Thread):
  unit = 4
  kind = "gfx"              # which activity counter of the GPU its busy time adds to (the SMU reports them)
  POLL_S = 0.001            # how often a stalled engine re-checks memory (the CP's poll interval)

  def __init__(self, gpu: AMDGPU, name: str, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int):
    super().__init__(name=f"emu-{name}", daemon=True)
    self.gpu, self.qname = gpu, name
    self.ring_va, self.ring_size, self.rptr_va, self.wptr_va = ring_va, ring_size, rptr_va, wptr_va
    self.rptr = 0                      # in `unit`s, monotonically increasing (wraps modulo the ring)
    self.doorbell = threading.Event()
    self.stopping = False
    self.hung: str | None = None       # why the engine stopped processing (fault, bad packet)
    self.busy = False

  # --- host side
  def ring_doorbell(self, value: int) -> None:
    self.doorbell.set()

  def request_stop(self) -> None:
    """Stop after the packet in flight (a dequeue request); does not wait."""
    self.stopping = True
    self.doorbell.set()

  def stop(self) -> None:
    self.request_stop()
    if self.is_alive() and threading.current_thread() is not self: self.join(timeout=10)

  # --- engine side
  def read_wptr(self) -> int:
    return int.from_bytes(self.gpu.mmu.read(self.wptr_va, 8, self.qname), "little")

  def write_rptr(self) -> None:
    self.gpu.mmu.write(self.rptr_va, self.rptr.to_bytes(8, "little"), self.qname)

  def fetch(self, start: int, ndw: int) -> np.ndarray:
    """`ndw` dwords of the ring starting at pointer `start` (wrapping at the end of the ring)."""
    off = (start * self.unit) % self.ring_size
    n = ndw * 4
    first = min(n, self.ring_size - off)
    raw = self.gpu.mmu.read(self.ring_va + off, first, self.qname)
    if first < n: raw += self.gpu.mmu.read(self.ring_va, n - first, self.qname)
    return np.frombuffer(raw, np.uint32)

  def run(self) -> None:
    while not self.stopping:
      self.doorbell.wait(self.POLL_S * 20)
      self.doorbell.clear()
      if self.hung: continue
      try: self._drain()
      except GPUPageFault as e: self._hang(str(e), e.fault.va, "fault")
      except EngineError as e: self._hang(str(e), None, "packet")
      except KernelError as e: self._hang(str(e), e.va, "shader")
      except Exception as e:   # a model bug must still surface as a device error, not a silent dead thread
        self._hang(f"internal model error: {type(e).__name__}: {e}", None, "internal")
      finally: self.gpu.busy_end(self)

  def _drain(self) -> None:
    backoff = 0.0
    while not self.stopping:
      wptr = self.read_wptr()
      if wptr == self.rptr: return
      if (wptr - self.rptr) * self.unit > self.ring_size:
        raise EngineError(f"{self.qname}: write pointer {wptr} is more than a ring ahead of the read pointer {self.rptr}")
      words, pos = self.fetch(self.rptr, (wptr - self.rptr) * self.unit // 4), 0   # all that is published, in one read
      self.busy = True
      self.gpu.busy_begin(self)
      try:
        while pos < len(words):
          used = self.packet(words, pos)
          pos += used
          self.rptr += used * 4 // self.unit
      except Stalled:   # re-check soon, then less often: waits usually end within microseconds
        self.write_rptr()
        self.busy = False
        self.gpu.busy_end(self)
        time.sleep(backoff)
        backoff = min(backoff * 2 + 10e-6, self.POLL_S)
        continue
      self.write_rptr()   # the read pointer is reported once per batch, as the CP does (RPTR_BLOCK_SIZE)
      backoff = 0.0
      self.busy = False
      self.gpu.busy_end(self)

  def _hang(self, why: str, va: int | None = None, kind: str = "") -> None:
    self.hung, self.busy = why, False
    self.gpu.report_fault(self.qname, why, va, kind)

  def packet(self, words: np.ndarray, pos: int) -> int:
    """Execute the packet at words[pos] (the ring from the read pointer to the write pointer); return how many
    dwords it used. Raise Stalled to retry it later."""
    raise NotImplementedError
