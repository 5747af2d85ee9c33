"""ASM24xxDevice: a PCI function behind an ASMedia ASM24xx USB3/USB4-to-PCIe bridge (custom firmware), through pyusb
(drivers/system/usb.py USBPCIDevice: the USB side).

Facts: tinygrad's runtime/support/usb.py (ASM24Controller). The bridge is driven by vendor control requests: 0xF3 powers PCIe
(link up: XDATA 0xB450, the LTSSM state, reads 0x78), 0xE4/0xE5 read/write XDATA, 0xF0 OUT sends a TLP
(wValue = fmt_type | byte_enable<<8, wIndex = mode, payload addr_lo, addr_hi, value_or_dwordcount) and 0xF0 IN reads
its 8-byte completion (data u32 [0:4], completion status (byte4>>5)&7, return status byte7, non-zero: retry up to
10 times, 1 ms apart). Streaming writes (mode 1) carry their data on bulk OUT 0x02.
Setup (done on open): the four bridges on buses 0..3 get bus numbers, a memory window at 0x1000_0000, a prefetchable
window at 32 GiB and COMMAND = IO|MEM|MASTER; the function on bus 4 gets its resizable BARs at their largest size
(REBAR, extended capability 0x15, PCIe 3.0 7.22) and each BAR a 2 MB-aligned address.
Register writes are batched (runs of consecutive dwords become one streaming write); a read, flush() or close()
sends them. The function cannot reach host memory through the bridge: alloc_dma/map_dma raise. What it reaches
instead is the bridge's SRAM: sram_write/sram_read move data between the host and the 512 KB bounce SRAM with 0xF2
(wValue = 512 B sectors | bit 15 for a read, wIndex = slot | 16 KB units << 8, the data on the bulk endpoints), and
xdata_read/xdata_write reach the 4 KB windows (sys_buf, cq_buf) through XDATA. What `slot` selects is not in the facts; this
driver's reading, UNVERIFIED against the firmware (emu/usb/asm24xx.py reads it the same way): the bounce SRAM is two
256 KB windows, slot 0 at PCIe 0x200000 and slot 1 at 0x240000, a transfer starts at its window's start, and the
units field is its length rounded up to 16 KB.
"""
from __future__ import annotations
import functools, struct, time
from typing import Callable

from drivers.system.dma import DMAMemory
from drivers.system.mmio import MMIO, CallbackMMIO
from drivers.system.usb import USBBridgeError, USBPCIDevice
from drivers.asm24xx import VID_PID

PRODUCTS = ("custom", "AS2462")
EP_OUT, EP_IN = 0x02, 0x81
VENDOR_OUT, VENDOR_IN = 0x40, 0xC0
REQ_POWER, REQ_XDATA_READ, REQ_XDATA_WRITE, REQ_TLP, REQ_SRAM = 0xF3, 0xE4, 0xE5, 0xF0, 0xF2
LTSSM, LTSSM_L0 = 0xB450, 0x78
CFG0_RD, CFG1_RD, CFG0_WR, CFG1_WR, MEM_WR, MEM_RD = 0x04, 0x05, 0x44, 0x45, 0x60, 0x20
MODE_SINGLE, MODE_STREAM_WRITE, MODE_STREAM_READ = 0, 1, 2
CPL_STATUS = {0: "successful", 1: "unsupported request", 2: "configuration request retry", 4: "completer abort"}
RETRIES, RETRY_S = 10, 0.001
BRIDGE_BUSES, FUNCTION_BUS = range(4), 4
MEM_BASE, PREF_BASE, BAR_ALIGN = 0x1000_0000, 32 << 30, 2 << 20
STREAM_DWORDS = 1024         # a streaming write stays inside one 4 KB page
PCI_EXT_CAP_ID_REBAR = 0x15
# the bridge SRAM the function reaches (PCIe address, XDATA address, size): sys_buf and cq_buf, and the bounce SRAM
SYS_BUF, SYS_BUF_XDATA = 0x820000, 0xA000
CQ_BUF, CQ_BUF_XDATA = 0x822000, 0xB800
BOUNCE, BOUNCE_SIZE = 0x200000, 512 << 10
SECTOR, SRAM_UNIT, SRAM_READ = 512, 16 << 10, 1 << 15
WINDOW_SIZE, WINDOWS = 256 << 10, 2          # this driver's reading of `slot` (unverified): two 256 KB windows


