"""What a device model declares to plug in: one of these, named by an entry point of group `hcq.models`.

  [project.entry-points."hcq.models"]
  mymodel = "mypackage.model:MODEL"      # the entry point's name is the model's name

drivers/system hands them out: a `PCIModel` through open_model/list_models (bus "mock-<index>"), a `KernelModel`
through kernel_interface(mock=<name>), a `BridgeModel` in front of a PCI model (drivers/system/usb.py open_emulated,
MOCKUSB; its driver's USBBridge names it). The declaration sits beside the model it declares.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class PCIModel:
  """An emulated PCI function."""
  name: str
  vendor_id: int                         # what discovery lists for it (its config space says the same)
  device_id: int
  class_code: int                        # 24-bit: base class << 16 | subclass << 8 | prog-if
  description: str                       # its name in device listings
  create: Callable[..., Any]             # (bus, index, **options) -> the emu.pci.PCIFunction, its state that of `index`
  saved: Callable[[], list[int]]         # indexes that have state (powered on at least once): listed even when free


@dataclass(frozen=True)
class KernelModel:
  """A kernel driver's model: open/ioctl/mmap/... on the device files it serves, as drivers/system.kernel expects."""
  name: str
  create: Callable[..., Any]             # (**options) -> the model
  description: str = ""                  # the device it emulates, in device listings (each process builds its own)


@dataclass(frozen=True)
class BridgeModel:
  """A USB-to-PCIe bridge in front of an emulated PCI function, as its USB device."""
  name: str
  create: Callable[..., Any]             # (the emu.pci.PCIFunction behind it, bus=, address=) -> a pyusb-like device
