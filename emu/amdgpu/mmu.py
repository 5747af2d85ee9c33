"""The GPU MMU (GCVM/MMVM, VMID 0): walks the real 4-level page tables for every GPU access.

Format (gfx10/gfx11, amdgpu_vm.h, gmc_v11_0.c; gfx12 moves fields, PTEFormat GFX12 below): PDB2 -> PDB1 -> PDB0 -> PTB, each a 4 KiB
table of 512 u64 entries indexed by VA bits 39/30/21/12 of the VA relative to the context start.
Entry bits: 0 VALID, 1 SYSTEM (address is a host bus address, else VRAM), 2 SNOOPED, 4 EXECUTABLE,
5 READABLE, 6 WRITEABLE, 7-11 FRAG, 12-47 address, 48-50 MTYPE, 54 PDE_PTE (a leaf above the PTB level).
What the walk acts on and checks:
- directory entries (PDEs): VALID, SYSTEM (the next table is in host memory), PDE_PTE on a PDB1/PDB0 entry (a 1 GiB /
  2 MiB leaf, its address aligned to that size). In this 4-level, block-size-0 mode the hardware has no use for
  translate-further (PTE_TF, bit 56) or a block fragment size (PDE_BFS, bits 59-63), and PDB2 has no leaves: such an
  entry is a PDE fault, as is a table address that is not 4 KiB aligned.
- leaves: READABLE for reads, WRITEABLE for writes, EXECUTABLE for instruction fetch (else a permission fault of that
  type); FRAG f says the aligned 2^(12+f)-byte run is contiguous: the translation is taken from the run's aligned base
  (as the hardware's TLB does, so a wrong FRAG maps wrong memory) and one TLB entry covers the run; MTYPE must be one
  gfx11 defines (NC 0, WC 1, CC 2, UC 3); a SYSTEM page must be SNOOPED (this model's host memory is the CPU's, reached
  coherently; a non-snooped mapping would read stale data on hardware). Other leaf bits (TMZ 3, PRT 51, 52-53, 55-63)
  are not modelled and raise.
- MTYPE is otherwise not acted on (there is no GPU L2 model) and the fault default/dummy pages are not used: a faulting
  access stops its engine.
Translations are cached per 4 KiB page (per fragment) until the driver invalidates the TLB. A cached SYSTEM page also
stays only while what its bus address reaches is unchanged (the DMA generation: host mappings, bus mastering, and the
PCI topology, so a peer's BAR that moved, stopped decoding or was unplugged is walked again and faults): the model keeps
host addresses where the hardware keeps bus addresses. Each cached run holds the memory behind it, so a command
processor's or SDMA's access in flight never touches memory a closed peer gave back (a shader dispatch keeps its own
runs for the dispatch: emu/memory.py).
Nothing translates until the hub's driver-programmed setup allows it (`set_enabled`: L1 TLB, L2, apertures; gmc.py).
MC addresses inside the hub's system aperture bypass the tables: those in the framebuffer are VRAM
(offset = address - FB base), those in an enabled AGP aperture are host bus addresses, any other aperture address faults.
"""
from __future__ import annotations
from dataclasses import dataclass
import ctypes
from typing import Callable

import numpy as np

from autogen.amd import amdgpu_vm as vm, soc21_enum
from emu.amdgpu.vram import VRAM
from emu.pci import ModelError, DMASpace, DMAFault

PTE_VALID, PTE_SYSTEM, PTE_SNOOPED = vm.AMDGPU_PTE_VALID, vm.AMDGPU_PTE_SYSTEM, vm.AMDGPU_PTE_SNOOPED
PTE_EXECUTABLE, PTE_READABLE, PTE_WRITEABLE = vm.AMDGPU_PTE_EXECUTABLE, vm.AMDGPU_PTE_READABLE, vm.AMDGPU_PTE_WRITEABLE
PDE_PTE = vm.AMDGPU_PDE_PTE
ADDR_MASK = ((1 << 48) - 1) & ~0xFFF
LEVEL_SHIFTS = (39, 30, 21, 12)
APERTURE_LEAF_MASK = (2 << 20) - 1
FRAG_SHIFT, FRAG_MASK = 7, 0x1F << 7
MTYPE_SHIFT, MTYPE_MASK = 48, vm.AMDGPU_PTE_MTYPE_NV10_MASK
MTYPES = {soc21_enum.MTYPE_NC: "NC", soc21_enum.MTYPE_WC: "WC", soc21_enum.MTYPE_CC: "CC", soc21_enum.MTYPE_UC: "UC"}
PTE_TF, PDE_BFS_MASK = 1 << 56, 0x1F << 59          # gfx9/translate-further bits (amdgpu_vm.h)