def serialized(method: Callable) -> Callable:
  """One request sequence at a time on the bridge (a TLP and its completion, an SRAM transfer and its data), whichever
  thread asks: the control pipe holds one pending completion."""
  @functools.wraps(method)
  def run(self, *args, **kw):
    with self.io: return method(self, *args, **kw)
  return run


class _BARMMIO(CallbackMMIO):
  """A BAR: register accesses are memory TLPs (writes batched); aligned block reads are streaming reads, aligned block
  writes join the batch at once."""
  region: _BAR

  def read_bytes(self, offset: int, n: int) -> bytes:
    self._check(offset, n)
    if offset % 4 or n % 4: return super().read_bytes(offset, n)
    return self.region.dev.mem_read_block(self.region.base + offset, n)

  def write_bytes(self, offset: int, data: bytes | memoryview) -> None:
    data = bytes(data)
    if offset % 4 or len(data) % 4: return super().write_bytes(offset, data)
    if offset < 0 or offset + len(data) > self.size:
      raise IndexError(f"MMIO access [{offset:#x}, +{len(data)}) is outside the region of {self.size:#x} bytes")
    self.region.dev.mem_write_block(self.region.base + offset, data)


class _BAR:
  """A BAR as an I/O region: each access a memory TLP (writes batched)."""
  def __init__(self, dev: ASM24xxDevice, base: int, size: int): self.dev, self.base, self.size = dev, base, size
  def read(self, offset: int, size: int) -> int:
    if size == 8: return self.read(offset, 4) | self.read(offset + 4, 4) << 32
    return self.dev.mem_read(self.base + offset, size)
  def write(self, offset: int, size: int, value: int) -> None:
    if size == 8:
      self.write(offset, 4, value & 0xFFFFFFFF)
      return self.write(offset + 4, 4, value >> 32)
    self.dev.mem_write(self.base + offset, size, value)


