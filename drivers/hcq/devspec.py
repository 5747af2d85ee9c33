"""Device strings: `<iface>+<vendor>[:<model>][:<index>]`, or a bare vendor that picks the interface itself. `<model>` (a
registered PCI model's name, lower case, e.g. MOCKPCI+AMD:navi48) picks the emulated chip of a MOCK interface that runs on
a PCI model, or on a kernel-driver model that serves a chosen one (Mock.chooses: MOCKKFD+AMD:navi48); without it, that
interface runs on its default.

The vendors and their interfaces are the registered ones (drivers/system/registry.py, entry point group hcq.vendors)
that have a queue-API driver (`Vendor.open`)."""
from __future__ import annotations
import re
from dataclasses import dataclass

from drivers.system.registry import Vendor, vendor, vendors

_RE = re.compile(r"^(?:(?P<iface>[A-Z][A-Z0-9]*)\+)?(?P<vendor>[A-Z][A-Z0-9]*)(?::(?P<model>[A-Z][A-Z0-9_]*))?(?::(?P<index>\d+))?$")


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
  models = next((f"; a MOCK interface may name the emulated chip it runs on (a PCI model) first, e.g. {i}+{v.name}:<model>:1"
                 for v in openable_vendors() for i, m in v.mocks.items() if m.choosable), "")
  return ", ".join(device_forms()) + f" (each may end in :<index>{example}{models})"


@dataclass(frozen=True)
class DeviceSpec:
  vendor: str
  iface: str | None   # None: the vendor picks (by what this machine has)
  index: int = 0
  model: str | None = None   # the emulated chip (a registered PCI model) a MOCK interface runs on; None: the vendor's default

  def __str__(self) -> str:
    return f"{self.iface + '+' if self.iface else ''}{self.vendor}{f':{self.model}' if self.model else ''}{f':{self.index}' if self.index else ''}"


def parse_device(name: str) -> DeviceSpec:
  """Parse a device string; a bad one raises ValueError listing every valid form."""
  m = _RE.match(name.strip().upper())
  v = vendor(m["vendor"]) if m else None
  if m is None: why = "unknown form"
  elif v is None or v.open is None:
    why = f"the {m['vendor']} driver is not part of this build; available: {', '.join(available_vendors())}"
  elif m["iface"] and m["iface"] not in v.interfaces: why = f"{v.name} has no interface {m['iface']}"
  elif m["model"] and (m["iface"] not in v.mocks or not v.mocks[m["iface"]].choosable):
    pci = [f"{i}+{v.name}" for i, mock in v.mocks.items() if mock.choosable]
    after = f"{', '.join(pci[:-1])} or {pci[-1]}" if len(pci) > 1 else "".join(pci)
    why = (f"{m['iface'] or v.name} runs on no PCI model to choose: name a model after {after}" if pci
           else f"{v.name} has no emulated interface whose model a device string may name")
  else:
    if v.single and m["index"] not in (None, "0"):
      raise ValueError(f"bad device string {name!r}: there is one {v.name} device ({v.name} or {v.name}:0)")
    return DeviceSpec(v.name, m["iface"], int(m["index"] or 0), m["model"].lower() if m["model"] else None)
  raise ValueError(f"bad device string {name!r} ({why}); valid forms: {valid_forms()}")