@dataclass(frozen=True)
class PTEFormat:
  """Where a generation's page-table entries keep the fields that move: MTYPE, the huge-leaf marker PDE_PTE, the
  block fragment size of a directory entry and translate-further (amdgpu_vm.h: *_NV10 / *_GFX12)."""
  name: str
  mtype_shift: int
  mtype_mask: int
  pde_pte: int
  pde_bfs_shift: int
  pte_tf: int         # 0: the generation has no translate-further bit

  @property
  def leaf_bits(self) -> int:
    return PTE_VALID | PTE_SYSTEM | PTE_SNOOPED | PTE_EXECUTABLE | PTE_READABLE | PTE_WRITEABLE | FRAG_MASK | ADDR_MASK | self.mtype_mask


GFX11 = PTEFormat("gfx11", MTYPE_SHIFT, MTYPE_MASK, PDE_PTE, 59, PTE_TF)
# gfx12 (gmc_v12_0.c): MTYPE in 54-55 (AMDGPU_PTE_MTYPE_GFX12), PDE_PTE at 63, PDE_BFS in 58-62; bit 56 is PRT there (not modelled)
GFX12 = PTEFormat("gfx12", 54, vm.AMDGPU_PTE_MTYPE_GFX12_MASK, vm.AMDGPU_PDE_PTE_GFX12, 58, 0)
LEAF_BITS = GFX11.leaf_bits
FORMATS = {f.name: f for f in (GFX11, GFX12)}
# fault types, as the hub's VM_L2_PROTECTION_FAULT_STATUS and the KFD fault event report them
FAULT_NOT_PRESENT, FAULT_READ, FAULT_WRITE, FAULT_EXECUTE = "not-present", "read", "write", "execute"
FAULT_RANGE, FAULT_PDE = "range", "pde"   # outside the context's window or aperture; a directory entry the walker rejects


@dataclass(frozen=True)
class Fault:
  va: int
  write: bool
  client: str
  reason: str
  kind: str = FAULT_NOT_PRESENT   # one of the FAULT_* types
  execute: bool = False           # an instruction fetch

  @property
  def permission(self) -> bool:
    """The page is mapped but does not allow the access (else nothing valid is mapped there)."""
    return self.kind in (FAULT_READ, FAULT_WRITE, FAULT_EXECUTE)

  def __str__(self) -> str:
    access = "instruction fetch" if self.execute else "write" if self.write else "read"
    return f"GPU page fault at {self.va:#x} ({access} by {self.client}): {self.reason}"


class GPUPageFault(RuntimeError):
  def __init__(self, fault: Fault):
    super().__init__(str(fault))
    self.fault = fault


class TranslationOff(ModelError):
  """A GPU access before the driver set the hub up (L1 TLB, L2, apertures): the hardware would not translate it."""


class MMUClient:
  """The MMU as one client sees it (the client's name goes into fault reports): the memory a ring engine fetches through."""
  def __init__(self, mmu: MMU, client: str):
    self.mmu, self.client = mmu, client

  def read(self, va: int, n: int) -> bytes: return self.mmu.read(va, n, self.client)
  def write(self, va: int, data: bytes | memoryview) -> None: self.mmu.write(va, data, self.client)
  def copy(self, dst: int, src: int, n: int) -> None: self.mmu.copy(dst, src, n, self.client)


