"""The queue API on MOCK+NV (drivers/nv/device.py over the RM/UVM model and its channel host and copy engine) beyond
the contract (tests/hcq/contract.py): host buffers on the copy engine, signals and waits across queues, 64-bit values,
timestamps, timeouts (kernels: test_nv_kernels.py)."""
import os, time
import numpy as np
import pytest
from drivers.hcq import Graph, SignalTimeout, open_device
from tests.hcq.contract import check_device


@pytest.mark.hardware("nv")
def test_the_contract_on_a_real_gpu():
  check_device("NV")


def test_device_buffers_have_no_cpu_mapping(nv):
  assert nv.alloc(4096).host_view is None            # vidmem with no CPU mapping: copyin/out stage through the copy queue


def test_host_buffers_are_reachable_from_the_copy_engine(nv):
  host, dev = nv.alloc(4096, host=True), nv.alloc(4096)
  host.host_view[:] = bytes(range(256)) * 16
  nv.copy_queue().copy(dev, host).signal(nv.timeline, v := nv.next_timeline()).submit()
  nv.timeline.wait(v)
  assert bytes(dev.copyout()) == bytes(range(256)) * 16


def test_waits_order_the_copy_channel_after_signals_from_the_host_and_from_earlier_work(nv):
  """MOCK+NV has one copy channel (copy queues share it, in submission order): a wait for the host blocks it, and a
  wait for a signal that earlier work writes passes once that work ran."""
  a = np.arange(1024, dtype=np.int32)
  src, tmp, out = nv.alloc(a.nbytes), nv.alloc(a.nbytes), nv.alloc(a.nbytes)
  src.copyin(a.data)
  go, copied = nv.new_signal(0), nv.new_signal(0)
  big = 5 << 32                                       # above 2^32: the acquire compares 64 bits
  nv.copy_queue().wait(go, big + 1).copy(tmp, src).signal(copied, big).submit()
  nv.copy_queue().wait(copied, big).copy(out, tmp).signal(nv.timeline, v := nv.next_timeline()).submit()
  assert copied.value == 0 and nv.timeline.value < v
  go.value = 1                                        # the low 32 bits satisfy a 32-bit compare of big + 1
  go.value = big + 1
  nv.timeline.wait(v, timeout_ms=30000)
  assert copied.value == big
  np.testing.assert_array_equal(np.frombuffer(out.copyout(), np.int32), a)


def test_timestamps_are_ordered_and_on_the_ptimer_clock(nv):
  t0, t1 = nv.new_signal(), nv.new_signal()
  before = time.monotonic_ns() / 1000
  b = nv.alloc(1 << 20)
  nv.copy_queue().timestamp(t0).copy(b, b).timestamp(t1).signal(nv.timeline, v := nv.next_timeline()).submit()
  nv.timeline.wait(v)
  assert before <= t0.timestamp <= t1.timestamp <= time.monotonic_ns() / 1000
  assert t0.value == 0 and t1.value == 0              # a timestamp leaves the signal's value alone


def test_a_wait_that_never_completes_times_out_saying_no_progress(nv):
  sig = nv.new_signal(3, name="never")
  nv.copy_queue().wait(sig, 10).signal(sig, 4).signal(nv.timeline, v := nv.next_timeline()).submit()
  with pytest.raises(SignalTimeout) as e: sig.wait(5, stall_ms=300)
  msg = str(e.value)
  assert "MOCK+NV" in msg and "copy queue" in msg and "did not reach 5" in msg and "last seen 3" in msg and "progress" in msg
  sig.value = 10                                      # release the queue so the device can close
  nv.timeline.wait(v, timeout_ms=30000)
  assert sig.value == 4                               # the queue went on after its wait, in order


def test_many_submissions_wrap_the_gpfifo_and_the_pushbuffer(nv):
  sig = nv.new_signal(0)
  for i in range(1, 3000):                            # more than the 1024-entry GPFIFO
    nv.copy_queue().signal(sig, i).submit()
  sig.wait(2999, timeout_ms=60000)
  assert sig.value == 2999


def test_graph_replay_of_copies(nv):
  a, b = nv.alloc(64), nv.alloc(64)
  a.copyin(bytes(range(64)))
  g = Graph(nv)
  g.copy(b, a)
  g(wait=True)
  assert bytes(b.copyout()) == bytes(range(64))
  c, d = nv.alloc(64), nv.alloc(64)
  c.copyin(bytes(range(100, 164)))
  g(replace={a: c, b: d}, wait=True)                  # the patched OFFSET_IN / OFFSET_OUT methods
  assert bytes(d.copyout()) == bytes(range(100, 164)) and bytes(b.copyout()) == bytes(range(64))


def test_program_refuses_what_is_not_a_kernel_image(nv):
  with pytest.raises(ValueError, match="no HCQNVIMG header"): nv.program("k", b"")


def test_nv_without_the_kernel_module_says_which_to_load():
  if os.path.exists("/dev/nvidiactl"): pytest.skip("this machine has the NVIDIA kernel module")
  with pytest.raises(FileNotFoundError, match="modprobe nvidia"): open_device("NV")
