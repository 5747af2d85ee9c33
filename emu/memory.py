"""GPU memory as a shader core (emu/amdgcn, emu/nvgpu/ptx) sees it: the interface a GPU model implements, and `Memory`, the simple
standalone sparse 64-bit address space used by tests and benchmarks.

The interface is one method, `lookup(addr, write) -> (start, length, host_address) | None`: the
contiguous host-backed run of GPU virtual addresses holding `addr`, or None when `addr` is unmapped (or,
for `write`, read-only). The compiled code keeps the runs it was given in a small cache and calls back
into Python only on a miss, so a kernel streaming through a mapped buffer pays one callback per run.
A GPU model translates through its page tables and returns one run per physically contiguous chunk
(a page at least); it may record the fault in its own registers before returning None. `fetch(addr)` is the same
for an instruction fetch (a GPU model checks the page is executable). Scalar loads (SMEM) ask
`lookup_scalar(addr)` instead where the memory has it (a GPU model's scalar data cache), else `lookup(addr, False)`.
"""
from __future__ import annotations
import bisect, ctypes
from typing import Protocol
import numpy as np


class MemoryFault(RuntimeError):
  """An access to an unmapped (or read-only, for writes) GPU virtual address."""


class GpuMemory(Protocol):
  def lookup(self, addr: int, write: bool) -> tuple[int, int, int] | None: ...
  def fetch(self, addr: int) -> tuple[int, int, int] | None: ...


def read(mem: GpuMemory, addr: int, n: int, code: bool = False) -> bytes:
  """Read `n` bytes at `addr` through any GpuMemory (`code`: as instruction fetches); MemoryFault when unmapped."""
  out = bytearray()
  while len(out) < n:
    run = mem.fetch(addr + len(out)) if code else mem.lookup(addr + len(out), False)
    if run is None: raise MemoryFault(f"read of {n} bytes at {addr:#x}: address {addr + len(out):#x} is not mapped")
    start, length, host = run
    off = addr + len(out) - start
    take = min(n - len(out), length - off)
    out += ctypes.string_at(host + off, take)
  return bytes(out)


class Memory:
  """Sparse 64-bit GPU address space backed by host memory. `alloc` places each buffer at a fresh
  address with an unmapped guard gap after it, so an out-of-range access faults instead of hitting a
  neighbour."""
  BASE, ALIGN, GUARD = 0x1_0000_0000, 0x1000, 0x10000

  def __init__(self):
    self._starts: list[int] = []
    self._bufs: dict[int, tuple[np.ndarray, bool]] = {}
    self._next = self.BASE

  def alloc(self, size: int, *, addr: int | None = None, writable: bool = True) -> int:
    """Map `size` zeroed bytes (at `addr` if given) and return the address."""
    if size <= 0: raise ValueError(f"alloc size must be positive, got {size}")
    if addr is None:
      addr = self._next
      self._next = (addr + size + self.GUARD + self.ALIGN - 1) & ~(self.ALIGN - 1)
    elif not 0 <= addr < 1 << 64 or addr + size > 1 << 64: raise ValueError(f"address {addr:#x} is outside the 64-bit space")
    i = bisect.bisect_right(self._starts, addr)
    if (i and self._starts[i - 1] + self._bufs[self._starts[i - 1]][0].size > addr) or \
       (i < len(self._starts) and self._starts[i] < addr + size):
      raise ValueError(f"alloc of {size:#x} bytes at {addr:#x} overlaps an existing allocation")
    self._starts.insert(i, addr)
    self._bufs[addr] = (np.zeros(size, np.uint8), writable)
    return addr

  def free(self, addr: int) -> None:
    if addr not in self._bufs: raise ValueError(f"free of {addr:#x}: not the start of an allocation")
    del self._bufs[addr]
    self._starts.remove(addr)

  def lookup(self, addr: int, write: bool) -> tuple[int, int, int] | None:
    i = bisect.bisect_right(self._starts, addr) - 1
    if i < 0: return None
    start = self._starts[i]
    buf, writable = self._bufs[start]
    if addr >= start + buf.size or (write and not writable): return None
    return start, buf.size, buf.ctypes.data

  def fetch(self, addr: int) -> tuple[int, int, int] | None: return self.lookup(addr, False)   # all memory is executable

  def _span(self, addr: int, n: int, write: bool) -> np.ndarray:
    i = bisect.bisect_right(self._starts, addr) - 1
    if i >= 0:
      start = self._starts[i]
      buf, writable = self._bufs[start]
      if addr + n <= start + buf.size and (writable or not write): return buf[addr - start:addr - start + n]
    what = "write" if write else "read"
    raise MemoryFault(f"{what} of {n} bytes at {addr:#x} is outside every allocation (or read-only)")

  def write(self, addr: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
    src = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    self._span(addr, src.size, True)[:] = src

  def read(self, addr: int, n: int) -> bytes:
    return self._span(addr, n, False).tobytes()

  def view(self, addr: int, n: int) -> np.ndarray:
    """A writable numpy view of `n` mapped bytes at `addr` (no copy)."""
    return self._span(addr, n, False)
