"""Fusion (kernel counts), the compile cache, views, and clear errors for bad shapes and dtypes."""
import os, subprocess, sys, textwrap
import numpy as np
import pytest
from compute import Tensor, dtypes
from compute.schedule import create_schedule, Kernel
from compute.shape import ShapeTracker


def kernels(*ts: Tensor) -> list[Kernel]:
  return [k for k in create_schedule([t.lazydata.base for t in ts]) if isinstance(k, Kernel)]


def rnd(*shape, seed=0): return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_elementwise_chain_is_one_kernel():
  a, b, c = rnd(8, 8), rnd(8, 8, seed=1), rnd(8, seed=2)
  assert len(kernels(((a * b + c).exp() - a).relu())) == 1


def test_elementwise_fuses_into_reduction():
  a, b, c = rnd(5, 7), rnd(5, 7, seed=1), rnd(5, 7, seed=2)
  out = (a * b + c).sum(axis=1)
  assert len(kernels(out)) == 1
  np.testing.assert_allclose(out.numpy(), (a.numpy() * b.numpy() + c.numpy()).sum(1), rtol=1e-5)


def test_matmul_bias_relu_is_one_kernel():
  x, w, b = rnd(4, 6), rnd(3, 6, seed=1), rnd(3, seed=2)
  out = x.linear(w, b).relu()
  assert len(kernels(out)) == 1
  np.testing.assert_allclose(out.numpy(), np.maximum(x.numpy() @ w.numpy().T + b.numpy(), 0), rtol=1e-5, atol=1e-6)


def test_reduction_broadcast_back_needs_a_boundary():
  x = rnd(4, 10)
  assert len(kernels(x.softmax())) == 3     # max, sum of exp, normalize
  assert len(kernels(x - x.mean(1, keepdim=True))) == 2


def test_two_reductions_meeting_in_one_epilogue():
  a, b = rnd(4, 6), rnd(4, 6, seed=1)
  out = a.sum(1) * b.amax(1)
  ks = kernels(out)
  assert len(ks) == 2 and sum(k.reduce is not None for k in ks) == 2
  np.testing.assert_allclose(out.numpy(), a.numpy().sum(1) * b.numpy().max(1), rtol=1e-5)


def test_shared_reduction_is_computed_once():
  x = rnd(4, 6)
  s = x.sum(1)
  assert len(kernels(s + 1, s * 2)) == 3    # the sum, then each consumer


def test_realized_inputs_are_not_recomputed():
  x = rnd(4, 4)
  y = (x * 2).realize()
  assert len(kernels(y + 1)) == 1 and kernels(y + 1)[0].bufs[1] is y.lazydata


def test_views_only_change_indexing():
  st = ShapeTracker.contiguous((4, 6)).permute((1, 0)).pad(((1, 1), (0, 0))).shrink(((1, 7), (0, 4))).flip((0,))
  assert len(st.views) == 1 and not st.views[0].valid   # the padding was shrunk away again
  assert st.views[0].strides == (-1, 6) and st.views[0].offset == 5
  assert len(ShapeTracker.contiguous((4, 6)).permute((1, 0)).reshape((24,)).views) == 2


def test_second_process_compiles_nothing(tmp_path):
  script = textwrap.dedent("""
    import numpy as np
    from compute import Tensor, Device
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    x = Tensor(a, device="CPU")
    y = ((x * 2 + 1).sum(1) + x.amax(1)).exp().numpy()
    assert np.allclose(y, np.exp((a * 2 + 1).sum(1) + a.max(1)), rtol=1e-5)
    print(Device["CPU"].compiler.compiled, Device["CPU"].compiler.cache_hits)
  """)
  env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": os.getcwd()}
  runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300) for _ in range(2)]
  for r in runs: assert r.returncode == 0, r.stderr
  first, second = (tuple(map(int, r.stdout.split())) for r in runs)
  assert first[0] >= 2
  assert second[0] == 0 and second[1] == first[0] + first[1]


