"""NVIDIA GPUs through nvidia.ko's RM and UVM ioctls, without CUDA (drivers.nv.rm: the ioctl ABI of driver branch 580;
drivers.nv.gpu: one GPU's RM object tree, memory, channels and doorbell), and what hcq_smi needs to list, free and reset
them. Device strings: RM+NV (nvidia.ko's /dev/nvidiactl), NV (the same), MOCK+NV (the same driver against the RM/UVM
model, emu/nvgpu: its `mocks` entry); drivers.nv.device is the queue-API driver: copies, signals, waits and
kernels (drivers.nv.program: cubin + PTX images). With no DEV, NV is the default when /dev/nvidiactl exists and no AMD
GPU is found (AMD's priority comes first)."""
from __future__ import annotations
import os
from typing import TYPE_CHECKING
from drivers.system.discovery import CLASS_DISPLAY
from drivers.system.registry import Mock, Vendor

if TYPE_CHECKING:
  from drivers.hcq.devspec import DeviceSpec
  from drivers.nv.device import NVDevice

PCI_VENDOR = 0x10DE     # pci.ids: NVIDIA Corporation



def _present() -> bool:
  from drivers.nv.rm import CTL
  return os.path.exists(CTL)          # nvidia.ko loaded: its control node


def _open(spec: DeviceSpec) -> NVDevice:
  from drivers.nv.device import NVDevice
  from drivers.nv.gpu import NVGPU
  from drivers.system.kernel import kernel_interface
  mock = spec.iface == "MOCK"
  name = ("MOCK+NV" if mock else "RM+NV") + (f":{spec.index}" if spec.index else "")
  return NVDevice(name, NVGPU(VENDOR.open_mock("MOCK") if mock else kernel_interface(), spec.index))


VENDOR = Vendor(
  "NV", interfaces=("RM", "MOCK"), open=_open, lock_prefix="nv", probe=_present, priority=10, mocks={"MOCK": Mock("nv", "kernel")},
  modules=("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"), load=("nvidia", "nvidia_uvm"),
  pci_vendors=(PCI_VENDOR,), pci_classes=(CLASS_DISPLAY,),
  device_names={(PCI_VENDOR, 0x2684): "AD102 [GeForce RTX 4090]", (PCI_VENDOR, 0x2B85): "GB202 [GeForce RTX 5090]",
                (PCI_VENDOR, 0x2330): "GH100 [H100 SXM5 80GB]", (PCI_VENDOR, 0x2331): "GH100 [H100 PCIe]"})
