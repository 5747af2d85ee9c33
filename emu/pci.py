"""A PCI function as a device model: type-0 config space, BARs, and a DMA address space.

Every emulated device (GPU, NIC) subclasses `PCIFunction`. It is plugged into the driver stack by
drivers/system's ModelPCIDevice, which only uses what is defined here: `config_read/config_write`,
`bars` (BAR index -> `memoryview` for RAM-like BARs or an object with `read/write` callbacks),
`dma` (where the driver's DMA buffers live), `connect_msix` (where its interrupts go) and `reset()`.
MSI-X: the platform hands each vector an eventfd, as VFIO_DEVICE_SET_IRQS does (DATA_EVENTFD | ACTION_TRIGGER on
VFIO_PCI_MSIX_IRQ_INDEX); a model raising the vector writes 1 to it. The MSI-X capability and table are not modelled:
the vectors a model raises and when are its own documentation's.
Config-space layout facts: PCI Local Bus Spec 3.0, section 6.1 (type-0 header); linux/pci_regs.h.
"""
from __future__ import annotations
import bisect, os
from dataclasses import dataclass, field
import numpy as np
from typing import Protocol

PCI_VENDOR_ID, PCI_DEVICE_ID, PCI_COMMAND = 0x00, 0x02, 0x04
PCI_CLASS_REVISION, PCI_BASE_ADDRESS_0 = 0x08, 0x10
PCI_SUBSYSTEM_VENDOR_ID, PCI_SUBSYSTEM_ID = 0x2C, 0x2E
PCI_COMMAND_MEMORY, PCI_COMMAND_MASTER = 0x2, 0x4
PCI_BASE_ADDRESS_MEM_TYPE_64, PCI_BASE_ADDRESS_MEM_PREFETCH = 0x4, 0x8
CONFIG_SIZE = 4096   # PCIe extended config space
PAGE = 4096


class DMAFault(RuntimeError):
  """A device accessed a bus address no DMA buffer is mapped at (an IOMMU fault on real hardware)."""


class ModelError(RuntimeError):
  """An access the emulated hardware rejects (a register that does not exist, an access size it does not take, a bad
  value for a register's function, a malformed doorbell): raised from the access that made it."""


