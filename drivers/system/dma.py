"""DMA memory: host memory a device can read and write, with the bus address of each page.

Real hardware (sysfs path): anonymous memory locked in RAM, bus addresses = physical addresses read
from /proc/self/pagemap (bits 0-54 = PFN, bit 63 = present; Documentation/admin-guide/mm/pagemap.rst),
or 2 MiB hugetlb pages when a physically contiguous buffer is needed.
"""
from __future__ import annotations
import ctypes, mmap, os
from dataclasses import dataclass, field
from typing import Callable

PAGE = 4096
HUGE_PAGE = 2 << 20
MAP_HUGETLB = 0x40000       # linux/mman.h (x86/arm64 value), absent from Python's mmap module
MAP_LOCKED = 0x2000         # asm-generic/mman.h
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass
class DMAMemory:
  """A DMA buffer: `view` is what the host reads and writes, `bus_addrs[i]` is where page i sits on the bus."""
  view: memoryview
  bus_addrs: list[int]
  page_size: int = PAGE
  _free: Callable[[], object] | None = field(default=None, repr=False)
  first: int = 0   # where view[0] lies in the first page (memory mapped by PCIDevice.map_dma need not start on a page)

  @property
  def size(self) -> int: return self.view.nbytes

  @property
  def contiguous(self) -> bool:
    return all(b - a == self.page_size for a, b in zip(self.bus_addrs, self.bus_addrs[1:]))

  def bus_addr(self, offset: int = 0) -> int:
    if not 0 <= offset < max(self.size, 1): raise IndexError(f"offset {offset:#x} is outside the {self.size:#x}-byte DMA buffer")
    offset += self.first
    return self.bus_addrs[offset // self.page_size] + offset % self.page_size

  def free(self) -> None:
    if self._free is not None: self._free()
    self._free = None


def round_up(x: int, a: int) -> int: return (x + a - 1) // a * a


def host_address(buf: mmap.mmap | bytearray | memoryview) -> int:
  return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def dma_bytes(memory) -> memoryview:
  """`memory` (anything with the buffer protocol) as the bytes a device may read and write, or a clear error."""
  try: view = memoryview(memory)
  except TypeError: raise TypeError(f"cannot map a {type(memory).__name__} for DMA: pass a writable buffer (bytearray, "
                                    "memoryview, numpy array)") from None
  if view.readonly: raise ValueError("cannot map read-only memory for DMA: the device may write it (pass a writable buffer)")
  if not view.c_contiguous: raise ValueError("cannot map non-contiguous memory for DMA (pass a C-contiguous buffer)")
  if not view.nbytes: raise ValueError("cannot map 0 bytes for DMA")
  return view.cast("B")


def host_pages(view: memoryview) -> tuple[int, int, int]:
  """(address, size, offset of view[0]) of the whole pages that hold `view` (bytes from dma_bytes)."""
  addr = host_address(view)
  start = addr & ~(PAGE - 1)
  return start, round_up(addr + view.nbytes, PAGE) - start, addr - start


def page_frames(base: int, size: int, page: int = PAGE) -> list[int]:
  """The physical address of every `page`-sized page of [base, base+size), resident memory of this process, from
  /proc/self/pagemap (needs CAP_SYS_ADMIN)."""
  try:
    with open("/proc/self/pagemap", "rb") as f:
      f.seek(base // PAGE * 8)
      raw = f.read(size // PAGE * 8)
  except OSError as e:
    raise PermissionError(f"cannot read /proc/self/pagemap ({e.strerror}): physical addresses for DMA need root") from None
  entries = memoryview(raw).cast("Q")
  pfns = [e & ((1 << 55) - 1) if e >> 63 else 0 for e in entries]
  if not all(pfns):
    raise PermissionError("/proc/self/pagemap returned no page frame numbers: physical addresses for DMA need root "
                          "(CAP_SYS_ADMIN); run as root or use VFIO, which needs no physical addresses")
  return [pfns[i * (page // PAGE)] * PAGE for i in range(size // page)]


def pin_existing(view: memoryview) -> DMAMemory:
  """Existing host memory (bytes from dma_bytes) locked in RAM (mlock), with the physical address of each page it covers."""
  start, size, first = host_pages(view)
  if _libc.mlock(ctypes.c_void_p(start), ctypes.c_size_t(size)):
    e = ctypes.get_errno()
    raise OSError(e, f"cannot lock {size} bytes of host memory for DMA ({os.strerror(e)}); raise `ulimit -l` or run as root")
  try: addrs = page_frames(start, size)
  except BaseException:
    _libc.munlock(ctypes.c_void_p(start), ctypes.c_size_t(size))
    raise
  return DMAMemory(view, addrs, PAGE, lambda: _libc.munlock(ctypes.c_void_p(start), ctypes.c_size_t(size)), first)


def alloc_pinned(size: int, contiguous: bool = False) -> DMAMemory:
  """Locked host memory with physical page addresses (needs CAP_SYS_ADMIN to read PFNs)."""
  page = HUGE_PAGE if contiguous else PAGE
  size = round_up(max(size, 1), page)
  if contiguous and size > HUGE_PAGE:
    raise ValueError(f"a physically contiguous DMA buffer is at most one {HUGE_PAGE >> 20} MiB huge page; asked for {size:#x} bytes")
  flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE | MAP_LOCKED | (MAP_HUGETLB if contiguous else 0)
  try: mem = mmap.mmap(-1, size, flags=flags)
  except OSError as e:
    if contiguous:
      raise OSError(e.errno, "cannot allocate a 2 MiB huge page for contiguous DMA memory; reserve some with "
                    "`echo 16 > /proc/sys/vm/nr_hugepages` (as root)") from None
    raise OSError(e.errno, f"cannot lock {size} bytes of DMA memory ({e.strerror}); raise `ulimit -l` or run as root") from None
  view = memoryview(mem)
  base = host_address(mem)
  for off in range(0, size, PAGE): view[off] = 0   # fault every page in before asking for its PFN
  try: addrs = page_frames(base, size, page)
  except BaseException:
    view.release(); mem.close()
    raise

  def free():
    view.release()
    mem.close()
  return DMAMemory(view, addrs, page, free)
