"""PCIDevice + MMIO against a tiny device model: a register file whose doorbell DMA-writes a value."""
import numpy as np
import pytest
from emu.pci import PCIFunction, DMAFault, PCI_COMMAND, PCI_BASE_ADDRESS_0
from common.plugin import PCIModel
from drivers.system import ModelPCIDevice, DeviceBusyError, MemMMIO
from drivers.system.registry import models

REG_ADDR_LO, REG_ADDR_HI, REG_VALUE, REG_DOORBELL, REG_ID = 0x0, 0x4, 0x8, 0xC, 0x10
DEVICE_ID = 0xC0DE


class Regs:
  size = 0x1000
  def __init__(self, dev): self.dev, self.r = dev, {REG_ADDR_LO: 0, REG_ADDR_HI: 0, REG_VALUE: 0}
  def read(self, off, size):
    if off == REG_ID: return DEVICE_ID
    if off in self.r and size == 4: return self.r[off]
    raise ValueError(f"read of unknown register {off:#x}")
  def write(self, off, size, value):
    if off == REG_DOORBELL:
      if not self.dev.bus_master: raise RuntimeError("DMA with bus mastering disabled")
      self.dev.dma.write(self.r[REG_ADDR_HI] << 32 | self.r[REG_ADDR_LO], (self.r[REG_VALUE] * value).to_bytes(8, "little"))
    elif off in self.r and size == 4: self.r[off] = value
    else: raise ValueError(f"write of unknown register {off:#x}")


class DoorbellModel(PCIFunction):
  def __init__(self):
    super().__init__("mock-0", 0x1AF4, DEVICE_ID, 0x120000)
    self.bars[0] = Regs(self)
    self.bars[2] = memoryview(bytearray(1 << 16))


@pytest.fixture
def dev():
  d = ModelPCIDevice(DoorbellModel(), "am")
  yield d
  d.close()


def test_config_space_ids_and_bar_sizing(dev):
  assert (dev.vendor_id, dev.device_id) == (0x1AF4, DEVICE_ID)
  assert dev.read_config(0, 4) == DEVICE_ID << 16 | 0x1AF4
  dev.write_config(PCI_BASE_ADDRESS_0 + 8, 4, 0xFFFFFFFF)       # BAR2 sizing (PCI 3.0 6.2.5.1)
  assert dev.read_config(PCI_BASE_ADDRESS_0 + 8, 4) == (~((1 << 16) - 1) & 0xFFFFFFF0) | 0xC   # 64-bit, prefetchable
  dev.write_config(0, 2, 0x1234)                                 # vendor id is read-only
  assert dev.vendor_id == 0x1AF4 and dev.read_config(0, 2) == 0x1AF4
  assert dev.bar_size(2) == 1 << 16
  with pytest.raises(ValueError, match="no BAR4"): dev.map_bar(4)


def test_doorbell_dma_writes_into_a_page_straddling_buffer(dev):
  mem = dev.alloc_dma(3 * 4096)
  assert not mem.contiguous and len(mem.bus_addrs) == 3   # a hole between pages: bus-contiguity is not implied
  regs = dev.map_bar(0)
  assert regs.read32(REG_ID) == DEVICE_ID
  target = mem.bus_addr(4096 - 4)                          # 8 bytes straddle pages 0 and 1: not bus-contiguous
  regs.write32(REG_ADDR_LO, target & 0xFFFFFFFF); regs.write32(REG_ADDR_HI, target >> 32); regs.write32(REG_VALUE, 0x01020304)
  with pytest.raises(RuntimeError, match="bus mastering"): regs.write32(REG_DOORBELL, 1)
  dev.enable_bus_master()
  assert dev.read_config(PCI_COMMAND, 2) & 0x6 == 0x6
  with pytest.raises(DMAFault, match="no host memory"): regs.write32(REG_DOORBELL, 2)   # the hole after page 0
  contiguous = dev.alloc_dma(2 * 4096, contiguous=True)
  assert contiguous.contiguous
  target = contiguous.bus_addr(4096 - 4)
  regs.write32(REG_ADDR_LO, target & 0xFFFFFFFF); regs.write32(REG_ADDR_HI, target >> 32)
  regs.write32(REG_DOORBELL, 2)
  assert int.from_bytes(contiguous.view[4092:4100], "little") == 0x01020304 * 2


def dma_write(dev, bus_addr: int, value: int, times: int = 1) -> None:
  """Have the model DMA-write value * times (u64) at bus_addr."""
  regs = dev.map_bar(0)
  regs.write32(REG_ADDR_LO, bus_addr & 0xFFFFFFFF); regs.write32(REG_ADDR_HI, bus_addr >> 32); regs.write32(REG_VALUE, value)
  regs.write32(REG_DOORBELL, times)


