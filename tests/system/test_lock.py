"""Device ownership locks between real processes."""
import os, subprocess, sys
import pytest
from drivers.system import DeviceLock, DeviceBusyError, list_locks
from drivers.system.lock import lock_path, holder

HOLD = "import sys, time; from drivers.system import DeviceLock; l = DeviceLock('am', sys.argv[1]); print('held', flush=True); time.sleep(60)"


def _holder_process(bus):
  p = subprocess.Popen([sys.executable, "-c", HOLD, bus], stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=os.getcwd()))
  assert p.stdout.readline().strip() == b"held"
  return p


def test_second_process_gets_error_naming_holder_pid_and_fix():
  p = _holder_process("0000:03:00.0")
  try:
    with pytest.raises(DeviceBusyError) as e: DeviceLock("am", "0000:03:00.0")
    msg = str(e.value)
    assert f"pid {p.pid}" in msg and "hcq_smi amd kill_pids --pci_bus 0000:03:00.0" in msg
    assert holder(lock_path("am", "0000:03:00.0")) == p.pid
    assert [(l.bus, l.pid) for l in list_locks("am")] == [("0000:03:00.0", p.pid)]
  finally:
    p.kill(); p.wait()
  # a killed holder leaves no stale lock: the kernel drops flock locks with the process
  lk = DeviceLock("am", "0000:03:00.0")
  assert holder(lk.path) == os.getpid()
  lk.release()
  assert holder(lk.path) is None and list_locks("am")[0].pid is None


def test_lock_dir_follows_tmpdir(tmp_path):
  lk = DeviceLock("nv", "0000:41:00.0")
  assert lk.path == str(tmp_path / "nv_0000:41:00.0.lock")
  lk.release()


def test_unknown_prefix_is_rejected():
  with pytest.raises(ValueError, match="unknown lock prefix"): DeviceLock("xx", "0000:00:00.0")
