"""PCIDevice: the hardware boundary every PCI driver (GPU or NIC) is written against.

Implementations: `SysfsPCIDevice` (a real function through /sys/bus/pci: config file, resourceN mmap,
pagemap DMA), `VFIOPCIDevice` (drivers/system/vfio.py: a function bound to vfio-pci, DMA through the IOMMU)
and `ModelPCIDevice` (a registered emu/ model: `open_model`); the USB bridge implements the same methods. `open_pci`
picks VFIO or sysfs for a real function. Opening a device takes its ownership lock; close() releases everything it handed out.
"""
from __future__ import annotations
import ctypes, errno, mmap, os, re, warnings
from typing import Any

from autogen.pci import (PCI_BASE_ADDRESS_0, PCI_BASE_ADDRESS_MEM_MASK, PCI_BASE_ADDRESS_MEM_TYPE_64,
                         PCI_BASE_ADDRESS_MEM_TYPE_MASK, PCI_COMMAND, PCI_COMMAND_MEMORY, PCI_COMMAND_MASTER)
from drivers.system.discovery import PCIInfo
from drivers.system.dma import DMAMemory, alloc_pinned, dma_bytes, host_pages, pin_existing, round_up, PAGE
from drivers.system.kernel import KernelInterface, OSKernel
from drivers.system.lock import DeviceLock
from drivers.system.mmio import MMIO, MemMMIO, CallbackMMIO
from drivers.system.registry import PCIModel, model, models, vendors

SYSFS_PCI = "/sys/bus/pci/devices"
# drivers that hand the function to userspace; any other bound driver owns the hardware
USERSPACE_DRIVERS = ("vfio-pci", "uio_pci_generic")


class PCIDevice:
  """A PCI function as a driver sees it."""
  bus: str
  vendor_id: int
  device_id: int

  def read_config(self, offset: int, size: int) -> int: raise NotImplementedError
  def write_config(self, offset: int, size: int, value: int) -> None: raise NotImplementedError
  def bar_size(self, n: int) -> int: raise NotImplementedError
  def _map_bar(self, n: int) -> MMIO: raise NotImplementedError
  def _alloc_dma(self, size: int, contiguous: bool) -> DMAMemory: raise NotImplementedError
  def _map_dma(self, view: memoryview) -> DMAMemory: raise NotImplementedError
  def reset(self) -> None: raise NotImplementedError

  def __init__(self, bus: str, lock_prefix: str | None):
    """lock_prefix None: open without taking ownership (monitors that only read, like am_smi)."""
    self.bus = bus
    self._bars: dict[int, MMIO] = {}
    self._dma: list[DMAMemory] = []
    self._lock: DeviceLock | None = DeviceLock(lock_prefix, bus) if lock_prefix is not None else None

  def map_bar(self, n: int) -> MMIO:
    """Register/memory access to BAR n (mapped once, shared)."""
    if n not in self._bars: self._bars[n] = self._map_bar(n)
    return self._bars[n]

  def alloc_dma(self, size: int, contiguous: bool = False) -> DMAMemory:
    """Host memory the device can DMA to; `bus_addrs` lists the bus address of every page."""
    mem = self._alloc_dma(size, contiguous)
    self._dma.append(mem)
    return mem

  def map_dma(self, memory: Any) -> DMAMemory:
    """Existing host memory (a writable, C-contiguous buffer: bytearray, memoryview, numpy array) made reachable by
    the device's DMA, as an IOMMU map or a pin does: the pages it covers get bus addresses. The result's `view` is
    exactly `memory`; `first` is where it starts in its first page. Give it back with free_dma (before the memory goes)."""
    mem = self._map_dma(dma_bytes(memory))
    self._dma.append(mem)
    return mem

  def free_dma(self, mem: DMAMemory) -> None:
    self._dma.remove(mem)
    mem.free()

  def msix_eventfd(self, vector: int) -> int | None:
    """An eventfd that counts the function's interrupts on MSI-X `vector` (read it to consume them), or None where
    this platform delivers no interrupts (the driver polls). Closed with the device."""
    return None

  def bar_address(self, n: int) -> int:
    """The bus address of BAR n, where peers' DMA reaches it (peer to peer): what its BAR register holds, a 64-bit
    memory BAR taking the next one too (PCI 3.0, 6.2.5.1)."""
    lo = self.read_config(PCI_BASE_ADDRESS_0 + 4 * n, 4)
    wide = lo & PCI_BASE_ADDRESS_MEM_TYPE_MASK == PCI_BASE_ADDRESS_MEM_TYPE_64 and n < 5
    hi = self.read_config(PCI_BASE_ADDRESS_0 + 4 * n + 4, 4) if wide else 0
    return (hi << 32 | lo) & PCI_BASE_ADDRESS_MEM_MASK

  def enable_bus_master(self) -> None:
    cmd = self.read_config(PCI_COMMAND, 2)
    self.write_config(PCI_COMMAND, 2, cmd | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER)

  def close(self) -> None:
    for mem in self._dma: mem.free()
    self._dma.clear()
    self._bars.clear()
    if self._lock is not None: self._lock.release()
    self._lock = None

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()


