"""The GPU caches the driver must manage (gfx11 GCR: ACQUIRE_MEM's GCR_CNTL, RELEASE_MEM's GCR bits), as the shader
core sees memory through them. Two are modelled as stale until invalidated, at the cost of a page copy per miss:
- K$ (GLK, the scalar data cache): the first scalar load (SMEM) from a 4 KiB page after an invalidate copies the page;
  later scalar loads read the copy, so memory the host (or a kernel) wrote since then is not seen until GLK_INV.
  At most KCACHE_PAGES pages are held; the oldest is dropped first (a later load fetches it again).
- I$ (GLI): a kernel's code is read when it is first dispatched; it is read again (and recompiled if it changed) only
  after GLI_INV, so code rewritten in place runs stale until then.
Not modelled (every access sees memory): GLV/GL1 (vector L0/L1), GLM (metadata) and GL2. GL2_WB/INV and the others are
checked for a valid combination by the packets (pm4.py) and counted here (`actions`), without effect on data.
"""
from __future__ import annotations
import ctypes, threading

from emu.amdgpu.mmu import MMU

PAGE = 4096
KCACHE_PAGES = 64              # what the model's K$ holds (4 KiB pages) before it drops the oldest


class ShaderMemory:
  """Memory as the waves see it (the emu.amdgcn GpuMemory interface): vector accesses through the MMU, scalar loads
  through the K$, code through the I$ (`icache_epoch`: programs compiled before the last GLI_INV are not re-read)."""
  def __init__(self, mmu: MMU):
    self.mmu = mmu
    self.kcache: dict[int, ctypes.Array] = {}
    self.lock = threading.Lock()          # queues invalidate while another queue's dispatch fills the K$
    self.retired: list[ctypes.Array] = []  # lines dropped while a dispatch may still read them: freed at the next one
    self.icache_epoch = 0
    self.actions: dict[str, int] = {}     # cache actions performed, as "PACKET GCR_NAME" (tests read them)

  def begin_dispatch(self) -> None:
    """A dispatch starts (the one before it has ended): the lines dropped meanwhile are no longer read."""
    with self.lock: self.retired.clear()

  def lookup(self, addr: int, write: bool) -> tuple[int, int, int] | None: return self.mmu.lookup(addr, write)

  def fetch(self, addr: int) -> tuple[int, int, int] | None: return self.mmu.fetch(addr)   # checks EXECUTABLE

  def lookup_scalar(self, addr: int) -> tuple[int, int, int] | None:
    page = addr & ~(PAGE - 1)
    line = self.kcache.get(page)
    if line is None:
      run = self.mmu.translate(addr, False, "shader")
      if run is None: return None
      start, _, host = run
      line = ctypes.create_string_buffer(PAGE)
      ctypes.memmove(line, host + (page - start), PAGE)
      with self.lock:
        if len(self.kcache) >= KCACHE_PAGES: self.retired.append(self.kcache.pop(next(iter(self.kcache))))
        self.kcache[page] = line
    return page, PAGE, ctypes.addressof(line)

  def perform(self, packet: str, actions: list[str]) -> None:
    """Carry out the GCR cache actions `packet` asks for (names as in nvd.h: GLI_INV, GLK_INV, GL2_WB, ...)."""
    for a in actions:
      key = f"{packet} {a}"
      self.actions[key] = self.actions.get(key, 0) + 1
      if a == "GLK_INV":
        with self.lock:
          self.retired += self.kcache.values()
          self.kcache.clear()
      elif a == "GLI_INV": self.icache_epoch += 1
