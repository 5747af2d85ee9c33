"""The rest of the tensor API a numpy/PyTorch user reaches for, against numpy (forward) and finite differences
(backward) on the CPU device and the emulated AMD GPU: scans, sort/argsort/topk, einsum, clamp, cat/stack of a list,
in-place updates and their aliases, conversions to Python and numpy, repr, cross_entropy's label checks."""
import numpy as np
import pytest
import compute
from compute import Tensor, Device, dtypes, no_grad
from tests.compute.conftest import check

RNG = np.random.default_rng(7)


pytestmark = pytest.mark.usefixtures("cpu_and_amd")   # every test on CPU and MOCKPCI+AMD


# --- scans
@pytest.mark.parametrize("shape,dim", [((3, 7), 1), ((5, 2), 0), ((2, 3, 4), -1), ((300,), 0)])
def test_cumsum(shape, dim):
  check([shape], lambda x: x.cumsum(dim), lambda x: np.cumsum(x, dim), atol=1e-4)   # 300: the log-step scan


def test_cumprod():
  check([(2, 6)], lambda x: x.cumprod(1), lambda x: np.cumprod(x, 1), low=0.5, high=1.5)
  check([(5, 3)], lambda x: x.cumprod(0), lambda x: np.cumprod(x, 0), low=-1.5, high=1.5)
  a = np.array([[3, -1, 2, 5, 1, 2, 2, 7, 1]], np.int32)
  np.testing.assert_array_equal(Tensor(a).cumprod(1).numpy(), np.cumprod(a, 1))
  np.testing.assert_array_equal(Tensor(a).cumsum(1).numpy(), np.cumsum(a, 1))
  b = np.array([1, 2, 3, 4], np.int8)
  assert Tensor(b).cumsum().dtype is dtypes.int64 and Tensor(b).cumsum(dtype="int32").dtype is dtypes.int32   # int64, like PyTorch


# --- sorting
def test_sort_is_stable_and_puts_nan_last():
  x = np.array([[3.0, 1.0, 2.0, 1.0, np.nan, -0.5, 2.0], [0.0, 0.0, -1.0, 5.0, 5.0, np.nan, 1.0]], np.float32)
  v, i = Tensor(x).sort(1)
  np.testing.assert_array_equal(i.numpy(), np.argsort(x, 1, kind="stable"))
  np.testing.assert_array_equal(v.numpy(), np.sort(x, 1))
  v, i = Tensor(x).sort(1, descending=True)
  ref = np.argsort(np.where(np.isnan(x), -np.inf, -x), 1, kind="stable")       # torch: NaN first, ties in order
  np.testing.assert_array_equal(i.numpy(), ref)
  np.testing.assert_array_equal(v.numpy(), np.take_along_axis(x, ref, 1))
  assert Tensor(x).sort().indices.dtype is dtypes.int64 and Tensor(x).argsort(0).shape == (2, 7)
  np.testing.assert_array_equal(Tensor(x).argsort(0).numpy(), np.argsort(x, 0, kind="stable"))


def test_sort_integers_and_gradients():
  a = RNG.integers(-5, 5, (4, 9)).astype(np.int64) * 2**33
  np.testing.assert_array_equal(Tensor(a).sort(1).values.numpy(), np.sort(a, 1))
  np.testing.assert_array_equal(Tensor(a).argsort(0, descending=True).numpy(), np.argsort(-a, 0, kind="stable"))
  check([(3, 6)], lambda x: x.sort(1).values, lambda x: np.sort(x, 1))
  check([(3, 6)], lambda x: x.sort(0, descending=True)[0], lambda x: -np.sort(-x, 0))


@pytest.mark.parametrize("k,dim,largest", [(2, 1, True), (3, 0, False), (1, -1, True), (6, 1, False)])
def test_topk(k, dim, largest):
  x = RNG.standard_normal((4, 6)).astype(np.float32)
  v, i = Tensor(x).topk(k, dim, largest=largest)
  order = np.argsort(-x if largest else x, dim, kind="stable")
  ref_i = np.take(order, range(k), axis=dim)
  np.testing.assert_array_equal(i.numpy(), ref_i)
  np.testing.assert_array_equal(v.numpy(), np.take_along_axis(x, ref_i, dim))
  check([(4, 6)], lambda t: t.topk(k, dim, largest=largest).values,
        lambda t: np.take_along_axis(t, np.take(np.argsort(-t if largest else t, dim, kind="stable"), range(k), axis=dim), dim))