def test_existing_memory_mapped_for_dma_is_reached_at_its_bus_addresses(dev):
  """map_dma of a numpy array that starts mid-page and spans three pages: bus_addr(i) is byte i of the array, the
  pages it covers are mapped whole, and after free_dma the device reaches none of them."""
  arr = np.zeros(2 * 4096 + 100, np.uint8)[40:]
  first = arr.ctypes.data % 4096
  mem = dev.map_dma(arr)
  assert mem.first == first and mem.size == arr.nbytes and len(mem.bus_addrs) == -(-(first + arr.nbytes) // 4096)
  dev.enable_bus_master()
  for off in (0, 4096 - first, arr.nbytes - 8):          # the start, the first byte of page 1, the last u64
    dma_write(dev, mem.bus_addr(off), 0x55667788 + off)
    assert int.from_bytes(arr[off:off + 8].tobytes(), "little") == 0x55667788 + off
  dev.free_dma(mem)
  with pytest.raises(DMAFault): dma_write(dev, mem.bus_addrs[0], 1)
  assert arr[0] == 0x88                                  # the memory itself stays


def test_memory_a_device_cannot_use_for_dma_is_refused(dev):
  with pytest.raises(ValueError, match="read-only"): dev.map_dma(b"\0" * 64)
  with pytest.raises(ValueError, match="non-contiguous"): dev.map_dma(np.zeros((8, 8), np.uint8)[:, ::2])
  with pytest.raises(ValueError, match="0 bytes"): dev.map_dma(bytearray())


def test_mmio_rejects_unaligned_out_of_range_and_unknown_registers(dev):
  regs = dev.map_bar(0)
  with pytest.raises(ValueError, match="unaligned 32-bit"): regs.read32(2)
  with pytest.raises(IndexError, match="outside the region"): regs.read32(0x1000)
  with pytest.raises(ValueError, match="unknown register 0x20"): regs.read32(0x20)
  with pytest.raises(ValueError, match="does not fit"): regs.write32(REG_VALUE, 1 << 32)


def test_ram_bar_is_plain_memory(dev):
  vram = dev.map_bar(2)
  assert isinstance(vram, MemMMIO)
  vram.write64(8, 0x1122334455667788)
  assert vram.read32(8) == 0x55667788 and vram.read8(15) == 0x11 and vram.read16(12) == 0x3344
  vram.write_bytes(0x100, b"hello")
  assert vram.read_bytes(0x100, 5) == b"hello" and dev.model.bars[2][0x100:0x105] == b"hello"


def test_lock_held_while_open_and_dma_unmapped_on_close():
  model = DoorbellModel()
  d = ModelPCIDevice(model, "am")
  with pytest.raises(DeviceBusyError, match="mock-0 is in use"): ModelPCIDevice(DoorbellModel(), "am")
  mem = d.alloc_dma(4096)
  addr = mem.bus_addr(0)
  model.dma.write(addr, b"x")
  d.close()
  with pytest.raises(DMAFault): model.dma.write(addr, b"x")   # the device can no longer reach freed memory
  ModelPCIDevice(DoorbellModel(), "am").close()                 # and the lock is free again


def test_function_level_reset_disables_bus_mastering(dev):
  dev.enable_bus_master()
  dev.reset()
  assert dev.read_config(PCI_COMMAND, 2) & 0x4 == 0


@pytest.mark.parametrize("kind", [m.name for m in models(PCIModel)])   # every registered PCI model, GPUs and NICs alike
def test_emulated_device_indexes_are_bounded_and_an_index_past_the_bound_creates_nothing(kind, tmp_path, monkeypatch):
  from drivers.system import open_model
  with pytest.raises(ValueError, match=rf"there is no emulated {kind} device 8: emulated devices are numbered 0 to 7 "
                                       r"\(HCQ_EMU_DEVICES=8; .*\): use an index below 8, or raise HCQ_EMU_DEVICES"):
    open_model(kind, 8)
  monkeypatch.setenv("HCQ_EMU_DEVICES", "2")
  with pytest.raises(ValueError, match=rf"no emulated {kind} device 2: .* 0 to 1 \(HCQ_EMU_DEVICES=2"): open_model(kind, 2)
  assert list(tmp_path.iterdir()) == []     # no state files, no lock file: TMPDIR is the test's own


def test_a_device_string_past_the_bound_is_refused_before_any_state_exists(tmp_path):
  from drivers.hcq import open_device
  with pytest.raises(ValueError, match=r"there is no emulated navi31 device 99: .* numbered 0 to 7"): open_device("MOCKPCI+AMD:99")
  assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_a_bad_hcq_emu_devices_says_what_it_must_be(value, monkeypatch):
  from drivers.system import open_model
  monkeypatch.setenv("HCQ_EMU_DEVICES", value)
  with pytest.raises(ValueError, match=rf"HCQ_EMU_DEVICES='{value}': set it to a count of emulated devices, 1 or more"):
    open_model("navi31", 0)
