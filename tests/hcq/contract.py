"""The queue-API contract: what every device string promises through README-level calls, with no per-device exceptions.

tests/hcq/test_contract.py runs every check in CHECKS on every device string the registry knows (device_strings(): each
registered vendor's emulated strings), so a device joins by registering. A check takes an open Device, leaves it usable
(gates it holds queues on are released however it ends) and frees what it allocated. Hardware tests call them too."""
from __future__ import annotations
from typing import Callable
import numpy as np
import pytest
from drivers.hcq import Device, Signal, SignalTimeout, open_device
from drivers.hcq.devspec import openable_vendors

WAIT_MS = 60_000      # the limit of the wait the signal check makes with an explicit timeout (others: no progress)
BLOCKED_MS = 200      # how long a queue held by a wait must stay held for a check to see it
RELEASED = (1 << 32) - 1   # what _Gates sets: above every value the checks wait for, in one dword (waits that compare one)


def device_strings() -> list[str]:
  """Every registered vendor's emulated device strings (drivers/system/registry.py Vendor.emulated_devices)."""
  return [s for v in openable_vendors() for s in v.emulated_devices]


def _bytes(n: int, seed: int) -> np.ndarray: return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def _put(dev: Device, data: np.ndarray):
  buf = dev.alloc(data.nbytes)
  buf.copyin(data.data)
  return buf


def _got(buf) -> np.ndarray: return np.frombuffer(buf.copyout(), np.uint8)


def _held(sig: Signal, value: int) -> None:
  """`sig` stays below `value` for BLOCKED_MS: the queue that would write it is held by its wait."""
  with pytest.raises(SignalTimeout): sig.wait(value, timeout_ms=BLOCKED_MS)


class _Gates:
  """Signals queues wait on, set by the host at exit whatever happened, so no queue stays held after a check."""
  def __init__(self, dev: Device, *names: str): self.sigs = [dev.new_signal(0, name) for name in names]
  def __enter__(self) -> list[Signal]: return self.sigs
  def __exit__(self, *exc) -> None:
    for s in self.sigs: s.value = max(s.value, RELEASED)


def check_copy(dev: Device, size: int, dest_offset: int = 0, src_offset: int = 0) -> None:
  """copy_queue().copy of `size` bytes between offsets: exactly those bytes land, their neighbours on both sides keep theirs."""
  src_data, dst_data = _bytes(src_offset + size + 3, size + src_offset), _bytes(dest_offset + size + 5, size + 1)
  src, dst = _put(dev, src_data), _put(dev, dst_data)
  done = dev.new_signal(0)
  dev.copy_queue().copy(dst, src, size, dest_offset=dest_offset, src_offset=src_offset).signal(done, 1).submit()
  done.wait(1)
  want = dst_data.copy()
  want[dest_offset:dest_offset + size] = src_data[src_offset:src_offset + size]
  np.testing.assert_array_equal(_got(dst), want)
  for b in (src, dst): b.free()


def check_bounds(dev: Device) -> None:
  """Copies, views, copyin and transfers beyond a buffer are ValueErrors, raised before anything is submitted."""
  a, b = dev.alloc(16), dev.alloc(8)
  q = dev.copy_queue()
  for call in (lambda: q.copy(b, a), lambda: q.copy(a, b, 8, dest_offset=9), lambda: q.copy(a, b, 1, src_offset=8),
               lambda: q.copy(a, b, -1)):
    with pytest.raises(ValueError, match="out of bounds"): call()
  with pytest.raises(ValueError, match="outside the 16-byte buffer"): a.view(9, 8)
  with pytest.raises(ValueError, match="16 bytes into a 8-byte"): a.transfer(b)
  with pytest.raises(ValueError, match="copyin of 9 bytes"): b.copyin(bytes(9))
  for x in (a, b): x.free()


def check_views(dev: Device) -> None:
  """A view is its base's memory at an offset: copies into and out of views move the base's bytes."""
  data = _bytes(4099, 1)
  base, out = _put(dev, data), dev.alloc(4099)
  out.copyin(bytes(4099))
  v, w = base.view(1027, 2001), out.view(5, 2001)
  assert (v.va, v.size) == (base.va + 1027, 2001)
  done = dev.new_signal(0)
  dev.copy_queue().copy(w, v).signal(done, 1).submit()
  done.wait(1)
  want = np.zeros(4099, np.uint8)
  want[5:2006] = data[1027:3028]
  np.testing.assert_array_equal(_got(out), want)
  np.testing.assert_array_equal(_got(v), data[1027:3028])
  for b in (base, out): b.free()


