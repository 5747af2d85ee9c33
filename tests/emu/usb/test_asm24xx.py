"""The ASM24xx model's protocol and constraints, driven with raw control/bulk transfers (facts: amd_driver.md 1.2.1)."""
import errno, struct
import pytest
import usb.core, usb.util

from emu.pci import PCIFunction, DMAFault
from emu.usb.asm24xx import ASM24xx, MockUSBDevice


def bridge(link_trains=True):
  fn = PCIFunction("usb", 0x1234, 0x5678, 0x030000)
  fn.bars[0] = memoryview(bytearray(1 << 20))
  fn.config[0x04] |= 0x2
  dev = MockUSBDevice(ASM24xx(fn, link_trains))
  dev.detach_kernel_driver(0)
  dev.set_configuration(1)
  usb.util.claim_interface(dev, 0)
  return fn, dev


def out(dev, req, value=0, index=0, data=b""): return dev.ctrl_transfer(0x40, req, value, index, data)
def tlp(dev, fmt, be, addr, value, mode=0): return out(dev, 0xF0, fmt | be << 8, mode, struct.pack("<III", addr & 0xFFFFFFFF, addr >> 32, value))
def cpl(dev): return bytes(dev.ctrl_transfer(0xC0, 0xF0, 0, 0, 8))


def stalls(fn, *args):
  with pytest.raises(usb.core.USBError) as e: fn(*args)
  assert e.value.errno == errno.EPIPE
  return str(e.value)


def test_link_comes_up_on_power_and_reads_ltssm_0x78():
  _, dev = bridge()
  assert bytes(dev.ctrl_transfer(0xC0, 0xE4, 0xB450, 0, 1)) == b"\x00"
  out(dev, 0xF3, 1)
  assert bytes(dev.ctrl_transfer(0xC0, 0xE4, 0xB450, 0, 1)) == b"\x78"
  out(dev, 0xE5, 0xA000, 0x5A)
  assert bytes(dev.ctrl_transfer(0xC0, 0xE4, 0xA000, 0, 1)) == b"\x5a"
  assert "XDATA read" in stalls(dev.ctrl_transfer, 0xC0, 0xE4, 0, 0, 256)


def test_tlps_need_the_link_and_a_claimed_interface():
  fn, dev = bridge(link_trains=False)
  out(dev, 0xF3, 1)
  assert "link down" in stalls(tlp, dev, 0x04, 0xF, 0, 0)
  fresh = MockUSBDevice(ASM24xx(PCIFunction("x", 1, 2, 3)))
  with pytest.raises(usb.core.USBError, match="not claimed"): out(fresh, 0xF3, 1)


def test_config_tlp_routing_through_the_four_bridges():
  fn, dev = bridge()
  out(dev, 0xF3, 1)
  tlp(dev, 0x04, 0xF, 0, 0)                                  # bridge on bus 0: ASMedia vendor id, class bridge
  assert struct.unpack("<IBBBB", cpl(dev))[0] & 0xFFFF == 0x1B21
  tlp(dev, 0x05, 0xF, 4 << 24, 0)                            # bus 4 unreachable before bus numbering: UR
  assert (cpl(dev)[4] >> 5) & 7 == 1
  for b in range(4):
    tlp(dev, 0x44 if b == 0 else 0x45, 0x7, b << 24 | 0x18, b | (b + 1) << 8 | 4 << 16)
    assert cpl(dev)[4] == 0
  tlp(dev, 0x05, 0xF, 4 << 24, 0)
  c = cpl(dev)
  assert (c[4] >> 5) & 7 == 0 and int.from_bytes(c[:4], "little") == 0x5678_1234
  tlp(dev, 0x05, 0xF, 4 << 24 | 1 << 19, 0)                  # device 1 on bus 4: nothing there
  assert (cpl(dev)[4] >> 5) & 7 == 1


@pytest.mark.parametrize("case", ["unaligned", "byte enables", "payload", "fmt", "4k", "count", "pending", "no completion", "bulk len"])
def test_each_tlp_constraint_stalls_the_pipe(case):
  fn, dev = bridge()
  out(dev, 0xF3, 1)
  if case == "unaligned": stalls(tlp, dev, 0x20, 0xF, 0x1002, 0)
  if case == "byte enables": stalls(tlp, dev, 0x20, 0x5, 0x1000, 0)
  if case == "payload": stalls(out, dev, 0xF0, 0x20 | 0xF << 8, 0, b"\0" * 8)
  if case == "fmt": stalls(tlp, dev, 0x7F, 0xF, 0x1000, 0)
  if case == "4k": stalls(tlp, dev, 0x60, 0xF, 0xFF8, 4, 1)
  if case == "count": stalls(tlp, dev, 0x60, 0xF, 0, 1025, 1)
  if case == "pending":
    tlp(dev, 0x04, 0xF, 0, 0)
    stalls(tlp, dev, 0x04, 0xF, 0, 0)
  if case == "no completion": stalls(cpl, dev)
  if case == "bulk len":
    tlp(dev, 0x60, 0xF, 0, 4, 1)
    stalls(dev.write, 0x02, b"\0" * 8)


