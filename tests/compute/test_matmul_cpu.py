"""The CPU device's blocked matmul (compute/codegen.py, Renderer._cpu_matmul) against numpy: shapes that are not whole
tiles or K slices, transposed and strided views, batched and broadcast operands, fused epilogues, each dtype matmul takes,
and gradients (which are matmuls of transposed views themselves)."""
from collections import OrderedDict
import numpy as np
import pytest
from compute import Tensor, Device, dtypes, runtime, schedule
from compute.runtime import get_program
from compute.schedule import create_schedule
from tests.compute.conftest import check


def blocked(t: Tensor) -> bool:
  """Whether the kernel computing `t` is the blocked matmul (its micro-kernel works on vector accumulators)."""
  return "ext_vector_type" in _source(t)


def _source(t: Tensor) -> str: return "".join(get_program(k)[1].src for k in create_schedule([t.lazydata.base]))


def rand(shape, dt=np.float32, seed=0):
  rng = np.random.default_rng(seed)
  if np.dtype(dt).kind in "iu": return rng.integers(-50 if np.dtype(dt).kind == "i" else 0, 50, shape).astype(dt)
  return rng.standard_normal(shape).astype(dt)


# (M, K, N): tiny, odd, K across several slices, rows past one workgroup's, columns past one sliver
@pytest.mark.parametrize("m,k,n", [(2, 3, 2), (7, 13, 5), (97, 300, 33), (130, 517, 70), (601, 64, 259), (64, 1000, 48)])
def test_shapes(m, k, n):
  a, b = rand((m, k)), rand((k, n), seed=1)
  out = Tensor(a) @ Tensor(b)
  assert blocked(out)
  np.testing.assert_allclose(out.numpy(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("case", ["aT", "bT", "aTbT", "strided", "offset"])
def test_views(case):
  a, b = rand((90, 70)), rand((70, 50), seed=1)
  ta, tb = Tensor(a), Tensor(b)
  if case == "aT": x, y, ref = Tensor(a.T.copy()).T, tb, a @ b.astype(np.float64)
  elif case == "bT": x, y, ref = ta, Tensor(b.T.copy()).T, a @ b.astype(np.float64)
  elif case == "aTbT": x, y, ref = tb.T, ta.T, b.T @ a.T.astype(np.float64)
  elif case == "strided": x, y, ref = ta[::2, 1::3], tb[1::3, ::2], a[::2, 1::3] @ b[1::3, ::2].astype(np.float64)
  else: x, y, ref = ta[5:, 3:40], tb[33:70, 7:], a[5:, 3:40] @ b[33:70, 7:].astype(np.float64)
  out = x @ y
  assert blocked(out)
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sa,sb", [((3, 40, 50), (3, 50, 20)), ((40, 50), (3, 50, 20)), ((3, 40, 50), (50, 20)),
                                   ((2, 1, 40, 50), (3, 50, 20)), ((4, 33, 300), (4, 300, 270))])
def test_batched(sa, sb):
  a, b = rand(sa), rand(sb, seed=1)
  out = Tensor(a) @ Tensor(b)
  assert blocked(out)
  np.testing.assert_allclose(out.numpy(), np.matmul(a.astype(np.float64), b), rtol=1e-4, atol=1e-3)


def test_fused_epilogue():
  """A bias and relu after the matmul are computed in its kernel, from the finished sums."""
  a, b, c = rand((50, 70)), rand((70, 30), seed=1), rand((30,), seed=2)
  out = (Tensor(a) @ Tensor(b) + Tensor(c)).relu()
  assert len(create_schedule([out.lazydata.base])) == 1 and blocked(out)
  np.testing.assert_allclose(out.numpy(), np.maximum(a.astype(np.float64) @ b + c, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", [np.float64, np.int32, np.int64, np.uint32])
def test_dtypes(dt):
  a, b = rand((37, 300), dt), rand((300, 21), dt, seed=1)
  out = Tensor(a) @ Tensor(b)
  assert blocked(out) and out.dtype is dtypes.get(np.dtype(dt).name)
  if np.dtype(dt).kind == "f": np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-12, atol=1e-10)
  else: np.testing.assert_array_equal(out.numpy(), a @ b)


def test_int_wraps_like_numpy():
  a, b = np.full((9, 20), 2**20, np.int32), np.full((20, 11), 2**12, np.int32)
  np.testing.assert_array_equal((Tensor(a) @ Tensor(b)).numpy(), a @ b)


def test_small_ints_accumulate_as_int32():
  a, b = rand((12, 40), np.int8), rand((40, 9), np.int8, seed=1)
  np.testing.assert_array_equal((Tensor(a) @ Tensor(b)).numpy(), a.astype(np.int32) @ b.astype(np.int32))


def test_nonfinite_propagate():
  a, b = rand((13, 20)), rand((20, 17), seed=1)
  a[3, 4], b[5, 6] = np.inf, np.nan
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sa,sb", [((5, 7), (7, 6)), ((2, 4, 7), (7, 3)), ((2, 4, 7), (2, 7, 3))])
def test_gradients(sa, sb):
  check([sa, sb], lambda a, b: a @ b, np.matmul)
  check([sa[:-2] + sa[:-3:-1], sb], lambda a, b: a.transpose(-1, -2) @ b, lambda a, b: np.swapaxes(a, -1, -2) @ b)


@pytest.mark.parametrize("regs", [(32, 64), (32, 16), (16, 16)])
def test_other_register_files(regs, monkeypatch):
  """The tiles rendered for AVX-512 (32 x 64 B), Arm's Advanced SIMD (32 x 16 B) and SSE (16 x 16 B): portable C vectors,
  so they run (slower) on any host and give the same results."""
  dev = Device["CPU"]
  monkeypatch.setattr(type(dev), "vector_registers", regs)
  monkeypatch.setattr(runtime, "_programs", {})
  monkeypatch.setattr(schedule, "_schedules", OrderedDict())
  for dt in (np.float32, np.float64):
    a, b = rand((2, 130, 517), dt), rand((2, 70, 517), dt, seed=1)
    out = Tensor(a) @ Tensor(b).transpose(-1, -2)
    assert blocked(out) and f"ext_vector_type({regs[1] // np.dtype(dt).itemsize})" in _source(out)
    np.testing.assert_allclose(out.numpy(), a.astype(np.float64) @ np.swapaxes(b, -1, -2), rtol=1e-4, atol=1e-3)


def test_empty_inner_dim_sums_to_zero():
  np.testing.assert_array_equal((Tensor(np.ones((3, 0), np.float32)) @ Tensor(np.ones((0, 4), np.float32))).numpy(), np.zeros((3, 4)))
