"""PyTorch's conversions, factories and the rest of its Tensor methods and torch.<name> functions, against numpy, on
the CPU device and the emulated AMD GPU."""
import math
import numpy as np
import pytest
import compute
from compute import Tensor, Device, dtypes
from tests.compute.conftest import check

RNG = np.random.default_rng(5)
pytestmark = pytest.mark.usefixtures("cpu_and_amd")   # every test on CPU and MOCKPCI+AMD


# --- conversions and properties
def test_to_takes_a_dtype_a_device_both_or_a_tensor():
  x = RNG.standard_normal((2, 3)).astype(np.float32)
  t = Tensor(x)
  assert t.to(dtypes.float16).dtype is dtypes.float16 and t.to("float64").dtype is dtypes.float64
  h = t.to(Device.DEFAULT, dtypes.int64)
  assert h.dtype is dtypes.int64 and h.device == Device.DEFAULT and h.tolist() == x.astype(np.int64).tolist()
  o = t.to(Tensor([1], dtype=dtypes.int8, device="CPU"))
  assert o.dtype is dtypes.int8 and o.device == "CPU" and o.tolist() == x.astype(np.int8).tolist()
  assert t.to(dtype=dtypes.bfloat16, device="CPU").device == "CPU" and t.to(t.device) is t and t.to(t.device, copy=True) is not t
  with pytest.raises(TypeError, match=r"to\(\) takes a device string, a dtype or a tensor, got 3"): t.to(3)


def test_conversions_and_properties():
  x = np.array([[1.7, -2.2, 0.0]], np.float32)
  t = Tensor(x)
  for fn, dt in [("half", np.float16), ("float", np.float32), ("double", np.float64), ("long", np.int64), ("int", np.int32),
                 ("bool", np.bool_), ("char", np.int8)]:
    got = getattr(t, fn)()
    assert got.numpy().dtype == dt and got.tolist() == x.astype(dt).tolist(), fn
  assert t.type_as(Tensor([1], dtype=dtypes.int64)).dtype is dtypes.int64
  assert t.dim() == t.ndim == 2 and t.size(1) == 3 and t.size() == (1, 3) and t.numel() == 3 and t.element_size() == 4
  assert t.double().element_size() == 8 and t.is_floating_point() and not t.long().is_floating_point()
  z, o, f = t.new_zeros(2, 2), t.new_ones((3,)), t.new_full((2,), 7)
  assert z.dtype is o.dtype is f.dtype is dtypes.float32 and z.tolist() == [[0, 0], [0, 0]] and f.tolist() == [7, 7]
  assert t.new_zeros(2, dtype=dtypes.int64).dtype is dtypes.int64 and t.new_tensor([1, 2]).dtype is dtypes.float32


def test_clone_is_a_copy_with_gradients():
  a = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  c = a.clone()
  (c * c).sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [2, 4, 6])
  b = Tensor([1, 2, 3])
  d, v = b.clone(), b[1:]
  d += 10
  b[0] = 5
  assert b.tolist() == [5, 2, 3] and d.tolist() == [11, 12, 13] and v.tolist() == [2, 3]


def test_factories_like_torch():
  np.testing.assert_allclose(compute.linspace(-1, 2, 7).numpy(), np.linspace(-1, 2, 7, dtype=np.float32), rtol=1e-6)
  assert compute.linspace(0, 1, 5).dtype is dtypes.float32 and compute.linspace(3, 3, 1).tolist() == [3.0]
  assert compute.linspace(0, 1, 0).shape == (0,) and compute.linspace(0, 10, 5, dtype=dtypes.float64).tolist() == [0, 2.5, 5, 7.5, 10]
  np.testing.assert_allclose(compute.logspace(0, 3, 4).numpy(), [1, 10, 100, 1000], rtol=1e-6)
  np.testing.assert_allclose(compute.logspace(0, 4, 3, base=2).numpy(), [1, 4, 16], rtol=1e-6)
  t = Tensor([[1, 2]], dtype=dtypes.int64)
  assert compute.zeros_like(t).dtype is dtypes.int64 and compute.full_like(t, 7).tolist() == [[7, 7]]
  assert compute.ones_like(t, dtype=dtypes.float32).dtype is dtypes.float32
  r, n = compute.rand_like(Tensor([[0.0] * 50] * 4)), Tensor.randn_like(Tensor([0.0] * 400), seed=1)
  assert r.shape == (4, 50) and 0 <= r.numpy().min() and r.numpy().max() < 1 and abs(float(n.mean())) < 0.2


