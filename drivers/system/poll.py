"""Waiting for a device: poll a condition on memory or registers the device writes, with a no-progress timeout."""
from __future__ import annotations
import time
from typing import Callable

WAIT_POLL_S = 10e-6       # between looks at memory the device writes (the device, or its model, runs meanwhile)


def wait_until(cond: Callable[[], bool], timeout_s: float, what: Callable[[], str]) -> None:
  """Poll `cond` until true; TimeoutError with `what()` after `timeout_s` of nothing."""
  if cond(): return
  deadline = time.monotonic() + timeout_s
  while not cond():
    if time.monotonic() > deadline: raise TimeoutError(what())
    time.sleep(WAIT_POLL_S)
