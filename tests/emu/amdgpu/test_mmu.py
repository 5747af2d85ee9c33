"""The GPU MMU walks hand-built gfx11 page tables (amdgpu_vm.h bit layout) in emulated VRAM."""
import pytest
from emu.pci import DMASpace
from emu.amdgpu.vram import VRAM
from emu.amdgpu.registers import ModelError
from emu.amdgpu.mmu import MMU, GPUPageFault, TranslationOff, PTE_VALID, PTE_SYSTEM, PTE_SNOOPED, PTE_READABLE, PTE_WRITEABLE, PTE_EXECUTABLE, PDE_PTE

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


def test_instruction_fetch_needs_executable(mmu):
  _pte(mmu.vram, PTB, 9, 0x102000 | PTE_VALID | PTE_READABLE | PTE_WRITEABLE)     # data only
  assert mmu.fetch(START + 0x5000) is not None and mmu.lookup(START + 0x9000, False) is not None
  assert mmu.fetch(START + 0x9000) is None
  f = mmu.faults[-1]
  assert (f.kind, f.execute, f.client, f.write) == ("execute", True, "SQC", False) and "not executable" in str(f)


@pytest.mark.parametrize("access, kind", [("read", "read"), ("write", "write"), ("fetch", "execute")])
def test_each_permission_fault_has_its_type(mmu, access, kind):
  _pte(mmu.vram, PTB, 9, 0x102000 | PTE_VALID)                                     # mapped, no permission at all
  {"read": lambda: mmu.lookup(START + 0x9000, False), "write": lambda: mmu.lookup(START + 0x9000, True),
   "fetch": lambda: mmu.fetch(START + 0x9000)}[access]()
  assert mmu.faults[-1].kind == kind and mmu.faults[-1].permission
  assert mmu.lookup(START + 0xA000, False) is None and mmu.faults[-1].kind == "not-present"
  assert mmu.lookup(START - 0x1000, False) is None and mmu.faults[-1].kind == "range"


def test_a_host_page_must_be_snooped(mmu):
  host = memoryview(bytearray(4096))
  (bus,) = mmu.dma.map(host)
  _pte(mmu.vram, PTB, 7, bus | RW | PTE_SYSTEM)
  with pytest.raises(ModelError, match="SYSTEM page without SNOOPED"): mmu.read(START + 0x7000, 4)
  _pte(mmu.vram, PTB, 7, bus | RW | PTE_SYSTEM | PTE_SNOOPED)
  mmu.invalidate()
  assert mmu.read(START + 0x7000, 4) == bytes(4)


def test_a_host_address_without_system_is_a_vram_address(mmu):
  host = memoryview(bytearray(4096))
  (bus,) = mmu.dma.map(host)                                         # 0x1_0000_0000: beyond this 64 MiB of VRAM
  _pte(mmu.vram, PTB, 7, bus | RW | PTE_SNOOPED)
  assert mmu.lookup(START + 0x7000, False) is None and "beyond the end of VRAM" in mmu.faults[-1].reason


@pytest.mark.parametrize("mtype", range(8))
def test_only_the_mtypes_gfx11_defines_are_accepted(mmu, mtype):
  _pte(mmu.vram, PTB, 5, 0x100000 | RW | mtype << 48)
  if mtype <= 3: assert mmu.lookup(START + 0x5000, False)[2] == mmu.vram.host + 0x100000   # NC, WC, CC, UC
  else:
    with pytest.raises(ModelError, match=f"MTYPE {mtype} is reserved"): mmu.lookup(START + 0x5000, False)


@pytest.mark.parametrize("bit", [3, 51, 52, 53, 55, 56, 60])
def test_leaf_bits_the_model_does_not_honour_raise(mmu, bit):
  _pte(mmu.vram, PTB, 5, 0x100000 | RW | 1 << bit)
  with pytest.raises(ModelError, match="not modelled"): mmu.lookup(START + 0x5000, False)


@pytest.mark.parametrize("level, table, bits, why", [
  (0, PDB2, 0, "no valid entry at level 0"),                          # VALID cleared
  (1, PDB1, 0, "no valid entry at level 1"),
  (2, PDB0, 0, "no valid entry at level 2"),
  (0, PDB2, PTE_VALID | PDE_PTE, "PDB2 has no leaves"),
  (1, PDB1, PTE_VALID | 1 << 56, "translate further"),                # PTE_TF
  (1, PDB1, PTE_VALID | 9 << 59, "block fragment size 9"),            # PDE_BFS(9), gfx9's
  (2, PDB0, PTE_VALID | 0x40, "not 4 KiB aligned"),
  (2, PDB0, PTE_VALID | 5 << 48, "MTYPE 5 is reserved"),
  (2, PDB0, PTE_VALID | PTE_SYSTEM | PTE_SNOOPED, "not readable"),     # the next table would be at bus address 0x3000
])
def test_directory_entries_the_walker_rejects(mmu, level, table, bits, why):
  nxt = {PDB2: PDB1, PDB1: PDB0, PDB0: PTB}[table]
  _pte(mmu.vram, table, 0, nxt | bits)
  assert mmu.lookup(START + 0x5000, False) is None
  assert why in mmu.faults[-1].reason and mmu.faults[-1].kind == ("not-present" if not bits else "pde")


