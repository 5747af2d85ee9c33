"""A model of the Linux VFIO stack (vfio, vfio_iommu_type1, vfio-pci) serving one emulated PCI function,
implementing drivers.system.kernel.KernelInterface.

It plays the kernel's part for a function bound to vfio-pci: the sysfs bits a driver reads (the function's
`iommu_group` and `driver` links, its ids, the group's member list), the container (/dev/vfio/vfio), the
group (/dev/vfio/<n>, /dev/vfio/noiommu-<n> in no-IOMMU mode) and the device file, whose regions are config
space and the BARs (pread/pwrite at `index << 40`; BARs of a page or more also mmap: memory BARs as memory,
register BARs as their callbacks). VFIO_IOMMU_MAP_DMA maps the process's memory (from `anon`) into the
function's DMASpace at the IOVA the caller chose, so the model's DMA lands in the driver's buffer and faults
once the buffer is unmapped or the group is released. Structures and ioctl numbers are linux/vfio.h's
(autogen.vfio); semantics follow Documentation/driver-api/vfio.rst and the kernel checks cited where they
are made. ioctls it does not model fail with ENOTTY naming them.
"""
from __future__ import annotations
import ctypes, errno
from dataclasses import dataclass, field

from autogen import vfio
from emu.kernel_model import ARGSZ, RAW, Ioctl, Ioctls, KernelDriverModel
from common.plugin import KernelModel
from emu.pci import PCIFunction, IORegion, CONFIG_SIZE, PAGE, PCI_COMMAND, PCI_COMMAND_MEMORY, PCI_COMMAND_MASTER

SYSFS_PCI = "/sys/bus/pci/devices"
IOMMU_GROUPS = "/sys/kernel/iommu_groups"
CONTAINER = "/dev/vfio/vfio"
DEVICE = "anon_inode:[vfio-device]"   # what a device fd is a file of (VFIO_GROUP_GET_DEVICE_FD: anon_inode_getfile)
REGION_SHIFT = 40   # vfio-pci places region i at file offset i << 40 (VFIO_PCI_OFFSET_SHIFT, linux/vfio_pci_core.h)
NUM_BARS = 6
# what type1 reports on x86 with a 48-bit IOMMU: every IOVA but the MSI doorbell window at 0xfee00000
IOVA_RANGES = ((0, 0xFEDF_FFFF), (0xFEF0_0000, (1 << 48) - 1))
IOVA_PGSIZES = PAGE | 2 << 20 | 1 << 30
# drivers that leave DMA ownership to the group's user (driver_managed_dma): the group stays viable
DMA_SAFE_DRIVERS = ("vfio-pci", "pci-stub", "pcieport")
RW = vfio.VFIO_REGION_INFO_FLAG_READ | vfio.VFIO_REGION_INFO_FLAG_WRITE
VA_BASE, VA_END = 0x7E00_0000_0000, 0x7F00_0000_0000   # where the model's mmaps of BARs and its reservations land
_IOCTL_BASE = vfio.VFIO_TYPE << 8 | vfio.VFIO_BASE   # _IO(VFIO_TYPE, VFIO_BASE + n)
# which ioctl a number names depends on the file (they reuse numbers); the container's are type1's (x86), not SPAPR's
_IOCTL_PREFIXES = {"container": ("VFIO_GET_API_VERSION", "VFIO_CHECK_EXTENSION", "VFIO_SET_IOMMU", "VFIO_IOMMU_"),
                   "group": ("VFIO_GROUP_",), "device": ("VFIO_DEVICE_", "VFIO_MIG_")}


def _ioctl_name(kind: str, request: int) -> str:
  names = [n for n, v in vars(vfio).items() if type(v) is int and v == request and _IOCTL_BASE <= v < _IOCTL_BASE + 32
           and n.startswith(_IOCTL_PREFIXES[kind]) and "SPAPR" not in n]
  return "/".join(names) or f"ioctl {request:#x}"


def _chunks(offset: int, n: int, sizes: tuple[int, ...]):
  """Split an access into naturally aligned pieces, as vfio-pci does for config space and register BARs."""
  while n:
    size = next(s for s in sizes if offset % s == 0 and s <= n)
    yield offset, size
    offset, n = offset + size, n - size


