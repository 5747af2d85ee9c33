"""hcq-rdma on emulated NICs (mock-<n>), each side its own process: loopback, connect (WRITE, READ back, sizes from 1 B
to 32 MiB, -a's 2 B ... 8 MiB), perftest's units (MB/sec of 2^20 bytes, Gb/sec with --report_gbits), and peers that are
hostile, broken or silent: each run ends within its timeout with one line and exit 1, never a traceback or a hang.
Ctrl-C ends it quietly; hcq_smi bnxt lists the NICs the runs left state in."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from drivers.rdma import rdma_vendors

BIN = Path(sys.executable).parent
HCQ_RDMA, HCQ_SMI = BIN / "hcq-rdma", BIN / "hcq_smi"
REPO = Path(__file__).resolve().parents[2]
HELLO = ('{"type": "hello", "version": 2, "qpn": 5, "psn": 7, "gid": "00000000000000000000ffff0a000002", '
         '"mac": "02aabbccdd02", "mtu": 4096, "max_size": 1073741824}')


def run(*argv: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
  return subprocess.run([str(HCQ_RDMA), *argv], capture_output=True, text=True, timeout=timeout, cwd=REPO, **kw)


def last_json(r: subprocess.CompletedProcess) -> dict:
  assert r.returncode == 0, r.stdout + r.stderr
  return json.loads(r.stdout.splitlines()[-1])


def clean_failure(r: subprocess.CompletedProcess, expect: str) -> None:
  """Exit 1, one line on stderr saying `expect`, no traceback."""
  assert r.returncode == 1, r.stdout + r.stderr
  assert "Traceback" not in r.stderr and expect in r.stderr, r.stderr


@pytest.mark.parametrize("flags,unit,per_s", [((), "gbytes_per_s", 1e9), (("--report_gbits",), "gbits_per_s", 1e9 / 8)])
def test_loopback_writes_verifies_and_reports_json_whose_keys_name_their_unit(flags, unit, per_s):
  out = last_json(run("loopback", "--nic", "bnxt", "--pci", "mock-0", "-s", "64K", "-n", "8", *flags, "--json"))
  assert out["verified"] is True and out["bytes"] == 8 * 65536 and out["size"] == 65536 and out["iters"] == 8
  assert out[unit] == pytest.approx(out["bytes"] / out["seconds"] / per_s, rel=1e-3, abs=1e-6) and out[f"{unit}_peak"] >= out[unit]
  assert out["msg_rate_mpps"] == pytest.approx(8 / out["seconds"] / 1e6, rel=1e-3, abs=1e-6) and "gbps" not in out
  assert 0 < out["lat_us"]["p50"] <= out["lat_us"]["p99"]


def table(stdout: str) -> tuple[list[str], list[list[str]]]:
  """perftest's table: its header and its rows (up to the rule under them)."""
  lines = stdout.splitlines()
  at = next(i for i, line in enumerate(lines) if "#bytes" in line)
  end = next(i for i in range(at, len(lines)) if lines[i].startswith("---"))
  return lines[at].split(), [line.split() for line in lines[at + 1:end]]


@pytest.mark.parametrize("flags,unit,unit_bytes", [((), "MB/sec", 1 << 20), (("--report_gbits",), "Gb/sec", 1e9 / 8)])
def test_loopback_prints_the_perftest_table_in_its_units(flags, unit, unit_bytes):
  """BW average in MB/sec is 2^20 bytes a second (perftest's MB), in Gb/sec 10^9 bits: size * message rate."""
  r = run("loopback", "--nic", "bnxt", "--pci", "mock-0", "--size", "256K", "--iters", "4", *flags)
  assert r.returncode == 0, r.stderr
  header, (row,) = table(r.stdout)
  assert header == ["#bytes", "#iterations", "BW", f"peak[{unit}]", "BW", f"average[{unit}]", "MsgRate[Mpps]"]
  assert row[:2] == ["262144", "4"] and "data verified" in r.stdout
  # (within what the printed digits hold: 2 decimals of bandwidth, 6 of the message rate)
  assert float(row[3]) * unit_bytes == pytest.approx(262144 * float(row[4]) * 1e6, rel=1e-3, abs=0.006 * unit_bytes + 262144 * 0.6)


def test_all_sizes_prints_a_row_for_each_power_of_two_from_2_bytes_to_8_mib():
  r = run("loopback", "--nic", "bnxt", "--pci", "mock-0", "-a", "-n", "2")
  assert r.returncode == 0, r.stderr
  _, rows = table(r.stdout)
  assert [int(row[0]) for row in rows] == [1 << k for k in range(1, 24)] and {row[1] for row in rows} == {"2"}
  assert r.stdout.splitlines()[-1].strip() == "data verified"


