"""Device faults: the error raised for them, and the rate limit on asking a vendor's fault source.

Waits call Device.check_faults in their polling loop; asking the source (an ioctl, a walk of an interrupt
ring) on every iteration would cost more than the wait itself, so it is asked at most every `interval_s`.
"""
from __future__ import annotations
import time
from typing import Callable

FAULT_POLL_S = 0.01


class DeviceFault(RuntimeError):
  """The device reported an error (page fault, bad packet, failed kernel); raised on the next wait/submit."""


class FaultPoll:
  def __init__(self, poll: Callable[[], str | None], interval_s: float = FAULT_POLL_S):
    """`poll()`: one non-blocking look for a fault the device reported -> its description, or None."""
    self._poll, self.interval_s, self._last = poll, interval_s, float("-inf")

  def __call__(self) -> str | None:
    """The source's answer, or None without asking when it was asked less than `interval_s` ago."""
    if (now := time.monotonic()) - self._last < self.interval_s: return None
    self._last = now
    return self._poll()
