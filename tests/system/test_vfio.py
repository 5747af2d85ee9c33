"""VFIOPCIDevice against the VFIO model (emu/vfio.py) serving a tiny doorbell device, and open_pci's choice
between VFIO and sysfs. Reference for the ioctl order and semantics: Linux Documentation/driver-api/vfio.rst."""
import ctypes, errno, warnings
import pytest
from autogen import vfio
from emu.pci import PCI_COMMAND, PCI_BASE_ADDRESS_0, PCI_COMMAND_MEMORY, PCI_COMMAND_MASTER, DMAFault
from drivers.system import VFIOPCIDevice, SysfsPCIDevice, DeviceBusyError, DeviceLock, MemMMIO, CallbackMMIO, open_pci
from drivers.system.kernel import kernel_interface
from tests.system.test_model_pci import DoorbellModel, REG_ADDR_LO, REG_ADDR_HI, REG_VALUE, REG_DOORBELL, REG_ID, DEVICE_ID
from tests.system.test_sysfs_pci import _fake

BUS, PEER = "0000:03:00.0", "0000:03:00.1"
SYSFS = "/sys/bus/pci/devices"
BIND = (f"bind it to vfio-pci (as root): `echo vfio-pci > {SYSFS}/{BUS}/driver_override; echo {BUS} > /sys/bus/pci/drivers_probe`, "
        "or unload its kernel driver (`hcq_smi <vendor> rmmod`) and `modprobe vfio-pci ids=1af4:c0de`")
# Documentation/driver-api/vfio.rst's example: container checks, group status, attach, IOMMU type, IOMMU info, device
OPEN_SEQUENCE = ["VFIO_GET_API_VERSION", "VFIO_CHECK_EXTENSION", "VFIO_GROUP_GET_STATUS", "VFIO_GROUP_SET_CONTAINER",
                 "VFIO_SET_IOMMU", "VFIO_IOMMU_GET_INFO", "VFIO_IOMMU_GET_INFO", "VFIO_GROUP_GET_DEVICE_FD",
                 "VFIO_DEVICE_GET_INFO"] + ["VFIO_DEVICE_GET_REGION_INFO"] * 7   # BAR0-5, config space
MSI_WINDOW = range(0xFEE0_0000, 0xFEF0_0000)


