"""The GPU MMU (GCVM/MMVM, VMID 0): walks the real 4-level page tables for every GPU access.

Format (gfx10/gfx11, amdgpu_vm.h; reference/amd_driver.md 2.6): PDB2 -> PDB1 -> PDB0 -> PTB, each a 4 KiB
table of 512 u64 entries indexed by VA bits 39/30/21/12 of the VA relative to the context start.
Entry bits: 0 VALID, 1 SYSTEM (address is a host bus address, else VRAM), 2 SNOOPED, 4 EXECUTABLE,
5 READABLE, 6 WRITEABLE, 7-11 FRAG, 12-47 address, 48-50 MTYPE, 54 PDE_PTE (a leaf above the PTB level).
Translations are cached per 4 KiB page until the driver invalidates the TLB.
MC addresses inside the hub's system aperture bypass the tables: those in the framebuffer are VRAM
(offset = address - FB base), any other aperture address faults.
"""
from __future__ import annotations
from dataclasses import dataclass
import ctypes
from typing import Callable

import numpy as np

from autogen.amd import amdgpu_vm as vm
from emu.amdgpu.vram import VRAM
from emu.pci import DMASpace, DMAFault

PTE_VALID, PTE_SYSTEM, PTE_SNOOPED = vm.AMDGPU_PTE_VALID, vm.AMDGPU_PTE_SYSTEM, vm.AMDGPU_PTE_SNOOPED
PTE_EXECUTABLE, PTE_READABLE, PTE_WRITEABLE = vm.AMDGPU_PTE_EXECUTABLE, vm.AMDGPU_PTE_READABLE, vm.AMDGPU_PTE_WRITEABLE
PDE_PTE = vm.AMDGPU_PDE_PTE
ADDR_MASK = ((1 << 48) - 1) & ~0xFFF
LEVEL_SHIFTS = (39, 30, 21, 12)
APERTURE_LEAF_MASK = (2 << 20) - 1


@dataclass(frozen=True)
class Fault:
  va: int
  write: bool
  client: str
  reason: str
  permission: bool = False     # the page is mapped but not readable/writeable (else nothing valid is mapped)
  execute: bool = False        # an instruction fetch (a permission fault then means the page is not EXECUTABLE)

  def __str__(self) -> str:
    return f"GPU page fault at {self.va:#x} ({'write' if self.write else 'read'} by {self.client}): {self.reason}"


class GPUPageFault(RuntimeError):
  def __init__(self, fault: Fault):
    super().__init__(str(fault))
    self.fault = fault


class MMUClient:
  """The MMU as one client sees it (the client's name goes into fault reports): the memory a ring engine fetches through."""
  def __init__(self, mmu: MMU, client: str):
    self.mmu, self.client = mmu, client

  def read(self, va: int, n: int) -> bytes: return self.mmu.read(va, n, self.client)
  def write(self, va: int, data: bytes | memoryview) -> None: self.mmu.write(va, data, self.client)
  def copy(self, dst: int, src: int, n: int) -> None: self.mmu.copy(dst, src, n, self.client)


