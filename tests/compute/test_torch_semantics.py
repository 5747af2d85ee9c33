"""PyTorch's semantics where they differ from this project's first API: Tensor.where(condition, other), diagonal as a
view and diag as a copy, unique(dim=), max_pool2d(return_indices=True) and nn.MaxPool2d, the optimizers'
state_dict/load_state_dict, and nn.Module forward and full backward hooks. numpy is the reference; every test runs on the
CPU device and the emulated AMD GPU."""
import numpy as np
import pytest
import compute
from compute import Tensor, dtypes, nn, optim
import compute.nn.functional as F

RNG = np.random.default_rng(32)
pytestmark = pytest.mark.usefixtures("cpu_and_amd")


# --- where
def test_tensor_where_is_self_where_condition_else_other():
  x, y = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((4,)).astype(np.float32)
  cond = x > 0.2
  got = Tensor(x).where(Tensor(cond), Tensor(y))                      # y broadcast, as torch
  np.testing.assert_array_equal(got.numpy(), np.where(cond, x, y))
  np.testing.assert_array_equal(Tensor(x).where(Tensor(cond), -1.5).numpy(), np.where(cond, x, np.float32(-1.5)))
  np.testing.assert_array_equal(compute.where(Tensor(cond), Tensor(x), 0.0).numpy(), np.where(cond, x, 0))


def test_tensor_where_refuses_a_condition_that_is_not_bool():
  """The old spelling cond.where(x, y) would pass a float tensor as the condition: refused, naming compute.where."""
  x = Tensor([1.0, -2.0])
  with pytest.raises(TypeError, match=r"bool condition tensor, got .*float32.*compute\.where\(condition, x, y\)"): (x > 0).where(x, 0.0)
  with pytest.raises(TypeError, match="bool condition tensor"): x.where(1, 0.0)


# --- diagonal (a view) and diag (a copy)
@pytest.mark.parametrize("offset,dims", [(0, (0, 1)), (1, (0, 1)), (-2, (0, 1)), (-1, (0, 2)), (2, (2, 1))])
def test_diagonal_is_a_view_both_ways(offset, dims):
  a = RNG.standard_normal((4, 3, 5)).astype(np.float32)
  t = Tensor(a)
  d = t.diagonal(offset, *dims)
  np.testing.assert_array_equal(d.numpy(), np.diagonal(a, offset, *dims))
  d.mul_(10.0)                                  # a write through the view changes the base
  ref = a.copy()
  idx = np.arange(ref.size).reshape(ref.shape)
  on = np.zeros(ref.shape, bool).ravel()
  on[np.diagonal(idx, offset, *dims).ravel()] = True
  ref = np.where(on.reshape(ref.shape), ref * 10, ref)
  np.testing.assert_array_equal(t.numpy(), ref)
  t.add_(1.0)                                   # an in-place change of the base shows in the view
  np.testing.assert_array_equal(d.numpy(), np.diagonal(ref + 1, offset, *dims))


def test_diag_of_a_matrix_is_a_copy_and_gradients_reach_the_diagonal():
  a = RNG.standard_normal((3, 3)).astype(np.float32)
  t = Tensor(a)
  e, d = t.diag(), t.diagonal()
  t.zero_()
  np.testing.assert_array_equal(e.numpy(), np.diag(a))                # the copy keeps the values
  np.testing.assert_array_equal(d.numpy(), np.zeros(3, np.float32))   # the view follows
  x = Tensor(a, requires_grad=True)
  (x.diagonal(1) * Tensor([2.0, 3.0])).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), np.diag([2.0, 3.0], 1).astype(np.float32))


# --- unique(dim=)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_along_a_dim_matches_numpy(dim):
  a = RNG.integers(0, 3, (6, 4, 2)).astype(np.int32)
  a[4], a[:, 3] = a[1], a[:, 0]                                        # repeated slices on both dims
  v, inv, cnt = Tensor(a).unique(dim=dim, return_inverse=True, return_counts=True)
  rv, rinv, rcnt = np.unique(a, axis=dim, return_inverse=True, return_counts=True)
  np.testing.assert_array_equal(v.numpy(), rv)
  np.testing.assert_array_equal(inv.numpy(), rinv.ravel())
  np.testing.assert_array_equal(cnt.numpy(), rcnt)
  assert inv.dtype is dtypes.int64 and cnt.dtype is dtypes.int64
  np.testing.assert_array_equal(Tensor(a.astype(np.float32)).unique(dim=dim).numpy(), rv.astype(np.float32))


