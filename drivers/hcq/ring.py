"""Ring: the host side of one hardware command ring, a circular buffer an engine fetches commands from.

The host copies commands in at its write pointer, publishes the pointer and rings the doorbell; the engine
consumes them and writes its read pointer back to memory. Both pointers only grow (the position in the ring
is the pointer modulo its size). What differs per engine is given as parameters:
  unit     bytes per pointer step (4 for rings that count dwords, 1 for rings that count bytes);
  pad      the wrap policy: None when a packet may straddle the end of the ring, else the NOP dword the
           tail is filled with so that a packet that does not fit before the end starts again at 0.
Objects the commands point at (kernel arguments, signals) stay referenced until the engine has read past them.

RingQueue is the Queue of such an engine: the vendor encodes packets into its words, the base keeps what they point at,
submits them to the ring and seals them for replay (RingSealed).
"""
from __future__ import annotations
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np
from drivers.hcq.patience import Patience
from drivers.hcq.queue import Queue, Sealed
if TYPE_CHECKING: from drivers.hcq.device import Device

FULL_POLL_S = 50e-6      # how often a full ring looks at the read pointer again, at most


class Ring:
  def __init__(self, device: Device, name: str, mem: memoryview, rptr: memoryview | None, wptr: memoryview | None,
               doorbell: Callable[[int], None], unit: int = 4, pad: int | None = None):
    """`mem`: the ring (a multiple of 4 bytes); `rptr`: the u64 the engine writes back (None where the driver learns
    from completions how far the engine read, and says so with `retire`); `wptr`: the u64 the engine polls (None if
    the doorbell alone carries it); `doorbell(wptr)`: tells the engine the new write pointer."""
    self.device, self.name, self.unit, self.pad = device, name, unit, pad
    self.words = np.frombuffer(mem, np.uint32)
    self.bytes = memoryview(self.words).cast("B")           # (copies through memoryviews: numpy slicing costs more)
    self.size = self.words.nbytes
    self._rptr = (rptr if rptr is not None else memoryview(bytearray(8))).cast("B").cast("Q")
    self._wptr, self._doorbell = wptr.cast("B").cast("Q") if wptr is not None else None, doorbell
    self.put = 0                                            # the write pointer, in units
    self.inflight: deque[tuple[int, list]] = deque()       # (write pointer after a submission, objects it keeps alive)
    self.lock = threading.Lock()

  @property
  def rptr(self) -> int: return self._rptr[0]

  def submit(self, packets: Iterable[Sequence[int] | bytes | bytearray], keep: list) -> None:
    """Write `packets` (each a sequence of dwords, or bytes holding whole dwords: copied as they are), publish the
    write pointer, ring the doorbell once. A submission that keeps nothing alive is not tracked in `inflight`."""
    with self.lock:
      for p in packets:
        data = p if isinstance(p, (bytes, bytearray)) else memoryview(np.ascontiguousarray(p, np.uint32)).cast("B")
        nbytes = len(data)
        if self.pad is not None and nbytes > (tail := self.size - self.put * self.unit % self.size):
          self._reserve(tail)                               # it does not fit before the end: NOP-pad, restart at 0
          self._write(memoryview(np.full(tail // 4, self.pad, np.uint32)).cast("B"))
        self._reserve(nbytes)
        self._write(data)
      if keep: self.inflight.append((self.put, keep))
      while self.inflight and self.inflight[0][0] <= self.rptr: self.inflight.popleft()
      if self._wptr is not None: self._wptr[0] = self.put
      self._doorbell(self.put)

  def claim(self, nbytes: int) -> int:
    """Take `nbytes` at the write pointer for commands another device writes and rings the doorbell for (waiting for
    room as submit does): -> the write pointer they start at. Nothing is written or rung here."""
    with self.lock:
      self._reserve(nbytes)
      at, self.put = self.put, self.put + nbytes // self.unit
      return at

  def retire(self, put: int) -> None:
    """The engine is done with everything before write pointer `put` (a ring made with rptr None)."""
    self._rptr[0] = put

  def reset(self) -> None:
    """Both pointers back to 0 with nothing in flight: the engine starts the ring again (a NIC queue pair's RESET)."""
    with self.lock:
      self.put = self._rptr[0] = 0
      self.inflight.clear()

  def pending(self) -> list:
    """Objects kept by commands the engine has not read past yet (e.g. to name the kernel running at a fault)."""
    r = self.rptr
    return [k for put, keep in tuple(self.inflight) if put > r for k in keep]   # a snapshot: submit may run meanwhile

  def _reserve(self, nbytes: int) -> None:
    """Wait until `nbytes` are free; give up when neither the engine's read pointer nor the device (Device.progress)
    moved for patience.STALL_MS."""
    if nbytes > self.size: raise ValueError(f"{nbytes} bytes of commands do not fit the {self.size}-byte {self.name} ring")
    wait = None
    while (self.put - (r := self.rptr)) * self.unit + nbytes > self.size:
      self.device.check_faults()
      if wait is None: wait = Patience(lambda: (self.rptr, self.device.progress()), nap_max_s=FULL_POLL_S)
      elif wait.expired():
        raise TimeoutError(f"{self.device.name}: the {self.name} ring stayed full {wait.what} (engine read pointer "
                           f"{r}, write pointer {self.put}): the queue is stuck on a wait that is never satisfied")
      wait.nap()

  def _write(self, data: bytes | bytearray | memoryview) -> None:
    n, at = len(data), self.put * self.unit // 4 % len(self.words) * 4
    if n <= self.size - at: self.bytes[at:at + n] = data
    else:                                                   # it wraps: the rest goes to the start of the ring
      first, data = self.size - at, memoryview(data)
      self.bytes[at:] = data[:first]
      self.bytes[:n - first] = data[first:]
    self.put += n // self.unit


def runs(words: Sequence[int], splits: Sequence[int]) -> list:
  """`words` cut at `splits` (where packets the ring takes whole start) into what Ring.submit takes; one run without."""
  if not splits: return [words]
  bounds = [0, *splits, len(words)]
  return [words[a:b] for a, b in zip(bounds, bounds[1:])]


class RingQueue(Queue):
  """A Queue whose commands are dwords an engine fetches from a Ring. The vendor encodes packets into `words` (with
  `_packet` where the ring must take a packet whole) and names the ring; this base keeps the objects the commands point
  at (kernel arguments, signals: Queue._hold) until the engine has read past them, submits the words with one doorbell
  and seals them into a RingSealed."""
  def __init__(self, device: Device):
    super().__init__(device)
    self.words: list[int] = []
    self.keep: list = []             # what the commands point at, alive until submission (then until the engine read past it)
    self.splits: list[int] = []      # where the packets `_packet` added start

  @property
  def ring(self) -> Ring: raise NotImplementedError(f"{type(self).__name__} names no ring")

  @property
  def packets(self) -> list:
    """The words as the ring takes them: one run (which the ring wraps, or pads before, as a whole), or cut into the
    packets `_packet` added."""
    return runs(self.words, self.splits)

  def _packet(self, packet: list[int]) -> None:
    """Add a packet the ring takes whole: where it does not fit before the ring's end, the ring pads and starts it at 0."""
    if self.words: self.splits.append(len(self.words))
    self.words += packet

  def _hold(self, obj: Any) -> None: self.keep.append(obj)
  def _submit(self) -> None: self.ring.submit(self.packets, self.keep)
  def _seal(self) -> RingSealed: return RingSealed(self.ring, self.kind, self.words, self.patches, self.keep, self.splits)


class RingSealed(Sealed):
  """A sealed stream for a hardware ring: one array of dwords (patched in place) and the packet boundaries the ring's
  wrap policy needs. Submitting copies the array into the ring (one copy, or two at its end) and rings the doorbell once;
  the ring copies the words, so a replay may be patched again as soon as it is submitted."""
  def __init__(self, ring: Ring, kind: str, words: Sequence[int], patches: list, keep: list, splits: Sequence[int] = ()):
    super().__init__(ring.device, kind, patches, keep)
    self.ring, self.words = ring, np.asarray(words, np.uint32).copy()
    self.packets = runs(self.words, splits)

  def _put(self, at: int | tuple[tuple[int, int], ...], bits: int, value: int) -> None:
    """`at`: the index of the field's low dword (the high one next when 64 bits), or (dword index, bit shift) pairs
    for a value whose dwords lie apart (each gets value >> shift)."""
    for i, shift in ((at, 0), (at + 1, 32))[:bits // 32] if isinstance(at, int) else at:
      self.words[i] = (value >> shift) & 0xFFFFFFFF

  def submit(self) -> None:
    self.device.check_faults()
    self.ring.submit(self.packets, self.keep)
