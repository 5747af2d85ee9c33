"""A queue buffer the driver gave the device as a page list (`pas`, big-endian 64-bit page addresses; mlx5_ifc.h
create_eq_in/create_cq_in/create_qp_in `pas`): pages of 4 KiB << log_page_size, each aligned to its size; bytes past
a page's end continue in the next page."""
from __future__ import annotations

from emu.pci import DMASpace


def page_list(raw: bytes, n: int) -> list[int]:
  return [int.from_bytes(raw[8 * i:8 * i + 8], "big") for i in range(n)]


class PagedBuffer:
  def __init__(self, dma: DMASpace, pages: list[int], page_size: int, nbytes: int):
    self.dma, self.pages, self.page_size, self.nbytes = dma, pages, page_size, nbytes

  def _runs(self, off: int, n: int):
    while n > 0:
      page, within = divmod(off, self.page_size)
      k = min(n, self.page_size - within)
      yield self.pages[page] + within, k
      off, n = off + k, n - k

  def read(self, off: int, n: int) -> bytes:
    page, within = divmod(off, self.page_size)
    if within + n <= self.page_size: return self.dma.read(self.pages[page] + within, n)   # (within one page)
    return b"".join(self.dma.read(a, k) for a, k in self._runs(off, n))

  def write(self, off: int, data: bytes) -> None:
    pos = 0
    for a, k in self._runs(off, len(data)):
      self.dma.write(a, data[pos:pos + k])
      pos += k


def check_pages(pages: list[int], page_size: int) -> str | None:
  """Why the hardware cannot use this page list, or None."""
  for i, p in enumerate(pages):
    if p % page_size: return f"pas[{i}] {p:#x} is not aligned to the {page_size}-byte page size"
  return None
