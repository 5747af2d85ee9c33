"""Staging copies (drivers.hcq.staging) with sizes around the staging buffer size, and fewer buffers than chunks.
Run on the CPU device with small staging buffers: its copy queue moves bytes between device addresses like a DMA
engine, so the chunking, buffer reuse and ordering are the same code the GPUs use."""
import threading
import numpy as np
import pytest
from drivers.hcq.staging import Staging
from tests.hcq.conftest import VADD_SRC

SIZE, COUNT = 64, 2


@pytest.fixture
def staging(cpu): return Staging(cpu, SIZE, COUNT)


@pytest.mark.parametrize("n", [1, SIZE - 1, SIZE, SIZE + 1, COUNT * SIZE, COUNT * SIZE + 1, 5 * SIZE + 7])
def test_copyin_and_copyout_of_sizes_around_the_staging_size(cpu, staging, n):
  data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
  buf = cpu.alloc(n + 8)
  before = cpu.timeline_value
  staging.copyin(buf.va + 3, memoryview(data))
  assert cpu.timeline_value - before == -(-n // SIZE)           # one ordered copy-queue submission per chunk
  assert bytes(buf.host_view[3:3 + n]) == data.tobytes() and bytes(buf.host_view[:3]) == bytes(3)
  out = bytearray(n)
  staging.copyout(memoryview(out), buf.va + 3)
  assert out == data.tobytes()
  assert cpu.timeline.value == cpu.timeline_value - 1          # every chunk is done when it returns


def test_copyout_is_ordered_after_earlier_work(cpu, staging):
  """No host-side synchronize before it: the copy queue's wait on the timeline puts the copy after the kernel that
  writes the data (held running here until the copy has been submitted)."""
  spin = cpu.program("spin", cpu.compiler.compile(VADD_SRC))
  flag, out = cpu.alloc(4), cpu.alloc(4)
  spin(flag, out, global_size=(1,), local_size=(1,))
  submitted, got = cpu.timeline_value + 1, bytearray(4)
  t = threading.Thread(target=staging.copyout, args=(memoryview(got), out.va))
  t.start()
  while cpu.timeline_value < submitted: t.join(0.001)   # until the copy is on the copy queue
  flag.host_view[:4] = (1).to_bytes(4, "little")
  t.join(10)
  assert int.from_bytes(got, "little") == 1


def test_zero_bytes_submit_nothing(cpu, staging):
  before = cpu.timeline_value
  staging.copyin(cpu.alloc(8).va, memoryview(b""))
  staging.copyout(memoryview(bytearray()), cpu.alloc(8).va)
  assert cpu.timeline_value == before
