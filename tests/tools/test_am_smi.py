"""am_smi against the emulated Navi31: fields, metrics that follow the load of the owning process, pids and kill."""
import os, pty, select, signal, subprocess, sys, time
import pytest
from drivers.amd.smi import devices, status
from drivers.system import open_model
from tools.am_smi import main
from tests.procs import start

LOAD = r"""
from drivers.hcq import open_device
from tests.drivers.amd.kernels import SRC
d = open_device('MOCKPCI+AMD')
x = d.alloc(1 << 20)
add1 = d.program("add1", d.compiler.compile(SRC))
print('up', flush=True)
while True: add1(x, global_size=(1024,), local_size=(64,), wait=True)
"""


@pytest.fixture
def owner():
  """A process that booted mock-0 and keeps its compute queue busy."""
  p = start(LOAD)
  yield p
  p.kill(); p.wait()


def test_list_shows_every_field_of_the_emulated_gpu(owner, capsys):
  time.sleep(0.5)
  assert main(["--list"]) == 0
  out = capsys.readouterr().out
  for field in ("AM Monitor", "mock-0", f"pid {owner.pid}", "GFX", "MEM", "VRAM", "GiB", "Power", " W", "Throttle:",
                "edge", "hotspot", "°C", "MHz", "fclk", "mV", "rpm", "pwm"):
    assert field in out, f"{field!r} missing from:\n{out}"


def test_metrics_follow_the_load_of_the_owning_process(owner):
  ref = devices("mock-0")[0]
  first = status(ref)
  time.sleep(1.0)
  busy = status(ref)
  assert busy.pid == owner.pid and busy.error is None
  assert busy.gfx_activity > 50 and busy.power_w > first.power_w - 5 and busy.temps["hotspot"] >= first.temps["hotspot"]
  assert 0 < busy.vram_used < busy.vram_total == 512 << 20
  assert busy.clocks["gfx"] > 1000                   # pre-deep-sleep clock while busy
  owner.kill(); owner.wait()
  time.sleep(0.6)
  idle = status(ref)
  assert idle.pid is None and idle.gfx_activity < busy.gfx_activity


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


def test_bad_arguments():
  assert main(["--dev", "0000:99:00.0"]) == 1
  with pytest.raises(SystemExit) as e: main(["--kill"])
  assert e.value.code == 2


def test_live_monitor_refreshes_until_interrupted(owner):
  """On a terminal the monitor draws frames until Ctrl-C, then exits 0 (a pty stands in for the terminal, so the
  test sends SIGINT only once a frame naming the owner is on screen)."""
  master, slave = pty.openpty()
  p = subprocess.Popen([sys.executable, "-m", "tools.am_smi"], stdout=slave, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, PYTHONPATH=os.getcwd(), COLUMNS="120", TERM="xterm"))
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
