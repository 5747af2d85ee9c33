"""A toy RDMA NIC vendor, plugged in as the toy vendor is: this declaration (entry point TOYNIC of group hcq.vendors)
and its device model (toynic, group hcq.models; toyvendor/nicmodel.py). Its NIC is the emulated ConnectX-6 Dx driven by
the mlx5 provider, under its own vendor name, lock, MAC and model state (as the toy vendor's device is the CPU device
under its name): nothing in drivers/, emu/ or tests/drivers knows it, and rdma_vendors() offers it, so the NIC provider
contract (tests/drivers/rdma/contract.py) runs on it like on every registered NIC."""
from __future__ import annotations
from typing import Any
from common.plugin import PCIModel
from drivers.system.discovery import CLASS_NETWORK
from drivers.system.registry import Vendor

NAME = "toynic"                                  # its lock prefix, its model's name and its state directories'
PCI_VENDOR, PCI_DEVICE, CLASS_ETHERNET = 0x15B3, 0x101D, 0x020000   # the ConnectX-6 Dx model's config space says these


def _rdma(pci: str, **options: Any) -> Any:
  from drivers.mlx5.device import MLX5Device
  from drivers.system.pci import open_function
  return MLX5Device(open_function(pci, NAME, VENDOR.models, **options))


def _create(bus: str, index: int, **options: Any) -> Any:
  from toyvendor.nicmodel import ToyNIC
  return ToyNIC(bus, index, path=ToyNIC.state_dir(index), **options)


def _saved() -> list[int]:
  from toyvendor.nicmodel import ToyNIC
  return ToyNIC.list_states()


VENDOR = Vendor("TOYNIC", lock_prefix=NAME, pci_classes=(CLASS_NETWORK,), models=(NAME,), rdma=_rdma)
MODEL = PCIModel(NAME, PCI_VENDOR, PCI_DEVICE, CLASS_ETHERNET, "emulated toy NIC (hcq model)", _create, _saved)