class Scratch:
  """A 256-byte register BAR: smaller than a page, so vfio-pci offers it through read/write, not mmap."""
  size = 0x100
  def __init__(self): self.regs = [0] * (self.size // 4)
  def read(self, off, size):
    if size != 4: raise ValueError(f"{size}-byte read of scratch register {off:#x}")
    return self.regs[off // 4]
  def write(self, off, size, value):
    if size != 4: raise ValueError(f"{size}-byte write of scratch register {off:#x}")
    self.regs[off // 4] = value


class VFIODoorbell(DoorbellModel):
  def __init__(self):
    super().__init__()
    self.bus = BUS
    self.bars[4] = Scratch()


def fake_vfio(**options):
  model = VFIODoorbell()
  return model, kernel_interface("vfio", function=model, **options)


@pytest.fixture
def opened():
  model, k = fake_vfio()
  dev = VFIOPCIDevice(BUS, "am", k)
  yield model, k, dev
  dev.close()


def ring(regs, addr: int, value: int, times: int) -> None:
  regs.write32(REG_ADDR_LO, addr & 0xFFFFFFFF); regs.write32(REG_ADDR_HI, addr >> 32); regs.write32(REG_VALUE, value)
  regs.write32(REG_DOORBELL, times)


def test_open_follows_the_vfio_sequence_and_config_space_goes_through_the_config_region(opened):
  model, k, dev = opened
  assert k.model.calls == OPEN_SEQUENCE
  assert (dev.vendor_id, dev.device_id) == (0x1AF4, DEVICE_ID) and dev.read_config(0, 4) == DEVICE_ID << 16 | 0x1AF4
  assert dev.read_config(PCI_COMMAND, 2) & PCI_COMMAND_MEMORY   # vfio-pci enabled the device when it was opened
  dev.write_config(PCI_BASE_ADDRESS_0 + 8, 4, 0xFFFFFFFF)        # BAR2 sizing (PCI 3.0 6.2.5.1)
  assert dev.read_config(PCI_BASE_ADDRESS_0 + 8, 4) == (~((1 << 16) - 1) & 0xFFFFFFF0) | 0xC
  dev.write_config(0, 2, 0x1234)                                  # vendor id is read-only
  assert dev.read_config(0, 2) == 0x1AF4 and model.vendor_id == 0x1AF4
  assert dev.iommu_group == 12 and not dev.noiommu and dev.group_path == "/dev/vfio/12"


def test_regions_sizes_mmap_flags_and_bar_access(opened):
  model, k, dev = opened
  for index, size, mmap in ((0, 0x1000, True), (1, 0, False), (2, 1 << 16, True), (4, 0x100, False),
                            (vfio.VFIO_PCI_CONFIG_REGION_INDEX, 4096, False)):
    r = vfio.vfio_region_info(argsz=ctypes.sizeof(vfio.vfio_region_info), index=index)
    k.ioctl(dev.device, vfio.VFIO_DEVICE_GET_REGION_INFO, r)
    assert (r.size, bool(r.flags & vfio.VFIO_REGION_INFO_FLAG_MMAP), r.offset) == (size, mmap, index << 40)
  assert [dev.bar_size(n) for n in range(6)] == [0x1000, 0, 1 << 16, 0, 0x100, 0]
  regs = dev.map_bar(0)                                # register BAR mmap'd: every access reaches the model's callbacks
  assert isinstance(regs, CallbackMMIO) and regs.read32(REG_ID) == DEVICE_ID and regs.name == f"{BUS} BAR0"
  vram = dev.map_bar(2)                                # memory BAR mmap'd as memory
  assert isinstance(vram, MemMMIO)
  vram.write64(0x100, 0x1122334455667788)
  assert bytes(model.bars[2][0x100:0x108]) == (0x1122334455667788).to_bytes(8, "little")
  scratch = dev.map_bar(4)                             # sub-page BAR: pread/pwrite on the device file
  scratch.write32(0xFC, 0xCAFEF00D)
  assert model.bars[4].regs[0x3F] == 0xCAFEF00D and scratch.read32(0xFC) == 0xCAFEF00D
  assert scratch.read_bytes(0xFC, 4) == (0xCAFEF00D).to_bytes(4, "little")
  with pytest.raises(ValueError, match="0000:03:00.0 has no BAR1"): dev.map_bar(1)
  with pytest.raises(ValueError, match="BAR6 does not exist: a PCI function has BARs 0-5"): dev.map_bar(6)


def test_device_dma_lands_in_the_buffer_through_its_iovas(opened):
  model, k, dev = opened
  mem = dev.alloc_dma(3 * 4096)
  other = dev.alloc_dma(1)
  assert mem.contiguous and len(mem.bus_addrs) == 3                 # one IOMMU mapping: IOVAs are contiguous
  assert not set(mem.bus_addrs + other.bus_addrs) & set(MSI_WINDOW) and mem.bus_addrs[0] > 0
  assert other.bus_addr(0) >= mem.bus_addrs[-1] + 4096 or other.bus_addr(0) + 4096 <= mem.bus_addr(0)   # disjoint
  regs = dev.map_bar(0)
  dev.enable_bus_master()
  ring(regs, mem.bus_addr(4096 - 4), 0x01020304, 3)                # 8 bytes across pages 0 and 1
  assert int.from_bytes(mem.view[4092:4100], "little") == 0x01020304 * 3
  ring(regs, other.bus_addr(8), 7, 6)
  assert int.from_bytes(other.view[8:16], "little") == 42
  with pytest.raises(DMAFault, match="no host memory is mapped"):   # nothing is mapped past the last buffer
    ring(regs, max(mem.bus_addrs + other.bus_addrs) + 4096, 1, 1)


def test_freed_dma_is_unmapped_from_the_iommu(opened):
  model, k, dev = opened
  mem = dev.alloc_dma(2 * 4096)
  iova = mem.bus_addr(0)
  regs = dev.map_bar(0)
  dev.enable_bus_master()
  dev.free_dma(mem)
  with pytest.raises(DMAFault): ring(regs, iova, 1, 1)
  with pytest.raises(ValueError, match="released"): mem.view[0]      # the host memory is gone too
  assert k.model.space.anon_maps == {} and k.model.calls[-1] == "VFIO_IOMMU_UNMAP_DMA"
  assert dev.alloc_dma(4096).bus_addr(0) == iova                     # the IOVA range is free again


def test_existing_memory_maps_at_fresh_iovas_and_stays_when_unmapped(opened):
  """map_dma of process memory (here from anon) maps the pages that hold it at one IOVA run; free_dma unmaps them
  from the IOMMU and leaves the memory to its owner."""
  model, k, dev = opened
  addr, host = k.anon(3 * 4096)
  view = host.view[100:100 + 2 * 4096]
  mem = dev.map_dma(view)
  assert mem.first == 100 and len(mem.bus_addrs) == 3 and mem.contiguous and k.model.calls[-1] == "VFIO_IOMMU_MAP_DMA"
  regs = dev.map_bar(0)
  dev.enable_bus_master()
  ring(regs, mem.bus_addr(4096 - 100 - 4), 5, 3)                   # 8 bytes across the arrays' first two pages
  assert int.from_bytes(view[4092 - 100:4100 - 100], "little") == 15
  dev.free_dma(mem)
  assert k.model.calls[-1] == "VFIO_IOMMU_UNMAP_DMA"
  with pytest.raises(DMAFault): ring(regs, mem.bus_addr(0), 1, 1)
  assert int.from_bytes(view[4092 - 100:4100 - 100], "little") == 15   # the memory is still there
  k.release(addr, 3 * 4096)


def test_reset_is_vfio_device_reset(opened):
  model, k, dev = opened
  dev.enable_bus_master()
  dev.reset()
  assert k.model.calls[-1] == "VFIO_DEVICE_RESET" and not dev.read_config(PCI_COMMAND, 2) & PCI_COMMAND_MASTER


def test_close_unmaps_everything_closes_the_files_and_frees_the_lock():
  model, k = fake_vfio()
  dev = VFIOPCIDevice(BUS, "am", k)
  bufs = [dev.alloc_dma(4096), dev.alloc_dma(5 * 4096)]
  dev.map_bar(0), dev.map_bar(2)
  dev.enable_bus_master()
  dev.close()
  for b in bufs:
    with pytest.raises(DMAFault): model.dma.write(b.bus_addrs[0], b"x")   # the device can no longer reach freed memory
  assert k.model.calls[-2:] == ["VFIO_IOMMU_UNMAP_DMA"] * 2              # unmapped by the driver, not only by the kernel
  assert k.model.fds == {} and k.model.space.anon_maps == {} and k.model.mmaps == {} and not model.bus_master
  dev.close()                                                            # closing twice is harmless
  VFIOPCIDevice(BUS, "am", k).close()                                    # lock and group are free again


def test_kernel_releases_mappings_when_the_last_group_user_goes():
  """A process that exits without unmapping: closing the files in any order drops the IOMMU mappings once the
  group's last user (group file, device files) is gone; until then the container lives on through the group."""
  model, k = fake_vfio()
  container, group = k.open("/dev/vfio/vfio"), k.open("/dev/vfio/12")
  k.ioctl(group, vfio.VFIO_GROUP_SET_CONTAINER, ctypes.c_int32(container))
  k.ioctl(container, vfio.VFIO_SET_IOMMU, vfio.VFIO_TYPE1v2_IOMMU)
  device = k.ioctl(group, vfio.VFIO_GROUP_GET_DEVICE_FD, ctypes.create_string_buffer(BUS.encode()))
  addr, host = k.anon(4096)
  k.ioctl(container, vfio.VFIO_IOMMU_MAP_DMA, vfio.vfio_iommu_type1_dma_map(argsz=32, flags=3, vaddr=addr, iova=1 << 32, size=4096))
  for fd in (container, group):
    k.close(fd)
    model.dma.write(1 << 32, b"still mapped")
  assert host.read_bytes(0, 12) == b"still mapped"
  with pytest.raises(OSError, match="/dev/vfio/12 is already open") as e: k.open("/dev/vfio/12")   # the device file holds it
  assert e.value.errno == errno.EBUSY
  k.close(device)
  with pytest.raises(DMAFault): model.dma.write(1 << 32, b"x")


def test_type1_rules_and_unmodelled_ioctls(opened):
  model, k, dev = opened
  mem = dev.alloc_dma(2 * 4096)
  addr, _ = k.anon(4096)
  def map_dma(iova):
    k.ioctl(dev.container, vfio.VFIO_IOMMU_MAP_DMA, vfio.vfio_iommu_type1_dma_map(argsz=32, flags=3, vaddr=addr, iova=iova, size=4096))
  for iova, code, msg in ((mem.bus_addr(4096), errno.EEXIST, "overlaps an existing mapping"),
                          (0xFEE0_0000, errno.EINVAL, "outside the IOMMU's IOVA ranges"), (1 << 48, errno.EINVAL, "outside")):
    with pytest.raises(OSError, match=msg) as e: map_dma(iova)
    assert e.value.errno == code
  u = vfio.vfio_iommu_type1_dma_unmap(argsz=24, iova=mem.bus_addr(4096), size=4096)   # half of a mapping
  with pytest.raises(OSError, match="would split a mapping"): k.ioctl(dev.container, vfio.VFIO_IOMMU_UNMAP_DMA, u)
  with pytest.raises(OSError, match="VFIO_DEVICE_SET_IRQS on a VFIO device file is not modelled") as e:
    k.ioctl(dev.device, vfio.VFIO_DEVICE_SET_IRQS, vfio.vfio_irq_set(argsz=20))
  assert e.value.errno == errno.ENOTTY
  with pytest.raises(OSError, match="ioctl 0x3b67 on a VFIO container file is not modelled"):
    k.ioctl(dev.container, vfio.VFIO_GROUP_GET_STATUS, vfio.vfio_group_status(argsz=8))
  with pytest.raises(OSError, match="argsz = 4: must cover the structure"):
    k.ioctl(dev.group, vfio.VFIO_GROUP_GET_STATUS, vfio.vfio_group_status(argsz=4))


# --- errors: each names what is wrong and what to do
def test_no_iommu_group_says_how_to_bind():
  _, k = fake_vfio(iommu=False, driver=None)
  with pytest.raises(RuntimeError) as e: VFIOPCIDevice(BUS, "am", k)
  assert str(e.value) == (f"PCI device {BUS} has no IOMMU group, so VFIO cannot open it: turn the IOMMU on (intel_iommu=on or "
                          "amd_iommu=on on the kernel command line) or load vfio with enable_unsafe_noiommu_mode=1 (no DMA "
                          f"protection), then {BIND}")


def test_bound_to_a_host_driver_says_how_to_rebind():
  _, k = fake_vfio(driver="amdgpu")
  with pytest.raises(RuntimeError) as e: VFIOPCIDevice(BUS, "am", k)
  unbind = f"`echo {BUS} > {SYSFS}/{BUS}/driver/unbind; echo vfio-pci"
  assert str(e.value) == f"PCI device {BUS} is bound to amdgpu, not vfio-pci; " + BIND.replace("`echo vfio-pci", unbind)


def test_vfio_not_loaded_says_modprobe_and_leaves_nothing_behind():
  _, k = fake_vfio(vfio_loaded=False)
  with pytest.raises(FileNotFoundError) as e: VFIOPCIDevice(BUS, "am", k)
  assert str(e.value) == "/dev/vfio/vfio does not exist: the VFIO modules are not loaded; `modprobe vfio-pci` (as root)"
  DeviceLock("am", BUS).release()                                       # the ownership lock was given back


def test_group_not_viable_names_the_devices_on_host_drivers():
  _, k = fake_vfio(peers={PEER: "snd_hda_intel", "0000:00:01.0": "pcieport", "0000:03:00.2": None})
  with pytest.raises(RuntimeError) as e: VFIOPCIDevice(BUS, "am", k)
  assert str(e.value) == (f"IOMMU group 12 of {BUS} is not viable: {PEER} (snd_hda_intel) of the group is bound to a host driver; "
                          "every device of the group must be bound to vfio-pci or unbound (as root: "
                          f"`echo <bus> > {SYSFS}/<bus>/driver/unbind`)")
  assert k.model.fds == {}                                              # container and group files were closed


def test_no_permission_on_the_group_file_names_it():
  _, k = fake_vfio(denied=("/dev/vfio/12",))
  with pytest.raises(PermissionError) as e: VFIOPCIDevice(BUS, "am", k)
  assert str(e.value) == (f"no permission to open /dev/vfio/12 (IOMMU group 12 of {BUS}): run as root or add a udev rule giving "
                          'your user read-write access to it, e.g. SUBSYSTEM=="vfio", MODE="0660", GROUP="<your group>"')


def test_group_already_in_use_by_another_function_of_it():
  _, k = fake_vfio(peers={PEER: "vfio-pci"})
  with VFIOPCIDevice(BUS, "am", k):
    with pytest.raises(OSError) as e: VFIOPCIDevice(PEER, "am", k)
  assert e.value.errno == errno.EBUSY and str(e.value) == (
    "[Errno 16] /dev/vfio/12 (IOMMU group 12) is already open: another process (a VM, another driver) uses a device of the "
    "group, or this process opened another function of it; VFIO gives a group to one user at a time")


def test_second_open_of_the_same_function_names_the_lock_holder(opened):
  model, k, dev = opened
  calls = list(k.model.calls)
  with pytest.raises(DeviceBusyError, match=f"device {BUS} is in use by pid"): VFIOPCIDevice(BUS, "am", k)
  assert k.model.calls == calls                                         # refused before touching VFIO


def test_pinned_memory_over_the_memlock_limit_says_ulimit_and_rolls_back():
  _, k = fake_vfio(memlock=2 * 4096)
  with VFIOPCIDevice(BUS, "am", k) as dev:
    first = dev.alloc_dma(4096).bus_addr(0)
    with pytest.raises(OSError) as e: dev.alloc_dma(2 * 4096)
    assert e.value.errno == errno.ENOMEM and str(e.value) == (
      f"[Errno 12] VFIO_IOMMU_MAP_DMA on /dev/vfio/vfio ({BUS}) failed: VFIO model: VFIO_IOMMU_MAP_DMA: pinning 0x2000 more "
      "bytes exceeds RLIMIT_MEMLOCK (0x2000); DMA memory is pinned against the locked-memory limit: raise `ulimit -l` or run as root")
    assert len(k.model.space.anon_maps) == 1 and dev.alloc_dma(4096).bus_addr(0) == first + 4096   # nothing leaked


def test_noiommu_group_uses_the_noiommu_driver_and_warns():
  _, k = fake_vfio(noiommu=True)
  with pytest.warns(RuntimeWarning, match=f"{BUS}: VFIO no-IOMMU mode: the device can DMA to any physical memory"):
    dev = VFIOPCIDevice(BUS, "am", k)
  with dev:
    assert dev.noiommu and dev.group_path == "/dev/vfio/noiommu-12" and dev.device_id == DEVICE_ID
    assert "VFIO_IOMMU_GET_INFO" not in k.model.calls
    with pytest.raises(OSError, match="no-IOMMU driver does no DMA mapping"):   # DMA is by physical address instead
      k.ioctl(dev.container, vfio.VFIO_IOMMU_MAP_DMA, vfio.vfio_iommu_type1_dma_map(argsz=32))


# --- open_pci: VFIO when the function has an IOMMU group, sysfs (with a warning) otherwise
def test_open_pci_prefers_vfio_with_an_iommu_group():
  _, k = fake_vfio()
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    with open_pci(BUS, "am", kernel=k) as dev: assert isinstance(dev, VFIOPCIDevice)


def test_open_pci_falls_back_to_sysfs_without_an_iommu_group_and_warns_once(tmp_path):
  _fake(tmp_path)
  _, k = fake_vfio(iommu=False, driver=None)
  with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("default")
    for _ in range(2):
      with open_pci(BUS, "am", kernel=k, sysfs=str(tmp_path)) as dev: assert isinstance(dev, SysfsPCIDevice)
  assert [str(w.message) for w in seen] == [f"{BUS}: opened through sysfs, not VFIO, because it has no IOMMU group: the device "
                                            "can DMA to any physical memory, not only hcq's buffers"]


def test_open_pci_without_vfio_loaded_uses_sysfs_and_says_modprobe(tmp_path):
  _fake(tmp_path)
  _, k = fake_vfio(vfio_loaded=False)
  with pytest.warns(RuntimeWarning, match=r"/dev/vfio/vfio is missing \(`modprobe vfio-pci` to use VFIO\)"):
    open_pci(BUS, "am", kernel=k, sysfs=str(tmp_path)).close()


def test_the_model_serves_pci_functions_only():
  with pytest.raises(TypeError, match="the VFIO model serves an emu.pci.PCIFunction, not object"):
    kernel_interface("vfio", function=object())