# --- splitting and moving
def test_chunk_split_tensor_split_unbind_narrow_are_views():
  a = np.arange(30).reshape(5, 6).astype(np.int32)
  t = Tensor(a)
  assert [p.tolist() for p in t.chunk(3, 1)] == [p.tolist() for p in np.split(a, 3, 1)]
  assert [p.shape for p in t.chunk(2)] == [(3, 6), (2, 6)] and [p.shape for p in t.split(2)] == [(2, 6), (2, 6), (1, 6)]
  assert [p.tolist() for p in t.split([1, 3, 2], dim=1)] == [p.tolist() for p in np.split(a, [1, 4], 1)]
  assert [p.tolist() for p in t.tensor_split(4, dim=1)] == [p.tolist() for p in np.array_split(a, 4, 1)]
  assert [p.tolist() for p in t.tensor_split([1, 4])] == [p.tolist() for p in np.split(a, [1, 4])]
  assert [p.tolist() for p in t.unbind(1)] == a.T.tolist() and t.narrow(1, -3, 2).tolist() == a[:, 3:5].tolist()
  first, _ = t.split([1, 4])
  t[0, 0] = 99
  assert first.tolist()[0][0] == 99                        # a view, as in PyTorch
  with pytest.raises(ValueError, match=r"split sizes \[1, 2\] must be non-negative and add up to 5"): t.split([1, 2])
  with pytest.raises(IndexError, match=r"narrow: start 4 and length 3 do not fit dim 0 of size 5"): t.narrow(0, 4, 3)


def test_movedim_roll_flip_repeat_interleave():
  a = np.arange(24).reshape(2, 3, 4).astype(np.float32)
  t = Tensor(a)
  assert t.movedim(0, -1).tolist() == np.moveaxis(a, 0, -1).tolist()
  assert t.moveaxis((0, 1), (2, 0)).tolist() == np.moveaxis(a, (0, 1), (2, 0)).tolist()
  assert t.roll(2, 2).tolist() == np.roll(a, 2, 2).tolist() and t.roll((1, -1), (0, 1)).tolist() == np.roll(a, (1, -1), (0, 1)).tolist()
  assert t.roll(5).tolist() == np.roll(a, 5).tolist()
  assert t.flip(0, 2).tolist() == np.flip(a, (0, 2)).tolist() and t.flip([1]).tolist() == np.flip(a, 1).tolist()
  assert t.flip().tolist() == np.flip(a).tolist()
  assert t.repeat_interleave(2, dim=1).tolist() == np.repeat(a, 2, 1).tolist() and t.repeat_interleave(2).tolist() == np.repeat(a, 2).tolist()
  assert t.repeat_interleave(Tensor([0, 2, 1]), dim=1).tolist() == np.repeat(a, [0, 2, 1], 1).tolist()
  u = Tensor(a[0])
  assert u.view_as(Tensor(a[0].T.copy())).shape == (4, 3) and u.reshape_as(u.T).shape == (4, 3)
  assert Tensor([[1.0], [2.0]]).expand_as(Tensor(np.zeros((2, 3)))).tolist() == [[1, 1, 1], [2, 2, 2]]


def test_triangles_and_diagonals():
  a = RNG.standard_normal((3, 4)).astype(np.float32)
  t = Tensor(a)
  for k in (-1, 0, 2):
    assert t.tril(k).tolist() == np.tril(a, k).tolist() and t.triu(diagonal=k).tolist() == np.triu(a, k).tolist()
    assert t.diagonal(k).tolist() == np.diagonal(a, k).tolist() and t.diag(k).tolist() == np.diag(a, k).tolist()
    assert Tensor(a[0]).diag(k).tolist() == np.diag(a[0], k).tolist()
  b = RNG.standard_normal((2, 3, 3)).astype(np.float32)
  assert Tensor(b).diagonal(0, 1, 2).tolist() == np.diagonal(b, 0, 1, 2).tolist()
  np.testing.assert_allclose(Tensor(a).trace().numpy(), np.trace(a), rtol=1e-6)
  assert Tensor(np.arange(9).reshape(3, 3)).trace().dtype is dtypes.int64
  check([(3, 3)], lambda x: x.tril(), lambda x: np.tril(x))


