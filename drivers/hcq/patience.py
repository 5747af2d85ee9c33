"""How long a host wait on the device lasts: a timeout means no progress for that long, not total time.

A healthy but slow workload (thousands of queued kernels) keeps moving: its timeline grows, its rings' read pointers
advance. Only a wait that sees nothing move for STALL_MS gives up, so a queue of any length finishes while a hung one
is still reported. A wait given an explicit `timeout_ms` keeps an absolute deadline instead.
"""
from __future__ import annotations
import time
from typing import Callable

STALL_MS = 30_000       # a wait without an explicit timeout gives up after this long without progress
NAP_MAX_S = 1e-4        # a polling wait sleeps at most this long between looks (a kernel of a few ms is not padded)


class Patience:
  """The deadline of one polling wait. `progress()` returns anything that changes whenever the device moves forward
  (a signal value, read pointers); with `timeout_ms` the deadline is absolute, else it is renewed at every change.
  progress() is called at every look in both cases: it is also what brings the host's copy of device-written memory up
  to date where the host sees only a copy (Device.progress), so the waiter's next look sees what the device did."""
  def __init__(self, progress: Callable[[], object], timeout_ms: float | None = None, stall_ms: float | None = None,
               nap_max_s: float = NAP_MAX_S):
    self.absolute = timeout_ms is not None
    self.ms = timeout_ms if timeout_ms is not None else stall_ms if stall_ms is not None else STALL_MS
    self._progress, self._nap, self._nap_max = progress, 0.0, nap_max_s
    self._seen = progress()
    self._deadline = time.monotonic() + self.ms / 1000

  def expired(self) -> bool:
    """True once the deadline passed; without an explicit timeout, any progress since the last look renews it."""
    now = time.monotonic()
    if (p := self._progress()) != self._seen and not self.absolute: self._deadline = now + self.ms / 1000
    self._seen = p
    return now > self._deadline

  def nap(self) -> None:
    """Sleep before the next look: microseconds at first (waits usually end soon), growing to `nap_max_s`."""
    time.sleep(self._nap)
    self._nap = min(self._nap * 2 + 1e-6, self._nap_max)

  @property
  def what(self) -> str:
    """How the wait ended, for error messages."""
    return f"within {self.ms:g} ms" if self.absolute else f"with no progress for {self.ms:g} ms"
