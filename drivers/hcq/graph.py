"""Graph: record a sequence of launches and copies once, replay it with other buffers and values.

Kernel arguments are prepared once per step and patched in place on replay (only the steps whose
buffers or values changed), so a replay costs one queue submission instead of per-launch setup."""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence
if TYPE_CHECKING:
  from drivers.hcq.device import Device
  from drivers.hcq.buffer import Buffer
  from drivers.hcq.program import Program, KernArgs


@dataclass
class _Exec:
  prg: Program
  bufs: tuple[Buffer, ...]
  vals: tuple[int, ...]
  global_size: tuple[int, ...]
  local_size: tuple[int, ...]
  args: KernArgs


@dataclass
class _Copy:
  dest: Buffer
  src: Buffer
  size: int


class Graph:
  def __init__(self, device: Device):
    self.device, self.steps, self._done = device, [], 0

  def exec(self, prg: Program, *bufs: Buffer, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: Sequence[int] = ()) -> int:
    """Record a launch; returns its step index (the key for replacing its values on replay)."""
    self.steps.append(_Exec(prg, bufs, tuple(vals), global_size, local_size,
                            prg.fill_kernargs(bufs, vals, global_size, local_size)))
    return len(self.steps) - 1

  def copy(self, dest: Buffer, src: Buffer, size: int | None = None) -> int:
    self.steps.append(_Copy(dest, src, src.size if size is None else size))
    return len(self.steps) - 1

  def __call__(self, replace: dict[Buffer, Buffer] | None = None, vals: dict[int, Sequence[int]] | None = None,
               wait: bool = False) -> None:
    """Replay. `replace` maps recorded buffers to the ones to use now; `vals` maps a step index to new values.
    Replacements last until the next replay changes them."""
    dev, replace, vals = self.device, replace or {}, vals or {}
    for i, st in enumerate(self.steps):
      if isinstance(st, _Exec):
        nb, nv = tuple(replace.get(b, b) for b in st.bufs), tuple(vals.get(i, st.vals))
        if (nb, nv) != (st.bufs, st.vals):
          dev.timeline.wait(self._done)      # the previous replay may still read these arguments
          st.args.update(nb, nv)
          st.bufs, st.vals = nb, nv
      else: st.dest, st.src = replace.get(st.dest, st.dest), replace.get(st.src, st.src)
    with dev.submit_lock:
      cq = dev.compute_queue().wait(dev.timeline, dev.timeline_value - 1)
      for st in self.steps:
        if isinstance(st, _Exec): cq.exec(st.prg, st.args, st.global_size, st.local_size)
        else:
          # copies run on the copy queue, ordered with the kernels around them through the timeline
          cq.signal(dev.timeline, v := dev.next_timeline()).submit()
          dev.copy_queue().wait(dev.timeline, v).copy(st.dest, st.src, st.size).signal(dev.timeline, v2 := dev.next_timeline()).submit()
          cq = dev.compute_queue().wait(dev.timeline, v2)
      cq.signal(dev.timeline, done := dev.next_timeline()).submit()
    self._done = done
    if wait: dev.timeline.wait(done)
