"""The queue API on MOCK+QCOM (drivers/qcom/device.py over the KGSL model and its CP) beyond the contract
(tests/hcq/contract.py): copies the host does, signals and waits across queues, 64-bit signal values, timestamps on
the always-on clock, no-progress timeouts, one ioctl per submit, the command arena wrapping, graph replay, a kernel's
dispatch state, and a close that leaves nothing in the model."""
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
    assert model.objects == {} and model.mapped == {} and model.contexts == {} and model.fds == {}


@pytest.mark.hardware("qcom")
def test_the_contract_on_a_real_adreno():
  check_device("QCOM")


def _queue(dev, kind): return dev.copy_queue() if kind == "copy" else dev.compute_queue()


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
  go, copied, ready = qcom.new_signal(0), qcom.new_signal(0), qcom.new_signal(0)
  big = 5 << 32                                       # a 64-bit value: both dwords written by one CP_MEM_WRITE
  qcom.copy_queue().wait(go, 7).copy(tmp, src).signal(copied, big).signal(ready, 1).submit()
  qcom.compute_queue().wait(ready, 1).copy(out, tmp).signal(qcom.timeline, v := qcom.next_timeline()).submit()
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


@pytest.mark.parametrize("kind", ["compute", "copy"])
def test_a_wait_that_never_completes_times_out_saying_no_progress(qcom, kind):
  sig = qcom.new_signal(3, name="never")
  _queue(qcom, kind).wait(sig, 10).signal(sig, 4).signal(qcom.timeline, v := qcom.next_timeline()).submit()
  with pytest.raises(SignalTimeout) as e: sig.wait(5, stall_ms=300)
  msg = str(e.value)
  assert qcom.name in msg and f"{kind} queue" in msg and "did not reach 5" in msg and "last seen 3" in msg and "progress" in msg
  sig.value = 10
  qcom.timeline.wait(v, timeout_ms=30000)
  assert sig.value == 4                               # the queue went on after its wait, in order


def test_many_submissions_wrap_the_command_arena(qcom):
  sig, i = qcom.new_signal(0), 0
  arena = qcom.arenas["compute"]
  while arena.put * 4 < arena.size + (64 << 10):      # until the 1 MiB arena wrapped
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


def test_graph_replays_held_behind_a_host_gate_keep_their_own_addresses(qcom):
  a, b, c, d = (qcom.alloc(64) for _ in range(4))
  a.copyin(bytes(range(64)))
  c.copyin(bytes(range(100, 164)))
  g = Graph(qcom)
  g.copy(b, a)
  g(wait=True)
  b.copyin(bytes(64))
  gate = qcom.new_signal(0)
  qcom.ordered_submit(qcom.compute_queue(), lambda q: q.wait(gate, 1))   # the timeline waits for the host
  g()                                                 # both replays wait for the timeline on the copy queue: held
  g(replace={a: c, b: d})
  gate.value = 1
  qcom.synchronize(timeout_ms=30000)
  assert bytes(b.copyout()) == bytes(range(64)) and bytes(d.copyout()) == bytes(range(100, 164))


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


