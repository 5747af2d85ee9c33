"""The ASMedia ASM24xx USB-to-PCIe bridge (custom firmware) in front of a PCI function model, behind an in-process
stand-in for a pyusb `usb.core.Device`, so its driver (drivers/asm24xx/bridge.py) runs unchanged against it.

Facts (tinygrad's runtime/support/usb.py, ASM24Controller): VID:PID 0xADD1:0x0001 or 0x3801:0x0001, product string "custom..."
or "AS2462..."; bulk OUT 0x02, bulk IN 0x81; vendor control requests 0xF3 (PCIe power), 0xE4 (XDATA read, up to 255
bytes), 0xE5 (XDATA byte write), 0xF0 OUT (a TLP request: wValue = fmt_type | byte_enable<<8, wIndex = mode, 12-byte
payload addr_lo, addr_hi, value_or_dwordcount), 0xF0 IN (8-byte completion: data u32 [0:4], completion status
(byte4>>5)&7, return status byte7). Link up: XDATA 0xB450 (LTSSM) reads 0x78. Config TLP address
bus<<24 | dev<<19 | fn<<16 | reg. The GPU reaches bridge SRAM at PCIe 0x820000 (XDATA 0xA000, 4 KB, sys_buf) and
0x822000 (XDATA 0xB800, 4 KB, cq_buf), and 512 KB of bounce SRAM at PCIe 0x200000; nothing else: no host memory.

Topology: four PCIe bridges (type-1 headers), each behind the previous one, the first on bus 0, then the function
as device 0 behind the fourth (on bus 4 once the driver numbers the buses). Routing follows PCI-to-PCI Bridge 1.2:
a type-1 config request is forwarded by a bridge whose secondary..subordinate range holds its bus, and turned into
type 0 on its secondary bus; memory requests are forwarded through a bridge whose COMMAND.MEM is set and whose
memory or prefetchable window holds the address; the function decodes its BARs (COMMAND.MEM set).

What the model decides where the facts say nothing (its reading, stated): a request the bridge cannot parse or
carry (not a vendor request, a payload that is not 12 bytes, an unknown fmt_type or mode, byte enables that are not
one contiguous run, an unaligned address, a request crossing a 4 KB boundary (PCIe 3.0, 2.2.7), a streaming count
over 1024 dwords, a TLP while the link is down, a completion read with none pending, a new TLP before the last
completion was read) stalls the control pipe: usb.core.USBError with errno EPIPE. A request nothing decodes
completes with status UR (1). Each request gets exactly one completion (posted writes too). `busy` makes the next
completion reads return a non-zero return status (the firmware still working), for tests of the driver's retries.

The 0xF2 SRAM transfer (wValue = 512 B sectors | bit 15 for a read, wIndex = slot | 16 KB units << 8) moves data
between the host (the next bulk OUT 0x02 or IN 0x81) and the 512 KB bounce SRAM. The facts do not say what `slot`
selects; the model's reading, UNVERIFIED against the firmware: the bounce SRAM is two 256 KB windows (the copy-in
protocol polls a sentinel "at the end of each 256 KB SRAM window"), `slot` is the window (0: PCIe 0x200000, 1:
0x240000), the transfer starts at the window's start, and the 16 KB units field is the transfer's length rounded up
to 16 KB (so it must agree with the sector count). Refused (a stall, as above): no sectors, more than one window, a
slot other than 0 or 1, a units field that disagrees, reserved bits 14:10 of wValue set, a data stage on the request,
a bulk transfer of another length than the sectors', and a 0xF2 while a TLP or another transfer is pending.
Not modelled: bridge device ids, I/O space, link speed.
"""
from __future__ import annotations
import array, errno, struct
import usb.core

from emu.pci import PCIFunction
from common.plugin import BridgeModel