class MMU:
  def __init__(self, vram: VRAM, dma: DMASpace, fmt: PTEFormat = GFX11):
    self.fmt = fmt
    self.vram, self.dma = vram, dma
    self.root: int | None = None          # VRAM address of the PDB2, None while the context is disabled
    self.start = self.end = 0             # VA window of context 0 (inclusive end)
    self.aperture: tuple[int, int, int, int] | None = None   # (low, high, fb first, fb last) MC addresses
    self.agp: tuple[int, int, int] | None = None              # (first, last MC address, bus address of the first)
    self.off: str | None = "the hub's L1 TLB and L2 are not set up"   # why nothing translates (None: translation on)
    # va page -> (run start va, run length, host addr, flags, DMA generation of a SYSTEM run (None: VRAM), its memory)
    self._tlb: dict[int, tuple[int, int, int, int, int | None, object]] = {}
    self.on_fault: Callable[[Fault], None] | None = None
    self.last_fault: Fault | None = None

  def client(self, name: str) -> MMUClient: return MMUClient(self, name)

  def set_enabled(self, why_not: str | None) -> None:
    """Translation on (None), or off with the reason every access then raises with."""
    self.off = why_not
    self.invalidate()

  def set_context(self, root: int | None, start: int = 0, end: int = 0) -> None:
    self.root, self.start, self.end = root, start, end
    self.invalidate()

  def set_aperture(self, low: int | None, high: int = 0, fb_base: int = 0, fb_top: int = 0,
                   agp: tuple[int, int, int] | None = None) -> None:
    """System aperture [low, high] (None: disabled), the framebuffer [fb_base, fb_top] and the AGP aperture
    (first, last, bus address of first; None: disabled) in MC addresses."""
    self.aperture = None if low is None else (low, high, fb_base, fb_top)
    self.agp = agp
    self.invalidate()

  def invalidate(self) -> None:
    self._tlb.clear()

  # --- the walk
  def _entry(self, table: int, system: bool, index: int) -> int:
    if system:
      return int.from_bytes(self.dma.read(table + index * 8, 8), "little")
    return self.vram.read64(table + index * 8)

  def _system_aperture(self, va: int) -> tuple[int, int, int, int] | tuple[str, str]:
    low, high, fb_base, fb_top = self.aperture
    rwx = PTE_VALID | PTE_READABLE | PTE_WRITEABLE | PTE_EXECUTABLE
    if fb_base <= va <= fb_top:
      base = va & ~APERTURE_LEAF_MASK   # the framebuffer is 16 MiB aligned: whole 2 MiB runs are VRAM
      return base, APERTURE_LEAF_MASK + 1, base - fb_base, rwx
    if self.agp is not None and self.agp[0] <= va <= self.agp[1]:
      page = va & ~0xFFF
      return page, 4096, self.agp[2] + page - self.agp[0], rwx | PTE_SYSTEM | PTE_SNOOPED
    return FAULT_RANGE, f"system aperture address outside the framebuffer [{fb_base:#x}, {fb_top:#x}]"

  def _walk(self, va: int) -> tuple[int, int, int, int] | tuple[str, str]:
    """-> (leaf va base, leaf size, physical address of the base, leaf entry), or (fault type, reason). A 4 KiB leaf
    without FRAG is widened to the run of following PTEs in its table that map contiguous addresses with the same flags
    (one TLB entry for them); a leaf with FRAG covers its fragment."""
    if self.aperture is not None and self.aperture[0] <= va <= self.aperture[1]: return self._system_aperture(va)
    if self.root is None: return FAULT_RANGE, "the VM context is not enabled"
    if not self.start <= va <= self.end: return FAULT_RANGE, f"outside the context's VA window [{self.start:#x}, {self.end:#x}]"
    rel, table, system = va - self.start, self.root, False
    for level, shift in enumerate(LEVEL_SHIFTS):
      try: e = self._entry(table, system, (rel >> shift) & 0x1FF)
      except (IndexError, DMAFault) as ex: return FAULT_PDE, f"page table at {table:#x} is not readable ({ex})"
      if not e & PTE_VALID: return FAULT_NOT_PRESENT, f"no valid entry at level {level} (table {table:#x})"
      leaf = level == 3 or bool(e & self.fmt.pde_pte)
      if not leaf:
        if (bad := pde_error(e, level, self.fmt)) is not None: return FAULT_PDE, f"level {level} entry {e:#x} (table {table:#x}): {bad}"
        table, system = e & ADDR_MASK, bool(e & PTE_SYSTEM)
        continue
      size = 1 << shift
      if level == 0: return FAULT_PDE, f"level 0 entry {e:#x} has PDE_PTE: the PDB2 has no leaves (at most 1 GiB pages)"
      if level < 3 and e & ADDR_MASK & (size - 1): return FAULT_PDE, f"level {level} leaf {e:#x}: address not aligned to its {size:#x} bytes"
      frag = max(size, 4096 << ((e & FRAG_MASK) >> FRAG_SHIFT))
      if frag > size or level < 3 or system:
        base = rel & ~(frag - 1)
        return self.start + base, frag, (e & ADDR_MASK) & ~(frag - 1), e
      idx = (rel >> 12) & 0x1FF
      following = self.vram.u64[(table >> 3) + idx:(table >> 3) + 512]
      expect = np.uint64(e) + np.arange(len(following), dtype=np.uint64) * np.uint64(4096)
      n = int(np.argmin(following == expect)) if not (following == expect).all() else len(following)
      return va & ~0xFFF, n * 4096, e & ADDR_MASK, e
    raise AssertionError("unreachable")

  def translate(self, va: int, write: bool, client: str = "shader", execute: bool = False) -> tuple[int, int, int] | None:
    """(run start va, run length, host address of the run) holding `va`, or None after reporting a fault."""
    hit = self._lookup(va, write, client, execute)
    if hit is not None and hit[2] is None:   # (the shader core's compiled code needs memory it can point at)
      return self._fault(va, write, f"the page is a peer's register BAR (bus address {hit[5] + (va - hit[0]):#x}), which "
                         f"{client} accesses are not modelled to reach", client, FAULT_NOT_PRESENT, execute)
    return None if hit is None else hit[:3]

  def _lookup(self, va: int, write: bool, client: str, execute: bool = False) -> tuple | None:
    """The TLB entry for `va` (see _tlb), walked where it is missing or stale; None after reporting a fault. Callers
    that access the run hold the entry meanwhile: its last element keeps the memory mapped."""
    if self.off is not None:
      raise TranslationOff(f"GPU {'fetch' if execute else 'write' if write else 'read'} at {va:#x} by {client}: {self.off}")
    hit = self._tlb.get(va >> 12)
    if hit is None or (hit[4] is not None and hit[4] != self.dma.generation[0]):
      walked = self._walk(va)
      if isinstance(walked[0], str): return self._fault(va, write, walked[1], client, walked[0], execute)
      base, size, phys, e = walked
      leaf_check(e, va, self.fmt)
      if e & PTE_SYSTEM:   # host memory: contiguous only as far as the bus run the host buffer backs
        page = va & ~0xFFF
        bus, gen = phys + (page - base), int(self.dma.generation[0])   # (read first: a change meanwhile walks again)
        try: bus_start, bus_len, host, keep = self.dma.host_run(bus)
        except DMAFault as ex: return self._fault(va, write, f"system page {bus:#x} is not mapped for DMA ({ex})", client, FAULT_NOT_PRESENT, execute)
        if host is None: keep = bus                  # a peer's register BAR: accesses go out one by one (emu/topology.py)
        else: host += bus - bus_start
        hit = (page, min(base + size - page, bus_start + bus_len - bus), host, e, gen, keep)
      else:
        if phys + size > self.vram.size:
          return self._fault(va, write, f"VRAM page {phys:#x} is beyond the end of VRAM", client, FAULT_NOT_PRESENT, execute)
        hit = (base, size, self.vram.host + phys, e, None, None)
      for p in range(hit[0] >> 12, (hit[0] + hit[1]) >> 12): self._tlb[p] = hit
    e = hit[3]
    need, kind, what = ((PTE_EXECUTABLE, FAULT_EXECUTE, "executable") if execute else
                        (PTE_WRITEABLE, FAULT_WRITE, "writeable") if write else (PTE_READABLE, FAULT_READ, "readable"))
    if not e & need: return self._fault(va, write, f"page is not {what} (PTE {e:#x})", client, kind, execute)
    return hit

  def _fault(self, va: int, write: bool, reason: str, client: str, kind: str, execute: bool = False) -> None:
    self.last_fault = Fault(va, write, client, reason, kind, execute)
    if self.on_fault is not None: self.on_fault(self.last_fault)
    return None

  def lookup(self, addr: int, write: bool) -> tuple[int, int, int] | None:
    """The shader core's (emu/amdgcn) memory interface (emu.memory.GpuMemory): data accesses (the TCP)."""
    return self.translate(addr, write, "shader")

  def fetch(self, addr: int) -> tuple[int, int, int] | None:
    """The shader core's instruction fetch (the SQC): the page must be EXECUTABLE."""
    return self.translate(addr, False, "SQC", execute=True)

  # --- byte access for the command processors and copy engines
  def _runs(self, va: int, n: int, write: bool, client: str):
    """(va, host address or None on a peer's register BAR, bus address there, bytes) of each run of [va, va + n), its
    TLB entry held while the caller accesses it."""
    while n > 0:
      run = self._lookup(va, write, client)
      if run is None: raise GPUPageFault(self.last_fault)
      start, length, host = run[:3]
      k = min(n, start + length - va)
      yield (va, None, run[5] + (va - start), k) if host is None else (va, host + (va - start), None, k)
      va, n = va + k, n - k

  def _peer(self, va: int, bus: int, write: bool, client: str, access):
    """One access to a peer's register (emu/topology.py); a bus error, or the peer refusing what it would not take
    (its model's strictness), is a fault of this access, reported like a page fault with the peer's words."""
    try: return access()
    except Exception as e:
      self._fault(va, write, f"the peer's register at bus address {bus:#x} refused the {'write' if write else 'read'}: {e}",
                  client, FAULT_NOT_PRESENT)
      raise GPUPageFault(self.last_fault) from e

  def read(self, va: int, n: int, client: str = "CP") -> bytes:
    return b"".join(ctypes.string_at(h, k) if h is not None else self._peer(v, bus, False, client, lambda: self.dma.read(bus, k))
                    for v, h, bus, k in self._runs(va, n, False, client))

  def copy(self, dst: int, src: int, n: int, client: str = "SDMA") -> None:
    """GPU-to-GPU copy of `n` bytes, run by run, straight between the backing host memory."""
    while n > 0:
      s_run, d_run = self._lookup(src, False, client), self._lookup(dst, True, client)   # (held across the memmove)
      if s_run is None or d_run is None: raise GPUPageFault(self.last_fault)
      (s_start, s_len, s_host), (d_start, d_len, d_host) = s_run[:3], d_run[:3]
      if s_host is None or d_host is None:
        raise ModelError(f"{client} copy of {n} bytes from {src:#x} to {dst:#x}: a copy to or from a peer's register BAR is not modelled")
      k = min(n, s_start + s_len - src, d_start + d_len - dst)
      ctypes.memmove(d_host + (dst - d_start), s_host + (src - s_start), k)
      src, dst, n = src + k, dst + k, n - k

  def write(self, va: int, data: bytes | memoryview, client: str = "CP") -> None:
    src = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    off = 0
    for v, h, bus, k in self._runs(va, src.size, True, client):
      if h is None: self._peer(v, bus, True, client, lambda: self.dma.write(bus, src[off:off + k].data))   # one register write
      else: ctypes.memmove(h, src.ctypes.data + off, k)
      off += k


