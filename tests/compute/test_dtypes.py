"""64-bit and unsigned dtypes (int64, uint32, float64) against numpy on the CPU device and the emulated AMD GPU (gfx11
does 64-bit integer ops as pairs of 32-bit ones and has an f64 ALU), range checks on data that does not fit its dtype,
and promotion."""
import numpy as np
import pytest
from compute import Tensor, dtypes

BIG = np.array([2**40, -3, 7, -2**62, 2**62 + 12345, 0], np.int64)
U32 = np.array([4_000_000_000, 5, 2**31, 0, 2**32 - 1, 77], np.uint32)
F64 = np.array([1.5, -2.25, 0.1, 700.0, 1e-300, -800.0, 30.3, 1e15 + 0.5], np.float64)


pytestmark = pytest.mark.usefixtures("cpu_and_amd")   # every test on CPU and MOCKPCI+AMD


@pytest.mark.parametrize("arr,dt", [(BIG, dtypes.int64), (U32, dtypes.uint32), (F64, dtypes.float64)])
def test_numpy_dtype_is_kept_and_roundtrips_exactly(arr, dt):
  t = Tensor(arr)
  assert t.dtype is dt
  out = t.numpy()
  assert out.dtype == arr.dtype
  np.testing.assert_array_equal(out, arr)
  np.testing.assert_array_equal(t[1:5:2].numpy(), arr[1:5:2])
  np.testing.assert_array_equal(t[:6].reshape(2, 3).T.numpy(), arr[:6].reshape(2, 3).T)


