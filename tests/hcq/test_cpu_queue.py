"""The CPU device beyond the queue-API contract (tests/hcq/contract.py): kernels, ordering, timeouts, graphs, faults."""
import os, subprocess, sys, threading, time
import numpy as np
import pytest
from drivers.hcq import Graph, SignalTimeout, CompileError
from tests.hcq.conftest import VADD_SRC


def _ints(dev, arr):
  buf = dev.alloc(arr.nbytes)
  buf.copyin(arr.data)
  return buf


def _read(buf, dtype=np.int32):
  return np.frombuffer(buf.copyout(), dtype=dtype)


def test_kernel_result_matches_numpy(cpu, vadd):
  n = 1001   # odd: the last workgroup is partial
  a, b = np.arange(n, dtype=np.int32), np.arange(n, dtype=np.int32) * 7 - 50
  out, ba, bb = cpu.alloc(n * 4), _ints(cpu, a), _ints(cpu, b)
  secs = vadd(out, ba, bb, global_size=((n + 63) // 64,), local_size=(64,), vals=(n,), wait=True)
  assert secs is not None and secs >= 0
  np.testing.assert_array_equal(_read(out), a + b)


def test_wait_in_one_queue_orders_it_after_a_signal_from_another(cpu, vadd):
  n = 256
  a = np.arange(n, dtype=np.int32)
  ba, bb, tmp, out = _ints(cpu, a), _ints(cpu, a), cpu.alloc(n * 4), cpu.alloc(n * 4)
  go, copied = cpu.new_signal(0), cpu.new_signal(0)
  # compute waits for `copied`, which the copy queue writes only after `go` is set by the host
  cpu.compute_queue().wait(copied, 1).exec(vadd, vadd.fill_kernargs([out, tmp, bb], [n]), (4,), (64,)) \
    .signal(cpu.timeline, v := cpu.next_timeline()).submit()
  cpu.copy_queue().wait(go, 1).copy(tmp, ba).signal(copied, 1).submit()
  time.sleep(0.05)   # a window for a queue that ignores its wait to run ahead; a correct one stays blocked however long
  assert copied.value == 0 and cpu.timeline.value < v    # both queues are blocked on the host
  go.value = 1
  cpu.timeline.wait(v, timeout_ms=5000)
  assert copied.value == 1
  np.testing.assert_array_equal(_read(out), a + a)


def test_signal_timeout_names_device_queue_expected_and_last_value(cpu):
  sig = cpu.new_signal(3, name="never")
  cpu.compute_queue().wait(sig, 10).signal(sig, 4).submit()   # can never run: waits for itself
  with pytest.raises(SignalTimeout) as e: sig.wait(5, timeout_ms=100)
  msg = str(e.value)
  assert "CPU" in msg and "compute queue" in msg and "did not reach 5" in msg and "last seen 3" in msg
  sig.value = 10   # release the queue so the device can close
  cpu.synchronize(timeout_ms=5000)


def test_timestamps_are_ordered_and_bracket_the_kernel(cpu):
  lib = cpu.compiler.compile(VADD_SRC)
  spin = cpu.program("spin", lib)
  flag, out = _ints(cpu, np.zeros(1, np.int32)), cpu.alloc(4)
  t0, t1 = cpu.new_signal(), cpu.new_signal()
  now = lambda: time.monotonic_ns() / 1000        # µs of the CPU device's clock (CLOCK_MONOTONIC)
  submitted = now()
  cpu.compute_queue().timestamp(t0).exec(spin, spin.fill_kernargs([flag, out]), (1,), (1,)).timestamp(t1) \
     .signal(cpu.timeline, v := cpu.next_timeline()).submit()
  deadline = time.monotonic() + 60
  while t0.timestamp < submitted:                 # the queue reached the kernel: it spins until the flag is set
    assert time.monotonic() < deadline, "the queue never wrote its first timestamp"
  released = now()
  flag.host_view[:4] = np.int32(1).tobytes()
  cpu.timeline.wait(v)
  assert t0.timestamp <= released <= t1.timestamp   # the kernel was still running when the host released it
  assert _read(out)[0] == 1


def test_graph_replays_with_patched_buffers_and_values(cpu, vadd):
  n = 128
  a, b = np.arange(n, dtype=np.int32), np.full(n, 5, np.int32)
  ba, bb, out, out2 = _ints(cpu, a), _ints(cpu, b), cpu.alloc(n * 4), cpu.alloc(n * 4)
  g = Graph(cpu)
  step = g.exec(vadd, out, ba, bb, global_size=(2,), local_size=(64,), vals=(n,))
  g.copy(out2, out)
  g(wait=True)
  np.testing.assert_array_equal(_read(out2), a + b)
  c = np.arange(n, dtype=np.int32) * -3
  bc = _ints(cpu, c)
  g(replace={bb: bc}, vals={step: (n // 2,)}, wait=True)     # new input, only the first half computed
  got = _read(out2)
  np.testing.assert_array_equal(got[:n // 2], (a + c)[:n // 2])
  np.testing.assert_array_equal(got[n // 2:], (a + b)[n // 2:])


def test_many_launches_chained_across_queues(cpu, vadd):
  n = 64
  acc, one = _ints(cpu, np.zeros(n, np.int32)), _ints(cpu, np.ones(n, np.int32))
  tmp = cpu.alloc(n * 4)
  for _ in range(200):   # acc = acc + 1 on compute, copied back by the copy queue, alternating
    cpu.compute_queue().wait(cpu.timeline, cpu.timeline_value - 1).exec(vadd, vadd.fill_kernargs([tmp, acc, one], [n]), (1,), (64,)) \
       .signal(cpu.timeline, v := cpu.next_timeline()).submit()
    cpu.copy_queue().wait(cpu.timeline, v).copy(acc, tmp).signal(cpu.timeline, cpu.next_timeline()).submit()
  cpu.synchronize()
  np.testing.assert_array_equal(_read(acc), np.full(n, 200))


def test_compile_errors_carry_diagnostics(cpu):
  with pytest.raises(CompileError, match="undeclared"): cpu.compiler.compile("void k(void) { x = 1; }")


def test_program_must_exist_in_the_library(cpu):
  with pytest.raises(ValueError, match="no kernel function named 'nope'"): cpu.program("nope", cpu.compiler.compile(VADD_SRC))


def test_compile_cache_hits_on_second_compile(cpu):
  src = VADD_SRC + f"\n// {time.time_ns()}\n"
  before = cpu.compiler.compiled
  lib1 = cpu.compiler.compile(src)
  hits = cpu.compiler.cache_hits
  lib2 = cpu.compiler.compile(src)
  assert lib1 == lib2 and cpu.compiler.compiled == before + 1 and cpu.compiler.cache_hits == hits + 1


def test_freed_buffer_use_is_an_error_and_close_frees_everything(cpu):
  a = cpu.alloc(4096)
  a.free()
  with pytest.raises(RuntimeError, match="freed"): a.copyout()
  cpu.alloc(1 << 20)
  assert cpu.allocated_bytes == 1 << 20   # the fixture checks close() returns this to 0


def test_concurrent_host_threads_launching(cpu, vadd):
  n = 64
  ones = _ints(cpu, np.ones(n, np.int32))
  outs = [cpu.alloc(n * 4) for _ in range(4)]
  def work(o):
    for _ in range(20): vadd(o, ones, ones, global_size=(1,), local_size=(64,), vals=(n,))
  ts = [threading.Thread(target=work, args=(o,)) for o in outs]
  for t in ts: t.start()
  for t in ts: t.join()
  cpu.synchronize()
  for o in outs: np.testing.assert_array_equal(_read(o), np.full(n, 2))


BAD_SRC = r"""
#include <stdint.h>
void bad(const uint8_t *args, const uint32_t *gid, const uint32_t *lsize) {
  if (gid[0] == 3) *(volatile int *)(uintptr_t)0xdead0000 = 1;   /* workgroup 3 writes where nothing is mapped */
}
"""


def test_kernel_touching_unmapped_memory_is_a_device_fault_not_a_crash():
  from drivers.cpu import CPUDevice
  from drivers.hcq import DeviceFault
  dev = CPUDevice()
  bad = dev.program("bad", dev.compiler.compile(BAD_SRC))
  bad(global_size=(8,), local_size=(1,))
  with pytest.raises(DeviceFault, match=r"kernel bad touched an unmapped or protected address 0xdead0000 in workgroup \(3, 0, 0\)"):
    dev.synchronize(timeout_ms=5000)
  dev.close()
  ok = CPUDevice()                     # the process lives on, and a fresh device computes
  a, out = _ints(ok, np.arange(64, dtype=np.int32)), ok.alloc(256)
  ok.program("vadd", ok.compiler.compile(VADD_SRC))(out, a, a, global_size=(1,), local_size=(64,), vals=(64,), wait=True)
  np.testing.assert_array_equal(_read(out), 2 * np.arange(64))
  ok.close()


FAULT_AFTER_FAULTHANDLER = """
import faulthandler
from drivers.cpu import CPUDevice
from tests.hcq.test_cpu_queue import BAD_SRC
dev = CPUDevice()
bad = dev.program("bad", dev.compiler.compile(BAD_SRC))
bad(global_size=(1,), local_size=(1,), wait=True)  # workgroup 0 only: loads the launcher (and its handler), no fault
faulthandler.disable(); faulthandler.enable()     # a SIGSEGV handler installed after the launcher's own
bad(global_size=(8,), local_size=(1,))
try: dev.synchronize(timeout_ms=60000)
except Exception as e: print(e)
"""


def test_a_fault_handler_installed_later_does_not_hide_the_faulting_address():
  """Python's faulthandler (pytest enables it) re-raises a fault as a sent signal, whose si_addr is the sender's pid;
  the launcher puts its handler back in front before each launch, so the address is the one the kernel touched."""
  r = subprocess.run([sys.executable, "-c", FAULT_AFTER_FAULTHANDLER], capture_output=True, text=True, timeout=120,
                     cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
  assert "touched an unmapped or protected address 0xdead0000 in workgroup (3, 0, 0)" in r.stdout, r.stdout + r.stderr
  assert "Fatal Python error" not in r.stderr


def test_free_waits_for_work_that_still_uses_the_buffer(cpu):
  """Freeing a buffer a queued kernel still reads must not pull the memory from under it."""
  spin = cpu.program("spin", cpu.compiler.compile(VADD_SRC))
  flag, out = _ints(cpu, np.zeros(1, np.int32)), cpu.alloc(4)
  spin(flag, out, global_size=(1,), local_size=(1,))
  released = []
  def release():
    released.append(True)
    flag.host_view[:4] = np.int32(1).tobytes()
  threading.Timer(0.05, release).start()
  out.free()                                 # blocks until the kernel that writes `out` has finished
  assert released == [True] and cpu.timeline.value == cpu.timeline_value - 1