@pytest.mark.parametrize("fn,msg", [
  (lambda: rnd(3, 4) + rnd(5, 4), r"\(3, 4\) and \(5, 4\) cannot be broadcast"),
  (lambda: rnd(3, 4) @ rnd(5, 2), r"matmul shape mismatch: \(3, 4\) @ \(5, 2\)"),
  (lambda: rnd(3, 4).reshape(5, -1), r"cannot reshape tensor of shape \(3, 4\)"),
  (lambda: rnd(3, 4).permute(0, 0), r"not a permutation"),
  (lambda: rnd(3, 4).expand(3, 5), r"cannot expand shape \(3, 4\) to \(3, 5\)"),
  (lambda: rnd(3, 4)[3], r"index 3 is out of bounds for axis 0 with size 3"),
  (lambda: rnd(3, 4).sum(2), r"axis 2 is out of range for a tensor of shape \(3, 4\)"),
  (lambda: rnd(1, 2, 5, 5).conv2d(rnd(4, 3, 3, 3)), r"weight dim 1 must be 2"),
  (lambda: rnd(2, 3).cat(rnd(3, 3), dim=1), r"matching shapes"),
  (lambda: rnd(3, 4).cross_entropy(Tensor([1, 2])), r"target must have shape \(3,\)"),
])
def test_bad_shapes_raise_at_graph_build_time(fn, msg):
  with pytest.raises((ValueError, IndexError), match=msg): fn()


def test_bad_dtypes_raise_clear_errors():
  with pytest.raises(TypeError, match="unknown dtype 'int16'; supported: bool"): Tensor([1], dtype="int16")
  with pytest.raises(TypeError, match="need numbers"): Tensor(["a", "b"])
  with pytest.raises(TypeError, match="bitwise and needs bool or integer tensors, got float32"): rnd(2) & rnd(2)
  with pytest.raises(TypeError, match="one_hot needs integer class indices"): rnd(3).one_hot(4)
  with pytest.raises(TypeError, match="subtraction of bool"): Tensor([True]) - Tensor([False])
  with pytest.raises(ValueError, match="non-finite floats to int32"): Tensor([np.nan], dtype=dtypes.int32)


def test_mixed_devices_are_an_error():
  class Fake:   # a tensor that claims another device, without opening one
    pass
  a = rnd(2)
  b = rnd(2)
  b.lazydata.device = "MOCKPCI+AMD"
  with pytest.raises(RuntimeError, match=r"different devices \(CPU and MOCKPCI\+AMD\); move one with .to\(\)"): a + b


def _expr_nodes(k: Kernel) -> int:
  seen, todo = set(), [k.root]
  while todo:
    n = todo.pop()
    if id(n) not in seen: seen.add(id(n)); todo.extend(n.srcs)
  return len(seen)


@pytest.mark.parametrize("n", [300, 1000, 5000])
def test_log_step_scan_kernels_stay_bounded(n):
  x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
  t = Tensor(x).cumsum()
  ks = kernels(t)
  assert max(_expr_nodes(k) for k in ks) <= 2 * 64 and len(ks) <= n.bit_length()   # not 2^steps nodes in one kernel
  np.testing.assert_allclose(t.numpy(), np.cumsum(x.astype(np.float64)), rtol=1e-4, atol=1e-4)


def test_padded_flip_keeps_its_offset_in_the_index():
  """A flip's first element is its last address: padding in front moves the view's offset past the buffer's end, which
  must not become the kernel's buffer address."""
  x = np.arange(4, dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x)[:3].flip(0).pad(((4, 0),)).numpy(), np.pad(x[:3][::-1], (4, 0)))


def test_a_reduce_reached_by_two_paths_is_fused_once():
  """pow reads its base through a masked and an unmasked path: one reduce, fused into the pow's kernel."""
  a = np.random.default_rng(0).uniform(0.5, 2.0, (3, 4)).astype(np.float32)
  out = (Tensor(a) * Tensor(a)).sum(1, True) ** (1 / 3)
  assert len(kernels(out)) == 1
  np.testing.assert_allclose(out.numpy(), (a.astype(np.float64) ** 2).sum(1, keepdims=True) ** (1 / 3), rtol=1e-5)
