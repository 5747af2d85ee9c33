"""A representative subset on every device: the CPU device, the emulated AMD GPU through each of its interfaces
(MOCKUSB+AMD: the AM driver through the ASM24xx bridge model), and the NVIDIA model (MOCK+NV: CUDA C by NVRTC, run by
its PTX engine). Emulated devices need no hardware, so one that does not open is a failure that gives the reason."""
import numpy as np
import pytest
from compute import Tensor, Device
from drivers.hcq import available_vendors, parse_device
from tests.compute.conftest import SUITE_DEVICES

DEVICES = list(dict.fromkeys(["CPU", "MOCKKFD+AMD", "MOCKPCI+AMD", "MOCKUSB+AMD", "MOCK+NV"] + SUITE_DEVICES))   # and DEV's, if another


@pytest.fixture(params=DEVICES)
def dev(request):
  name = request.param
  if name != "CPU":
    vendor = parse_device(name).vendor
    assert vendor in available_vendors(), f"{name}: the {vendor} driver did not register (vendors: {available_vendors()})"
    try: Device[name]
    except Exception as e: pytest.fail(f"{name} is emulated and must open here, but: {type(e).__name__}: {e}")
  return name


def arr(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_matmul(dev):
  a, b = arr(17, 33), arr(33, 9, seed=1)
  np.testing.assert_allclose((Tensor(a, device=dev) @ Tensor(b, device=dev)).numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_conv2d(dev):
  x, w = arr(2, 3, 8, 8), arr(4, 3, 3, 3, seed=1)
  out = Tensor(x, device=dev).conv2d(Tensor(w, device=dev), padding=1).numpy()
  ref = Tensor(x, device="CPU").conv2d(Tensor(w, device="CPU"), padding=1).numpy()
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_softmax(dev):
  x = arr(6, 10)
  e = np.exp(x - x.max(1, keepdims=True))
  np.testing.assert_allclose(Tensor(x, device=dev).softmax().numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_reductions_each_axis(dev, axis):
  x = arr(3, 4, 5)
  t = Tensor(x, device=dev)
  np.testing.assert_allclose(t.sum(axis).numpy(), x.sum(axis), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(t.amax(axis).numpy(), x.max(axis))
  np.testing.assert_array_equal(t.argmax(axis).numpy(), x.argmax(axis))


def test_broadcasting_and_slicing(dev):
  a, b = arr(4, 1, 6), arr(5, 1, seed=1)
  np.testing.assert_allclose((Tensor(a, device=dev) * Tensor(b, device=dev) + 1).numpy(), a * b + 1, rtol=1e-6)
  np.testing.assert_allclose(Tensor(a, device=dev)[1:, 0, ::-2].numpy(), a[1:, 0, ::-2])


def test_backward(dev):
  x, w = arr(4, 5), arr(3, 5, seed=1)
  tx, tw = Tensor(x, device=dev, requires_grad=True), Tensor(w, device=dev, requires_grad=True)
  tx.linear(tw).relu().sum().backward()
  mask = (x @ w.T > 0).astype(np.float32)
  np.testing.assert_allclose(tw.grad.numpy(), mask.T @ x, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(tx.grad.numpy(), mask @ w, rtol=1e-4, atol=1e-5)


def test_to_moves_between_devices(dev):
  x = arr(3, 4)
  t = Tensor(x, device="CPU").to(dev) * 2
  assert t.device == dev
  back = t.to("CPU")
  assert back.device == "CPU"
  np.testing.assert_allclose(back.numpy(), x * 2)


def test_device_closed_and_opened_again_starts_fresh(dev):
  """Pooled buffers and built programs belong to the device object: after a close, the next computation on the same
  device string uses the newly opened device, never memory or code of the closed one."""
  from drivers.hcq import open_device
  x = arr(64)
  for _ in range(2):
    t = Tensor(x, device=dev)
    np.testing.assert_allclose((t * 2 + 1).numpy(), x * 2 + 1, rtol=1e-6)
    del t
    import gc; gc.collect()
    open_device(dev).close()