def pde_error(e: int, level: int, fmt: PTEFormat = GFX11) -> str | None:
  """Why the walker rejects directory entry `e` of `level` (VALID set, not a leaf), or None."""
  if e & fmt.pte_tf: return "PTE_TF (translate further) is set, but context 0 runs 4-level tables with block size 0"
  if bfs := e >> fmt.pde_bfs_shift & 0x1F:
    return f"block fragment size {bfs} is set, but context 0 runs 4-level tables with block size 0"
  if e & 0xFC0: return "the next table's address is not 4 KiB aligned"
  if (e & fmt.mtype_mask) >> fmt.mtype_shift not in MTYPES: return f"MTYPE {(e & fmt.mtype_mask) >> fmt.mtype_shift} is reserved"
  return None


def leaf_check(e: int, va: int, fmt: PTEFormat = GFX11) -> None:
  """Raise for leaf bits this model cannot honour (see the module docstring)."""
  if e & ~fmt.leaf_bits & ~fmt.pde_pte:
    raise ModelError(f"PTE {e:#x} mapping {va:#x}: bits {e & ~fmt.leaf_bits & ~fmt.pde_pte:#x} (TMZ, PRT or reserved) are not modelled")
  if (mtype := (e & fmt.mtype_mask) >> fmt.mtype_shift) not in MTYPES:
    raise ModelError(f"PTE {e:#x} mapping {va:#x}: MTYPE {mtype} is reserved on {fmt.name} (NC 0, WC 1, CC 2, UC 3)")
  if e & PTE_SYSTEM and not e & PTE_SNOOPED:
    raise ModelError(f"PTE {e:#x} mapping {va:#x}: a SYSTEM page without SNOOPED is not coherent with the CPU's caches "
                     "(the GPU would read stale host memory); map host memory SYSTEM | SNOOPED")
