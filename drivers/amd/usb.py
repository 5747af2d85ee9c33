"""The AM driver on a GPU behind the ASMedia ASM24xx USB-to-PCIe bridge (USB+AMD, MOCKUSB+AMD): where memory goes and
how host copies travel when the GPU cannot reach host memory. The AM boot itself is PCIIface's, unchanged.

Facts (tinygrad's runtime/support/usb.py and ops_amd.py USBIface):
- Placement: every allocation is in VRAM; the compute ring is 0x2000 B, the SDMA ring 1 MB; kernel arguments come in
  8 KB chunks and signals in 0x100 B pages; no interrupts (the driver polls).
- copyin is pipelined through the bridge's bounce SRAM: the host writes a window (drivers/asm24xx/bridge.py sram_write)
  whose last dword is the sentinel 0x51000000|seq; the SDMA engine polls that sentinel, copies the window to VRAM
  and writes seq to the drain fence at sys_buf+0x800, which the host reads back through XDATA (0xE4) before it
  reuses the window; a drain that makes no progress for 10 s is an error.
- copyout: the SDMA engine copies into a window, then the host reads it (sram_read).
The window layout (two 256 KB windows, what the 0xF2 `slot` selects) is drivers/asm24xx/bridge.py's reading, unverified.
This driver's own choices: copyout is one submission too, each window's copy (after the first two) waiting with
POLL_REGMEM >= for a release counter at sys_buf+0x804 that the host raises through XDATA (0xE5, low byte first, so the
engine never sees a value above the one written) once it has read the window; at open, the fence and the counter
are zeroed and both windows cleared (no sentinel of an earlier process can match a new one); sequence numbers then
count windows from 1 (2^32 windows, 1 PiB, per open before they would wrap; not handled).

CPU-visible memory (what drivers/hcq writes through memoryviews: rings, signals, kernel arguments, code) has no host
mapping through the bridge, so each CPU-visible allocation is a Mirror: a host copy of its VRAM whose changed dwords
are written back before every doorbell, and which, for memory the GPU writes (signals and queue read pointers: the
uncached allocations), is read back whenever the host polls the device (refresh, from AMDDevice.progress). A dword
both sides changed between two syncs keeps the host's value. Not covered: a host write from another thread landing
in the instant a refresh rewrites that same dword (signals are written by the host before their work is submitted).
"""
from __future__ import annotations
import struct, threading, time
from typing import TYPE_CHECKING

import numpy as np

from drivers.system.mmio import MMIO, MemMMIO
from drivers.asm24xx.bridge import ASM24xxDevice, SYS_BUF, SYS_BUF_XDATA, WINDOW_SIZE, WINDOWS, SECTOR
from drivers.amd.iface import AMDMemory
from drivers.amd.pci import PCIIface, HUGE
from drivers.amd.am.mm import PAGE
if TYPE_CHECKING: from drivers.amd.device import AMDDevice

RING_SIZES = {"compute": 0x2000, "sdma": 1 << 20}
KERNARG_CHUNK, SIGNAL_PAGE = 8 << 10, 0x100
DRAIN_FENCE = 0x800                 # sys_buf offset of the drain fence
RELEASE = 0x804                     # sys_buf offset of the copyout release counter (this driver's choice)
SENTINEL = 0x51000000               # | seq (24 bits), in the last dword of a window
DRAIN_STALL_S = 10                  # a drain fence that does not move for this long: the copy is stuck
COPYIN_CHUNK = WINDOW_SIZE - 4      # a window less its sentinel


class Mirror(MemMMIO):
  """A host copy of `size` bytes of VRAM at `offset` of `bar` (the BAR0 MMIO behind the bridge)."""
  def __init__(self, bar: MMIO, offset: int, size: int, polled: bool):
    self.bar, self.offset, self.polled = bar, offset, polled
    data = bytearray(bar.read_bytes(offset, size))
    super().__init__(memoryview(data), "VRAM (host copy)")
    self.host = np.frombuffer(data, np.uint32)
    self.synced = self.host.copy()     # what VRAM held at the last sync

  def flush(self) -> None:
    """Write the dwords the host changed since the last sync back to VRAM (runs of consecutive dwords at once). From a
    snapshot: what another thread writes meanwhile stays changed, for the next flush."""
    now = self.host.copy()
    changed = np.flatnonzero(now != self.synced)
    if not len(changed): return
    for run in np.split(changed, np.flatnonzero(np.diff(changed) != 1) + 1):
      a, b = int(run[0]), int(run[-1]) + 1
      self.bar.write_bytes(self.offset + 4 * a, now[a:b].tobytes())
    self.synced[changed] = now[changed]

  def refresh(self) -> None:
    """Read VRAM back into the dwords the host did not change since the last sync."""
    dev = np.frombuffer(self.bar.read_bytes(self.offset, self.size), np.uint32)
    clean = self.host == self.synced
    self.host[clean] = self.synced[clean] = dev[clean]


