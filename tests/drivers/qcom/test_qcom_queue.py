"""The queue API on MOCK+QCOM (drivers/qcom/device.py over the KGSL model and its CP) beyond the contract
(tests/hcq/contract.py): copies the host does, signals and waits across queues, 64-bit signal values, timestamps on the always-on clock, no-progress timeouts, one ioctl per submit, the
command arena wrapping, graph replay, the refusal of kernels, and a close that leaves nothing in the model."""
import time
import numpy as np
import pytest
from drivers.hcq import Graph, SignalTimeout, open_device
from drivers.qcom import cp
from tests.hcq.contract import check_device


@pytest.fixture(params=["MOCK+QCOM", pytest.param("QCOM", marks=pytest.mark.hardware("qcom"))])
def qcom(request):
  """The contract on the KGSL model, and on a real Adreno where one is present."""
  d = open_device(request.param)
  model = getattr(d.gpu.k, "model", None)
  yield d
  d.close()
  if model is not None:
    assert model.objects == {} and model.mapped == {} and model.contexts == {} and model.fds == set()


@pytest.mark.hardware("qcom")
def test_the_contract_on_a_real_adreno():
  check_device("QCOM")


def test_copies_cp_memcpy_cannot_express_are_done_by_the_host_in_stream_order(qcom):
  """CP_MEMCPY moves whole dwords: an odd copy between two of them in one stream sees the first's result, and the
  second sees its; the queue holds at its wait until the host opens the gate, and the CP still refuses unaligned
  CP_MEMCPY packets."""
  data = np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8)
  a, b, c, d = (qcom.alloc(4096) for _ in range(4))
  a.copyin(data.data)
  gate, done = qcom.new_signal(0), qcom.new_signal(0)
  q = qcom.copy_queue().wait(gate, 1).copy(b, a).copy(c, b, 1001, dest_offset=7, src_offset=2).copy(d, c)
  q.signal(done, 1).submit()
  with pytest.raises(SignalTimeout): done.wait(1, timeout_ms=200)
  gate.value = 1
  done.wait(1, timeout_ms=30000)
  want = np.zeros(4096, np.uint8)
  want[7:1008] = data[2:1003]
  np.testing.assert_array_equal(np.frombuffer(d.copyout(), np.uint8), want)
  with pytest.raises(ValueError, match="dword-aligned"): cp.memcpy(b.va + 2, a.va, 1)


def test_one_submit_is_one_ioctl():
  qcom = open_device("MOCK+QCOM")
  try:
    m, s = qcom.gpu.k.model, qcom.new_signal(0)
    qcom.synchronize()
    before = len(m.calls)
    qcom.compute_queue().signal(s, 1).submit()
    # besides the fault poll (GETPROPERTY GPU_RESET_STAT, at most every FAULT_POLL_S, not part of the submission)
    assert [c for c in m.calls[before:] if c != "DEVICE_GETPROPERTY"] == ["GPU_COMMAND"]
    s.wait(1, timeout_ms=30000)
  finally: qcom.close()


def test_waits_order_queues_after_signals_from_the_host_and_from_earlier_work(qcom):
  a = np.arange(1024, dtype=np.int32)
  src, tmp, out = qcom.alloc(a.nbytes), qcom.alloc(a.nbytes), qcom.alloc(a.nbytes)
  src.copyin(a.data)
  go, copied = qcom.new_signal(0), qcom.new_signal(0)
  big = 5 << 32                                       # a 64-bit value: both dwords written by one CP_MEM_WRITE
  qcom.copy_queue().wait(go, 7).copy(tmp, src).signal(copied, big).submit()
  qcom.compute_queue().wait(copied, 0).copy(out, tmp).signal(qcom.timeline, v := qcom.next_timeline()).submit()
  assert copied.value == 0 and qcom.timeline.value < v
  go.value = 7
  qcom.timeline.wait(v, timeout_ms=30000)
  assert copied.value == big
  np.testing.assert_array_equal(np.frombuffer(out.copyout(), np.int32), a)


def test_wait_values_beyond_one_dword_are_refused(qcom):
  with pytest.raises(ValueError, match="below 2\\^32"): qcom.compute_queue().wait(qcom.new_signal(0), 1 << 32)


def test_timestamps_are_ordered_and_on_the_always_on_clock(qcom):
  t0, t1, s = qcom.new_signal(), qcom.new_signal(), qcom.new_signal()
  before = time.monotonic_ns() / 1000
  b = qcom.alloc(1 << 20)
  qcom.copy_queue().timestamp(t0).copy(b, b).timestamp(t1).signal(s, 3).submit()
  s.wait(3, timeout_ms=30000)
  after = time.monotonic_ns() / 1000
  assert before - 1 <= t0.timestamp <= t1.timestamp <= s.timestamp <= after + 1   # 19.2 MHz ticks, in microseconds
  assert t0.value == 0 and t1.value == 0              # a timestamp leaves the signal's value alone


