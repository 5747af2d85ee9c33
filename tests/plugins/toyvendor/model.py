"""The toy vendor's device model: a bare PCI function whose state is a directory per index."""
import os
from emu import state
from emu.pci import PCIFunction
from common.plugin import PCIModel
from toyvendor import PCI_VENDOR, PCI_DEVICE

CLASS_CODE = 0x120000     # processing accelerator


def _create(bus: str, index: int) -> PCIFunction:
  os.makedirs(state.state_dir("toyfn", index), exist_ok=True)   # powered on: listed from now on
  return PCIFunction(bus, PCI_VENDOR, PCI_DEVICE, CLASS_CODE)


def _saved() -> list[int]:
  names = os.listdir(state.emu_dir()) if os.path.isdir(state.emu_dir()) else []
  return sorted(int(n[6:]) for n in names if n.startswith("toyfn-"))


MODEL = PCIModel("toyfn", PCI_VENDOR, PCI_DEVICE, CLASS_CODE, "emulated toy accelerator", _create, _saved)