class USBStaging:
  """Host copies through the bridge's SRAM windows (the protocol in the module docstring); same interface as
  drivers.hcq.staging.Staging. One copy at a time: the windows are shared."""
  def __init__(self, device: AMDDevice):
    self.device, self.iface = device, device.iface
    self.lock = threading.Lock()

  def copyin(self, va: int, data: memoryview) -> None:
    """Host bytes to device address `va`: the SDMA side queued at once (after earlier work), then the host fills the
    windows in turn, each once its previous contents drained."""
    dev, iface, pci = self.device, self.iface, self.iface.pci
    chunks = [(off, min(COPYIN_CHUNK, data.nbytes - off)) for off in range(0, data.nbytes, COPYIN_CHUNK)]
    with self.lock:
      first = iface.drained + 1
      def work(q) -> None:
        for i, (off, k) in enumerate(chunks):
          win, seq = iface.window_va[i % WINDOWS], first + i
          q.poll(win + WINDOW_SIZE - 4, SENTINEL | seq & 0xFFFFFF)
          q._copy(va + off, win, k)
          q.fence(iface.sys_buf_va + DRAIN_FENCE, seq)
      done = dev.ordered_submit(dev.copy_queue(), work)
      window = bytearray(WINDOW_SIZE)
      for i, (off, k) in enumerate(chunks):
        seq = first + i
        if i >= WINDOWS: iface.wait_drained(dev, seq - WINDOWS, done - 1, "copyin")
        window[:k] = data[off:off + k]
        window[-4:] = struct.pack("<I", SENTINEL | seq & 0xFFFFFF)
        pci.sram_write(i % WINDOWS, window)
      iface.wait_drained(dev, first + len(chunks) - 1, done - 1, "copyin")
      dev.timeline.wait(done)

  def copyout(self, dest: memoryview, va: int) -> None:
    """dest.nbytes bytes from device address `va` (after earlier work): the SDMA engine fills the windows in turn,
    each once the host released its previous contents, and the host reads each as soon as its fence says it is full."""
    dev, iface, pci = self.device, self.iface, self.iface.pci
    chunks = [(off, min(WINDOW_SIZE, dest.nbytes - off)) for off in range(0, dest.nbytes, WINDOW_SIZE)]
    with self.lock:
      first = iface.drained + 1
      def work(q) -> None:
        for i, (off, k) in enumerate(chunks):
          if i >= WINDOWS: q.poll(iface.sys_buf_va + RELEASE, first + i - WINDOWS, at_least=True)
          q._copy(iface.window_va[i % WINDOWS], va + off, k)
          q.fence(iface.sys_buf_va + DRAIN_FENCE, first + i)
      done = dev.ordered_submit(dev.copy_queue(), work)
      for i, (off, k) in enumerate(chunks):
        iface.wait_drained(dev, first + i, done - 1, "copyout")
        dest[off:off + k] = pci.sram_read(i % WINDOWS, -(-k // SECTOR) * SECTOR)[:k]
        iface.release(first + i)
      dev.timeline.wait(done)


class USBIface(PCIIface):
  """PCIIface over an ASM24xxDevice with the USB placement rules, Mirrors for CPU-visible memory, and USBStaging."""
  ring_sizes, kernarg_chunk, signal_page, staging = RING_SIZES, KERNARG_CHUNK, SIGNAL_PAGE, USBStaging

  def __init__(self, pci: ASM24xxDevice):
    super().__init__(pci)
    self.mirrors: list[Mirror] = []
    self.mirror_lock = threading.Lock()
    try:
      # the bridge SRAM as system pages of the GPU's address space: sys_buf (the drain fence) and the two windows
      self.sys_buf_va = self._map_bus(SYS_BUF, PAGE)
      self.window_va = [self._map_bus(pci.window(s), WINDOW_SIZE) for s in range(WINDOWS)]
      # the copy protocol starts afresh: fence and release counter 0, no sentinel left in a window
      pci.xdata_write(SYS_BUF_XDATA + DRAIN_FENCE, bytes(8))
      for slot in range(WINDOWS): pci.sram_write(slot, bytes(WINDOW_SIZE))
      self.drained = self.released = 0
    except BaseException:
      super().close()
      raise

  def _map_bus(self, bus: int, size: int) -> int:
    va = self.core.mm.va.alloc(size, PAGE)
    self.core.gmc.map(va, bus + np.arange(size // PAGE, dtype=np.uint64) * PAGE, system=True, uncached=True)
    return va

  # --- memory: all of it VRAM
  def alloc(self, size: int, host: bool = False, uncached: bool = False, cpu_access: bool = False) -> AMDMemory:
    """VRAM whatever is asked; CPU-visible memory (host, uncached, cpu_access) gets a Mirror, read back on polls when
    the GPU writes it (host, uncached)."""
    c = self.core
    asked, size = -(-max(size, 1) // 4) * 4, -(-max(size, 1) // PAGE) * PAGE   # the mirror covers what was asked for
    align = HUGE if size >= HUGE else PAGE
    va = c.mm.va.alloc(size, align)
    try:
      paddr = c.mm.palloc(size, align)
      try:
        c.gmc.map(va, paddr + np.arange(size // PAGE, dtype=np.uint64) * PAGE, system=False, uncached=uncached)
        mirror = Mirror(c.vram_bar, paddr, asked, polled=host or uncached) if host or uncached or cpu_access else None
      except BaseException:
        c.mm.pfree(paddr)
        raise
    except BaseException:
      c.mm.va.free(va)
      raise
    if mirror is not None:
      with self.mirror_lock: self.mirrors.append(mirror)
    return AMDMemory(va, size, mirror, ("vram", paddr), False)

  def import_host(self, view: memoryview) -> tuple[AMDMemory, int]:
    raise NotImplementedError(f"{self.pci.name}: the GPU cannot reach host memory through the USB bridge; copy into a "
                              "device buffer instead (Buffer.copyin)")

  def bus_pages(self, mem: AMDMemory) -> list[int]:
    raise NotImplementedError(f"{self.pci.name}: the GPU's VRAM is not on this host's PCI bus (the bridge carries no "
                              "peer-to-peer DMA); copy through the host instead")

  def import_peer(self, pages: list[int]) -> AMDMemory:
    raise NotImplementedError(f"{self.pci.name}: the GPU behind the USB bridge reaches only the bridge's SRAM, not "
                              "another device's BAR; copy through the host instead")

  def free(self, mem: AMDMemory) -> None:
    if mem.mmio is not None:
      with self.mirror_lock: self.mirrors.remove(mem.mmio)
    super().free(mem)

  def _queue_memory(self, kind: str, ring_size: int) -> tuple[AMDMemory, AMDMemory]:
    # the engine only reads its ring (no read-back); it writes its read pointer in the control page
    return self.alloc(RING_SIZES[kind], cpu_access=True), self.alloc(PAGE, uncached=True)

  def before_doorbell(self) -> None:
    """What the host wrote reaches VRAM (mirrors, then the HDP flush) before the doorbell the caller writes next. The
    memory the GPU polls goes last: engines poll their write pointers (in the queue control pages) without waiting for
    a doorbell, so commands, arguments and code must be there before a write pointer that publishes them."""
    with self.mirror_lock:
      for m in sorted(self.mirrors, key=lambda m: m.polled): m.flush()
    super().before_doorbell()

  def publish(self) -> None:
    """What the host wrote (a signal a queue may be waiting on) reaches VRAM now, as before a doorbell."""
    self.before_doorbell()

  def refresh(self) -> None:
    """Read back the memory the GPU writes, in allocation order (the timeline's page first: what it says is done was
    written before it, so is seen in the pages read after)."""
    with self.mirror_lock: polled = [m for m in self.mirrors if m.polled]
    for m in polled: m.refresh()

  # --- the bridge's copy protocol
  def drain_fence(self) -> int:
    return int.from_bytes(self.pci.xdata_read(SYS_BUF_XDATA + DRAIN_FENCE, 4), "little")

  def release(self, seq: int) -> None:
    """Raise the copyout release counter to `seq`: its changed bytes, low byte first."""
    old, new = self.released.to_bytes(4, "little"), seq.to_bytes(4, "little")
    for i in range(4):
      if old[i] != new[i]: self.pci.xdata_write(SYS_BUF_XDATA + RELEASE + i, new[i:i + 1])
    self.released = seq

  def wait_drained(self, device: AMDDevice, seq: int, after: int, what: str) -> None:
    """Until the drain fence reaches `seq`; TimeoutError when it does not move for DRAIN_STALL_S once the engine is at
    the copy. Before, it waits for the work the copy follows (timeline value `after`), as long as that takes
    (Signal.wait's patience): a long kernel ahead of the copy is not a stuck drain."""
    if self.drained < seq: device.timeline.wait(after)
    deadline = time.monotonic() + DRAIN_STALL_S
    while self.drained < seq:
      device.check_faults()
      if (v := self.drain_fence()) != self.drained: self.drained, deadline = v, time.monotonic() + DRAIN_STALL_S
      elif time.monotonic() > deadline:
        raise TimeoutError(f"{device.name}: {what}: the SDMA engine did not drain the SRAM window (the drain fence at "
                           f"sys_buf+{DRAIN_FENCE:#x} stayed {v:#x}, waiting for {seq:#x}) for {DRAIN_STALL_S} s")
      else: time.sleep(1e-5)
