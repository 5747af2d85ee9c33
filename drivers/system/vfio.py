"""VFIOPCIDevice: a PCI function bound to vfio-pci, driven through the kernel's VFIO interface (/dev/vfio).

The open sequence is Documentation/driver-api/vfio.rst's: the function's IOMMU group from sysfs; a container
(/dev/vfio/vfio: API version, IOMMU type); the group file (/dev/vfio/<group>), which must be viable, attached
to the container; the IOMMU type set; then the device file, whose regions are config space and the BARs
(pread/pwrite at each region's offset, mmap where the region allows it). DMA memory is this process's
anonymous memory mapped into the IOMMU at IOVAs hcq picks, so no physical addresses (and no root) are needed
and the device reaches nothing else. In no-IOMMU mode (vfio's enable_unsafe_noiommu_mode) nothing is
translated: DMA memory is pinned and addressed physically, as on the sysfs path.
Every system call goes through a KernelInterface, so emu/vfio.py's model serves exactly this code.
"""
from __future__ import annotations
import ctypes, errno, warnings
from typing import Callable

from autogen import vfio
from common.alloc import RangeAllocator
from drivers.system.dma import DMAMemory, alloc_pinned, host_pages, pin_existing, round_up, PAGE
from drivers.system.kernel import KernelInterface, OSKernel
from drivers.system.mmio import MMIO, CallbackMMIO
from drivers.system.pci import PCIDevice, SYSFS_PCI

IOMMU_GROUPS = "/sys/kernel/iommu_groups"
CONTAINER = "/dev/vfio/vfio"
NOIOMMU_GROUP_NAME = "vfio-noiommu"   # the name vfio gives the groups it makes up in no-IOMMU mode
NUM_BARS = 6
# drivers that leave DMA ownership to the group's user (driver_managed_dma); any other keeps a group unviable
DMA_SAFE_DRIVERS = ("vfio-pci", "pci-stub", "pcieport")
# IOVAs when the kernel reports no ranges (before Linux 5.4): 4 GiB up to 39 bits, inside every x86 IOMMU's width
DEFAULT_IOVA_RANGE = (1 << 32, (1 << 39) - 1)


class RegionIO:
  """A VFIO region reached with pread/pwrite on the device file: config space, BARs that cannot be mmap'd."""
  def __init__(self, kernel: KernelInterface, fd: int, info: vfio.vfio_region_info, name: str):
    self.kernel, self.fd, self.base, self.size, self.name = kernel, fd, info.offset, info.size, name

  def read(self, offset: int, size: int) -> int:
    data = self.kernel.pread(self.fd, size, self.base + offset)
    if len(data) != size: raise OSError(errno.EIO, f"short read of {self.name} at {offset:#x}: {len(data)} of {size} bytes")
    return int.from_bytes(data, "little")

  def write(self, offset: int, size: int, value: int) -> None:
    if (n := self.kernel.pwrite(self.fd, value.to_bytes(size, "little"), self.base + offset)) != size:
      raise OSError(errno.EIO, f"short write of {self.name} at {offset:#x}: {n} of {size} bytes")