def test_gpu_dma_reaches_only_the_bridge_sram_windows():
  fn, dev = bridge()
  fn.dma.write(0x820000 + 0x800, b"\x11\x22\x33\x44")        # sys_buf drain fence: XDATA 0xA800
  out(dev, 0xF3, 1)
  assert bytes(dev.ctrl_transfer(0xC0, 0xE4, 0xA800, 0, 4)) == b"\x11\x22\x33\x44"
  fn.dma.write(0x822000, b"\x99")                            # cq_buf: XDATA 0xB800
  assert bytes(dev.ctrl_transfer(0xC0, 0xE4, 0xB800, 0, 1)) == b"\x99"
  with pytest.raises(DMAFault, match="USB bridge carries no DMA to host memory"): fn.dma.write(0x1_0000_0000, b"\0")
  with pytest.raises(DMAFault, match="0x822000\\+0x1000"): fn.dma.read(0x823000, 4)   # past the cq_buf window
  fn.dma.write(0x200000 + (512 << 10) - 4, b"\1\2\3\4")                               # the 512 KB bounce SRAM
  assert bytes(dev.bridge.bounce)[-4:] == b"\1\2\3\4"
  with pytest.raises(DMAFault): fn.dma.write(0x200000 + (512 << 10), b"\0")


def test_disconnect_and_permission_errors_are_libusbs():
  fn, dev = bridge()
  dev.disconnect()
  with pytest.raises(usb.core.USBError) as e: out(dev, 0xF3, 1)
  assert e.value.errno == errno.ENODEV
  denied = MockUSBDevice(ASM24xx(PCIFunction("x", 1, 2, 3)), denied=True)
  with pytest.raises(usb.core.USBError) as e: denied.set_configuration(1)
  assert e.value.errno == errno.EACCES


def sram(dev, sectors, slot, units, read=False, data=b""):
  return out(dev, 0xF2, sectors | (0x8000 if read else 0), slot | units << 8, data)


def test_sram_transfer_writes_and_reads_the_window_the_slot_selects():
  # the model's reading of `slot` (unverified): window 0 at PCIe 0x200000, window 1 at 0x240000, 256 KB each
  fn, dev = bridge()
  sram(dev, 2, 1, 1)                                         # 1024 bytes: 2 sectors, one 16 KB unit
  dev.write(0x02, bytes(range(256)) * 4)
  assert fn.dma.read(0x240000, 1024) == bytes(range(256)) * 4 and fn.dma.read(0x200000, 4) == b"\0" * 4
  fn.dma.write(0x200000 + (256 << 10) - 4, b"\x51\0\0\x07")  # what the GPU wrote at the end of window 0
  sram(dev, 512, 0, 16, read=True)                           # the whole window: 512 sectors, 16 units
  assert bytes(dev.read(0x81, 256 << 10))[-4:] == b"\x51\0\0\x07"


@pytest.mark.parametrize("case", ["no sectors", "two windows", "slot", "units", "reserved", "data stage", "bulk len",
                                  "direction", "tlp pending", "tlp after"])
def test_each_sram_constraint_stalls_the_pipe(case):
  fn, dev = bridge()
  out(dev, 0xF3, 1)
  if case == "no sectors": assert "0xF2" in stalls(sram, dev, 0, 0, 0)
  if case == "two windows": stalls(sram, dev, 513, 0, 17)
  if case == "slot": stalls(sram, dev, 1, 2, 1)
  if case == "units": assert "take 1 16 KB units" in stalls(sram, dev, 1, 0, 2)
  if case == "reserved": stalls(out, dev, 0xF2, 1 | 1 << 12, 1 << 8)
  if case == "data stage": stalls(sram, dev, 1, 0, 1, False, b"\0" * 4)
  if case == "bulk len":
    sram(dev, 1, 0, 1)
    stalls(dev.write, 0x02, b"\0" * 256)
  if case == "direction":
    sram(dev, 1, 0, 1, read=True)
    stalls(dev.write, 0x02, b"\0" * 512)
  if case == "tlp pending":
    tlp(dev, 0x04, 0xF, 0, 0)
    stalls(sram, dev, 1, 0, 1)
  if case == "tlp after":
    sram(dev, 1, 0, 1)
    stalls(tlp, dev, 0x04, 0xF, 0, 0)