class ModelPCIDevice(PCIDevice):
  """A device model from emu/ behind the PCIDevice interface (config callbacks, BAR regions, DMA space).
  `model` is the model, or, with `bus`, a callable that builds it once the device lock is held. It is plugged into
  this process's PCI topology (emu.topology.HOST) while open: its BARs get bus addresses and DMA reaches its peers."""
  def __init__(self, model: Any, lock_prefix: str | None, bus: str | None = None):
    super().__init__(model.bus if bus is None else bus, lock_prefix)
    self._msix: dict[int, int] = {}
    from emu.topology import HOST   # the models' side: imported once a model is opened
    self._host = HOST
    try:
      self.model = model if bus is None else model()
      HOST.plug(self.model)
    except BaseException:
      self.close()
      raise
    self.vendor_id, self.device_id = self.model.vendor_id, self.model.device_id

  def read_config(self, offset: int, size: int) -> int: return self.model.config_read(offset, size)
  def write_config(self, offset: int, size: int, value: int) -> None: self.model.config_write(offset, size, value)

  def bar_size(self, n: int) -> int:
    if n not in self.model.bars: raise ValueError(f"{self.bus} has no BAR{n} (BARs: {sorted(self.model.bars)})")
    return self.model.bar_size(n)

  def _map_bar(self, n: int) -> MMIO:
    self.bar_size(n)
    bar = self.model.bars[n]
    return MemMMIO(bar, f"{self.bus} BAR{n}") if isinstance(bar, memoryview) else CallbackMMIO(bar, f"{self.bus} BAR{n}")

  def _alloc_dma(self, size: int, contiguous: bool) -> DMAMemory:
    host = memoryview(bytearray(round_up(max(size, 1), PAGE)))
    addrs = self.model.dma.map(host, contiguous=contiguous)
    return DMAMemory(host, addrs, PAGE, lambda: self.model.dma.unmap(addrs))

  def _map_dma(self, view: memoryview) -> DMAMemory:
    # one bus run, as an IOMMU maps a range (VFIO_IOMMU_MAP_DMA); drivers still take bus_addrs page by page, as the
    # sysfs path's physical pages are not contiguous
    start, size, first = host_pages(view)
    addrs = self.model.dma.map(memoryview((ctypes.c_uint8 * size).from_address(start)).cast("B"), contiguous=True)
    return DMAMemory(view, addrs, PAGE, lambda: self.model.dma.unmap(addrs), first)

  def reset(self) -> None: self.model.reset()

  def msix_eventfd(self, vector: int) -> int:
    """The model raises `vector` by writing this eventfd (what VFIO_DEVICE_SET_IRQS sets up for a real function)."""
    if (fd := self._msix.get(vector)) is None:
      fd = self._msix[vector] = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
      self.model.connect_msix(vector, fd)
    return fd

  def close(self) -> None:
    if getattr(self, "model", None) is not None:
      self._host.unplug(self.model)         # peers' DMA no longer reaches it
      self.model.close()                    # its engines stop before their DMA memory and interrupts go
      for vector in self._msix: self.model.connect_msix(vector, None)
    for fd in self._msix.values(): os.close(fd)
    self._msix.clear()
    super().close()


# open_model's default lock: that of the vendor whose `models` name the model, or of its PCI vendor id
OWNER = object()
EMU_DEVICES = 8   # emulated devices of each model kind by default (indexes 0..7); HCQ_EMU_DEVICES overrides


