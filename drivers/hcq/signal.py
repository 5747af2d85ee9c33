"""Signal: a 64-bit value and a 64-bit timestamp in memory the device writes, the host polls."""
from __future__ import annotations
from typing import TYPE_CHECKING
from drivers.hcq.patience import Patience
if TYPE_CHECKING: from drivers.hcq.device import Device


class SignalTimeout(TimeoutError):
  """A signal did not reach its value in time; the message names device, queue, expected and last value."""


class Signal:
  """`mem` is 16 bytes: value (u64) at 0, timestamp (u64, device ticks) at 8. `va` is its device address."""
  def __init__(self, device: Device, mem: memoryview, va: int, value: int = 0, name: str = "signal"):
    self.device, self.va, self.name = device, va, name
    self._mem = mem.cast("B").cast("Q")
    self.last_queue = "host"   # which queue was last asked to write it (for error messages)
    self._mem[0] = value       # (the device sees it with the commands that use it: they are published after it)

  @property
  def value(self) -> int: return self._mem[0]

  @value.setter
  def value(self, v: int) -> None:
    """Set by the host: it reaches the device at once (a queue may be waiting for it)."""
    self._mem[0] = v
    self.device._host_wrote()

  @property
  def timestamp_va(self) -> int: return self.va + 8

  @property
  def timestamp(self) -> float:
    """Time of the last timestamp/signal write, in microseconds of the device clock."""
    return self.device.ticks_to_us(self._mem[1])

  def wait(self, value: int, timeout_ms: float | None = None, stall_ms: float | None = None) -> None:
    """Block until value >= `value`. Without `timeout_ms`, give up only when neither this signal nor the device
    (Device.progress) moved for `stall_ms` (default patience.STALL_MS); with it, after that long in all.
    Device faults found while waiting are raised."""
    wait = None
    while self._mem[0] < value:
      self.device.check_faults()
      if wait is None: wait = Patience(lambda: (self._mem[0], self.device.progress()), timeout_ms, stall_ms)
      elif wait.expired():
        raise SignalTimeout(f"{self.device.name}: {self.name} written by the {self.last_queue} queue did not reach {value} "
                            f"{wait.what} (last seen {self._mem[0]}); a wait in that queue may never be satisfied, "
                            "or the device hung")
      wait.nap()
    self.device.check_faults()

  def __repr__(self) -> str: return f"<Signal {self.name} on {self.device.name} value={self.value}>"
