"""A first-fit range allocator with coalescing frees over [start, start+size): VRAM and GPU virtual addresses in the
models, and device memory, VA, IOVA and argument arenas in the drivers."""
from __future__ import annotations
import bisect


class RangeAllocator:
  def __init__(self, start: int, size: int, name: str = "memory"):
    self.start, self.size, self.name = start, size, name
    self._free: list[tuple[int, int]] = [(start, start + size)]   # sorted, non-adjacent (begin, end)
    self.used: dict[int, int] = {}

  def alloc(self, size: int, align: int = 1) -> int:
    if size <= 0: raise ValueError(f"cannot allocate {size} bytes of {self.name}")
    if align <= 0: raise ValueError(f"cannot align {self.name} to {align} bytes")
    for i, (b, e) in enumerate(self._free):
      a = -(-b // align) * align
      if a + size <= e:
        self._free[i:i + 1] = [r for r in ((b, a), (a + size, e)) if r[1] > r[0]]
        self.used[a] = size
        return a
    raise MemoryError(f"out of {self.name}: no free range of {size:#x} bytes (aligned to {align:#x}); "
                      f"{self.free_bytes:#x} of {self.size:#x} bytes are free")

  def take(self, addr: int, size: int) -> None:
    """Allocate exactly [addr, addr+size) (a fixed address the caller chose); MemoryError if any of it is in use."""
    for i, (b, e) in enumerate(self._free):
      if b <= addr and addr + size <= e:
        self._free[i:i + 1] = [r for r in ((b, addr), (addr + size, e)) if r[1] > r[0]]
        self.used[addr] = size
        return
    raise MemoryError(f"{self.name} [{addr:#x}, +{size:#x}) is not free")

  def free(self, addr: int) -> None:
    if (size := self.used.pop(addr, None)) is None: raise ValueError(f"free of {addr:#x}: not an allocation of {self.name}")
    i = bisect.bisect(self._free, (addr, addr))
    b, e = addr, addr + size
    if i < len(self._free) and self._free[i][0] == e: e = self._free.pop(i)[1]
    if i > 0 and self._free[i - 1][1] == b: b = self._free.pop(i - 1)[0]; i -= 1
    self._free.insert(i, (b, e))

  @property
  def free_bytes(self) -> int: return sum(e - b for b, e in self._free)
