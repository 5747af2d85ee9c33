"""Discovery against a fake sysfs tree laid out like /sys/bus/pci/devices."""
import os
from drivers.system.discovery import list_pci, CLASS_DISPLAY


def _fake_fn(root, bus, vendor, device, cls, driver=None, group=None):
  d = root / "devices" / "pci0000:00" / bus
  d.mkdir(parents=True)
  (d / "vendor").write_text(f"0x{vendor:04x}\n")
  (d / "device").write_text(f"0x{device:04x}\n")
  (d / "class").write_text(f"0x{cls:06x}\n")
  if driver:
    (root / "bus" / "pci" / "drivers" / driver).mkdir(parents=True, exist_ok=True)
    os.symlink(root / "bus" / "pci" / "drivers" / driver, d / "driver")
  if group is not None:
    (root / "kernel" / "iommu_groups" / str(group)).mkdir(parents=True, exist_ok=True)
    os.symlink(root / "kernel" / "iommu_groups" / str(group), d / "iommu_group")
  links = root / "bus" / "pci" / "devices"
  links.mkdir(parents=True, exist_ok=True)
  os.symlink(d, links / bus)


def test_sysfs_walk_reads_ids_class_driver_and_iommu_group(tmp_path):
  _fake_fn(tmp_path, "0000:03:00.0", 0x1002, 0x744C, 0x030000, driver="amdgpu", group=14)
  _fake_fn(tmp_path, "0000:03:00.1", 0x1002, 0xAB30, 0x040300, driver="snd_hda_intel", group=14)
  _fake_fn(tmp_path, "0000:41:00.0", 0x10DE, 0x2335, 0x030200)
  _fake_fn(tmp_path, "0000:81:00.0", 0x15B3, 0x1021, 0x020000, driver="vfio-pci", group=3)
  amd = list_pci(0x1002, CLASS_DISPLAY, sysfs=str(tmp_path))
  assert [(d.bus, d.device_id, d.driver, d.iommu_group) for d in amd] == [("0000:03:00.0", 0x744C, "amdgpu", 14)]
  nv = list_pci(0x10DE, sysfs=str(tmp_path))
  assert nv[0].driver is None and nv[0].iommu_group is None and nv[0].class_code == 0x030200
  assert [d.bus for d in list_pci(sysfs=str(tmp_path))] == ["0000:03:00.0", "0000:03:00.1", "0000:41:00.0", "0000:81:00.0"]
  assert list_pci(0x15B3, sysfs=str(tmp_path))[0].driver == "vfio-pci"


def test_missing_sysfs_gives_no_devices(tmp_path):
  assert list_pci(sysfs=str(tmp_path / "nothing")) == []


def test_live_system_udev_and_sysfs_agree():
  from drivers.system.discovery import _scan_udev, _scan_sysfs
  udev = _scan_udev()
  if udev is not None: assert udev == _scan_sysfs("/sys")
