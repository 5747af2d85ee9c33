"""What the console scripts and the examples' entries share (tools/cli.py): --version, and an error the user can act
on (no such device, a busy device, a bad DEV, missing firmware) as one line and exit status 2; HCQ_DEBUG=1 adds the
traceback."""
import os, subprocess, sys
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
