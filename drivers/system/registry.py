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
from typing import Any, Callable, Literal, Mapping, get_args

from common.plugin import BridgeModel, PCIModel, KernelModel

VENDOR_GROUP, MODEL_GROUP = "hcq.vendors", "hcq.models"
MODEL_KINDS = (PCIModel, KernelModel, BridgeModel)
Via = Literal["kernel", "pci", "usb"]       # how a driver reaches the model a MOCK interface runs on (Mock)


@dataclass(frozen=True)
class Usage:
  """What a vendor's driver tells `hcq_smi list` about one of its devices; None where it does not know."""
  interface: str | None = None               # the device string that reaches it (MOCKPCI+AMD:0, KFD+AMD)
  memory_used: int | None = None             # bytes of device memory in use
  memory_total: int | None = None
  utilisation: int | None = None             # % of the time the device was busy


@dataclass(frozen=True)
class Mock:
  """What a MOCK interface runs on in place of the hardware: the registered model (hcq.models) `model`, which the driver
  reaches `via` its kernel (a KernelModel behind its system calls: drivers/system/kernel.py kernel_interface), PCI
  (emulated device <index> of a PCIModel, the function on bus mock-<index>: drivers/system/pci.py open_model) or USB
  (that device behind the model of the vendor's first USB bridge: drivers/system/usb.py open_emulated). `model` None (PCI or USB): the
  vendor's first registered PCI model (Vendor.pci_models), so the driver names no model. `chooses` (via kernel): the keyword the
  kernel-driver model takes a PCI model's name by, so a device string may name the chip it serves (MOCKKFD+AMD:navi48 builds
  the model with chip="navi48"); None: that model serves one kind of device and a device string names none."""
  model: str | None
  via: Via
  chooses: str | None = None

  def __post_init__(self) -> None:
    if self.via not in (ways := get_args(Via)):
      raise ValueError(f"Mock({self.model!r}, via={self.via!r}): via is one of {', '.join(ways)}")
    if self.via == "kernel" and self.model is None: raise ValueError("Mock(None, via='kernel'): name the kernel-driver model")
    if self.chooses is not None and self.via != "kernel":
      raise ValueError(f"Mock({self.model!r}, via={self.via!r}, chooses={self.chooses!r}): only a kernel-driver model takes its PCI model "
                       "as a keyword; a device string's model is the PCI model itself")

  @property
  def choosable(self) -> bool:
    """Whether a device string may name the PCI model it runs on (`<iface>+<vendor>:<model>`)."""
    return self.via != "kernel" or self.chooses is not None


