"""AMD GPUs: the KFD (amdgpu.ko) and AM (userspace PCI) interfaces, PM4/SDMA queues, code objects.

Device strings: KFD+AMD (through the kernel driver), PCI+AMD (the AM userspace driver on the bare PCI
function), MOCKKFD+AMD / MOCKPCI+AMD (the same driver code against the emulated Navi31), and AMD (KFD
when /dev/kfd exists, else PCI)."""
import os
from drivers.hcq import register_backend
from drivers.hcq.devspec import DeviceSpec
from drivers.system.kernel import kernel_interface
from drivers.system.discovery import list_pci, VENDORS, CLASS_DISPLAY, CLASS_ACCELERATOR

# PCI device ids of the GPUs the AM driver boots (gfx11: Navi31 RX 7900 XTX/XT/GRE)
AM_DEVICE_IDS = (0x744C,)


def _pci_device(index: int):
  from drivers.system import pci
  found = [d for d in list_pci(VENDORS["amd"]) if d.base_class in (CLASS_DISPLAY, CLASS_ACCELERATOR) and d.device_id in AM_DEVICE_IDS]
  if index >= len(found):
    raise RuntimeError(f"PCI+AMD:{index} does not exist: {len(found)} supported AMD GPU(s) found on the PCI bus "
                       f"(device ids {', '.join(hex(i) for i in AM_DEVICE_IDS)}); `hcq_smi amd list` shows what is there")
  return pci.open_pci(found[index].bus, "am")


def _open(spec: DeviceSpec):
  from drivers.amd.device import AMDDevice
  iface = spec.iface or ("KFD" if os.path.exists("/dev/kfd") else "PCI")
  name = f"{iface}+AMD" + (f":{spec.index}" if spec.index else "")
  if iface in ("KFD", "MOCKKFD"):
    from drivers.amd.kfd import KFDIface
    return AMDDevice(name, KFDIface(kernel_interface("kfd" if iface == "MOCKKFD" else None), spec.index))
  if iface in ("PCI", "MOCKPCI"):
    from drivers.amd.pci import PCIIface
    from drivers.system.pci import open_model
    return AMDDevice(name, PCIIface(open_model("navi31", spec.index, "am") if iface == "MOCKPCI" else _pci_device(spec.index)))
  raise ValueError(f"{iface}+AMD is not part of this build (the USB4 bridge interface is not implemented); "
                   "use KFD+AMD, PCI+AMD, MOCKKFD+AMD or MOCKPCI+AMD")


register_backend("AMD", _open)
# the default device when no GPU is present: the emulated Navi31 booted through the userspace PCI driver
EMULATED = "MOCKPCI+AMD"
