"""GPU memory management for the AM driver: VRAM partitioning, GPU virtual addresses, and the page tables
(gfx11 4-level format: amdgpu_vm.h AMDGPU_PTE_*/AMDGPU_PDE_*, gmc_v11_0.c). Everything runs in VMID 0.

VRAM layout: [0, 32 MiB) boot allocations (made in the same order on every boot, so a partial boot finds
firmware-owned structures where it left them), then general allocations up to the reserved top 64 MiB
(which holds the IP discovery table)."""
from __future__ import annotations
import numpy as np

from autogen.amd import amdgpu_vm as vm, soc21_enum
from common.alloc import RangeAllocator

PAGE = 4096
BOOT_SIZE = 32 << 20
RESERVED_TOP = 64 << 20
VA_BASE, VA_SIZE = 0x2000_0000_0000, 16 << 40       # the GPU VA window of context 0
ADDR_MASK = ((1 << 48) - 1) & ~0xFFF
SHIFTS = (39, 30, 21, 12)                           # PDB2, PDB1, PDB0, PTB
MTYPE_SHIFT = (vm.AMDGPU_PTE_MTYPE_NV10_MASK & -vm.AMDGPU_PTE_MTYPE_NV10_MASK).bit_length() - 1   # bits 48-50 (amdgpu_vm.h)
LEAF = vm.AMDGPU_PTE_VALID | vm.AMDGPU_PTE_READABLE | vm.AMDGPU_PTE_WRITEABLE | vm.AMDGPU_PTE_EXECUTABLE


class MemoryManager:
  def __init__(self, vram: np.ndarray, vram_size: int, clear: bool = True):
    self.vram, self.vram_size, self.clear = vram, vram_size, clear    # `vram`: the BAR0 mapping as bytes
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
      if not e & vm.AMDGPU_PTE_VALID:
        e = self.pde(self.palloc(PAGE, zero=True))
        self.u64[slot] = e
      table = e & ADDR_MASK
    return table

  @staticmethod
  def pde(table: int) -> int:
    """The directory entry of a next-level table in VRAM: VALID and its address; no R/W/X, no PDE_PTE (4 KiB leaves
    only), no translate-further bits (4-level tables, block size 0). amd_driver.md 2.6."""
    return table | vm.AMDGPU_PTE_VALID

  @staticmethod
  def pte_flags(system: bool, uncached: bool) -> int:
    """The flags of a 4 KiB leaf: VALID | R | W | X, host memory SYSTEM | SNOOPED (coherent with the CPU), uncached
    memory MTYPE_UC (else MTYPE 0, NC), FRAG 0. amd_driver.md 2.6."""
    return LEAF | (vm.AMDGPU_PTE_SYSTEM | vm.AMDGPU_PTE_SNOOPED if system else 0) | ((soc21_enum.MTYPE_UC << MTYPE_SHIFT) if uncached else 0)

  def map(self, va: int, pages: np.ndarray, system: bool, uncached: bool = False) -> None:
    """Point the 4 KiB pages at `va` to `pages` (VRAM offsets, or bus addresses when `system`)."""
    self._write(va, pages.astype(np.uint64) | np.uint64(self.pte_flags(system, uncached)))

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
      valid = entries[(entries & np.uint64(vm.AMDGPU_PTE_VALID)) != 0]
      if level == 3: return int(((valid & np.uint64(vm.AMDGPU_PTE_SYSTEM)) == 0).sum()) * PAGE
      total = 0
      for e in (int(x) for x in valid):
        if e & vm.AMDGPU_PDE_PTE: total += 0 if e & vm.AMDGPU_PTE_SYSTEM else 1 << SHIFTS[level]
        elif (e & ADDR_MASK) + PAGE <= self.vram_size: total += walk(e & ADDR_MASK, level + 1)
      return total
    return walk(self.root, 0)
