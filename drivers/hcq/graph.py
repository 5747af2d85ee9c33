"""Graph: record launches and copies once, on one device or several, and replay them with other buffers and values.

The first replay seals the steps. Each run of consecutive steps on one device queue (kernels on the device's compute
queue, copies on its copy queue) becomes one Sealed stream: wait for the device's timeline (and, when the run before
it is on another device, for that run), the steps, signal the timeline (and the next device's run). A replay patches
timeline values, copy addresses and kernel-argument addresses into those streams and submits each as it is: one copy
into a ring and one doorbell per run, so a graph of one device's kernels is one submission per replay.

A replay that changes a launch's buffers or values points the stream at other kernel-argument memory: one an earlier
replay used and the device is done with, else new memory from the device's arena. Replays still running keep reading
their own arguments, and a replay never waits for one.

Steps on several devices run in recording order; a run waits for the run before it on another device on the device
itself (its queue's wait-on-memory command), through a signal the graph owns in host memory both devices map
(HostShare). The first run of a replay waits in the same way for the last run of the replay before it, so replays in
flight never overlap on memory the devices share (bounce buffers). A copy between two devices goes through a shared
host bounce buffer: the source's copy queue writes it, the destination's reads it.
"""
from __future__ import annotations
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence
from drivers.hcq.buffer import Buffer
from drivers.hcq.hostshare import HostShare, SIGNAL_BYTES
if TYPE_CHECKING:
  from drivers.hcq.device import Device
  from drivers.hcq.program import Program, KernArgs
  from drivers.hcq.queue import Queue, Sealed
  from drivers.hcq.signal import Signal


@dataclass(eq=False)
class _Exec:
  prg: Program
  bufs: tuple[Buffer, ...]          # as recorded (the keys of `replace`)
  vals: tuple[int, ...]
  global_size: tuple[int, ...]
  local_size: tuple[int, ...]
  cur: tuple[tuple[Buffer, ...], tuple[int, ...]]   # what the next replay uses
  args: KernArgs                                     # the arguments the sealed stream points at
  held: tuple                                        # what they hold
  used: int = 0                                      # the timeline value of the last replay that read them
  spare: deque = field(default_factory=deque)        # (arguments, timeline value after which they are free)

  @property
  def device(self) -> Device: return self.prg.device


@dataclass(eq=False)
class _Copy:
  device: Device
  dest: Buffer
  src: Buffer
  size: int
  cur: tuple[Buffer, Buffer]
  held: tuple[Buffer, Buffer] | None = None          # what the sealed stream's addresses are


@dataclass(eq=False)
class _Run:
  device: Device
  kind: str                          # "compute" or "copy"
  steps: list[int]
  sealed: Sealed = field(init=False)   # set when the graph is sealed
  after: Signal | None = None        # written by the run before, on another device
  then: Signal | None = None         # written for the run after, on another device


def _swap(orig: Buffer, cur: Buffer, replace: dict[Buffer, Buffer]) -> Buffer:
  """What replaces a recorded buffer (or the base it is a view of); `cur` if nothing does."""
  if (new := replace.get(orig)) is not None: return new
  if orig.base is not None and (new := replace.get(orig.base)) is not None: return new.view(orig.offset, orig.size)
  return cur


