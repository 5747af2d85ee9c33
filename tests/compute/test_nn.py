"""nn.Module's registration, traversal, state_dict, train/eval and to() as torch.nn defines them; the layers against
numpy (on the CPU device: the numerics of the functions under them run on every device in test_functional.py)."""
from collections import OrderedDict
import numpy as np
import pytest
from compute import Tensor, dtypes, nn
import compute.nn.functional as F


class Block(nn.Module):
  def __init__(self):
    super().__init__()
    self.fc = nn.Linear(4, 3)
    self.scale = nn.Parameter(Tensor([2.0]))
    self.cache = Tensor([1.0, 2.0])                          # a plain tensor attribute: neither parameter nor buffer
    self.register_buffer("count", Tensor([0]))
    self.register_buffer("tmp", Tensor([5.0]), persistent=False)

  def forward(self, x): return self.fc(x) * self.scale


class Net(nn.Module):
  def __init__(self):
    super().__init__()
    self.block = Block()
    self.head = nn.Sequential(nn.ReLU(), nn.Linear(3, 2, bias=False))
    self.tied = self.block.fc                                 # the same module twice: its parameters count once

  def forward(self, x): return self.head(self.block(x))


def test_registration_and_traversal():
  Tensor.manual_seed(0)
  net = Net()
  names = [n for n, _ in net.named_parameters()]
  assert names == ["block.scale", "block.fc.weight", "block.fc.bias", "head.1.weight"]
  assert [id(p) for p in net.parameters()] == [id(p) for _, p in net.named_parameters()]
  assert [n for n, _ in net.named_buffers()] == ["block.count", "block.tmp"]
  assert [n for n, _ in net.named_modules()] == ["", "block", "block.fc", "head", "head.0", "head.1"]
  assert [type(m).__name__ for m in net.children()] == ["Block", "Sequential", "Linear"]   # tied: a child of its own
  assert len(list(net.modules())) == 6 and net.tied is net.block.fc
  assert [n for n, _ in net.block.named_parameters(recurse=False)] == ["scale"]
  assert isinstance(net.block.cache, Tensor) and "cache" not in dict(net.block.named_buffers())
  with pytest.raises(TypeError, match="nn.Parameter or None expected"): net.block.scale = Tensor([1.0])
  net.block.scale = None
  assert [n for n, _ in net.named_parameters()][0] == "block.fc.weight"
  with pytest.raises(AttributeError, match="no attribute 'nope'"): net.nope
  class Early(nn.Module):
    def __init__(self): self.w = nn.Parameter(Tensor([1.0]))
  with pytest.raises(AttributeError, match="before Module.__init__"): Early()
  with pytest.raises(TypeError, match="floating-point"): nn.Parameter(Tensor([1, 2]))
  assert not nn.Parameter(Tensor([1, 2]), requires_grad=False).requires_grad


def test_forward_and_ops_on_parameters_give_tensors():
  Tensor.manual_seed(1)
  net = Net()
  x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
  fc, head = net.block.fc, net.head[1]
  ref = np.maximum((x @ fc.weight.numpy().T + fc.bias.numpy()) * 2.0, 0) @ head.weight.numpy().T
  np.testing.assert_allclose(net(Tensor(x)).numpy(), ref, rtol=1e-5, atol=1e-6)
  w = fc.weight
  assert type(w * 2) is Tensor and type(w[[0, 2]]) is Tensor and type(w.detach()) is Tensor
  assert repr(nn.Parameter(Tensor([1.0]))).startswith("Parameter containing:\ntensor([1.]")


def test_state_dict_round_trip_and_strictness():
  Tensor.manual_seed(2)
  a, b = Net(), Net()
  sd = a.state_dict()
  # tmp is not persistent; a module held twice is saved under both names
  assert list(sd) == ["block.scale", "block.count", "block.fc.weight", "block.fc.bias", "head.1.weight", "tied.weight", "tied.bias"]
  assert all(not t.requires_grad for t in sd.values())
  weight_b = b.block.fc.weight
  assert b.load_state_dict(sd) == ([], [])
  assert b.block.fc.weight is weight_b                      # loaded in place
  x = Tensor(np.ones((2, 4), np.float32))
  np.testing.assert_array_equal(b(x).numpy(), a(x).numpy())
  numpy_sd = {k: v.numpy() for k, v in sd.items()}
  numpy_sd["block.scale"] = np.array([3.0], np.float32)
  b.load_state_dict(numpy_sd)
  assert b.block.scale.item() == 3.0
  with pytest.raises(RuntimeError, match=r"Missing key\(s\) in state_dict: 'block.scale'.*\n.*Unexpected key\(s\).*'extra'"):
    b.load_state_dict({**{k: v for k, v in sd.items() if k != "block.scale"}, "extra": Tensor([1.0])})
  assert b.load_state_dict({"block.scale": Tensor([4.0]), "extra": Tensor([1.0])}, strict=False) == \
    (["block.count", "block.fc.weight", "block.fc.bias", "head.1.weight", "tied.weight", "tied.bias"], ["extra"])
  with pytest.raises(RuntimeError, match=r"size mismatch for block.fc.bias: copying a value of shape \(4,\)"):
    b.load_state_dict({**sd, "block.fc.bias": Tensor([1.0, 2.0, 3.0, 4.0])})


