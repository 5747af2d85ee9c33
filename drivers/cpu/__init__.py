"""The CPU reference device (DEV=CPU): C kernels, worker-thread queues.

The smallest vendor: `VENDOR` registers it (entry point group hcq.vendors, pyproject.toml); one device, no
interface to choose, no hardware to probe, the default of last resort. The driver (drivers/cpu/device.py) is
imported when the device is opened or one of its classes is named."""
from __future__ import annotations
import importlib
from typing import TYPE_CHECKING
from drivers.system.registry import Vendor

if TYPE_CHECKING:
  from drivers.cpu.device import CPUDevice
  from drivers.hcq.devspec import DeviceSpec

__all__ = ["CPUDevice", "CPUProgram", "CPUQueue", "VENDOR"]


def _open(spec: DeviceSpec) -> CPUDevice:
  from drivers.cpu.device import CPUDevice
  return CPUDevice()


VENDOR = Vendor("CPU", open=_open, emulated="CPU", priority=1000, single=True)


def __getattr__(name: str):
  if name in ("CPUDevice", "CPUProgram", "CPUQueue"): return getattr(importlib.import_module("drivers.cpu.device"), name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
