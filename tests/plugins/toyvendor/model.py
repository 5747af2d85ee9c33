"""The toy vendor's device model: a bare PCI function whose state is a directory per index."""
import os, tempfile
from emu.pci import PCIFunction
from common.plugin import PCIModel
from toyvendor import PCI_VENDOR, PCI_DEVICE

CLASS_CODE = 0x120000     # processing accelerator


def _state_root() -> str: return os.path.join(os.environ.get("TMPDIR") or tempfile.gettempdir(), "hcq-emu")


def _create(bus: str, index: int) -> PCIFunction:
  os.makedirs(os.path.join(_state_root(), f"toyfn-{index}"), exist_ok=True)   # powered on: listed from now on
  return PCIFunction(bus, PCI_VENDOR, PCI_DEVICE, CLASS_CODE)


def _saved() -> list[int]:
  names = os.listdir(_state_root()) if os.path.isdir(_state_root()) else []
  return sorted(int(n[6:]) for n in names if n.startswith("toyfn-"))


MODEL = PCIModel("toyfn", PCI_VENDOR, PCI_DEVICE, CLASS_CODE, "emulated toy accelerator", _create, _saved)
