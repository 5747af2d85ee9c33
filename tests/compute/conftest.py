import os
import numpy as np
import pytest
from compute import Tensor, Device


@pytest.fixture(autouse=True)
def _cpu_default():
  """Op tests run on the CPU reference device whatever DEV says; tests/compute/test_devices.py covers the others."""
  prev = Device._default
  Device.DEFAULT = "CPU"
  yield
  Device._default = prev


# the AMD device of cpu_and_amd: DEV when it names one (DEV=MOCKUSB+AMD runs the suites through the USB bridge model)
AMD_DEV = os.environ["DEV"] if "AMD" in os.environ.get("DEV", "") else "MOCKPCI+AMD"


@pytest.fixture(params=["CPU", AMD_DEV])
def cpu_and_amd(request):
  """For modules that run every test on both the CPU device and the emulated AMD GPU (MOCKPCI+AMD, or the AMD device
  DEV names: kernels rendered as OpenCL C, compiled by clang-22 for gfx1100, run by the RDNA3 emulator):
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
