"""The GPU model's queue engines (the MEC's HQD, an SDMA queue) on the shared ring engine (emu/ring.py): each fetches
through the GC hub's MMU as its own client (its name is what a fault latches), reports a stopped queue to the GPU
model (which raises the device's interrupts), and adds its busy time to the GPU's activity counters (the SMU's).
"""
from __future__ import annotations
from typing import TYPE_CHECKING

from emu.ring import RingEngine, RingError
from emu.amdgpu.mmu import GPUPageFault
if TYPE_CHECKING: from emu.amdgpu.gpu import GPUModel


class KernelError(RingError):
  """A shader wave faulted or trapped during a dispatch; its queue stops."""
  kind = "shader"


class GPUEngine(RingEngine):
  kind = "gfx"              # which activity counter of the GPU its busy time adds to (the SMU reports them)

  def __init__(self, gpu: GPUModel, name: str, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int):
    super().__init__(name, gpu.mmu.client(name), ring_va, ring_size, rptr_va, wptr_va)
    self.gpu = gpu

  def describe(self, e: Exception) -> tuple[str, int | None, str]:
    if isinstance(e, GPUPageFault): return str(e), e.fault.va, "fault"
    return super().describe(e)

  def report(self, message: str, address: int | None, kind: str) -> None:
    self.gpu.report_fault(self.qname, message, address, kind)

  def account(self, ns: int) -> None:
    self.gpu.busy_ns[self.kind] += ns
