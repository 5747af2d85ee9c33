"""Buffer: a piece of device memory (or host-visible memory) at a device virtual address."""
from __future__ import annotations
from typing import TYPE_CHECKING, Any
if TYPE_CHECKING: from drivers.hcq.device import Device


class Buffer:
  """`va` is the address kernels and queues use; `host_view` is set when the CPU can access it directly."""
  def __init__(self, device: Device, size: int, va: int, host_view: memoryview | None, opaque: Any = None,
               host: bool = False, base: Buffer | None = None, offset: int = 0):
    self.device, self.size, self.va, self.host_view, self.opaque = device, size, va, host_view, opaque
    self.host, self.base, self.offset = host, base, offset
    self.freed = False
    self.holders: list[Any] = []   # what else reaches this memory (an RDMA MR over it): free refuses while one does

  def view(self, offset: int, size: int) -> Buffer:
    """A sub-buffer sharing this buffer's memory (freed with it)."""
    if offset < 0 or size < 0 or offset + size > self.size:
      raise ValueError(f"view [{offset}, +{size}) is outside the {self.size}-byte buffer")
    hv = self.host_view[offset:offset + size] if self.host_view is not None else None
    return Buffer(self.device, size, self.va + offset, hv, self.opaque, self.host, self.base or self, (self.offset + offset))

  def bus_pages(self) -> tuple[list[int], int, int]:
    """Where this device memory sits on the PCI bus, for another device's DMA (peer to peer, through the device's
    BAR) -> (the bus address of each page that holds it, the page size, where it starts in the first page)."""
    self._live()
    if self.host: raise ValueError(f"{self!r} is host memory: map its host_view for the other device's DMA instead")
    pages, page = self.device._bus_pages((self.base or self).opaque)
    skip, first = divmod(self.offset, page)
    return pages[skip:-(-(self.offset + self.size) // page)], page, first

  def _live(self) -> None:
    if self.freed or (self.base is not None and self.base.freed):
      raise RuntimeError(f"use of a freed {self.size}-byte buffer on {self.device.name}")

  def copyin(self, data: bytes | bytearray | memoryview) -> Buffer:
    """Copy host bytes into the start of the buffer (blocks until done)."""
    self._live()
    mv = memoryview(data).cast("B")
    if mv.nbytes > self.size: raise ValueError(f"copyin of {mv.nbytes} bytes into a {self.size}-byte buffer")
    if mv.nbytes: self.device._copyin(self, mv)
    return self

  def copyout(self, dest: memoryview | bytearray | None = None) -> memoryview:
    """Copy the buffer to host memory (a new bytearray, or `dest`) after all queued work is done."""
    self._live()
    out = memoryview(dest if dest is not None else bytearray(self.size)).cast("B")
    if out.nbytes < self.size: raise ValueError(f"copyout of a {self.size}-byte buffer into {out.nbytes} bytes")
    if self.size: self.device._copyout(out[:self.size], self)
    return out

  def transfer(self, dest: Buffer) -> Buffer:
    """Copy this buffer's contents into `dest` (same or another device); returns `dest`."""
    self._live(); dest._live()
    if dest.size < self.size: raise ValueError(f"transfer of {self.size} bytes into a {dest.size}-byte buffer")
    if self.size == 0: return dest
    if dest.device is self.device: self.device._copy_sync(dest, self)
    else: dest.device._transfer(dest, self)
    return dest

  def free(self) -> None:
    if self.base is not None: raise ValueError("free the base buffer, not a view of it")
    if self.holders: raise RuntimeError(f"{self!r} is registered as {self.holders[0]!r}: deregister that first")
    if not self.freed: self.device._free_buffer(self)
    self.freed = True

  def __repr__(self) -> str: return f"<Buffer {self.size} B at {self.va:#x} on {self.device.name}>"
