"""Program: a loaded kernel binary, its kernel-argument layout, and the one-call launch path."""
from __future__ import annotations
import struct, weakref
from typing import TYPE_CHECKING, Callable, Sequence
if TYPE_CHECKING:
  from drivers.hcq.device import Device
  from drivers.hcq.buffer import Buffer
  from drivers.hcq.queue import Queue


class KernArgs:
  """Kernel arguments in memory the device reads: buffer addresses (u64 each), then values (i32 each).
  Vendors may place more after them (AMD's hidden arguments) by overriding Program.fill_kernargs.
  `release` gives the memory back (to the device's KernargArena) once this object is gone."""
  def __init__(self, view: memoryview, va: int, n_bufs: int, n_vals: int, release: Callable[[], None] | None = None):
    self.view, self.va, self.n_bufs, self.n_vals = view, va, n_bufs, n_vals
    if release is not None: weakref.finalize(self, release)

  def update(self, bufs: Sequence[Buffer], vals: Sequence[int]) -> None:
    if len(bufs) != self.n_bufs or len(vals) != self.n_vals:
      raise ValueError(f"kernel takes {self.n_bufs} buffers and {self.n_vals} values, got {len(bufs)} and {len(vals)}")
    struct.pack_into(f"<{self.n_bufs}Q{self.n_vals}i", self.view, 0, *(b.va for b in bufs), *vals)


class Program:
  """`lib` is the device's binary format (a shared object for CPU, an HSA code object for AMD, a cubin for NV)."""
  def __init__(self, device: Device, name: str, lib: bytes):
    self.device, self.name, self.lib = device, name, lib

  def check_buffers(self, bufs: Sequence[Buffer]) -> None:
    for b in bufs:
      if b.device is not self.device: raise ValueError(f"kernel {self.name} on {self.device.name} got a buffer on {b.device.name}")

  def args_size(self, n_bufs: int, n_vals: int) -> int: return 8 * n_bufs + 4 * n_vals

  def fill_kernargs(self, bufs: Sequence[Buffer], vals: Sequence[int] = (), global_size=(1, 1, 1), local_size=(1, 1, 1)) -> KernArgs:
    """Allocate argument memory for one launch and fill it."""
    self.check_buffers(bufs)
    view, va, release = self.device.kernargs.alloc(self.args_size(len(bufs), len(vals)))
    args = KernArgs(view, va, len(bufs), len(vals), release)
    args.update(bufs, vals)
    return args

  def __call__(self, *bufs: Buffer, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: Sequence[int] = (),
               wait: bool = False) -> float | None:
    """Launch after all earlier work on the device; with wait=True block and return the kernel time in seconds."""
    dev = self.device
    args = self.fill_kernargs(bufs, vals, global_size, local_size)
    if wait: st, en = dev.new_signal(name="launch begin"), dev.new_signal(name="launch end")
    def work(q: Queue) -> None:
      if wait: q.timestamp(st)
      q.exec(self, args, global_size, local_size)
      if wait: q.timestamp(en)
    value = dev.ordered_submit(dev.compute_queue(), work)
    if not wait: return None
    dev.timeline.wait(value)
    return (en.timestamp - st.timestamp) / 1e6
