"""PCI device discovery: pyudev (the udev database) on a live system, a sysfs walk as fallback.

Both read the same attributes the kernel exports for each function under /sys/bus/pci/devices/<bus>:
vendor, device, class (hex), the `driver` symlink (bound kernel driver), `iommu_group` symlink.
Marketing names come from udev's hardware database (ID_MODEL_FROM_DATABASE, built from pci.ids) on a live
system, else from the table below of the devices hcq drives.
"""
from __future__ import annotations
import os
from dataclasses import dataclass

# PCI vendor ids (pci.ids)
VENDORS = {"amd": 0x1002, "nv": 0x10DE, "bnxt": 0x14E4, "mlx5": 0x15B3, "qcom": 0x5143}
# PCI base classes (PCI Code and ID Assignment spec): display controller, network controller, processing
# accelerator (Instinct MI300 parts report 0x12 instead of 0x03)
CLASS_DISPLAY, CLASS_NETWORK, CLASS_ACCELERATOR = 0x03, 0x02, 0x12

# (vendor id, device id) -> marketing name, for the devices hcq drives (facts from the PCI ID repository, pci.ids)
DEVICE_NAMES = {
  (0x1002, 0x744C): "Navi 31 [Radeon RX 7900 XT/XTX]", (0x1002, 0x747E): "Navi 32 [Radeon RX 7700 XT/7800 XT]",
  (0x1002, 0x7480): "Navi 33 [Radeon RX 7600]", (0x1002, 0x7550): "Navi 48 [Radeon RX 9070/9070 XT]",
  (0x1002, 0x7590): "Navi 44 [Radeon RX 9060 XT]", (0x1002, 0x74A1): "Aqua Vanjaram [Instinct MI300X]",
  (0x10DE, 0x2684): "AD102 [GeForce RTX 4090]", (0x10DE, 0x2B85): "GB202 [GeForce RTX 5090]",
  (0x10DE, 0x2330): "GH100 [H100 SXM5 80GB]", (0x10DE, 0x2331): "GH100 [H100 PCIe]",
  (0x14E4, 0x1750): "BCM57508 NetXtreme-E 100/200G", (0x14E4, 0x16D7): "BCM57414 NetXtreme-E 10/25G",
  (0x15B3, 0x1017): "MT27800 Family [ConnectX-5]", (0x15B3, 0x101B): "MT28908 Family [ConnectX-6]",
  (0x15B3, 0x101D): "MT2892 Family [ConnectX-6 Dx]", (0x15B3, 0x101F): "MT2894 Family [ConnectX-6 Lx]",
  (0x15B3, 0x1021): "MT2910 Family [ConnectX-7]",
}


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
    """Marketing name: udev's database, else hcq's table, else empty."""
    return self.db_name or DEVICE_NAMES.get((self.vendor_id, self.device_id), "")


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
