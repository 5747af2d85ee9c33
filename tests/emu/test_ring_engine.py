"""The shared ring engine (emu/ring.py) with a toy command format, no GPU involved: header = opcode | payload dwords
<< 8; WRITE (addr lo, addr hi, value) stores a u32, WAIT (addr lo, addr hi, value) stalls until the u32 there is >=
value, NOP skips its payload, HOLD blocks until the test releases it, anything else stops the queue. Ring, write pointer and read pointer live in a
DMASpace."""
import struct, threading, time
import numpy as np
import pytest

from emu.pci import DMASpace
from emu.ring import RingEngine, RingError, Stalled

NOP, WRITE, WAIT, HOLD = 0, 1, 2, 3
RING_BYTES = 64                 # 16 dwords: small enough that a few packets wrap


class Toy(RingEngine):
  unit = 4                      # pointers count dwords
  IDLE_S = 60                   # never look at the write pointer unasked: only the doorbell wakes the engine

  def __init__(self, mem, ring, ptrs):
    super().__init__("toy", mem, ring, RING_BYTES, ptrs + 8, ptrs)
    self.reports: list[tuple[str, int | None, str]] = []
    self.holding, self.release = threading.Event(), threading.Event()

  def packet(self, words: np.ndarray, pos: int) -> int:
    op, n = int(words[pos]) & 0xFF, int(words[pos]) >> 8
    if len(words) - pos < n + 1: raise RingError(f"toy: packet needs {n + 1} dwords")
    p = [int(w) for w in words[pos + 1:pos + 1 + n]]
    if op == WRITE: self.mem.write(p[0] | p[1] << 32, struct.pack("<I", p[2]))
    elif op == WAIT:
      if struct.unpack("<I", self.mem.read(p[0] | p[1] << 32, 4))[0] < p[2]: raise Stalled
    elif op == HOLD:
      self.holding.set()
      self.release.wait()
    elif op != NOP: raise RingError(f"toy: bad opcode {op}")
    return n + 1

  def report(self, message: str, address: int | None, kind: str) -> None:
    self.reports.append((message, address, kind))


def until(cond, what: str, timeout: float = 5.0) -> None:
  end = time.monotonic() + timeout
  while not cond():
    if time.monotonic() > end: raise TimeoutError(what)
    time.sleep(1e-3)


