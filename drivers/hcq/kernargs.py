"""KernargArena: memory for kernel arguments, carved from large chunks the device provides.

A launch takes a piece and gives it back when its KernArgs object is gone; queues keep that object alive
until the engine has read past the launch, so a piece is never rewritten under a kernel that may read it.
"""
from __future__ import annotations
import threading
from typing import Callable

from common.alloc import RangeAllocator

CHUNK_SIZE = 2 << 20
ALIGN = 64                # enough for every backend: AMD places a 64-byte-aligned dispatch packet after the arguments


class KernargArena:
  def __init__(self, chunk: Callable[[int], tuple[memoryview, int]], chunk_size: int = CHUNK_SIZE):
    """`chunk(size)` -> (host view, device address) of at least `size` bytes the device reads arguments from."""
    self._chunk, self.chunk_size = chunk, chunk_size
    self._chunks: list[tuple[memoryview, int, RangeAllocator]] = []
    self._lock = threading.Lock()

  def alloc(self, size: int) -> tuple[memoryview, int, Callable[[], None]]:
    """-> (view, device address, release) of `size` bytes (rounded up to ALIGN)."""
    size = -(-max(size, 1) // ALIGN) * ALIGN
    with self._lock:
      for view, va, ra in self._chunks:
        try: off = ra.alloc(size, ALIGN)
        except MemoryError: continue
        return view[off:off + size], va + off, self._releaser(ra, off)
      view, va = self._chunk(max(self.chunk_size, size))
      ra = RangeAllocator(0, view.nbytes, "kernel-argument memory")
      self._chunks.append((view, va, ra))
      off = ra.alloc(size, ALIGN)
      return view[off:off + size], va + off, self._releaser(ra, off)

  def _releaser(self, ra: RangeAllocator, off: int) -> Callable[[], None]:
    def release() -> None:
      with self._lock: ra.free(off)
    return release