def check_signal_reaches_host(dev: Device, kind: str) -> None:
  """A 64-bit value a queue of `kind` signals is what the host's wait sees."""
  sig, value = dev.new_signal(0), (3 << 32) + 7
  getattr(dev, f"{kind}_queue")().signal(sig, value).submit()
  sig.wait(value, timeout_ms=WAIT_MS)
  assert sig.value == value


def check_host_released_wait(dev: Device, kind: str) -> None:
  """A queue waiting on a signal the host sets later runs on only once the host set it."""
  with _Gates(dev, "gate") as (gate,):
    done = dev.new_signal(0)
    getattr(dev, f"{kind}_queue")().wait(gate, 5).signal(done, 1).submit()
    gate.value = 4                                    # below the value waited for: still held
    _held(done, 1)
    gate.value = 5
    done.wait(1)


def check_cross_queue_order(dev: Device) -> None:
  """compute waits on copy, which waits on the host: nothing runs before the host opens the gate, then both in order."""
  data = _bytes(8195, 2)
  src, dst = _put(dev, data), dev.alloc(8195)
  with _Gates(dev, "gate", "copied") as (gate, copied):
    done = dev.new_signal(0)
    dev.compute_queue().wait(copied, 1).signal(done, 2).submit()
    dev.copy_queue().wait(gate, 1).copy(dst, src).signal(copied, 1).submit()
    _held(done, 2)
    assert copied.value == 0
    gate.value = 1
    done.wait(2)
    assert copied.value == 1
  np.testing.assert_array_equal(_got(dst), data)
  for b in (src, dst): b.free()


def check_queues_are_independent(dev: Device) -> None:
  """A compute queue waiting on a signal the copy queue sets later does not hold the copy queue up."""
  data = _bytes(4097, 3)
  src, dst = _put(dev, data), dev.alloc(4097)
  with _Gates(dev, "later") as (later,):
    done, copied = dev.new_signal(0), dev.new_signal(0)
    dev.compute_queue().wait(later, 1).signal(done, 1).submit()
    dev.copy_queue().copy(dst, src).signal(copied, 1).submit()
    copied.wait(1)
    assert done.value == 0
    dev.copy_queue().signal(later, 1).submit()
    done.wait(1)
  np.testing.assert_array_equal(_got(dst), data)
  for b in (src, dst): b.free()


def check_timestamps(dev: Device, kind: str) -> None:
  """timestamp, barrier, timestamp, signal: the second stamp is not before the first, and a later submission's stamps
  come after both (the clock never goes backwards and advances between submissions the host waited for)."""
  stamps = []
  for _ in range(2):
    t1, t2, s = dev.new_signal(0), dev.new_signal(0), dev.new_signal(0)
    getattr(dev, f"{kind}_queue")().timestamp(t1).memory_barrier().timestamp(t2).signal(s, 1).submit()
    s.wait(1)
    stamps += [t1.timestamp, t2.timestamp]
    assert t1.value == 0 and t2.value == 0            # a timestamp leaves the signal's value alone
  assert stamps == sorted(stamps) and stamps[2] > stamps[0], stamps


def check_transfer_with_cpu(dev: Device) -> None:
  """Buffer.transfer from the CPU device into `dev` and back (peer to peer, host memory both map, or through the host)."""
  cpu, data = open_device("CPU"), _bytes(100_003, 4)
  a, b, c = _put(cpu, data), dev.alloc(100_003), cpu.alloc(100_003)
  a.transfer(b)
  b.transfer(c)
  np.testing.assert_array_equal(_got(c), data)
  np.testing.assert_array_equal(_got(b), data)
  for x in (a, b, c): x.free()


COPIES = [(0, 0, 0), (1, 0, 0), (1, 3, 1), (2, 1, 2), (3, 1, 0), (7, 5, 3), (4095, 0, 0), (4095, 1, 2), (4096, 4, 8), (4099, 2, 2),
          ((3 << 20) + 5, 3, 1)]
CHECKS: list[tuple[str, Callable[[Device], None]]] = [
  *((f"copy {n} B to +{d} from +{s}", lambda dev, n=n, d=d, s=s: check_copy(dev, n, d, s)) for n, d, s in COPIES),
  ("bounds", check_bounds), ("views", check_views), ("cross-queue order", check_cross_queue_order),
  ("queues are independent", check_queues_are_independent), ("transfer with CPU", check_transfer_with_cpu),
  *((f"{what} ({kind})", lambda dev, f=f, kind=kind: f(dev, kind)) for kind in ("copy", "compute")
    for what, f in (("signal reaches host", check_signal_reaches_host), ("host-released wait", check_host_released_wait),
                    ("timestamps", check_timestamps)))]


def check_device(name: str) -> None:
  """Every check on the device string `name` (real hardware: test_contract.py runs the emulated devices)."""
  dev = open_device(name)
  try:
    for _, check in CHECKS: check(dev)
  finally: dev.close()