def test_a_kernel_runs_with_the_state_computerator_loads():
  """The dispatch state reaches the CP (the instructions as ST6_SHADER; the buffers' addresses, UBO 0, as ST6_CONSTANTS;
  constlen, footprints, id registers, the grid) and the kernel's result is numpy's."""
  pytest.importorskip("tinymesa", reason="the tinymesa wheel is not installed (scripts/setup.sh)")
  from autogen import adreno as a
  from compute import Tensor
  from compute.nir import NIRRenderer
  from compute.schedule import Kernel, create_schedule
  from drivers.qcom.compiler import Variant
  d = open_device("MOCK+QCOM")
  try:
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    [k] = [k for k in create_schedule([(Tensor(x, device="CPU") * 3 + 1).lazydata.base]) if isinstance(k, Kernel)]
    spec = NIRRenderer().render(k)
    lib = d.compiler.compile(spec.src)
    v, prg = Variant.unpack(lib), d.program(spec.name, lib)
    out, inp = d.alloc(400), d.alloc(400)
    inp.copyin(x.data)
    prg(out, inp, global_size=spec.global_size, local_size=spec.local_size, wait=True)
    np.testing.assert_array_equal(np.frombuffer(out.copyout(), np.float32), x * 3 + 1)
    cpm = d.gpu.k.model.cp
    assert cpm.state[(a.SB6_CS_SHADER, a.ST6_SHADER)] == v.code and len(v.code) == v.instrlen * 128
    assert cpm.state[(a.SB6_CS_SHADER, a.ST6_CONSTANTS)][:16] == np.array([out.va, inp.va], np.uint64).tobytes()
    assert cpm.regs[a.REG_A6XX_HLSQ_CS_CNTL] & 0xFF == -(-v.constlen // 4) * 4
    reg0 = cpm.regs[a.REG_A6XX_SP_CS_CTRL_REG0]
    assert (reg0 >> 7 & 0x3F, reg0 >> 1 & 0x3F, reg0 >> 31) == (v.max_reg + 1, v.max_half_reg + 1, int(v.mergedregs))
    assert cpm.regs[a.REG_A6XX_HLSQ_CS_CNTL_0] & 0xFF == v.workgroup_id_reg and cpm.regs[a.REG_A6XX_HLSQ_CS_CNTL_0] >> 24 == v.local_id_reg
    assert cpm.regs[a.REG_A6XX_HLSQ_CS_NDRANGE_1] == 128 and (cpm.regs[a.REG_A6XX_HLSQ_CS_NDRANGE_0] >> 2 & 0x3FF) == 63
    with pytest.raises(ValueError, match="local size"): prg(out, inp, global_size=(1, 1, 1), local_size=(2048, 1, 1))
  finally: d.close()


def test_a_bad_dispatch_faults_naming_what_is_wrong():
  """A CP_EXEC_CS whose NDRANGE does not match its workgroup count faults the context, naming the registers."""
  pytest.importorskip("tinymesa", reason="the tinymesa wheel is not installed (scripts/setup.sh)")
  from compute import Tensor
  from compute.nir import NIRRenderer
  from compute.schedule import Kernel, create_schedule
  d = open_device("MOCK+QCOM")
  try:
    [k] = [k for k in create_schedule([(Tensor(np.zeros(8, np.float32), device="CPU") + 1).lazydata.base]) if isinstance(k, Kernel)]
    spec = NIRRenderer().render(k)
    prg = d.program(spec.name, d.compiler.compile(spec.src))
    out, inp = d.alloc(64), d.alloc(64)
    words, _ = prg.dispatch(prg.fill_kernargs([out, inp]).va, (1, 1, 1), (8, 1, 1))
    words[-3] = 2                                            # CP_EXEC_CS NGROUPS_X: 2 workgroups where NDRANGE says 1
    q, done = d.compute_queue(), d.new_signal(0)
    q.words += words
    q.signal(done, 1).submit()
    with pytest.raises(RuntimeError, match="after a GPU fault"): done.wait(1, timeout_ms=30000)
    assert "HLSQ_CS_NDRANGE global sizes 8, 1, 1" in d.gpu.k.model.last_error
  finally: d.close(wait=False)


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


# --- the two queues run independently: each has its own KGSL context, the copy context on the higher-priority
# ringbuffer (it preempts compute work stalled in a wait), copy submissions whose waits do not hold yet held on the host


@pytest.mark.parametrize("waiter,setter", [("compute", "copy"), ("copy", "compute")])
def test_a_wait_for_a_signal_the_other_queue_sets_later_does_not_block_that_queue(qcom, waiter, setter):
  gate, ran, done = qcom.new_signal(0), qcom.new_signal(0), qcom.new_signal(0)
  _queue(qcom, waiter).wait(gate, 1).signal(done, 1).submit()
  _queue(qcom, setter).signal(ran, 1).signal(gate, 1).submit()
  ran.wait(1, timeout_ms=30000)
  done.wait(1, timeout_ms=30000)


@pytest.mark.parametrize("kind,other", [("compute", "copy"), ("copy", "compute")])
def test_host_released_wait_signal_chains_reach_signal_wait_while_the_other_queue_waits(qcom, kind, other):
  held, stalled = qcom.new_signal(0, "other gate"), qcom.new_signal(0)
  _queue(qcom, other).wait(held, 1).signal(stalled, 1).submit()      # the other queue waits on the host all along
  gates, outs = [qcom.new_signal(0) for _ in range(3)], [qcom.new_signal(0) for _ in range(3)]
  for g, o in zip(gates, outs): _queue(qcom, kind).wait(g, 2).signal(o, 3).submit()
  for g, o in zip(gates, outs):
    assert o.value == 0                                               # the chain waits for the host
    g.value = 2
    o.wait(3, timeout_ms=30000)
  assert stalled.value == 0
  held.value = 1
  stalled.wait(1, timeout_ms=30000)


@pytest.mark.parametrize("kind,other", [("compute", "copy"), ("copy", "compute")])
def test_timestamps_around_a_barrier_reach_signal_wait_and_never_go_backwards(qcom, kind, other):
  held = qcom.new_signal(0)
  _queue(qcom, other).wait(held, 1).submit()
  stamps = []
  for _ in range(5):
    t1, t2, s = qcom.new_signal(), qcom.new_signal(), qcom.new_signal()
    _queue(qcom, kind).timestamp(t1).memory_barrier().timestamp(t2).signal(s, 1).submit()
    s.wait(1, timeout_ms=30000)
    stamps += [t1.timestamp, t2.timestamp, s.timestamp]
  assert stamps == sorted(stamps) and stamps[0] > 0
  held.value = 1


@pytest.mark.parametrize("first,second", [("copy", "compute"), ("compute", "copy")])
def test_cross_queue_order_through_a_host_gate(qcom, first, second):
  """`second` waits on `first`, which waits on a host gate: the data moves gate -> first's copy -> second's copy."""
  a = np.arange(256, dtype=np.int32)
  src, mid, out = qcom.alloc(a.nbytes), qcom.alloc(a.nbytes), qcom.alloc(a.nbytes)
  src.copyin(a.data)
  gate, passed, done, t = qcom.new_signal(0), qcom.new_signal(0), qcom.new_signal(0), qcom.new_signal()
  _queue(qcom, first).wait(gate, 1).copy(mid, src).signal(passed, 1).submit()
  _queue(qcom, second).wait(passed, 1).timestamp(t).copy(out, mid).signal(done, 1).submit()
  assert passed.value == done.value == 0
  gate.value = 1
  done.wait(1, timeout_ms=30000)
  assert passed.timestamp <= t.timestamp <= done.timestamp
  np.testing.assert_array_equal(np.frombuffer(out.copyout(), np.int32), a)


def test_transfers_with_the_cpu_device_both_ways_while_the_compute_queue_waits(qcom):
  cpu = open_device("CPU")
  held, stalled = qcom.new_signal(0), qcom.new_signal(0)
  qcom.compute_queue().wait(held, 1).signal(stalled, 1).submit()
  data = np.random.default_rng(1).integers(0, 256, 8192, dtype=np.uint8)
  q, c = qcom.alloc(data.nbytes), cpu.alloc(data.nbytes)
  q.copyin(data.data)
  q.transfer(c)
  np.testing.assert_array_equal(np.frombuffer(c.copyout(), np.uint8), data)
  c.copyin(data[::-1].copy().data)
  c.transfer(q)
  assert bytes(q.copyout()) == data[::-1].tobytes() and stalled.value == 0
  held.value = 1
  stalled.wait(1, timeout_ms=30000)
  c.free()


def test_a_copy_submission_waiting_for_what_nothing_handed_over_writes_is_held_on_the_host():
  """On the higher-priority copy ringbuffer such a wait would stall the CP for the compute queue too."""
  qcom = open_device("MOCK+QCOM")
  try:
    m = qcom.gpu.k.model
    gate, a, b = qcom.new_signal(0, "gate"), qcom.new_signal(0), qcom.new_signal(0)
    qcom.copy_queue().signal(a, 1).submit()
    n = m.calls.count("GPU_COMMAND")
    qcom.copy_queue().wait(a, 1).signal(b, 1).submit()            # met by a signal handed over before it: goes at once
    assert m.calls.count("GPU_COMMAND") == n + 1
    qcom.copy_queue().wait(gate, 1).signal(b, 2).submit()         # nothing handed over writes the gate: held
    qcom.copy_queue().signal(b, 3).submit()                       # and the copy queue's later work behind it
    assert m.calls.count("GPU_COMMAND") == n + 1
    gate.value = 1
    b.wait(3, timeout_ms=30000)
    assert m.calls.count("GPU_COMMAND") == n + 3
  finally: qcom.close()
