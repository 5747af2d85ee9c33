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