# --- products
def test_outer_bmm_baddbmm_addmm_cdist():
  check([(3,), (4,)], lambda x, y: compute.outer(x, y), lambda x, y: np.outer(x, y))
  check([(2, 3, 4), (2, 4, 2)], lambda x, y: x.bmm(y), lambda x, y: x @ y)
  check([(2, 3, 2), (2, 3, 4), (2, 4, 2)], lambda i, x, y: i.baddbmm(x, y, beta=0.5, alpha=2), lambda i, x, y: 0.5 * i + 2 * (x @ y))
  check([(3,), (2, 4), (4, 3)], lambda i, x, y: compute.addmm(i, x, y), lambda i, x, y: i + x @ y)
  nan = Tensor([math.nan, math.nan])
  assert nan.addmm(Tensor([[1.0, 2.0]]), Tensor([[3.0, 4.0], [5.0, 6.0]]), beta=0).tolist() == [[13.0, 16.0]]   # beta=0 ignores the input
  x, y = RNG.standard_normal((4, 3)).astype(np.float32), RNG.standard_normal((5, 3)).astype(np.float32)
  for p in (1.0, 2.0, math.inf):
    ref = np.linalg.norm(x[:, None] - y[None], ord=p, axis=-1)
    np.testing.assert_allclose(compute.cdist(Tensor(x), Tensor(y), p=p).numpy(), ref, rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match=r"bmm needs 3-D tensors with the same batch size"): Tensor(x).bmm(Tensor(y))


