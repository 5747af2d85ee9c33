"""NVIDIA GPUs. So far this package declares only what hcq_smi needs to list, free and reset them; the queue-API
driver (NV, MOCK+NV device strings) is not part of this build yet."""
from drivers.system.discovery import CLASS_DISPLAY
from drivers.system.registry import Vendor

PCI_VENDOR = 0x10DE     # pci.ids: NVIDIA Corporation

VENDOR = Vendor(
  "NV", lock_prefix="nv", modules=("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"), load=("nvidia", "nvidia_uvm"),
  pci_vendors=(PCI_VENDOR,), pci_classes=(CLASS_DISPLAY,),
  device_names={(PCI_VENDOR, 0x2684): "AD102 [GeForce RTX 4090]", (PCI_VENDOR, 0x2B85): "GB202 [GeForce RTX 5090]",
                (PCI_VENDOR, 0x2330): "GH100 [H100 SXM5 80GB]", (PCI_VENDOR, 0x2331): "GH100 [H100 PCIe]"})
