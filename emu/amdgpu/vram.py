"""Device memory (VRAM) of the emulated GPU.

One shared mapping of a sparse file: pages cost host memory only once touched, and because the file
outlives the process, a second driver instance (or `am_smi`) finds the device exactly as the previous
one left it, as with real VRAM across processes. Without a path the VRAM is private to this process.
"""
from __future__ import annotations
import ctypes, mmap, os
import numpy as np


def map_file(path: str | None, size: int) -> mmap.mmap:
  """`size` bytes of device memory: a shared mapping of the (sparse) file at `path`, created or resized as needed,
  or private zero-filled memory without a path. Either way pages cost host memory only once touched."""
  if path is None: return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0))
  fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
  try:
    if os.fstat(fd).st_size != size: os.ftruncate(fd, size)
    return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
  finally: os.close(fd)


class VRAM:
  def __init__(self, size: int, path: str | None = None):
    self.size, self.path = size, path
    self._mm = map_file(path, size)
    self.view = memoryview(self._mm)
    self.u8 = np.frombuffer(self._mm, np.uint8)
    self.u64 = self.u8.view(np.uint64)
    self.host = ctypes.addressof(ctypes.c_char.from_buffer(self._mm))

  def check(self, paddr: int, n: int) -> None:
    if paddr < 0 or paddr + n > self.size:
      raise IndexError(f"VRAM access [{paddr:#x}, +{n:#x}) is outside the {self.size >> 20} MiB of VRAM")

  def read(self, paddr: int, n: int) -> bytes:
    self.check(paddr, n)
    return bytes(self.view[paddr:paddr + n])

  def write(self, paddr: int, data: bytes | memoryview) -> None:
    data = memoryview(data).cast("B")
    self.check(paddr, data.nbytes)
    self.view[paddr:paddr + data.nbytes] = data

  def read64(self, paddr: int) -> int:
    self.check(paddr, 8)
    return int(self.u64[paddr >> 3])
