"""A toy vendor that plugs in from outside drivers/, the way a third-party package would: this declaration, named by
an entry point of group hcq.vendors, and a device model (toyvendor/model.py) named by one of group hcq.models; beside
it a kernel-driver model (toyvendor/kernel.py) and an RDMA NIC vendor with its model (toyvendor/nic.py), each named by
an entry point too. tests/test_plugins.py installs the entry points (a .dist-info on sys.path) and uses them; nothing
in drivers/ or emu/ knows them.

Its device is the CPU device under the toy vendor's name (toyvendor/device.py), owning an emulated PCI function."""
from __future__ import annotations
from drivers.system.discovery import CLASS_ACCELERATOR
from drivers.system.registry import Mock, Vendor

PCI_VENDOR, PCI_DEVICE = 0x1234, 0x11E8     # the ids QEMU's educational "edu" device uses


def _open(spec):
  from toyvendor.device import ToyDevice
  return ToyDevice(str(spec), VENDOR.open_mock("MOCK", spec.index))   # emulated device <index>, under the toy vendor's lock


VENDOR = Vendor("TOY", interfaces=("MOCK",), open=_open, emulated="MOCK+TOY", priority=500, lock_prefix="toy",
                modules=("toy_accel",), load=("toy_accel",), pci_vendors=(PCI_VENDOR,), pci_classes=(CLASS_ACCELERATOR,),
                device_names={(PCI_VENDOR, PCI_DEVICE): "Toy accelerator"}, mocks={"MOCK": Mock("toyfn", "pci")})