def test_sort_edge_cases():
  v, i = Tensor(2.5).sort()
  assert v.item() == 2.5 and i.item() == 0
  v, i = Tensor(np.ones((2, 3), np.float32)).topk(0)
  assert v.shape == (2, 0) and i.shape == (2, 0)
  with pytest.raises(ValueError, match=r"topk: k=4 is out of range for dim 0 of size 3"): Tensor([1.0, 2.0, 3.0]).topk(4)


# --- einsum
@pytest.mark.parametrize("eq,shapes", [
  ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]), ("i,i->", [(5,), (5,)]), ("ii->i", [(4, 4)]),
  ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]), ("ij,jk", [(3, 4), (4, 2)]),
  ("i,j->ij", [(3,), (4,)]), ("ijk->", [(2, 3, 4)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("iij->j", [(3, 3, 2)]),
])
def test_einsum_like_numpy(eq, shapes):
  check(shapes, lambda *ts: Tensor.einsum(eq, *ts), lambda *xs: np.einsum(eq, *xs), atol=1e-4)


def test_einsum_module_function_and_errors():
  a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((4, 2)).astype(np.float32)
  np.testing.assert_allclose(compute.einsum("ij,jk->ik", [Tensor(a), Tensor(b)]).numpy(), a @ b, rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="names 2 operands, got 1"): compute.einsum("ij,jk->ik", Tensor(a))
  with pytest.raises(ValueError, match="label 'j' has size 4 and 3"): compute.einsum("ij,jk->ik", Tensor(a), Tensor(a))
  with pytest.raises(ValueError, match="does not match its labels 'ijk'"): compute.einsum("ijk->i", Tensor(a))
  with pytest.raises(ValueError, match="output labels 'z'"): compute.einsum("ij->z", Tensor(a))


# --- clamp
def test_clamp_and_clip():
  x = np.array([-3.0, -0.5, 0.0, 0.7, 2.5, np.nan], np.float32)
  t = Tensor(x)
  np.testing.assert_array_equal(t.clamp(min=-1, max=1).numpy(), np.clip(x, -1, 1))
  np.testing.assert_array_equal(t.clamp(min=0).numpy(), np.maximum(x, 0))
  np.testing.assert_array_equal(t.clip(max=0.5).numpy(), np.minimum(x, 0.5))
  np.testing.assert_array_equal(t.clamp(Tensor(np.full(6, -2.0, np.float32)), Tensor(np.zeros(6, np.float32))).numpy(), np.clip(x, -2, 0))
  np.testing.assert_array_equal(t.clamp(1, -1).numpy(), np.minimum(np.maximum(x, 1), -1))   # min > max: max, like torch
  assert Tensor([5, -5]).clamp(0, 3).tolist() == [3, 0] and Tensor([5, -5]).clamp(0, 3).dtype is dtypes.int32
  with pytest.raises(ValueError, match="clamp needs min or max"): t.clamp()
  check([(3, 4)], lambda a: a.clamp(min=-0.5, max=0.7), lambda a: np.clip(a, -0.5, 0.7))


# --- cat and stack
def test_cat_and_stack_of_a_list():
  a, b = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((1, 3)).astype(np.float32)
  ta, tb = Tensor(a), Tensor(b)
  np.testing.assert_array_equal(Tensor.cat([ta, tb]).numpy(), np.concatenate([a, b]))
  np.testing.assert_array_equal(Tensor.cat((ta, ta), 1).numpy(), np.concatenate([a, a], 1))
  np.testing.assert_array_equal(Tensor.cat([ta, ta], dim=-1).numpy(), np.concatenate([a, a], -1))
  np.testing.assert_array_equal(Tensor.stack([ta, ta, ta], 1).numpy(), np.stack([a, a, a], 1))
  np.testing.assert_array_equal(ta.cat(tb, dim=0).numpy(), np.concatenate([a, b]))         # the method form stays
  check([(2, 3), (1, 3)], lambda x, y: Tensor.cat([x, y, x]), lambda x, y: np.concatenate([x, y, x]))
  with pytest.raises(ValueError, match="cat needs at least one tensor"): Tensor.cat([])
  with pytest.raises(TypeError, match="cat takes tensors, got ndarray"): Tensor.cat([ta, a])
  with pytest.raises(ValueError, match="stack needs equal shapes"): Tensor.stack([ta, tb])