def test_connect_all_sizes_verifies_and_reads_back_each_size_on_the_other_side():
  r = run("connect", "--nic", "mlx5", "--pci", "mock-0", "--local", "--remote-pci", "mock-1", "-a", "-n", "1", "--read", "--json")
  assert r.returncode == 0, r.stderr
  rows = [json.loads(line) for line in r.stdout.splitlines()]
  assert [o["size"] for o in rows] == [1 << k for k in range(1, 24)]
  assert all(o["verified"] is True and o["read_back"] is True for o in rows)
  assert "23 sizes, the last 8388608 bytes, received into mlx5 mock-1" in r.stderr


@pytest.mark.parametrize("nic", list(rdma_vendors()))
def test_a_32_mib_transfer_works_on_both_nics(nic):
  """The largest transfer the test machine affords in a few seconds (a 1 GiB MR: tests/drivers/bnxt/test_bnxt_host_mr.py);
  mlx5 needs a mailbox chain past the command queue's standing pool for its MR (129 blocks)."""
  out = last_json(run("connect", "--nic", nic, "--pci", "mock-0", "--local", "--remote-pci", "mock-1", "-s", "32M", "-n", "1",
                      "--json"))
  assert out["verified"] is True and out["size"] == 32 << 20


@pytest.mark.parametrize("flag,typo,meant", [("--pci", "mock0", "mock-0"), ("--pci", "MOCK_1", "mock-1"), ("--remote-pci", "mock2", "mock-2")])
def test_a_mistyped_emulated_nic_is_named_before_anything_opens(flag, typo, meant):
  argv = ["--pci", "mock-0", "--local", "--remote-pci", "mock-1"]
  argv[argv.index(flag) + 1] = typo
  r = run("connect", "--nic", "bnxt", *argv)
  assert r.returncode == 2 and f"argument {flag}: {typo!r} is no device: did you mean {meant}?" in r.stderr
  assert "Warning" not in r.stderr and "sysfs" not in r.stderr, r.stderr


@pytest.mark.parametrize("size", ["1", "4M+1"])
def test_connect_across_two_processes_writes_and_reads_back(size):
  out = last_json(run("connect", "--nic", "bnxt", "--pci", "mock-0", "--local", "--remote-pci", "mock-1", "--size", size,
                      "--iters", "3", "--read", "--json"))
  assert out["verified"] is True and out["read_back"] is True


def test_the_models_keep_state_and_hcq_smi_lists_them():
  env = {**os.environ}
  last_json(run("connect", "--nic", "bnxt", "--pci", "mock-2", "--local", "--remote-pci", "mock-3", "--size", "4096",
                "--iters", "1", "--json", env=env))
  r = subprocess.run([str(HCQ_SMI), "bnxt", "list", "--json"], capture_output=True, text=True, timeout=60, env=env)
  rows = {d["bus"]: d for d in json.loads(r.stdout)}
  assert {"mock-2", "mock-3"} <= set(rows) and rows["mock-2"]["kind"] == "emulated" and rows["mock-2"]["in_use"] is False


def peer(script: str) -> str:
  """A --remote-cmd running `script` in Python."""
  return f"{sys.executable} -c {json.dumps(script)}"


@pytest.mark.parametrize("script,expect", [
  ("print('garbage', flush=True); import time; time.sleep(120)", "the remote side sent invalid JSON"),
  ("print('{\"type\": \"hello\", \"qpn\":', flush=True); import time; time.sleep(120)", "sent invalid JSON"),
  (f"print({HELLO!r}.replace('\"qpn\": 5', '\"qpn\": \"5\"'), flush=True); import time; time.sleep(120)",
   "'hello' message: qpn must be a 24-bit integer, got '5'"),
  (f"print({HELLO!r}.replace('\"psn\": 7', '\"psn\": 16777216'), flush=True); import time; time.sleep(120)",
   "psn must be a 24-bit integer, got 16777216"),
  ("import time; time.sleep(120)", "the remote side sent nothing for 3 s while waiting for its hello"),
  ("pass", "the remote side closed the control channel while waiting for its hello"),
  (f"import sys, time; print({HELLO!r}, flush=True); sys.stdin.readline(); "
   "print('{\"type\": \"ready\", \"addr\": 4096, \"rkey\": 1, \"size\": 4096}', flush=True); time.sleep(120)",
   "the remote MR is too small: it registered 4096 bytes at 0x1000; the transfer writes 8192"),
  (f"import sys, time; print({HELLO!r}, flush=True); sys.stdin.readline(); "
   "print('{\"type\": \"ready\", \"addr\": 4096, \"rkey\": 4294967296, \"size\": 8192}', flush=True); time.sleep(120)",
   "rkey must be a 32-bit integer, got 4294967296"),
])
def test_a_hostile_broken_or_silent_peer_ends_the_run_within_the_timeout(script, expect):
  """A peer that sends something bad is answered at once; only the silent one waits out --timeout (3 s). The longer
  --timeout of the others covers a slow start of the peer's interpreter on a loaded machine, and the run must still
  end long before the peer's own 120 s sleep does."""
  silent = "sent nothing" in expect
  t0 = time.monotonic()
  r = run("connect", "--nic", "bnxt", "--pci", "mock-0", "--remote-cmd", peer(script), "--size", "8192",
          "--timeout", "3" if silent else "30", timeout=150)
  clean_failure(r, expect)
  assert time.monotonic() - t0 < 100


