"""What the launch and copy-back paths may cost (issue 11 item 9), on the CPU device and the emulated GPU: no cache
barrier of the compute layer's own per kernel, copy-back waits once and copies straight into the array numpy gets,
and launch encodings are made once per program and workgroup size by the queue API."""
import gc, weakref
import numpy as np
import pytest
from compute import Tensor
from drivers.hcq import Buffer, Queue, Signal, open_device
from drivers.cpu.device import CPUQueue

DEVICES = ["CPU", "MOCKKFD+AMD"]


@pytest.mark.parametrize("dev", DEVICES)
def test_compute_layer_launches_issue_no_memory_barrier(dev, monkeypatch):
  """The launch itself makes earlier results visible to the kernel (on AMD: the ACQUIRE_MEM of each dispatch)."""
  x = Tensor(np.arange(64, dtype=np.float32), device=dev).realize()
  barriers, launches = [], []
  real_barrier, real_exec = Queue.memory_barrier, Queue.exec
  monkeypatch.setattr(Queue, "memory_barrier", lambda q: barriers.append(q) or real_barrier(q))
  monkeypatch.setattr(Queue, "exec", lambda q, *a, **k: launches.append(q) or real_exec(q, *a, **k))
  Tensor.realize_all(*(x * k + 1 for k in range(3)), (x * 2).sum())
  assert len(launches) >= 4 and barriers == []


@pytest.mark.parametrize("dev", DEVICES)
def test_copy_back_waits_once_and_copies_into_the_returned_array(dev, monkeypatch):
  x = (Tensor(np.arange(1000, dtype=np.float32), device=dev) + 1).realize()
  hcq = open_device(dev)
  hcq.synchronize()
  waits, dests = [], []
  real_wait, real_copyout = Signal.wait, Buffer.copyout
  monkeypatch.setattr(Signal, "wait", lambda s, *a, **k: (s is hcq.timeline and waits.append(a)) or real_wait(s, *a, **k))
  monkeypatch.setattr(Buffer, "copyout", lambda b, dest=None: dests.append(dest) or real_copyout(b, dest))
  before = hcq.timeline_value
  got = x.numpy()
  np.testing.assert_array_equal(got, np.arange(1000, dtype=np.float32) + 1)
  assert len(waits) == 1                                     # one wait: for the copy (or, host-visible, for earlier work)
  assert len(dests) == 1 and dests[0] is not None and np.shares_memory(got, np.frombuffer(dests[0], np.uint8))   # no 2nd copy
  assert hcq.timeline_value - before == (0 if dev == "CPU" else 1)   # staged: one copy-queue submission


class EncodingQueue(CPUQueue):
  """A CPU queue that launches through the queue API's launch-encoding cache, counting the encodings it makes."""
  encoded: list = []
  def _encode_launch(self, prg, local_size):
    self.encoded.append((prg.name, local_size))
    return ("exec", prg.name)   # an encoding holds no reference to its program (it would keep it alive)
  def _exec(self, prg, args, global_size, local_size):
    assert self.encoded_launch(prg, local_size) == ("exec", prg.name)
    super()._exec(prg, args, global_size, local_size)


def test_launch_encodings_are_made_once_per_program_and_workgroup_size_and_go_with_the_program(cpu):
  from tests.hcq.conftest import VADD_SRC
  def launches() -> weakref.ref:
    prg, out = cpu.program("vadd", cpu.compiler.compile(VADD_SRC)), cpu.alloc(256)
    for ls in [(16, 1, 1), (16, 1, 1), (32, 1, 1), (16, 1, 1)]:
      cpu.ordered_submit(EncodingQueue(cpu, "compute"), lambda q: q.exec(prg, prg.fill_kernargs([out, out, out], [64]), (1,), ls))
    cpu.synchronize()
    assert not any(isinstance(v, dict) for v in vars(prg).values())   # the cache is the queue API's, not hung on the program
    assert prg in Queue._launches
    return weakref.ref(prg)
  EncodingQueue.encoded = []
  prg = launches()
  assert EncodingQueue.encoded == [("vadd", (16, 1, 1)), ("vadd", (32, 1, 1))]
  cpu.ordered_submit(cpu.compute_queue())   # the worker lets go of the last command list that named the program
  cpu.synchronize()
  gc.collect()
  assert prg() is None                      # the cache did not keep it alive (and its entry went with it)
