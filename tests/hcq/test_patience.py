"""Host waits give up on no progress, not on total time (drivers.hcq.patience): a signal, or the device around it, that
keeps moving is waited for however long the work takes; one that stops is reported after STALL_MS of standing still;
an explicit timeout_ms stays absolute. Time is the `clock` fixture's (it passes only while the wait naps)."""
import pytest
from drivers.hcq import SignalTimeout


def every(period_ms: float, until_ms: float, act):
  """A device that calls act() once per `period_ms` of (fake) time, up to `until_ms`."""
  last = [0.0]
  def device(now_ms: float) -> None:
    if now_ms <= until_ms and now_ms - last[0] >= period_ms:
      last[0] = now_ms
      act()
  return device


def test_a_signal_that_keeps_advancing_is_waited_for_past_the_default_timeout(cpu, clock):
  sig = cpu.new_signal(0)
  c = clock(10, every(50, 10_000, lambda: setattr(sig, "value", sig.value + 1)))   # +1 every 50 ms, STALL_MS is 100
  sig.wait(20)
  assert sig.value == 20 and c.now_ms >= 1000   # ten times the default timeout in all


def test_a_signal_that_stops_advancing_times_out_after_the_default_timeout_of_standing_still(cpu, clock):
  sig = cpu.new_signal(0)
  c = clock(10, every(50, 150, lambda: setattr(sig, "value", sig.value + 1)))     # moves until 150 ms, then stops
  with pytest.raises(SignalTimeout, match=r"CPU: signal written by the host queue did not reach 20 with no progress "
                                          r"for 100 ms \(last seen 3\)"):
    sig.wait(20)
  assert 250 <= c.now_ms <= 270   # 100 ms after its last change (at 150 ms), not 100 ms after the wait began


def test_an_explicit_timeout_stays_absolute_however_the_signal_moves(cpu, clock):
  sig = cpu.new_signal(0)
  c = clock(10, every(20, 10_000, lambda: setattr(sig, "value", sig.value + 1)))
  with pytest.raises(SignalTimeout, match=r"did not reach 20 within 100 ms \(last seen 5\)"): sig.wait(20, timeout_ms=100)
  assert 100 <= c.now_ms <= 110


def test_a_signal_that_stands_still_while_the_device_timeline_advances_is_not_stuck(cpu, clock):
  """A signal written at the end of a long queue does not move until then; the device's timeline does."""
  sig = cpu.new_signal(0)
  def device(now_ms: float) -> None:
    if now_ms % 50 == 0: cpu.timeline.value += 1
    if now_ms == 1000: sig.value = 1
  clock(10, device)
  sig.wait(1)
  assert sig.value == 1


def test_synchronize_takes_the_stall_timeout_of_its_own(cpu, clock):
  cpu.timeline_value += 1   # a value nothing will signal
  c = clock(10, lambda now_ms: None)
  with pytest.raises(SignalTimeout, match=r"CPU: timeline .* did not reach 1 with no progress for 30 ms"): cpu.synchronize(stall_ms=30)
  assert 30 <= c.now_ms <= 40
  cpu.timeline.value = 1     # so the fixture's close finds the device idle