VID_PID = ((0xADD1, 0x0001), (0x3801, 0x0001))
EP_OUT, EP_IN = 0x02, 0x81
REQ_POWER, REQ_XDATA_READ, REQ_XDATA_WRITE, REQ_TLP, REQ_SRAM = 0xF3, 0xE4, 0xE5, 0xF0, 0xF2
LTSSM, LTSSM_L0 = 0xB450, 0x78
CFG0_RD, CFG1_RD, CFG0_WR, CFG1_WR, MEM_WR, MEM_RD = 0x04, 0x05, 0x44, 0x45, 0x60, 0x20
MODE_SINGLE, MODE_STREAM_WRITE, MODE_STREAM_READ = 0, 1, 2
CPL_SC, CPL_UR = 0, 1
MAX_STREAM_DWORDS = 1024
# (PCIe address, XDATA address, size) of the bridge SRAM the function can reach
XDATA_WINDOWS = ((0x820000, 0xA000, 0x1000), (0x822000, 0xB800, 0x1000))
BOUNCE_ADDR, BOUNCE_SIZE = 0x200000, 512 << 10
BRIDGES = 4
SECTOR, SRAM_UNIT, SRAM_READ = 512, 16 << 10, 1 << 15
WINDOW_SIZE, WINDOWS = 256 << 10, 2          # the bounce SRAM as two windows (the model's reading of `slot`)


class PCIBridge:
  """A type-1 config header: bus numbers (0x18..0x1A), memory window (0x20/0x22: address bits 31:20 in bits 15:4),
  prefetchable window (0x24/0x26 plus upper 32 bits at 0x28/0x2C) and COMMAND (0x04)."""
  def __init__(self):
    self.config = bytearray(4096)
    self.config[0:4] = struct.pack("<HH", 0x1B21, 0)          # ASMedia's PCI vendor id; the device id is not modelled
    self.config[0x0B], self.config[0x0E] = 0x06, 0x01         # class: bridge; header type 1
    self.config[0x0A] = 0x04                                  # subclass: PCI-to-PCI

  def u(self, off: int, size: int) -> int: return int.from_bytes(self.config[off:off + size], "little")
  def secondary(self) -> int: return self.config[0x19]
  def subordinate(self) -> int: return self.config[0x1A]

  def forwards(self, addr: int) -> bool:
    if not self.config[0x04] & 0x2: return False
    mem_lo, mem_hi = (self.u(0x20, 2) & 0xFFF0) << 16, ((self.u(0x22, 2) & 0xFFF0) << 16) | 0xFFFFF
    pf_lo = ((self.u(0x24, 2) & 0xFFF0) << 16) | self.u(0x28, 4) << 32
    pf_hi = ((self.u(0x26, 2) & 0xFFF0) << 16) | 0xFFFFF | self.u(0x2C, 4) << 32
    return mem_lo <= addr <= mem_hi or pf_lo <= addr <= pf_hi

  def config_read(self, off: int, size: int) -> int: return self.u(off, size)

  def config_write(self, off: int, size: int, value: int) -> None:
    if off < 0x40 and not (0x04 <= off < 0x06 or 0x18 <= off < 0x1B or 0x20 <= off < 0x30): return   # read-only
    self.config[off:off + size] = value.to_bytes(size, "little")


def stall(what: str) -> usb.core.USBError:
  return usb.core.USBError(f"Pipe error: the bridge stalled {what}", -9, errno.EPIPE)


