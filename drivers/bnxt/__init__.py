"""Broadcom NetXtreme-E RDMA NICs (bnxt_re). So far this package declares only what hcq_smi needs to list, free and
reset them; the verbs provider is not part of this build yet."""
from drivers.system.discovery import CLASS_NETWORK
from drivers.system.registry import Vendor

PCI_VENDOR = 0x14E4     # pci.ids: Broadcom Inc. and subsidiaries

VENDOR = Vendor(
  "BNXT", lock_prefix="bnxt", modules=("bnxt_re", "bnxt_en"), load=("bnxt_en", "bnxt_re"),
  pci_vendors=(PCI_VENDOR,), pci_classes=(CLASS_NETWORK,),
  device_names={(PCI_VENDOR, 0x1750): "BCM57508 NetXtreme-E 100/200G", (PCI_VENDOR, 0x16D7): "BCM57414 NetXtreme-E 10/25G"},
  models=("bnxt",))
