"""Every op, forward and backward, against numpy: on the CPU device and on the emulated AMD GPU (MOCKPCI+AMD: the
same kernels rendered as OpenCL C, compiled by clang-22 for gfx1100, run by the RDNA3 emulator)."""
import math
import numpy as np
import pytest
from compute import Tensor, dtypes
from tests.compute.conftest import check

S = (3, 4)


pytestmark = pytest.mark.usefixtures("cpu_and_amd")   # every test on CPU and MOCKPCI+AMD


@pytest.mark.parametrize("name,tfn,nfn,kw", [
  ("add", lambda a, b: a + b, np.add, {}),
  ("sub", lambda a, b: a - b, np.subtract, {}),
  ("mul", lambda a, b: a * b, np.multiply, {}),
  ("div", lambda a, b: a / b, np.divide, {"low": 0.5}),
  ("maximum", lambda a, b: a.maximum(b), np.maximum, {}),
  ("minimum", lambda a, b: a.minimum(b), np.minimum, {}),
  ("pow", lambda a, b: a ** b, np.power, {"low": 0.5}),
])
def test_binary(name, tfn, nfn, kw):
  check([S, S], tfn, nfn, **kw)


@pytest.mark.parametrize("shapes", [[(3, 4), (4,)], [(3, 1), (1, 4)], [(2, 1, 4), (3, 1)], [(), (3, 4)]])
def test_broadcasting(shapes):
  check(shapes, lambda a, b: a * b + a, lambda a, b: a * b + a)


def _np_gelu(x): return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("name,tfn,nfn,kw", [
  ("neg", lambda x: -x, np.negative, {}), ("exp", Tensor.exp, np.exp, {}), ("exp2", Tensor.exp2, np.exp2, {}),
  ("log", Tensor.log, np.log, {"low": 0.1}), ("log2", Tensor.log2, np.log2, {"low": 0.1}),
  ("sqrt", Tensor.sqrt, np.sqrt, {"low": 0.1}), ("rsqrt", Tensor.rsqrt, lambda x: 1 / np.sqrt(x), {"low": 0.5}),
  ("sin", Tensor.sin, np.sin, {"low": -4, "high": 4}), ("cos", Tensor.cos, np.cos, {"low": -4, "high": 4}),
  ("reciprocal", Tensor.reciprocal, np.reciprocal, {"low": 0.5}), ("relu", Tensor.relu, lambda x: np.maximum(x, 0), {}),
  ("sigmoid", Tensor.sigmoid, lambda x: 1 / (1 + np.exp(-x)), {}), ("tanh", Tensor.tanh, np.tanh, {}),
  ("gelu", Tensor.gelu, _np_gelu, {}), ("abs", Tensor.abs, np.abs, {}), ("square", Tensor.square, np.square, {}),
  ("silu", Tensor.silu, lambda x: x / (1 + np.exp(-x)), {}), ("softplus", Tensor.softplus, lambda x: np.log1p(np.exp(x)), {}),
  ("leaky_relu", Tensor.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x), {}),
  ("clip", lambda x: x.clip(-1, 0.5), lambda x: np.clip(x, -1, 0.5), {}),
])
def test_unary(name, tfn, nfn, kw):
  check([S], tfn, nfn, **kw)