def test_serve_checks_the_clients_messages_and_answers_with_an_error():
  r = run("serve", "--nic", "bnxt", "--pci", "mock-1", "--timeout", "3", input='{"type": "hello", "size": "big"}\n')
  clean_failure(r, "hcq-rdma serve: the client's 'hello' message lacks")
  lines = r.stdout.splitlines()
  assert json.loads(lines[0])["type"] == "hello" and json.loads(lines[-1])["type"] == "error"


def test_a_busy_remote_nic_is_reported_by_the_remote_side():
  r = run("connect", "--nic", "bnxt", "--pci", "mock-0", "--local", "--remote-pci", "mock-0", "--size", "4096", "--timeout", "10")
  clean_failure(r, "the remote side failed: mock-0: device mock-0 is in use by pid")


def children(pid: int) -> list[int]:
  found = []
  for d in Path("/proc").iterdir():
    try:
      if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid: found.append(int(d.name))
    except (OSError, IndexError, ValueError): pass
  return found


def test_ctrl_c_ends_the_run_quietly():
  p = subprocess.Popen([str(HCQ_RDMA), "connect", "--nic", "bnxt", "--pci", "mock-0", "--remote-cmd", peer("import time; time.sleep(60)"),
                        "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
  deadline = time.monotonic() + 60
  while time.monotonic() < deadline and not children(p.pid):   # the silent peer starts once the NIC is up
    time.sleep(0.05)
  p.send_signal(signal.SIGINT)
  _, err = p.communicate(timeout=30)
  assert p.returncode == 130 and err.strip() == "hcq-rdma: interrupted", err


def test_connect_over_ssh_runs_serve_on_the_other_host(tmp_path):
  """--remote USER@HOST: `ssh -o BatchMode=yes ... USER@HOST hcq-rdma serve ...`; here an ssh that runs it locally."""
  fake = tmp_path / "bin" / "ssh"
  fake.parent.mkdir()
  fake.write_text('#!/bin/sh\n[ "$1 $2" = "-o BatchMode=yes" ] || exit 99\nwhile [ "$1" = -o ]; do shift 2; done\n'
                  'echo "$1" > "$(dirname "$0")/host"\nshift\nexec sh -c "$*"\n')
  fake.chmod(0o755)
  env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}"}
  out = last_json(run("connect", "--nic", "bnxt", "--pci", "mock-0", "--remote", "me@box", "--remote-pci", "mock-1",
                      "--size", "64K", "--iters", "2", "--json", env=env))
  assert out["verified"] is True and (fake.parent / "host").read_text().strip() == "me@box"


def smi(*argv: str) -> subprocess.CompletedProcess:
  return subprocess.run([str(HCQ_SMI), "bnxt", *argv], capture_output=True, text=True, timeout=60)


def test_hcq_smi_lists_frees_and_resets_emulated_nics():
  holder = subprocess.Popen([str(HCQ_RDMA), "serve", "--nic", "bnxt", "--pci", "mock-4", "--timeout", "120"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
  try:
    assert json.loads(holder.stdout.readline())["type"] == "hello"    # up, and holding mock-4
    rows = {d["bus"]: d for d in json.loads(smi("list", "--json").stdout)}
    assert (rows["mock-4"]["kind"], rows["mock-4"]["pid"]) == ("emulated", holder.pid)
    assert smi("pids", "--pci_bus", "mock-4").stdout.startswith(f"mock-4: pid {holder.pid} (")
    r = smi("reset", "--pci_bus", "mock-4")
    assert r.returncode == 1 and f"mock-4: reset failed: device mock-4 is in use by pid {holder.pid}" in r.stderr
    r = smi("kill_pids", "--pci_bus", "mock-4", "--sudoless")
    assert r.returncode == 0 and "mock-4: killed pid" in r.stdout and holder.wait(30) == -signal.SIGKILL
  finally:
    if holder.poll() is None: holder.kill()
    holder.wait()
  r = smi("reset", "--pci_bus", "mock-4")
  assert (r.returncode, r.stdout.strip()) == (0, "mock-4: reset"), r.stderr
  loaded = {line.split()[0] for line in Path("/proc/modules").read_text().splitlines()} if Path("/proc/modules").exists() else set()
  r = smi("rmmod", "--expect")
  assert r.returncode == (1 if loaded & {"bnxt_en", "bnxt_re"} else 0)
