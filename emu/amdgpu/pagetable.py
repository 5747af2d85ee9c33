"""Writing gfx11 GPU page tables into emulated VRAM.

Used by the KFD model, which plays the role of the kernel driver: it owns the VM of its process and
keeps real 4-level tables (the format emu/amdgpu/mmu.py walks) for every buffer it maps.
"""
from __future__ import annotations
import numpy as np

from common.alloc import RangeAllocator
from emu.amdgpu.vram import VRAM
from emu.amdgpu.mmu import PTE_VALID, ADDR_MASK, LEVEL_SHIFTS

PAGE = 4096


class PageTables:
  """A 4-level page-table tree rooted in VRAM; maps runs of 4 KiB pages."""
  def __init__(self, vram: VRAM, alloc: RangeAllocator, start: int = 0):
    self.vram, self.alloc, self.start = vram, alloc, start
    self.root = self._new_table()
    self.tables = [self.root]

  def _new_table(self) -> int:
    t = self.alloc.alloc(PAGE, PAGE)   # a table is one 4 KiB page of 512 PTEs, page aligned
    self.vram.u64[t >> 3:(t >> 3) + 512] = 0
    return t

  def _ptb(self, va: int) -> int:
    """VRAM address of the PTB covering `va`, creating directories on the way."""
    rel, table = va - self.start, self.root
    for shift in LEVEL_SHIFTS[:3]:
      slot = (table >> 3) + ((rel >> shift) & 0x1FF)
      e = int(self.vram.u64[slot])
      if not e & PTE_VALID:
        nxt = self._new_table()
        self.tables.append(nxt)
        self.vram.u64[slot] = nxt | PTE_VALID
        e = nxt | PTE_VALID
      table = e & ADDR_MASK
    return table

  def map(self, va: int, ptes: np.ndarray) -> None:
    """Write one PTE per 4 KiB page starting at `va` (page aligned)."""
    i = 0
    while i < len(ptes):
      page = va + i * PAGE
      idx = ((page - self.start) >> 12) & 0x1FF
      n = min(512 - idx, len(ptes) - i)
      ptb = self._ptb(page)
      self.vram.u64[(ptb >> 3) + idx:(ptb >> 3) + idx + n] = ptes[i:i + n]
      i += n

  def unmap(self, va: int, pages: int) -> None:
    self.map(va, np.zeros(pages, np.uint64))
