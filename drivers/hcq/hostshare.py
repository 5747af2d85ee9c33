"""HostShare: host memory several devices reach, without a host round trip between them.

One device's host-visible buffer is imported into the others (Device.import_host: an IOMMU map, a pin, a USERPTR
buffer object), so the same bytes lie at each device's own address. What crosses between devices this way: the bounce
buffer of a copy (one device's copy queue writes it, the other's reads it) and signals one device's queue writes and
another's waits on (a device-side wait: PM4 WAIT_REG_MEM, SDMA POLL_REGMEM). A device that addresses host memory
directly (Device.host_addressed) imports by taking the host address.
"""
from __future__ import annotations
from typing import TYPE_CHECKING, Iterable
from drivers.hcq.buffer import Buffer
from drivers.hcq.signal import Signal
if TYPE_CHECKING: from drivers.hcq.device import Device

SIGNAL_BYTES = 16   # value and timestamp (Signal)


def share_owner(writer: Device, reader: Device) -> Device:
  """Whose host memory two devices share: the writer's, unless it addresses host memory directly (then the reader's,
  which the writer reaches by its host address)."""
  return reader if writer.host_addressed else writer


class HostShare:
  def __init__(self, owner: Device, size: int, devices: Iterable[Device]):
    """`size` bytes of `owner`'s host-visible memory, imported into each of `devices` that is not the owner."""
    self.base = owner.alloc(size, host=True)
    self.bufs: dict[Device, Buffer] = {owner: self.base}
    try:
      for dev in devices:
        if dev not in self.bufs: self.bufs[dev] = dev.import_host(self.base.host_view)
    except BaseException:
      self.free()
      raise

  def __getitem__(self, dev: Device) -> Buffer: return self.bufs[dev]

  def signals(self, offset: int = 0, name: str = "shared") -> dict[Device, Signal]:
    """One signal in the shared bytes at `offset` (8-byte aligned), as each device addresses it; its value starts at 0."""
    if offset % 8 or offset + SIGNAL_BYTES > self.base.size:
      raise ValueError(f"a signal at offset {offset} does not fit, aligned, in the {self.base.size}-byte shared buffer")
    return {dev: Signal(dev, buf.host_view[offset:offset + SIGNAL_BYTES], buf.va + offset, 0, name) for dev, buf in self.bufs.items()}

  def free(self) -> None:
    """Unmap the imports, then free the owner's buffer (after work that may still use it)."""
    for dev, buf in reversed(self.bufs.items()): buf.free()
    self.bufs = {}
