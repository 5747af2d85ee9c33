"""What AMDDevice needs from an interface (KFD, or the AM driver on a PCI function), and what it gets back.

An interface provides: `arch`, `props` (KFD-style topology numbers), `ip_bases`/`ip_versions`,
`alloc(size, host=, uncached=, cpu_access=) -> AMDMemory`, `import_host(view) -> (AMDMemory, offset of view[0] in
it)` (existing host memory mapped for the GPU, uncached: what other devices write must be seen), `free(mem)`, `create_queue(kind, ring_size) ->
QueueDesc`
("compute": the MEC PM4 queue, "sdma": SDMA queue 0), `destroy_queue(q)`, `poll_faults() -> str | None` (one
non-blocking look for a page fault or hang the GPU reported), `close()`, and optionally `before_doorbell()` (a
host-side HDP flush, so host writes to VRAM are visible to the work the doorbell starts; without it, AMDDevice has
each compute submission flush the HDP from the GPU side), and optionally `bus_pages(mem) -> list[int]` (the bus
address of each page of VRAM memory `mem` through the GPU's BAR, where a peer's DMA reaches it) and
`import_peer(pages) -> AMDMemory` (another device's memory, or registers such as a NIC's doorbell page, at those bus
addresses, mapped for this GPU's engines).
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from drivers.system.mmio import MMIO

PAGE = 4096


@dataclass
class AMDMemory:
  """One allocation: GPU `va`, and `mmio` when the CPU can reach it (host, GTT or host-visible VRAM)."""
  va: int
  size: int
  mmio: MMIO | None
  handle: object
  host: bool

  @property
  def view(self) -> memoryview | None: return self.mmio.view if self.mmio is not None else None


@dataclass
class QueueDesc:
  """What the driver needs to feed a hardware queue."""
  ring: AMDMemory
  rptr: memoryview          # u64 the engine writes back (units: dwords for PM4, bytes for SDMA)
  wptr: memoryview          # u64 the engine polls
  doorbell: MMIO
  doorbell_offset: int
  handle: object


class AMDIface:
  """What AMDDevice needs from an interface, every member declared here with what an interface without that feature
  gives (the module docstring says what each does): KFDIface (drivers/amd/kfd.py), PCIIface (drivers/amd/pci.py) and
  USBIface (drivers/amd/usb.py) override what they have."""
  arch: str
  props: Mapping[str, int]
  ip_bases: Mapping[str, Any]
  ip_versions: Mapping[str, Any]
  host_flushes_hdp = False                       # before_doorbell flushes the HDP from the host (else each compute
                                                 # submission flushes it from the GPU side)
  ring_sizes: Mapping[str, int] = {}             # bytes of a queue kind's ring where the device's default does not fit
  kernarg_chunk: int | None = None               # bytes of each kernel-argument chunk (None: the device's default)
  signal_page = PAGE                             # bytes of each chunk of signal memory
  staging: Callable[[Any], Any] | None = None    # (device) -> how host copies go (None: drivers.hcq Staging)

  def alloc(self, size: int, host: bool = False, uncached: bool = False, cpu_access: bool = False) -> AMDMemory:
    raise NotImplementedError
  def import_host(self, view: memoryview) -> tuple[AMDMemory, int]: raise NotImplementedError
  def free(self, mem: AMDMemory) -> None: raise NotImplementedError
  def create_queue(self, kind: str, ring_size: int) -> QueueDesc: raise NotImplementedError
  def destroy_queue(self, q: QueueDesc) -> None: raise NotImplementedError
  def poll_faults(self) -> str | None: raise NotImplementedError
  def close(self) -> None: raise NotImplementedError

  def before_doorbell(self) -> None:
    """What the host wrote is visible to the work the next doorbell starts (host_flushes_hdp interfaces)."""
  def refresh(self) -> None:
    """Bring the host's copy of memory the GPU writes up to date (an interface that maps none of it)."""
  def publish(self) -> None:
    """Make what the host just wrote (a signal) reach the GPU now (an interface that maps none of its memory)."""

  def bus_pages(self, mem: AMDMemory) -> list[int]:
    raise NotImplementedError(f"its {type(self).__name__} cannot give peers the bus address of VRAM (the kernel driver "
                              "would export it as a dma-buf); open the GPU through PCI (PCI+AMD, MOCKPCI+AMD)")

  def import_peer(self, pages: list[int]) -> AMDMemory:
    raise NotImplementedError(f"its {type(self).__name__} cannot map another device's BAR")
