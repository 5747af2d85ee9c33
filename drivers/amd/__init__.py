"""AMD GPUs: the KFD (amdgpu.ko) and AM (userspace PCI) interfaces, PM4/SDMA queues, code objects.

Device strings: KFD+AMD (through the kernel driver), PCI+AMD (the AM userspace driver on the bare PCI
function), USB+AMD (the AM driver on a GPU behind an ASM24xx USB bridge), MOCKKFD+AMD / MOCKPCI+AMD / MOCKUSB+AMD
(the same driver code against the emulated GPU: the registered AMD PCI model, MOCKUSB through the bridge model; MOCKPCI+AMD:<model>
and MOCKUSB+AMD:<model> pick one of the registered chips), and AMD (KFD when /dev/kfd
exists, else PCI when a supported GPU is on the PCI bus, else USB when a bridge is attached, else PCI's error). `VENDOR` is what registers (entry
point group hcq.vendors); the driver
itself is imported when a device is opened."""
from __future__ import annotations
import os
from typing import TYPE_CHECKING
from drivers.system.discovery import CLASS_DISPLAY, CLASS_ACCELERATOR, PCIInfo
from drivers.asm24xx import BRIDGE as ASM24XX
from drivers.system.registry import Mock, Usage, Vendor

if TYPE_CHECKING:
  from drivers.amd.device import AMDDevice
  from drivers.hcq.devspec import DeviceSpec
  from drivers.system.pci import PCIDevice

PCI_VENDOR = 0x1002     # pci.ids: Advanced Micro Devices, Inc. [AMD/ATI]
LOCK_PREFIX = "am"      # $TMPDIR/am_<bus>.lock
# PCI device ids of the GPUs the AM driver boots (gfx11: Navi31 RX 7900 XTX/XT/GRE; gfx12: Navi48 RX 9070/9070 XT, Navi44 RX 9060 XT)
AM_DEVICE_IDS = (0x744C, 0x7550, 0x7590)
# marketing names (the PCI ID repository, pci.ids), for hosts without udev's hardware database
DEVICE_NAMES = {
  (PCI_VENDOR, 0x744C): "Navi 31 [Radeon RX 7900 XT/XTX]", (PCI_VENDOR, 0x747E): "Navi 32 [Radeon RX 7700 XT/7800 XT]",
  (PCI_VENDOR, 0x7480): "Navi 33 [Radeon RX 7600]", (PCI_VENDOR, 0x7550): "Navi 48 [Radeon RX 9070/9070 XT]",
  (PCI_VENDOR, 0x7590): "Navi 44 [Radeon RX 9060 XT]", (PCI_VENDOR, 0x74A1): "Aqua Vanjaram [Instinct MI300X]",
}
KFD = "/dev/kfd"        # the amdgpu kernel driver's compute interface


def _pci_device(index: int) -> PCIDevice:
  from drivers.system.discovery import list_pci
  from drivers.system.pci import open_pci
  found = [d for d in list_pci(PCI_VENDOR) if d.base_class in VENDOR.pci_classes and d.device_id in AM_DEVICE_IDS]
  if index >= len(found):
    raise RuntimeError(f"PCI+AMD:{index} does not exist: {len(found)} supported AMD GPU(s) found on the PCI bus "
                       f"(device ids {', '.join(hex(i) for i in AM_DEVICE_IDS)}); `hcq_smi amd list` shows what is there")
  return open_pci(found[index].bus, LOCK_PREFIX)


def _pci_gpus() -> int:
  from drivers.system.discovery import list_pci
  return sum(d.base_class in VENDOR.pci_classes and d.device_id in AM_DEVICE_IDS for d in list_pci(PCI_VENDOR))


def _usb_bridges() -> int:
  from drivers.system.usb import list_usb
  return len(list_usb())


def _auto() -> str:
  """The interface `AMD` means: KFD with the kernel driver, else PCI with a GPU on the bus, else USB with a bridge."""
  if os.path.exists(KFD): return "KFD"
  return "USB" if not _pci_gpus() and _usb_bridges() else "PCI"


def _usage(bus: str, pci: PCIInfo | None) -> Usage:
  from drivers.amd.smi import usage
  return usage(bus, pci)


def _open(spec: DeviceSpec) -> AMDDevice:
  from drivers.amd.device import AMDDevice
  iface = spec.iface or _auto()
  name = f"{iface}+AMD" + (f":{spec.model}" if spec.model else "") + (f":{spec.index}" if spec.index else "")
  mock = iface in VENDOR.mocks
  if iface in ("KFD", "MOCKKFD"):
    from drivers.amd.kfd import KFDIface
    from drivers.system.kernel import kernel_interface
    return AMDDevice(name, KFDIface(VENDOR.open_mock(iface, model=spec.model) if mock else kernel_interface(), spec.index))
  if iface in ("USB", "MOCKUSB"):
    from drivers.amd.usb import USBIface
    from drivers.system.usb import open_usb
    return AMDDevice(name, USBIface(VENDOR.open_mock(iface, spec.index, spec.model) if mock else open_usb(spec.index, LOCK_PREFIX)))
  from drivers.amd.pci import PCIIface
  return AMDDevice(name, PCIIface(VENDOR.open_mock(iface, spec.index, spec.model) if mock else _pci_device(spec.index)))


VENDOR = Vendor(
  "AMD", interfaces=("KFD", "PCI", "USB", "MOCKKFD", "MOCKPCI", "MOCKUSB"), open=_open, probe=lambda: os.path.exists(KFD),
  # the default device when no GPU is present: the emulated GPU booted through the userspace PCI driver
  emulated="MOCKPCI+AMD", priority=0,
  lock_prefix=LOCK_PREFIX, modules=("amdgpu",), load=("amdgpu",), pci_vendors=(PCI_VENDOR,),
  pci_classes=(CLASS_DISPLAY, CLASS_ACCELERATOR), device_names=DEVICE_NAMES, usage=_usage, usb_bridges=(ASM24XX,),
  # the emulated GPU (the first registered PCI model of vendor 0x1002) through the AM driver, bare or behind the USB
  # bridge model (ASM24xx); the KFD model (emu/amdgpu/kfd.py), serving the chip a device string names (KFDModel(chip=))
  mocks={"MOCKKFD": Mock("kfd", "kernel", chooses="chip"), "MOCKPCI": Mock(None, "pci"), "MOCKUSB": Mock(None, "usb")},
  # where its models are declared: the default is found there, without loading every vendor's model declarations
  model_package="emu.amdgpu")