# --- max_pool2d with indices
def _max_pool_ref(x: np.ndarray, k, s, p, d):
  """Direct loops: the first maximum in window order among the input's (unpadded) elements, index h * W + w."""
  n, c, h, w = x.shape
  oh, ow = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1, (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
  vals, idx = np.zeros((n, c, oh, ow), x.dtype), np.zeros((n, c, oh, ow), np.int64)
  for b in range(n):
    for ch in range(c):
      for i in range(oh):
        for j in range(ow):
          best, at = -np.inf, None
          for u in range(k[0]):
            for v in range(k[1]):
              r, q = i * s[0] - p[0] + u * d[0], j * s[1] - p[1] + v * d[1]
              if 0 <= r < h and 0 <= q < w and (at is None or x[b, ch, r, q] > best): best, at = x[b, ch, r, q], r * w + q
          vals[b, ch, i, j], idx[b, ch, i, j] = best, at
  return vals, idx


@pytest.mark.parametrize("k,s,p,d", [((2, 2), (2, 2), (0, 0), (1, 1)), ((3, 2), (1, 2), (1, 1), (1, 1)), ((2, 3), (2, 1), (1, 0), (2, 1))])
def test_max_pool2d_return_indices(k, s, p, d):
  x = RNG.integers(-4, 5, (2, 3, 7, 8)).astype(np.float32)            # small integers: ties, where the first one wins
  vals, idx = F.max_pool2d(Tensor(x), k, s, p, d, return_indices=True)
  rv, ri = _max_pool_ref(x, k, s, p, d)
  np.testing.assert_array_equal(vals.numpy(), rv)
  np.testing.assert_array_equal(idx.numpy(), ri)
  assert idx.dtype is dtypes.int64
  m = nn.MaxPool2d(k, s, p, d, return_indices=True)
  v2, i2 = m(Tensor(x))
  np.testing.assert_array_equal(i2.numpy(), ri)
  np.testing.assert_array_equal(nn.MaxPool2d(k, s, p, d)(Tensor(x)).numpy(), rv)


def test_max_pool2d_index_of_a_nan_window_is_its_last_nan():
  """PyTorch's CPU kernel takes each element above the max so far or NaN: a window's last NaN (the max is NaN)."""
  x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
  x[0, 0, 0, 0] = x[0, 0, 1, 0] = np.nan                              # window (0, 0): NaNs at 0 and 4
  x[0, 0, 2, 3] = np.nan                                              # window (1, 1): one NaN at 11
  vals, idx = F.max_pool2d(Tensor(x), 2, return_indices=True)
  assert np.isnan(vals.numpy()[0, 0, 0, 0]) and np.isnan(vals.numpy()[0, 0, 1, 1])
  np.testing.assert_array_equal(idx.numpy()[0, 0], [[4, 7], [13, 11]])


def test_max_pool2d_indices_with_ceil_mode_stay_inside_the_input():
  x = RNG.standard_normal((1, 1, 5, 5)).astype(np.float32)
  vals, idx = F.max_pool2d(Tensor(x), 2, 2, ceil_mode=True, return_indices=True)
  assert vals.shape == (1, 1, 3, 3)
  flat = x.reshape(-1)
  np.testing.assert_array_equal(flat[idx.numpy().reshape(-1)], vals.numpy().reshape(-1))
  np.testing.assert_array_equal(idx.numpy()[0, 0, 2], [20 + int(np.argmax(x[0, 0, 4, 0:2])), 22 + int(np.argmax(x[0, 0, 4, 2:4])), 24])


# --- optimizer state_dict
def _train(opt, p, target, steps):
  for _ in range(steps):
    opt.zero_grad()
    ((p - Tensor(target)) ** 2).sum().backward()
    opt.step()


@pytest.mark.parametrize("cls,kw", [(optim.AdamW, dict(lr=0.05, betas=(0.8, 0.99), amsgrad=True)), (optim.SGD, dict(lr=0.1, momentum=0.9))])
def test_optimizer_state_dict_round_trip_continues_training_identically(cls, kw):
  """Train 2 steps, move the state to a new optimizer on a copy of the parameters, train 2 more: the same values as 4
  steps of one optimizer (numpy's arrays of both compared exactly)."""
  p0, target = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3, 4)).astype(np.float32)
  a = Tensor(p0, requires_grad=True)
  opt_a = cls([a], **kw)
  _train(opt_a, a, target, 2)
  sd = opt_a.state_dict()
  assert list(sd["state"]) == [0] and sd["param_groups"][0]["params"] == [0] and sd["param_groups"][0]["lr"] == kw["lr"]
  b = Tensor(a.numpy(), requires_grad=True)
  opt_b = cls([b], lr=123.0)                    # the loaded hyperparameters replace these
  opt_b.load_state_dict(sd)
  assert opt_b.param_groups[0]["lr"] == kw["lr"] and opt_b.param_groups[0]["params"][0] is b
  _train(opt_a, a, target, 2)
  _train(opt_b, b, target, 2)
  np.testing.assert_array_equal(b.numpy(), a.numpy())


def test_optimizer_load_state_dict_refuses_other_group_sizes():
  p, q = Tensor(np.ones(3, np.float32), requires_grad=True), Tensor(np.ones(2, np.float32), requires_grad=True)
  sd = optim.AdamW([p, q]).state_dict()
  with pytest.raises(ValueError, match=r"parameter groups of \[2\] parameters, this optimizer of \[1\]"): optim.AdamW([p]).load_state_dict(sd)
  two = optim.AdamW([{"params": [p]}, {"params": [q]}])
  with pytest.raises(ValueError, match="has 1 parameter groups, this optimizer 2"): two.load_state_dict(sd)


