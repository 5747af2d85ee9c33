"""Graph: record a sequence of launches and copies once, replay it with other buffers and values.

Kernel arguments are prepared once per step and patched in place on replay (only the steps whose
buffers or values changed), so a replay costs one queue submission per run of launches (or of copies)
instead of per-launch setup."""
from __future__ import annotations
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence
if TYPE_CHECKING:
  from drivers.hcq.device import Device
  from drivers.hcq.buffer import Buffer
  from drivers.hcq.program import Program, KernArgs
  from drivers.hcq.queue import Queue


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


def _enqueue(q: Queue, steps: list[_Exec | _Copy]) -> None:
  for st in steps:
    if isinstance(st, _Copy): q.copy(st.dest, st.src, st.size)
    else: q.exec(st.prg, st.args, st.global_size, st.local_size)


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
    # runs of launches go to the compute queue, runs of copies to the copy queue, one ordered submission each
    runs = [(is_copy, list(sts)) for is_copy, sts in itertools.groupby(self.steps, lambda st: isinstance(st, _Copy))]
    with dev.submit_lock:   # the whole replay takes consecutive timeline values
      for is_copy, sts in runs or [(False, [])]:
        done = dev.ordered_submit(dev.copy_queue() if is_copy else dev.compute_queue(), lambda q, sts=sts: _enqueue(q, sts))
    self._done = done
    if wait: dev.timeline.wait(done)
