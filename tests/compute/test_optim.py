"""torch.optim's AdamW, Adam(amsgrad), SGD(dampening), param groups and lr_scheduler against their update formulas in
numpy; a changing lr reuses the step's kernels."""
import math
import numpy as np
import pytest
from compute import Tensor, nn, optim, runtime
from compute.optim import lr_scheduler
import compute.nn.functional as F


def _setup(seed):
  rng = np.random.default_rng(seed)
  p0, target = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
  return p0, target, Tensor(p0, requires_grad=True)


def _loss_step(p, target):   # loss = sum((p - t)^2): grad 2 (p - t)
  ((p - Tensor(target)) ** 2).sum().backward()


@pytest.mark.parametrize("cls,wd,amsgrad", [(optim.AdamW, None, False), (optim.AdamW, 0.1, True), (optim.Adam, 0.05, True)])
def test_adam_family_matches_formula(cls, wd, amsgrad):
  p0, target, p = _setup(1)
  kw = {} if wd is None else {"weight_decay": wd}
  opt = cls([p], lr=0.05, betas=(0.8, 0.99), amsgrad=amsgrad, **kw)
  wd = 0.01 if wd is None else wd   # AdamW's default
  ref, m, v, vmax = p0.astype(np.float64), np.zeros(p0.shape), np.zeros(p0.shape), np.zeros(p0.shape)
  for t in range(1, 5):
    opt.zero_grad()
    _loss_step(p, target)
    opt.step()
    g = 2 * (ref - target)
    if cls is optim.AdamW: ref = ref * (1 - 0.05 * wd)      # decoupled: decay the weights, not the gradient
    else: g = g + wd * ref
    m, v = 0.8 * m + 0.2 * g, 0.99 * v + 0.01 * g * g
    vmax = np.maximum(vmax, v) if amsgrad else v
    ref = ref - 0.05 / (1 - 0.8 ** t) * m / (np.sqrt(vmax) / np.sqrt(1 - 0.99 ** t) + 1e-8)
  np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_sgd_dampening_groups_and_skipped_params():
  p0, target, p = _setup(2)
  q0, _, q = _setup(3)
  idle = Tensor(np.ones(2, np.float32), requires_grad=True)   # never gets a gradient: untouched, even by weight decay
  opt = optim.SGD([{"params": [p]}, {"params": [q, idle], "lr": 0.02}], lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.1)
  assert [g["lr"] for g in opt.param_groups] == [0.1, 0.02] and opt.param_groups[1]["momentum"] == 0.9
  refs = {"p": (p0.astype(np.float64), 0.1, target), "q": (q0.astype(np.float64), 0.02, target)}
  bufs = {}
  for _ in range(3):
    opt.zero_grad()
    _loss_step(p, target)
    _loss_step(q, target)
    opt.step()
    for k, (r, lr, t) in refs.items():
      g = 2 * (r - t) + 0.1 * r
      bufs[k] = g if k not in bufs else 0.9 * bufs[k] + 0.5 * g   # the first step's buffer is the gradient itself
      refs[k] = (r - lr * bufs[k], lr, t)
  np.testing.assert_allclose(p.numpy(), refs["p"][0], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(q.numpy(), refs["q"][0], rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(idle.numpy(), [1.0, 1.0])
  with pytest.raises(ValueError, match="more than one parameter group"): optim.SGD([{"params": [p]}, {"params": [p]}])
  with pytest.raises(ValueError, match="nesterov"): optim.SGD([p], momentum=0.9, dampening=0.1, nesterov=True)
  with pytest.raises(ValueError, match="invalid lr"): optim.AdamW([p], lr=-1.0)


def test_step_lr_and_cosine_annealing_follow_their_closed_forms():
  p = Tensor([1.0], requires_grad=True)
  opt = optim.SGD([{"params": [p]}, {"params": [Tensor([2.0], requires_grad=True)], "lr": 0.5}], lr=0.1)
  sched = lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
  got = [sched.get_last_lr()]
  for _ in range(7):
    sched.step()
    got.append(sched.get_last_lr())
  np.testing.assert_allclose(got, [[0.1 * 0.5 ** (e // 3), 0.5 * 0.5 ** (e // 3)] for e in range(8)], rtol=1e-12)
  assert [g["lr"] for g in opt.param_groups] == got[-1]
  opt = optim.AdamW([p], lr=0.2)
  cos = lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.01)
  got = [cos.get_last_lr()[0]]
  for _ in range(10):   # past T_max the cosine rises again (period 2 * T_max)
    cos.step()
    got.append(cos.get_last_lr()[0])
  np.testing.assert_allclose(got, [0.01 + 0.19 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(11)], rtol=1e-9, atol=1e-12)
  cos.step(2)   # an explicit epoch: the closed form
  assert cos.last_epoch == 2 and math.isclose(opt.param_groups[0]["lr"], 0.01 + 0.19 * 0.5)
  lam = lr_scheduler.LambdaLR(optim.SGD([p], lr=1.0), lambda e: 1 / (e + 1))
  lam.step(); lam.step()
  assert lam.get_last_lr() == [1 / 3]


def test_scheduled_lr_reaches_the_update_without_new_kernels():
  """SGD steps at the lrs a cosine schedule sets match the formula, and steps after the first build no programs."""
  p0, target, p = _setup(4)
  opt = optim.SGD([p], lr=0.1)
  sched = lr_scheduler.CosineAnnealingLR(opt, T_max=5)
  ref, built = p0.astype(np.float64), []
  for _ in range(4):
    lr = opt.param_groups[0]["lr"]
    opt.zero_grad()
    _loss_step(p, target)
    opt.step()
    sched.step()
    ref = ref - lr * 2 * (ref - target)
    built.append(runtime.stats["programs_built"])
  np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-5)
  assert built[1] == built[3]


def test_module_training_with_adamw_and_schedule():
  """A Module MLP learns a fixed batch through F.cross_entropy, AdamW and a StepLR schedule."""
  Tensor.manual_seed(0)
  rng = np.random.default_rng(0)
  x, y = Tensor(rng.standard_normal((16, 6)).astype(np.float32)), Tensor(rng.integers(0, 3, 16).astype(np.int32))
  model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
  opt = optim.AdamW(model.parameters(), lr=0.05)
  sched = lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
  losses = []
  for _ in range(25):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    Tensor.realize_all(loss, *opt.schedule_step())
    sched.step()
    losses.append(loss.item())
  assert losses[-1] < 0.2 * losses[0], losses