class ASM24xxDevice(USBPCIDevice):
  """The function behind an ASM24xx bridge (see USBPCIDevice for `device`, `lock_prefix` and `bus`)."""
  ids = VID_PID

  def _bring_up(self) -> None:
    self._batch: list[tuple[int, int]] = []      # (address, dword) of posted writes not sent yet
    self._bar_base: dict[int, int] = {}
    self._bar_len: dict[int, int] = {}
    product = self._usb(lambda: self.usb.product) or ""
    if not product.startswith(PRODUCTS):
      raise ValueError(f"{self.name} has product string {product!r}, not one of the bridge firmware's ({', '.join(PRODUCTS)}...)")
    self._usb(self._setup_usb)
    self._link_up()
    self._setup_buses()
    self.vendor_id, self.device_id = self.read_config(0, 2), self.read_config(2, 2)

  def _link_up(self) -> None:
    self._usb(lambda: self.usb.ctrl_transfer(VENDOR_OUT, REQ_POWER, 1, 0, b""))
    if (state := self.xdata_read(LTSSM, 1)[0]) != LTSSM_L0:
      raise USBBridgeError(f"{self.name}: PCIe link not up (LTSSM {state:#x}, not {LTSSM_L0:#x}): check the function's "
                           "power supply and the bridge's PCIe connection, then replug")

  @serialized
  def xdata_read(self, addr: int, n: int) -> bytes:
    """n (1..255) bytes of the bridge controller's XDATA at `addr`."""
    if not 1 <= n <= 255: raise ValueError(f"XDATA read of {n} bytes: 1..255 per request")
    if getattr(self, "_batch", None): self.flush()     # after the writes before it, as every request
    return bytes(self._usb(lambda: self.usb.ctrl_transfer(VENDOR_IN, REQ_XDATA_READ, addr, 0, n)))

  @serialized
  def xdata_write(self, addr: int, data: bytes) -> None:
    """Bytes into the bridge controller's XDATA at `addr`, one 0xE5 request each (the value in wIndex), in order."""
    self.flush()
    for i, b in enumerate(data): self._usb(lambda: self.usb.ctrl_transfer(VENDOR_OUT, REQ_XDATA_WRITE, addr + i, b, b""))

  def window(self, slot: int) -> int:
    """The PCIe address of SRAM window `slot` (0 or 1)."""
    if not 0 <= slot < WINDOWS: raise ValueError(f"SRAM window {slot}: the bounce SRAM has windows 0..{WINDOWS - 1}")
    return BOUNCE + slot * WINDOW_SIZE

  def _sram(self, slot: int, n: int, read: bool) -> None:
    self.window(slot)
    if not 0 < n <= WINDOW_SIZE or n % SECTOR:
      raise ValueError(f"an SRAM transfer of {n} bytes: whole {SECTOR} B sectors, at most one {WINDOW_SIZE >> 10} KB window")
    self.flush()
    value, index = n // SECTOR | (SRAM_READ if read else 0), slot | -(-n // SRAM_UNIT) << 8
    self._usb(lambda: self.usb.ctrl_transfer(VENDOR_OUT, REQ_SRAM, value, index, b""))

  @serialized
  def sram_write(self, slot: int, data: bytes | memoryview) -> None:
    """Write `data` (whole 512 B sectors, at most 256 KB) to the start of SRAM window `slot`: 0xF2, then bulk OUT."""
    self._sram(slot, len(data), read=False)
    self._usb(lambda: self.usb.write(EP_OUT, data))

  @serialized
  def sram_read(self, slot: int, n: int) -> bytes:
    """n bytes (whole sectors, at most 256 KB) from the start of SRAM window `slot`: 0xF2 with bit 15, then bulk IN."""
    self._sram(slot, n, read=True)
    data = bytes(self._usb(lambda: self.usb.read(EP_IN, n)))
    if len(data) != n: raise USBBridgeError(f"{self.name}: an SRAM read of {n} bytes returned {len(data)}")
    return data

  # --- TLPs
  def _tlp(self, fmt_type: int, be: int, addr: int, value: int, mode: int = MODE_SINGLE, data: bytes = b"") -> int:
    payload = struct.pack("<III", addr & 0xFFFFFFFF, addr >> 32, value)
    self._usb(lambda: self.usb.ctrl_transfer(VENDOR_OUT, REQ_TLP, fmt_type | be << 8, mode, payload))
    if data: self._usb(lambda: self.usb.write(EP_OUT, data))
    return self._completion(fmt_type, addr)

  def _completion(self, fmt_type: int, addr: int) -> int:
    for _ in range(RETRIES + 1):
      cpl = bytes(self._usb(lambda: self.usb.ctrl_transfer(VENDOR_IN, REQ_TLP, 0, 0, 8)))
      if cpl[7] == 0: break
      time.sleep(RETRY_S)
    else: raise USBBridgeError(f"{self.name}: TLP {fmt_type:#x} at {addr:#x} not completed after {RETRIES} retries (return status {cpl[7]:#x})")
    if status := (cpl[4] >> 5) & 7:
      raise USBBridgeError(f"{self.name}: TLP {fmt_type:#x} at {addr:#x} completed with status {status} "
                           f"({CPL_STATUS.get(status, 'reserved')}): nothing behind the bridge accepts that address")
    return int.from_bytes(cpl[0:4], "little")

  @staticmethod
  def _enables(offset: int, size: int) -> int:
    if size not in (1, 2, 4) or offset % size: raise ValueError(f"an access of {size} bytes at {offset:#x}: 1, 2 or 4 naturally aligned bytes")
    return ((1 << size) - 1) << (offset & 3)

  def _cfg(self, bus: int, offset: int, size: int, value: int | None = None) -> int:
    be, shift = self._enables(offset, size), 8 * (offset & 3)
    addr = bus << 24 | (offset & 0xFFC)      # device 0, function 0
    if value is None: return (self._tlp(CFG1_RD if bus else CFG0_RD, be, addr, 0) >> shift) & ((1 << 8 * size) - 1)
    self._tlp(CFG1_WR if bus else CFG0_WR, be, addr, value << shift)
    return 0

  @serialized
  def read_config(self, offset: int, size: int) -> int:
    self.flush()
    return self._cfg(FUNCTION_BUS, offset, size)

  @serialized
  def write_config(self, offset: int, size: int, value: int) -> None:
    self.flush()
    self._cfg(FUNCTION_BUS, offset, size, value)

  @serialized
  def mem_read(self, addr: int, size: int) -> int:
    self.flush()
    return (self._tlp(MEM_RD, self._enables(addr, size), addr & ~3, 0) >> 8 * (addr & 3)) & ((1 << 8 * size) - 1)

  @serialized
  def mem_read_block(self, addr: int, n: int) -> bytes:
    """n bytes (dword-aligned) at `addr` by streaming reads (mode 2, data on bulk IN 0x81), one per 4 KB page."""
    self.flush()
    out = bytearray()
    while n > 0:
      k = min(n, 0x1000 - (addr & 0xFFF))
      payload = struct.pack("<III", addr & 0xFFFFFFFF, addr >> 32, k // 4)
      self._usb(lambda: self.usb.ctrl_transfer(VENDOR_OUT, REQ_TLP, MEM_RD | 0xF << 8, MODE_STREAM_READ, payload))
      data = bytes(self._usb(lambda: self.usb.read(EP_IN, k)))
      self._completion(MEM_RD, addr)
      out += data
      addr, n = addr + k, n - k
    return bytes(out)

  @serialized
  def mem_write(self, addr: int, size: int, value: int) -> None:
    if size != 4:
      self.flush()
      self._tlp(MEM_WR, self._enables(addr, size), addr & ~3, value << 8 * (addr & 3))
      return
    self._enables(addr, 4)
    self._batch.append((addr, value))
    if len(self._batch) >= STREAM_DWORDS: self.flush()

  @serialized
  def mem_write_block(self, addr: int, data: bytes) -> None:
    """Dword-aligned bytes at `addr` as posted writes (batched like mem_write's)."""
    self._enables(addr, 4)
    self._batch.extend(zip(range(addr, addr + len(data), 4), struct.unpack(f"<{len(data) // 4}I", data)))
    if len(self._batch) >= STREAM_DWORDS: self.flush()

  @serialized
  def flush(self) -> None:
    """Send the batched writes, in order: runs of consecutive dwords in one 4 KB page as streaming writes."""
    batch, self._batch = self._batch, []
    i = 0
    while i < len(batch):
      j = i + 1
      while j < len(batch) and batch[j][0] == batch[j - 1][0] + 4 and batch[j][0] & 0xFFF: j += 1
      addr = batch[i][0]
      if j - i == 1: self._tlp(MEM_WR, 0xF, addr, batch[i][1])
      else: self._tlp(MEM_WR, 0xF, addr, j - i, MODE_STREAM_WRITE, struct.pack(f"<{j - i}I", *(v for _, v in batch[i:j])))
      i = j

  # --- bus and BAR setup
  def _setup_buses(self) -> None:
    for b in BRIDGE_BUSES:
      self._cfg(b, 0x18, 4, b | (b + 1) << 8 | FUNCTION_BUS << 16)     # primary, secondary, subordinate
    self._rebar()
    mem, pref = MEM_BASE, PREF_BASE
    slot = 0
    while slot < 6:
      off = 0x10 + 4 * slot
      self._cfg(FUNCTION_BUS, off, 4, 0xFFFFFFFF)
      lo = self._cfg(FUNCTION_BUS, off, 4)
      is64 = (lo >> 1) & 3 == 2 and slot < 5
      hi = 0
      if is64:
        self._cfg(FUNCTION_BUS, off + 4, 4, 0xFFFFFFFF)
        hi = self._cfg(FUNCTION_BUS, off + 4, 4)
      mask = (lo & ~0xF) | hi << 32 | ((0xFFFFFFFF << 32) if not is64 else 0)
      if lo & ~0xF:
        size = (~mask & ((1 << 64) - 1)) + 1
        prefetch = bool(lo & 0x8) and is64
        base = -(-(pref if prefetch else mem) // max(size, BAR_ALIGN)) * max(size, BAR_ALIGN)
        if prefetch: pref = base + size
        else: mem = base + size
        self._cfg(FUNCTION_BUS, off, 4, base & 0xFFFFFFFF)
        if is64: self._cfg(FUNCTION_BUS, off + 4, 4, base >> 32)
        self._bar_base[slot], self._bar_len[slot] = base, size
      else:
        self._cfg(FUNCTION_BUS, off, 4, 0)
      slot += 2 if is64 else 1
    if mem > 1 << 32: raise USBBridgeError(f"{self.name}: the function's non-prefetchable BARs need {mem - MEM_BASE:#x} bytes, past 4 GiB")
    for b in BRIDGE_BUSES:
      self._cfg(b, 0x20, 4, (MEM_BASE >> 16) | ((max(mem, MEM_BASE + 1) - 1) >> 16 & 0xFFF0) << 16)
      pend = max(pref, PREF_BASE + 1) - 1
      self._cfg(b, 0x24, 4, ((PREF_BASE >> 16) & 0xFFF0) | ((pend >> 16) & 0xFFF0) << 16)
      self._cfg(b, 0x28, 4, PREF_BASE >> 32)
      self._cfg(b, 0x2C, 4, pend >> 32)
      self._cfg(b, 0x04, 2, 0x7)                                        # COMMAND = IO | MEM | MASTER
    self._cfg(FUNCTION_BUS, 0x04, 2, 0x7)

  def _rebar(self) -> None:
    """Every resizable BAR at its largest supported size (PCIe 3.0 7.22: capability at +4 per BAR, control at +8)."""
    off = 0x100
    while off:
      hdr = self._cfg(FUNCTION_BUS, off, 4)
      if hdr in (0, 0xFFFFFFFF): return
      if hdr & 0xFFFF == PCI_EXT_CAP_ID_REBAR:
        count = (self._cfg(FUNCTION_BUS, off + 8, 4) >> 5) & 7
        for i in range(count):
          cap, ctrl = self._cfg(FUNCTION_BUS, off + 4 + 8 * i, 4), self._cfg(FUNCTION_BUS, off + 8 + 8 * i, 4)
          if sizes := (cap >> 4) & 0xFFFFF: self._cfg(FUNCTION_BUS, off + 8 + 8 * i, 4, (ctrl & ~0x3F00) | (sizes.bit_length() - 1) << 8)
        return
      off = hdr >> 20

  # --- PCIDevice
  def bar_size(self, n: int) -> int:
    if n not in self._bar_len: raise ValueError(f"{self.bus} has no BAR{n} (BARs: {sorted(self._bar_len)})")
    return self._bar_len[n]

  def bar_address(self, n: int) -> int:
    """The PCIe address BAR n was assigned."""
    self.bar_size(n)
    return self._bar_base[n]

  def _map_bar(self, n: int) -> MMIO:
    return _BARMMIO(_BAR(self, self.bar_address(n), self.bar_size(n)), f"{self.bus} BAR{n}")

  def _no_dma(self) -> DMAMemory:
    raise USBBridgeError(f"{self.name}: the function cannot reach host memory through the bridge; place DMA buffers in "
                         "device memory or in the bridge's SRAM windows")
  def _alloc_dma(self, size: int, contiguous: bool) -> DMAMemory: return self._no_dma()
  def _map_dma(self, view: memoryview) -> DMAMemory: return self._no_dma()

  def reset(self) -> None:
    raise USBBridgeError(f"{self.name}: function-level reset is not available through the bridge; power-cycle the device")

  def close(self) -> None:
    try:
      if getattr(self, "_batch", None): self.flush()
    finally: super().close()
