"""AMD GPUs: the KFD (amdgpu.ko) and AM (userspace PCI) interfaces, PM4/SDMA queues, code objects.

Device strings: KFD+AMD (the kernel driver), MOCKKFD+AMD (the same driver code over the KFD model of an
emulated Navi31), and AMD (picks KFD when /dev/kfd exists)."""
import os
from drivers.hcq import register_backend
from drivers.hcq.devspec import DeviceSpec
from drivers.system.kernel import kernel_interface


def _open(spec: DeviceSpec):
  from drivers.amd.device import AMDDevice
  from drivers.amd.kfd import KFDIface
  iface = spec.iface or ("KFD" if os.path.exists("/dev/kfd") else "PCI")
  if iface in ("KFD", "MOCKKFD"):
    return AMDDevice(f"{iface}+AMD" + (f":{spec.index}" if spec.index else ""),
                     KFDIface(kernel_interface("kfd" if iface == "MOCKKFD" else None), spec.index))
  raise ValueError(f"{iface}+AMD is not part of this build yet (the AM userspace PCI driver lands next); use KFD+AMD or MOCKKFD+AMD")


register_backend("AMD", _open)
# the default device when no GPU is present: the emulated Navi31 behind the most complete driver path built
EMULATED = "MOCKKFD+AMD"
