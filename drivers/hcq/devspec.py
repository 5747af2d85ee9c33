"""Device strings: `<iface>+<vendor>[:<index>]`, or a bare vendor that picks the interface itself."""
from __future__ import annotations
import re
from dataclasses import dataclass

# vendor -> interfaces it can be driven through (ARCHITECTURE.md, "Device strings")
INTERFACES: dict[str, tuple[str, ...]] = {
  "AMD": ("KFD", "PCI", "USB", "MOCKKFD", "MOCKPCI", "MOCKUSB"),
  "NV": ("NVRM", "PCI", "MOCK"),
  "QCOM": ("KGSL", "MOCK"),
  "CPU": (),
}
_RE = re.compile(r"^(?:(?P<iface>[A-Z]+)\+)?(?P<vendor>[A-Z]+)(?::(?P<index>\d+))?$")


def valid_forms() -> str:
  forms = [v for v in INTERFACES] + [f"{i}+{v}" for v, ifs in INTERFACES.items() for i in ifs]
  return ", ".join(forms) + " (each may end in :<index>, e.g. AMD:1)"


@dataclass(frozen=True)
class DeviceSpec:
  vendor: str
  iface: str | None   # None: the vendor picks (e.g. AMD -> KFD if /dev/kfd exists, else PCI)
  index: int = 0

  def __str__(self) -> str:
    return f"{self.iface + '+' if self.iface else ''}{self.vendor}{f':{self.index}' if self.index else ''}"


def parse_device(name: str) -> DeviceSpec:
  """Parse a device string; a bad one raises ValueError listing every valid form."""
  m = _RE.match(name.strip().upper())
  if m is None or m["vendor"] not in INTERFACES or (m["iface"] and m["iface"] not in INTERFACES[m["vendor"]]):
    why = "unknown vendor" if m is None or m["vendor"] not in INTERFACES else f"{m['vendor']} has no interface {m['iface']}"
    raise ValueError(f"bad device string {name!r} ({why}); valid forms: {valid_forms()}")
  if m["vendor"] == "CPU" and m["index"] not in (None, "0"):
    raise ValueError(f"bad device string {name!r}: there is one CPU device (CPU or CPU:0)")
  return DeviceSpec(m["vendor"], m["iface"], int(m["index"] or 0))
