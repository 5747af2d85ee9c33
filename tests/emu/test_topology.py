"""The PCI topology model (emu/topology.py): enumeration places BARs, a function's DMA reaches a peer's memory BAR,
and what no BAR claims is a bus error naming the device that made the access."""
import pytest

from emu.pci import DMAFault, PCIFunction, PCI_BASE_ADDRESS_0, PCI_COMMAND, PCI_COMMAND_MEMORY
from emu.topology import BAR_WINDOW, LOW_WINDOW, Topology, bar_addresses


class Regs:
  """A register BAR that logs each access; offset 0x100 is read-only (a write there raises, as a model's would)."""
  size = 1 << 16
  def __init__(self): self.log = []
  def read(self, offset: int, size: int) -> int:
    self.log.append(("read", offset, size))
    return 0x1122334455667788 & ((1 << 8 * size) - 1)
  def write(self, offset: int, size: int, value: int) -> None:
    if offset == 0x100: raise RuntimeError("register 0x100 is read-only")
    self.log.append(("write", offset, size, value))


def function(bus: str, mem: int = 1 << 20) -> PCIFunction:
  fn = PCIFunction(bus, 0x1234, 0x5678, 0x020000)
  fn.bars[0], fn.bars[2], fn.bars[5] = memoryview(bytearray(mem)), Regs(), Regs()
  fn.config[PCI_COMMAND] |= PCI_COMMAND_MEMORY
  return fn


def test_enumeration_places_each_bar_aligned_to_its_size_without_overlap():
  top, a, b = Topology(), function("a", 1 << 20), function("b", 4 << 20)
  top.plug(a)
  top.plug(b)
  placed = [(addr, fn.bar_size(n)) for fn in (a, b) for n, addr in bar_addresses(fn).items()]
  assert all(addr % size == 0 for addr, size in placed)
  assert sorted(placed) == sorted(set(placed)) and all(x + s <= y for (x, s), (y, _) in zip(sorted(placed), sorted(placed)[1:]))
  assert bar_addresses(a)[0] >= BAR_WINDOW and LOW_WINDOW <= bar_addresses(b)[5] < 1 << 32
  assert int.from_bytes(b.config[PCI_BASE_ADDRESS_0:PCI_BASE_ADDRESS_0 + 4], "little") & 0xF == 0xC   # 64-bit prefetchable


def test_dma_to_a_peers_memory_bar_reaches_it_and_an_unclaimed_address_is_a_bus_error():
  top, nic, gpu = Topology(), function("nic"), function("gpu")
  top.plug(nic)
  top.plug(gpu)
  bar = bar_addresses(gpu)[0]
  nic.dma.write(bar + 0x1000, b"peer")
  assert bytes(gpu.bars[0][0x1000:0x1004]) == b"peer" and nic.dma.read(bar + 0x1000, 4) == b"peer"
  assert nic.dma.view(bar + 8, 4).nbytes == 4
  end = max(a + fn.bar_size(n) for fn in (nic, gpu) for n, a in bar_addresses(fn).items() if a >= BAR_WINDOW)
  with pytest.raises(DMAFault, match=f"^nic: bus error: DMA to bus address {end:#x} .*no device's BAR claims it"):
    nic.dma.read(end, 4)                                 # just past the last BAR


def test_memory_decoding_off_unclaims_the_bar_and_every_change_counts_in_the_peers_generation():
  top, nic, gpu = Topology(), function("nic"), function("gpu")
  top.plug(nic)
  top.plug(gpu)
  bar, gen = bar_addresses(gpu)[0], int(nic.dma.generation[0])
  gpu.config_write(PCI_COMMAND, 2, gpu.config_read(PCI_COMMAND, 2) & ~PCI_COMMAND_MEMORY)
  assert int(nic.dma.generation[0]) > gen
  with pytest.raises(DMAFault, match="nic: bus error"): nic.dma.read(bar, 4)
  gpu.config_write(PCI_COMMAND, 2, gpu.config_read(PCI_COMMAND, 2) | PCI_COMMAND_MEMORY)
  gen = int(nic.dma.generation[0])
  top.unplug(gpu)
  assert int(nic.dma.generation[0]) > gen
  with pytest.raises(DMAFault, match="nic: bus error"): nic.dma.read(bar, 4)


def test_a_peers_write_to_a_register_bar_is_one_callback_access_with_a_cpu_writes_rules():
  """The NIC's 8-byte DMA write to the GPU's doorbell BAR is one 64-bit write of the little-endian value (a doorbell
  rung by a peer); a read is one read; sizes a register cannot take, unaligned or straddling accesses are bus errors
  naming the initiator, and the target's own refusal reaches the initiator."""
  top, nic, gpu = Topology(), function("nic"), function("gpu")
  top.plug(nic)
  top.plug(gpu)
  db = bar_addresses(gpu)[2]
  nic.dma.write(db + 0x40, (0x0123456789ABCDEF).to_bytes(8, "little"))
  assert nic.dma.read(db + 0x48, 4) == (0x55667788).to_bytes(4, "little")
  assert gpu.bars[2].log == [("write", 0x40, 8, 0x0123456789ABCDEF), ("read", 0x48, 4)]
  for addr, n in ((db + 0x40, 3), (db + 0x44, 8), (db + gpu.bars[2].size - 4, 8), (db, 16)):
    with pytest.raises(DMAFault, match=f"^nic: DMA of {n} bytes to bus address {addr:#x} reaches register BAR2 of gpu"):
      nic.dma.write(addr, bytes(n))
  with pytest.raises(RuntimeError, match="register 0x100 is read-only"): nic.dma.write(db + 0x100, bytes(4))
  with pytest.raises(DMAFault, match="register BAR2 of gpu, not memory"): nic.dma.view(db, 8)
  assert len(gpu.bars[2].log) == 2
