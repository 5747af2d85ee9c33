import pytest
from drivers.cpu import CPUDevice
from drivers.hcq import patience
from drivers.cpu.device import _Worker
from drivers.hcq.ring import Ring

# out[i] = a[i] + b[i] over n int32s (CPU kernel ABI: args = out, a, b pointers, then n)
VADD_SRC = r"""
#include <stdint.h>
void vadd(const uint8_t *args, const uint32_t *gid, const uint32_t *lsize) {
  int32_t *out = *(int32_t **)(args + 0), *a = *(int32_t **)(args + 8), *b = *(int32_t **)(args + 16);
  int32_t n = *(int32_t *)(args + 24);
  for (uint32_t l = 0; l < lsize[0]; l++) {
    int64_t i = (int64_t)gid[0] * lsize[0] + l;
    if (i < n) out[i] = a[i] + b[i];
  }
}
/* spins until *flag != 0, then writes 1 to *out: lets tests hold a queue busy on purpose */
void spin(const uint8_t *args, const uint32_t *gid, const uint32_t *lsize) {
  volatile int32_t *flag = *(volatile int32_t **)(args + 0), *out = *(int32_t **)(args + 8);
  while (!*flag) {}
  *out = 1;
}
"""


@pytest.fixture
def cpu():
  dev = CPUDevice()   # an instance of its own: the process-wide one from open_device() may hold other tests' buffers
  yield dev
  dev.close()
  assert dev.allocated_bytes == 0


@pytest.fixture
def vadd(cpu):
  return cpu.program("vadd", cpu.compiler.compile(VADD_SRC))


def count_submissions(monkeypatch) -> list:
  """Every hand-over of commands to a device: a ring submission (copy + doorbell) or a CPU worker's command list."""
  subs = []
  real_ring, real_put = Ring.submit, _Worker.put
  def ring_submit(r, packets, keep):
    subs.append(r.device.name)
    real_ring(r, packets, keep)
  def worker_put(w, cmds):
    if cmds is not None: subs.append(w.device.name)
    real_put(w, cmds)
  monkeypatch.setattr(Ring, "submit", ring_submit)
  monkeypatch.setattr(_Worker, "put", worker_put)
  return subs


class FakeClock:
  """Stands in for the `time` module of drivers.hcq.patience, so a test controls how long waits last without
  sleeping: time passes only while a wait naps (`step_ms` per nap), and `device(now_ms)` plays the device at each nap."""
  def __init__(self, step_ms: float, device):
    self.now_ms, self.step_ms, self.device = 0.0, step_ms, device

  def monotonic(self) -> float: return self.now_ms / 1000

  def sleep(self, s: float) -> None:
    self.now_ms += self.step_ms
    self.device(self.now_ms)


@pytest.fixture
def clock(monkeypatch):
  """install(step_ms, device) -> FakeClock, with patience.STALL_MS set to 100 (fake) ms."""
  monkeypatch.setattr(patience, "STALL_MS", 100)
  def install(step_ms: float, device) -> FakeClock:
    c = FakeClock(step_ms, device)
    monkeypatch.setattr(patience, "time", c)
    return c
  return install
