"""compute.jit (capture and replay) and what repeated work skips without it (the schedule cache, the compile notice),
on the CPU device and on the emulated GPU (MOCKKFD+AMD)."""
import time
import numpy as np
import pytest
from compute import Tensor, jit, CaptureError
from compute import runtime, schedule
from compute.codegen import Renderer
from tests.hcq.conftest import count_submissions

DEVICES = ["CPU", "MOCKKFD+AMD"]


def rand(*shape, seed=0):
  return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def count_work(monkeypatch) -> dict:
  """How often the scheduler and the renderer run."""
  n = {"schedule": 0, "render": 0}
  real_schedule, real_render = schedule._schedule, Renderer.render
  def sched(targets):
    n["schedule"] += 1
    return real_schedule(targets)
  def render(self, k):
    n["render"] += 1
    return real_render(self, k)
  monkeypatch.setattr(schedule, "_schedule", sched)
  monkeypatch.setattr(Renderer, "render", render)
  return n


@pytest.mark.parametrize("dev", DEVICES)
def test_replay_gives_what_eager_gives_for_new_inputs(dev, monkeypatch):
  @jit
  def layer(x, w, b):
    h = (x @ w + b).relu()
    return h.sum(axis=1), h.max()
  w, b = Tensor(rand(8, 5, seed=1), device=dev), Tensor(rand(5, seed=2), device=dev)
  work = None
  for call in range(4):
    x = rand(3, 8, seed=10 + call)
    if call == 2: work = count_work(monkeypatch)
    s, m = layer(Tensor(x, device=dev), w, b)
    h = np.maximum(x @ rand(8, 5, seed=1) + rand(5, seed=2), 0)
    np.testing.assert_allclose(s.numpy(), h.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m.numpy(), h.max(), rtol=1e-5)
  assert len(layer.captures) == 1
  assert work == {"schedule": 0, "render": 0}    # replays schedule and render nothing


