"""HostShare: host memory several devices reach, without a host round trip between them.

Page-aligned host memory is imported into each device (Device.import_host: an IOMMU map, a pin, a kernel driver's
user-pointer buffer object; a device that addresses host memory directly, Device.host_addressed, takes the host
address), so the same bytes lie at each device's own address. What crosses between devices this way: the bounce buffer
of a copy (one device's copy queue writes it, the other's reads it) and signals one device's queue writes and another's
queue waits on by itself (a wait-on-memory command).
"""
from __future__ import annotations
import mmap
from typing import TYPE_CHECKING, Iterable
from drivers.hcq.buffer import Buffer
from drivers.hcq.signal import Signal
if TYPE_CHECKING: from drivers.hcq.device import Device

SIGNAL_BYTES = 16   # value and timestamp (Signal)


class HostShare:
  def __init__(self, size: int, devices: Iterable[Device]):
    """`size` bytes of zeroed host memory, imported into each of `devices`."""
    self.memory = mmap.mmap(-1, max(size, 1))   # anonymous: whole, zeroed pages
    self.size = size
    self.bufs: dict[Device, Buffer] = {}
    try:
      for dev in devices:
        if dev not in self.bufs: self.bufs[dev] = dev.import_host(memoryview(self.memory)[:size])
    except BaseException:
      self.free()
      raise

  def __getitem__(self, dev: Device) -> Buffer: return self.bufs[dev]

  def signals(self, offset: int = 0, name: str = "shared") -> dict[Device, Signal]:
    """One signal in the shared bytes at `offset` (8-byte aligned), as each device addresses it; its value starts at 0."""
    if offset % 8 or offset + SIGNAL_BYTES > self.size:
      raise ValueError(f"a signal at offset {offset} does not fit, aligned, in the {self.size}-byte shared memory")
    return {dev: Signal(dev, buf.host_view[offset:offset + SIGNAL_BYTES], buf.va + offset, 0, name) for dev, buf in self.bufs.items()}

  def free(self) -> None:
    """Unmap the memory from every device (after work that may still use it); the memory goes with the last reference."""
    for buf in self.bufs.values(): buf.free()
    self.bufs = {}