class DMASpace:
  """Bus address space the device sees: runs of bus addresses backed by host memory."""
  def __init__(self, base: int = 0x1_0000_0000):
    self._next = base
    self._starts: list[int] = []
    self._runs: dict[int, memoryview] = {}
    # counts changes of what a bus address reaches (mappings, bus mastering): an engine that keeps host views of DMA
    # memory (emu/nic/fastpath.py) uses them only while it is unchanged (one uint64, so compiled code reads it too)
    self.generation = np.zeros(1, np.uint64)
    # what a DMA to an unmapped bus address hits (a platform in front of the function may say more: emu/usb)
    self.unmapped = "no host memory is mapped there"
    self.topology, self.initiator = None, "device"   # set when its function is plugged into an emu.topology.Topology

  def map(self, host: memoryview, contiguous: bool = False) -> list[int]:
    """Give `host` (a whole number of pages) bus addresses; returns the bus address of each page.
    Non-contiguous mappings leave a one-page hole between pages, so a driver that assumes a buffer is
    bus-contiguous faults in the model the way it would on real hardware."""
    host = host.cast("B")
    if host.nbytes % PAGE: raise ValueError(f"DMA mapping of {host.nbytes} bytes is not a whole number of {PAGE}-byte pages")
    pages = host.nbytes // PAGE
    if contiguous: addrs = [self._next + i * PAGE for i in range(pages)]
    else: addrs = [self._next + 2 * i * PAGE for i in range(pages)]
    self._next = (addrs[-1] if addrs else self._next) + 2 * PAGE
    self.generation[0] += 1
    if contiguous and pages: self._insert(addrs[0], host)
    else:
      for i, a in enumerate(addrs): self._insert(a, host[i * PAGE:(i + 1) * PAGE])
    return addrs

  def map_at(self, addr: int, host: memoryview) -> None:
    """Map `host` (whole pages) at bus address `addr`, chosen by the driver: an IOMMU mapping
    (VFIO_IOMMU_MAP_DMA) rather than an address handed out by `map`."""
    host = host.cast("B")
    if addr % PAGE or host.nbytes % PAGE or not host.nbytes:
      raise ValueError(f"DMA mapping of {host.nbytes:#x} bytes at bus address {addr:#x} is not whole, aligned {PAGE}-byte pages")
    i = bisect.bisect_left(self._starts, addr)
    for start in self._starts[max(i - 1, 0):i + 1]:
      if start < addr + host.nbytes and addr < start + self._runs[start].nbytes:
        raise ValueError(f"DMA mapping [{addr:#x}, +{host.nbytes:#x}) overlaps the mapping at bus address {start:#x}")
    self.generation[0] += 1
    self._insert(addr, host)

  def unmap(self, bus_addrs: list[int]) -> None:
    self.generation[0] += 1
    gone = [a for a in bus_addrs if self._runs.pop(a, None) is not None]
    if len(gone) < 64:
      for a in gone: del self._starts[bisect.bisect_left(self._starts, a)]
    else:                                            # (a buffer of many scattered pages: one pass, not one per page)
      drop = set(gone)
      self._starts = [a for a in self._starts if a not in drop]

  def _insert(self, start: int, view: memoryview) -> None:
    bisect.insort(self._starts, start)
    self._runs[start] = view

  def _locate(self, addr: int, n: int) -> tuple[memoryview, int, int]:
    i = bisect.bisect_right(self._starts, addr) - 1
    if i >= 0:
      start = self._starts[i]
      run = self._runs[start]
      if addr - start < run.nbytes: return run, addr - start, min(n, run.nbytes - (addr - start))
    if self.topology is not None: return self.topology.route(self.initiator, addr, n)   # peer to peer, or a bus error
    raise DMAFault(f"DMA access to bus address {addr:#x} ({n} bytes): {self.unmapped}")

  def read(self, addr: int, n: int) -> bytes:
    if n <= 0: return b""
    run, off, k = self._locate(addr, n)
    if k >= n and isinstance(run, memoryview): return bytes(run[off:off + n])   # (one bus-contiguous run: the common case)
    out = bytearray()
    while n > 0:
      run, off, k = self._locate(addr, n)
      if not isinstance(run, memoryview): return bytes(out) + run.read(addr, off, n)   # a peer's register: one access
      out += run[off:off + k]
      addr, n = addr + k, n - k
    return bytes(out)

  def write(self, addr: int, data: bytes | memoryview) -> None:
    data = memoryview(data).cast("B")
    while data.nbytes:
      run, off, k = self._locate(addr, data.nbytes)
      if not isinstance(run, memoryview): return run.write(addr, off, data)          # a peer's register: one access
      run[off:off + k] = data[:k]
      addr, data = addr + k, data[k:]

  def host_run(self, addr: int) -> tuple[int, int, int | None, object]:
    """(bus start, length, host address, the run itself) of the bus-contiguous run holding `addr`, for engines that
    access host memory directly (the shader core's compiled code); they hold the run while they use the address, so
    its memory (a peer's BAR: emu/topology.py) stays mapped. A peer's register BAR has no host address (None): every
    access to it goes through read/write."""
    run, off, _ = self._locate(addr, 1)
    if not isinstance(run, memoryview): return addr - off, run.region.size, None, run
    return addr - off, run.nbytes, np.frombuffer(run, np.uint8).ctypes.data, run

  def view(self, addr: int, n: int) -> memoryview:
    """Zero-copy view of `n` bytes at `addr`; they must lie in one bus-contiguous run of memory."""
    run, off, k = self._locate(addr, n)
    if not isinstance(run, memoryview): raise DMAFault(f"{self.initiator}: DMA range {addr:#x}+{n} is in {run.name}, not memory")
    if k < n: raise DMAFault(f"DMA range {addr:#x}+{n} crosses the end of a bus-contiguous run")
    return run[off:off + n]


