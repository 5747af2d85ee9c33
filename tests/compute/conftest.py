import os
import numpy as np
import pytest
from compute import Tensor, Device
from compute import runtime, core
from compute.schedule import Kernel

MIRROR = None          # the nv_ptx.Mirror of this session under --nv-ptx


@pytest.fixture(autouse=True)
def _nv_ptx_mirror(request, monkeypatch):
  """With --nv-ptx, each kernel the CPU device runs (one run_schedule item at a time) is checked against its CUDA C
  rendering on the PTX engine, from the same input bytes; kernels run while compute.jit captures are not. The summary
  line (how many kernels, per suite) needs a run without -n."""
  global MIRROR
  if not request.config.getoption("--nv-ptx"):
    yield
    return
  from tests.compute.nv_ptx import Mirror
  MIRROR = MIRROR or Mirror()
  MIRROR.suite = request.module.__name__.rsplit(".", 1)[-1]
  real = runtime.run_schedule
  def mirrored(items):
    for it in items:
      real([it])
      if isinstance(it, Kernel) and it.device == "CPU" and runtime.Capture.active is None: MIRROR.check(it)
  monkeypatch.setattr(core, "run_schedule", mirrored)
  yield


def pytest_terminal_summary(terminalreporter):
  if MIRROR is not None:
    runs = sum(n for _, n in MIRROR.kernels.values())
    terminalreporter.write_line(f"--nv-ptx: {runs} CPU kernel runs ({len(MIRROR.kernels)} distinct kernels) matched on the "
                                f"PTX engine ({MIRROR.arch}); distinct kernels per suite: " +
                                ", ".join(f"{m} {len(s)}" for m, s in sorted(MIRROR.suites.items())))


@pytest.fixture(autouse=True)
def _cpu_default():
  """Op tests run on the CPU reference device whatever DEV says; tests/compute/test_devices.py covers the others."""
  prev = Device._default
  Device.DEFAULT = "CPU"
  yield
  Device._default = prev


# the devices of the numeric suites: CPU, MOCKPCI+AMD, and the device DEV names when it is another one (DEV=MOCK+NV: kernels
# rendered as CUDA C, built by NVRTC, run by the NV model's PTX engine; DEV=MOCKUSB+AMD: through the USB bridge model)
SUITE_DEVICES = list(dict.fromkeys(["CPU", "MOCKPCI+AMD"] + ([Device.canonicalize(os.environ["DEV"])] if os.environ.get("DEV") else [])))


@pytest.fixture(params=SUITE_DEVICES)
def cpu_and_amd(request):
  """For modules that run every test on both the CPU device and the emulated AMD GPU (MOCKPCI+AMD: kernels rendered as
  OpenCL C, compiled by clang-22 for gfx1100, run by the RDNA3 emulator), and on DEV if it names another device:
  `pytestmark = pytest.mark.usefixtures(...)`."""
  prev = Device._default
  Device.DEFAULT = request.param
  yield
  Device._default = prev


def check(shapes, tfn, nfn, grad=True, low=-2.0, high=2.0, atol=1e-5, rtol=1e-4, gtol=1e-3, seed=0, constant=()):
  """Forward against numpy (float64), and d(sum(f(x)*w))/dx against central finite differences of numpy.
  `constant`: indices of inputs the result is not differentiable by (they must get no gradient)."""
  rng = np.random.default_rng(seed)
  xs = [rng.uniform(low, high, s).astype(np.float32) for s in shapes]
  ts = [Tensor(x, requires_grad=grad) for x in xs]
  out = tfn(*ts)
  ref = np.asarray(nfn(*[x.astype(np.float64) for x in xs]))
  assert out.shape == ref.shape, f"shape {out.shape} != numpy {ref.shape}"
  np.testing.assert_allclose(out.numpy(), ref, atol=atol, rtol=rtol)
  if not grad: return
  w = rng.standard_normal(ref.shape)
  (out * Tensor(w.astype(np.float32))).sum().backward()
  for i, x in enumerate(xs):
    if i in constant:
      assert ts[i].grad is None
      continue
    x64, num, h = x.astype(np.float64), np.zeros(x.shape), 1e-6
    for j in np.ndindex(x.shape):
      args = [a.astype(np.float64) for a in xs]
      args[i] = x64.copy(); args[i][j] += h
      up = np.sum(nfn(*args) * w)
      args[i][j] -= 2 * h
      num[j] = (up - np.sum(nfn(*args) * w)) / (2 * h)
    assert ts[i].grad is not None, f"input {i} got no gradient"
    np.testing.assert_allclose(ts[i].grad.numpy(), num, atol=gtol, rtol=gtol, err_msg=f"gradient of input {i}")
