"""Staging: copies between host memory and device memory the CPU cannot reach, through host-visible staging
buffers the device's copy queue reads and writes.

Each chunk is one ordered submission on the copy queue (after all earlier work on the device). `count`
buffers are used in turn, so the host fills (copy-in) or drains (copy-out) one buffer while the device
copies another; the host waits once per chunk, only for the chunk it needs next.
"""
from __future__ import annotations
import threading
from collections import deque
from typing import TYPE_CHECKING
if TYPE_CHECKING:
  from drivers.hcq.device import Device
  from drivers.hcq.queue import Queue

STAGING_SIZE, STAGING_COUNT = 2 << 20, 4


class Staging:
  def __init__(self, device: Device, size: int = STAGING_SIZE, count: int = STAGING_COUNT):
    self.device, self.size = device, size
    self.bufs = [device.alloc(size, host=True) for _ in range(count)]
    self.views = [v for b in self.bufs if (v := b.host_view) is not None]
    assert len(self.views) == count   # host memory is host-visible
    self.lock = threading.Lock()  # one staged copy at a time: the buffers are shared

  def _copy(self, dest_va: int, src_va: int, size: int, what: str) -> int:
    def work(q: Queue) -> None:
      with q._profiled(f"{what} {size} B"): q._copy(dest_va, src_va, size)
    return self.device.ordered_submit(self.device.copy_queue(), work)

  def copyin(self, va: int, data: memoryview) -> None:
    """Copy host bytes to device address `va`; returns when the device has them."""
    dev, ready, last = self.device, [0] * len(self.bufs), 0   # ready: when the device is done reading each buffer
    with self.lock:
      for i, off in enumerate(range(0, data.nbytes, self.size)):
        k, b = min(self.size, data.nbytes - off), i % len(self.bufs)
        dev.timeline.wait(ready[b])
        self.views[b][:k] = data[off:off + k]
        ready[b] = last = self._copy(va + off, self.bufs[b].va, k, "copyin")
      dev.timeline.wait(last)

  def copyout(self, dest: memoryview, va: int) -> None:
    """Copy dest.nbytes bytes from device address `va` (after all earlier work on the device) into `dest`."""
    dev, inflight = self.device, deque[tuple[int, int, int, int]]()
    def drain() -> None:
      v, b, off, k = inflight.popleft()
      dev.timeline.wait(v)
      dest[off:off + k] = self.views[b][:k]
    with self.lock:
      for i, off in enumerate(range(0, dest.nbytes, self.size)):
        if len(inflight) == len(self.bufs): drain()
        k, b = min(self.size, dest.nbytes - off), i % len(self.bufs)
        inflight.append((self._copy(self.bufs[b].va, va + off, k, "copyout"), b, off, k))
      while inflight: drain()
