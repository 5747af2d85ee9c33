"""nn layers, optimizers against their update formulas in numpy, and end-to-end training on the digits."""
import os, sys
import numpy as np
import pytest
from compute import Tensor, nn, optim


def _params(seed=0):
  rng = np.random.default_rng(seed)
  return rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)


def _loss_grad(p, target):   # loss = sum((p - t)^2) -> grad 2 (p - t)
  return 2 * (p - target)


@pytest.mark.parametrize("momentum,nesterov,wd", [(0.0, False, 0.0), (0.9, False, 0.0), (0.9, True, 0.01)])
def test_sgd_matches_formula(momentum, nesterov, wd):
  p0, target = _params()
  p = Tensor(p0, requires_grad=True)
  opt = optim.SGD([p], lr=0.1, momentum=momentum, nesterov=nesterov, weight_decay=wd)
  ref, buf = p0.astype(np.float64), np.zeros_like(p0, dtype=np.float64)
  for _ in range(3):
    opt.zero_grad()
    ((p - Tensor(target)) ** 2).sum().backward()
    opt.step()
    g = _loss_grad(ref, target) + wd * ref
    if momentum:
      buf = momentum * buf + g
      g = g + momentum * buf if nesterov else buf
    ref = ref - 0.1 * g
  np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_adam_matches_formula():
  p0, target = _params(1)
  p = Tensor(p0, requires_grad=True)
  opt = optim.Adam([p], lr=0.05)
  ref, m, v = p0.astype(np.float64), np.zeros(p0.shape), np.zeros(p0.shape)
  for t in range(1, 4):
    opt.zero_grad()
    ((p - Tensor(target)) ** 2).sum().backward()
    opt.step()
    g = _loss_grad(ref, target)
    m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
    ref = ref - 0.05 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
  np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_optimizer_needs_trainable_tensors():
  with pytest.raises(ValueError, match="no tensors with requires_grad"): optim.SGD([Tensor([1.0])], lr=0.1)


def test_layers_and_parameter_discovery():
  Tensor.manual_seed(0)
  lin, conv = nn.Linear(4, 3), nn.Conv2d(2, 5, 3, padding=1)
  assert lin.weight.shape == (3, 4) and lin.bias.shape == (3,) and conv.weight.shape == (5, 2, 3, 3)
  assert np.abs(lin.weight.numpy()).max() <= 0.5   # uniform +-1/sqrt(fan_in)
  x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
  np.testing.assert_allclose(lin(Tensor(x)).numpy(), x @ lin.weight.numpy().T + lin.bias.numpy(), rtol=1e-5, atol=1e-6)
  assert conv(Tensor.ones(1, 2, 6, 6)).shape == (1, 5, 6, 6)
  class Model:
    def __init__(self): self.layers = [lin, conv]
  assert nn.parameters(Model()) == [lin.weight, lin.bias, conv.weight, conv.bias]


def test_conv_net_learns():
  """A tiny conv net fits a fixed batch: the loss falls a lot in a few Adam steps."""
  Tensor.manual_seed(0)
  rng = np.random.default_rng(0)
  x, y = Tensor(rng.standard_normal((8, 1, 6, 6)).astype(np.float32)), Tensor(rng.integers(0, 3, 8).astype(np.int32))
  conv, lin = nn.Conv2d(1, 4, 3), nn.Linear(4 * 2 * 2, 3)
  opt = optim.Adam(nn.parameters([conv, lin]), lr=0.05)
  losses = []
  for _ in range(30):
    opt.zero_grad()
    loss = lin(conv(x).relu().max_pool2d(2).flatten(1)).cross_entropy(y)
    loss.backward()
    Tensor.realize_all(loss, *opt.schedule_step())
    losses.append(loss.item())
  assert losses[-1] < 0.2 * losses[0], losses


def test_digits_mlp_reaches_90_percent():
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
  from digits import train
  acc, _ = train(epochs=3, device="CPU", quiet=True)
  assert acc >= 0.9


def test_training_steps_reuse_their_kernels():
  """After the first step, later steps (other batch slices, later Adam steps) build no new programs."""
  from compute import runtime
  Tensor.manual_seed(0)
  rng = np.random.default_rng(0)
  X, Y = Tensor(rng.standard_normal((96, 8)).astype(np.float32)), Tensor(rng.integers(0, 4, 96).astype(np.int32))
  lin = nn.Linear(8, 4)
  opt = optim.Adam(nn.parameters(lin), lr=0.01)
  built = []
  for i in range(3):
    opt.zero_grad()
    loss = lin(X[i * 32:(i + 1) * 32]).cross_entropy(Y[i * 32:(i + 1) * 32])
    loss.backward()
    Tensor.realize_all(loss, *opt.schedule_step())
    built.append(runtime.stats["programs_built"])
  assert built[1] == built[2]