def test_int64_arithmetic_like_numpy():
  a, b = BIG, np.array([3, -2, 5, 7, -1000003, 9], np.int64)
  ta, tb = Tensor(a), Tensor(b)
  for t, n in [(ta + tb, a + b), (ta - tb, a - b), (ta * tb, a * b), (ta // tb, a // b), (ta % tb, a % b), (ta * 3 + 2**33, a * 3 + 2**33),
               (ta & tb, a & b), (ta | tb, a | b), (ta ^ tb, a ^ b), (~ta, ~a), (-ta, -a), (ta.maximum(tb), np.maximum(a, b)),
               (ta < tb, a < b), (ta == tb, a == b), (ta.abs(), np.abs(a)), (ta.where(ta > 0, tb), np.where(a > 0, a, b))]:
    assert t.numpy().dtype == n.dtype, (t.numpy().dtype, n.dtype)
    np.testing.assert_array_equal(t.numpy(), n)
  x = Tensor(a.reshape(2, 3))
  for axis in (None, 0, 1):
    np.testing.assert_array_equal(x.sum(axis).numpy(), a.reshape(2, 3).sum(axis))
    np.testing.assert_array_equal(x.amax(axis).numpy(), a.reshape(2, 3).max(axis))
    np.testing.assert_array_equal(x.amin(axis).numpy(), a.reshape(2, 3).min(axis))
    np.testing.assert_array_equal(x.argmax(axis).numpy(), a.reshape(2, 3).argmax(axis))
  m = np.array([[2**33, -1], [5, 2**31]], np.int64)
  np.testing.assert_array_equal((Tensor(m) @ Tensor(m)).numpy(), m @ m)


def test_uint32_arithmetic_like_numpy():
  a, b = U32, np.array([7, 3, 2, 9, 2**31 + 5, 1], np.uint32)
  ta, tb = Tensor(a), Tensor(b)
  for t, n in [(ta + tb, a + b), (ta - tb, a - b), (ta * tb, a * b), (ta // tb, a // b), (ta % tb, a % b), (ta + 1, a + np.uint32(1)),
               (~ta, ~a), (ta > tb, a > b), (ta.maximum(tb), np.maximum(a, b)), (ta ^ 0xFFFFFFFF, a ^ np.uint32(0xFFFFFFFF))]:
    assert t.numpy().dtype == n.dtype, (t.numpy().dtype, n.dtype)
    np.testing.assert_array_equal(t.numpy(), n)
  assert ta.max().item() == 2**32 - 1 and ta.min().item() == 0
  assert ta.sum().dtype is dtypes.int64 and ta.sum().item() == int(a.sum())    # integer sums are int64, like PyTorch
  assert ta.sum(dtype="uint32").item() == int(a.sum(dtype=np.uint32))          # unless dtype= keeps the width (and wraps)


def test_float64_arithmetic_keeps_double_precision():
  a, b = F64, np.array([7.0, 3.0, -0.5, 2.0, 3.0, 1e-3, -9.0, 3.0], np.float64)
  ta, tb = Tensor(a), Tensor(b)
  for t, n in [(ta + tb, a + b), (ta * tb, a * b), (ta / tb, a / b), (ta / 7, a / 7), (ta - 1e-12, a - 1e-12), (ta * 0.1, a * 0.1),
               (ta.reciprocal(), 1 / a), (ta.abs().sqrt(), np.sqrt(np.abs(a))), (ta // tb, a // b), (ta.floor(), np.floor(a)),
               (ta.maximum(tb), np.maximum(a, b)), (ta < 1.5, a < 1.5)]:
    assert t.numpy().dtype == n.dtype
    np.testing.assert_allclose(t.numpy(), n, rtol=1e-15, atol=0)
  m = np.random.default_rng(0).standard_normal((9, 13))
  np.testing.assert_allclose((Tensor(m) @ Tensor(m.T)).numpy(), m @ m.T, rtol=1e-13, atol=1e-13)
  np.testing.assert_allclose(Tensor(m).sum(1).numpy(), m.sum(1), rtol=1e-14)
  np.testing.assert_allclose(Tensor(m).softmax(1).numpy(), np.exp(m) / np.exp(m).sum(1, keepdims=True), rtol=1e-14)


def test_64_bit_ops_with_constant_operands_and_casts():
  """Constants reach the GPU code as literals and inline constants (an f64 literal is its high 32 bits), and division
  by a constant compiles to other instruction sequences than division by a tensor."""
  a, u, f = BIG, U32, F64
  ta, tu, tf = Tensor(a), Tensor(u), Tensor(f)
  with np.errstate(over="ignore", invalid="ignore"):
    for t, n in [(ta // 7, a // 7), (ta % 7, a % 7), (ta // -3, a // -3), (ta * ta, a * a), (tu // 7, u // np.uint32(7)),
                 (tu % 10, u % np.uint32(10)), (tf > 0.3, f > 0.3), (tf.maximum(2.5), np.maximum(f, 2.5)), (tf.trunc(), np.trunc(f)),
                 (ta < tu[:6].cast(dtypes.int64), a < u[:6].astype(np.int64)), (tu.cast(dtypes.float32), u.astype(np.float32)),
                 (tu.cast(dtypes.bool), u.astype(bool)), (ta.cast(dtypes.int8), a.astype(np.int8)), (tf.cast(dtypes.int64), f.astype(np.int64)),
                 (tf.abs().minimum(4e9).cast(dtypes.uint32), np.minimum(np.abs(f), 4e9).astype(np.uint32)), (ta.argmin(), a.argmin())]:
      np.testing.assert_array_equal(t.numpy(), n)


@pytest.mark.parametrize("name", ["exp", "exp2", "log", "log2", "sin", "cos"])
def test_float64_transcendentals_match_numpy(name):
  """On AMD these are the series in codegen's _F64_HELPERS (the backend has no f64 exp/log/sin/cos): within 4 ulp."""
  x = np.concatenate([np.linspace(-30, 30, 97), [0.0, -0.0, 1.0, 2.0, 0.5, 1e-300, 5e-324, 700.0, 709.7, -744.0, 1023.5, -1074.0,
                                                 1e5, -123456.789, 1.6e6, np.inf, -np.inf, np.nan]])
  if name.startswith("log"): x = np.abs(x)
  with np.errstate(all="ignore"): ref = getattr(np, name)(x)
  got = getattr(Tensor(x), name)().numpy()
  assert got.dtype == np.float64
  np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
  fin = np.isfinite(ref)
  np.testing.assert_array_equal(got[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
  ulp = np.spacing(np.abs(ref[fin]))
  err = np.abs(got[fin] - ref[fin])
  assert np.all(err <= 4 * ulp + 1e-300), (x[fin][err > 4 * ulp], got[fin][err > 4 * ulp], ref[fin][err > 4 * ulp])


def test_float64_backward():
  x = np.array([[0.5, -1.25, 3.0], [2.0, 0.1, -0.7]])
  t = Tensor(x, requires_grad=True)
  (t.exp() * t + t.sin()).sum().backward()
  assert t.grad.dtype is dtypes.float64
  np.testing.assert_allclose(t.grad.numpy(), np.exp(x) * (x + 1) + np.cos(x), rtol=1e-14)


def test_casts_between_64_bit_and_narrow_types():
  a = Tensor(BIG)
  np.testing.assert_array_equal(a.cast(dtypes.float64).numpy(), BIG.astype(np.float64))
  np.testing.assert_array_equal(a.cast(dtypes.int32).numpy(), BIG.astype(np.int32))      # a device-side cast wraps like numpy's astype
  np.testing.assert_array_equal(a.cast(dtypes.float32).numpy(), BIG.astype(np.float32))
  np.testing.assert_array_equal(Tensor(U32).cast(dtypes.int64).numpy(), U32.astype(np.int64))
  np.testing.assert_array_equal(Tensor(U32).cast(dtypes.float64).numpy(), U32.astype(np.float64))
  np.testing.assert_array_equal(Tensor(F64).cast(dtypes.int64).numpy(), F64.astype(np.int64))
  np.testing.assert_array_equal(Tensor(F64).cast(dtypes.float32).numpy(), F64.astype(np.float32))
  with np.errstate(over="ignore"): np.testing.assert_array_equal(Tensor(F64).cast(dtypes.float16).numpy(), F64.astype(np.float16))
  np.testing.assert_array_equal(Tensor([1.5, -2.0]).cast(dtypes.float64).numpy(), [1.5, -2.0])


def test_promotion():
  i32, u32, i64, f32, f64 = (Tensor([1], dtype=d) for d in ("int32", "uint32", "int64", "float32", "float64"))
  i8, u8, f16 = Tensor([1], dtype="int8"), Tensor([1], dtype="uint8"), Tensor([1], dtype="float16")
  assert (i32 + u32).dtype is dtypes.int64 and (i8 + u32).dtype is dtypes.int64 and (u8 + u32).dtype is dtypes.uint32
  assert (i64 + u32).dtype is dtypes.int64 and (i64 + i32).dtype is dtypes.int64 and (u8 + i32).dtype is dtypes.int32
  assert (i64 + f32).dtype is dtypes.float32 and (i64 + f16).dtype is dtypes.float32 and (i32 + f64).dtype is dtypes.float64
  assert (f32 + f64).dtype is dtypes.float64 and (f16 + f64).dtype is dtypes.float64
  # Python scalars are weak: they take the tensor's type
  assert (i64 + 1).dtype is dtypes.int64 and (u32 * 2).dtype is dtypes.uint32 and (f64 * 2.5).dtype is dtypes.float64
  assert (i64 * 2.5).dtype is dtypes.float32 and (f32 * 2.5).dtype is dtypes.float32
  np.testing.assert_array_equal((Tensor(BIG) + 2**40).numpy(), BIG + 2**40)


def test_defaults_for_python_data():
  assert Tensor([1, 2]).dtype is dtypes.int32 and Tensor([1.0]).dtype is dtypes.float32 and Tensor([True]).dtype is dtypes.bool
  assert Tensor(3).dtype is dtypes.int32 and Tensor(np.int64(3)).dtype is dtypes.int64 and Tensor(np.float64(2)).dtype is dtypes.float64
  assert Tensor([2**40], dtype=dtypes.int64).item() == 2**40
  assert Tensor(np.array([1, 2], np.int16)).dtype is dtypes.int32 and Tensor(np.array([7], np.uint64)).dtype is dtypes.int64


@pytest.mark.parametrize("make,msg", [
  (lambda: Tensor(np.array([2**40], np.int64), dtype="int32"), r"value 1099511627776 does not fit int32"),
  (lambda: Tensor([2**40]), r"value 1099511627776 does not fit int32"),
  (lambda: Tensor([4e9, 5e9], dtype="uint32"), r"value 5000000000.0 does not fit uint32"),
  (lambda: Tensor([-1], dtype="uint32"), r"value -1 does not fit uint32 \(range 0..4294967295\)"),
  (lambda: Tensor([300], dtype="int8"), r"value 300 does not fit int8 \(range -128..127\)"),
  (lambda: Tensor(np.array([300, 2], np.int32), dtype=dtypes.uint8), r"value 300 does not fit uint8"),
  (lambda: Tensor(np.array([2**63], np.uint64)), r"value 9223372036854775808 does not fit int64"),
  (lambda: Tensor([2**64]), r"value 18446744073709551616 does not fit int64"),
  (lambda: Tensor(np.array([1e300, 1.0])), None),
  (lambda: Tensor(np.array([1e300, 1.0]), dtype="float32"), r"value 1e\+300 does not fit float32"),
  (lambda: Tensor([70000.0], dtype="float16"), r"value 70000.0 does not fit float16"),
  (lambda: Tensor([3e9], dtype="int32"), r"value 3000000000.0 does not fit int32"),
  (lambda: Tensor([1, 2], dtype="uint8") + 300, r"Python scalar 300 does not fit uint8"),
  (lambda: Tensor([1, 2]) * 2**40, r"Python scalar 1099511627776 does not fit int32"),
  (lambda: Tensor.full((2,), 2**31), r"fill value 2147483648 does not fit int32"),
  (lambda: Tensor.full((2,), -5, dtype="uint32"), r"fill value -5 does not fit uint32"),
  (lambda: Tensor.arange(2**31 - 2, 2**31 + 2), r"arange value 2147483649 does not fit int32"),
])
def test_values_that_do_not_fit_are_an_error(make, msg):
  if msg is None:
    assert make().dtype is dtypes.float64   # fits float64: no error
    return
  with pytest.raises(OverflowError, match=msg): make()


def test_nan_and_inf_into_integers_are_an_error():
  with pytest.raises(ValueError, match="non-finite floats to int64"): Tensor([1.0, np.inf], dtype="int64")
  with pytest.raises(ValueError, match="non-finite floats to uint32"): Tensor(np.array([np.nan]), dtype="uint32")
  assert np.isinf(Tensor([np.inf], dtype="float16").item())   # infinity is a float16 value