class VFIOPCIDevice(PCIDevice):
  """A PCI function bound to vfio-pci. Needs read-write access to /dev/vfio/<group> (root or a udev rule)."""
  def __init__(self, bus: str, lock_prefix: str, kernel: KernelInterface | None = None):
    self.kernel = k = kernel or OSKernel()
    self.container: int | None = None
    self.group: int | None = None
    self.device: int | None = None
    self._maps: list[tuple[int, int]] = []
    path = f"{SYSFS_PCI}/{bus}"
    if not k.exists(path):
      raise FileNotFoundError(f"no PCI device {bus} ({path} does not exist); `hcq_smi <vendor> list` shows the devices found")
    driver = self._link(f"{path}/driver")
    if not k.exists(f"{path}/iommu_group"):
      raise RuntimeError(f"PCI device {bus} has no IOMMU group, so VFIO cannot open it: turn the IOMMU on (intel_iommu=on or "
                         "amd_iommu=on on the kernel command line) or load vfio with enable_unsafe_noiommu_mode=1 (no DMA "
                         f"protection), then {self._bind_hint(bus, driver)}")
    if driver != "vfio-pci":
      raise RuntimeError(f"PCI device {bus} is bound to {driver or 'no driver'}, not vfio-pci; {self._bind_hint(bus, driver)}")
    self.iommu_group = int(self._link(f"{path}/iommu_group") or "")   # exists: checked above
    name = f"{IOMMU_GROUPS}/{self.iommu_group}/name"
    self.noiommu = k.exists(name) and k.read_text(name).strip() == NOIOMMU_GROUP_NAME
    self.group_path = f"/dev/vfio/{'noiommu-' if self.noiommu else ''}{self.iommu_group}"
    super().__init__(bus, lock_prefix)
    try: self._open()
    except BaseException:
      self.close()
      raise

  def _link(self, path: str) -> str | None:
    return self.kernel.readlink(path).rsplit("/", 1)[1] if self.kernel.exists(path) else None

  def _bind_hint(self, bus: str, driver: str | None) -> str:
    ids = ":".join(self.kernel.read_text(f"{SYSFS_PCI}/{bus}/{f}").strip()[2:] for f in ("vendor", "device"))
    unbind = f"echo {bus} > {SYSFS_PCI}/{bus}/driver/unbind; " if driver else ""
    return (f"bind it to vfio-pci (as root): `{unbind}echo vfio-pci > {SYSFS_PCI}/{bus}/driver_override; "
            f"echo {bus} > /sys/bus/pci/drivers_probe`, or unload its kernel driver (`hcq_smi <vendor> rmmod`) and "
            f"`modprobe vfio-pci ids={ids}`")

  def _ioctl(self, fd: int | None, file: str, name: str, arg=None) -> int:
    if fd is None: raise OSError(errno.EBADF, f"{name} on {file} ({self.bus}): the device is closed")
    try: return self.kernel.ioctl(fd, getattr(vfio, name), arg)
    except OSError as e: raise OSError(e.errno, f"{name} on {file} ({self.bus}) failed: {e.strerror}") from None

  def _open(self) -> None:
    k, group = self.kernel, self.group_path
    try: self.container = k.open(CONTAINER)
    except FileNotFoundError:
      raise FileNotFoundError(f"{CONTAINER} does not exist: the VFIO modules are not loaded; `modprobe vfio-pci` (as root)") from None
    if (version := self._ioctl(self.container, CONTAINER, "VFIO_GET_API_VERSION")) != vfio.VFIO_API_VERSION:
      raise RuntimeError(f"{CONTAINER} speaks VFIO API version {version}; hcq speaks version {vfio.VFIO_API_VERSION}")
    iommu = vfio.VFIO_NOIOMMU_IOMMU if self.noiommu else vfio.VFIO_TYPE1v2_IOMMU
    if not self._ioctl(self.container, CONTAINER, "VFIO_CHECK_EXTENSION", iommu):
      raise RuntimeError("the kernel's VFIO has no no-IOMMU support; load vfio with enable_unsafe_noiommu_mode=1" if self.noiommu
                         else "the kernel's VFIO has no Type1v2 IOMMU driver; `modprobe vfio_iommu_type1` (as root)")
    try: self.group = k.open(group)
    except PermissionError:
      raise PermissionError(f"no permission to open {group} (IOMMU group {self.iommu_group} of {self.bus}): run as root or "
                            f"add a udev rule giving your user read-write access to it, e.g. SUBSYSTEM==\"vfio\", MODE=\"0660\", "
                            "GROUP=\"<your group>\"") from None
    except OSError as e:
      if e.errno != errno.EBUSY: raise
      raise OSError(errno.EBUSY, f"{group} (IOMMU group {self.iommu_group}) is already open: another process (a VM, another "
                    "driver) uses a device of the group, or this process opened another function of it; VFIO gives a group "
                    "to one user at a time") from None
    status = vfio.vfio_group_status(argsz=ctypes.sizeof(vfio.vfio_group_status))
    self._ioctl(self.group, group, "VFIO_GROUP_GET_STATUS", status)
    if not status.flags & vfio.VFIO_GROUP_FLAGS_VIABLE:
      members = k.listdir(f"{IOMMU_GROUPS}/{self.iommu_group}/devices")
      held = [f"{m} ({d})" for m in members if (d := self._link(f"{SYSFS_PCI}/{m}/driver")) and d not in DMA_SAFE_DRIVERS]
      raise RuntimeError(f"IOMMU group {self.iommu_group} of {self.bus} is not viable: {', '.join(held) or 'a device'} of the "
                         "group is bound to a host driver; every device of the group must be bound to vfio-pci or unbound "
                         f"(as root: `echo <bus> > {SYSFS_PCI}/<bus>/driver/unbind`)")
    self._ioctl(self.group, group, "VFIO_GROUP_SET_CONTAINER", ctypes.c_int32(self.container))
    self._ioctl(self.container, CONTAINER, "VFIO_SET_IOMMU", iommu)
    self._iova = None if self.noiommu else self._iova_allocator()
    self.device = self._ioctl(self.group, group, "VFIO_GROUP_GET_DEVICE_FD", ctypes.create_string_buffer(self.bus.encode()))
    info = vfio.vfio_device_info(argsz=ctypes.sizeof(vfio.vfio_device_info))
    self._ioctl(self.device, self.bus, "VFIO_DEVICE_GET_INFO", info)
    if not info.flags & vfio.VFIO_DEVICE_FLAGS_PCI or info.num_regions <= vfio.VFIO_PCI_CONFIG_REGION_INDEX:
      raise RuntimeError(f"VFIO device {self.bus} is not a PCI device (flags {info.flags:#x}, {info.num_regions} regions)")
    self._regions = [self._region_info(i) for i in range(NUM_BARS)]
    self._config = CallbackMMIO(RegionIO(k, self.device, self._region_info(vfio.VFIO_PCI_CONFIG_REGION_INDEX), f"{self.bus} config space"),
                                f"{self.bus} config space")
    self.vendor_id, self.device_id = self.read_config(0, 2), self.read_config(2, 2)
    if self.noiommu:
      warnings.warn(f"{self.bus}: VFIO no-IOMMU mode: the device can DMA to any physical memory; turn the IOMMU on to "
                    "confine it to hcq's buffers", RuntimeWarning, stacklevel=3)

  def _region_info(self, index: int) -> vfio.vfio_region_info:
    r = vfio.vfio_region_info(argsz=ctypes.sizeof(vfio.vfio_region_info), index=index)
    self._ioctl(self.device, self.bus, "VFIO_DEVICE_GET_REGION_INFO", r)
    return r

  def _iova_allocator(self) -> RangeAllocator:
    """IOVAs from the largest range type1 reports usable (VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE): the ranges leave
    out reserved windows such as x86's MSI doorbells at 0xfee00000."""
    info = vfio.vfio_iommu_type1_info(argsz=ctypes.sizeof(vfio.vfio_iommu_type1_info))
    self._ioctl(self.container, CONTAINER, "VFIO_IOMMU_GET_INFO", info)
    ranges = []
    if info.flags & vfio.VFIO_IOMMU_INFO_CAPS and info.argsz > ctypes.sizeof(info):   # ask again with room for the capabilities
      buf = (ctypes.c_uint8 * info.argsz)()
      vfio.vfio_iommu_type1_info.from_buffer(buf).argsz = info.argsz
      self._ioctl(self.container, CONTAINER, "VFIO_IOMMU_GET_INFO", buf)
      off = vfio.vfio_iommu_type1_info.from_buffer(buf).cap_offset
      while off:
        cap = vfio.vfio_iommu_type1_info_cap_iova_range.from_buffer(buf, off)
        if cap.header.id == vfio.VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE:
          ranges = [(r.start, r.end) for r in (vfio.vfio_iova_range * cap.nr_iovas).from_buffer(buf, off + ctypes.sizeof(cap))]
        off = cap.header.next
    start, end = max(ranges or [DEFAULT_IOVA_RANGE], key=lambda r: r[1] - r[0])
    start = max(round_up(start, PAGE), PAGE)   # IOVA 0 stays unused: a null bus address is always a driver bug
    return RangeAllocator(start, (end + 1 - start) // PAGE * PAGE, f"IOVA space of {self.bus}")

  def read_config(self, offset: int, size: int) -> int: return self._config.read(offset, size)
  def write_config(self, offset: int, size: int, value: int) -> None: self._config.write(offset, size, value)

  def bar_size(self, n: int) -> int:
    if not 0 <= n < NUM_BARS: raise ValueError(f"BAR{n} does not exist: a PCI function has BARs 0-5")
    return self._regions[n].size

  def _map_bar(self, n: int) -> MMIO:
    if not self.bar_size(n): raise ValueError(f"{self.bus} has no BAR{n}")
    r, name = self._regions[n], f"{self.bus} BAR{n}"
    if (fd := self.device) is None: raise OSError(errno.EBADF, f"mapping {name}: the device is closed")
    if not r.flags & vfio.VFIO_REGION_INFO_FLAG_MMAP: return CallbackMMIO(RegionIO(self.kernel, fd, r, name), name)
    try: addr, mmio = self.kernel.mmap(fd, None, r.size, r.offset)
    except OSError as e: raise OSError(e.errno, f"mmap of {name} ({r.size:#x} bytes) failed: {e.strerror}") from None
    self._maps.append((addr, r.size))
    mmio.name = name
    return mmio

  def _alloc_dma(self, size: int, contiguous: bool) -> DMAMemory:
    """Anonymous memory mapped at one run of IOVAs (always bus-contiguous); physical pages in no-IOMMU mode."""
    if self._iova is None: return alloc_pinned(size, contiguous)
    size = round_up(max(size, 1), PAGE)
    addr, host = self.kernel.anon(size)
    def release():
      host.view.release()   # the memory goes away next: later use of the buffer raises instead of touching freed pages
      self.kernel.release(addr, size)
    try: iova, unmap = self._iommu_map(addr, size)
    except BaseException:
      release()
      raise
    return DMAMemory(host.view, [iova + off for off in range(0, size, PAGE)], PAGE, lambda: (unmap(), release()))

  def _map_dma(self, view: memoryview) -> DMAMemory:
    """Existing memory mapped at one run of IOVAs (the kernel pins it); pinned and addressed physically in no-IOMMU mode."""
    if self._iova is None: return pin_existing(view)
    start, size, first = host_pages(view)
    iova, unmap = self._iommu_map(start, size)
    return DMAMemory(view, [iova + off for off in range(0, size, PAGE)], PAGE, unmap, first)

  def _iommu_map(self, addr: int, size: int) -> tuple[int, Callable[[], None]]:
    """Map [addr, addr+size) of this process at fresh IOVAs (VFIO_IOMMU_MAP_DMA) -> (iova, what unmaps it)."""
    assert (iovas := self._iova) is not None   # no IOMMU mapping in no-IOMMU mode
    iova = iovas.alloc(size, PAGE)
    m = vfio.vfio_iommu_type1_dma_map(argsz=ctypes.sizeof(vfio.vfio_iommu_type1_dma_map), flags=vfio.VFIO_DMA_MAP_FLAG_READ |
                                      vfio.VFIO_DMA_MAP_FLAG_WRITE, vaddr=addr, iova=iova, size=size)
    try: self._ioctl(self.container, CONTAINER, "VFIO_IOMMU_MAP_DMA", m)
    except OSError as e:
      iovas.free(iova)
      if e.errno == errno.ENOMEM:
        raise OSError(e.errno, f"{e.strerror}; DMA memory is pinned against the locked-memory limit: raise `ulimit -l` "
                      "or run as root") from None
      raise

    def unmap():
      u = vfio.vfio_iommu_type1_dma_unmap(argsz=ctypes.sizeof(vfio.vfio_iommu_type1_dma_unmap), iova=iova, size=size)
      self._ioctl(self.container, CONTAINER, "VFIO_IOMMU_UNMAP_DMA", u)
      iovas.free(iova)
    return iova, unmap

  def reset(self) -> None: self._ioctl(self.device, self.bus, "VFIO_DEVICE_RESET")

  def close(self) -> None:
    lock, self._lock = self._lock, None   # ownership lasts until the VFIO files are closed
    try:
      super().close()                     # DMA buffers are unmapped while the container still exists
      for addr, size in self._maps: self.kernel.release(addr, size)
      self._maps.clear()
      for fd in (self.device, self.group, self.container):
        if fd is not None: self.kernel.close(fd)
      self.device = self.group = self.container = None
    finally:
      if lock is not None: lock.release()
