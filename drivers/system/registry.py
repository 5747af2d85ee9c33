"""What plugged in: vendor packages (entry point group `hcq.vendors`) and device models (`hcq.models`).

A vendor declares itself once, as a `Vendor`, and names it in its distribution's metadata (pyproject.toml):

  [project.entry-points."hcq.vendors"]
  CPU = "drivers.cpu:VENDOR"             # the entry point's name is the vendor's name

Models do the same with a common.plugin.PCIModel or KernelModel. Discovery reads the installed distributions'
metadata (importlib.metadata, so any package on sys.path can plug in) and imports a declaration only when its
vendor or model is asked for, or when all of them are (listings); a declaration lives in a light module that
imports its driver only inside `open`.
"""
from __future__ import annotations
import sys
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable, Mapping

from common.plugin import BridgeModel, PCIModel, KernelModel

VENDOR_GROUP, MODEL_GROUP = "hcq.vendors", "hcq.models"
MODEL_KINDS = (PCIModel, KernelModel, BridgeModel)


@dataclass(frozen=True)
class Usage:
  """What a vendor's driver tells `hcq_smi list` about one of its devices; None where it does not know."""
  interface: str | None = None               # the device string that reaches it (MOCKPCI+AMD:0, KFD+AMD)
  memory_used: int | None = None             # bytes of device memory in use
  memory_total: int | None = None
  utilisation: int | None = None             # % of the time the device was busy


@dataclass(frozen=True)
class Vendor:
  """One vendor package. All but the name is optional: a vendor without `open` has no queue-API driver in this build
  (hcq_smi may still manage its devices); one without `lock_prefix` is no hcq_smi backend; one with `rdma` drives
  RDMA NICs through drivers/rdma's verbs."""
  name: str                                  # in device strings (upper case); hcq_smi's backend is its lower case
  interfaces: tuple[str, ...] = ()           # the <iface> of its "<iface>+<name>" device strings
  open: Callable[[Any], Any] | None = None   # drivers.hcq DeviceSpec -> Device; spec.iface None: the vendor picks
  probe: Callable[[], bool] = lambda: False  # is one of its real devices present? (picks the default device)
  emulated: str | None = None                # its device string for when no hardware is found
  priority: int = 100                        # the default device is chosen among vendors in this order (lower first)
  single: bool = False                       # it has one device only (index 0)
  lock_prefix: str | None = None             # its devices' ownership locks: $TMPDIR/<prefix>_<bus>.lock (no '_' in it)
  modules: tuple[str, ...] = ()              # its kernel modules, dependents first (the order `modprobe -r` takes)
  load: tuple[str, ...] = ()                 # what `hcq_smi insmod` loads again (modprobe pulls in dependencies)
  pci_vendors: tuple[int, ...] = ()          # PCI vendor ids of its functions
  pci_classes: tuple[int, ...] = ()          # PCI base classes of the functions it drives
  device_names: Mapping[tuple[int, int], str] = field(default_factory=dict)   # (vendor id, device id) -> marketing name
  models: tuple[str, ...] = ()               # the PCI models (hcq.models) emulating its devices
  kernel_models: Mapping[str, str] = field(default_factory=dict)   # <iface> -> the kernel-driver model (hcq.models) it runs on
  usage: Callable[[str, Any], Usage] | None = None   # (bus, its discovery PCIInfo or None) -> what hcq_smi list shows
  usb_bridges: bool = False                  # its devices also come behind USB-to-PCIe bridges (drivers/system/usb.py)
  rdma: Callable[..., Any] | None = None     # its NICs' verbs provider: (PCI bus or mock-<n>, **options) -> drivers.rdma Provider

  @property
  def smi_name(self) -> str: return self.name.lower()

  @property
  def emulated_devices(self) -> tuple[str, ...]:
    """Its device strings that run on its models, not hardware: `emulated`, then each MOCK* interface's."""
    mocks = [f"{i}+{self.name}" for i in self.interfaces if i.startswith("MOCK")]
    return tuple(dict.fromkeys([self.emulated, *mocks] if self.emulated else mocks))


_found: dict[tuple[str, tuple[str, ...]], dict[str, EntryPoint]] = {}
_loaded: dict[tuple[str, str, str], Any] = {}


def _entry_points(group: str) -> dict[str, EntryPoint]:
  """The group's entry points by name (the first distribution on sys.path wins), read again when sys.path changes."""
  key = (group, tuple(sys.path))
  if key not in _found:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group): found.setdefault(ep.name, ep)
    _found[key] = found
  return _found[key]


def _load(group: str, ep: EntryPoint, kinds: tuple[type, ...]) -> Any:
  key = (group, ep.name, ep.value)
  if key not in _loaded:
    obj = ep.load()
    if not isinstance(obj, kinds) or getattr(obj, "name", None) != ep.name:
      raise TypeError(f"entry point {ep.name} = {ep.value!r} (group {group}) is {obj!r}, not a "
                      f"{' or '.join(k.__name__ for k in kinds)} named {ep.name!r}")
    _loaded[key] = obj
  return _loaded[key]


def vendor(name: str) -> Vendor | None:
  """The registered vendor of that name (its declaration imported now), or None."""
  ep = _entry_points(VENDOR_GROUP).get(name)
  return _load(VENDOR_GROUP, ep, (Vendor,)) if ep is not None else None


def vendors() -> list[Vendor]:
  """Every registered vendor, in priority order."""
  if not (eps := _entry_points(VENDOR_GROUP)):
    raise RuntimeError(f"no vendor is registered (entry point group {VENDOR_GROUP}): hcq's package metadata is not "
                       "installed in this Python; run scripts/setup.sh (or pip install -e .)")
  return sorted((_load(VENDOR_GROUP, ep, (Vendor,)) for ep in eps.values()), key=lambda v: (v.priority, v.name))


def model(name: str) -> PCIModel | KernelModel | BridgeModel | None:
  """The registered model of that name, or None."""
  ep = _entry_points(MODEL_GROUP).get(name)
  return _load(MODEL_GROUP, ep, MODEL_KINDS) if ep is not None else None


def models(kind: type = object) -> list[Any]:
  """Every registered model (of that declaration type: PCIModel, KernelModel, BridgeModel), by name."""
  found = [_load(MODEL_GROUP, ep, MODEL_KINDS) for _, ep in sorted(_entry_points(MODEL_GROUP).items())]
  return [m for m in found if isinstance(m, kind)]