# --- in place
def test_in_place_ops_keep_the_object_and_its_aliases():
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
  same, row, flat, tr, det = x, x[1], x.reshape(12), x.T, x.detach()
  x += 1
  assert same is x
  ref = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
  for v, r in [(x, ref), (row, ref[1]), (flat, ref.reshape(12)), (tr, ref.T), (det, ref)]: np.testing.assert_array_equal(v.numpy(), r)
  row.mul_(10)                 # a view changes the tensor it views, and that tensor's other views
  ref[1] *= 10
  for v, r in [(x, ref), (flat, ref.reshape(12)), (tr, ref.T)]: np.testing.assert_array_equal(v.numpy(), r)
  tr[0].sub_(1).div_(2)        # a view of a view, chained in-place calls
  ref.T[0] = (ref.T[0] - 1) / 2
  np.testing.assert_array_equal(x.numpy(), ref)
  flat.clamp_(0, 20).zero_()
  assert not x.numpy().any() and row.numpy().tolist() == [0.0] * 4
  det.fill_(3.0)
  assert x.numpy().tolist() == [[3.0] * 4] * 3
  y = Tensor([1, 2, 3])
  y *= 2; y -= 1; y //= 2; y %= 2; y |= 4; y ^= 1; y &= 6; y **= 2
  assert y.tolist() == [16, 16, 16] and y.dtype is dtypes.int32
  z = Tensor([1.0, 2.0])
  z.copy_(Tensor([5.0])); z.add_(Tensor([1.0, 2.0]), alpha=2)
  assert z.tolist() == [7.0, 9.0]


def test_in_place_rules():
  with pytest.raises(TypeError, match="float32 cannot be stored in place into a int32 tensor"):
    t = Tensor([1, 2]); t /= 2
  with pytest.raises(ValueError, match=r"in-place result of shape \(2, 2\) does not match the tensor's shape \(2,\)"):
    Tensor([1.0, 2.0]).add_(Tensor([[1.0], [2.0]]))
  w = Tensor([1.0, 2.0], requires_grad=True)
  with pytest.raises(RuntimeError, match="a leaf tensor that requires grad is used in an in-place operation"): w += 1
  with pytest.raises(RuntimeError, match="a view of a leaf tensor that requires grad"): w[0:1].mul_(2)
  with no_grad(): w -= 0.5           # allowed without gradients, like an optimizer step
  assert w.tolist() == [0.5, 1.5] and w.requires_grad
  w.detach().add_(1)                 # through detach: untracked, allowed
  assert w.tolist() == [1.5, 2.5]


def test_in_place_autograd():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  y = x * 2
  before = y * y                     # uses y's old value
  y.mul_(3)                          # y = 6x
  (y.sum() + before.sum()).backward()
  np.testing.assert_allclose(x.grad.numpy(), 6 + 8 * np.array([1.0, 2.0, 3.0]))
  x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
  y = x * 1.0
  y[0].mul_(5)                       # through a view
  (y * y).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [[50.0, 100.0], [6.0, 8.0]])


def test_views_keep_their_graph_across_steps():
  """A view made once (w.T) stays usable after backward() and follows the optimizer's updates of w."""
  w = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
  wt = w.T
  x = Tensor([[1.0, 1.0]])
  for _ in range(2):
    w.grad = None
    (x @ wt).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[1.0, 1.0], [1.0, 1.0]])
    with no_grad(): w.assign(w - 0.5 * w.grad)
  np.testing.assert_allclose(wt.numpy(), np.array([[0.0, 1.0], [2.0, 3.0]]).T)
  y = w * w
  y.sum().backward()
  with pytest.raises(RuntimeError, match="backward\\(\\) through a graph an earlier backward\\(\\) already freed"): y.sum().backward()


