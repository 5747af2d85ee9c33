"""Device strings: `<iface>+<vendor>[:<index>]`, or a bare vendor that picks the interface itself.

The vendors and their interfaces are the registered ones (drivers/system/registry.py, entry point group hcq.vendors)
that have a queue-API driver (`Vendor.open`)."""
from __future__ import annotations
import re
from dataclasses import dataclass

from drivers.system.registry import Vendor, vendor, vendors

_RE = re.compile(r"^(?:(?P<iface>[A-Z][A-Z0-9]*)\+)?(?P<vendor>[A-Z][A-Z0-9]*)(?::(?P<index>\d+))?$")


def openable_vendors() -> list[Vendor]:
  """The registered vendors with a queue-API driver, in priority order."""
  return [v for v in vendors() if v.open is not None]


def available_vendors() -> list[str]:
  return [v.name for v in openable_vendors()]


def device_forms(kernels_only: bool = False) -> list[str]:
  """Every valid device string without an index: each vendor bare, then with each of its interfaces (`kernels_only`:
  only those of vendors whose devices run kernels)."""
  vs = [v for v in openable_vendors() if v.kernels or not kernels_only]
  return [v.name for v in vs] + [f"{i}+{v.name}" for v in vs for i in v.interfaces]


def valid_forms() -> str:
  example = next((f", e.g. {v.name}:1" for v in openable_vendors() if not v.single), "")
  return ", ".join(device_forms()) + f" (each may end in :<index>{example})"


@dataclass(frozen=True)
class DeviceSpec:
  vendor: str
  iface: str | None   # None: the vendor picks (by what this machine has)
  index: int = 0

  def __str__(self) -> str:
    return f"{self.iface + '+' if self.iface else ''}{self.vendor}{f':{self.index}' if self.index else ''}"


def parse_device(name: str) -> DeviceSpec:
  """Parse a device string; a bad one raises ValueError listing every valid form."""
  m = _RE.match(name.strip().upper())
  v = vendor(m["vendor"]) if m else None
  if m is None: why = "unknown form"
  elif v is None or v.open is None:
    why = f"the {m['vendor']} driver is not part of this build; available: {', '.join(available_vendors())}"
  elif m["iface"] and m["iface"] not in v.interfaces: why = f"{v.name} has no interface {m['iface']}"
  else:
    if v.single and m["index"] not in (None, "0"):
      raise ValueError(f"bad device string {name!r}: there is one {v.name} device ({v.name} or {v.name}:0)")
    return DeviceSpec(v.name, m["iface"], int(m["index"] or 0))
  raise ValueError(f"bad device string {name!r} ({why}); valid forms: {valid_forms()}")
