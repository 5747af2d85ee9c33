"""PCI device discovery: pyudev (the udev database) on a live system, a sysfs walk as fallback.

Both read the same attributes the kernel exports for each function under /sys/bus/pci/devices/<bus>:
vendor, device, class (hex), the `driver` symlink (bound kernel driver), `iommu_group` symlink.
Marketing names come from udev's hardware database (ID_MODEL_FROM_DATABASE, built from pci.ids) on a live
system, else from the tables of the devices they drive that the registered vendors declare.
"""
from __future__ import annotations
import os
from dataclasses import dataclass

from drivers.system.registry import vendors

# PCI base classes (PCI Code and ID Assignment spec): display controller, network controller, processing
# accelerator (compute-only GPUs report 0x12 instead of 0x03)
CLASS_DISPLAY, CLASS_NETWORK, CLASS_ACCELERATOR = 0x03, 0x02, 0x12


def device_name(vendor_id: int, device_id: int) -> str:
  """Marketing name from the registered vendors' tables, or empty."""
  return next((v.device_names[vendor_id, device_id] for v in vendors() if (vendor_id, device_id) in v.device_names), "")


@dataclass(frozen=True)
class PCIInfo:
  bus: str                 # "0000:03:00.0"
  vendor_id: int
  device_id: int
  class_code: int          # 24-bit: base class << 16 | subclass << 8 | prog-if
  driver: str | None       # bound kernel driver, None if unbound
  iommu_group: int | None  # None without an IOMMU
  db_name: str | None = None  # the udev hardware database's model name, when udev is there

  @property
  def base_class(self) -> int: return self.class_code >> 16

  @property
  def name(self) -> str:
    """Marketing name: udev's database, else the vendors' tables, else empty."""
    return self.db_name or device_name(self.vendor_id, self.device_id)


def _read_hex(path: str) -> int:
  with open(path) as f: return int(f.read().strip(), 16)


def _link_name(path: str) -> str | None:
  return os.path.basename(os.readlink(path)) if os.path.islink(path) else None


def _from_sysfs_dir(path: str) -> PCIInfo:
  group = _link_name(os.path.join(path, "iommu_group"))
  return PCIInfo(os.path.basename(path), _read_hex(os.path.join(path, "vendor")), _read_hex(os.path.join(path, "device")),
                 _read_hex(os.path.join(path, "class")), _link_name(os.path.join(path, "driver")),
                 int(group) if group is not None else None)


def _scan_sysfs(sysfs: str) -> list[PCIInfo]:
  root = os.path.join(sysfs, "bus", "pci", "devices")
  if not os.path.isdir(root): return []
  return [_from_sysfs_dir(os.path.join(root, d)) for d in sorted(os.listdir(root))]


def _from_udev(dev) -> PCIInfo:
  vendor, device = (int(x, 16) for x in dev.properties["PCI_ID"].split(":"))
  group = _link_name(os.path.join(dev.sys_path, "iommu_group"))
  return PCIInfo(dev.sys_name, vendor, device, int(dev.properties["PCI_CLASS"], 16), dev.driver,
                 int(group) if group is not None else None, dev.properties.get("ID_MODEL_FROM_DATABASE"))


def _scan_udev() -> list[PCIInfo] | None:
  try:
    import pyudev
    return sorted((_from_udev(d) for d in pyudev.Context().list_devices(subsystem="pci")), key=lambda p: p.bus)
  except (ImportError, OSError, KeyError):
    return None   # no libudev or no udev database (containers): fall back to the sysfs walk


def list_pci(vendor: int | None = None, base_class: int | None = None, sysfs: str = "/sys") -> list[PCIInfo]:
  """PCI functions, optionally filtered by vendor id and base class. `sysfs` other than /sys
  (a test tree, a chroot) is always walked directly."""
  found = _scan_udev() if sysfs == "/sys" else None
  if found is None: found = _scan_sysfs(sysfs)
  return [d for d in found if (vendor is None or d.vendor_id == vendor) and (base_class is None or d.base_class == base_class)]