def emulated_devices() -> int:
  """How many emulated devices of each model kind may exist (each keeps its state in files of its own)."""
  raw = os.environ.get("HCQ_EMU_DEVICES", str(EMU_DEVICES))
  if not raw.isdigit() or int(raw) < 1: raise ValueError(f"HCQ_EMU_DEVICES={raw!r}: set it to a count of emulated devices, 1 or more")
  return int(raw)


def _pci_model(kind: str) -> PCIModel:
  if not isinstance(m := model(kind), PCIModel):
    names = ", ".join(p.name for p in models(PCIModel)) or "none registered"
    raise ValueError(f"no PCI device model {kind!r}; models: {names}")
  return m


def open_model(kind: str, index: int = 0, lock_prefix: str | None | object = OWNER, **options: Any) -> ModelPCIDevice:
  """A registered PCI device model (entry point group hcq.models) as a PCI function on bus "mock-<index>", holding
  the lock `lock_prefix` (by default its vendor's; None: no lock, for monitors, which attach only to a device that has
  state); `options` go to the model. `index` is below emulated_devices()."""
  m, bus = emulated_model(kind, index)
  if lock_prefix is None and index not in m.saved():   # a monitor attaches to a device that exists, it never makes one
    raise FileNotFoundError(f"emulated {kind} device {index} ({bus}) has no state yet: there is nothing to attach to "
                            "until a driver opens it (which powers it on)")
  if lock_prefix is OWNER:
    owns = lambda v: v.lock_prefix and (kind in v.models or m.vendor_id in v.pci_vendors)
    if (lock_prefix := next((v.lock_prefix for v in vendors() if owns(v)), None)) is None:
      raise ValueError(f"no registered vendor with a lock prefix lists model {kind!r}; pass lock_prefix")
  assert lock_prefix is None or isinstance(lock_prefix, str)
  return ModelPCIDevice(lambda: m.create(bus, index, **options), lock_prefix, bus=bus)


def emulated_model(kind: str, index: int) -> tuple[PCIModel, str]:
  """The registered PCI model `kind` and the bus name of its emulated device `index` (below emulated_devices())."""
  m = _pci_model(kind)
  if not 0 <= index < (n := emulated_devices()):
    raise ValueError(f"there is no emulated {kind} device {index}: emulated devices are numbered 0 to {n - 1} "
                     f"(HCQ_EMU_DEVICES={n}; each one keeps its state in files of its own): use an index below {n}, "
                     "or raise HCQ_EMU_DEVICES")
  return m, f"mock-{index}"


MOCK_BUS = re.compile(r"mock-(\d+)")


def open_function(bus: str, lock_prefix: str, models: tuple[str, ...], **options: Any) -> PCIDevice:
  """A vendor's PCI function `bus`: a real one (`open_pci`), or mock-<n>, emulated device n of the vendor's first
  registered model, `options` going to the model."""
  if m := MOCK_BUS.fullmatch(bus):
    if not models: raise ValueError(f"{bus}: no emulated device of this vendor is registered in this build (hcq.models)")
    return open_model(models[0], int(m[1]), lock_prefix, **options)
  if options: raise TypeError(f"options {', '.join(options)} are for emulated devices (mock-<n>), not {bus}")
  return open_pci(bus, lock_prefix)


def list_models(kind: str | None = None) -> list[PCIInfo]:
  """Emulated devices that have state (powered on at least once) as discovery lists them: of model `kind`, or of
  every registered PCI model."""
  found = [_pci_model(kind)] if kind is not None else models(PCIModel)
  return [PCIInfo(f"mock-{i}", m.vendor_id, m.device_id, m.class_code, None, None, m.description)
          for m in found for i in m.saved()]


def _sysfs_error(path: str, e: OSError) -> OSError:
  if isinstance(e, PermissionError):
    return PermissionError(f"no permission to access {path}: run as root or add a udev rule granting your user access to it")
  return e