class Graph:
  def __init__(self, device: Device | None = None):
    self.device = device
    self.steps: list[_Exec | _Copy] = []
    self.runs: list[_Run] | None = None
    self.replays = 0
    self._owned: list[HostShare] = []   # bounce buffers of copies between devices
    self._order: list[HostShare] = []   # the order signals of the sealed runs

  def exec(self, prg: Program, *bufs: Buffer, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: Sequence[int] = ()) -> int:
    """Record a launch; returns its step index (the key for replacing its values on replay)."""
    cur = (bufs, tuple(vals))
    return self._add(_Exec(prg, bufs, cur[1], global_size, local_size, cur, prg.fill_kernargs(bufs, vals, global_size, local_size), cur))

  def copy(self, dest: Buffer, src: Buffer, size: int | None = None) -> int:
    """Record a copy (between two devices too); returns its step index."""
    size = src.size if size is None else size
    a, b = src.device, dest.device
    if a is b: return self._add(_Copy(a, dest, src, size, (dest, src)))
    self._owned.append(bounce := HostShare(size, (a, b)))
    near, far = bounce[a], bounce[b]
    first = self._add(_Copy(a, near, src, size, (near, src)))
    self._add(_Copy(b, dest, far, size, (dest, far)))
    return first

  def _add(self, st: _Exec | _Copy) -> int:
    self.steps.append(st)
    self.runs = None   # seal again
    return len(self.steps) - 1

  @property
  def devices(self) -> list[Device]: return list({st.device: None for st in self.steps})

  # --- sealing
  def _seal(self) -> list[_Run]:
    runs = [_Run(dev, kind, [i for i, _ in grp]) for (dev, kind), grp in
            itertools.groupby(enumerate(self.steps), lambda e: (e[1].device, "copy" if isinstance(e[1], _Copy) else "compute"))]
    for share in self._order: share.free()   # after the replays that wait on them (freeing waits for their devices)
    self._order = []
    for prev, run in [*zip(runs, runs[1:]), *([(runs[-1], runs[0])] if len(runs) > 1 else [])]:
      if prev.device is not run.device:
        self._order.append(share := HostShare(SIGNAL_BYTES, (prev.device, run.device)))
        sig = share.signals(name="graph order")
        sig[prev.device].value = self.replays   # where the earlier replays left off (all done: see above)
        prev.then, run.after = sig[prev.device], sig[run.device]
    for run in runs:
      dev = run.device
      q: Queue = dev.copy_queue() if run.kind == "copy" else dev.compute_queue()
      q.wait(dev.timeline, 0, patch="timeline wait")
      if run.after is not None: q.wait(run.after, 0, patch="after")
      for i in run.steps:
        st = self.steps[i]
        if isinstance(st, _Exec): q.exec(st.prg, st.args, st.global_size, st.local_size, patch=i)
        else:
          q.copy(st.cur[0], st.cur[1], st.size, patch=i)
          st.held = st.cur
      q.signal(dev.timeline, 0, patch="timeline signal")
      if run.then is not None: q.signal(run.then, 0, patch="then")
      run.sealed = q.seal()
    self.runs = runs
    self._locks = [dev.submit_lock for dev in sorted(self.devices, key=id)]   # one order for every graph: no deadlock
    return runs

  # --- replay
  def __call__(self, replace: dict[Buffer, Buffer] | None = None, vals: dict[int, Sequence[int]] | None = None,
               wait: bool = False) -> None:
    """Replay. `replace` maps recorded buffers to the ones to use now (a recorded view follows its base); `vals` maps a
    step index to new values. Replacements last until a later replay changes them."""
    replace, vals = replace or {}, vals or {}
    runs = self.runs if self.runs is not None and not any(r.sealed.stale for r in self.runs) else self._seal()
    for lock in self._locks: lock.acquire()   # the devices' submit locks: also one replay of this graph at a time
    try:
      n, changed, done = self.replays + 1, set(), {}
      for i, st in enumerate(self.steps):
        if isinstance(st, _Exec):
          if replace or i in vals:
            st.cur = (tuple(_swap(o, c, replace) for o, c in zip(st.bufs, st.cur[0])), tuple(vals.get(i, st.cur[1])))
          if st.held != st.cur:   # other argument memory: replays still running read the old
            st.spare.append((st.args, st.used))
            if st.spare[0][1] <= st.device.timeline.value:
              args = st.spare.popleft()[0]
              args.update(*st.cur)
            else: args = st.prg.fill_kernargs(*st.cur, st.global_size, st.local_size)
            st.args, st.held = args, st.cur
            changed.add(i)
        else:
          if replace: st.cur = (_swap(st.dest, st.cur[0], replace), _swap(st.src, st.cur[1], replace))
          if st.held != st.cur and st.size: changed.add(i)
      for run in runs:
        sealed, dev = run.sealed, run.device
        sealed.patch("timeline wait", "value", dev.timeline_value - 1)
        sealed.patch("timeline signal", "value", v := dev.next_timeline())
        if run.after is not None: sealed.patch("after", "value", n - 1 if run is runs[0] else n)   # the first: replay n-1's last
        if run.then is not None: sealed.patch("then", "value", n)
        for i in run.steps:
          st = self.steps[i]
          if isinstance(st, _Exec):
            if i in changed: sealed.patch(i, "args", st.args.va)
            st.used = v
          elif i in changed:
            sealed.patch(i, "dest", st.cur[0].va)
            sealed.patch(i, "src", st.cur[1].va)
            st.held = st.cur
        sealed.submit()
        done[dev] = v
      self.replays = n
    finally:
      for lock in self._locks: lock.release()
    if wait:
      for dev, v in done.items(): dev.timeline.wait(v)

  def free(self) -> None:
    """Give back what the graph owns (bounce buffers, order signals); it cannot replay afterwards."""
    for b in self._order + self._owned: b.free()
    self._order, self._owned, self.steps, self.runs = [], [], [], None