class IORegion(Protocol):
  size: int
  def read(self, offset: int, size: int) -> int: ...
  def write(self, offset: int, size: int, value: int) -> None: ...


@dataclass(frozen=True)
class Access:
  """The accesses a range of a register region takes, as QEMU's MemoryRegionOps.valid declares them (min_access_size,
  max_access_size, unaligned; include/exec/memory.h), and whether it is read or written at all. `what` names the range
  in messages (plural: "registers"); `end`: the offset where the range ends (None: the end of the region)."""
  what: str
  min_size: int = 1
  max_size: int = 8
  unaligned: bool = False
  readable: bool = True
  writable: bool = True
  end: int | None = None
  sizes: frozenset[int] = field(init=False, repr=False)

  def __post_init__(self) -> None:
    object.__setattr__(self, "sizes", frozenset(s for s in (1, 2, 4, 8) if self.min_size <= s <= self.max_size))

  def refusal(self, region: str, offset: int, size: int, write: bool) -> str | None:
    """Why `region` refuses the access (None: it takes it)."""
    op = "write" if write else "read"
    if not (self.writable if write else self.readable): return f"{region} {op} at {offset:#x}: {self.what} are {'read' if write else 'write'}-only"
    if size in self.sizes and (self.unaligned or not offset & (size - 1)): return None
    bits = "/".join(str(8 * s) for s in sorted(self.sizes))
    return f"{region} {op} of {size} bytes at {offset:#x}: {self.what} take {'' if self.unaligned else 'aligned '}{bits}-bit {op}s"


class Region:
  """A register region (a BAR decoded by callbacks, a doorbell page): `read`/`write` check each access against the
  ranges the region declares in `valid` (memory_region_access_valid in QEMU's softmmu/memory.c) and raise ModelError
  for one it does not take; the model's `_read`/`_write` decode the rest. `name` names the region in messages."""
  name = "region"
  size: int
  valid: tuple[Access, ...] = (Access("registers"),)

  def _check(self, offset: int, size: int, write: bool) -> None:
    for v in self.valid:
      if v.end is None or offset < v.end: break
    if (why := v.refusal(self.name, offset, size, write)) is not None: raise ModelError(why)

  def read(self, offset: int, size: int) -> int:
    self._check(offset, size, False)
    return self._read(offset, size)

  def write(self, offset: int, size: int, value: int) -> None:
    self._check(offset, size, True)
    self._write(offset, size, value)

  def _read(self, offset: int, size: int) -> int: raise NotImplementedError
  def _write(self, offset: int, size: int, value: int) -> None: raise NotImplementedError


