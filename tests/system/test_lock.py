"""Device ownership locks between real processes."""
import os, subprocess, sys, time
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


# another tool's lock: flock on the file, no pid written (as `flock(1)` or a C program would)
FOREIGN = "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); " \
          "print('held', flush=True); sys.stdin.read()"
# a driver that forks: the child inherits the locked open file and keeps it after the parent (whose pid is in it) exits
FORKED = "import os, sys; from drivers.system import DeviceLock; l = DeviceLock('am', sys.argv[1]); pid = os.fork()\n" \
         "if pid: print(pid, flush=True); os._exit(0)\nsys.stdin.read()"


def _start(code, *args):
  p = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                       env=dict(os.environ, PYTHONPATH=os.getcwd()))
  return p, p.stdout.readline().strip()


def test_holder_that_wrote_no_pid_is_found_in_proc():
  path = lock_path("am", "mock-5")
  p, line = _start(FOREIGN, path)
  try:
    assert line == "held" and open(path).read() == ""
    assert holder(path) == p.pid
    with pytest.raises(DeviceBusyError, match=rf"device mock-5 is in use by pid {p.pid} \(python"): DeviceLock("am", "mock-5")
  finally:
    p.kill(); p.wait(); p.stdin.close(); p.stdout.close()
  assert holder(path) is None


def test_forked_child_holding_the_lock_is_named_not_the_exited_parent():
  parent, child = _start(FORKED, "mock-6")
  assert parent.wait(10) == 0 and child.isdigit()
  path = lock_path("am", "mock-6")
  try:
    assert open(path).read().strip() == str(parent.pid)   # the file still names the parent, which is gone
    assert holder(path) == int(child)
  finally:
    os.kill(int(child), 9)
    parent.stdin.close(); parent.stdout.close()
  deadline = time.monotonic() + 60
  while holder(path) is not None: assert time.monotonic() < deadline, "the killed child's lock stayed held"


def test_lock_file_is_created_0644_whatever_the_umask():
  old = os.umask(0)
  try: lk = DeviceLock("am", "0000:07:00.0")
  finally: os.umask(old)
  assert os.stat(lk.path).st_mode & 0o777 == 0o644   # readers (hcq_smi, am_smi of any user) only need to read it
  lk.release()
