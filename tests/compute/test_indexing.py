"""Indexing as in numpy and PyTorch, against numpy (forward) and finite differences (backward), on the CPU device and
the emulated AMD GPU: integer tensors and lists, several index tensors (numpy's broadcasting and placement rules),
boolean masks, __setitem__, gather, scatter, index_select; and each rejected index."""
import numpy as np
import pytest
from compute import Tensor, dtypes
from tests.compute.conftest import check

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5) - 17.5


pytestmark = pytest.mark.usefixtures("cpu_and_amd")   # every test on CPU and MOCKPCI+AMD


def test_an_index_tensor_gathers_rows():
  """The issue's example: x[Tensor([0, 2])] failed with 'cannot make a Tensor from ellipsis'."""
  np.testing.assert_array_equal(Tensor(X)[Tensor([0, 2])].numpy(), X[[0, 2]])


@pytest.mark.parametrize("idx", [
  [2, 0, 0], np.array([-1, 1]), ([1, 0], [3, 3]), (slice(None), [0, 2], [4, -1]), (Ellipsis, [3, 0]), ([0, 2], slice(None), [1, 4]),
  (0, slice(None), [1, 2]), ([[0], [2]], [1, 3]), (None, [1], None, 0), (slice(1, None), [0], slice(None, None, -2)),
  (np.array([[1, 2], [0, 0]]), 2), (1, [2, 3], [4, 0]), ([1], Ellipsis, [0, 1, 2]), (slice(None), [[1, 2], [3, 0]]),
  (np.array([], dtype=np.int64),), ([],),
], ids=str)
def test_integer_array_indexing_like_numpy(idx):
  out = Tensor(X)[idx]
  ref = X[idx]
  assert out.shape == ref.shape and out.dtype is dtypes.float32
  np.testing.assert_array_equal(out.numpy(), ref)


@pytest.mark.parametrize("dims", ["all", "first two", "first (none true)", "last two"])
def test_boolean_masks(dims):
  m = {"all": X > 3, "first two": X[:, :, 0] < 0, "first (none true)": X[:, 0, 0] > 100, "last two": X[0] % 2 == 0}[dims]
  idx, tidx = ((slice(None), m), (slice(None), Tensor(m))) if dims == "last two" else (m, Tensor(m))
  out = Tensor(X)[tidx]
  assert out.shape == X[idx].shape
  np.testing.assert_array_equal(out.numpy(), X[idx])


def test_mask_of_the_tensor_itself():
  t = Tensor(X)
  np.testing.assert_array_equal(t[t > 0].numpy(), X[X > 0])
  np.testing.assert_array_equal(t[(t > 0) & (t < 10)].numpy(), X[(X > 0) & (X < 10)])


def test_other_dtypes_index_and_are_indexed():
  b = np.array([[2**40, -5], [7, 2**33]], np.int64)
  np.testing.assert_array_equal(Tensor(b)[Tensor(np.array([1, 0, 1], np.uint32))].numpy(), b[[1, 0, 1]])
  np.testing.assert_array_equal(Tensor(b)[Tensor(b) > 0].numpy(), b[b > 0])
  u = np.array([[True, False], [False, True]])
  np.testing.assert_array_equal(Tensor(u)[[1, 1, 0]].numpy(), u[[1, 1, 0]])
  h = np.array([1.5, -2.25, 3.0], np.float16)
  np.testing.assert_array_equal(Tensor(h)[np.array([2, 0], np.int8)].numpy(), h[[2, 0]])


@pytest.mark.parametrize("name,tfn,nfn", [
  ("rows", lambda x: x[Tensor([0, 3, 3, 1])], lambda x: x[[0, 3, 3, 1]]),
  ("pairs", lambda x: x[Tensor([0, 3]), Tensor([4, 4])], lambda x: x[[0, 3], [4, 4]]),
  ("mask", lambda x: x[x.detach() > 0], lambda x: x[x > 0]),
  ("gather", lambda x: x.gather(1, Tensor([[0, 0, 4], [1, 2, 3], [4, 4, 4], [0, 1, 0]])),
   lambda x: np.take_along_axis(x, np.array([[0, 0, 4], [1, 2, 3], [4, 4, 4], [0, 1, 0]]), 1)),
  ("index_select", lambda x: x.index_select(1, Tensor([2, 0, 2])), lambda x: x[:, [2, 0, 2]]),
])
def test_gradients_flow_through_gathers(name, tfn, nfn):
  check([(4, 5)], tfn, nfn)