class SysfsPCIDevice(PCIDevice):
  """A real PCI function through sysfs: needs root (or udev rules) and no kernel driver bound to it."""
  _cfg: int | None = None   # the config-space file, open while the device is
  def __init__(self, bus: str, lock_prefix: str, sysfs: str = SYSFS_PCI):
    self.path = os.path.join(sysfs, bus)
    if not os.path.isdir(self.path):
      raise FileNotFoundError(f"no PCI device {bus} ({self.path} does not exist); `hcq_smi <vendor> list` shows the devices found")
    if os.path.islink(drv := os.path.join(self.path, "driver")):
      name = os.path.basename(os.readlink(drv))
      if name not in USERSPACE_DRIVERS:
        raise RuntimeError(f"PCI device {bus} is bound to kernel driver {name}; unbind it first: "
                           f"`echo {bus} > {drv}/unbind` (as root), or `hcq_smi <vendor> rmmod`")
    super().__init__(bus, lock_prefix)
    try:
      self._cfg = os.open(os.path.join(self.path, "config"), os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
      self.close()
      raise _sysfs_error(os.path.join(self.path, "config"), e) from None
    self.vendor_id, self.device_id = self.read_config(0, 2), self.read_config(2, 2)
    self._maps: list[mmap.mmap] = []

  def _config_fd(self) -> int:
    if self._cfg is None: raise OSError(errno.EBADF, f"config space of {self.bus}: the device is closed")
    return self._cfg

  def read_config(self, offset: int, size: int) -> int:
    return int.from_bytes(os.pread(self._config_fd(), size, offset), "little")

  def write_config(self, offset: int, size: int, value: int) -> None:
    os.pwrite(self._config_fd(), value.to_bytes(size, "little"), offset)

  def bar_size(self, n: int) -> int:
    with open(os.path.join(self.path, "resource")) as f: lines = f.read().splitlines()
    start, end, _flags = (int(x, 16) for x in lines[n].split())
    return end - start + 1 if end else 0

  def bar_address(self, n: int) -> int:
    """Where the kernel placed BAR n (sysfs `resource`: start, end, flags per BAR)."""
    if not self.bar_size(n): raise ValueError(f"{self.bus} has no BAR{n}")
    with open(os.path.join(self.path, "resource")) as f: return int(f.read().splitlines()[n].split()[0], 16)

  def _map_bar(self, n: int) -> MMIO:
    if not (size := self.bar_size(n)): raise ValueError(f"{self.bus} has no BAR{n}")
    path = os.path.join(self.path, f"resource{n}")
    try: fd = os.open(path, os.O_RDWR | os.O_SYNC | os.O_CLOEXEC)
    except OSError as e: raise _sysfs_error(path, e) from None
    try: m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally: os.close(fd)
    self._maps.append(m)
    return MemMMIO(memoryview(m), f"{self.bus} BAR{n}")

  def _alloc_dma(self, size: int, contiguous: bool) -> DMAMemory: return alloc_pinned(size, contiguous)
  def _map_dma(self, view: memoryview) -> DMAMemory: return pin_existing(view)

  def reset(self) -> None:
    path = os.path.join(self.path, "reset")
    try:
      with open(path, "w") as f: f.write("1")
    except OSError as e: raise _sysfs_error(path, e) from None

  def close(self) -> None:
    super().close()
    for m in getattr(self, "_maps", []):
      try: m.close()
      except BufferError: pass   # a caller still holds a view of the BAR; the mapping goes with it
    if self._cfg is not None: os.close(self._cfg)
    self._cfg = None


def open_pci(bus: str, lock_prefix: str, kernel: KernelInterface | None = None, sysfs: str = SYSFS_PCI) -> PCIDevice:
  """A real PCI function, opened the safest way available: through VFIO when it has an IOMMU group and VFIO is
  loaded (the device can DMA only to the buffers hcq maps), else through sysfs (DMA by physical address), which
  warns once per function. `kernel` serves the VFIO path and the checks (a model in tests); `sysfs` is where
  the sysfs path looks."""
  from drivers.system.vfio import VFIOPCIDevice, CONTAINER   # vfio.py builds on this module
  kernel = kernel or OSKernel()
  if not kernel.exists(f"{SYSFS_PCI}/{bus}/iommu_group"):
    why = "it has no IOMMU group: the device can DMA to any physical memory, not only hcq's buffers"
  elif not kernel.exists(CONTAINER):
    why = (f"{CONTAINER} is missing (`modprobe vfio-pci` to use VFIO): DMA by physical address works only with the IOMMU "
           "in passthrough mode (iommu=pt), and is then unrestricted")
  else: return VFIOPCIDevice(bus, lock_prefix, kernel)
  warnings.warn(f"{bus}: opened through sysfs, not VFIO, because {why}", RuntimeWarning, stacklevel=2)
  return SysfsPCIDevice(bus, lock_prefix, sysfs)
