"""Exit with work queued, normally or on Ctrl-C: the process ends at once and quietly (its queues stopped, the work
behind them dropped), and the next open of the same emulated device (its state is in files under TMPDIR) recovers."""
import signal
import pytest
from tests.drivers.amd.test_am import boot, vadd_ok
from tests.procs import start

EXIT_BOUND_S = 60   # generous for a prompt exit (about a second), short of the minutes the queued work would take

QUEUE = r"""
import tempfile
scratch = tempfile.TemporaryDirectory()   # a weakref finalizer made before hcq is imported, as any library may make one
from drivers.hcq import open_device
from tests.drivers.amd.kernels import SRC
d = open_device({dev!r})
x = d.alloc(16 << 20)
add1 = d.program("add1", d.compiler.compile(SRC))
for _ in range(1000): add1(x, global_size=(65536,), local_size=(64,))   # 16 MiB of ints each: minutes of emulation, queued
print('up', flush=True)
if {interrupt}: d.synchronize()   # waiting when Ctrl-C comes
"""


@pytest.mark.parametrize("dev, interrupt", [("MOCKPCI+AMD", False), ("MOCKPCI+AMD", True), ("MOCKKFD+AMD", True)])
def test_exit_with_work_queued_is_prompt_and_quiet_and_the_device_recovers(dev, interrupt):
  p = start(QUEUE.format(dev=dev, interrupt=interrupt))
  try:
    if interrupt: p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=EXIT_BOUND_S)
  finally:
    if p.poll() is None: p.kill(); p.wait()
  # the emulated GPU's one-time build notice (its runtime, a kernel's C translation) may come out on a fresh cache
  err = "".join(line for line in err.splitlines(True) if not line.startswith("hcq: building the RDNA3 emulator"))
  assert "Exception ignored" not in err and "hcq:" not in err, err
  if interrupt:   # Python's own report of the interrupt, and nothing else. Exit status: killed by SIGINT, as CPython
    # ends on an unhandled KeyboardInterrupt; 1 is seen too when the parent is pytest with its faulthandler plugin on
    # (not understood yet; the output is the same)
    assert p.returncode in (-signal.SIGINT, 1) and err.count("Traceback") == 1 and err.rstrip().endswith("KeyboardInterrupt"), err
  else: assert p.returncode == 0 and err == "", err
  if dev == "MOCKPCI+AMD":
    d = boot()
    try: assert vadd_ok(d)
    finally: d.close()
