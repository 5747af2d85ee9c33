"""am_smi against the emulated Navi31: fields, metrics that follow the load of the owning process, pids and kill."""
import io, os, pty, re, select, signal, subprocess, sys, time
import pytest
from rich.console import Console
from drivers.amd.smi import devices, status
from drivers.system import open_model
from emu.amdgpu.smu import SMUModel
from tools.am_smi import main, panel, render
from tests.procs import start

LOAD = r"""
from drivers.hcq import open_device
from tests.drivers.amd.kernels import SRC
d = open_device('MOCKPCI+AMD')
x = d.alloc(1 << 20)
add1 = d.program("add1", d.compiler.compile(SRC))
print('up', flush=True)
while True: add1(x, global_size=(1024,), local_size=(64,), wait=%s)
"""


@pytest.fixture
def owner():
  """A process that booted mock-0 and keeps its compute queue busy, one launch at a time."""
  p = start(LOAD % True)
  yield p
  p.kill(); p.wait()


def until(cond, what: str, timeout: float = 120.0):
  """Poll `cond` until it returns something true (returned); fail after `timeout` s without it."""
  deadline = time.monotonic() + timeout
  while not (got := cond()):
    assert time.monotonic() < deadline, f"timed out waiting for {what}"
  return got


def test_list_shows_every_field_of_the_emulated_gpu(owner, capsys):
  assert main(["--list"]) == 0
  out = capsys.readouterr().out
  for field in ("AM Monitor", "mock-0", f"pid {owner.pid}", "GFX", "MEM", "VRAM", "GiB", "Power", " W", "Throttle:",
                "edge", "hotspot", "°C", "MHz", "fclk", "mV", "rpm", "pwm"):
    assert field in out, f"{field!r} missing from:\n{out}"


def test_metrics_follow_the_load_of_the_owning_process(owner):
  ref = devices("mock-0")[0]
  first = status(ref)
  busy = until(lambda: (st := status(ref)).gfx_activity > 50 and st.clocks["gfx"] > 1000 and st, "the load to show")
  assert busy.pid == owner.pid and busy.error is None and busy.stale is None
  assert busy.power_w > first.power_w - 5 and busy.temps["hotspot"] >= first.temps["hotspot"]
  assert 0 < busy.vram_used < busy.vram_total == 512 << 20
  owner.kill(); owner.wait()
  idle = status(ref)                                 # at once: not the average of the owner's last second
  assert idle.pid is None and (idle.gfx_activity, idle.mem_activity) == (0, 0)
  assert idle.stale == "idle: no process holds the device" and idle.error is None


def test_activity_counts_a_full_ring_in_flight():
  """The owner keeps the compute ring full (launches without waiting), so the engine runs one long batch after
  another: readings taken while a batch runs show it busy (its busy time is accounted after every packet)."""
  p = start(LOAD % False)
  try:
    ref, run = devices("mock-0")[0], []
    def sustained():
      st = status(ref)
      assert st.error is None and st.pid == p.pid, st
      run[:] = [*run, time.monotonic()] if st.gfx_activity > 50 else []
      return len(run) >= 3 and run[-1] - run[0] >= 1.5
    until(sustained, "1.5 s of readings all showing the busy GPU")
  finally: p.kill(); p.wait()


def test_metrics_that_did_not_update_are_marked_stale(owner, monkeypatch):
  ref = devices("mock-0")[0]
  first = status(ref)
  assert first.stale is None and status(ref, first).stale is None   # the SMU counts every table it writes
  monkeypatch.setattr(SMUModel, "update", lambda self: None)        # a PMFW that stopped refreshing its table
  frozen = status(ref, status(ref))
  assert frozen.stale.startswith("stale: SMU metrics not updated") and frozen.gfx_activity == 0
  lines = frame(panel(frozen))
  assert any(re.fullmatch(r"│ Activity stale: SMU metrics not updated since the last reading \(counter \d+\) +│", ln)
             for ln in lines), "\n".join(lines)


def frame(what) -> list[str]:
  """The lines of `what` as an 80-column terminal shows it."""
  console = Console(width=80, file=io.StringIO(), color_system=None)
  console.print(what)
  lines = console.file.getvalue().splitlines()
  assert all(len(ln) <= 80 for ln in lines) and not any("…" in ln for ln in lines), "\n".join(lines)
  return lines


LINE = re.compile(r"│ +hotspot +\d+ °C +mem +\d+ MHz +soc +\d+ mV +pwm +\d+% +│")


