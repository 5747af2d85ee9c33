"""The ASM24xx bridge driver (drivers/asm24xx/bridge.py on drivers/system/usb.py) against the ASM24xx model in front of
the emulated Navi31."""
import struct, sys, threading
import pytest

from drivers.asm24xx.bridge import ASM24xxDevice
from drivers.system.usb import USBBridgeError
from emu.amdgpu.chips import NAVI31
from emu.amdgpu.function import GPUFunction
from emu.pci import PCIFunction
from emu.usb.asm24xx import ASM24xx, MockUSBDevice
from autogen.amd import gc_11_0_0 as gc
from tests.emu.amdgpu.regs import BASES

NAVI31_IDS = (0x1002, 0x744C)     # the Navi31's PCI vendor:device (emu/amdgpu/navi31.py)


@pytest.fixture
def gpu():
  fn = GPUFunction(NAVI31, "usb", vram_size=64 << 20)
  yield fn
  fn.close()


def opened(gpu, **kw):
  return ASM24xxDevice(MockUSBDevice(ASM24xx(gpu, kw.pop("link_trains", True)), **kw), None)


def test_setup_detaches_configures_claims_and_finds_the_gpu_on_bus_4(gpu):
  with opened(gpu) as d:
    assert not d.usb.kernel_driver and d.usb.configuration == 1 and d.usb._ctx.claimed == {0}
    assert (d.vendor_id, d.device_id) == NAVI31_IDS
    assert d.read_config(0x08, 4) == int.from_bytes(gpu.config[8:12], "little") == 0x030000C8
    assert [br.secondary() for br in d.usb.bridge.bridges] == [1, 2, 3, 4]
    assert d.read_config(0x04, 2) & 0x7 == 0x7 and all(br.config[4] & 0x7 == 0x7 for br in d.usb.bridge.bridges)
    # BARs: sized as the model declares them, 2 MB aligned, VRAM in the prefetchable window at 32 GiB
    assert {n: d.bar_size(n) for n in (0, 2, 5)} == {n: gpu.bar_size(n) for n in (0, 2, 5)}
    assert d.bar_address(0) == 32 << 30 and all(d.bar_address(n) % (2 << 20) == 0 for n in (0, 2, 5))
    assert d.bar_address(2) >= 0x1000_0000 and d.bar_address(5) + d.bar_size(5) <= 1 << 32


@pytest.mark.parametrize("vid_pid,product,why", [((0x1234, 0x0001), "custom", "not a supported bridge"),
                                                 ((0xADD1, 0x0001), "USB Storage", "product string")])
def test_identity_refused(gpu, vid_pid, product, why):
  with pytest.raises(ValueError, match=why): opened(gpu, vid_pid=vid_pid, product=product)


def test_second_bridge_id_and_product_accepted(gpu):
  with opened(gpu, vid_pid=(0x3801, 0x0001), product="AS2462 eGPU") as d: assert (d.vendor_id, d.device_id) == NAVI31_IDS


def test_link_down_is_an_error(gpu):
  with pytest.raises(USBBridgeError, match="PCIe link not up"): opened(gpu, link_trains=False)


def test_permission_error_prints_the_udev_rule(gpu):
  with pytest.raises(PermissionError) as e: opened(gpu, denied=True)
  assert 'SUBSYSTEM=="usb", ATTRS{idVendor}=="add1", ATTRS{idProduct}=="0001", MODE="0666"' in str(e.value)


def test_disconnect_names_the_device(gpu):
  d = opened(gpu)
  d.usb.disconnect()
  with pytest.raises(ConnectionError, match="USB bridge add1:0001 at bus 1 address 2 was disconnected"): d.read_config(0, 2)
  d.close()


