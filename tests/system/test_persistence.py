"""An emulated device works in every process, not only the first: each emulated device string the registry offers is
opened by four processes in a row, each checking copies, signals and (where the device runs kernels) a computed result
against numpy; then a process is killed with SIGKILL in the middle of a copy, and the next ones open the device it left
and compute correctly again. The emulated GPUs behind the AM driver keep their state in files under TMPDIR (VRAM,
registers, firmware), so every later process meets what the earlier one left, as it would meet real hardware."""
import os, signal, subprocess, sys, threading
import pytest
from drivers.hcq.devspec import openable_vendors
from tests.hcq.contract import device_strings

EMULATED = device_strings()     # every emulated device string the registered vendors offer
NO_KERNELS = {s for v in openable_vendors() if not v.kernels for s in v.emulated_devices}   # (Vendor.kernels)
CHILD_TIMEOUT_S = 300           # a child that hangs fails the test instead of stalling it

OPEN = r"""
import numpy as np
from drivers.hcq import open_device
from tests.hcq.contract import check_copy
dev = open_device({dev!r})
"""

# one process's work: copies (host to device, device to device, back), a signal on each queue reaching its value under an
# explicit timeout, and a reduction computed on the device
WORK = OPEN + r"""
check_copy(dev, 300_001, 3, 1)
for queue in (dev.copy_queue, dev.compute_queue):
  s = dev.new_signal(0)
  queue().signal(s, 7).submit()
  s.wait(7, timeout_ms=20_000)
if {kernels}:
  from compute import Tensor
  x = np.random.default_rng({seed}).standard_normal(1000).astype(np.float32)
  got = (Tensor(x) * 2 + 1).sum().item()
  assert np.isclose(got, (x.astype(np.float64) * 2 + 1).sum(), rtol=1e-4), (got, (x * 2 + 1).sum())
print('ok', flush=True)
"""

# copies in flight when the process dies: host copies (through the SRAM windows on MOCKUSB) and a device copy, round after
# round; it says so after its first round and keeps copying until it is killed
COPYING = OPEN + r"""
n = 1 << 20
data = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
a, b = dev.alloc(n), dev.alloc(n)
while True:
  a.copyin(data.data)
  dev.ordered_submit(dev.copy_queue(), lambda q: q.copy(b, a, n))
  assert np.array_equal(np.frombuffer(b.copyout(), np.uint8), data)
  print('copying', flush=True)
"""


def run(code: str, dev: str) -> subprocess.Popen:
  env = dict(os.environ, PYTHONPATH=os.getcwd(), DEV=dev)
  return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def works(dev: str, seed: int) -> None:
  p = run(WORK.format(dev=dev, kernels=dev not in NO_KERNELS, seed=seed), dev)
  out, err = p.communicate(timeout=CHILD_TIMEOUT_S)
  assert p.returncode == 0 and out.split() == ["ok"], f"process {seed} on {dev} (exit {p.returncode}):\n{out}{err}"


@pytest.mark.parametrize("dev", EMULATED)
def test_an_emulated_device_works_in_every_process_and_after_a_process_killed_mid_copy(dev):
  for seed in range(4): works(dev, seed)
  p = run(COPYING.format(dev=dev), dev)
  hung = threading.Timer(CHILD_TIMEOUT_S, p.kill)   # a child that never gets through its first round fails the test
  hung.start()
  try:
    line = p.stdout.readline()
    hung.cancel()
    assert line.strip() == "copying", p.communicate(timeout=CHILD_TIMEOUT_S)[1]
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=CHILD_TIMEOUT_S)
  finally:
    if p.poll() is None: p.kill(); p.wait()
    p.stdout.close(); p.stderr.close()
  assert p.returncode == -signal.SIGKILL    # it was still copying, not failed
  for seed in range(4, 6): works(dev, seed)
