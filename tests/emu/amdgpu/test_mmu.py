"""The GPU MMU walks hand-built gfx11 page tables (amdgpu_vm.h bit layout) in emulated VRAM."""
import pytest
from emu.pci import DMASpace
from emu.amdgpu.vram import VRAM
from emu.amdgpu.mmu import MMU, GPUPageFault, PTE_VALID, PTE_SYSTEM, PTE_SNOOPED, PTE_READABLE, PTE_WRITEABLE, PTE_EXECUTABLE, PDE_PTE

START = 0x2000_0000_0000
RW = PTE_VALID | PTE_READABLE | PTE_WRITEABLE | PTE_EXECUTABLE
PDB2, PDB1, PDB0, PTB = 0x0, 0x1000, 0x2000, 0x3000


def _pte(vram, table, index, value): vram.write(table + index * 8, value.to_bytes(8, "little"))


@pytest.fixture
def mmu():
  vram, dma = VRAM(64 << 20), DMASpace()
  m = MMU(vram, dma)
  _pte(vram, PDB2, 0, PDB1 | PTE_VALID)
  _pte(vram, PDB1, 0, PDB0 | PTE_VALID)
  _pte(vram, PDB0, 0, PTB | PTE_VALID)
  _pte(vram, PTB, 5, 0x100000 | RW)                                  # VA +0x5000 -> VRAM 0x100000
  _pte(vram, PTB, 6, 0x101000 | PTE_VALID | PTE_READABLE)            # read-only page
  _pte(vram, PDB0, 1, 0x400000 | RW | PDE_PTE)                        # VA +2 MiB: one 2 MiB huge leaf -> VRAM 4 MiB
  m.faults = []
  m.on_fault = m.faults.append
  m.set_context(PDB2, START, 0x7FFF_FFFF_FFFF)
  m.set_enabled(None)
  return m


def test_4k_and_2m_leaves_translate_to_vram(mmu):
  mmu.vram.write(0x100010, b"page")
  assert mmu.read(START + 0x5010, 4) == b"page"
  mmu.write(START + 0x200000 + 0x12345, b"huge")
  assert mmu.vram.read(0x400000 + 0x12345, 4) == b"huge"
  start, length, host = mmu.lookup(START + 0x2FFFFF, True)
  assert (start, length, host) == (START + 0x200000, 0x200000, mmu.vram.host + 0x400000)


def test_system_pages_resolve_through_the_dma_space(mmu):
  host = memoryview(bytearray(8192))
  bus = mmu.dma.map(host)                                            # two pages with a hole between them
  _pte(mmu.vram, PTB, 7, bus[0] | RW | PTE_SYSTEM | PTE_SNOOPED)
  _pte(mmu.vram, PTB, 8, bus[1] | RW | PTE_SYSTEM | PTE_SNOOPED)
  mmu.invalidate()
  mmu.write(START + 0x7FFC, b"abcdefgh")                             # straddles the two host pages
  assert bytes(host[4092:4100]) == b"abcdefgh"


def test_faults_name_address_access_and_reason(mmu):
  with pytest.raises(GPUPageFault, match=r"GPU page fault at 0x200000009000 \(read by CP\): no valid entry at level 3"):
    mmu.read(START + 0x9000, 4)
  with pytest.raises(GPUPageFault, match="not writeable"): mmu.write(START + 0x6000, b"x", client="SDMA0")
  assert mmu.lookup(START - 0x1000, False) is None and "outside the context" in mmu.faults[-1].reason
  assert [f.client for f in mmu.faults] == ["CP", "SDMA0", "shader"]


def test_tlb_keeps_stale_translation_until_invalidated(mmu):
  assert mmu.lookup(START + 0x5000, False)[2] == mmu.vram.host + 0x100000
  _pte(mmu.vram, PTB, 5, 0x180000 | RW)
  assert mmu.lookup(START + 0x5000, False)[2] == mmu.vram.host + 0x100000   # like hardware: a stale TLB entry
  mmu.invalidate()
  assert mmu.lookup(START + 0x5000, False)[2] == mmu.vram.host + 0x180000


def test_disabled_context_faults_everything(mmu):
  mmu.set_context(None)
  assert mmu.lookup(START + 0x5000, False) is None and "not enabled" in mmu.faults[-1].reason
