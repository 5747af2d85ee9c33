"""compute on RDNA4: a few ops, reductions, matmul, softmax and a training step on the emulated Navi48
(MOCKPCI+AMD:navi48, GC 12.0.1): kernels rendered as OpenCL C, compiled by clang for gfx1201 (the device's target),
launched through the GC 12 COMPUTE_* registers and run by the shader core's gfx1201 tables; numpy is the reference."""
import numpy as np
import pytest
from compute import Tensor, Device, optim
from emu.amdgpu.chips import NAVI48
from emu.amdgpu.fwbuild import write_firmware

D = "MOCKPCI+AMD:navi48:5"   # an index no other test opens (one lock per emulated bus)


@pytest.fixture(scope="module", autouse=True)
def navi48(tmp_path_factory):
  """The Navi48 booted once for the module, on synthetic gfx12 firmware (fwbuild)."""
  fw = tmp_path_factory.mktemp("fw-navi48")
  write_firmware(str(fw), chip=NAVI48)
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("HCQ_FIRMWARE_DIR", str(fw))
    dev = Device[D]
  assert dev.arch == "gfx1201" and dev.iface.ip_versions["GC"] == (12, 0, 1)
  yield dev
  dev.close()


def rand(*shape, seed=0, low=-2.0, high=2.0):
  return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


OPS = {"add": (lambda a, b: a + b, lambda a, b: a + b), "mul_sub": (lambda a, b: a * b - a, lambda a, b: a * b - a),
       "exp": (lambda a, b: a.exp(), lambda a, b: np.exp(a)), "log_abs": (lambda a, b: (a.abs() + 1).log(), lambda a, b: np.log(np.abs(a) + 1)),
       "sqrt_div": (lambda a, b: (a * a + 1).sqrt() / (b.abs() + 0.5), lambda a, b: np.sqrt(a * a + 1) / (np.abs(b) + 0.5)),
       "relu_where": (lambda a, b: a.relu().where(a > b, b), lambda a, b: np.where(a > b, np.maximum(a, 0), b))}


@pytest.mark.parametrize("op", sorted(OPS))
def test_rdna4_elementwise_ops_match_numpy(op):
  fn, ref = OPS[op]
  a, b = rand(7, 129, seed=1), rand(7, 129, seed=2)
  np.testing.assert_allclose(fn(Tensor(a, device=D), Tensor(b, device=D)).numpy(), ref(a.astype(np.float64), b.astype(np.float64)),
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_rdna4_reductions_match_numpy(axis):
  x = rand(37, 301, seed=3)
  t = Tensor(x, device=D)
  np.testing.assert_allclose(t.sum(axis).numpy(), x.astype(np.float64).sum(axis), rtol=1e-5, atol=1e-4)
  if axis is None: np.testing.assert_array_equal(t.max().numpy(), x.max())
  else:   # torch's max(dim): the values and their indices
    m = t.max(axis)
    np.testing.assert_array_equal(m.values.numpy(), x.max(axis))
    np.testing.assert_array_equal(m.indices.numpy(), x.argmax(axis))


def test_rdna4_matmul_sum_and_softmax_match_numpy():
  a, b = rand(33, 47, seed=4), rand(47, 29, seed=5)
  ref = a.astype(np.float64) @ b
  np.testing.assert_allclose((Tensor(a, device=D) @ Tensor(b, device=D)).numpy(), ref, rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose((Tensor(a, device=D) @ Tensor(b, device=D)).sum().numpy(), ref.sum(), rtol=1e-5, atol=1e-3)
  x = rand(8, 100, seed=6, low=-10, high=10)
  e = np.exp(x - x.max(-1, keepdims=True))
  np.testing.assert_allclose(Tensor(x, device=D).softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_rdna4_mlp_training_steps_match_numpy():
  """Two SGD steps of a 2-layer ReLU MLP on a squared-error loss: the loss and the weights against numpy's hand-written
  backward pass."""
  x, y = rand(16, 8, seed=7), rand(16, 3, seed=8)
  w1_0, w2_0 = rand(8, 12, seed=9, low=-0.5, high=0.5), rand(12, 3, seed=10, low=-0.5, high=0.5)
  w1, w2 = Tensor(w1_0, device=D, requires_grad=True), Tensor(w2_0, device=D, requires_grad=True)
  opt = optim.SGD([w1, w2], lr=0.1)
  r1, r2 = w1_0.astype(np.float64), w2_0.astype(np.float64)
  for _ in range(2):
    opt.zero_grad()
    loss = ((Tensor(x, device=D) @ w1).relu() @ w2 - Tensor(y, device=D)).square().mean()
    loss.backward()
    opt.step()
    h = x @ r1
    out = np.maximum(h, 0) @ r2
    ref_loss = ((out - y) ** 2).mean()
    g_out = 2 * (out - y) / out.size
    g2, g_h = np.maximum(h, 0).T @ g_out, (g_out @ r2.T) * (h > 0)
    r1, r2 = r1 - 0.1 * (x.T @ g_h), r2 - 0.1 * g2
    np.testing.assert_allclose(loss.numpy(), ref_loss, rtol=1e-5)
  np.testing.assert_allclose(w1.numpy(), r1, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(w2.numpy(), r2, rtol=1e-5, atol=1e-6)


def test_rdna4_trains_the_digits_demo():
  """examples/digits.py (what `make demo` runs) on the Navi48: the MLP learns the 8x8 digits as it does on the CPU."""
  import os, sys
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
  from digits import train
  acc, _ = train(epochs=3, device=D, quiet=True)
  assert acc >= 0.9


def test_rdna4_integer_and_byte_ops_match_numpy():
  """Integer division, modulo, bit ops and uint8 data: on gfx12 clang reads bytes with the sub-dword scalar loads
  (s_load_u8 / s_load_i8 / s_load_u16 / s_load_i16), which gfx11 does not have."""
  a = np.array([-7, -3, 0, 3, 7, 100], dtype=np.int32)
  b = np.array([2, -2, 5, 1, -3, 7], dtype=np.int32)
  ta, tb = Tensor(a, device=D), Tensor(b, device=D)
  np.testing.assert_array_equal((ta // tb).numpy(), a // b)
  np.testing.assert_array_equal((ta % tb).numpy(), a % b)
  np.testing.assert_array_equal((ta & tb | 1).numpy(), a & b | 1)
  for dt in (np.uint8, np.int8, np.uint16, np.int16):
    u = np.array([250, 3, 7, 129, 255], dtype=np.int64).astype(dt)
    assert Tensor(u, device=D).sum().item() == int(u.astype(np.int64).sum()), dt
    np.testing.assert_array_equal((Tensor(u, device=D) + Tensor(u, device=D)).numpy(), u + u)