class MMU:
  def __init__(self, vram: VRAM, dma: DMASpace):
    self.vram, self.dma = vram, dma
    self.root: int | None = None          # VRAM address of the PDB2, None while the context is disabled
    self.start = self.end = 0             # VA window of context 0 (inclusive end)
    self.aperture: tuple[int, int, int, int] | None = None   # (low, high, fb first, fb last) MC addresses
    self._tlb: dict[int, tuple[int, int, int, int]] = {}   # va page -> (run start va, run length, host addr, flags)
    self.on_fault: Callable[[Fault], None] | None = None
    self.last_fault: Fault | None = None

  def client(self, name: str) -> MMUClient: return MMUClient(self, name)

  def set_context(self, root: int | None, start: int = 0, end: int = 0) -> None:
    self.root, self.start, self.end = root, start, end
    self.invalidate()

  def set_aperture(self, low: int | None, high: int = 0, fb_base: int = 0, fb_top: int = 0) -> None:
    """System aperture [low, high] (None: disabled) and the framebuffer [fb_base, fb_top] in MC addresses."""
    self.aperture = None if low is None else (low, high, fb_base, fb_top)
    self.invalidate()

  def invalidate(self) -> None:
    self._tlb.clear()

  # --- the walk
  def _entry(self, table: int, system: bool, index: int) -> int:
    if system:
      return int.from_bytes(self.dma.read(table + index * 8, 8), "little")
    return self.vram.read64(table + index * 8)

  def _walk(self, va: int) -> tuple[int, int, int] | str:
    """-> (leaf va base, leaf size, leaf entry), or the reason the walk failed. A 4 KiB leaf is widened to the run
    of following PTEs in its table that map contiguous addresses with the same flags (one TLB entry for them)."""
    if self.aperture is not None and self.aperture[0] <= va <= self.aperture[1]:
      low, high, fb_base, fb_top = self.aperture
      if not fb_base <= va <= fb_top: return f"system aperture address outside the framebuffer [{fb_base:#x}, {fb_top:#x}]"
      base = va & ~APERTURE_LEAF_MASK   # the framebuffer is 16 MiB aligned: whole 2 MiB runs are VRAM
      return base, APERTURE_LEAF_MASK + 1, (base - fb_base) | PTE_VALID | PTE_READABLE | PTE_WRITEABLE | PTE_EXECUTABLE
    if self.root is None: return "the VM context is not enabled"
    if not self.start <= va <= self.end: return f"outside the context's VA window [{self.start:#x}, {self.end:#x}]"
    rel, table, system = va - self.start, self.root, False
    for level, shift in enumerate(LEVEL_SHIFTS):
      try: e = self._entry(table, system, (rel >> shift) & 0x1FF)
      except (IndexError, DMAFault) as ex: return f"page table at {table:#x} is not readable ({ex})"
      if not e & PTE_VALID: return f"no valid entry at level {level} (table {table:#x})"
      if level == 3 and not system:
        idx = (rel >> 12) & 0x1FF
        following = self.vram.u64[(table >> 3) + idx:(table >> 3) + 512]
        expect = np.uint64(e) + np.arange(len(following), dtype=np.uint64) * np.uint64(4096)
        n = int(np.argmin(following == expect)) if not (following == expect).all() else len(following)
        return va & ~0xFFF, n * 4096, e
      if level == 3 or e & PDE_PTE:
        size = 1 << shift
        return va & ~(size - 1), size, e
      table, system = e & ADDR_MASK, bool(e & PTE_SYSTEM)
    raise AssertionError("unreachable")

  def translate(self, va: int, write: bool, client: str = "shader") -> tuple[int, int, int] | None:
    """(run start va, run length, host address of the run) holding `va`, or None after reporting a fault."""
    hit = self._tlb.get(va >> 12)
    if hit is None:
      walked = self._walk(va)
      if isinstance(walked, str): return self._fault(va, write, walked, client)
      base, size, e = walked
      phys = (e & ADDR_MASK) & ~(min(size, 1 << 30) - 1) if size > 4096 and e & PDE_PTE else e & ADDR_MASK
      if e & PTE_SYSTEM:   # host memory: contiguous only as far as the bus run the host buffer backs
        page = va & ~0xFFF
        bus = phys + (page - base)
        try: bus_start, bus_len, host = self.dma.host_run(bus)
        except DMAFault as ex: return self._fault(va, write, f"system page {bus:#x} is not mapped for DMA ({ex})", client)
        hit = (page, min(base + size - page, bus_start + bus_len - bus), host + (bus - bus_start), e)
      else:
        if phys + size > self.vram.size: return self._fault(va, write, f"VRAM page {phys:#x} is beyond the end of VRAM", client)
        hit = (base, size, self.vram.host + phys, e)
      for p in range(hit[0] >> 12, (hit[0] + hit[1]) >> 12): self._tlb[p] = hit
    start, length, host, e = hit
    if not e & PTE_READABLE or (write and not e & PTE_WRITEABLE):
      return self._fault(va, write, f"page is {'not writeable' if write else 'not readable'} (PTE {e:#x})", client, True)
    return start, length, host

  def _fault(self, va: int, write: bool, reason: str, client: str, permission: bool = False) -> None:
    self.last_fault = Fault(va, write, client, reason, permission)
    if self.on_fault is not None: self.on_fault(self.last_fault)
    return None

  def lookup(self, addr: int, write: bool) -> tuple[int, int, int] | None:
    """The rdna3 shader core's memory interface (emu.rdna3.memory.GpuMemory)."""
    return self.translate(addr, write, "shader")

  # --- byte access for the command processors and copy engines
  def _runs(self, va: int, n: int, write: bool, client: str):
    while n > 0:
      run = self.translate(va, write, client)
      if run is None: raise GPUPageFault(self.last_fault)
      start, length, host = run
      k = min(n, start + length - va)
      yield host + (va - start), k
      va, n = va + k, n - k

  def read(self, va: int, n: int, client: str = "CP") -> bytes:
    return b"".join(ctypes.string_at(h, k) for h, k in self._runs(va, n, False, client))

  def copy(self, dst: int, src: int, n: int, client: str = "SDMA") -> None:
    """GPU-to-GPU copy of `n` bytes, run by run, straight between the backing host memory."""
    while n > 0:
      s_run, d_run = self.translate(src, False, client), self.translate(dst, True, client)
      if s_run is None or d_run is None: raise GPUPageFault(self.last_fault)
      (s_start, s_len, s_host), (d_start, d_len, d_host) = s_run, d_run
      k = min(n, s_start + s_len - src, d_start + d_len - dst)
      ctypes.memmove(d_host + (dst - d_start), s_host + (src - s_start), k)
      src, dst, n = src + k, dst + k, n - k

  def write(self, va: int, data: bytes | memoryview, client: str = "CP") -> None:
    src = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    off = 0
    for h, k in self._runs(va, src.size, True, client):
      ctypes.memmove(h, src.ctypes.data + off, k)
      off += k