def test_mmio_round_trips_and_batching(gpu):
  with opened(gpu) as d:
    vram, regs = d.map_bar(0), d.map_bar(5)
    vram.write32(0x1000, 0xDEADBEEF)
    vram.write16(0x2002, 0xABCD)
    vram.write8(0x2001, 0x5A)
    assert vram.read32(0x1000) == 0xDEADBEEF and gpu.bars[0][0x1000:0x1004] == bytes.fromhex("efbeadde")
    assert gpu.bars[0][0x2000:0x2004] == bytes.fromhex("005acdab") and vram.read16(0x2002) == 0xABCD
    # a register of the model's register file through BAR5: GC SCRATCH_REG7 (byte offset = 4 * dword address)
    scratch = gc.regSCRATCH_REG7.addr(BASES["GC"])
    regs.write32(4 * scratch, 0x12345678)
    assert regs.read32(4 * scratch) == 0x12345678 == gpu.regs.read(scratch)
    before = d.usb.control_transfers, d.usb.bulk_transfers
    for i in range(64): vram.write32(0x3000 + 4 * i, i * 0x01010101)
    assert (d.usb.control_transfers, d.usb.bulk_transfers) == before          # batched: nothing sent yet
    assert vram.read32(0x3000 + 4 * 63) == 63 * 0x01010101                      # the read flushes
    # one streaming write (TLP, bulk OUT, completion) and the read (TLP, completion)
    assert (d.usb.control_transfers - before[0], d.usb.bulk_transfers - before[1]) == (4, 1)
    assert bytes(gpu.bars[0][0x3000:0x3100]) == b"".join(bytes([i] * 4) for i in range(64))
    vram.write64(0x4000, 0x1122334455667788)
    assert vram.read64(0x4000) == 0x1122334455667788
    assert regs.size == gpu.bar_size(5)


def test_batch_splits_at_4k_pages_and_discontiguous_writes(gpu):
  with opened(gpu) as d:
    vram = d.map_bar(0)
    before = d.usb.bulk_transfers
    for i in range(8): vram.write32(0x1FF0 + 4 * i, 0x100 + i)     # crosses the 4 KB page at 0x2000
    vram.write32(0x8000, 7)
    d.flush()
    assert d.usb.bulk_transfers - before == 2
    assert [int.from_bytes(gpu.bars[0][0x1FF0 + 4 * i:0x1FF4 + 4 * i], "little") for i in range(8)] == [0x100 + i for i in range(8)]
    assert gpu.bars[0][0x8000] == 7


def test_block_reads_stream_one_bulk_in_per_4k_page(gpu):
  with opened(gpu) as d:
    vram = d.map_bar(0)
    pattern = bytes(range(256)) * 40
    gpu.bars[0][0x5800:0x5800 + len(pattern)] = pattern
    before = d.usb.control_transfers, d.usb.bulk_transfers
    assert vram.read_bytes(0x5800, len(pattern)) == pattern            # pages 0x5000 (tail), 0x6000, 0x7000 (head)
    assert (d.usb.control_transfers - before[0], d.usb.bulk_transfers - before[1]) == (6, 3)
    assert vram.read_bytes(0x5801, 3) == pattern[1:4]
    with pytest.raises(USBBridgeError, match="unsupported request"): d.mem_read_block(0x8000_0000, 8)


def test_resizable_bars_are_set_to_their_largest_size():
  fn = PCIFunction("usb", 0x1234, 0x5678, 0x030000)
  fn.bars[0] = memoryview(bytearray(1 << 20))
  # REBAR capability at 0x100 (id 0x15, no next): BAR0 supports 1 MB..256 MB (bits 4..12), two resizable BARs
  fn.config[0x100:0x110] = struct.pack("<IIII", 0x15 | 1 << 16, 0x1FF << 4, 0 | 2 << 5, 0xF << 4)
  with ASM24xxDevice(MockUSBDevice(ASM24xx(fn)), None) as d:
    ctrl0, ctrl1 = d.read_config(0x108, 4), d.read_config(0x110, 4)
  assert (ctrl0 >> 8) & 0x3F == 8 and (ctrl0 >> 5) & 7 == 2      # 2^8 MB = 256 MB, the largest BAR0 supports
  assert (ctrl1 >> 8) & 0x3F == 3                                # BAR1's largest: 8 MB


def test_busy_completions_are_retried_and_bounded(gpu):
  with opened(gpu) as d:
    vram = d.map_bar(0)
    gpu.bars[0][0:4] = b"\x01\x02\x03\x04"
    d.usb.bridge.busy = 10
    assert vram.read32(0) == 0x04030201
    d.usb.bridge.busy = 11
    with pytest.raises(USBBridgeError, match="not completed after 10 retries"): vram.read32(0)


def test_unclaimed_address_completes_unsupported_request(gpu):
  with opened(gpu) as d:
    with pytest.raises(USBBridgeError, match="status 1 \\(unsupported request\\)"): d.mem_read(0x8000_0000, 4)


