"""NVIDIA/Mellanox ConnectX RDMA NICs (mlx5). So far this package declares only what hcq_smi needs to list, free and
reset them; the verbs provider is not part of this build yet."""
from drivers.system.discovery import CLASS_NETWORK
from drivers.system.registry import Vendor

PCI_VENDOR = 0x15B3     # pci.ids: Mellanox Technologies

VENDOR = Vendor(
  "MLX5", lock_prefix="mlx5", modules=("mlx5_ib", "mlx5_core"), load=("mlx5_core", "mlx5_ib"),
  pci_vendors=(PCI_VENDOR,), pci_classes=(CLASS_NETWORK,),
  device_names={(PCI_VENDOR, 0x1017): "MT27800 Family [ConnectX-5]", (PCI_VENDOR, 0x101B): "MT28908 Family [ConnectX-6]",
                (PCI_VENDOR, 0x101D): "MT2892 Family [ConnectX-6 Dx]", (PCI_VENDOR, 0x101F): "MT2894 Family [ConnectX-6 Lx]",
                (PCI_VENDOR, 0x1021): "MT2910 Family [ConnectX-7]"})