class ASM24xx:
  """The bridge: XDATA, PCIe power and link, TLP execution against the bridges and `function`."""
  def __init__(self, function: PCIFunction, link_trains: bool = True):
    self.function, self.link_trains = function, link_trains
    self.bridges = [PCIBridge() for _ in range(BRIDGES)]
    self.xdata = bytearray(0x10000)
    self.bounce = bytearray(BOUNCE_SIZE)
    self.completion: bytes | None = None
    self.stream: tuple[int, int] | None = None      # (address, dwords) of an armed streaming write/read
    self.sram: tuple[int, int, bool] | None = None  # (window offset, bytes, read) of an armed 0xF2 transfer
    self.busy = 0
    xd = memoryview(self.xdata)
    for pcie, xaddr, size in XDATA_WINDOWS: function.dma.map_at(pcie, xd[xaddr:xaddr + size])
    function.dma.map_at(BOUNCE_ADDR, memoryview(self.bounce))
    function.dma.unmapped = ("the USB bridge carries no DMA to host memory: the function reaches only the bridge SRAM at "
                             + ", ".join(f"{a:#x}+{s:#x}" for a, s in [(p, s) for p, _, s in XDATA_WINDOWS] + [(BOUNCE_ADDR, BOUNCE_SIZE)]))

  @property
  def link_up(self) -> bool: return self.xdata[LTSSM] == LTSSM_L0

  # --- control requests
  def control_out(self, req: int, value: int, index: int, data: bytes) -> None:
    if req == REQ_POWER:
      self.xdata[LTSSM] = LTSSM_L0 if value == 1 and self.link_trains else 0
    elif req == REQ_XDATA_WRITE:
      if index > 0xFF or data: raise stall(f"XDATA write {value:#x}: the value goes in wIndex, one byte, no data stage")
      self.xdata[value] = index
    elif req == REQ_TLP: self._tlp(value & 0xFF, value >> 8, index, data)
    elif req == REQ_SRAM: self._arm_sram(value, index, data)
    else: raise stall(f"vendor OUT request {req:#x}")

  def control_in(self, req: int, value: int, index: int, length: int) -> bytes:
    if req == REQ_XDATA_READ:
      if not 1 <= length <= 255 or value + length > len(self.xdata): raise stall(f"XDATA read of {length} bytes at {value:#x}")
      return bytes(self.xdata[value:value + length])
    if req == REQ_TLP:
      if length != 8: raise stall(f"TLP completion read of {length} bytes (it is 8)")
      if self.completion is None or self.stream is not None: raise stall("a TLP completion read with no completion pending")
      if self.busy:
        self.busy -= 1
        return self.completion[:7] + b"\x01"
      done, self.completion = self.completion, None
      return done
    raise stall(f"vendor IN request {req:#x}")

  def _arm_sram(self, value: int, index: int, data: bytes) -> None:
    sectors, slot, units = value & 0x3FF, index & 0xFF, index >> 8
    nbytes = sectors * SECTOR
    what = f"an SRAM transfer (0xF2) of {sectors} sectors in slot {slot} with {units} 16 KB units"
    if data: raise stall(f"{what}: it has no data stage (the data follows on the bulk endpoint)")
    if self.sram is not None or self.stream is not None or self.completion is not None:
      raise stall(f"{what} while a TLP or another SRAM transfer is pending")
    if value & 0x7C00 or not 1 <= nbytes <= WINDOW_SIZE or slot >= WINDOWS:
      raise stall(f"{what}: 1..{WINDOW_SIZE // SECTOR} sectors (one {WINDOW_SIZE >> 10} KB window), slot 0..{WINDOWS - 1}, "
                  "wValue bits 14:10 clear")
    if units != -(-nbytes // SRAM_UNIT): raise stall(f"{what}: {nbytes} bytes take {-(-nbytes // SRAM_UNIT)} 16 KB units")
    self.sram = (slot * WINDOW_SIZE, nbytes, bool(value & SRAM_READ))

  def _complete(self, status: int, data: int = 0) -> None:
    self.completion = struct.pack("<IBBBB", data, status << 5, 0, 0, 0)

  def _tlp(self, fmt_type: int, be: int, mode: int, payload: bytes) -> None:
    if len(payload) != 12: raise stall(f"a TLP request with a {len(payload)}-byte payload (it is 12)")
    if not self.link_up: raise stall("a TLP with the PCIe link down (LTSSM not in L0)")
    if self.completion is not None or self.stream is not None or self.sram is not None:
      raise stall("a TLP before the last one's completion was read (or with an SRAM transfer pending)")
    lo, hi, arg = struct.unpack("<III", payload)
    addr = lo | hi << 32
    if addr & 3: raise stall(f"a TLP at unaligned address {addr:#x}: addresses are dword-aligned, byte enables pick bytes")
    if fmt_type in (MEM_WR, MEM_RD) and mode in (MODE_STREAM_WRITE, MODE_STREAM_READ):
      if (fmt_type == MEM_WR) != (mode == MODE_STREAM_WRITE) or be != 0xF:
        raise stall(f"streaming mode {mode} with fmt_type {fmt_type:#x} byte enables {be:#x}")
      if not 1 <= arg <= MAX_STREAM_DWORDS or (addr & 0xFFF) + 4 * arg > 0x1000:
        raise stall(f"a streaming TLP of {arg} dwords at {addr:#x}: 1..{MAX_STREAM_DWORDS} dwords, not crossing a 4 KB boundary")
      self.stream = (addr, arg)
      return
    if mode != MODE_SINGLE: raise stall(f"TLP mode {mode}")
    if be not in (0x1, 0x2, 0x4, 0x8, 0x3, 0x6, 0xC, 0x7, 0xE, 0xF): raise stall(f"byte enables {be:#x}: not one contiguous run")
    first = (be & -be).bit_length() - 1
    size = bin(be).count("1")
    if fmt_type in (CFG0_RD, CFG1_RD, CFG0_WR, CFG1_WR):
      target = self._config_target(addr >> 24, (addr >> 19) & 0x1F, (addr >> 16) & 7, fmt_type & 1)
      reg = (addr & 0xFFF) + first
      if target is None: return self._complete(CPL_UR)
      if fmt_type & 0x40:
        target.config_write(reg, size, (arg >> 8 * first) & ((1 << 8 * size) - 1))
        return self._complete(CPL_SC)
      return self._complete(CPL_SC, target.config_read(reg, size) << 8 * first)
    if fmt_type in (MEM_WR, MEM_RD):
      if (dec := self._decode(addr + first)) is None: return self._complete(CPL_UR)
      region, off = dec
      if fmt_type == MEM_WR:
        self._mem_write(region, off, size, (arg >> 8 * first) & ((1 << 8 * size) - 1))
        return self._complete(CPL_SC)
      return self._complete(CPL_SC, self._mem_read(region, off, size) << 8 * first)
    raise stall(f"TLP fmt_type {fmt_type:#x}")

  # --- bulk
  def bulk_out(self, data: bytes) -> None:
    if self.sram is not None:
      off, n, read = self.sram
      if read or len(data) != n: raise stall(f"a bulk OUT of {len(data)} bytes for an SRAM {'read' if read else 'write'} of {n} bytes")
      self.sram = None
      self.bounce[off:off + n] = data
      return
    if self.stream is None: raise stall("a bulk OUT with no streaming write armed")
    addr, n = self.stream
    if len(data) != 4 * n: raise stall(f"a bulk OUT of {len(data)} bytes for a streaming write of {n} dwords")
    self.stream = None
    if (dec := self._decode_run(addr, 4 * n)) is None: return self._complete(CPL_UR)
    region, off = dec
    if isinstance(region, memoryview): region[off:off + 4 * n] = data
    else:
      for i in range(n): region.write(off + 4 * i, 4, int.from_bytes(data[4 * i:4 * i + 4], "little"))
    self._complete(CPL_SC)

  def bulk_in(self, length: int) -> bytes:
    if self.sram is not None:
      off, n, read = self.sram
      if not read or length != n: raise stall(f"a bulk IN of {length} bytes for an SRAM {'read' if read else 'write'} of {n} bytes")
      self.sram = None
      return bytes(self.bounce[off:off + n])
    if self.stream is None: raise stall("a bulk IN with no streaming read armed")
    addr, n = self.stream
    if length < 4 * n: raise stall(f"a bulk IN of {length} bytes for a streaming read of {n} dwords")
    self.stream = None
    if (dec := self._decode_run(addr, 4 * n)) is None:
      self._complete(CPL_UR)
      return b""
    self._complete(CPL_SC)
    region, off = dec
    if isinstance(region, memoryview): return bytes(region[off:off + 4 * n])
    return b"".join(region.read(off + 4 * i, 4).to_bytes(4, "little") for i in range(n))

  # --- routing
  def _config_target(self, bus: int, dev: int, fn: int, type1: int):
    chain = self.bridges + [self.function]
    if not type1: return chain[0] if bus == 0 and dev == 0 and fn == 0 else None
    for k, br in enumerate(self.bridges):
      if not br.secondary() <= bus <= br.subordinate() or br.secondary() == 0: return None
      if bus == br.secondary(): return chain[k + 1] if dev == 0 and fn == 0 else None
    return None

  def _decode(self, addr: int):
    if not all(br.forwards(addr) for br in self.bridges): return None
    fn = self.function
    if not fn.config[0x04] & 0x2: return None
    for n in fn.bars:
      lo = int.from_bytes(fn.config[0x10 + 4 * n:0x14 + 4 * n], "little")
      hi = int.from_bytes(fn.config[0x14 + 4 * n:0x18 + 4 * n], "little") if n < 5 else 0
      base = (lo & ~0xF) | hi << 32
      if base and base <= addr < base + fn.bar_size(n): return fn.bars[n], addr - base
    return None

  def _decode_run(self, addr: int, n: int):
    """(region, offset) when all of [addr, addr+n) decodes to one BAR."""
    if (dec := self._decode(addr)) is None or (end := self._decode(addr + n - 4)) is None or end[0] is not dec[0]: return None
    return dec

  @staticmethod
  def _mem_write(region, off: int, size: int, value: int) -> None:
    if isinstance(region, memoryview): region[off:off + size] = value.to_bytes(size, "little")
    else: region.write(off, size, value)

  @staticmethod
  def _mem_read(region, off: int, size: int) -> int:
    if isinstance(region, memoryview): return int.from_bytes(region[off:off + size], "little")
    return region.read(off, size)


class _Context:
  """What usb.util's claim/release/dispose call on a device (`device._ctx`)."""
  def __init__(self): self.claimed: set[int] = set()
  def managed_claim_interface(self, device, intf) -> None:
    device._check()
    if device.configuration != 1: raise usb.core.USBError("Entity not found: set configuration 1 first", -5, errno.ENOENT)
    if device.kernel_driver: raise usb.core.USBError("Resource busy: a kernel driver holds interface 0", -6, errno.EBUSY)
    self.claimed.add(intf if isinstance(intf, int) else intf.bInterfaceNumber)
  def managed_release_interface(self, device, intf) -> None:
    self.claimed.discard(intf if isinstance(intf, int) else getattr(intf, "bInterfaceNumber", 0))
  def dispose(self, device, close_handle: bool = True) -> None: self.claimed.clear()


class MockUSBDevice:
  """The bridge as a `usb.core.Device`: the attributes and methods drivers/asm24xx/bridge.py uses. `denied` makes it
  refuse access as libusb does without permission on the device node; disconnect() unplugs it."""
  def __init__(self, bridge: ASM24xx, vid_pid: tuple[int, int] = VID_PID[0], product: str = "custom ASM2464PD",
               bus: int = 1, address: int = 2, denied: bool = False, firmware: int = 0x0100):
    self.bridge, (self.idVendor, self.idProduct), self.product = bridge, vid_pid, product
    self.bus, self.address, self.denied = bus, address, denied
    self.port_numbers, self.bcdDevice = (address - 1,), firmware     # the hub port; the firmware's release number
    self.kernel_driver, self.configuration, self.connected = True, None, True
    self._ctx = _Context()
    self.control_transfers = self.bulk_transfers = 0

  def _check(self) -> None:
    if not self.connected: raise usb.core.USBError("No such device (it may have been disconnected)", -4, errno.ENODEV)
    if self.denied: raise usb.core.USBError("Access denied (insufficient permissions)", -3, errno.EACCES)

  def _claimed(self) -> None:
    self._check()
    if 0 not in self._ctx.claimed: raise usb.core.USBError("interface 0 is not claimed", -6, errno.EBUSY)

  def is_kernel_driver_active(self, intf: int) -> bool:
    self._check()
    return self.kernel_driver

  def detach_kernel_driver(self, intf: int) -> None:
    self._check()
    self.kernel_driver = False

  def set_configuration(self, configuration: int = 1) -> None:
    self._check()
    if configuration != 1: raise usb.core.USBError(f"configuration {configuration}: the bridge has configuration 1", -5, errno.ENOENT)
    self.configuration = configuration

  def set_interface_altsetting(self, interface: int = 0, alternate_setting: int = 0) -> None:
    self._claimed()
    if (interface, alternate_setting) != (0, 0): raise usb.core.USBError("the bridge has interface 0 alt setting 0", -5, errno.ENOENT)

  def ctrl_transfer(self, bmRequestType: int, bRequest: int, wValue: int = 0, wIndex: int = 0,
                    data_or_wLength=None, timeout=None):
    self._claimed()
    self.control_transfers += 1
    if bmRequestType & 0x7F != 0x40: raise stall(f"request type {bmRequestType:#x}: the bridge answers vendor requests to the device")
    if bmRequestType & 0x80: return array.array("B", self.bridge.control_in(bRequest, wValue, wIndex, int(data_or_wLength or 0)))
    data = bytes(data_or_wLength or b"")
    self.bridge.control_out(bRequest, wValue, wIndex, data)
    return len(data)

  def write(self, endpoint: int, data, timeout=None) -> int:
    self._claimed()
    self.bulk_transfers += 1
    if endpoint != EP_OUT: raise stall(f"a bulk OUT to endpoint {endpoint:#x} (it is {EP_OUT:#x})")
    self.bridge.bulk_out(bytes(data))
    return len(data)

  def read(self, endpoint: int, size_or_buffer, timeout=None):
    self._claimed()
    self.bulk_transfers += 1
    if endpoint != EP_IN: raise stall(f"a bulk IN from endpoint {endpoint:#x} (it is {EP_IN:#x})")
    return array.array("B", self.bridge.bulk_in(int(size_or_buffer)))

  def disconnect(self) -> None: self.connected = False


MODEL = BridgeModel("asm24xx", lambda function, bus, address: MockUSBDevice(ASM24xx(function), bus=bus, address=address))
