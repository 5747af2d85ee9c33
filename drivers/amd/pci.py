"""The PCI interface of AMDDevice: the AM userspace driver on a bare PCI function (PCI+AMD, MOCKPCI+AMD).

Memory: VRAM from the AM memory manager, host memory from the PCIDevice's DMA allocator, both mapped into
VMID 0 at a GPU VA. Queues: the MEC HQD and SDMA queue 0, rings in host memory. Faults: the IH ring.
"""
from __future__ import annotations
import os

import numpy as np

from drivers.system.pci import PCIDevice
from drivers.system.mmio import MemMMIO
from drivers.amd.iface import AMDIface, AMDMemory, QueueDesc
from drivers.amd import ip
from drivers.amd.am.core import AMCore
from drivers.amd.am.mm import PAGE

HUGE = 2 << 20


class PCIIface(AMDIface):
  host_flushes_hdp = True
  def __init__(self, pci: PCIDevice):
    self.pci = pci
    try: self.core = AMCore(pci, reset=bool(os.environ.get("HCQ_AM_RESET")))
    except BaseException:
      pci.close()
      raise
    self.ip_bases, self.ip_versions = self.core.bases, self.core.versions
    self.arch = ip.target(self.ip_versions["GC"])
    gi = self.core.ip.gc_info
    cus = gi.gc_num_se * gi.gc_num_sa_per_se * 2 * (gi.gc_num_wgp0_per_sa + gi.gc_num_wgp1_per_sa)
    self.props = {"simd_count": 2 * cus, "simd_per_cu": 2, "max_waves_per_simd": gi.gc_max_waves_per_simd,
                  "max_slots_scratch_cu": gi.gc_max_scratch_slots_per_cu, "lds_size_in_kb": gi.gc_lds_size,
                  "array_count": gi.gc_num_se * gi.gc_num_sa_per_se, "simd_arrays_per_engine": gi.gc_num_sa_per_se}

  # --- memory
  def alloc(self, size: int, host: bool = False, uncached: bool = False, cpu_access: bool = False) -> AMDMemory:
    c = self.core
    size = -(-max(size, 1) // PAGE) * PAGE
    align = HUGE if size >= HUGE else PAGE
    va = c.mm.va.alloc(size, align)
    try:
      if host or uncached:
        dma = self.pci.alloc_dma(size)
        c.gmc.map(va, np.array(dma.bus_addrs, np.uint64), system=True, uncached=uncached)
        return AMDMemory(va, size, MemMMIO(dma.view, "host memory"), ("host", dma), True)
      paddr = c.mm.palloc(size, align)
      c.gmc.map(va, paddr + np.arange(size // PAGE, dtype=np.uint64) * PAGE, system=False)
      view = MemMMIO(c.vram_bar.view[paddr:paddr + size], "VRAM") if cpu_access else None
      return AMDMemory(va, size, view, ("vram", paddr), False)
    except BaseException:
      c.mm.va.free(va)
      raise

  def import_host(self, view: memoryview) -> tuple[AMDMemory, int]:
    """Existing host memory mapped for the GPU's DMA (PCIDevice.map_dma), then at a GPU VA (system, uncached)."""
    c, dma = self.core, self.pci.map_dma(view)
    size = len(dma.bus_addrs) * PAGE
    try:
      va = c.mm.va.alloc(size, PAGE)
      try: c.gmc.map(va, np.array(dma.bus_addrs, np.uint64), system=True, uncached=True)
      except BaseException:
        c.mm.va.free(va)
        raise
    except BaseException:
      self.pci.free_dma(dma)
      raise
    return AMDMemory(va, size, MemMMIO(view, "host memory"), ("host", dma), True), dma.first

  def bus_pages(self, mem: AMDMemory) -> list[int]:
    """Where VRAM memory `mem` sits on the bus: BAR0 maps all of VRAM from address 0 (the large-BAR layout AMCore
    checks at start), so page i is at BAR0's bus address + its VRAM address."""
    kind, paddr = mem.handle
    if kind != "vram": raise ValueError(f"memory at GPU VA {mem.va:#x} is host memory, not VRAM behind BAR0")
    base = self.pci.bar_address(0) + paddr
    return [base + i * PAGE for i in range(mem.size // PAGE)]

  def import_peer(self, pages: list[int]) -> AMDMemory:
    """Another device's memory (or registers) at bus addresses `pages` (its BAR), mapped at a GPU VA as system pages,
    uncached: the GPU's accesses go out over PCIe to that BAR (peer to peer)."""
    c, size = self.core, len(pages) * PAGE
    va = c.mm.va.alloc(size, PAGE)
    try: c.gmc.map(va, np.array(pages, np.uint64), system=True, uncached=True)
    except BaseException:
      c.mm.va.free(va)
      raise
    return AMDMemory(va, size, None, ("peer", None), True)

  def free(self, mem: AMDMemory) -> None:
    c = self.core
    c.gmc.unmap(mem.va, mem.size // PAGE)
    c.mm.va.free(mem.va)
    kind, h = mem.handle
    if kind == "host": self.pci.free_dma(h)
    elif kind == "vram": c.mm.pfree(h)

  # --- queues
  def create_queue(self, kind: str, ring_size: int) -> QueueDesc:
    ring, ctl = self._queue_memory(kind, ring_size)
    rptr_va, wptr_va = ctl.va, ctl.va + 8
    block = {"compute": self.core.gfx, "sdma": self.core.sdma}[kind]
    # the engine polls its write pointer from the moment the queue is enabled: both pointers read 0 in memory first,
    # whatever it held (VRAM keeps an earlier process's queue), as amdgpu_ring.c amdgpu_ring_init zeroes them
    words = ctl.view.cast("Q")
    words[0] = words[1] = 0
    self.before_doorbell()
    doorbell = block.setup_ring(ring.va, ring_size, rptr_va, wptr_va)
    return QueueDesc(ring, words[0:1], words[1:2], self.core.doorbells, doorbell, (kind, ring, ctl))

  def _queue_memory(self, kind: str, ring_size: int) -> tuple[AMDMemory, AMDMemory]:
    """The ring and its control page (read pointer at +0, write pointer at +8): host memory."""
    return self.alloc(ring_size, uncached=True), self.alloc(PAGE, uncached=True)

  def destroy_queue(self, q: QueueDesc) -> None:
    kind, ring, ctl = q.handle
    if kind == "compute": self.core.gfx.dequeue()
    else: self.core.sdma.stop_queue()
    self.free(ring)
    self.free(ctl)

  def before_doorbell(self) -> None: self.core.hdp_flush()

  # --- faults
  def poll_faults(self) -> str | None:
    """Walk the IH ring for fault entries (completion interrupts are not faults); -> a description or None."""
    faults = list(dict.fromkeys(self.core.ih.faults()))   # in order, without repeats
    if not faults: return None
    self.core.is_err_state = True
    status = self.core.gfxhub.fault()
    return "; ".join(faults) + (f" (GCVM_L2_PROTECTION_FAULT_STATUS {status[0]:#x}: {self.core.gfxhub.fault_kind(status[0])})" if status else "")

  def close(self) -> None:
    try: self.core.fini()
    finally: self.pci.close()
