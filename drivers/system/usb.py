"""USBPCIDevice: a PCI function behind a USB-to-PCIe bridge, through pyusb: the USB side every bridge shares (finding the
bridge by VID:PID, claiming its interface, permissions, disconnects). What a bridge carries over USB (config and memory
requests, its SRAM) is its driver's: a subclass, declared as a USBBridge (drivers/system/registry.py) by the vendors
whose devices come behind it (Vendor.usb_bridges); its emulation is a BridgeModel (hcq.models) that open_emulated puts in
front of an emulated PCI function (MOCKUSB).
"""
from __future__ import annotations
import errno, threading
from dataclasses import dataclass
from typing import Any, Callable

import usb.core, usb.util

from drivers.system.pci import PCIDevice, emulated_model
from drivers.system.registry import BridgeModel, USBBridge, model, vendors


class USBBridgeError(RuntimeError):
  """The bridge refused or failed a request."""


def udev_rule(vid: int, pid: int) -> str:
  return f'SUBSYSTEM=="usb", ATTRS{{idVendor}}=="{vid:04x}", ATTRS{{idProduct}}=="{pid:04x}", MODE="0666"'


class USBPCIDevice(PCIDevice):
  """The function behind the bridge `device` (a pyusb usb.core.Device, or a bridge model's stand-in). With `bus` (the
  name its lock is taken under), `device` is a callable that makes it once the lock is held (a model's state is not
  touched before), given this device (it may set `function`, the emulated function behind the bridge, closed with it).
  A bridge driver declares its VID:PIDs (`ids`) and brings the function up in `_bring_up` (the bridge identified)."""
  ids: tuple[tuple[int, int], ...] = ()
  usb: Any

  def __init__(self, device: Any, lock_prefix: str | None, bus: str | None = None):
    self.usb, self.function = None, None   # the pyusb device, once identified; an emulated function behind it
    self.io = threading.RLock()
    if bus is None: self._identify(device)
    super().__init__(bus or f"usb-{device.bus}-{device.address}", lock_prefix)
    try:
      if bus is not None: self._identify(device(self))
      self._bring_up()
    except BaseException:
      self.close()
      raise

  def _bring_up(self) -> None: raise NotImplementedError

  def _identify(self, device: Any) -> None:
    self.usb = device
    self.name = f"USB bridge {device.idVendor:04x}:{device.idProduct:04x} at bus {device.bus} address {device.address}"
    if (device.idVendor, device.idProduct) not in self.ids:
      raise ValueError(f"{self.name} is not a supported bridge (VID:PID one of {', '.join(f'{v:04x}:{p:04x}' for v, p in self.ids)})")

  def _usb(self, op: Callable[[], Any]) -> Any:
    try: return op()
    except usb.core.USBError as e:
      if e.errno in (errno.EACCES, errno.EPERM):
        raise PermissionError(f"no permission to open {self.name}: run as root, or install this udev rule in "
                              f"/etc/udev/rules.d/70-hcq-usb.rules and replug the device:\n"
                              f"{udev_rule(self.usb.idVendor, self.usb.idProduct)}") from None
      if e.errno == errno.ENODEV: raise ConnectionError(f"{self.name} was disconnected") from None
      if e.errno == errno.EPIPE: raise USBBridgeError(f"{self.name} refused a request: {e}") from None
      raise

  def _setup_usb(self) -> None:
    """Interface 0 of configuration 1 claimed, taken from a kernel driver that held it."""
    if self.usb.is_kernel_driver_active(0): self.usb.detach_kernel_driver(0)
    self.usb.set_configuration(1)
    usb.util.claim_interface(self.usb, 0)
    self.usb.set_interface_altsetting(0, 0)

  def close(self) -> None:
    try:
      try:
        if self.usb is not None: usb.util.dispose_resources(self.usb)
      except usb.core.USBError: pass     # a device that went away has nothing left to release
      super().close()
    finally:
      if self.function is not None: self.function.close()
      self.function = None


def known_bridges() -> list[USBBridge]:
  """The bridges the registered vendors' devices come behind (Vendor.usb_bridges), each once."""
  return list({b.name: b for v in vendors() for b in v.usb_bridges}.values())


def _ids(bridges: list[USBBridge]) -> str: return ", ".join(f"{v:04x}:{p:04x}" for b in bridges for v, p in b.ids)


def list_usb() -> list[Any]:
  """The bridges attached (pyusb enumeration of the known bridges' VID:PIDs), by bus and address; none without libusb."""
  found = []
  try:
    for b in known_bridges():
      for vid, pid in b.ids: found += list(usb.core.find(find_all=True, idVendor=vid, idProduct=pid) or ())
  except usb.core.NoBackendError: return []
  return sorted(found, key=lambda d: (d.bus, d.address))


@dataclass(frozen=True)
class BridgeInfo:
  """An attached bridge as listings show it, without opening it."""
  bus: str              # what USBPCIDevice names (and locks) it: usb-<bus>-<address>
  path: str             # the USB path as sysfs names it: <bus>-<port>.<port>...
  vendor_id: int
  product_id: int
  firmware: str         # the bridge firmware's release (bcdDevice), as major.minor


def bridge_info(device: Any) -> BridgeInfo:
  bcd = device.bcdDevice
  return BridgeInfo(f"usb-{device.bus}-{device.address}", f"{device.bus}-{'.'.join(map(str, device.port_numbers or ()))}",
                    device.idVendor, device.idProduct, f"{bcd >> 8:x}.{bcd & 0xFF:02x}")


def list_bridges() -> list[BridgeInfo]:
  """What list_usb finds, described."""
  return [bridge_info(d) for d in list_usb()]


def open_usb(index: int, lock_prefix: str) -> USBPCIDevice:
  """The function behind bridge `index` of list_usb(), through the driver of the bridge its VID:PID names."""
  if index >= len(found := list_usb()):
    raise RuntimeError(f"USB bridge {index} does not exist: {len(found)} found (USB VID:PID {_ids(known_bridges())}); "
                       "check the cable and `lsusb`")
  d = found[index]
  return next(b for b in known_bridges() if (d.idVendor, d.idProduct) in b.ids).open(d, lock_prefix)


def open_emulated(kind: str, index: int, lock_prefix: str | None, bridge: USBBridge, **options: Any) -> USBPCIDevice:
  """Emulated device `index` of the PCI model `kind` behind `bridge`'s registered model: the same device, state and lock
  as open_model(kind, index)'s mock-<index>, reached over USB (MOCKUSB). Closing it powers the model off."""
  if not isinstance(front := model(bridge.model), BridgeModel):
    raise RuntimeError(f"no USB bridge model {bridge.model!r} is registered (hcq.models): reinstall hcq (scripts/setup.sh)")
  m, bus = emulated_model(kind, index)
  def make(dev: USBPCIDevice) -> Any:
    dev.function = m.create(bus, index, **options)
    return front.create(dev.function, bus=1, address=2 + index)
  return bridge.open(make, lock_prefix, bus=bus)
