"""Ordered submission (Device.ordered_submit) and the shared pieces around it: the fault-poll rate limit and the
kernel-argument arena. Every submission the queue API and the compute layer make joins the timeline this one way."""
import threading
import numpy as np
import pytest
from drivers.cpu.device import CPUQueue, CPUSealed
from drivers.hcq.faults import FaultPoll
from drivers.hcq.kernargs import KernargArena, ALIGN


def test_ordered_submit_waits_for_the_last_value_then_works_then_signals_the_next(cpu, vadd):
  out, a = cpu.alloc(16), cpu.alloc(16)
  args = vadd.fill_kernargs([out, a, a], [4])
  first = cpu.ordered_submit(cpu.compute_queue())
  q = cpu.compute_queue()
  v = cpu.ordered_submit(q, lambda q: q.exec(vadd, args, (1,), (4,)))
  assert v == first + 1 == cpu.timeline_value - 1
  assert [c[0] for c in q.cmds] == ["wait", "exec", "signal"] and q.submitted
  assert q.cmds[0][1:] == (cpu.timeline, first) and q.cmds[-1][1:] == (cpu.timeline, v)
  cpu.timeline.wait(v)


def test_ordered_submit_holds_the_submit_lock_while_working(cpu):
  seen = []
  def work(q):   # another thread must not get the lock now
    t = threading.Thread(target=lambda: seen.append(cpu.submit_lock.acquire(blocking=False)))
    t.start(); t.join()
  cpu.ordered_submit(cpu.copy_queue(), work)
  assert seen == [False]
  assert cpu.submit_lock.acquire(blocking=False)   # and released it afterwards
  cpu.submit_lock.release()


def test_every_submission_of_the_queue_api_and_compute_layer_is_ordered_under_the_lock(cpu, vadd, monkeypatch):
  """Program launches, copies, staging, Graph replay and compute schedules: each submits holding submit_lock (the
  timeline value it waits for and the one it signals are taken atomically), waiting for the value before its own."""
  from drivers.hcq import Graph
  from compute import Tensor
  subs = []
  real, real_sealed = CPUQueue._submit, CPUSealed.submit
  def note(q):
    waits, sigs = [c for c in q.cmds if c[0] == "wait"], [c for c in q.cmds if c[0] == "signal"]
    subs.append((q.device.submit_lock._is_owned(), waits[0][2] if waits else None, sigs[-1][2] if sigs else None))
  monkeypatch.setattr(CPUQueue, "_submit", lambda q: note(q) or real(q))
  monkeypatch.setattr(CPUSealed, "submit", lambda q: note(q) or real_sealed(q))   # Graph replays (and so schedules)
  a, b = cpu.alloc(64), cpu.alloc(64)
  vadd(a, b, b, global_size=(1,), local_size=(16,), vals=(16,), wait=True)
  b.transfer(a)
  cpu.staging.copyin(a.va, memoryview(bytes(64)))
  cpu.staging.copyout(memoryview(bytearray(64)), a.va)
  g = Graph(cpu)
  g.exec(vadd, a, b, b, global_size=(1,), local_size=(16,), vals=(16,))
  g.copy(b, a)
  g(wait=True)
  n = len(subs)
  (Tensor(np.ones(4, np.float32), device="CPU") * 3).numpy()   # the process-wide CPU device
  assert len(subs) > n
  assert all(owned and signalled == waited + 1 for owned, waited, signalled in subs)
  assert [s for _, _, s in subs[:n]] == sorted(s for _, _, s in subs[:n])   # the timeline only grows


def test_fault_poll_asks_the_source_at_most_once_per_interval():
  asked = []
  def source():
    asked.append(1)
    return "fault" if len(asked) > 1 else None
  slow, fast = FaultPoll(source, interval_s=3600), FaultPoll(source, interval_s=0)
  assert slow() is None and slow() is None and len(asked) == 1     # the second call is inside the interval: not asked
  assert fast() == "fault" and fast() == "fault" and len(asked) == 3


def test_device_check_faults_reports_what_the_vendor_poll_returns(cpu):
  from drivers.hcq import DeviceFault
  cpu._fault_poll = FaultPoll(lambda: "ECC error", interval_s=0)
  with pytest.raises(DeviceFault, match="CPU: ECC error"): cpu.check_faults()
  cpu._faults.clear()


def test_kernarg_arena_aligns_reuses_released_pieces_and_grows_by_chunks():
  chunks = []
  def chunk(size):
    mem = bytearray(size)
    chunks.append(mem)
    return memoryview(mem), 0x10000 * len(chunks)
  arena = KernargArena(chunk, chunk_size=256)
  (v1, a1, r1), (v2, a2, _) = arena.alloc(10), arena.alloc(100)
  assert (a1, a2, v1.nbytes, v2.nbytes) == (0x10000, 0x10000 + ALIGN, ALIGN, 2 * ALIGN)
  r1()
  assert arena.alloc(ALIGN)[1] == 0x10000                    # the released piece is handed out again
  assert arena.alloc(2 * ALIGN)[1] == 0x20000 and len(chunks) == 2   # no room left in the first chunk
  assert arena.alloc(1000)[0].nbytes == 1024 and len(chunks) == 3    # a piece larger than a chunk gets its own
