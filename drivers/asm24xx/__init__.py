"""The ASMedia ASM24xx USB3/USB4-to-PCIe bridge (custom firmware) as a USBBridge: its driver (bridge.py), imported when a
bridge is opened, and its model (emu/usb/asm24xx.py, hcq.models "asm24xx"). Vendors whose devices come behind it name
it in Vendor.usb_bridges."""
from __future__ import annotations
from typing import Any

from drivers.system.registry import USBBridge

VID_PID = ((0xADD1, 0x0001), (0x3801, 0x0001))     # tinygrad's runtime/support/usb.py (ASM24Controller)


def _open(device: Any, lock_prefix: str | None, bus: str | None = None) -> Any:
  from drivers.asm24xx.bridge import ASM24xxDevice
  return ASM24xxDevice(device, lock_prefix, bus)


BRIDGE = USBBridge("asm24xx", VID_PID, _open, model="asm24xx")