def test_setitem_slices_ints_and_steps():
  for idx, val in [((0, 1), 5.0), ((slice(None), slice(None, None, 2), slice(1, 3)), 1.0), ((-1,), np.arange(20, dtype=np.float32).reshape(4, 5)),
                   ((slice(None, None, -1), 2, slice(4, 0, -3)), np.array([9.0, 8.0], np.float32)), ((Ellipsis, 0), -1.0), ((None, 1, 1), 2.0)]:
    t, ref = Tensor(X.copy()), X.copy()
    t[idx] = val
    ref[idx] = val
    np.testing.assert_array_equal(t.numpy(), ref, err_msg=str(idx))


def test_setitem_tensors_and_masks():
  t, ref = Tensor(X.copy()), X.copy()
  t[t > 10] = 0
  ref[ref > 10] = 0
  np.testing.assert_array_equal(t.numpy(), ref)
  t[[0, 2], :, [1, 1]] = Tensor(np.array([[1, 2, 3, 4]], np.float32)).T.expand(4, 2).T
  ref[[0, 2], :, [1, 1]] = np.array([[1, 2, 3, 4]], np.float32)
  np.testing.assert_array_equal(t.numpy(), ref)
  t[1, Tensor([3, 0, 3])] = Tensor(np.array([1.0, 2.0, 3.0], np.float32)).reshape(3, 1)   # repeated index: the last value wins
  ref[1, [3, 0, 3]] = np.array([[1.0], [2.0], [3.0]], np.float32)
  np.testing.assert_array_equal(t.numpy(), ref)
  t[:, X[0, :, 0] > -10] = -7.0
  ref[:, X[0, :, 0] > -10] = -7.0
  np.testing.assert_array_equal(t.numpy(), ref)


def test_setitem_is_in_place_and_views_see_it():
  t = Tensor(X.copy())
  alias, row, flat = t, t[1], t.reshape(-1)
  t[1, 2] = 100.0
  assert alias is t and row.numpy()[2].tolist() == [100.0] * 5 and flat.numpy()[30:35].tolist() == [100.0] * 5
  row[0] = Tensor([1.0, 2.0, 3.0, 4.0, 5.0])       # through a view into the tensor it views
  assert t.numpy()[1, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0] and flat.numpy()[20] == 1.0
  t[0][3][4] = -1.0                               # chained indexing writes through
  assert t.numpy()[0, 3, 4] == -1.0


def test_setitem_gradients():
  x = Tensor(X[0].copy(), requires_grad=True)
  y = x * 1.0
  y[1:3, Tensor([0, 4])] = Tensor([[10.0, 20.0], [30.0, 40.0]], requires_grad=True)
  (y * y).sum().backward()
  g = 2 * X[0].copy()
  g[1:3][:, [0, 4]] = 0
  np.testing.assert_allclose(x.grad.numpy(), g)


def _np_scatter(a, dim, idx, src, add=False):
  out = a.copy()
  for p in np.ndindex(idx.shape):
    q = list(p); q[dim] = idx[p]
    out[tuple(q)] = out[tuple(q)] + src[p] if add else src[p]
  return out


@pytest.mark.parametrize("dim", [0, 1])
def test_gather_scatter_index_select_like_torch(dim):
  rng = np.random.default_rng(3)
  a = rng.standard_normal((4, 6)).astype(np.float32)
  idx = rng.integers(0, a.shape[dim], (3, 4)) if dim == 0 else np.stack([rng.permutation(6)[:4] for _ in range(3)])
  src = rng.standard_normal((3, 5)).astype(np.float32)
  np.testing.assert_array_equal(Tensor(a).gather(dim, idx).numpy(), np.take_along_axis(a[:, :4] if dim == 0 else a[:3], idx, dim))
  got = Tensor(a).scatter(dim, Tensor(idx), Tensor(src)).numpy()
  if dim == 1: np.testing.assert_array_equal(got, _np_scatter(a, dim, idx, src))   # distinct indices per row: no ambiguity
  np.testing.assert_allclose(Tensor(a).scatter(dim, Tensor(idx), Tensor(src), reduce="add").numpy(), _np_scatter(a, dim, idx, src, True),
                             rtol=1e-6)
  np.testing.assert_array_equal(Tensor(a).scatter(dim, Tensor(idx), 2.5).numpy(), _np_scatter(a, dim, idx, np.full(idx.shape, 2.5)))
  np.testing.assert_array_equal(Tensor(a).index_select(dim, Tensor([3, 0, 3])).numpy(), np.take(a, [3, 0, 3], axis=dim))


