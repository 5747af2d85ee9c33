"""compute.nn.functional against numpy references written here from PyTorch's documented definitions (float64), with
gradients against finite differences of the references (conftest.check)."""
import math
import numpy as np
import pytest
from compute import Tensor, dtypes
import compute.nn.functional as F
from tests.compute.conftest import check

pytestmark = pytest.mark.usefixtures("cpu_and_amd")   # every test on CPU and MOCKPCI+AMD

erf = np.vectorize(math.erf)


def np_log_softmax(x, axis):
  s = x - x.max(axis, keepdims=True)
  return s - np.log(np.exp(s).sum(axis, keepdims=True))


def np_ce(x, y, w=None, ignore=-100, ls=0.0, reduction="mean"):
  """Per element (1 - ls) * -w[y] logp[y] + ls / C * -sum_c w[c] logp[c] (0 where y == ignore); 'mean' divides by the
  summed w[y] of the counted elements. x (N, C, ...) or (C,), y (N, ...) or ()."""
  logp = np_log_softmax(x, 0 if x.ndim == 1 else 1)
  if x.ndim == 1: logp, y = logp[None], np.asarray(y)[None]
  c = logp.shape[1]
  w = np.ones(c) if w is None else w
  loss, den = np.zeros(y.shape), 0.0
  for i in np.ndindex(y.shape):
    if y[i] == ignore: continue
    lp = logp[(i[0], slice(None)) + i[1:]]
    loss[i] = (1 - ls) * -w[y[i]] * lp[y[i]] + ls / c * -(w * lp).sum()
    den += w[y[i]]
  if reduction == "none": return loss if x.ndim > 1 else loss[0]
  return loss.sum() / den if reduction == "mean" else loss.sum()


def test_gelu_exact_and_tanh():
  check([(3, 5)], lambda x: F.gelu(x), lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))), low=-4, high=4)
  check([(7,)], lambda x: F.gelu(x, approximate="tanh"),
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), grad=False)
  with pytest.raises(ValueError, match="'none' or 'tanh'"): F.gelu(Tensor([1.0]), approximate="erf")


