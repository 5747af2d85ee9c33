"""The shared host-side ring (drivers.hcq.ring): both wrap policies, the full-ring wait, the doorbell, in-flight objects.
The engine is played by the test: it moves the read pointer in memory as a real engine would write it back."""
import threading
import numpy as np
import pytest
from drivers.hcq.ring import Ring


class Dev:
  """What a Ring needs of its device: a name, check_faults (called while it waits for space) and progress."""
  name = "TEST"
  def __init__(self): self.waiting, self.timeline = threading.Event(), 0
  def check_faults(self) -> None: self.waiting.set()
  def progress(self) -> tuple: return (self.timeline,)


def make(size: int, unit: int, pad=None):
  mem, ctl = bytearray(size), np.zeros(2, np.uint64)   # ctl: rptr at 0, wptr at 1
  rung: list[int] = []
  r = Ring(Dev(), "test", memoryview(mem), memoryview(ctl[0:1]), memoryview(ctl[1:2]), rung.append, unit, pad)
  return r, np.frombuffer(mem, np.uint32), ctl, rung


def test_dword_ring_lets_a_packet_wrap_across_the_end_and_rings_the_doorbell_with_the_write_pointer():
  r, words, ctl, rung = make(64, unit=4)          # 16 dwords, pointers count dwords
  r.submit([list(range(1, 11))], [])
  ctl[0] = 10                                     # the engine consumed them
  r.submit([list(range(101, 111))], [])
  assert list(words[10:16]) == [101, 102, 103, 104, 105, 106] and list(words[0:4]) == [107, 108, 109, 110]
  assert rung == [10, 20] and ctl[1] == 20        # the wptr word and the doorbell both carry the unwrapped pointer


def test_byte_ring_pads_the_tail_with_nops_instead_of_splitting_a_packet():
  r, words, ctl, rung = make(64, unit=1, pad=0xF00F)   # pointers count bytes
  r.submit([[1] * 10], [])
  ctl[0] = 40
  r.submit([[2] * 4, [3] * 4], [])                # the second packet does not fit the 8 bytes left after the first
  assert list(words[10:14]) == [2] * 4 and list(words[14:16]) == [0xF00F] * 2 and list(words[0:4]) == [3] * 4
  assert rung == [40, 80] and ctl[1] == 80        # 40 + 16 + 8 bytes of padding + 16


def test_full_ring_waits_for_the_engine_read_pointer():
  r, words, ctl, rung = make(64, unit=4)
  r.submit([[1] * 12], [])
  t = threading.Thread(target=r.submit, args=([[2] * 8], []))
  t.start()
  assert r.device.waiting.wait(10)                # it is in the full-ring loop (asking for faults while it waits) ...
  assert rung == [12]                             # ... and wrote nothing
  ctl[0] = 12
  t.join(10)
  assert rung == [12, 20] and list(words[12:16]) == [2] * 4 and list(words[0:4]) == [2] * 4


def test_full_ring_whose_read_pointer_stands_still_times_out_after_the_stall_timeout(clock):
  r, _, _, rung = make(64, unit=4)
  r.submit([[1] * 12], [])
  c = clock(10, lambda now_ms: None)
  with pytest.raises(TimeoutError, match=r"TEST: the test ring stayed full with no progress for 100 ms .*read pointer 0, "
                                         r"write pointer 12"):
    r.submit([[2] * 8], [])
  assert rung == [12] and 100 <= c.now_ms <= 110


def test_full_ring_is_waited_for_as_long_as_its_read_pointer_or_the_device_moves(clock):
  """The engine reads a long batch and reports its read pointer once at the end; meanwhile the timeline advances."""
  r, _, ctl, rung = make(64, unit=4)
  r.submit([[1] * 12], [])
  def device(now_ms: float) -> None:
    if now_ms % 50 == 0: r.device.timeline += 1      # work completes, the read pointer stands still ...
    if now_ms == 1000: ctl[0] = 12                   # ... until the batch ends, ten stall timeouts later
  clock(10, device)
  r.submit([[2] * 8], [])
  assert rung == [12, 20]


def test_commands_larger_than_the_ring_are_refused():
  r, _, _, rung = make(64, unit=1, pad=0)
  with pytest.raises(ValueError, match="68 bytes of commands do not fit the 64-byte test ring"): r.submit([[0] * 17], [])
  assert rung == []


def test_objects_stay_pending_until_the_engine_reads_past_their_commands():
  r, _, ctl, _ = make(64, unit=4)
  a, b = object(), object()
  r.submit([[1] * 4], [a])
  r.submit([[2] * 4], [b])
  assert r.pending() == [a, b]
  ctl[0] = 4
  assert r.pending() == [b]
  ctl[0] = 8
  r.submit([[3] * 4], [])
  assert r.pending() == [] and not r.inflight         # read-past submissions are dropped on the next submit (and one that
                                                      # keeps nothing is not tracked)
