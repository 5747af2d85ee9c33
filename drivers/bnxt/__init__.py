"""Broadcom NetXtreme-E RDMA NICs (BCM575xx Thor, BCM576xx Thor2): the RoCEv2 provider of drivers/rdma, brought up
from userspace without bnxt_en or bnxt_re (drivers/bnxt/device.py). `VENDOR` is what registers (entry point group
hcq.vendors); the driver itself is imported when a NIC is opened."""
from __future__ import annotations
from typing import TYPE_CHECKING, Any
from drivers.system.discovery import CLASS_NETWORK, PCIInfo, list_pci
from drivers.system.registry import Vendor
if TYPE_CHECKING: from drivers.bnxt.device import BNXTDevice

PCI_VENDOR = 0x14E4     # pci.ids: Broadcom Inc. and subsidiaries
LOCK_PREFIX = "bnxt"    # $TMPDIR/bnxt_<bus>.lock


def free_functions() -> list[PCIInfo]:
  """The NetXtreme-E functions no kernel network driver holds (bound to vfio-pci, or to nothing)."""
  return [d for d in list_pci(PCI_VENDOR, CLASS_NETWORK) if d.driver in (None, "vfio-pci")]


def _rdma(pci: str, **options: Any) -> BNXTDevice:
  from drivers.bnxt.device import BNXTDevice
  from drivers.system.pci import open_function
  return BNXTDevice(open_function(pci, LOCK_PREFIX, VENDOR.models, **options))


VENDOR = Vendor(
  "BNXT", lock_prefix=LOCK_PREFIX, modules=("bnxt_re", "bnxt_en"), load=("bnxt_en", "bnxt_re"),
  pci_vendors=(PCI_VENDOR,), pci_classes=(CLASS_NETWORK,), rdma=_rdma,
  device_names={(PCI_VENDOR, 0x1750): "BCM57508 NetXtreme-E 100/200G", (PCI_VENDOR, 0x16D7): "BCM57414 NetXtreme-E 10/25G"},
  models=("bnxt",))