def test_activations():
  x = np.linspace(-3, 3, 12).astype(np.float32)
  np.testing.assert_allclose(F.relu(Tensor(x)).numpy(), np.maximum(x, 0))
  np.testing.assert_allclose(F.silu(Tensor(x)).numpy(), x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(F.leaky_relu(Tensor(x), 0.2).numpy(), np.where(x > 0, x, 0.2 * x), rtol=1e-6)


def test_softmax_dims_and_implicit_dim():
  check([(2, 3, 4)], lambda x: F.softmax(x, dim=1), lambda x: np.exp(np_log_softmax(x, 1)))
  check([(2, 3, 4)], lambda x: F.log_softmax(x, -1), lambda x: np_log_softmax(x, -1), grad=False)
  x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
  with pytest.warns(UserWarning, match="implicit dimension"): out = F.softmax(Tensor(x))   # 3-D: PyTorch's implicit dim 0
  np.testing.assert_allclose(out.numpy(), np.exp(np_log_softmax(x.astype(np.float64), 0)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_indices_weight_ignore_smoothing(reduction):
  y = np.array([2, -100, 0, 1])
  w = np.array([0.5, 2.0, 1.5])
  check([(4, 3)], lambda x: F.cross_entropy(x, Tensor(y), weight=Tensor(w.astype(np.float32)), reduction=reduction, label_smoothing=0.1),
        lambda x: np_ce(x, y, w, ls=0.1, reduction=reduction))


def test_cross_entropy_spatial_and_unbatched():
  y = np.array([[0, 3, 1], [2, 2, 5]])   # (N, d1) with ignore_index=5
  check([(2, 4, 3)], lambda x: F.cross_entropy(x, Tensor(y), ignore_index=5, label_smoothing=0.2),
        lambda x: np_ce(x, y, ignore=5, ls=0.2))
  check([(5,)], lambda x: F.cross_entropy(x, Tensor(3)), lambda x: np_ce(x, 3), grad=False)
  with pytest.raises(IndexError, match="out of range for 3 classes"): F.cross_entropy(Tensor.zeros(2, 3), Tensor([0, 3]))


def test_cross_entropy_probabilities():
  rng = np.random.default_rng(2)
  p = rng.dirichlet(np.ones(4), size=(3,)).astype(np.float32)   # (N, C)
  def ref(x):
    q = p * 0.9 + 0.1 / 4
    return -(np_log_softmax(x, 1) * q * np.array([1.0, 2.0, 1.0, 0.5])).sum(1).mean()
  check([(3, 4)], lambda x: F.cross_entropy(x, Tensor(p), weight=Tensor([1.0, 2.0, 1.0, 0.5]), label_smoothing=0.1), ref)


def test_nll_loss_weight_and_ignore():
  y = np.array([1, 0, 1, 3])
  w = np.array([1.0, 3.0, 1.0, 0.25])
  def ref(x):
    kept = [i for i in range(4) if y[i] != 0]
    return -sum(w[y[i]] * x[i, y[i]] for i in kept) / sum(w[y[i]] for i in kept)
  check([(4, 4)], lambda x: F.nll_loss(x, Tensor(y), Tensor(w.astype(np.float32)), ignore_index=0), ref)
  with pytest.raises(ValueError, match="reduction must be"): F.nll_loss(Tensor.zeros(2, 3), Tensor([0, 1]), reduction="avg")


def test_regression_losses():
  t = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
  check([(3, 4)], lambda x: F.mse_loss(x, Tensor(t)), lambda x: ((x - t) ** 2).mean())
  check([(3, 4)], lambda x: F.l1_loss(x, Tensor(t), reduction="sum"), lambda x: np.abs(x - t).sum())
  check([(3, 4)], lambda x: F.mse_loss(x, Tensor(t), reduction="none"), lambda x: (x - t) ** 2, grad=False)


def test_binary_cross_entropy_weighted():
  rng = np.random.default_rng(4)
  y, w = rng.integers(0, 2, (3, 4)).astype(np.float32), rng.uniform(0.5, 2, (4,)).astype(np.float32)
  check([(3, 4)], lambda x: F.binary_cross_entropy(x, Tensor(y), Tensor(w)),
        lambda x: (-(y * np.log(x) + (1 - y) * np.log(1 - x)) * w).mean(), low=0.05, high=0.95)
  out = F.binary_cross_entropy(Tensor([0.0, 1.0]), Tensor([1.0, 0.0]), reduction="none")   # log clamped at -100
  np.testing.assert_allclose(out.numpy(), [100.0, 100.0])


def test_binary_cross_entropy_with_logits_pos_weight():
  rng = np.random.default_rng(5)
  y, pw = rng.integers(0, 2, (3, 4)).astype(np.float32), np.array([1.0, 2.0, 0.5, 3.0], np.float32)
  sig = lambda x: 1 / (1 + np.exp(-x))
  check([(3, 4)], lambda x: F.binary_cross_entropy_with_logits(x, Tensor(y), pos_weight=Tensor(pw), reduction="sum"),
        lambda x: -(pw * y * np.log(sig(x)) + (1 - y) * np.log(1 - sig(x))).sum(), low=-4, high=4)
  big = F.binary_cross_entropy_with_logits(Tensor([80.0, -80.0]), Tensor([0.0, 1.0]), reduction="none")   # no overflow
  np.testing.assert_allclose(big.numpy(), [80.0, 80.0], rtol=1e-6)
  with pytest.raises(ValueError, match="must have the input's shape"): F.binary_cross_entropy_with_logits(Tensor.zeros(3), Tensor.zeros(2, 3))


def np_conv(x, w, stride, pads, dil, groups):
  """x (N, C, *sp) zero-padded by pads [(before, after)], w (O, C/g, *k): direct sum over the taps."""
  x = np.pad(x, [(0, 0), (0, 0)] + pads)
  n, o, cg, ks = x.shape[0], w.shape[0], w.shape[1], w.shape[2:]
  out_sp = [(x.shape[2 + i] - dil[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(len(ks))]
  out = np.zeros((n, o, *out_sp))
  for oc in range(o):
    g = oc // (o // groups)
    for pos in np.ndindex(*out_sp):
      for tap in np.ndindex(*ks):
        idx = tuple(pos[i] * stride[i] + tap[i] * dil[i] for i in range(len(ks)))
        out[(slice(None), oc) + pos] += (x[(slice(None), slice(g * cg, (g + 1) * cg)) + idx] * w[(oc, slice(None)) + tap]).sum(1)
  return out


def test_conv1d_stride_dilation_groups_and_same():
  check([(2, 4, 9), (6, 2, 3), (6,)], lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
        lambda x, w, b: np_conv(x, w, (2,), [(1, 1)], (2,), 2) + b[None, :, None])
  check([(3, 7), (2, 3, 4)], lambda x, w: F.conv1d(x, w, padding="same"),   # unbatched; even kernel: the odd pad goes after
        lambda x, w: np_conv(x[None], w, (1,), [(1, 2)], (1,), 1)[0], grad=False)


def test_conv2d_same_and_valid():
  check([(1, 2, 5, 6), (3, 2, 2, 3)], lambda x, w: F.conv2d(x, w, padding="same", dilation=(2, 1)),
        lambda x, w: np_conv(x, w, (1, 1), [(1, 1), (1, 1)], (2, 1), 1))
  with pytest.raises(ValueError, match="needs stride 1"): F.conv2d(Tensor.zeros(1, 1, 4, 4), Tensor.zeros(1, 1, 3, 3), stride=2, padding="same")
  assert F.conv2d(Tensor.zeros(1, 1, 4, 4), Tensor.zeros(1, 1, 3, 3), padding="valid").shape == (1, 1, 2, 2)


def np_pool(x, k, s, p, ceil, fn, include_pad=True, divisor=None):
  """PyTorch's pooling: out = floor/ceil((n + 2p - k) / s) + 1 (less one if the last window starts in the right padding);
  window [o*s - p, o*s - p + k) clipped to the input; avg divides by the window clipped to the padded input
  (count_include_pad) or to the input."""
  h, w = x.shape[-2:]
  def size(n, i):
    o = (-(-(n + 2 * p[i] - k[i]) // s[i]) if ceil else (n + 2 * p[i] - k[i]) // s[i]) + 1
    return o - 1 if ceil and (o - 1) * s[i] >= n + p[i] else o
  oh, ow = size(h, 0), size(w, 1)
  out = np.zeros(x.shape[:-2] + (oh, ow))
  for i, j in np.ndindex(oh, ow):
    h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
    h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
    padded = (h1 - h0) * (w1 - w0)
    win = x[..., max(h0, 0):min(h1, h), max(w0, 0):min(w1, w)]
    if fn == "max": out[..., i, j] = win.max((-2, -1))
    else: out[..., i, j] = win.sum((-2, -1)) / (divisor or (padded if include_pad else win.shape[-2] * win.shape[-1]))
  return out


def test_max_pool2d_ceil_mode_and_padding():
  check([(1, 2, 6, 7)], lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
        lambda x: np_pool(x, (3, 3), (2, 2), (1, 1), True, "max"))
  check([(2, 6, 5)], lambda x: F.max_pool2d(x, (2, 3), (2, 2)), lambda x: np_pool(x, (2, 3), (2, 2), (0, 0), False, "max"), grad=False)


@pytest.mark.parametrize("ceil,include_pad,divisor", [(True, True, None), (False, False, None), (True, False, None), (False, True, 5)])
def test_avg_pool2d_counts(ceil, include_pad, divisor):
  check([(1, 1, 5, 6)], lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=ceil, count_include_pad=include_pad, divisor_override=divisor),
        lambda x: np_pool(x, (3, 3), (2, 2), (1, 1), ceil, "avg", include_pad, divisor), grad=ceil)


def test_dropout_scales_survivors_and_is_identity_in_eval():
  Tensor.manual_seed(0)
  x = Tensor.ones(64, 64, requires_grad=True)
  y = F.dropout(x, 0.25)
  out = y.numpy()
  assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)}
  assert abs((out == 0).mean() - 0.25) < 0.03
  y.sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), out)   # d/dx of x * mask / (1 - p) is the mask / (1 - p)
  assert F.dropout(x, 0.5, training=False) is x
  np.testing.assert_array_equal(F.dropout(Tensor([1.0, 2.0]), 1.0).numpy(), [0.0, 0.0])
  with pytest.raises(ValueError, match="between 0 and 1"): F.dropout(x, 1.5)


def test_layer_norm_and_rms_norm():
  rng = np.random.default_rng(6)
  w, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
  def ln(x):
    m = x.mean((-2, -1), keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean((-2, -1), keepdims=True) + 1e-5) * w + b
  check([(2, 3, 4)], lambda x: F.layer_norm(x, (3, 4), Tensor(w), Tensor(b)), ln)
  eps = float(np.finfo(np.float32).eps)
  check([(2, 5)], lambda x: F.rms_norm(x, [5], Tensor(w[0, :4].tolist() + [2.0])),
        lambda x: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * np.append(w[0, :4], 2.0))
  with pytest.raises(ValueError, match="must equal the input's last dims"): F.layer_norm(Tensor.zeros(2, 3), (2,))


def test_embedding_padding_idx_gets_no_gradient():
  rng = np.random.default_rng(7)
  wt = rng.standard_normal((5, 3)).astype(np.float32)
  idx = np.array([[1, 4, 1], [0, 2, 4]])
  w = Tensor(wt, requires_grad=True)
  out = F.embedding(Tensor(idx), w, padding_idx=-1)   # row 4
  np.testing.assert_array_equal(out.numpy(), wt[idx])
  g = rng.standard_normal(out.shape).astype(np.float32)
  (out * Tensor(g)).sum().backward()
  ref = np.zeros_like(wt)
  np.add.at(ref, idx, g)
  ref[4] = 0
  np.testing.assert_allclose(w.grad.numpy(), ref, rtol=1e-6, atol=1e-6)
  with pytest.raises(TypeError, match="integer tensor"): F.embedding(Tensor([0.0]), w)


def np_sdpa(q, k, v, mask=None, causal=False, scale=None):
  s = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
  if causal: s = np.where(np.tril(np.ones((q.shape[-2], k.shape[-2]), bool)), s, -np.inf)
  if mask is not None: s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
  return np.exp(np_log_softmax(s, -1)) @ v


def test_scaled_dot_product_attention_masks_and_scale():
  check([(2, 3, 4), (2, 5, 4), (2, 5, 2)], lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda q, k, v: np_sdpa(q, k, v, causal=True))
  mask = np.random.default_rng(8).uniform(size=(3, 5)) > 0.3
  mask[:, 0] = True
  check([(1, 3, 4), (1, 5, 4), (1, 5, 3)], lambda q, k, v: F.scaled_dot_product_attention(q, k, v, Tensor(mask), scale=0.3),
        lambda q, k, v: np_sdpa(q, k, v, mask, scale=0.3), grad=False)
  bias = np.random.default_rng(9).standard_normal((3, 5)).astype(np.float32)
  check([(3, 4), (5, 4), (5, 4)], lambda q, k, v: F.scaled_dot_product_attention(q, k, v, Tensor(bias)),
        lambda q, k, v: np_sdpa(q, k, v, bias), grad=False)
  with pytest.raises(ValueError, match="not both"): F.scaled_dot_product_attention(*[Tensor.zeros(2, 2)] * 3, Tensor.zeros(2, 2), is_causal=True)


def test_scaled_dot_product_attention_gqa():
  def ref(q, k, v): return np_sdpa(q, np.repeat(k, 2, axis=-3), np.repeat(v, 2, axis=-3))
  check([(1, 4, 2, 3), (1, 2, 3, 3), (1, 2, 3, 2)], lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), ref, grad=False)


def test_pad_modes_against_numpy():
  x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
  np.testing.assert_array_equal(F.pad(Tensor(x), (1, 2, -1, 1), value=9.0).numpy(),
                                np.pad(x, [(0, 0), (0, 1), (1, 2)], constant_values=9)[:, 1:])
  for mode, np_mode in (("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")):
    np.testing.assert_array_equal(F.pad(Tensor(x), (2, 3, 1, 2), mode=mode).numpy(), np.pad(x, [(0, 0), (1, 2), (2, 3)], mode=np_mode), err_msg=mode)
  check([(2, 3)], lambda t: F.pad(t, (2, 1), mode="reflect"), lambda t: np.pad(t, [(0, 0), (2, 1)], mode="reflect"))
  with pytest.raises(ValueError, match="below its size"): F.pad(Tensor(x), (4, 0), mode="reflect")
  with pytest.raises(ValueError, match="takes no value"): F.pad(Tensor(x), (1, 1), mode="replicate", value=1.0)


def test_one_hot_and_normalize():
  idx = np.array([[0, 3], [2, 1]])
  oh = F.one_hot(Tensor(idx))
  assert oh.dtype is dtypes.int64 and oh.shape == (2, 2, 4)
  np.testing.assert_array_equal(oh.numpy(), np.eye(4, dtype=np.int64)[idx])
  assert F.one_hot(Tensor(idx), num_classes=6).shape == (2, 2, 6)
  check([(3, 4)], lambda x: F.normalize(x), lambda x: x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12))
  check([(3, 4)], lambda x: F.normalize(x, p=1, dim=0), lambda x: x / np.abs(x).sum(0, keepdims=True), grad=False)
  check([(3, 4)], lambda x: F.normalize(x, p=math.inf, dim=-1), lambda x: x / np.abs(x).max(-1, keepdims=True), grad=False)
  check([(3, 4)], lambda x: F.normalize(x, p=3), lambda x: x / (np.abs(x) ** 3).sum(1, keepdims=True) ** (1 / 3), grad=False)