# --- module hooks
def test_forward_hooks_see_and_replace_inputs_and_outputs_and_go_away_on_remove():
  lin = nn.Linear(4, 3)
  x = RNG.standard_normal((2, 4)).astype(np.float32)
  w, b = lin.weight.numpy(), lin.bias.numpy()
  seen = []
  h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
  h2 = lin.register_forward_hook(lambda m, args, out: seen.append((m, args[0].numpy(), out.numpy())))
  h3 = lin.register_forward_hook(lambda m, args, out: out + 1)
  out = lin(Tensor(x)).numpy()
  np.testing.assert_allclose(out, (2 * x) @ w.T + b + 1, rtol=1e-5, atol=1e-6)
  assert seen[0][0] is lin
  np.testing.assert_allclose(seen[0][1], 2 * x)
  np.testing.assert_allclose(seen[0][2], (2 * x) @ w.T + b, rtol=1e-5, atol=1e-6)   # before the later hook's + 1
  h1.remove(); h3.remove(); h3.remove()
  np.testing.assert_allclose(lin(Tensor(x)).numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
  assert len(seen) == 2
  h2.remove()
  lin(Tensor(x))
  assert len(seen) == 2


def test_hook_order_prepend_kwargs_and_context_manager():
  class Scale(nn.Module):
    def forward(self, x, factor=1.0): return x * factor
  m, order = Scale(), []
  m.register_forward_hook(lambda mod, a, o: order.append("a"))
  m.register_forward_hook(lambda mod, a, o: order.append("b"), prepend=True)
  m.register_forward_pre_hook(lambda mod, a, kw: (a, {**kw, "factor": 3.0}), with_kwargs=True)
  with m.register_forward_hook(lambda mod, a, kw, o: o - kw["factor"], with_kwargs=True):
    np.testing.assert_array_equal(m(Tensor([1.0, 2.0]), factor=5.0).numpy(), [0.0, 3.0])   # factor 3 from the pre-hook
  np.testing.assert_array_equal(m(Tensor([1.0, 2.0])).numpy(), [3.0, 6.0])
  assert order == ["b", "a", "b", "a"]
  with pytest.raises(TypeError, match="hook must be callable"): m.register_forward_hook(3)


def test_full_backward_hook_sees_and_replaces_the_input_gradients():
  """Linear, loss sum(y^2): grad_output 2y, grad_input 2y W; the hook doubles grad_input, which reaches x.grad but not
  the weight's gradient (that is inside the module). Removed, x.grad is 2y W again."""
  lin = nn.Linear(4, 3)
  xn = RNG.standard_normal((2, 4)).astype(np.float32)
  w, b = lin.weight.numpy(), lin.bias.numpy()
  yn = xn @ w.T + b
  seen = []
  h = lin.register_full_backward_hook(lambda m, gi, go: seen.append((m, gi, go)) or (gi[0] * 2,))
  x = Tensor(xn, requires_grad=True)
  (lin(x) ** 2).sum().backward()
  (m, gi, go), = seen
  assert m is lin and len(gi) == 1 and len(go) == 1
  np.testing.assert_allclose(go[0].numpy(), 2 * yn, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(gi[0].numpy(), 2 * yn @ w, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(x.grad.numpy(), 4 * yn @ w, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(lin.weight.grad.numpy(), (2 * yn).T @ xn, rtol=1e-5, atol=1e-5)
  h.remove()
  x2 = Tensor(xn, requires_grad=True)
  (lin(x2) ** 2).sum().backward()
  np.testing.assert_allclose(x2.grad.numpy(), 2 * yn @ w, rtol=1e-5, atol=1e-5)
  assert len(seen) == 1
  lin.register_full_backward_hook(lambda m, gi, go: seen.append((m, gi, go)))
  (lin(Tensor(xn)) ** 2).sum().backward()           # an input without gradient: called once the output's is known
  assert seen[1][1] == (None,)
  np.testing.assert_allclose(seen[1][2][0].numpy(), 2 * yn, rtol=1e-5, atol=1e-5)


def test_full_backward_hook_with_several_inputs_and_one_without_gradient():
  class Mul(nn.Module):
    def forward(self, a, b, scale): return a * b * scale
  m, seen = Mul(), []
  m.register_full_backward_hook(lambda mod, gi, go: seen.append(gi) or None)
  an, bn, cn = (RNG.standard_normal(5).astype(np.float32) for _ in range(3))
  a, b = Tensor(an, requires_grad=True), Tensor(bn, requires_grad=True)
  m(a, b, Tensor(cn)).sum().backward()             # scale needs no gradient: None in grad_input
  (gi,) = seen
  assert gi[2] is None
  np.testing.assert_allclose(gi[0].numpy(), bn * cn, rtol=1e-6)
  np.testing.assert_allclose(gi[1].numpy(), an * cn, rtol=1e-6)
  np.testing.assert_allclose(a.grad.numpy(), bn * cn, rtol=1e-6)
  seen.clear()
  m(Tensor(an), Tensor(bn), Tensor(cn, requires_grad=True)).sum().backward()
  np.testing.assert_allclose(seen[0][2].numpy(), an * bn, rtol=1e-6)
  assert seen[0][:2] == (None, None)
