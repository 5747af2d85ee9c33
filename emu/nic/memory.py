"""Host memory as a NIC function reaches it, vendor-neutral: DMA only with bus mastering on, and the translation an
MR's key names (its pages, in order) as the rc.Region the transport reads and writes."""
from __future__ import annotations

from emu.nic import rc
from emu.pci import DMAFault, DMASpace, PCIFunction


class HostMemory(DMASpace):
  """Host memory as the function reaches it over PCIe: only with bus mastering on (PCI_COMMAND bit 2)."""
  def __init__(self, fn: PCIFunction):
    super().__init__()
    self.fn = fn

  def _locate(self, addr: int, n: int):
    if self.fn.bus_master: return super()._locate(addr, n)
    raise DMAFault(f"{self.fn.bus}: DMA to bus address {addr:#x} while bus mastering is off (PCI_COMMAND bit 2)")


def mr_region(dma, key: int, va: int, length: int, access: int, pages: list[int], page_size: int, first: int) -> rc.Region:
  """The region an MR's key names: byte 0 of [va, va + length) at offset `first` of pages[0], the rest in order."""
  def chunks(a: int, n: int) -> list[memoryview]:
    off, out = a - va + first, []
    while n > 0:
      page, within = divmod(off, page_size)
      k = min(n, page_size - within)
      out.append(dma.view(pages[page] + within, k))
      off, n = off + k, n - k
    return out
  return rc.Region(key, va, length, access, chunks, dma.generation)
