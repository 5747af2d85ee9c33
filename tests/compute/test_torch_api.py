"""The Tensor API with PyTorch's names, signatures, defaults and return dtypes, against numpy, on the CPU device and the
emulated AMD GPU: reductions with dim/keepdim, (values, indices) results with int64 indices, var/std corrections,
int64 sums, and the numpy-only arguments refused with the PyTorch spelling."""
import math
import numpy as np
import pytest
from compute import Tensor, dtypes
from tests.compute.conftest import check

RNG = np.random.default_rng(11)
pytestmark = pytest.mark.usefixtures("cpu_and_amd")   # every test on CPU and MOCKPCI+AMD


# --- reductions
def test_reductions_take_dim_and_keepdim_with_numpy_aliases():
  x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
  t = Tensor(x)
  np.testing.assert_allclose(t.sum(dim=1).numpy(), x.sum(1), rtol=1e-5)
  np.testing.assert_allclose(t.sum(dim=(0, 2), keepdim=True).numpy(), x.sum((0, 2), keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(t.mean(axis=-1, keepdims=True).numpy(), x.mean(-1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(t.amax(dim=(1, 2)).numpy(), x.max((1, 2)))
  np.testing.assert_allclose(t.amin().numpy(), x.min())
  check([(3, 5)], lambda a: a.prod(1), lambda a: np.prod(a, 1), low=0.5, high=1.5)
  check([(3, 5)], lambda a: a.prod(dim=0, keepdim=True), lambda a: np.prod(a, 0, keepdims=True), low=-1.5, high=1.5)
  np.testing.assert_allclose(t.prod().numpy(), np.prod(x), rtol=1e-4)
  assert t.prod().shape == () and t.prod(keepdim=True).shape == t.sum(keepdim=True).shape == (1, 1, 1)


def test_integer_and_bool_sums_and_products_are_int64():
  b = RNG.random((3, 5)) > 0.5
  assert Tensor(b).sum().dtype is dtypes.int64 and Tensor(b).sum().item() == b.sum()
  a = RNG.integers(-9, 9, (3, 5)).astype(np.int32)
  for got, want in [(Tensor(a).sum(1), a.sum(1)), (Tensor(a).prod(1), np.prod(a.astype(np.int64), 1)), (Tensor(a).cumsum(0), np.cumsum(a, 0))]:
    assert got.dtype is dtypes.int64
    np.testing.assert_array_equal(got.numpy(), want)
  assert Tensor(a).sum(1, dtype=dtypes.int32).dtype is dtypes.int32 and Tensor(a).sum(1, dtype=dtypes.int32).tolist() == a.sum(1).tolist()
  assert Tensor(np.arange(1, 21, dtype=np.int32)).prod().item() == math.factorial(20)      # beyond int32, in int64


def test_max_min_along_a_dim_give_values_and_first_int64_indices():
  x = RNG.standard_normal((4, 6)).astype(np.float32)
  x[1, 2] = x[1, 4] = 9.0                              # a tie: the first index, like PyTorch
  x[2, 1] = x[2, 5] = -9.0
  v, i = Tensor(x).max(1)
  np.testing.assert_array_equal(v.numpy(), x.max(1))
  np.testing.assert_array_equal(i.numpy(), x.argmax(1))
  assert i.dtype is dtypes.int64 and Tensor(x).max(dim=0).indices.dtype is dtypes.int64
  r = Tensor(x).min(dim=1, keepdim=True)
  assert r.values.shape == r.indices.shape == (4, 1)
  np.testing.assert_array_equal(r.indices.numpy()[:, 0], x.argmin(1))
  m = Tensor(x).max()
  assert m.shape == () and m.item() == x.max() and Tensor(x).min().item() == x.min()
  np.testing.assert_array_equal(Tensor(x).max(Tensor(-x)).numpy(), np.maximum(x, -x))     # max(other): maximum
  assert Tensor(x).argmax().dtype is dtypes.int64 and Tensor(x).argmax().item() == x.argmax()
  n = x.copy(); n[3, 2] = np.nan
  assert Tensor(n).argmax(1).tolist()[3] == 2 and math.isnan(Tensor(n).max(1).values.tolist()[3])   # NaN is the maximum
  check([(3, 5)], lambda a: a.max(1).values, lambda a: a.max(1))
  t = Tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
  t.min(1, keepdim=True).values.sum().backward()
  assert t.grad.tolist() == [[1, 0, 0], [0, 0, 1]]
  t.grad = None
  t.max(1).values.sum().backward()          # the gradient goes to the index returned; amax shares it among ties
  assert t.grad.tolist() == [[0, 1, 0], [1, 0, 0]]
  t.grad = None
  t.amax(1).sum().backward()
  assert t.grad.tolist() == [[0, 0.5, 0.5], [0.5, 0.5, 0]]


@pytest.mark.parametrize("dim,unbiased,correction", [(None, None, None), (1, False, None), (0, None, 2), ((0, 1), True, None)])
def test_var_std_default_to_unbiased_and_take_correction(dim, unbiased, correction):
  ddof = correction if correction is not None else 0 if unbiased is False else 1
  kw = {"correction": correction} if correction is not None else {}
  check([(4, 5)], lambda a: a.var(dim, unbiased, **kw), lambda a: np.var(a, axis=dim, ddof=ddof))
  check([(4, 5)], lambda a: a.std(dim, unbiased, keepdim=True, **kw), lambda a: np.std(a, axis=dim, ddof=ddof, keepdims=True))
  x = RNG.standard_normal((4, 5)).astype(np.float32)
  v, m = Tensor(x).var_mean(dim, unbiased, **kw)
  s, m2 = Tensor(x).std_mean(dim, unbiased, **kw)
  np.testing.assert_allclose(v.numpy(), np.var(x, axis=dim, ddof=ddof), rtol=1e-5)
  np.testing.assert_allclose(s.numpy(), np.std(x, axis=dim, ddof=ddof), rtol=1e-5)
  np.testing.assert_allclose(m.numpy(), x.mean(axis=dim), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(m2.numpy(), x.mean(axis=dim), rtol=1e-5, atol=1e-6)


def test_any_all_count_nonzero_norm():
  x = np.array([[0.0, 1.5, 0.0, -2.0], [0.0, 0.0, 0.0, 0.0], [3.0, -1.0, 2.0, 0.5]], np.float32)
  t = Tensor(x)
  np.testing.assert_array_equal(t.any(1).numpy(), x.any(1))
  np.testing.assert_array_equal(t.all(dim=1).numpy(), x.all(1))
  assert t.any().item() is True and t.all().item() is False and t.any(0, keepdim=True).shape == (1, 4)
  assert Tensor(x[:, :0]).any().item() is False and Tensor(x[:, :0]).all().item() is True
  c = t.count_nonzero(0)
  assert c.dtype is dtypes.int64 and c.tolist() == np.count_nonzero(x, 0).tolist()
  for p in ("fro", 2, 1, math.inf, -math.inf, 0, 3):
    ref = np.linalg.norm(x, ord=p if p != "fro" else None, axis=1)
    np.testing.assert_allclose(t.norm(p, dim=1).numpy(), ref, rtol=1e-5, err_msg=f"p={p}")
  np.testing.assert_allclose(t.norm().numpy(), np.linalg.norm(x), rtol=1e-6)
  check([(3, 4)], lambda a: a.norm(dim=1, keepdim=True), lambda a: np.linalg.norm(a, axis=1, keepdims=True))


def test_a_0d_tensor_reduces_over_dim_0_like_pytorch():
  t = Tensor(3.0)
  v, i = t.max(0)
  assert v.shape == i.shape == () and v.item() == 3.0 and i.item() == 0 and i.dtype is dtypes.int64
  assert t.amax(-1).item() == t.sum(0).item() == t.prod(0).item() == t.flip(0).item() == 3.0 and math.isnan(t.var(0).item())
  assert t.median(0).values.item() == t.kthvalue(1).values.item() == 3.0 and t.any(0).item() is True


# --- sorting and selection
def test_sort_topk_kthvalue_give_int64_indices():
  x = RNG.permutation(24).reshape(4, 6).astype(np.float32)
  v, i = Tensor(x).sort(dim=0, descending=True)
  np.testing.assert_array_equal(i.numpy(), np.argsort(-x, 0))
  np.testing.assert_array_equal(v.numpy(), -np.sort(-x, 0))
  assert i.dtype is dtypes.int64 and Tensor(x).topk(2).indices.dtype is dtypes.int64
  for k in (1, 3, 6):
    r = Tensor(x).kthvalue(k, 1)
    np.testing.assert_array_equal(r.values.numpy(), np.sort(x, 1)[:, k - 1])
    np.testing.assert_array_equal(r.indices.numpy(), np.argsort(x, 1)[:, k - 1])
  assert Tensor(x).kthvalue(2, dim=0, keepdim=True).values.shape == (1, 6)


def test_median_is_the_lower_one_and_propagates_nan():
  x = RNG.permutation(20).reshape(4, 5).astype(np.float32)
  r = Tensor(x[:, :4]).median(1)                      # even length: the lower of the two middle values
  np.testing.assert_array_equal(r.values.numpy(), np.sort(x[:, :4], 1)[:, 1])
  np.testing.assert_array_equal(r.indices.numpy(), np.argsort(x[:, :4], 1)[:, 1])
  assert r.indices.dtype is dtypes.int64 and Tensor(x).median(0, keepdim=True).values.shape == (1, 5)
  np.testing.assert_array_equal(Tensor(x).median(0).values.numpy(), np.sort(x, 0)[1])
  assert Tensor(x).median().item() == np.sort(x.reshape(-1))[9] and Tensor(x).median().shape == ()
  x[2, 3] = x[2, 1] = np.nan
  r = Tensor(x).median(1)
  assert math.isnan(r.values.tolist()[2]) and r.indices.tolist()[2] == 1 and not np.isnan(r.values.numpy()[[0, 1, 3]]).any()


def test_mode_is_the_smallest_most_frequent_value_at_its_last_index():
  a = np.array([[1, 2, 2, 3, 3, 1, 5], [4, 4, 4, 0, 0, 0, 0], [7, 6, 5, 4, 3, 2, 1]], np.int32)
  r = Tensor(a).mode(1)
  assert r.values.tolist() == [1, 0, 1] and r.indices.tolist() == [5, 6, 6] and r.indices.dtype is dtypes.int64
  assert Tensor(a.astype(np.float32)).mode(0, keepdim=True).values.shape == (1, 7)


def test_unique_and_searchsorted():
  a = np.array([[3, 1, 2], [3, 1, 1], [7, 0, 2]], np.int32)
  vals, inv, counts = Tensor(a).unique(return_inverse=True, return_counts=True)
  rv, ri, rc = np.unique(a, return_inverse=True, return_counts=True)
  assert vals.tolist() == rv.tolist() and counts.tolist() == rc.tolist() and inv.numpy().tolist() == ri.reshape(a.shape).tolist()
  assert inv.dtype is dtypes.int64 and counts.dtype is dtypes.int64 and Tensor(a).unique().dtype is dtypes.int32
  seq = np.array([1.0, 2.0, 2.0, 3.5, 9.0], np.float32)
  v = np.array([[0.0, 2.0, 3.5], [9.0, 10.0, 2.5]], np.float32)
  for side in ("left", "right"):
    got = Tensor(seq).searchsorted(Tensor(v), side=side)
    assert got.dtype is dtypes.int64 and got.tolist() == np.searchsorted(seq, v, side=side).tolist()
  assert Tensor(seq).searchsorted(Tensor(v), right=True, out_int32=True).dtype is dtypes.int32
  rows = np.sort(RNG.standard_normal((2, 5)).astype(np.float32), 1)
  got = Tensor(rows).searchsorted(Tensor(rows[:, :3] + 0.01))
  assert got.tolist() == [np.searchsorted(r, q).tolist() for r, q in zip(rows, rows[:, :3] + 0.01)]


# --- errors
def test_one_hot_is_int64_and_factories_with_dtype_none_give_the_default_float():
  idx = np.array([[0, 3], [2, 1]], np.int32)
  oh = Tensor(idx).one_hot(5)
  assert oh.dtype is dtypes.int64
  np.testing.assert_array_equal(oh.numpy(), np.eye(5, dtype=np.int64)[idx])
  for make, fill in ((Tensor.ones, 1.0), (Tensor.zeros, 0.0)):
    assert make(2, 3, dtype=None).dtype is make(2, 3).dtype is dtypes.default_float
    np.testing.assert_array_equal(make((2, 3), dtype=None).numpy(), np.full((2, 3), fill, np.float32))
  assert Tensor.ones(2, dtype=dtypes.int64).dtype is dtypes.int64


def test_mean_refuses_integers_like_pytorch_and_takes_a_float_dtype():
  a = RNG.integers(-9, 9, (3, 5)).astype(np.int32)
  for t in (Tensor(a), Tensor(a > 0)):
    with pytest.raises(TypeError, match=rf"mean needs a float tensor, got {t.dtype.name}: convert it first, as t.float\(\).mean\(\)"): t.mean(1)
  with pytest.raises(TypeError, match="mean needs a float tensor, got int64"): Tensor(a).mean(dtype=dtypes.int64)
  np.testing.assert_allclose(Tensor(a).float().mean(1).numpy(), a.mean(1), rtol=1e-6)
  got = Tensor(a).mean(0, dtype=dtypes.float64)
  assert got.dtype is dtypes.float64
  np.testing.assert_allclose(got.numpy(), a.mean(0))


def test_logsumexp_of_an_all_minus_inf_row_is_minus_inf_and_its_backward_still_works():
  x = np.array([[-np.inf, -np.inf, -np.inf], [1.0, 2.0, -np.inf], [np.inf, 0.0, 1.0]], np.float32)
  with np.errstate(divide="ignore"): want = np.log(np.exp(x.astype(np.float64)).sum(1))
  np.testing.assert_allclose(Tensor(x).logsumexp(1).numpy(), want, rtol=1e-6)
  t = Tensor(x[1:2], requires_grad=True)
  t.logsumexp(1).sum().backward()
  np.testing.assert_allclose(t.grad.numpy(), np.exp(x[1:2] - want[1]), rtol=1e-6)     # softmax: 0 at the -inf
  check([(2, 3, 4)], lambda a: a.logsumexp((0, 2), keepdim=True), lambda a: np.log(np.exp(a).sum((0, 2), keepdims=True)))


@pytest.mark.parametrize("p", ["fro", 2, 3, 1.5])
def test_norm_gradient_at_a_zero_input_is_zero_like_pytorch(p):
  x = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 1.0]], np.float32)
  t = Tensor(x, requires_grad=True)
  n = t.norm(p, dim=1)
  n.sum().backward()
  q = 2 if p == "fro" else p
  want = np.sum(np.abs(x.astype(np.float64)) ** q, 1) ** (1 / q)
  np.testing.assert_allclose(n.numpy(), want, rtol=1e-6)
  # d||x||_q/dx = sign(x) |x|^(q-1) / ||x||^(q-1), and 0 at a zero norm
  np.testing.assert_allclose(t.grad.numpy(), [[0.0] * 3, np.sign(x[1]) * np.abs(x[1]) ** (q - 1) / want[1] ** (q - 1)], rtol=1e-5)
  z = Tensor(np.zeros((2, 3), np.float64), requires_grad=True)
  z.norm(p).backward()
  assert z.norm(p).dtype is dtypes.float64 and z.grad.numpy().tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("call,err,match", [
  (lambda t: t.var(ddof=1), TypeError, r"var\(\) takes PyTorch's arguments: use correction= \(or unbiased=\), not numpy's ddof="),
  (lambda t: t.sum(out=t), TypeError, r"out= is not supported"),
  (lambda t: t.sort(kind="stable"), TypeError, r"use stable=True, not numpy's kind="),
  (lambda t: t.sum(dim=0, axis=1), TypeError, r"sum\(\) got both dim= and its numpy alias axis="),
  (lambda t: t.max((0, 1)), TypeError, r"use amax\(dim=\(0, 1\)\) to reduce several dims"),
  (lambda t: t.max(keepdim=True), TypeError, r"max\(\) without dim takes no keepdim"),
  (lambda t: t.var(1, unbiased=True, correction=0), TypeError, r"unbiased= or correction=, not both"),
  (lambda t: t.norm("nuc"), ValueError, r"norm p='nuc' is not supported"),
  (lambda t: t.kthvalue(5, 0), ValueError, r"kthvalue: k=5 is out of range 1..2"),
  (lambda t: t[:, :0].amax(1), ValueError, r"amax of an empty dim"),
  (lambda t: t.clamp(a_min=0), TypeError, r"use min=, not numpy's a_min="),
  (lambda t: t.transpose((1, 0)), TypeError, r"transpose\(dim0, dim1\) swaps two dims, got \(1, 0\); use permute\(\(1, 0\)\)"),
  (lambda t: t.flip(0, axis=1), TypeError, r"flip takes dims or numpy's axis=, not both"),
  (lambda t: t.prod((0, 1)), TypeError, r"prod\(dim\) takes one int dim"),
])
def test_numpy_only_or_bad_arguments_name_the_pytorch_spelling(call, err, match):
  with pytest.raises(err, match=match): call(Tensor([[1.0, 2.0], [3.0, 4.0]]))