def test_scatter_repeated_index_keeps_the_last_and_in_place():
  t = Tensor(np.zeros((2, 3), np.float32))
  out = t.scatter_(1, Tensor([[0, 0, 2], [1, 1, 1]]), Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
  assert out is t
  np.testing.assert_array_equal(t.numpy(), [[2.0, 0.0, 3.0], [0.0, 6.0, 0.0]])
  np.testing.assert_array_equal(Tensor([1.0, 2.0, 3.0]).masked_fill(Tensor([True, False, True]), -1.0).numpy(), [-1.0, 2.0, -1.0])


def test_index_range_known_from_host_data_needs_no_device_read():
  from compute.runtime import stats
  t, i = Tensor(X), Tensor([2, 0, 1, 0])
  t.realize()
  before = stats["kernels_launched"]
  out = t[i]                                       # the range check reads no kernel result
  assert stats["kernels_launched"] == before
  np.testing.assert_array_equal(out.numpy(), X[[2, 0, 1, 0]])


@pytest.mark.parametrize("fn,exc,msg", [
  (lambda t: t[Tensor([0, 3])], IndexError, r"index 3 is out of bounds for dimension 0 with size 3"),
  (lambda t: t[:, Tensor([-5])], IndexError, r"index -5 is out of bounds for dimension 1 with size 4"),
  (lambda t: t[Tensor([1, 2]).argmax().reshape(1) + 5], IndexError, r"index 6 is out of bounds for dimension 0"),
  (lambda t: t[[0.5]], IndexError, r"must be integer or bool tensors, got float32"),
  (lambda t: t[True], TypeError, r"tensor index must be an int, slice"),
  (lambda t: t["a"], TypeError, r"tensor index must be an int, slice"),
  (lambda t: t[0, 0, 0, 0], IndexError, r"too many indices \(4\) for a tensor of shape \(3, 4, 5\)"),
  (lambda t: t[..., ...], IndexError, r"single ellipsis"),
  (lambda t: t[Tensor(np.ones((3, 5), bool))], IndexError, r"boolean index of shape \(3, 5\) does not match"),
  (lambda t: t.gather(1, Tensor([[0, 1]])), ValueError, r"gather: index must have 3 dims"),
  (lambda t: t.gather(0, Tensor(np.zeros((1, 5, 1), np.int32))), ValueError, r"index of shape \(1, 5, 1\) is larger than the tensor"),
  (lambda t: t.gather(2, Tensor(np.full((1, 1, 1), -1))), IndexError, r"index -1 is out of bounds for dimension 2 with size 5"),
  (lambda t: t.scatter(0, Tensor(np.zeros((1, 1, 1), np.int32)), 1.0, reduce="multiply"), ValueError, r"reduce must be None or 'add'"),
  (lambda t: t.index_select(0, Tensor([[0]])), ValueError, r"1-D integer index"),
  (lambda t: t.index_select(1, Tensor([4])), IndexError, r"index 4 is out of bounds for dimension 1 with size 4"),
])
def test_rejected_indices(fn, exc, msg):
  with pytest.raises(exc, match=msg): fn(Tensor(X))


def test_rejected_setitem_values():
  t = Tensor(X)
  with pytest.raises(ValueError, match=r"shape \(3,\) cannot be broadcast to the indexed shape \(4, 5\)"): t[0] = Tensor([1.0, 2.0, 3.0])
  with pytest.raises(OverflowError, match="value 300 does not fit uint8"): Tensor([1, 2], dtype="uint8")[0] = 300
  with pytest.raises(RuntimeError, match="cannot write into an expanded view"): Tensor([1.0, 2.0]).expand(3, 2)[0] = 1.0
  with pytest.raises(RuntimeError, match="leaf tensor that requires grad"): Tensor([1.0, 2.0], requires_grad=True)[0] = 1.0