def test_pde_pte_leaves_at_pdb1_and_pdb0_must_be_aligned(mmu):
  _pte(mmu.vram, PDB0, 1, 0x401000 | RW | PDE_PTE)                   # a 2 MiB leaf at a 4 KiB-aligned address
  assert mmu.lookup(START + 0x200000, False) is None and "not aligned" in mmu.faults[-1].reason
  _pte(mmu.vram, PDB1, 1, 0x0 | RW | PDE_PTE)                         # a 1 GiB leaf at VRAM 0 (the whole 64 MiB and beyond)
  assert mmu.lookup(START + (1 << 30) + 0x1000, False) is None and "beyond the end of VRAM" in mmu.faults[-1].reason


def test_frag_makes_one_translation_of_the_aligned_run(mmu):
  """FRAG 4: the 64 KiB run the PTE sits in is contiguous; the TLB takes the run's base from the PTE it walked."""
  for i in range(16): _pte(mmu.vram, PTB, 16 + i, (0x200000 + i * 4096) | RW | 4 << 7)
  start, length, host = mmu.lookup(START + 0x13000, False)
  assert (start, length, host) == (START + 0x10000, 0x10000, mmu.vram.host + 0x200000)
  _pte(mmu.vram, PTB, 5, 0x100000 | RW | 4 << 7)                     # a wrong FRAG: page 5 of a run claims to start it
  mmu.invalidate()
  mmu.vram.write(0x100000, b"mine")
  mmu.vram.write(0x105000, b"next")
  assert mmu.read(START + 0x5000, 4) == b"next"                      # so VA +0x5000 reads VRAM 0x105000, not 0x100000


def test_nothing_translates_while_the_hub_is_off(mmu):
  mmu.set_enabled("the L1 TLB is off")
  with pytest.raises(TranslationOff, match=r"GPU write at 0x200000005000 by SDMA0: the L1 TLB is off"):
    mmu.write(START + 0x5000, b"x", "SDMA0")


def test_a_cached_system_page_follows_the_dma_mappings_and_a_peers_register_page_is_reached_access_by_access(mmu):
  """The TLB keeps a SYSTEM page's translation only while the DMA space is unchanged: after its host memory is unmapped
  the next access walks again and faults. A SYSTEM page at a peer's register BAR (emu/topology.py): a CP write is one
  callback write, a read one read; the shader core (which needs host memory) faults on it, SDMA copies refuse it, and
  an access the peer refuses (or the bus does) is a fault of that access with the peer's words."""
  from emu.pci import PCIFunction, PCI_COMMAND, PCI_COMMAND_MEMORY
  from emu.topology import Topology, bar_addresses
  host = memoryview(bytearray(4096))
  bus = mmu.dma.map(host, contiguous=True)
  _pte(mmu.vram, PTB, 7, bus[0] | RW | PTE_SYSTEM | PTE_SNOOPED)
  mmu.invalidate()
  mmu.write(START + 0x7000, b"host")
  mmu.dma.unmap(bus)                                                 # (no TLB invalidate: the DMA generation moved)
  with pytest.raises(GPUPageFault, match="system page .* is not mapped for DMA"): mmu.read(START + 0x7000, 4)
  class Regs:
    size, log = 0x4000, []
    def read(self, off, size): return self.log.append(("read", off, size)) or 0x1234
    def write(self, off, size, value):
      if off == 0x1100: raise RuntimeError("register 0x1100 is read-only")
      self.log.append(("write", off, size, value))
  top, gpu, nic = Topology(), PCIFunction("gpu", 1, 1, 0x030000), PCIFunction("nic", 2, 2, 0x020000)
  gpu.dma, nic.bars[2] = mmu.dma, (regs := Regs())
  nic.config[PCI_COMMAND] |= PCI_COMMAND_MEMORY
  top.plug(gpu)
  top.plug(nic)
  _pte(mmu.vram, PTB, 9, bar_addresses(nic)[2] + 0x1000 | RW | PTE_SYSTEM | PTE_SNOOPED)
  mmu.invalidate()
  mmu.write(START + 0x9040, (0xAABBCCDD_11223344).to_bytes(8, "little"))
  assert mmu.read(START + 0x9048, 4) == (0x1234).to_bytes(4, "little")
  assert regs.log == [("write", 0x1040, 8, 0xAABBCCDD_11223344), ("read", 0x1048, 4)]
  assert mmu.lookup(START + 0x9040, True) is None and "register BAR" in mmu.faults[-1].reason
  with pytest.raises(ModelError, match="copy to or from a peer's register BAR is not modelled"): mmu.copy(START + 0x9000, START + 0x5000, 8)
  with pytest.raises(GPUPageFault, match=r"at 0x200000009100 \(write by CP\): the peer's register at bus address .* refused "
                                         r"the write: register 0x1100 is read-only"):
    mmu.write(START + 0x9100, bytes(4))
  with pytest.raises(GPUPageFault, match="refused the read: .*registers take one naturally aligned access"): mmu.read(START + 0x9000, 3)