# --- elementwise
def test_rounding_and_float_classes():
  x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 3.2, 7.0], np.float32)
  t = Tensor(x)
  for name, ref in [("round", np.rint), ("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc), ("sign", np.sign)]:
    assert getattr(t, name)().tolist() == ref(x).tolist(), name       # round: half to even
  np.testing.assert_allclose(t.frac().numpy(), x - np.trunc(x))
  np.testing.assert_allclose(t.round(decimals=1).numpy(), np.round(x, 1))
  s = np.array([1.0, np.nan, np.inf, -np.inf, -2.0], np.float32)
  ts = Tensor(s)
  for name in ("isnan", "isinf", "isfinite"): assert getattr(ts, name)().tolist() == getattr(np, name)(s).tolist(), name
  assert ts.nan_to_num().tolist() == np.nan_to_num(s).tolist() and ts.nan_to_num(1.0, 2.0, -3.0).tolist() == [1, 1, 2, -3, -2]
  assert Tensor([1, 2]).isnan().tolist() == [False, False] and Tensor([1, 2]).isfinite().tolist() == [True, True]
  assert t.clamp_min(0).tolist() == np.maximum(x, 0).tolist() and t.clamp_max(1).tolist() == np.minimum(x, 1).tolist()
  check([(5,), (5,)], lambda a, b: a.lerp(b, 0.3), lambda a, b: a + 0.3 * (b - a))


def test_special_functions():
  erf = np.vectorize(math.erf)
  check([(12,)], lambda x: x.log1p(), np.log1p, low=-0.9, high=3, atol=1e-6)
  check([(12,)], lambda x: x.expm1(), np.expm1, atol=1e-6)
  check([(12,)], lambda x: x.erf(), erf, low=-3, high=3, atol=3e-7)
  check([(12,)], lambda x: x.atan(), np.arctan, low=-5, high=5, atol=1e-6)
  check([(3, 4), (3, 4)], lambda y, x: y.atan2(x), np.arctan2, atol=1e-6)
  check([(3, 4), (4,)], lambda x, y: compute.hypot(x, y), np.hypot)
  tiny = np.array([1e-10, -3e-9, 0.0], np.float32)
  np.testing.assert_allclose(Tensor(tiny).log1p().numpy(), np.log1p(tiny), rtol=1e-6)
  np.testing.assert_allclose(Tensor(tiny).expm1().numpy(), np.expm1(tiny), rtol=1e-6)
  axes = np.array([0.0, 1.0, -1.0, 0.0], np.float32), np.array([0.0, 0.0, 0.0, -1.0], np.float32)
  np.testing.assert_allclose(Tensor(axes[0]).atan2(Tensor(axes[1])).numpy(), np.arctan2(*axes), rtol=1e-6)
  assert Tensor([3e30, np.inf]).hypot(Tensor([4e30, 1.0])).tolist() == [np.float32(5e30), np.inf]


def test_isclose_allclose_where_maximum():
  a = np.array([1.0, 1.0 + 1e-6, np.nan, np.inf, 2.0], np.float32)
  b = np.array([1.0, 1.0, np.nan, np.inf, 2.1], np.float32)
  assert Tensor(a).isclose(Tensor(b)).tolist() == np.isclose(a, b).tolist()
  assert compute.isclose(Tensor(a), Tensor(b), equal_nan=True).tolist() == np.isclose(a, b, equal_nan=True).tolist()
  assert compute.allclose(Tensor(a[:2]), Tensor(b[:2])) is True and Tensor(a).allclose(Tensor(b), atol=0.2, equal_nan=True) is True
  c = Tensor([1.0, -2.0, 3.0])
  assert compute.where(c > 0, c, 0.0).tolist() == [1, 0, 3] and compute.maximum(c, Tensor(0.5)).tolist() == [1, 0.5, 3]
  assert [i.tolist() for i in compute.where(Tensor([[0, 1], [1, 1]]) > 0)] == [[0, 1, 1], [1, 0, 1]]
  with pytest.raises(TypeError, match=r"where\(cond, x, y\) needs both x and y"): compute.where(c > 0, c)
  assert compute.minimum(c, Tensor([0.0, 0.0, 5.0])).tolist() == [0, -2, 3]


# --- data-dependent sizes
def test_nonzero_bincount_histc():
  a = np.array([[0, 3, 0], [1, 0, 2]], np.int32)
  assert Tensor(a).nonzero().tolist() == np.argwhere(a).tolist() and Tensor(a).nonzero().dtype is dtypes.int64
  assert [i.tolist() for i in Tensor(a).nonzero(as_tuple=True)] == [i.tolist() for i in np.nonzero(a)]
  v = np.array([2, 0, 5, 2, 2, 1], np.int64)
  w = RNG.random(6).astype(np.float32)
  assert Tensor(v).bincount().tolist() == np.bincount(v).tolist() and Tensor(v).bincount().dtype is dtypes.int64
  assert Tensor(v).bincount(minlength=9).tolist() == np.bincount(v, minlength=9).tolist()
  got = Tensor(v).bincount(Tensor(w))
  assert got.dtype is dtypes.float32
  np.testing.assert_allclose(got.numpy(), np.bincount(v, w), rtol=1e-6)
  with pytest.raises(ValueError, match="bincount needs non-negative values, got -1"): Tensor([1, -1]).bincount()
  x = RNG.standard_normal(50).astype(np.float32)
  assert Tensor(x).histc(5, -2, 2).tolist() == np.histogram(x, 5, (-2, 2))[0].tolist()
  assert Tensor(x).histc(4).tolist() == np.histogram(x, 4)[0].tolist()     # min == max: the data's range
  with pytest.raises(TypeError, match="histc needs a floating-point tensor, got int64; use bincount"): Tensor(v).histc()


def test_module_functions_are_the_tensor_methods():
  x = RNG.standard_normal((3, 4)).astype(np.float32)
  t = Tensor(x)
  v, i = compute.max(t, 1)
  assert v.tolist() == x.max(1).tolist() and i.tolist() == x.argmax(1).tolist()
  np.testing.assert_allclose(compute.sum(t, dim=0).numpy(), x.sum(0), rtol=1e-6)
  assert [p.shape for p in compute.chunk(t, 2, dim=1)] == [(3, 2), (3, 2)] and compute.tril(t).tolist() == np.tril(x).tolist()
  assert compute.norm(t).item() == pytest.approx(np.linalg.norm(x), rel=1e-6) and compute.prod(t).item() == pytest.approx(np.prod(x), rel=1e-4)
  assert compute.any(t > 1).item() == bool((x > 1).any()) and compute.all(t > -10).item() is True
