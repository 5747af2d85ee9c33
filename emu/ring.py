"""The ring engine every queue-processing device model shares: a worker thread that fetches commands between its
read and write pointers through a DMA-capable memory, wakes on its doorbell, stalls (without blocking the host) on
waits, stops its queue on a fault, and counts its busy time.

What differs per device is a parameter or a hook:
- `mem`: where the ring and its pointers live, anything with `read(addr, n) -> bytes` and `write(addr, data)` (an
  emu.pci.DMASpace, or a device MMU as one of its clients sees it);
- `unit`: bytes per pointer step (4 for rings that count dwords, 1 for rings that count bytes);
- `read_wptr()` / `write_rptr()`: where the write pointer is polled and the read pointer written back (default: a
  little-endian u64 at `wptr_addr` / `rptr_addr` in `mem`);
- `packet(words, pos)`: decode and execute one command, return the dwords it used, raise `Stalled` to be retried;
- `describe(exc)`: what an exception means (message, faulting address, kind); `report(...)`: tell the device;
- `account(ns)`: where busy time goes.
"""
from __future__ import annotations
import threading, time
from typing import Protocol

import numpy as np

from emu.pci import DMAFault


class Memory(Protocol):
  def read(self, addr: int, n: int) -> bytes: ...
  def write(self, addr: int, data: bytes | memoryview) -> None: ...


class Stalled(Exception):
  """Raised by a packet handler whose wait condition is not met yet; the packet is retried."""


class RingError(RuntimeError):
  """Something that stops the queue, as a hang stops a real engine. `kind` says what: "packet" (malformed or
  unsupported command), "fault" (the engine's own memory access faulted), or a device's own kinds."""
  kind = "packet"

  def __init__(self, msg: str, address: int | None = None):
    super().__init__(msg)
    self.address = address


class RingEngine(threading.Thread):
  unit = 4                  # bytes per pointer step
  POLL_S = 0.001            # how often a stalled engine re-checks memory at most
  IDLE_S = 0.02             # how often an idle engine looks at its write pointer without a doorbell

  def __init__(self, name: str, mem: Memory, ring_addr: int, ring_size: int, rptr_addr: int, wptr_addr: int):
    super().__init__(name=f"emu-{name}", daemon=True)
    self.qname, self.mem = name, mem
    self.ring_addr, self.ring_size, self.rptr_addr, self.wptr_addr = ring_addr, ring_size, rptr_addr, wptr_addr
    self.rptr = 0                      # in `unit`s, monotonically increasing (wraps modulo the ring)
    self.doorbell = threading.Event()
    self.stopping = False
    self.hung: str | None = None       # why the engine stopped processing (fault, bad packet)
    self.busy_since: int | None = None  # perf_counter_ns() when the batch in flight started
    self.busy_ns = 0

  @property
  def busy(self) -> bool: return self.busy_since is not None

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

  # --- hooks
  def read_wptr(self) -> int:
    return int.from_bytes(self.mem.read(self.wptr_addr, 8), "little")

  def write_rptr(self) -> None:
    self.mem.write(self.rptr_addr, self.rptr.to_bytes(8, "little"))

  def packet(self, words: np.ndarray, pos: int) -> int:
    """Execute the packet at words[pos] (the ring from the read pointer to the write pointer); return how many
    dwords it used. Raise Stalled to retry it later, RingError to stop the queue."""
    raise NotImplementedError

  def describe(self, e: Exception) -> tuple[str, int | None, str]:
    """(message, faulting address, kind) of what stopped the queue."""
    if isinstance(e, RingError): return str(e), e.address, e.kind
    if isinstance(e, DMAFault): return f"{self.qname}: {e}", None, "fault"
    return f"internal model error: {type(e).__name__}: {e}", None, "internal"   # a model bug still surfaces as a device error

  def report(self, message: str, address: int | None, kind: str) -> None:
    """The queue stopped (`hung` says why): tell the device (interrupt, error log)."""

  def account(self, ns: int) -> None:
    self.busy_ns += ns

  # --- engine side
  def fetch(self, start: int, ndw: int) -> np.ndarray:
    """`ndw` dwords of the ring starting at pointer `start` (wrapping at the end of the ring)."""
    off = (start * self.unit) % self.ring_size
    n = ndw * 4
    first = min(n, self.ring_size - off)
    raw = self.mem.read(self.ring_addr + off, first)
    if first < n: raw += self.mem.read(self.ring_addr, n - first)
    return np.frombuffer(raw, np.uint32)

  def run(self) -> None:
    while not self.stopping:
      self.doorbell.wait(self.IDLE_S)
      self.doorbell.clear()
      if self.hung: continue
      try: self._drain()
      except Exception as e:
        self._idle()
        self.hung = (d := self.describe(e))[0]
        self.report(*d)

  def _tick(self) -> None:
    """Account the busy time so far after each packet, not once per batch: a batch can last seconds (a full ring of
    dispatches), and a monitor in another process sees only accounted time."""
    t, self.busy_since = self.busy_since, (now := time.perf_counter_ns())
    self.account(now - t)

  def _idle(self) -> None:
    if (t := self.busy_since) is not None:
      self.busy_since = None
      self.account(time.perf_counter_ns() - t)

  def _drain(self) -> None:
    backoff = 0.0
    while not self.stopping:
      wptr = self.read_wptr()
      if wptr == self.rptr: return
      if (wptr - self.rptr) * self.unit > self.ring_size:
        raise RingError(f"{self.qname}: write pointer {wptr} is more than a ring ahead of the read pointer {self.rptr}")
      words, pos = self.fetch(self.rptr, (wptr - self.rptr) * self.unit // 4), 0   # all that is published, in one read
      self.busy_since = time.perf_counter_ns()
      try:
        while pos < len(words) and not self.stopping:   # a dequeue request takes effect after the packet in flight
          used = self.packet(words, pos)
          pos += used
          self.rptr += used * 4 // self.unit
          self._tick()
      except Stalled:   # re-check soon, then less often: waits usually end within microseconds
        self.write_rptr()
        self._idle()
        time.sleep(backoff)
        backoff = min(backoff * 2 + 10e-6, self.POLL_S)
        continue
      self.write_rptr()   # the read pointer is reported once per batch, as hardware engines do
      backoff = 0.0
      self._idle()