def test_train_eval_zero_grad_and_to():
  Tensor.manual_seed(3)
  net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
  assert net.training and net[1].training
  assert net.eval() is net and not net[1].training
  x = Tensor(np.ones((2, 4), np.float32))
  np.testing.assert_array_equal(net(x).numpy(), net[0](x).numpy())   # dropout is the identity in eval
  net.train()
  assert net[1].training
  net(x).sum().backward()
  assert net[0].weight.grad is not None
  net.zero_grad(set_to_none=False)
  np.testing.assert_array_equal(net[0].weight.grad.numpy(), np.zeros((4, 4)))
  net.zero_grad()
  assert net[0].weight.grad is None
  w, before = net[0].weight, net[0].weight.numpy()
  assert net.to(dtype=dtypes.float16) is net and net[0].weight is w and w.dtype is dtypes.float16 and w.requires_grad
  np.testing.assert_array_equal(w.numpy(), before.astype(np.float16))
  net.to("CPU", "float32")
  assert w.dtype is dtypes.float32 and w.device == "CPU"
  with pytest.raises(TypeError, match="floating-point dtypes"): net.to(dtypes.int32)


def test_sequential_and_module_list():
  seq = nn.Sequential(OrderedDict([("a", nn.Identity()), ("b", nn.ReLU()), ("c", nn.Flatten())]))
  assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and [type(m).__name__ for m in seq[1:]] == ["ReLU", "Flatten"]
  assert seq(Tensor([[[-1.0, 2.0]]])).tolist() == [[0.0, 2.0]]
  seq.append(nn.Tanh())
  assert [n for n, _ in seq.named_children()] == ["a", "b", "c", "3"]
  ml = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 1)])
  ml.append(nn.ReLU())
  assert len(ml) == 3 and len(list(ml.parameters())) == 4 and isinstance(ml[-1], nn.ReLU)
  assert repr(nn.Sequential(nn.Linear(2, 3), nn.GELU())) == \
    "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): GELU(approximate='none')\n)"


def test_layers_initialise_like_pytorch():
  Tensor.manual_seed(4)
  lin = nn.Linear(16, 8)
  assert np.abs(lin.weight.numpy()).max() <= 0.25 and np.abs(lin.bias.numpy()).max() <= 0.25   # U(+-1/sqrt(fan_in))
  conv = nn.Conv1d(4, 6, 3, groups=2, bias=False)
  assert conv.weight.shape == (6, 2, 3) and conv.bias is None and np.abs(conv.weight.numpy()).max() <= 1 / np.sqrt(6)
  emb = nn.Embedding(10, 4, padding_idx=3)
  assert emb.padding_idx == 3 and not emb.weight.numpy()[3].any() and emb.weight.numpy().std() > 0.5   # N(0, 1)
  ln, rms = nn.LayerNorm((2, 3)), nn.RMSNorm(3)
  assert (ln.weight.numpy() == 1).all() and (ln.bias.numpy() == 0).all() and (rms.weight.numpy() == 1).all()
  assert nn.LayerNorm(3, elementwise_affine=False).weight is None
  with pytest.raises(ValueError, match="divisible by groups"): nn.Conv2d(3, 4, 3, groups=2)


def test_layers_compute_their_functions():
  Tensor.manual_seed(5)
  rng = np.random.default_rng(5)
  x = rng.standard_normal((2, 4, 6)).astype(np.float32)
  conv = nn.Conv1d(4, 2, 3, padding=2, padding_mode="circular")
  w = conv.weight.numpy()
  xp = np.concatenate([x[..., -2:], x, x[..., :2]], -1)
  ref = np.stack([sum(xp[:, :, k:k + 8] * w[None, o, :, k, None] for k in range(3)).sum(1) for o in range(2)], 1) + conv.bias.numpy()[:, None]
  np.testing.assert_allclose(conv(Tensor(x)).numpy(), ref, rtol=1e-5, atol=1e-5)
  ln = nn.LayerNorm(6)
  np.testing.assert_allclose(ln(Tensor(x)).numpy(), (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), rtol=1e-4, atol=1e-5)
  rms = nn.RMSNorm(6, eps=1e-6)
  np.testing.assert_allclose(rms(Tensor(x)).numpy(), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6), rtol=1e-5, atol=1e-6)
  emb = nn.Embedding(5, 3)
  idx = np.array([[4, 0], [1, 1]])
  np.testing.assert_array_equal(emb(Tensor(idx)).numpy(), emb.weight.numpy()[idx])
  c2 = nn.Conv2d(1, 1, 3, padding="same", padding_mode="reflect", bias=False)
  img = rng.standard_normal((1, 1, 4, 5)).astype(np.float32)
  np.testing.assert_allclose(c2(Tensor(img)).numpy(), F.conv2d(Tensor(np.pad(img, [(0, 0), (0, 0), (1, 1), (1, 1)], mode="reflect")),
                                                               c2.weight).numpy(), rtol=1e-5, atol=1e-6)


def test_parameters_of_plain_objects_and_modules():
  lin = nn.Linear(2, 2)
  class Holder:
    def __init__(self): self.parts, self.extra = [lin, {"t": lin.weight}], Tensor([1.0])
  h = Holder()
  assert [id(t) for t in nn.parameters(h)] == [id(lin.weight), id(lin.bias), id(h.extra)]   # the module's, then the rest, once each