class PCIFunction:
  """Type-0 PCI(e) function. Subclasses fill `bars` and may override config/BAR behaviour."""
  topology = None                            # the emu.topology.Topology it is plugged into
  def __init__(self, bus: str, vendor_id: int, device_id: int, class_code: int, revision: int = 0,
               subsystem: tuple[int, int] = (0, 0)):
    self.bus = bus
    self.config = bytearray(CONFIG_SIZE)
    self._cfg16(PCI_VENDOR_ID, vendor_id)
    self._cfg16(PCI_DEVICE_ID, device_id)
    self.config[PCI_CLASS_REVISION] = revision
    self.config[PCI_CLASS_REVISION + 1:PCI_CLASS_REVISION + 4] = class_code.to_bytes(3, "little")
    self._cfg16(PCI_SUBSYSTEM_VENDOR_ID, subsystem[0])
    self._cfg16(PCI_SUBSYSTEM_ID, subsystem[1])
    self.bars: dict[int, memoryview | IORegion] = {}
    self.dma = DMASpace()
    self.msix: dict[int, int] = {}           # MSI-X vector -> the eventfd the platform connected to it

  @property
  def vendor_id(self) -> int: return int.from_bytes(self.config[0:2], "little")
  @property
  def device_id(self) -> int: return int.from_bytes(self.config[2:4], "little")
  @property
  def class_code(self) -> int: return int.from_bytes(self.config[9:12], "little")
  @property
  def bus_master(self) -> bool: return bool(self.config[PCI_COMMAND] & PCI_COMMAND_MASTER)

  def _cfg16(self, off: int, v: int) -> None: self.config[off:off + 2] = v.to_bytes(2, "little")

  def bar_size(self, n: int) -> int:
    bar = self.bars[n]
    return bar.nbytes if isinstance(bar, memoryview) else bar.size

  def config_read(self, offset: int, size: int) -> int:
    if offset < 0 or offset + size > CONFIG_SIZE or size not in (1, 2, 4) or offset % size:
      raise ValueError(f"bad config-space access: offset {offset:#x}, size {size}")
    return int.from_bytes(self.config[offset:offset + size], "little")

  def config_write(self, offset: int, size: int, value: int) -> None:
    if offset < 0 or offset + size > CONFIG_SIZE or size not in (1, 2, 4) or offset % size:
      raise ValueError(f"bad config-space access: offset {offset:#x}, size {size}")
    if offset < 0x40 and not (PCI_COMMAND <= offset < PCI_COMMAND + 2) and not (PCI_BASE_ADDRESS_0 <= offset < 0x28):
      return   # header fields other than COMMAND and the BARs are read-only (PCI 3.0, 6.2)
    if PCI_BASE_ADDRESS_0 <= offset < 0x28 and size == 4:
      value = self._bar_write((offset - PCI_BASE_ADDRESS_0) // 4, value)
    self.config[offset:offset + size] = value.to_bytes(size, "little")
    if offset <= PCI_COMMAND < offset + size or PCI_BASE_ADDRESS_0 <= offset < 0x28: self._routing_changed()

  def _bar_write(self, slot: int, value: int) -> int:
    """BAR sizing: the size bits of a BAR read back as 0 (PCI 3.0, 6.2.5.1). 64-bit BARs use two slots."""
    for n in self.bars:
      if slot in (n, n + 1):
        size = self.bar_size(n)
        mask = ~(size - 1) & ((1 << 64) - 1)
        flags = PCI_BASE_ADDRESS_MEM_TYPE_64 | (PCI_BASE_ADDRESS_MEM_PREFETCH if isinstance(self.bars[n], memoryview) else 0)
        return ((value & mask & 0xFFFFFFF0) | flags) if slot == n else (value & (mask >> 32))
    return 0   # unimplemented BAR: reads as zero

  def connect_msix(self, vector: int, fd: int | None) -> None:
    """The platform routes MSI-X `vector` to eventfd `fd` (None: nowhere, the vector is dropped)."""
    if not 0 <= vector < 2048: raise ValueError(f"MSI-X vector {vector}: a function has at most 2048 (PCI 3.0, 6.8.2)")
    if fd is None: self.msix.pop(vector, None)
    else: self.msix[vector] = fd

  def signal_msix(self, vector: int) -> None:
    """Raise MSI-X `vector`: its eventfd counts one more interrupt (a vector nothing is connected to is lost)."""
    if (fd := self.msix.get(vector)) is not None:
      try: os.eventfd_write(fd, 1)
      except OSError: self.msix.pop(vector, None)        # the platform closed it

  def close(self) -> None:
    """The driver is done with the function: stop whatever the model runs on its behalf."""

  def _routing_changed(self) -> None:
    """Bus mastering, memory decoding or a BAR changed: what DMA reaches may differ (for peers too)."""
    self.dma.generation[0] += 1
    if self.topology is not None: self.topology.changed()

  def reset(self) -> None:
    """Function-level reset: bus mastering and memory decoding are switched off."""
    self.config[PCI_COMMAND] &= ~(PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY) & 0xFF
    self._routing_changed()