def test_a_wait_that_never_completes_times_out_saying_no_progress(qcom):
  sig = qcom.new_signal(3, name="never")
  qcom.compute_queue().wait(sig, 10).signal(sig, 4).signal(qcom.timeline, v := qcom.next_timeline()).submit()
  with pytest.raises(SignalTimeout) as e: sig.wait(5, stall_ms=300)
  msg = str(e.value)
  assert qcom.name in msg and "compute queue" in msg and "did not reach 5" in msg and "last seen 3" in msg and "progress" in msg
  sig.value = 10
  qcom.timeline.wait(v, timeout_ms=30000)
  assert sig.value == 4                               # the queue went on after its wait, in order


def test_many_submissions_wrap_the_command_arena(qcom):
  sig, i = qcom.new_signal(0), 0
  while qcom.ring.put * 4 < qcom.ring.size + (64 << 10):   # until the 1 MiB arena wrapped
    qcom.compute_queue().signal(sig, i := i + 1).submit()
  sig.wait(i, timeout_ms=60000)
  assert sig.value == i


def test_graph_replay_of_copies(qcom):
  a, b = qcom.alloc(64), qcom.alloc(64)
  a.copyin(bytes(range(64)))
  g = Graph(qcom)
  g.copy(b, a)
  g(wait=True)
  assert bytes(b.copyout()) == bytes(range(64))
  c, d = qcom.alloc(64), qcom.alloc(64)
  c.copyin(bytes(range(100, 164)))
  g(replace={a: c, b: d}, wait=True)                  # the patched CP_MEMCPY addresses
  assert bytes(d.copyout()) == bytes(range(100, 164)) and bytes(b.copyout()) == bytes(range(64))


def test_graph_replay_of_copies_the_host_does(qcom):
  a, b, c, d = (qcom.alloc(64) for _ in range(4))
  a.copyin(bytes(range(64)))
  c.copyin(bytes(range(100, 164)))
  g = Graph(qcom)
  g.copy(b, a.view(3, 33))
  g(wait=True)
  g(replace={a: c, b: d}, wait=True)                  # the patched addresses of the host's copy request
  assert bytes(b.copyout())[:33] == bytes(range(3, 36)) and bytes(d.copyout())[:33] == bytes(range(103, 136))


def test_transfers_with_the_cpu_device_go_through_imported_host_memory(qcom):
  cpu = open_device("CPU")
  data = np.arange(4096, dtype=np.uint8)
  src, dst, back = cpu.alloc(4096), qcom.alloc(4096), cpu.alloc(4096)
  src.copyin(data.data)
  src.transfer(dst)
  dst.transfer(back)
  np.testing.assert_array_equal(np.frombuffer(back.copyout(), np.uint8), data)
  for b in (src, back): b.free()


def test_kernels_are_refused_naming_what_blocks_them(qcom):
  for call in (lambda: qcom.program("k", b""), lambda: qcom.compiler):
    with pytest.raises(NotImplementedError, match="ir3.*mesa 25.2.7.*500 MiB fetch limit.*ir3 executor"): call()


@pytest.mark.parametrize("chip", [0x06030001, 0x07030001])
def test_signals_waits_and_barriers_on_a6xx_and_a7xx(chip):
  """a7xx flushes with CP_EVENT_WRITE7's one-dword form, a6xx with CP_EVENT_WRITE CACHE_FLUSH_TS to the fence."""
  from drivers.qcom.device import QCOMDevice
  from drivers.qcom.kgsl import KGSL
  from drivers.system.kernel import kernel_interface
  d = QCOMDevice("MOCK+QCOM", KGSL(kernel_interface(mock="kgsl", chip_id=chip)))
  try:
    a, b = d.new_signal(0), d.new_signal(0)
    d.compute_queue().memory_barrier().signal(a, 1).submit()
    d.copy_queue().wait(a, 1).timestamp(b).signal(b, 2).submit()
    b.wait(2, timeout_ms=30000)
    assert d.gen == chip >> 24 and a.value == 1 and b.timestamp >= a.timestamp > 0
  finally: d.close()


def test_close_without_waiting_drops_a_queue_stalled_in_a_wait():
  d = open_device("MOCK+QCOM")
  model, never = d.gpu.k.model, d.new_signal(0)
  d.compute_queue().wait(never, 1).signal(never, 2).submit()
  d.close(wait=False)                                 # DRAWCTXT_DESTROY ends the stalled submission
  assert never.value == 0 and not model.cp.thread.is_alive() and model.contexts == {}