def test_no_host_dma_through_the_bridge(gpu):
  with opened(gpu) as d:
    with pytest.raises(USBBridgeError, match="cannot reach host memory"): d.alloc_dma(4096)


class Recorder(MockUSBDevice):
  """The stand-in, recording each control request as (bmRequestType, bRequest, wValue, wIndex)."""
  def __init__(self, *a, **kw):
    super().__init__(*a, **kw)
    self.requests = []
  def ctrl_transfer(self, bmRequestType, bRequest, wValue=0, wIndex=0, data_or_wLength=None, timeout=None):
    self.requests.append((bmRequestType, bRequest, wValue, wIndex))
    return super().ctrl_transfer(bmRequestType, bRequest, wValue, wIndex, data_or_wLength, timeout)


def test_sram_transfers_encode_sectors_read_bit_slot_and_16k_units(gpu):
  with ASM24xxDevice(Recorder(ASM24xx(gpu)), None) as d:
    d.sram_write(1, bytes(range(256)) * 80)                   # 20 KB: 40 sectors, 2 units of 16 KB, slot 1
    assert d.usb.requests[-1] == (0x40, 0xF2, 40, 1 | 2 << 8)
    assert d.window(1) == 0x240000 and gpu.dma.read(0x240000, 20 << 10) == bytes(range(256)) * 80
    assert d.sram_read(1, 512) == bytes(range(256)) * 2
    assert d.usb.requests[-1] == (0x40, 0xF2, 1 | 0x8000, 1 | 1 << 8)
    for bad in (100, 0, (256 << 10) + 512):
      with pytest.raises(ValueError, match="whole 512 B sectors"): d.sram_write(0, bytes(bad))
    with pytest.raises(ValueError, match="windows 0..1"): d.sram_read(2, 512)


def test_requests_after_batched_writes_send_them_first(gpu):
  # posted writes stay in order with every later request: an XDATA read or an SRAM transfer sends the batch first
  with opened(gpu) as d:
    d.map_bar(0).write32(0x100, 0xCAFE)
    d.xdata_read(0xA800, 4)
    assert gpu.bars[0][0x100:0x104] == b"\xfe\xca\0\0"
    d.map_bar(0).write32(0x104, 0xBEEF)
    d.sram_write(0, bytes(512))
    assert gpu.bars[0][0x104:0x108] == b"\xef\xbe\0\0"


def test_threads_take_turns_on_the_control_pipe(gpu):
  # each TLP's completion must be read before the next TLP: requests from two threads never interleave
  with opened(gpu) as d:
    vram, errors = d.map_bar(0), []
    gpu.bars[0][0:8] = bytes(range(8))
    def reads(off):
      try:
        for _ in range(200): assert vram.read32(off) == int.from_bytes(bytes(range(off, off + 4)), "little")
      except Exception as e: errors.append(e)
    ts = [threading.Thread(target=reads, args=(off,)) for off in (0, 4)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                               # threads switch often, as they would on a loaded host
    try:
      for t in ts: t.start()
      for t in ts: t.join()
    finally: sys.setswitchinterval(switch)
    assert not errors


def test_xdata_write_is_one_e5_per_byte_value_in_windex(gpu):
  with ASM24xxDevice(Recorder(ASM24xx(gpu)), None) as d:
    d.xdata_write(0xA804, b"\x01\x02")
    assert d.usb.requests[-2:] == [(0x40, 0xE5, 0xA804, 1), (0x40, 0xE5, 0xA805, 2)]
    assert d.xdata_read(0xA804, 2) == b"\x01\x02" and gpu.dma.read(0x820804, 2) == b"\x01\x02"   # sys_buf, as the GPU sees it


def test_the_bridge_model_is_the_registered_one_and_its_absence_is_named(monkeypatch):
  from drivers.system import registry
  from drivers.asm24xx import BRIDGE
  from drivers.system import usb
  import emu.usb.asm24xx
  assert registry.model(BRIDGE.model) is emu.usb.asm24xx.MODEL
  monkeypatch.setattr(usb, "model", lambda name: None)
  with pytest.raises(RuntimeError, match="no USB bridge model 'asm24xx' is registered"):
    usb.open_emulated("navi31", 0, None, BRIDGE)
