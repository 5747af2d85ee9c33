"""Fixed-size slots carved from larger chunks of device-visible memory (signals, small descriptors)."""
from __future__ import annotations
import threading
from typing import Callable


class SlotPool:
  def __init__(self, alloc_chunk: Callable[[], tuple[memoryview, int]], slot_size: int):
    self._alloc_chunk, self.slot_size = alloc_chunk, slot_size
    self._free: list[tuple[memoryview, int]] = []
    self._lock = threading.Lock()

  def get(self) -> tuple[memoryview, int]:
    """-> (view of one zeroed slot, its device address)."""
    with self._lock:
      if not self._free:
        chunk, va = self._alloc_chunk()
        n = chunk.nbytes // self.slot_size
        self._free = [(chunk[i * self.slot_size:(i + 1) * self.slot_size], va + i * self.slot_size) for i in reversed(range(n))]
      mv, va = self._free.pop()
    mv[:] = bytes(self.slot_size)
    return mv, va

  def put(self, mv: memoryview, va: int) -> None:
    with self._lock: self._free.append((mv, va))