@pytest.mark.parametrize("dev", DEVICES)
def test_a_replay_is_one_submission_per_device(dev, monkeypatch):
  @jit
  def f(x):
    a = x @ x                  # a matmul, then two reductions of it: several kernels
    return a.sum(axis=0), a.amax(axis=1)
  x0, x1 = Tensor(rand(16, 16), device=dev), Tensor(rand(16, 16, seed=3), device=dev)
  f(x0)
  f(x0)
  subs = count_submissions(monkeypatch)
  s, m = f(x1)
  assert subs == [runtime.Device.canonicalize(dev)]
  a = rand(16, 16, seed=3) @ rand(16, 16, seed=3)
  np.testing.assert_allclose(s.numpy(), a.sum(axis=0), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(m.numpy(), a.max(axis=1), rtol=1e-5)


@pytest.mark.parametrize("dev", DEVICES)
def test_results_of_earlier_calls_keep_their_values(dev):
  f = jit(lambda x: x * 2 + 1)
  xs = [rand(64, seed=i) for i in range(5)]
  ys = [f(Tensor(x, device=dev)) for x in xs]      # replays in flight back to back
  for x, y in zip(xs, ys): np.testing.assert_array_equal(y.numpy(), x * 2 + 1)


@pytest.mark.parametrize("dev", DEVICES)
def test_other_shapes_or_dtypes_are_captured_anew(dev):
  f = jit(lambda x, k: (x * k).sum(axis=0))
  cases = [(rand(4, 3), 2), (rand(6, 3, seed=1), 2), (np.arange(12, dtype=np.int32).reshape(4, 3), 2), (rand(4, 3), 3)]
  for _ in range(2):
    for x, k in cases:
      got = f(Tensor(x, device=dev), k).numpy()
      np.testing.assert_allclose(got, (x * k).sum(axis=0), rtol=1e-5)
      assert got.dtype == (np.int64 if x.dtype == np.int32 else x.dtype)     # integer sums are int64, like PyTorch
  assert len(f.captures) == 4       # float (4, 3), float (6, 3), int32 (4, 3), and k=3 (a Python constant)


@pytest.mark.parametrize("dev", DEVICES)
def test_results_may_be_inputs_views_and_nested(dev):
  @jit
  def f(x):
    return {"same": x, "flat": x.reshape(-1), "pair": [x + 1, x.T]}
  for seed in range(3):
    a = rand(2, 3, seed=seed)
    t = Tensor(a, device=dev)
    out = f(t)
    np.testing.assert_array_equal(out["same"].numpy(), a)
    np.testing.assert_array_equal(out["flat"].numpy(), a.reshape(-1))
    np.testing.assert_array_equal(out["pair"][0].numpy(), a + 1)
    np.testing.assert_array_equal(out["pair"][1].numpy(), a.T)


def test_a_function_that_reads_tensor_data_on_the_host_cannot_be_captured():
  @jit
  def clipped(x):
    return x * 2 if x.sum().item() > 0 else x     # Python control flow on device data
  with pytest.raises(CaptureError, match=r"cannot capture .*clipped.*reads a float32 tensor of shape \(\) on the host"):
    clipped(Tensor(rand(4)))
  @jit
  def reads(x): return Tensor(x.numpy() + 1)
  with pytest.raises(CaptureError, match=r"\.numpy\(\)/\.item\(\)"): reads(Tensor(rand(4)))
  assert runtime.Capture.active is None      # and nothing stays in capture mode
  assert clipped.captures == {}


def test_a_function_returning_other_things_than_tensors_cannot_be_captured():
  with pytest.raises(CaptureError, match=r"it returns float 3\.0; a captured function returns tensors"):
    jit(lambda x: (x + 1, 3.0))(Tensor(rand(4)))
  with pytest.raises(CaptureError, match=r"argument array\(\[1., 1.\]\) is neither a tensor nor hashable"):
    jit(lambda x, a: x)(Tensor(rand(4)), np.ones(2))


def test_steps_on_two_devices_replay_in_order(monkeypatch):
  """The GPU computes, the result crosses to the CPU device, the CPU computes on it: every replay gives the new
  result, ordered by the graph's signals."""
  @jit
  def f(g, c):
    return (g * 2).to("CPU") + c
  c = Tensor(rand(64, seed=9), device="CPU")
  for seed in range(4):
    a = rand(64, seed=seed)
    np.testing.assert_array_equal(f(Tensor(a, device="MOCKKFD+AMD"), c).numpy(), a * 2 + rand(64, seed=9))
  graph = next(iter(f.captures.values())).graph
  assert [d.name for d in graph.devices] == ["MOCKKFD+AMD", "CPU"]
  xs = [rand(64, seed=20 + k) for k in range(6)]
  ys = [f(Tensor(x, device="MOCKKFD+AMD"), c) for x in xs]   # replays in flight share the graph's bounce buffer
  for x, y in zip(xs, ys): np.testing.assert_array_equal(y.numpy(), x * 2 + rand(64, seed=9))


@pytest.mark.parametrize("pair", [("MOCKKFD+AMD", "MOCKKFD+AMD:1"), ("MOCKPCI+AMD", "MOCKPCI+AMD:1")])
def test_steps_on_two_gpus_replay_in_order_one_submission_per_device_and_queue(pair, monkeypatch):
  """A kernel on one GPU, its result copied to the other (its copy queue writes host memory both map, the other's reads
  it, ordered by a signal there), a kernel there: each replay with new inputs gives the new result."""
  ga, gb = pair
  @jit
  def f(x, w):
    return (x * 2 + 1).to(gb) * w
  w = Tensor(rand(64, seed=9), device=gb)
  for seed in range(3):
    x = rand(64, seed=seed)
    np.testing.assert_array_equal(f(Tensor(x, device=ga), w).numpy(), (x * 2 + 1) * rand(64, seed=9))
  graph = next(iter(f.captures.values())).graph
  assert [d.name for d in graph.devices] == list(pair)
  xs = [Tensor(rand(64, seed=20 + k), device=ga).realize() for k in range(4)]
  subs = count_submissions(monkeypatch)
  ys = []
  for x in xs:
    subs.clear()
    ys.append(f(x, w))
    assert subs == [ga, ga, gb, gb]                      # per device: its compute queue and its copy queue
  for k, y in enumerate(ys): np.testing.assert_array_equal(y.numpy(), (rand(64, seed=20 + k) * 2 + 1) * rand(64, seed=9))


@pytest.mark.parametrize("dev", DEVICES)
def test_a_repeated_op_is_scheduled_and_rendered_once(dev, monkeypatch):
  x = Tensor(rand(32), device=dev).realize()
  (x * 3 - 1).realize()
  work = count_work(monkeypatch)
  hits = schedule.stats["cache_hits"]
  for _ in range(3): np.testing.assert_allclose((x * 3 - 1).numpy(), rand(32) * 3 - 1, rtol=1e-6)
  assert work == {"schedule": 0, "render": 0}
  assert schedule.stats["cache_hits"] >= hits + 3
  (x * 4 - 1).realize()                                     # another constant: another kernel
  assert work == {"schedule": 1, "render": 1}


def test_schedule_cache_tells_constants_apart_exactly():
  """0.0 and -0.0, 1 and True, and NaN are different kernels; each gets its own schedule."""
  x = Tensor(rand(8)).realize()
  for c, ref in [(0.0, 0.0), (-0.0, -0.0), (float("nan"), float("nan"))]:
    np.testing.assert_array_equal((x * 0 + c).numpy(), rand(8) * 0 + np.float32(c))
  i = Tensor(np.arange(4, dtype=np.int32))
  np.testing.assert_array_equal((i + 1).numpy(), np.arange(4) + 1)
  np.testing.assert_array_equal((i + True).numpy(), np.arange(4) + 1)


@pytest.mark.parametrize("dev", DEVICES)
def test_a_slow_compile_prints_one_notice_saying_what_and_that_it_is_cached(dev, monkeypatch, capsys):
  monkeypatch.setattr(runtime, "COMPILE_NOTICE_S", 0.0)    # every real compile counts as slow
  x = Tensor(rand(16), device=dev).realize()
  capsys.readouterr()
  k = time.time_ns() % 1000003                             # a constant no cache has seen
  (x + k).realize()
  err = compute_notices(capsys)
  assert len(err) == 1 and err[0].startswith("compute: compiling kernel e_16 for ") and "cached on disk" in err[0]
  (x + k).realize()                                        # built already: nothing compiles
  assert capsys.readouterr().err == ""
  monkeypatch.setattr(runtime, "COMPILE_NOTICE_S", 1e9)
  (x + time.time_ns() % 1000033 + 0.5).realize()           # a fast compile: nothing
  assert compute_notices(capsys) == []


def compute_notices(capsys) -> list[str]:
  """compute's lines on stderr; the only others allowed are the emulated GPU's own build notices (its runtime, once per
  machine, and a new kernel's C translation, which can pass the threshold on a loaded machine)."""
  err = capsys.readouterr().err.strip().splitlines()
  assert all(line.startswith(("compute: ", "hcq: building the RDNA3 emulator")) for line in err), err
  return [line for line in err if line.startswith("compute: ")]


def test_a_slow_emulator_build_prints_one_notice(monkeypatch, capsys):
  """The emulated GPU translates each new kernel's machine code to C and builds it (and its runtime, once per machine:
  the long first compile on a fresh machine); a build over the threshold says so in one line."""
  from emu import cc
  monkeypatch.setattr(cc, "NOTICE_S", 0.0)
  x = Tensor(rand(16), device="MOCKKFD+AMD").realize()
  capsys.readouterr()
  (x * (time.time_ns() % 1000037)).numpy()                 # new machine code for the emulator to translate
  err = [line for line in capsys.readouterr().err.splitlines() if "RDNA3 emulator" in line]
  assert len(err) == 1 and err[0].startswith("hcq: building the RDNA3 emulator's C translation of a kernel took ")
  assert "cached under" in err[0]


@pytest.mark.parametrize("dev", DEVICES)
def test_arguments_updated_in_place_are_updated_by_every_replay(dev):
  """A training step: the weights are an argument, updated in place; replays update them as eager steps do."""
  def step(x, y, w):
    loss = ((x @ w - y) * (x @ w - y)).mean()
    loss.backward()
    w.assign(w - 0.1 * w.grad)
    w.grad = None
    return loss
  x, y = rand(16, 4, seed=1), rand(16, 1, seed=2)
  eager, jitted = Tensor(rand(4, 1, seed=3), device=dev, requires_grad=True), Tensor(rand(4, 1, seed=3), device=dev, requires_grad=True)
  jstep = jit(step)
  for _ in range(4):
    le = step(Tensor(x, device=dev), Tensor(y, device=dev), eager)
    lj = jstep(Tensor(x, device=dev), Tensor(y, device=dev), jitted)
    np.testing.assert_allclose(lj.numpy(), le.numpy(), rtol=1e-5)
    np.testing.assert_allclose(jitted.numpy(), eager.numpy(), rtol=1e-5)
  assert len(jstep.captures) == 1
  c = Tensor(np.arange(4, dtype=np.float32), device=dev)
  inc = jit(lambda t: t.add_(1) * 2)
  for k in range(1, 4): np.testing.assert_array_equal(inc(c).numpy(), (np.arange(4) + k) * 2)
  np.testing.assert_array_equal(c.numpy(), np.arange(4) + 3)


def test_updating_a_tensor_made_before_the_call_that_is_not_an_argument_cannot_be_captured():
  w = Tensor(rand(4))
  @jit
  def step(x):
    w.assign(w - x)              # a replay would not update w: the error says to pass it as an argument
    return w * 1
  with pytest.raises(CaptureError, match=r"updates a float32 tensor of shape \(4,\) in place that is not one of its arguments"):
    step(Tensor(rand(4, seed=1)))
  @jit
  def temporaries(x):            # tensors made inside and updated in place are the function's own business
    h = x * 3
    h += 1
    c = Tensor(np.ones(4, np.float32))
    c += h
    return c
  for s in range(3): np.testing.assert_allclose(temporaries(Tensor(rand(4, seed=s))).numpy(), rand(4, seed=s) * 3 + 2, rtol=1e-6)
