"""NVIDIA GPUs through nvidia.ko's RM and UVM ioctls, without CUDA (drivers.nv.rm: the ioctl ABI of driver branch 580;
drivers.nv.gpu: one GPU's RM object tree, memory, channels and doorbell), and what hcq_smi needs to list, free and reset
them. The queue-API driver (NV, MOCK+NV device strings) is not part of this build yet; the RM/UVM model it will run
on is emu/nvgpu (kernel_interface(mock="nv", chip="GH100" | "GA100" | "GA102"))."""
from drivers.system.discovery import CLASS_DISPLAY
from drivers.system.registry import Vendor

PCI_VENDOR = 0x10DE     # pci.ids: NVIDIA Corporation

VENDOR = Vendor(
  "NV", lock_prefix="nv", modules=("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"), load=("nvidia", "nvidia_uvm"),
  pci_vendors=(PCI_VENDOR,), pci_classes=(CLASS_DISPLAY,),
  device_names={(PCI_VENDOR, 0x2684): "AD102 [GeForce RTX 4090]", (PCI_VENDOR, 0x2B85): "GB202 [GeForce RTX 5090]",
                (PCI_VENDOR, 0x2330): "GH100 [H100 SXM5 80GB]", (PCI_VENDOR, 0x2331): "GH100 [H100 PCIe]"})