# --- conversions
def test_python_and_numpy_conversions():
  assert float(Tensor([2.5])) == 2.5 and int(Tensor([[3.9]])) == 3 and bool(Tensor(1)) and not bool(Tensor([0.0]))
  assert [10, 20, 30][Tensor(1)] == 20 and int(Tensor(np.int64(2**40))) == 2**40
  with pytest.raises(ValueError, match=r"only one-element tensors can be converted to Python floats, this one has shape \(2,\)"):
    float(Tensor([1.0, 2.0]))
  with pytest.raises(RuntimeError, match="truth value of a tensor with 2 elements"): bool(Tensor([1, 1]))
  with pytest.raises(TypeError, match="only integer tensors of a single element can be converted to an index"): [1][Tensor(0.0)]
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  t = Tensor(a)
  assert isinstance(np.asarray(t), np.ndarray) and np.asarray(t).dtype == np.float32 and np.array_equal(np.asarray(t), a)
  assert np.allclose(t, a) and np.asarray(t, dtype=np.float64).dtype == np.float64
  np.testing.assert_array_equal(t, a)
  out = a + t                        # ndarray <op> Tensor defers to the Tensor
  assert isinstance(out, Tensor) and out.tolist() == (2 * a).tolist()
  assert [r.tolist() for r in t] == a.tolist()
  with pytest.raises(TypeError, match="iteration over a 0-d tensor"): list(Tensor(1.0))


def test_repr_shows_values():
  dev = Device.DEFAULT
  assert repr(Tensor([[1.0, 2.0]])) == f"tensor([[1., 2.]], device='{dev}')"
  assert repr(Tensor([1, 2], dtype="int64")) == f"tensor([1, 2], device='{dev}', dtype=dtypes.int64)"
  assert repr(Tensor(True)) == f"tensor(True, device='{dev}')"
  assert repr(Tensor([0.5], requires_grad=True)) == f"tensor([0.5], device='{dev}', requires_grad=True)"
  assert repr(Tensor([0.5], requires_grad=True) * 2) == f"tensor([1.], device='{dev}', grad_fn=<Mul>)"
  assert repr(Tensor.zeros(0, 3)) == f"tensor([], device='{dev}', size=(0, 3))"
  assert repr(Tensor([[1.5, -2.0], [3.0, 4.0]])) == f"tensor([[ 1.5, -2. ],\n        [ 3. ,  4. ]], device='{dev}')"


# --- cross_entropy
def test_cross_entropy_checks_labels():
  logits = Tensor(RNG.standard_normal((4, 3)).astype(np.float32))
  with pytest.raises(IndexError, match=r"cross_entropy label 7 is out of range for 3 classes \(labels are 0..2\)"):
    logits.cross_entropy(Tensor([0, 7, 1, 2]))
  with pytest.raises(IndexError, match="label -1 is out of range"): logits.cross_entropy(Tensor([0, -1, 1, 2]))
  with pytest.raises(IndexError, match="label 3 is out of range"): logits.cross_entropy(Tensor([0, 1, 2, 2]).maximum(Tensor([3, 0, 0, 0])))
  with pytest.raises(TypeError, match=r"labels must be integer class indices \(shape \(4,\)\), got float32"):
    logits.cross_entropy(Tensor([0.0, 1.0, 1.0, 2.0]))
  with pytest.raises(IndexError, match="one_hot: class index 5 is out of range for 3 classes"): Tensor([5]).one_hot(3)


def test_cross_entropy_ignore_index_like_torch():
  x = RNG.standard_normal((4, 3)).astype(np.float32)
  y = np.array([2, -100, 0, 1])
  ls = x - x.max(1, keepdims=True) - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True))
  per = np.array([-ls[i, c] if c != -100 else 0.0 for i, c in enumerate(y)])
  t = Tensor(x)
  np.testing.assert_allclose(t.cross_entropy(Tensor(y)).item(), per.sum() / 3, rtol=1e-5)
  np.testing.assert_allclose(t.cross_entropy(Tensor(y), reduction="none").numpy(), per, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(t.cross_entropy(Tensor(y), reduction="sum").item(), per.sum(), rtol=1e-5)
