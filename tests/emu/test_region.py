"""Register regions declare the accesses they take as QEMU's MemoryRegionOps.valid does (min/max access size,
unaligned), per range, plus write-only and read-only ranges; emu.pci.Region refuses everything else with ModelError
before the model's decode sees it, through the CPU's MMIO as through a peer's DMA."""
import pytest

from drivers.system.mmio import CallbackMMIO
from emu.pci import Access, ModelError, Region


class Toy(Region):
  name, size = "BAR1", 0x2000
  valid = (Access("control registers", 4, 4, end=0x100), Access("doorbells", 4, 8, readable=False, end=0x1000),
           Access("status registers", 4, 4, writable=False, end=0x1100), Access("window bytes", 1, 8, unaligned=True))

  def __init__(self): self.log = []
  def _read(self, offset: int, size: int) -> int:
    self.log.append(("read", offset, size))
    return 0x1234
  def _write(self, offset: int, size: int, value: int) -> None: self.log.append(("write", offset, size, value))


@pytest.fixture
def bar():
  return Toy()


def test_accesses_the_ranges_take_reach_the_model(bar):
  mmio = CallbackMMIO(bar)
  assert mmio.read32(0x10) == 0x1234 and mmio.read32(0x1000) == 0x1234
  mmio.write64(0x108, 5)
  mmio.write32(0x10C, 6)
  bar.write(0x1203, 8, 7)                                    # an unaligned range (the CPU MMIO itself aligns its accesses)
  assert bar.log == [("read", 0x10, 4), ("read", 0x1000, 4), ("write", 0x108, 8, 5), ("write", 0x10C, 4, 6), ("write", 0x1203, 8, 7)]


@pytest.mark.parametrize("op, offset, size, message", [
  ("read", 0x10, 2, "BAR1 read of 2 bytes at 0x10: control registers take aligned 32-bit reads"),
  ("write", 0x10, 8, "BAR1 write of 8 bytes at 0x10: control registers take aligned 32-bit writes"),
  ("write", 0x12, 4, "BAR1 write of 4 bytes at 0x12: control registers take aligned 32-bit writes"),
  ("write", 0x104, 8, "BAR1 write of 8 bytes at 0x104: doorbells take aligned 32/64-bit writes"),
  ("write", 0x100, 1, "BAR1 write of 1 bytes at 0x100: doorbells take aligned 32/64-bit writes"),
  ("read", 0x100, 4, "BAR1 read at 0x100: doorbells are write-only"),
  ("write", 0x1000, 4, "BAR1 write at 0x1000: status registers are read-only"),
  ("read", 0x1201, 3, "BAR1 read of 3 bytes at 0x1201: window bytes take 8/16/32/64-bit reads"),
])
def test_accesses_a_range_does_not_take_raise_before_the_model_sees_them(bar, op, offset, size, message):
  with pytest.raises(ModelError) as e:
    if op == "read": bar.read(offset, size)
    else: bar.write(offset, size, 0)
  assert str(e.value) == message and bar.log == []