class Host:
  """The driver side: writes packets into the ring, publishes the write pointer, rings the doorbell."""
  def __init__(self):
    self.dma = DMASpace()
    self.ring_mem, self.ptr_mem, self.data = (memoryview(bytearray(4096)) for _ in range(3))
    self.ring, self.ptrs, self.data_at = (self.dma.map(m)[0] for m in (self.ring_mem, self.ptr_mem, self.data))
    self.engine = Toy(self.dma, self.ring, self.ptrs)
    self.put = 0
    self.engine.start()

  def u32(self, i: int) -> int: return struct.unpack_from("<I", self.data, 4 * i)[0]
  @property
  def rptr(self) -> int: return struct.unpack_from("<Q", self.ptr_mem, 8)[0]

  def submit(self, *packets: list[int], doorbell: bool = True) -> None:
    for w in (w for p in packets for w in p):
      struct.pack_into("<I", self.ring_mem, 4 * (self.put % (RING_BYTES // 4)), w)
      self.put += 1
    struct.pack_into("<Q", self.ptr_mem, 0, self.put)
    if doorbell: self.engine.ring_doorbell(self.put)

  def _at(self, op: int, i: int, value: int) -> list[int]:
    a = self.data_at + 4 * i
    return [op | 3 << 8, a & 0xFFFFFFFF, a >> 32, value]

  def write(self, i: int, value: int) -> list[int]: return self._at(WRITE, i, value)
  def wait(self, i: int, value: int) -> list[int]: return self._at(WAIT, i, value)


@pytest.fixture
def host():
  h = Host()
  yield h
  h.engine.stop()


def test_packets_that_straddle_the_end_of_the_ring_wrap(host):
  for round in range(5):                       # 11 dwords a round in a 16-dword ring: packets straddle the end
    host.submit([NOP | 2 << 8, 0, 0], host.write(0, round), host.write(1, round + 100))
    until(lambda: host.rptr == host.put, f"round {round}")
  assert (host.u32(0), host.u32(1)) == (4, 104) and host.put > 3 * RING_BYTES // 4   # around the ring three times
  assert host.engine.busy_ns > 0 and not host.engine.busy


def test_the_doorbell_wakes_an_idle_engine(host):
  host.submit(host.write(2, 7), doorbell=False)
  host.submit(host.write(3, 8))                # one doorbell: everything published so far runs
  until(lambda: host.u32(3) == 8, "doorbell")
  assert host.u32(2) == 7 and host.rptr == host.put


def test_a_wait_stalls_the_queue_then_resumes_when_memory_changes(host):
  host.submit(host.write(4, 1), host.wait(5, 2), host.write(6, 3))
  until(lambda: host.rptr == 4, "the read pointer stops at the wait")
  assert host.u32(4) == 1 and host.u32(6) == 0 and not host.engine.busy   # stalled, not busy, the host not blocked
  struct.pack_into("<I", host.data, 4 * 5, 2)  # the condition comes true: no doorbell needed
  until(lambda: host.u32(6) == 3, "resume after the wait")
  assert host.rptr == host.put and host.engine.hung is None


def test_a_bad_packet_stops_the_queue_and_says_why(host):
  host.submit([0x7E], host.write(7, 1))
  until(lambda: host.engine.reports, "fault report")
  assert host.engine.reports == [("toy: bad opcode 126", None, "packet")] and host.engine.hung == "toy: bad opcode 126"
  host.submit(host.write(8, 1))
  assert host.engine.is_alive() and host.u32(7) == host.u32(8) == 0 and host.rptr == 0


def test_a_dma_fault_stops_the_queue_as_a_fault(host):
  host.submit([WRITE | 3 << 8, 0xDEAD_0000, 0, 1])   # no host memory is mapped at that bus address
  until(lambda: host.engine.reports, "fault report")
  (message, address, kind), = host.engine.reports
  assert kind == "fault" and "0xdead0000" in message and "no host memory" in message


def test_stop_is_prompt_even_on_a_wait_that_never_ends(host):
  host.submit(host.write(10, 1), host.wait(9, 1))
  until(lambda: host.rptr == 4, "stalled on the wait")
  done = threading.Event()
  threading.Thread(target=lambda: (host.engine.stop(), done.set()), daemon=True).start()
  assert done.wait(2) and not host.engine.is_alive()


def test_stop_takes_effect_after_the_packet_in_flight_not_at_the_end_of_the_batch(host):
  """A dequeue request drops what is queued behind the packet executing (the engine fetched it all in one batch)."""
  host.submit(host.write(0, 1), [HOLD], host.write(1, 2), host.write(2, 3), doorbell=False)
  host.engine.ring_doorbell(host.put)
  assert host.engine.holding.wait(5)
  host.engine.request_stop()
  host.engine.release.set()
  host.engine.join(5)
  assert not host.engine.is_alive() and (host.u32(0), host.u32(1), host.u32(2)) == (1, 0, 0)
  assert host.rptr == 5        # reported past the packet in flight: the WRITE (4 dwords) and the HOLD


def test_a_write_pointer_more_than_a_ring_ahead_is_a_packet_error(host):
  struct.pack_into("<Q", host.ptr_mem, 0, RING_BYTES // 4 + 1)
  host.engine.ring_doorbell(0)
  until(lambda: host.engine.reports, "fault report")
  assert host.engine.reports[0][2] == "packet" and "more than a ring ahead" in host.engine.reports[0][0]
