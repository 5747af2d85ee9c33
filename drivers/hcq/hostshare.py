"""HostShare: host memory several devices reach, without a host round trip between them.

Page-aligned host memory is imported into each device (Device.import_host: an IOMMU map, a pin, a kernel driver's
user-pointer buffer object; a device that addresses host memory directly, Device.host_addressed, takes the host
address), so the same bytes lie at each device's own address. What crosses between devices this way: the bounce buffer
of a copy (one device's copy queue writes it, the other's reads it) and signals one device's queue writes and another's
queue waits on by itself (a wait-on-memory command).
"""
from __future__ import annotations
import mmap, threading
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
    view = memoryview(self.memory)[offset:offset + SIGNAL_BYTES]   # the bytes every device's buffer maps
    return {dev: Signal(dev, view, buf.va + offset, 0, name) for dev, buf in self.bufs.items()}

  def free(self) -> None:
    """Unmap the memory from every device (after work that may still use it); the memory goes with the last reference."""
    for buf in self.bufs.values(): buf.free()
    self.bufs = {}


class PeerLink:
  """How one device's transfers from another go device to device: the source's copy queue writes shared host memory,
  then a signal there; the destination's copy queue waits for that signal by itself and copies out. The memory is kept
  between transfers (grown to the next power of two, up to KEEP_MAX)."""
  KEEP_MIN, KEEP_MAX = 64 << 10, 64 << 20
  DATA = 64   # the signal first, the data after it (cache-line aligned)

  def __init__(self, src: Device, dest: Device):
    self.src, self.dest = src, dest
    self.lock = threading.Lock()   # one transfer at a time: each is read out before the memory is written again
    self.share: HostShare | None = None

  def transfer(self, dest: Buffer, src: Buffer) -> None:
    """Copy `src` (on self.src) into `dest` (on self.dest); blocks until done."""
    size, a, b = src.size, self.src, self.dest
    with self.lock:
      if size > self.KEEP_MAX: share = HostShare(self.DATA + size, (a, b))   # too big to keep: for this transfer only
      else:
        if self.share is None or self.share.size < self.DATA + size:
          self.close()
          self.share = HostShare(self.DATA + max(self.KEEP_MIN, 1 << (size - 1).bit_length()), (a, b))
        share = self.share
      sig = share.signals(0, "transfer")   # at 0 again: the transfer before is done
      try:
        a.ordered_submit(a.copy_queue(), lambda q: q.copy(share[a], src, size, dest_offset=self.DATA).signal(sig[a], 1))
        b.timeline.wait(b.ordered_submit(b.copy_queue(), lambda q: q.wait(sig[b], 1).copy(dest, share[b], size, src_offset=self.DATA)))
      finally:
        if share is not self.share: share.free()

  def close(self) -> None:
    """Unmap the kept memory from both devices."""
    if self.share is not None: self.share.free()
    self.share = None
