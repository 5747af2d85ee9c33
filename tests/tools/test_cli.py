"""What the console scripts and the examples' entries share (tools/cli.py): --version, and an error the user can act
on (no such device, a busy device, a bad DEV, missing firmware) as one line and exit status 2; HCQ_DEBUG=1 adds the
traceback."""
import os, shutil, subprocess, sys, tempfile
from importlib.metadata import version
from pathlib import Path

import pytest

from drivers.system.lock import DeviceLock

REPO = Path(__file__).resolve().parents[2]


def script(*argv: str, **env: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=300,
                        env={**os.environ, "PYTHONPATH": str(REPO), **env})


def one_line(r: subprocess.CompletedProcess, prog: str, expect: str) -> None:
  assert r.returncode == 2, r.stdout + r.stderr
  assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"{prog}: ") and expect in r.stderr, r.stderr


@pytest.mark.parametrize("module,prog", [("tools.hcq_smi", "hcq_smi"), ("tools.am_smi", "am_smi"), ("tools.hcq_rdma", "hcq-rdma")])
def test_version(module, prog):
  r = script("-m", module, "--version")
  assert (r.returncode, r.stdout) == (0, f"{prog} {version('hcq')}\n"), r.stderr


def test_no_such_device_is_one_line_and_exit_2():
  one_line(script("-m", "tools.hcq_smi", "amd", "pids", "--pci_bus", "0000:99"), "hcq_smi", "no amd device matches --pci_bus 0000:99")
  one_line(script("-m", "tools.am_smi", "--list", "--dev", "0000:99"), "am_smi", "no AM-driven GPU matches --dev 0000:99")
  one_line(script("-m", "tools.hcq_rdma", "loopback", "--nic", "bnxt", "--pci", "mock-99"), "hcq-rdma",
           "there is no emulated bnxt device 99")


def test_hcq_debug_shows_the_traceback():
  r = script("-m", "tools.hcq_smi", "amd", "pids", "--pci_bus", "0000:99", HCQ_DEBUG="1")
  assert r.returncode == 2 and r.stderr.startswith("Traceback (most recent call last):"), r.stderr
  assert r.stderr.splitlines()[-1].startswith("hcq_smi: no amd device matches --pci_bus 0000:99"), r.stderr


def test_a_busy_device_is_one_line_naming_its_holder():
  lock = DeviceLock("bnxt", "mock-3")
  try: one_line(script("-m", "tools.hcq_rdma", "loopback", "--nic", "bnxt", "--pci", "mock-3"), "hcq-rdma",
                f"device mock-3 is in use by pid {os.getpid()}")
  finally: lock.release()


def test_examples_report_a_bad_dev_and_missing_firmware_in_one_line(tmp_path):
  one_line(script("examples/queue_demo.py", DEV="FOO"), "queue_demo", "bad device string 'FOO'")
  (empty := tmp_path / "firmware").mkdir()
  one_line(script("examples/queue_demo.py", DEV="MOCKPCI+AMD", HCQ_FIRMWARE_DIR=str(empty)), "queue_demo",
           f"firmware file {empty}/psp_13_0_0_sos.bin not found")


def test_a_missing_tmpdir_is_named_not_a_failed_compile_or_lock(tmp_path):
  gone = tmp_path / "gone"
  expect = f"TMPDIR={gone} does not exist; hcq keeps device locks"
  one_line(script("-m", "tools.hcq_smi", "amd", "list", TMPDIR=str(gone)), "hcq_smi", expect)
  one_line(script("examples/queue_demo.py", "4096", DEV="CPU", TMPDIR=str(gone)), "queue_demo", expect)           # clang's scratch
  one_line(script("examples/queue_demo.py", "4096", DEV="MOCKPCI+AMD", TMPDIR=str(gone)), "queue_demo", expect)   # the lock
  assert not gone.exists()


def test_an_unusable_compile_cache_is_named(tmp_path, monkeypatch):
  from drivers.cpu.compiler import ClangCompiler
  from emu import cc
  (blocked := tmp_path / "file").write_text("")            # a file where the cache directory would go
  monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
  fix = "set XDG_CACHE_HOME to a directory you can write"
  with pytest.raises(NotADirectoryError, match=f"cannot make the compile cache directory {blocked}/hcq/clangcompiler/.*; {fix}"):
    ClangCompiler().compile("int hcq_cache_test;")
  with pytest.raises(NotADirectoryError, match=f"cannot make the compile cache directory {blocked}/hcq/emu/.*; {fix}"):
    cc.build("int hcq_cache_test;")
  r = script("examples/queue_demo.py", "4096", DEV="CPU", XDG_CACHE_HOME=str(blocked))   # the CPU queues' launcher too
  one_line(r, "queue_demo", f"cannot make the compile cache directory {blocked}/hcq/clangcompiler/")


# a lock taken as an unprivileged user: imports and the registry first (the checkout may be unreadable to that user)
AS_USER = "import os, sys; from tools.cli import run; from drivers.system.lock import DeviceLock; " \
          "from drivers.system.registry import vendors; vendors(); os.setgroups([]); os.setresgid(65534, 65534, 65534); " \
          "os.setresuid(65533, 65533, 65533); sys.exit(run('locker', lambda: DeviceLock('bnxt', 'mock-0') and 0))"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to take the lock as another user")
def test_an_unwritable_tmpdir_is_named():
  shared = Path(tempfile.mkdtemp(dir="/tmp"))              # root's: other users reach and read it, cannot write it
  try:
    shared.chmod(0o755)
    r = subprocess.run([sys.executable, "-c", AS_USER], cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(shared)})
    one_line(r, "locker", f"TMPDIR={shared} is not writable by this user; hcq keeps device locks")
    assert list(shared.iterdir()) == []
  finally: shutil.rmtree(shared)


class Failed(Exception): pass


def raising(e: BaseException):
  def body():
    raise e
  return body


@pytest.mark.parametrize("error,status", [(Failed("peer went away"), 1), (ValueError("bad DEV"), 2), (KeyboardInterrupt(), 130)])
def test_run_maps_errors_to_one_line_and_a_status(error, status, capsys, monkeypatch):
  from tools.cli import run
  monkeypatch.delenv("HCQ_DEBUG", raising=False)
  assert run("prog", raising(error), failures=(Failed,)) == status
  assert capsys.readouterr().err == f"prog: {error if status != 130 else 'interrupted'}\n"


@pytest.mark.parametrize("bug", [TypeError("x"), KeyError("k"), NotImplementedError("hook")])
def test_run_lets_a_bug_show_its_traceback(bug):
  from tools.cli import run
  with pytest.raises(type(bug)): run("prog", raising(bug))