@dataclass(frozen=True)
class USBBridge:
  """A USB-to-PCIe bridge's driver, declared by the vendors whose devices come behind it (Vendor.usb_bridges)."""
  name: str
  ids: tuple[tuple[int, int], ...]           # its USB VID:PIDs
  open: Callable[..., Any]                   # (pyusb device, lock prefix, bus=None) -> drivers.system.usb.USBPCIDevice
  model: str                                 # its emulation: a BridgeModel (hcq.models), in front of MOCKUSB devices


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
  models: tuple[str, ...] = ()               # the PCI models (hcq.models) emulating its devices; those `mocks` name join them
  mocks: Mapping[str, Mock] = field(default_factory=dict)   # each MOCK* <iface> -> what it runs on (open_mock)
  model_package: str | None = None           # the package its models' declarations live in: searched first for Mock(None)'s model
  usage: Callable[[str, Any], Usage] | None = None   # (bus, its discovery PCIInfo or None) -> what hcq_smi list shows
  usb_bridges: tuple[USBBridge, ...] = ()    # the USB-to-PCIe bridges its devices also come behind (drivers/system/usb.py)
  kernels: bool = True                       # its devices run compute kernels (the default-device notice offers only those)
  rdma: Callable[..., Any] | None = None     # its NICs' verbs provider: (PCI bus or mock-<n>, **options) -> drivers.rdma Provider

  def __post_init__(self) -> None:
    declared, named = {i for i in self.interfaces if i.startswith("MOCK")}, set(self.mocks)
    if declared != named:
      raise ValueError(f"vendor {self.name}: its MOCK interfaces {sorted(declared)} and those its `mocks` table names "
                       f"{sorted(named)} differ: declare what each MOCK interface runs on (a Mock), and no other")
    pci = [m for m in self.mocks.values() if m.via != "kernel"]
    if pci and self.lock_prefix is None:
      raise ValueError(f"vendor {self.name}: its emulated devices of model {pci[0].model or '(its PCI vendor id)'} take its lock; "
                       "declare lock_prefix")
    object.__setattr__(self, "models", tuple(dict.fromkeys((*self.models, *(m.model for m in pci if m.model)))))

  @property
  def pci_models(self) -> tuple[str, ...]:
    """Its PCI models: those it names (`models`), then, for a vendor whose mocks leave the model to the registry
    (Mock(None, ...)), every registered PCIModel of one of its PCI vendor ids, by name (this loads every model declaration)."""
    if all(m.model is not None for m in self.mocks.values()): return self.models
    return tuple(dict.fromkeys((*self.models, *(m.name for m in models(PCIModel) if m.vendor_id in self.pci_vendors))))

  def default_pci_model(self) -> str | None:
    """What Mock(None, ...) runs on: the first of pci_models, found loading the registered declarations (by name; those in
    `model_package` first) only up to it, not all of them."""
    if self.models: return self.models[0]
    found = first_model(PCIModel, lambda m: m.vendor_id in self.pci_vendors, self.model_package)
    return found.name if found is not None else None

  @property
  def smi_name(self) -> str: return self.name.lower()

  @property
  def kernel_models(self) -> dict[str, str]:
    """<iface> -> the kernel-driver model (hcq.models) that MOCK interface runs on."""
    return {i: m.model for i, m in self.mocks.items() if m.via == "kernel" and m.model is not None}

  def open_mock(self, iface: str, index: int = 0, model: str | None = None) -> Any:
    """What MOCK interface `iface` runs on, as `mocks` declares it: a KernelInterface over the kernel-driver model (serving
    `model`, one of pci_models, where the Mock `chooses`), or emulated device `index` of the PCI model (`model`; None: the
    interface's own) as a PCIDevice (on bus mock-<index>, or behind the USB bridge model) holding this vendor's lock."""
    if (m := self.mocks.get(iface)) is None:
      raise ValueError(f"{iface}+{self.name} is no emulated interface; those of {self.name}: {', '.join(self.mocks) or 'none'}")
    if model is not None and not m.choosable:
      raise ValueError(f"{iface}+{self.name} runs on the kernel-driver model {m.model}, which serves no PCI model to choose")
    if model is not None and model not in self.pci_models:
      raise ValueError(f"{iface}+{self.name}:{model}: no emulated {self.name} device model {model!r}; models: {', '.join(self.pci_models)}")
    if m.via == "kernel" and m.model is not None:
      from drivers.system.kernel import kernel_interface
      return kernel_interface(m.model, **({m.chooses: model} if m.chooses and model else {}))
    if (name := model or m.model or self.default_pci_model()) is None:
      raise ValueError(f"{iface}+{self.name}: no PCI model of vendor id {', '.join(f'{v:#06x}' for v in self.pci_vendors)} is registered "
                       "(hcq.models) in this build")
    if m.via == "usb":
      from drivers.system.usb import open_emulated
      if not self.usb_bridges: raise ValueError(f"{iface}+{self.name} runs behind a USB bridge, and {self.name} declares none (usb_bridges)")
      return open_emulated(name, index, self.lock_prefix, self.usb_bridges[0])
    from drivers.system.pci import open_model
    return open_model(name, index, self.lock_prefix)

  @property
  def emulated_devices(self) -> tuple[str, ...]:
    """Its device strings that run on its models, not hardware: `emulated`, then each MOCK* interface's."""
    mocks = [f"{i}+{self.name}" for i in self.interfaces if i in self.mocks]
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


def first_model(kind: type, accept: Callable[[Any], bool], package: str | None = None) -> Any | None:
  """The first registered model (by name; those whose module is in `package` first) of that declaration type that `accept`
  takes, loading declarations only up to it."""
  eps = sorted(_entry_points(MODEL_GROUP).items(), key=lambda kv: (not (package and kv[1].module.startswith(package + ".")), kv[0]))
  for _, ep in eps:
    if isinstance(m := _load(MODEL_GROUP, ep, MODEL_KINDS), kind) and accept(m): return m
  return None


def models(kind: type = object) -> list[Any]:
  """Every registered model (of that declaration type: PCIModel, KernelModel, BridgeModel), by name."""
  found = [_load(MODEL_GROUP, ep, MODEL_KINDS) for _, ep in sorted(_entry_points(MODEL_GROUP).items())]
  return [m for m in found if isinstance(m, kind)]
