"""Page buffer lists: how a driver hands the NIC memory that is several pages (rings, context memory, MRs), and the
rings built on them. Facts: roce_hsi.h / bnxt_hsi.h (PTU_PTE_*, PTU_PDE_*, the *_LVL_* fields); kernel qplib_res.c
bnxt_qplib_alloc_init_hwq for how levels are laid out.

Level 0: the base address is the one data page. Level 1: the base is a page of 64-bit PTEs, one per data page.
Level 2: the base is a page of PDEs, each naming a page of PTEs. Every PTE/PDE the NIC reads must have its VALID
bit (bit 0) and its unused bits (3-11) clear; the page address is the entry with its low 12 bits cleared and must be
aligned to the page size. Rings the RoCE firmware creates (SQ, RQ, CQ: the kernel's HWQ_TYPE_QUEUE) mark the PTE of
the last page LAST (bit 1) and the one before it NEXT_TO_LAST (bit 2), and no other PTE carries either: the hardware
wraps the ring at LAST (`ring=True`). HWRM rings may carry the marks (bnxt_en's rings do, the RoCE driver's CREQ and
NQ do not): where they are, they must be on those pages (`ring=None`). Context memory, the CMDQ and MRs carry none
(`ring=False`). A PBL page holds 512 entries (4 KiB).
"""
from __future__ import annotations

from autogen.bnxt import PTU_PTE_VALID, PTU_PTE_LAST, PTU_PTE_NEXT_TO_LAST, PTU_PTE_UNUSED_MASK, PTU_PDE_VALID
from emu.pci import DMASpace

PBL_PAGE = 4096
ENTRIES = PBL_PAGE // 8


class PBLError(ValueError):
  """A page list the hardware cannot use; the message names the entry."""


def _entries(dma: DMASpace, addr: int, n: int, what: str) -> list[int]:
  if addr % 8: raise PBLError(f"{what}: page table at {addr:#x} is not 8-byte aligned")
  raw = dma.read(addr, 8 * n)
  return [int.from_bytes(raw[i:i + 8], "little") for i in range(0, 8 * n, 8)]


def walk(dma: DMASpace, base: int, level: int, npages: int, page_size: int = 4096, ring: bool | None = False,
         what: str = "PBL") -> list[int]:
  """The bus addresses of the `npages` data pages described by a level-`level` PBL rooted at `base`."""
  if npages < 1: raise PBLError(f"{what}: describes no page")
  if level == 0:
    if npages != 1: raise PBLError(f"{what}: level 0 names one page, but {npages} pages of {page_size} bytes are needed")
    pages = [base]
  elif level == 1:
    if npages > ENTRIES: raise PBLError(f"{what}: {npages} pages need a level-2 PBL (a level-1 page holds {ENTRIES} PTEs)")
    pages = _ptes(_entries(dma, base, npages, what), ring, what)
  elif level == 2:
    if npages > ENTRIES * ENTRIES: raise PBLError(f"{what}: {npages} pages exceed a level-2 PBL")
    pdes = _entries(dma, base, -(-npages // ENTRIES), what)
    ptes = []
    for i, pde in enumerate(pdes):
      if not pde & PTU_PDE_VALID: raise PBLError(f"{what}: PDE {i} ({pde:#x}) at {base + 8 * i:#x} lacks its VALID bit")
      ptes += _entries(dma, pde & ~0xFFF, min(ENTRIES, npages - i * ENTRIES), what)
    pages = _ptes(ptes, ring, what)
  else: raise PBLError(f"{what}: PBL level {level} (levels are 0, 1 and 2)")
  for i, p in enumerate(pages):
    if p % page_size: raise PBLError(f"{what}: page {i} at {p:#x} is not aligned to its {page_size}-byte page size")
  return pages


def _ptes(ptes: list[int], ring: bool | None, what: str) -> list[int]:
  n = len(ptes)
  marked = ring is True or (ring is None and any(p & (PTU_PTE_LAST | PTU_PTE_NEXT_TO_LAST) for p in ptes))
  for i, pte in enumerate(ptes):
    if not pte & PTU_PTE_VALID: raise PBLError(f"{what}: PTE {i} ({pte:#x}) lacks its VALID bit")
    if pte & PTU_PTE_UNUSED_MASK: raise PBLError(f"{what}: PTE {i} ({pte:#x}) has unused bits 3-11 set")
    last, ntl = bool(pte & PTU_PTE_LAST), bool(pte & PTU_PTE_NEXT_TO_LAST)
    if not marked and (last or ntl): raise PBLError(f"{what}: PTE {i} ({pte:#x}) has a ring mark (LAST/NEXT_TO_LAST) in a PBL that is no ring")
    if marked and last != (i == n - 1): raise PBLError(f"{what}: PTE {i} of {n} {'has' if last else 'lacks'} the LAST bit (the ring wraps at it)")
    if marked and ntl != (i == n - 2): raise PBLError(f"{what}: PTE {i} of {n} {'has' if ntl else 'lacks'} the NEXT_TO_LAST bit")
  return [pte & ~0xFFF for pte in ptes]


class HostRing:
  """A ring of `depth` entries of `stride` bytes in the pages of a PBL (entries never straddle a page when the
  stride divides the page size, as every bnxt ring's does)."""
  def __init__(self, dma: DMASpace, pages: list[int], page_size: int, depth: int, stride: int, what: str):
    if depth < 1: raise PBLError(f"{what}: a ring of {depth} entries")
    if depth * stride > len(pages) * page_size:
      raise PBLError(f"{what}: {depth} entries of {stride} bytes need {depth * stride} bytes, its pages hold {len(pages) * page_size}")
    self.dma, self.pages, self.page_size, self.depth, self.stride, self.what = dma, pages, page_size, depth, stride, what

  def addr(self, byte_offset: int) -> int:
    """Bus address of a byte offset into the ring's memory (which may run past the ring into aux pages)."""
    page, off = divmod(byte_offset, self.page_size)
    if page >= len(self.pages): raise PBLError(f"{self.what}: offset {byte_offset:#x} is past its {len(self.pages)} pages")
    return self.pages[page] + off

  def entry(self, i: int) -> int: return self.addr((i % self.depth) * self.stride)
  def read(self, i: int, n: int | None = None) -> bytes: return self.dma.read(self.entry(i), self.stride if n is None else n)
  def write(self, i: int, data: bytes) -> None: self.dma.write(self.entry(i), data)

  def valid_bit(self, i: int) -> int:
    """The phase bit of entry `i` (a monotonic count): 1 during even passes over the ring, 0 during odd ones (the
    CQE toggle, CREQ and NQ valid bits; kernel CREQ_CMP_VALID / CQE_CMP_VALID)."""
    return ((i // self.depth) & 1) ^ 1
