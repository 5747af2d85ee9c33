"""GPU memory management for the AM driver: VRAM partitioning, GPU virtual addresses, and the page tables (4 levels,
in the entry layout of the GPU's generation: pte.py, picked by ip_table.PTE). Everything runs in VMID 0.

VRAM layout: [0, 32 MiB) boot allocations (made in the same order on every boot, so a partial boot finds
firmware-owned structures where it left them), then general allocations up to the reserved top 64 MiB
(which holds the IP discovery table)."""
from __future__ import annotations
import numpy as np

from common.alloc import RangeAllocator
from drivers.amd.am.pte import PTELayout, SHIFTS, ADDR_MASK

PAGE = 4096
BOOT_SIZE = 32 << 20
RESERVED_TOP = 64 << 20
VA_BASE, VA_SIZE = 0x2000_0000_0000, 16 << 40       # the GPU VA window of context 0


class MemoryManager:
  def __init__(self, vram: np.ndarray, vram_size: int, pte: type[PTELayout], clear: bool = True):
    self.vram, self.vram_size, self.clear = vram, vram_size, clear    # `vram`: the BAR0 mapping as bytes
    self.pte = pte
    self.u64 = vram.view(np.uint64)
    self.boot = RangeAllocator(0, BOOT_SIZE, "boot VRAM")
    self.heap = RangeAllocator(BOOT_SIZE, vram_size - BOOT_SIZE - RESERVED_TOP, "VRAM")
    self.va = RangeAllocator(VA_BASE, VA_SIZE, "GPU virtual address space")
    self.booting = True
    self.root = self.palloc(PAGE, boot=True, zero=True)

  def palloc(self, size: int, align: int = PAGE, boot: bool = False, zero: bool = False) -> int:
    """Physical VRAM (an offset into VRAM)."""
    if boot and not self.booting: raise RuntimeError("boot-region VRAM can only be allocated while the GPU boots")
    size = -(-size // PAGE) * PAGE
    paddr = (self.boot if boot else self.heap).alloc(size, align)
    if zero and self.clear: self.vram[paddr:paddr + size] = 0
    return paddr

  def pfree(self, paddr: int) -> None: (self.boot if paddr < BOOT_SIZE else self.heap).free(paddr)

  # --- page tables
  def _ptb(self, va: int) -> int:
    rel, table = va - VA_BASE, self.root
    for shift in SHIFTS[:3]:
      slot = (table >> 3) + ((rel >> shift) & 0x1FF)
      e = int(self.u64[slot])
      if not e & self.pte.VALID:
        e = self.pte.pde(self.palloc(PAGE, zero=True))
        self.u64[slot] = e
      table = e & ADDR_MASK
    return table

  def map(self, va: int, pages: np.ndarray, system: bool, uncached: bool = False) -> None:
    """Point the 4 KiB pages at `va` to `pages` (VRAM offsets, or bus addresses when `system`)."""
    self._write(va, pages.astype(np.uint64) | np.uint64(self.pte.pte_flags(system, uncached)))

  def unmap(self, va: int, npages: int) -> None:
    self._write(va, np.zeros(npages, np.uint64))

  def _write(self, va: int, ptes: np.ndarray) -> None:
    i = 0
    while i < len(ptes):
      page = va + i * PAGE
      idx = ((page - VA_BASE) >> 12) & 0x1FF
      n = min(512 - idx, len(ptes) - i)
      ptb = self._ptb(page)
      self.u64[(ptb >> 3) + idx:(ptb >> 3) + idx + n] = ptes[i:i + n]
      i += n

  def mapped_vram(self) -> int:
    """Bytes of VRAM the page tables map (valid leaves that are not system memory): what is in use on the GPU,
    whichever process mapped it."""
    def walk(table: int, level: int) -> int:
      entries = self.u64[table >> 3:(table >> 3) + 512]
      valid = entries[(entries & np.uint64(self.pte.VALID)) != 0]
      if level == 3: return int(((valid & np.uint64(self.pte.SYSTEM)) == 0).sum()) * PAGE
      total = 0
      for e in (int(x) for x in valid):
        if e & self.pte.PDE_PTE: total += 0 if e & self.pte.SYSTEM else 1 << SHIFTS[level]
        elif (e & ADDR_MASK) + PAGE <= self.vram_size: total += walk(e & ADDR_MASK, level + 1)
      return total
    return walk(self.root, 0)
