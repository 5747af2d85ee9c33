"""A page-table entry layout: what one generation's PTEs and PDEs hold (amdgpu_vm.h AMDGPU_PTE_*/AMDGPU_PDE_*). The
bits every layout shares are here; each layout module (pte_gfx11, pte_gfx12) gives where MTYPE and the huge-leaf marker
sit, and ip_table.PTE picks one by the GC version. Tables are 4-level (PDB2 -> PDB1 -> PDB0 -> PTB, 512 entries of
8 bytes each), with 4 KiB leaves in the PTB."""
from __future__ import annotations
from autogen.amd import amdgpu_vm as vm

SHIFTS = (39, 30, 21, 12)                           # the VA bits each level indexes: PDB2, PDB1, PDB0, PTB
ADDR_MASK = ((1 << 48) - 1) & ~0xFFF                # bits 12-47: the page (or next table) address
LEAF = vm.AMDGPU_PTE_VALID | vm.AMDGPU_PTE_READABLE | vm.AMDGPU_PTE_WRITEABLE | vm.AMDGPU_PTE_EXECUTABLE


class PTELayout:
  VALID, SYSTEM, SNOOPED = vm.AMDGPU_PTE_VALID, vm.AMDGPU_PTE_SYSTEM, vm.AMDGPU_PTE_SNOOPED
  MTYPE_MASK: int                                   # the MTYPE field
  MTYPE_UC: int                                     # the uncached MTYPE (the SoC's MTYPE enumeration)
  PDE_PTE: int                                      # on a directory entry: it is a leaf (a huge page), not a table

  @classmethod
  def mtype(cls, value: int) -> int:
    """The MTYPE field holding `value`."""
    shift = (cls.MTYPE_MASK & -cls.MTYPE_MASK).bit_length() - 1
    if value << shift & ~cls.MTYPE_MASK: raise ValueError(f"MTYPE {value} does not fit the {cls.MTYPE_MASK:#x} field")
    return value << shift

  @classmethod
  def pde(cls, table: int) -> int:
    """The directory entry of a next-level table in VRAM: VALID and its address; no R/W/X, no PDE_PTE (4 KiB leaves
    only), no translate-further bits (4-level tables, block size 0)."""
    return table | cls.VALID

  @classmethod
  def pte_flags(cls, system: bool, uncached: bool) -> int:
    """The flags of a 4 KiB leaf: VALID | R | W | X, host memory SYSTEM | SNOOPED (coherent with the CPU), uncached
    memory MTYPE_UC (else MTYPE 0, NC), FRAG 0."""
    return LEAF | (cls.SYSTEM | cls.SNOOPED if system else 0) | (cls.mtype(cls.MTYPE_UC) if uncached else 0)
