"""NVIDIA/Mellanox ConnectX RDMA NICs (mlx5): the RoCEv2 provider of drivers/rdma, brought up from userspace without
mlx5_core or mlx5_ib (drivers/mlx5/device.py). `VENDOR` is what registers (entry point group hcq.vendors); the driver
itself is imported when a NIC is opened."""
from __future__ import annotations
from typing import TYPE_CHECKING, Any
from drivers.system.discovery import CLASS_NETWORK, PCIInfo, list_pci
from drivers.system.registry import Vendor
if TYPE_CHECKING: from drivers.mlx5.device import MLX5Device

PCI_VENDOR = 0x15B3     # pci.ids: Mellanox Technologies
LOCK_PREFIX = "mlx5"    # $TMPDIR/mlx5_<bus>.lock


def free_functions() -> list[PCIInfo]:
  """The ConnectX functions no kernel network driver holds (bound to vfio-pci, or to nothing)."""
  return [d for d in list_pci(PCI_VENDOR, CLASS_NETWORK) if d.driver in (None, "vfio-pci")]


def _rdma(pci: str, **options: Any) -> MLX5Device:
  from drivers.mlx5.device import MLX5Device
  from drivers.system.pci import open_function
  return MLX5Device(open_function(pci, LOCK_PREFIX, VENDOR.models, **options))


VENDOR = Vendor(
  "MLX5", lock_prefix=LOCK_PREFIX, modules=("mlx5_ib", "mlx5_core"), load=("mlx5_core", "mlx5_ib"),
  pci_vendors=(PCI_VENDOR,), pci_classes=(CLASS_NETWORK,), rdma=_rdma,
  device_names={(PCI_VENDOR, 0x1017): "MT27800 Family [ConnectX-5]", (PCI_VENDOR, 0x101B): "MT28908 Family [ConnectX-6]",
                (PCI_VENDOR, 0x101D): "MT2892 Family [ConnectX-6 Dx]", (PCI_VENDOR, 0x101F): "MT2894 Family [ConnectX-6 Lx]",
                (PCI_VENDOR, 0x1021): "MT2910 Family [ConnectX-7]"},
  models=("mlx5",))
