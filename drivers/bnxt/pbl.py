"""Page tables (PBLs) through which the NIC finds the pages of a ring, a context block or an MR, and the DMA memory
of hardware queues (kernel qplib_res.c bnxt_qplib_alloc_init_hwq).

Level 0: the one page itself. Level 1: a page of up to 512 PTEs (u64: page address | PTU_PTE_VALID). Level 2: a page
of up to 512 PDEs (1 << MAX_PDL_LVL_SHIFT, qplib_res.h: page address | PTU_PDE_VALID), each naming a level-1 table page:
512 * 512 pages, 1 GiB of 4 KiB pages. In a queue's table the last PTE also carries PTU_PTE_LAST and the one before it
PTU_PTE_NEXT_TO_LAST, which is how the hardware knows where the ring wraps.
"""
from __future__ import annotations
from dataclasses import dataclass, field

import numpy as np

from autogen import bnxt as bnxt_hsi, bnxt_re
from drivers.system.dma import DMAMemory, PAGE
from drivers.system.pci import PCIDevice

PTES = PAGE // 8                 # PTEs per table page (MAX_PBL_LVL_1_PGS)
PDES = 1 << bnxt_re.MAX_PDL_LVL_SHIFT  # PDEs in a level-2 table's top page
MAX_PAGES = PDES * PTES          # the most pages a page table names


@dataclass
class PageTable:
  level: int                     # PBL_LVL_0 / _1 / _2
  base: int                      # what the hardware is given: the page (level 0) or the top table page
  tables: list[DMAMemory] = field(default_factory=list)

  def free(self, pci: PCIDevice) -> None:
    for t in self.tables: pci.free_dma(t)
    self.tables.clear()


def page_table(pci: PCIDevice, pages: list[int], queue: bool = False) -> PageTable:
  """The PBL over `pages` (bus addresses): level 0 for one page, 1 for up to 512, 2 for up to 512 * 512."""
  if not pages: raise ValueError("a page table needs at least one page")
  if len(pages) > MAX_PAGES:
    raise ValueError(f"{len(pages)} pages are more than a level-2 page table holds ({MAX_PAGES}: {PDES} PDEs of {PTES} PTEs); "
                     "register less, or memory in larger pages")
  if len(pages) == bnxt_re.MAX_PBL_LVL_0_PGS: return PageTable(bnxt_re.PBL_LVL_0, pages[0])
  ptes = np.array(pages, np.uint64) | bnxt_hsi.PTU_PTE_VALID
  if queue:
    ptes[-1] |= bnxt_hsi.PTU_PTE_LAST
    if len(ptes) > 1: ptes[-2] |= bnxt_hsi.PTU_PTE_NEXT_TO_LAST
  tables = [_table(pci, ptes[i:i + PTES]) for i in range(0, len(ptes), PTES)]
  if len(tables) == 1: return PageTable(bnxt_re.PBL_LVL_1, tables[0].bus_addrs[0], tables)
  top = _table(pci, np.array([t.bus_addrs[0] for t in tables], np.uint64) | bnxt_hsi.PTU_PDE_VALID)
  return PageTable(bnxt_re.PBL_LVL_2, top.bus_addrs[0], tables + [top])


def _table(pci: PCIDevice, ptes: np.ndarray) -> DMAMemory:
  mem = pci.alloc_dma(PAGE)
  mem.view[:ptes.nbytes] = ptes.astype("<u8").tobytes()
  return mem


class HWQueue:
  """A hardware queue's memory: `entries` slots of `stride` bytes in whole pages (then `aux` bytes more, e.g. the
  SQ's MSN table), and its page table. Producer and consumer indexes count slots and only grow; a slot's position is
  the index modulo `entries`, and the index's pass parity (the epoch) is what valid and toggle bits follow."""
  def __init__(self, pci: PCIDevice, entries: int, stride: int, aux: int = 0):
    self.pci, self.entries, self.stride = pci, entries, stride
    self.ring_bytes = -(-entries * stride // PAGE) * PAGE
    self.mem = pci.alloc_dma(self.ring_bytes + aux)
    self.pt = page_table(pci, self.mem.bus_addrs, queue=True)
    self.ring, self.aux = self.mem.view[:entries * stride], self.mem.view[self.ring_bytes:self.ring_bytes + aux]
    self.prod = self.cons = 0

  def slot(self, index: int) -> memoryview:
    at = index % self.entries * self.stride
    return self.ring[at:at + self.stride]

  def epoch(self, index: int) -> int: return index // self.entries & 1

  def free(self) -> None:
    self.pt.free(self.pci)
    self.pci.free_dma(self.mem)