def test_non_differentiable_elementwise_match_numpy():
  rng = np.random.default_rng(1)
  a, b = rng.uniform(-5, 5, S).astype(np.float32), rng.uniform(-5, 5, S).astype(np.float32)
  ta, tb = Tensor(a), Tensor(b)
  for t, n in [(ta < tb, a < b), (ta <= tb, a <= b), (ta > tb, a > b), (ta >= tb, a >= b), (ta == ta, a == a), (ta != tb, a != b),
               (ta.floor(), np.floor(a)), (ta.ceil(), np.ceil(a)), (ta.trunc(), np.trunc(a)), (ta // tb, a // b), (ta.sign(), np.sign(a))]:
    assert t.dtype is (dtypes.bool if n.dtype == np.bool_ else dtypes.float32)
    np.testing.assert_allclose(t.numpy(), n, rtol=1e-6)
  np.testing.assert_allclose((ta % tb).numpy(), np.mod(a, b), atol=1e-5)


def test_where():
  check([S, S, S], lambda c, x, y: x.where(c > 0, y), lambda c, x, y: np.where(c > 0, x, y), constant=(0,))
  check([(3, 1), (4,)], lambda c, x: x.where(c > 0, 2.0), lambda c, x: np.where(c > 0, x, 2.0), constant=(0,))


def test_integer_ops_like_numpy():
  a = np.array([-7, -3, 0, 3, 7, 100], dtype=np.int32)
  b = np.array([2, -2, 5, 0, -3, 7], dtype=np.int32)
  ta, tb = Tensor(a), Tensor(b)
  with np.errstate(divide="ignore"):
    np.testing.assert_array_equal((ta // tb).numpy(), a // b)
    np.testing.assert_array_equal((ta % tb).numpy(), a % b)
  np.testing.assert_array_equal((ta * tb + 1).numpy(), a * b + 1)
  np.testing.assert_array_equal((ta & tb).numpy(), a & b)
  np.testing.assert_array_equal((ta | tb).numpy(), a | b)
  np.testing.assert_array_equal((~ta).numpy(), ~a)
  assert (ta / tb).dtype is dtypes.float32
  u = np.array([250, 3, 7], dtype=np.uint8)
  np.testing.assert_array_equal((Tensor(u) + Tensor(u)).numpy(), u + u)   # wraps like numpy
  assert Tensor(u).sum().dtype is dtypes.int64 and Tensor(u).sum().item() == int(u.astype(np.int64).sum())


@pytest.mark.parametrize("dt,npdt,tol", [(dtypes.float16, np.float16, 1e-3), (dtypes.int8, np.int8, 0), (dtypes.uint8, np.uint8, 0),
                                         (dtypes.int32, np.int32, 0), (dtypes.bool, np.bool_, 0)])
def test_dtypes_roundtrip_and_arithmetic(dt, npdt, tol):
  rng = np.random.default_rng(2)
  a = (rng.uniform(0, 5, (4, 5)) if dt.is_float else rng.integers(0, 5, (4, 5))).astype(npdt)
  t = Tensor(a)
  assert t.dtype is dt
  np.testing.assert_array_equal(t.numpy(), a)
  if dt is not dtypes.bool:
    np.testing.assert_allclose((t * t + t).numpy().astype(np.float64), (a * a + a).astype(np.float64), rtol=tol)
  np.testing.assert_array_equal(t.cast(dtypes.float32).numpy(), a.astype(np.float32))


def test_bfloat16_rounds_to_nearest_even():
  x = np.array([1.0, 1.00390625, 1.01171875, 3.14159, -2.5e-3, 65504.0], dtype=np.float32)
  t = Tensor(x, dtype=dtypes.bfloat16)
  bits = x.view(np.uint32)
  ref = (((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) << 16).view(np.float32)
  np.testing.assert_array_equal(t.numpy(), ref)
  np.testing.assert_array_equal((t * 2).numpy(), ref * 2)


def test_promotion_like_numpy():
  i, f, h, u, b = Tensor([1]), Tensor([1.0]), Tensor([1.0], dtype="float16"), Tensor([1], dtype=dtypes.uint8), Tensor([True])
  assert (i + f).dtype is dtypes.float32 and (h + f).dtype is dtypes.float32 and (h + 1.5).dtype is dtypes.float16
  assert (u + i).dtype is dtypes.int32 and (u + 1).dtype is dtypes.uint8 and (b + b).dtype is dtypes.bool
  assert (i * 2.5).dtype is dtypes.float32 and (u + Tensor([1], dtype="int8")).dtype is dtypes.int32


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(axis, keepdim):
  shp = (2, 3, 4)
  check([shp], lambda x: x.sum(axis, keepdim), lambda x: np.sum(x, axis=axis, keepdims=keepdim))
  check([shp], lambda x: x.amax(axis, keepdim), lambda x: np.max(x, axis=axis, keepdims=keepdim))
  check([shp], lambda x: x.amin(axis, keepdim), lambda x: np.min(x, axis=axis, keepdims=keepdim))
  check([shp], lambda x: x.mean(axis, keepdim), lambda x: np.mean(x, axis=axis, keepdims=keepdim))


def test_var_std_logsumexp():
  check([(3, 5)], lambda x: x.var(1), lambda x: np.var(x, axis=1, ddof=1))
  check([(3, 5)], lambda x: x.std(0), lambda x: np.std(x, axis=0, ddof=1))
  check([(3, 5)], lambda x: x.logsumexp(1), lambda x: np.log(np.exp(x).sum(1)))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_argmax_argmin(axis):
  x = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
  x[1, 2] = x[1, 4] = 9.0   # a tie: the first index wins, like numpy
  np.testing.assert_array_equal(Tensor(x).argmax(axis).numpy(), np.argmax(x, axis=axis))
  np.testing.assert_array_equal(Tensor(x).argmin(axis).numpy(), np.argmin(x, axis=axis))
  assert Tensor(x).argmax(1, keepdim=True).shape == (4, 1)


def test_movement_ops():
  check([(2, 3, 4)], lambda x: x.reshape(4, -1), lambda x: x.reshape(4, -1))
  check([(2, 3, 4)], lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1))
  check([(2, 3, 4)], lambda x: x.transpose(0, 2), lambda x: x.swapaxes(0, 2))
  check([(3, 1)], lambda x: x.expand(3, 4), lambda x: np.broadcast_to(x, (3, 4)))
  check([(2, 3)], lambda x: x.pad(((1, 2), (0, 1))), lambda x: np.pad(x, ((1, 2), (0, 1))))
  check([(2, 3)], lambda x: x.pad(((1, 0), (2, 1)), value=-1.5), lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=-1.5))
  check([(4, 5)], lambda x: x.shrink(((1, 3), (0, 4))), lambda x: x[1:3, 0:4])
  check([(3, 4)], lambda x: x.flip(1), lambda x: np.flip(x, 1))
  check([(3, 4)], lambda x: x.flip((0, 1)), lambda x: np.flip(x, (0, 1)))
  check([(2, 3)], lambda x: x.repeat(2, 3), lambda x: np.tile(x, (2, 3)))
  check([(2, 3, 4)], lambda x: x.flatten(1), lambda x: x.reshape(2, 12))


@pytest.mark.parametrize("idx", [(1,), (slice(None, None, 2),), (slice(None, None, -1), 2), (slice(1, None, 3), slice(4, 0, -2)),
                                 (Ellipsis, 1), (None, slice(2, 5), None), (-1, slice(None, None, -3)), (slice(5, 100),)])
def test_slicing(idx):
  check([(6, 7)], lambda x: x[idx], lambda x: x[idx])


def test_views_compose_with_reshape_of_transpose():
  # a reshape that cannot merge a transposed view needs a second view (div/mod indexing)
  check([(3, 4)], lambda x: x.T.reshape(2, 6).flip(1)[:, ::2], lambda x: x.T.reshape(2, 6)[:, ::-1][:, ::2])
  check([(4, 6)], lambda x: x.pad(((1, 1), (0, 0))).reshape(3, 2, 6).sum(1), lambda x: np.pad(x, ((1, 1), (0, 0))).reshape(3, 2, 6).sum(1))


def test_cat_stack():
  check([(2, 3), (4, 3)], lambda a, b: a.cat(b, dim=0), lambda a, b: np.concatenate([a, b], 0))
  check([(2, 3), (2, 1)], lambda a, b: a.cat(b, a, dim=1), lambda a, b: np.concatenate([a, b, a], 1))
  check([(2, 3), (2, 3)], lambda a, b: a.stack(b, dim=1), lambda a, b: np.stack([a, b], 1))


@pytest.mark.parametrize("sa,sb", [((3, 5), (5, 4)), ((5,), (5, 2)), ((3, 5), (5,)), ((5,), (5,)), ((2, 3, 5), (5, 4)), ((2, 3, 5), (2, 5, 2))])
def test_matmul(sa, sb):
  check([sa, sb], lambda a, b: a @ b, np.matmul)


def test_linear():
  check([(4, 3), (2, 3), (2,)], lambda x, w, b: x.linear(w, b), lambda x, w, b: x @ w.T + b)


def _np_conv2d(x, w, stride=1, pad=0, dil=1, groups=1):
  x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
  n, c, h, wd = x.shape
  co, cg, kh, kw = w.shape
  oh, ow = (h - dil * (kh - 1) - 1) // stride + 1, (wd - dil * (kw - 1) - 1) // stride + 1
  out = np.zeros((n, co, oh, ow))
  for o in range(co):
    g = o // (co // groups)
    for i in range(oh):
      for j in range(ow):
        patch = x[:, g * cg:(g + 1) * cg, i * stride:i * stride + dil * (kh - 1) + 1:dil, j * stride:j * stride + dil * (kw - 1) + 1:dil]
        out[:, o, i, j] = (patch * w[o]).sum((1, 2, 3))
  return out


@pytest.mark.parametrize("stride,pad,dil,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 1, 2, 1), (1, 0, 1, 2)])
def test_conv2d(stride, pad, dil, groups):
  check([(2, 2, 6, 5), (4, 2 // groups, 3, 2), (4,)],
        lambda x, w, b: x.conv2d(w, b, stride=stride, padding=pad, dilation=dil, groups=groups),
        lambda x, w, b: _np_conv2d(x, w, stride, pad, dil, groups) + b.reshape(1, -1, 1, 1), gtol=2e-3)


def test_pooling():
  def np_pool(x, k, s, fn):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    return np.stack([np.stack([fn(x[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3)) for j in range(ow)], -1) for i in range(oh)], -2)
  check([(1, 2, 6, 6)], lambda x: x.max_pool2d(2), lambda x: np_pool(x, 2, 2, np.max))
  check([(1, 2, 7, 7)], lambda x: x.max_pool2d(3, stride=2), lambda x: np_pool(x, 3, 2, np.max))
  check([(1, 2, 6, 6)], lambda x: x.avg_pool2d(2), lambda x: np_pool(x, 2, 2, np.mean))
  check([(1, 1, 4, 4)], lambda x: x.max_pool2d(2, padding=1),
        lambda x: np_pool(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf), 2, 2, np.max))


def _np_log_softmax(x, axis=-1):
  m = x.max(axis, keepdims=True)
  return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax(axis):
  check([(3, 5)], lambda x: x.softmax(axis), lambda x: np.exp(_np_log_softmax(x, axis)))
  check([(3, 5)], lambda x: x.log_softmax(axis), lambda x: _np_log_softmax(x, axis))


def test_cross_entropy():
  y = np.array([1, 0, 4])
  check([(3, 5)], lambda x: x.cross_entropy(Tensor(y)), lambda x: -_np_log_softmax(x)[np.arange(3), y].mean())
  check([(3, 5)], lambda x: x.cross_entropy(Tensor(y), reduction="sum", label_smoothing=0.1),
        lambda x: -(_np_log_softmax(x) * (np.eye(5)[y] * 0.9 + 0.02)).sum())
  check([(3, 5), (3, 5)], lambda x, p: x.cross_entropy(p.softmax()), lambda x, p: -(_np_log_softmax(x) * np.exp(_np_log_softmax(p))).sum(1).mean())


def test_factories():
  np.testing.assert_array_equal(Tensor.zeros(2, 3).numpy(), np.zeros((2, 3), np.float32))
  np.testing.assert_array_equal(Tensor.ones((2, 3), dtype="int32").numpy(), np.ones((2, 3), np.int32))
  np.testing.assert_array_equal(Tensor.full((2,), 7).numpy(), [7, 7])
  np.testing.assert_array_equal(Tensor.arange(5).numpy(), np.arange(5))
  np.testing.assert_allclose(Tensor.arange(1.0, 2.0, 0.25).numpy(), np.arange(1.0, 2.0, 0.25))
  np.testing.assert_array_equal(Tensor.arange(10, 0, -3).numpy(), np.arange(10, 0, -3))
  np.testing.assert_array_equal(Tensor.eye(3, 4).numpy(), np.eye(3, 4))
  a, b = Tensor.rand(4, 5, seed=3).numpy(), Tensor.rand(4, 5, seed=3).numpy()
  np.testing.assert_array_equal(a, b)
  assert a.min() >= 0 and a.max() < 1 and not np.array_equal(a, Tensor.rand(4, 5, seed=4).numpy())
  r = Tensor.randn(2000, seed=1).numpy()
  assert abs(r.mean()) < 0.1 and abs(r.std() - 1) < 0.1
  assert Tensor([[1, 2]]).tolist() == [[1, 2]] and Tensor(3.5).item() == 3.5


def test_grad_accumulates_through_reuse_and_no_grad():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  (x * x + x).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [3, 5, 7])
  from compute import no_grad
  with no_grad(): y = x * 2
  assert not y.requires_grad and y._ctx is None
  z = x.detach() * 3
  assert not z.requires_grad