class Window:
  """Part of a register BAR as one mmap sees it: offsets relative to the mapping."""
  def __init__(self, region: IORegion, base: int, size: int): self.region, self.base, self.size = region, base, size
  def read(self, offset: int, size: int) -> int: return self.region.read(self.base + offset, size)
  def write(self, offset: int, size: int, value: int) -> None: self.region.write(self.base + offset, size, value)


@dataclass
class Container:
  """An open /dev/vfio/vfio: the IOMMU type once set, and the DMA mappings made through it."""
  iommu: int | None = None
  maps: dict[int, int] = field(default_factory=dict)   # iova -> size
  pinned: int = 0


class VFIOModel(KernelDriverModel):
  name = "VFIO model"

  def __init__(self, function: PCIFunction, group: int = 12, *, iommu: bool = True, noiommu: bool = False,
               driver: str | None = "vfio-pci", peers: dict[str, str | None] | None = None, vfio_loaded: bool = True,
               denied: tuple[str, ...] = (), memlock: int | None = None):
    """`iommu=False`: the function has no IOMMU group (IOMMU off and no-IOMMU mode unused); `noiommu`: the group is
    a no-IOMMU group (vfio's enable_unsafe_noiommu_mode); `driver`: the driver the function is bound to; `peers`:
    the other functions of its IOMMU group -> their drivers (sysfs only, not served); `vfio_loaded=False`: no
    vfio modules (no /dev/vfio); `denied`: device files this user may not open; `memlock`: RLIMIT_MEMLOCK in
    bytes for pinned DMA memory (None: unlimited, as with CAP_IPC_LOCK)."""
    if not isinstance(function, PCIFunction):
      raise TypeError(f"the VFIO model serves an emu.pci.PCIFunction, not {type(function).__name__}")
    super().__init__(VA_BASE, VA_END)
    self.function, self.group, self.noiommu, self.driver = function, group, noiommu, driver
    self.iommu_type = {vfio.VFIO_NOIOMMU_IOMMU} if noiommu else {vfio.VFIO_TYPE1_IOMMU, vfio.VFIO_TYPE1v2_IOMMU}
    self.members = {function.bus: driver, **(peers or {})} if iommu else {}
    self.vfio_loaded, self.denied, self.memlock = vfio_loaded, denied, memlock
    self.group_node = f"/dev/vfio/{'noiommu-' if noiommu else ''}{group}"
    self.containers: dict[int, Container] = {}   # open /dev/vfio/vfio files
    self.container: Container | None = None     # the container the group is attached to
    self.mmaps: dict[int, int] = {}             # BAR mappings: address -> size
    self._sysfs()
    # vfio's ioctls are _IO(VFIO_TYPE, VFIO_BASE + n), by file; structures start with argsz
    io = lambda name, handler, struct=None: Ioctl(getattr(vfio, name), name, handler, struct, ARGSZ if struct else RAW)
    self.ioctls = {
      CONTAINER: Ioctls((io("VFIO_GET_API_VERSION", self._api_version), io("VFIO_CHECK_EXTENSION", self._check_extension),
                         io("VFIO_SET_IOMMU", self._set_iommu), io("VFIO_IOMMU_GET_INFO", self._iommu_info, vfio.vfio_iommu_type1_info),
                         io("VFIO_IOMMU_MAP_DMA", self._map_dma, vfio.vfio_iommu_type1_dma_map),
                         io("VFIO_IOMMU_UNMAP_DMA", self._unmap_dma, vfio.vfio_iommu_type1_dma_unmap))),
      self.group_node: Ioctls((io("VFIO_GROUP_GET_STATUS", self._group_status, vfio.vfio_group_status),
                               io("VFIO_GROUP_SET_CONTAINER", self._set_container), io("VFIO_GROUP_UNSET_CONTAINER", self._unset_container),
                               io("VFIO_GROUP_GET_DEVICE_FD", self._get_device_fd))),
      DEVICE: Ioctls((io("VFIO_DEVICE_GET_INFO", self._device_info, vfio.vfio_device_info),
                      io("VFIO_DEVICE_GET_REGION_INFO", self._region_info, vfio.vfio_region_info), io("VFIO_DEVICE_RESET", self._reset)))}

  # --- sysfs and /dev/vfio
  def _sysfs(self) -> None:
    f = self.function
    dev = f"{SYSFS_PCI}/{f.bus}"
    self.files = {f"{dev}/vendor": f"{f.vendor_id:#06x}\n", f"{dev}/device": f"{f.device_id:#06x}\n",
                  f"{dev}/class": f"{f.class_code:#08x}\n"}
    self.links = {f"{dev}/driver": f"../../../bus/pci/drivers/{self.driver}"} if self.driver else {}
    self.dirs = {SYSFS_PCI: sorted({f.bus, *self.members})}
    for bus, drv in self.members.items():
      self.links[f"{SYSFS_PCI}/{bus}/iommu_group"] = f"../../../kernel/iommu_groups/{self.group}"
      if drv: self.links[f"{SYSFS_PCI}/{bus}/driver"] = f"../../../bus/pci/drivers/{drv}"
    if self.members:
      self.dirs[f"{IOMMU_GROUPS}/{self.group}/devices"] = sorted(self.members)
      if self.noiommu: self.files[f"{IOMMU_GROUPS}/{self.group}/name"] = "vfio-noiommu\n"
    # the group's file appears once a device of it is bound to vfio-pci
    nodes = [CONTAINER, self.group_node] if "vfio-pci" in self.members.values() else [CONTAINER]
    if self.vfio_loaded: self.dirs["/dev/vfio"] = [n.rsplit("/", 1)[1] for n in nodes]
    self.devices = set(nodes) if self.vfio_loaded else set()
    self.paths = {*self.files, *self.links, *self.dirs, *self.devices}
    for p in list(self.paths):
      while (p := p.rsplit("/", 1)[0]): self.paths.add(p)

  def listdir(self, path: str) -> list[str]:
    if (names := self.dirs.get(path.rstrip("/"))) is None: raise FileNotFoundError(errno.ENOENT, f"VFIO model: no such directory {path}")
    return list(names)

  def exists(self, path: str) -> bool: return path.rstrip("/") in self.paths

  def readlink(self, path: str) -> str:
    if (target := self.links.get(path)) is None:
      raise OSError(errno.EINVAL if self.exists(path) else errno.ENOENT, f"VFIO model: {path} is not a symbolic link")
    return target

  def open(self, path: str) -> int:
    if path in self.devices and path in self.denied: raise PermissionError(errno.EACCES, f"VFIO model: permission denied: {path}")
    # one open file per group (vfio_group_fops_open); device files keep it open (they hold the group file)
    if path == self.group_node and (self._open_fds(path) or self._open_fds(DEVICE)): raise self._fail(errno.EBUSY, f"{path} is already open")
    fd = super().open(path)
    if path == CONTAINER: self.containers[fd] = Container()
    return fd

  def _closed(self, fd: int, path: str) -> None:
    self.containers.pop(fd, None)
    if not self._open_fds(self.group_node) and not self._open_fds(DEVICE) and self.container is not None: self._detach()

  def _last_closed(self, path: str) -> None:
    if path == DEVICE:   # vfio_pci_core_disable: bus mastering off when the last user goes
      self.function.config[PCI_COMMAND] &= ~PCI_COMMAND_MASTER & 0xFF

  def _detach(self) -> None:
    """The group leaves its container; the container's last group takes the IOMMU with it and type1's
    release unmaps every DMA mapping (vfio_container_detach_group)."""
    c, self.container = self.container, None
    self.function.dma.unmap(list(c.maps))
    c.maps.clear()
    c.iommu, c.pinned = None, 0

  # --- memory (anon(): process memory VFIO_IOMMU_MAP_DMA finds by its address)
  def release(self, va: int, size: int) -> None:
    self.space.release(va, size)   # pages still mapped for DMA stay alive through the IOMMU mapping, as pinned pages do
    self.mmaps.pop(va, None)

  def _host(self, vaddr: int, size: int) -> memoryview:
    for addr, m in self.space.anon_maps.items():
      if addr <= vaddr and vaddr + size <= addr + len(m): return memoryview(m)[vaddr - addr:vaddr - addr + size]
    raise self._fail(errno.EFAULT, f"VFIO_IOMMU_MAP_DMA of vaddr {vaddr:#x}+{size:#x}: not memory of this process (allocate it with anon())")

  # --- the device file's regions
  def _region(self, index: int) -> tuple[int, int]:
    """(size, VFIO_REGION_INFO flags) of region `index`."""
    if index == vfio.VFIO_PCI_CONFIG_REGION_INDEX: return CONFIG_SIZE, RW
    if index < NUM_BARS and index in self.function.bars:
      size = self.function.bar_size(index)
      # vfio-pci mmaps memory BARs of at least a page (vfio_pci_core_enable: bar_mmap_supported)
      return size, RW | (vfio.VFIO_REGION_INFO_FLAG_MMAP if size >= PAGE else 0)
    return 0, 0

  def _locate(self, fd: int, offset: int, n: int, op: str) -> tuple[int, int]:
    if self._file(fd, f"{op} on") != DEVICE: raise self._fail(errno.EINVAL, f"{op} on fd {fd}, which is not a VFIO device file")
    index, off = offset >> REGION_SHIFT, offset & ((1 << REGION_SHIFT) - 1)
    size, _ = self._region(index) if index < vfio.VFIO_PCI_NUM_REGIONS else (0, 0)
    if off + n > size: raise self._fail(errno.EINVAL, f"{op} of {n} bytes at {off:#x} of region {index} ({size:#x} bytes)")
    return index, off

  def pread(self, fd: int, n: int, offset: int) -> bytes:
    index, off = self._locate(fd, offset, n, "read")
    if index == vfio.VFIO_PCI_CONFIG_REGION_INDEX:
      return b"".join(self.function.config_read(o, s).to_bytes(s, "little") for o, s in _chunks(off, n, (4, 2, 1)))
    bar = self.function.bars[index]
    if isinstance(bar, memoryview): return bytes(bar[off:off + n])
    return b"".join(bar.read(o, s).to_bytes(s, "little") for o, s in _chunks(off, n, (8, 4, 2, 1)))

  def pwrite(self, fd: int, data: bytes, offset: int) -> int:
    index, off = self._locate(fd, offset, len(data), "write")
    if index == vfio.VFIO_PCI_CONFIG_REGION_INDEX:
      for o, s in _chunks(off, len(data), (4, 2, 1)): self.function.config_write(o, s, int.from_bytes(data[o - off:o - off + s], "little"))
      return len(data)
    bar = self.function.bars[index]
    if isinstance(bar, memoryview): bar[off:off + len(data)] = data
    else:
      for o, s in _chunks(off, len(data), (8, 4, 2, 1)): bar.write(o, s, int.from_bytes(data[o - off:o - off + s], "little"))
    return len(data)

  def mmap(self, fd: int, va: int | None, size: int, offset: int) -> tuple[int, memoryview | IORegion]:
    index, off = self._locate(fd, offset, size, "mmap")
    if not self._region(index)[1] & vfio.VFIO_REGION_INFO_FLAG_MMAP or off % PAGE:
      raise self._fail(errno.EINVAL, f"mmap of region {index} at {off:#x}: the region cannot be mapped there")
    bar = self.function.bars[index]
    region = bar[off:off + size] if isinstance(bar, memoryview) else Window(bar, off, size)
    va = va if va is not None else self.reserve(size, PAGE)
    self.mmaps[va] = size
    return va, region

  # --- ioctls
  def _unknown_ioctl(self, fd: int, path: str, request: int) -> OSError:
    kind = "container" if path == CONTAINER else "device" if path == DEVICE else "group"
    return self._fail(errno.ENOTTY, f"{_ioctl_name(kind, request)} on a VFIO {kind} file is not modelled")

  def _int(self, arg, what: str) -> int:
    if type(arg) is not int: raise self._fail(errno.EINVAL, f"{what} takes an integer argument, got {type(arg).__name__}")
    return arg

  def _api_version(self, fd: int, arg) -> int: return vfio.VFIO_API_VERSION
  def _check_extension(self, fd: int, arg) -> int: return int(self._int(arg, "VFIO_CHECK_EXTENSION") in self.iommu_type)

  def _set_iommu(self, fd: int, arg) -> None:
    # vfio_ioctl_set_iommu: a group must be attached and no IOMMU set yet
    c = self.containers[fd]
    if self.container is not c: raise self._fail(errno.EINVAL, "VFIO_SET_IOMMU on a container without a group (VFIO_GROUP_SET_CONTAINER first)")
    if c.iommu is not None: raise self._fail(errno.EINVAL, "VFIO_SET_IOMMU: the container's IOMMU is already set")
    if self._int(arg, "VFIO_SET_IOMMU") not in self.iommu_type: raise self._fail(errno.ENODEV, f"VFIO_SET_IOMMU: no IOMMU driver of type {arg}")
    c.iommu = arg

  def _type1(self, c: Container, what: str) -> None:
    if c.iommu is None: raise self._fail(errno.EINVAL, f"{what} before VFIO_SET_IOMMU")
    if c.iommu == vfio.VFIO_NOIOMMU_IOMMU: raise self._fail(errno.ENOTTY, f"{what}: the no-IOMMU driver does no DMA mapping")

  def _iommu_info(self, fd: int, info) -> None:
    self._type1(self.containers[fd], "VFIO_IOMMU_GET_INFO")
    cap = vfio.vfio_iommu_type1_info_cap_iova_range(vfio.vfio_info_cap_header(vfio.VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, 1, 0), len(IOVA_RANGES))
    ranges = (vfio.vfio_iova_range * len(IOVA_RANGES))(*(vfio.vfio_iova_range(s, e) for s, e in IOVA_RANGES))
    base = ctypes.sizeof(vfio.vfio_iommu_type1_info)
    need = base + ctypes.sizeof(cap) + ctypes.sizeof(ranges)
    info.flags, info.iova_pgsizes = vfio.VFIO_IOMMU_INFO_PGSIZES | vfio.VFIO_IOMMU_INFO_CAPS, IOVA_PGSIZES
    if info.argsz < need: info.argsz, info.cap_offset = need, 0   # too small for the capabilities: say how big
    else:
      info.cap_offset = base
      ctypes.memmove(ctypes.addressof(info) + base, ctypes.addressof(cap), ctypes.sizeof(cap))
      ctypes.memmove(ctypes.addressof(info) + base + ctypes.sizeof(cap), ctypes.addressof(ranges), ctypes.sizeof(ranges))

  def _map_dma(self, fd: int, m) -> None:
    self._type1(c := self.containers[fd], "VFIO_IOMMU_MAP_DMA")
    if m.flags & ~(vfio.VFIO_DMA_MAP_FLAG_READ | vfio.VFIO_DMA_MAP_FLAG_WRITE):
      raise self._fail(errno.EINVAL, f"VFIO_IOMMU_MAP_DMA flags {m.flags:#x} are not modelled")
    if not m.size or (m.iova | m.vaddr | m.size) % PAGE:
      raise self._fail(errno.EINVAL, f"VFIO_IOMMU_MAP_DMA of {m.size:#x} bytes at iova {m.iova:#x}, vaddr {m.vaddr:#x}: "
                  "not whole, aligned pages")
    if not any(s <= m.iova and m.iova + m.size - 1 <= e for s, e in IOVA_RANGES):
      raise self._fail(errno.EINVAL, f"VFIO_IOMMU_MAP_DMA: iova {m.iova:#x}+{m.size:#x} is outside the IOMMU's IOVA ranges")
    if any(i < m.iova + m.size and m.iova < i + n for i, n in c.maps.items()):
      raise self._fail(errno.EEXIST, f"VFIO_IOMMU_MAP_DMA: iova {m.iova:#x}+{m.size:#x} overlaps an existing mapping")
    if self.memlock is not None and c.pinned + m.size > self.memlock:   # vfio_lock_acct against RLIMIT_MEMLOCK
      raise self._fail(errno.ENOMEM, f"VFIO_IOMMU_MAP_DMA: pinning {m.size:#x} more bytes exceeds RLIMIT_MEMLOCK ({self.memlock:#x})")
    self.function.dma.map_at(m.iova, self._host(m.vaddr, m.size))
    c.maps[m.iova] = m.size
    c.pinned += m.size

  def _unmap_dma(self, fd: int, u) -> None:
    self._type1(c := self.containers[fd], "VFIO_IOMMU_UNMAP_DMA")
    if u.flags: raise self._fail(errno.EINVAL, f"VFIO_IOMMU_UNMAP_DMA flags {u.flags:#x} are not modelled")
    if (u.iova | u.size) % PAGE: raise self._fail(errno.EINVAL, f"VFIO_IOMMU_UNMAP_DMA of {u.size:#x} bytes at {u.iova:#x}: not aligned pages")
    end = u.iova + u.size
    # type1v2 refuses to split a mapping (vfio_dma_do_unmap)
    if any(i < u.iova < i + n or i < end < i + n for i, n in c.maps.items()):
      raise self._fail(errno.EINVAL, f"VFIO_IOMMU_UNMAP_DMA of [{u.iova:#x}, {end:#x}) would split a mapping")
    gone = [i for i in c.maps if u.iova <= i < end]
    self.function.dma.unmap(gone)
    u.size = sum(c.maps.pop(i) for i in gone)   # the kernel reports how much it unmapped
    c.pinned -= u.size

  @property
  def viable(self) -> bool: return all(d is None or d in DMA_SAFE_DRIVERS for d in self.members.values())

  def _group_status(self, fd: int, st) -> None:
    st.flags = (vfio.VFIO_GROUP_FLAGS_CONTAINER_SET | vfio.VFIO_GROUP_FLAGS_VIABLE if self.container is not None
                else vfio.VFIO_GROUP_FLAGS_VIABLE if self.viable else 0)

  def _set_container(self, fd: int, arg) -> None:
    if not isinstance(arg, ctypes.c_int32): raise self._fail(errno.EFAULT, "VFIO_GROUP_SET_CONTAINER takes a pointer to the container's fd")
    if (c := self.containers.get(arg.value)) is None:
      raise self._fail(errno.EBADF, f"VFIO_GROUP_SET_CONTAINER: fd {arg.value} is not a container")
    if self.container is not None: raise self._fail(errno.EINVAL, "VFIO_GROUP_SET_CONTAINER: the group is already in a container")
    if not self.viable: raise self._fail(errno.EPERM, "VFIO_GROUP_SET_CONTAINER: the group is not viable")
    self.container = c

  def _unset_container(self, fd: int, arg) -> None:
    if self.container is None: raise self._fail(errno.EINVAL, "VFIO_GROUP_UNSET_CONTAINER: the group is in no container")
    if self._open_fds(DEVICE): raise self._fail(errno.EBUSY, "VFIO_GROUP_UNSET_CONTAINER with device files open")
    self._detach()

  def _get_device_fd(self, fd: int, arg) -> int:
    if not isinstance(arg, ctypes.Array): raise self._fail(errno.EFAULT, "VFIO_GROUP_GET_DEVICE_FD takes a pointer to the device name")
    name = ctypes.string_at(ctypes.addressof(arg), ctypes.sizeof(arg)).split(b"\0")[0].decode()
    if self.container is None or self.container.iommu is None:
      raise self._fail(errno.EINVAL, "VFIO_GROUP_GET_DEVICE_FD before the group has a container with an IOMMU")
    if name != self.function.bus or self.driver != "vfio-pci":
      raise self._fail(errno.ENODEV, f"VFIO_GROUP_GET_DEVICE_FD: no device {name!r} bound to vfio-pci (the model serves {self.function.bus})")
    if not self._open_fds(DEVICE):   # vfio_pci_core_enable -> pci_enable_device: memory decoding on
      self.function.config[PCI_COMMAND] |= PCI_COMMAND_MEMORY
    return self._new_fd(DEVICE)

  def _device_info(self, fd: int, info) -> None:
    info.flags = vfio.VFIO_DEVICE_FLAGS_PCI | vfio.VFIO_DEVICE_FLAGS_RESET
    info.num_regions, info.num_irqs, info.cap_offset = vfio.VFIO_PCI_NUM_REGIONS, vfio.VFIO_PCI_NUM_IRQS, 0

  def _region_info(self, fd: int, r) -> None:
    if r.index >= vfio.VFIO_PCI_NUM_REGIONS: raise self._fail(errno.EINVAL, f"VFIO_DEVICE_GET_REGION_INFO: no region {r.index}")
    (r.size, r.flags), r.offset, r.cap_offset = self._region(r.index), r.index << REGION_SHIFT, 0

  def _reset(self, fd: int, arg) -> None: self.function.reset()


# registered under hcq.models (pyproject.toml): kernel_interface(mock="vfio", function=...) is this model
MODEL = KernelModel("vfio", VFIOModel)