def test_frame_fits_80_columns_with_full_labels(owner):
  lines = frame(render("mock-0"))
  for label in ("Temps", "Clocks", "Voltages", "Fan", "GFX", "MEM", "VRAM", "Power", "Throttle: "):
    assert any(label in ln for ln in lines), f"{label!r} missing from:\n" + "\n".join(lines)
  assert sum(bool(LINE.fullmatch(ln)) for ln in lines) == 1, "\n".join(lines)   # a row of values, none wrapped
  assert any(re.fullmatch(r"│ VRAM +\d+\.\d\d / 0\.50 GiB +│", ln) for ln in lines), "\n".join(lines)
  owner.kill(); owner.wait()
  lines = frame(render("mock-0"))
  assert any("Activity idle: no process holds the device" in ln for ln in lines), "\n".join(lines)
  assert any(re.fullmatch(r"│ GFX +- +│", ln) for ln in lines), "\n".join(lines)


def test_pids_and_kill(owner, capsys):
  assert main(["--pids"]) == 0
  assert f"mock-0: pid {owner.pid}" in capsys.readouterr().out
  assert main(["--pids", "--kill"]) == 0
  assert owner.wait(timeout=10) == -9
  assert main(["--pids"]) == 0
  assert "mock-0: No processes found using this device" in capsys.readouterr().out


def test_device_not_booted_by_am_is_reported_not_read(capsys):
  open_model("navi31", 3, "am").close()             # powered on, never booted
  assert main(["--list", "--dev", "mock-3"]) == 0
  assert "has not been booted by the AM driver" in capsys.readouterr().out


def test_lists_amd_gpus_only_and_makes_no_model_state(capsys):
  """Every model's emulated devices are named mock-<n>: am_smi shows the AMD models' ones, and attaches only to devices
  that have state (a monitor never powers one on)."""
  import json, tempfile
  from pathlib import Path
  from tools.hcq_smi import main as hcq_smi
  for kind, index in (("bnxt", 0), ("mlx5", 0), ("mlx5", 5), ("navi31", 2)): open_model(kind, index).close()
  emu = Path(tempfile.gettempdir()) / "hcq-emu"
  before = sorted(p.name for p in emu.iterdir())
  assert main(["--list"]) == 0
  out = capsys.readouterr().out
  assert re.findall(r"╭─+ (mock-\d+)", out) == ["mock-2"] and "ConnectX" not in out and "emulated Navi31" in out, out
  assert main(["--list", "--dev", "mock-5"]) == 2 and main(["--pids"]) == 0
  assert capsys.readouterr().out == "mock-2: No processes found using this device\n"
  with pytest.raises(FileNotFoundError, match="navi31 device 5 .mock-5. has no state yet"): open_model("navi31", 5, None)
  assert sorted(p.name for p in emu.iterdir()) == before           # no navi31-0 or navi31-5 appeared
  assert hcq_smi(["amd", "list", "--json"]) == 0
  assert [r["bus"] for r in json.loads(capsys.readouterr().out) if r["kind"] == "emulated"] == ["mock-2"]


def test_bad_arguments():
  assert main(["--dev", "0000:99:00.0"]) == 2
  with pytest.raises(SystemExit) as e: main(["--kill"])
  assert e.value.code == 2


def test_live_monitor_refreshes_until_interrupted(owner):
  """On a terminal the monitor draws frames until Ctrl-C, then exits 0 (a pty stands in for the terminal, so the
  test sends SIGINT only once a frame naming the owner is on screen)."""
  master, slave = pty.openpty()
  p = subprocess.Popen([sys.executable, "-m", "tools.am_smi"], stdout=slave, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, PYTHONPATH=os.getcwd(), COLUMNS="80", TERM="xterm"))
  os.close(slave)
  screen, deadline = b"", time.monotonic() + 120
  while not (b"AM Monitor" in screen and f"pid {owner.pid}".encode() in screen):
    assert p.poll() is None and time.monotonic() < deadline, (screen.decode(errors="replace"), p.stderr.read())
    if select.select([master], [], [], 1.0)[0]: screen += os.read(master, 65536)
  p.send_signal(signal.SIGINT)
  while p.poll() is None:                          # keep draining the terminal so the last frame never blocks it
    assert time.monotonic() < deadline + 30, "am_smi did not exit after SIGINT"
    if select.select([master], [], [], 0.1)[0]:
      try: screen += os.read(master, 65536)
      except OSError: p.wait(timeout=30)   # EIO: the child closed the terminal on its way out
  os.close(master)
  assert p.returncode == 0, p.stderr.read()
  assert b"GFX" in screen
