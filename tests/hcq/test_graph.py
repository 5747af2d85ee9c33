"""Graph replay through sealed command streams: constant words plus patch points, one submission (one copy into the
ring, one doorbell) per device and queue; kernel-argument sets that rotate; steps on several devices ordered by
signals. On the CPU device, the emulated AMD GPU (MOCKKFD+AMD) and the NVIDIA model (MOCK+NV)."""
import ctypes
import numpy as np
import pytest
from drivers.hcq import Graph, KernArgs, open_device
from tests.drivers.amd.kernels import SRC as AMD_SRC
from tests.hcq.conftest import count_submissions
from tests.emu.nvgpu.ptx_helpers import HAVE_NVRTC

# out[i] = a[i] + b[i] over n float32s (the CPU kernel ABI), the float twin of AMD's vadd
FADD_SRC = r"""
#include <stdint.h>
void fadd(const uint8_t *args, const uint32_t *gid, const uint32_t *lsize) {
  float *out = *(float **)(args + 0), *a = *(float **)(args + 8), *b = *(float **)(args + 16);
  int32_t n = *(int32_t *)(args + 24);
  for (uint32_t l = 0; l < lsize[0]; l++) { int64_t i = (int64_t)gid[0] * lsize[0] + l; if (i < n) out[i] = a[i] + b[i]; }
}
"""
NV_FADD_SRC = r"""
extern "C" __global__ void fadd(float *out, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}"""


def put(dev, arr):
  b = dev.alloc(arr.nbytes)
  b.copyin(np.ascontiguousarray(arr).data)
  return b


def get(buf, dtype=np.float32): return np.frombuffer(buf.copyout(), dtype)


@pytest.fixture(scope="module")
def amd():
  return open_device("MOCKKFD+AMD")


def fadd(dev):
  if dev.name == "CPU": return dev.program("fadd", dev.compiler.compile(FADD_SRC))
  if dev.name == "MOCK+NV":
    if HAVE_NVRTC: pytest.skip(HAVE_NVRTC)
    return dev.program("fadd", dev.compiler.compile(NV_FADD_SRC))
  return dev.program("vadd", dev.compiler.compile(AMD_SRC))


@pytest.fixture(params=["CPU", "MOCKKFD+AMD", "MOCK+NV"])
def dev(request, amd):
  return open_device(request.param)


def cpu_cmd(cmd) -> tuple:
  """A CPU command with its grid arrays as tuples and without the objects it only keeps alive (kernel arguments)."""
  return tuple(tuple(f) if isinstance(f, ctypes.Array) else f for f in cmd if not isinstance(f, KernArgs))


def test_replay_is_one_submission_per_device_and_gives_the_new_results(dev, monkeypatch):
  n, prg = 256, fadd(dev)
  a, b, c = (np.random.default_rng(i).standard_normal(n, dtype=np.float32) for i in range(3))
  ba, bb, t1, t2, out = put(dev, a), put(dev, b), dev.alloc(4 * n), dev.alloc(4 * n), dev.alloc(4 * n)
  g = Graph(dev)
  kw = dict(global_size=(n // 64,), local_size=(64,), vals=(n,))
  g.exec(prg, t1, ba, bb, **kw)          # t1 = a + b
  g.exec(prg, t2, t1, ba, **kw)          # t2 = t1 + a
  g.exec(prg, out, t2, t1, **kw)         # out = t2 + t1 = 3a + 2b
  ref = lambda a, b: (a + b) + a + (a + b)   # in float32, as the kernels round
  g(wait=True)
  np.testing.assert_array_equal(get(out), ref(a, b))
  bc, out2 = put(dev, c), dev.alloc(4 * n)
  subs = count_submissions(monkeypatch)
  doorbells = [] if dev.name == "CPU" else [dev.compute_ring._doorbell]
  if doorbells:
    real = dev.compute_ring._doorbell
    monkeypatch.setattr(dev.compute_ring, "_doorbell", lambda w: doorbells.append(w) or real(w))
  g(replace={bb: bc, out: out2}, wait=True)
  assert subs == [dev.name]                          # one submission for three kernels
  assert len(doorbells) == (0 if dev.name == "CPU" else 2)   # and, on a ring, one doorbell (the list held the real one)
  np.testing.assert_array_equal(get(out2), ref(a, c))
  np.testing.assert_array_equal(get(out), ref(a, b))   # the buffer replaced keeps its old result


def test_replays_in_flight_each_read_their_own_arguments(dev):
  """Replays submitted back to back, each with other buffers and values, all compute their own result: a replay that
  changes a launch's arguments points it at other argument memory (none reads arguments a later replay rewrote)."""
  n, prg = 64, fadd(dev)
  a = np.arange(n, dtype=np.float32)
  ba = put(dev, a)
  g = Graph(dev)
  step = g.exec(prg, dev.alloc(4 * n), ba, ba, global_size=(1,), local_size=(64,), vals=(n,))
  recorded = g.steps[step].bufs[0]
  outs = [dev.alloc(4 * n) for _ in range(10)]
  for k, o in enumerate(outs): g(replace={recorded: o}, vals={step: (n - k,)})
  dev.synchronize()
  for k, o in enumerate(outs):
    got = get(o)
    np.testing.assert_array_equal(got[:n - k], 2 * a[:n - k])


def sealed_equals_direct(dev, build):
  """Seal a queue built with patch keys, patch every key to new values; the words must equal those of the same commands
  encoded directly with those values (a patch point the encoder did not report leaves an old value behind)."""
  q = build(dev, old=True)
  sealed = q.seal()
  for (key, role) in sealed.points: sealed.patch(key, role, build.new[(key, role)])
  direct = build(dev, old=False)
  if dev.name == "CPU":
    assert [cpu_cmd(c) for c in sealed.cmds] == [cpu_cmd(c) for c in direct.cmds]
  elif direct.kind == "copy" and hasattr(direct, "packets"):   # SDMA: its packets
    assert sealed.words.tolist() == [w for p in direct.packets for w in p]
  else:
    assert sealed.words.tolist() == direct.words
  return sealed


def test_sealed_compute_stream_patches_waits_signals_and_kernel_argument_addresses(dev):
  prg, sig = fadd(dev), dev.new_signal(0)
  bufs = [dev.alloc(256) for _ in range(3)]
  args = {True: prg.fill_kernargs(bufs, [64], (1,), (64,)), False: prg.fill_kernargs(bufs, [64], (1,), (64,))}
  def build(dev, old):
    q = dev.compute_queue()
    q.wait(dev.timeline, 3 if old else (3 << 32) + 0x1234_5678, patch="w")     # a 64-bit wait value
    q.exec(prg, args[old], (1,), (64,), patch="k")
    q.signal(sig, 7 if old else (5 << 32) + 9, patch="s")
    return q
  build.new = {("w", "value"): (3 << 32) + 0x1234_5678, ("k", "args"): args[False].va, ("s", "value"): (5 << 32) + 9}
  sealed = sealed_equals_direct(dev, build)
  assert set(sealed.points) == set(build.new)
  with pytest.raises(ValueError, match="does not fit"): sealed.patch("w", "value", -1)
  with pytest.raises(KeyError, match="no patch point 'value' of 'nope'"): sealed.patch("nope", "value", 1)


def test_sealed_copy_stream_patches_both_addresses_of_each_copy(dev):
  a, b, c, d = (dev.alloc(4096) for _ in range(4))
  def build(dev, old):
    q = dev.copy_queue()
    q.wait(dev.timeline, 1 if old else (2 << 32) + 77, patch="w")   # on SDMA its dwords lie apart
    q.copy(b if old else d, a if old else c, 1000, patch=0)
    q.copy(a if old else c, b if old else d, 1000, dest_offset=8, src_offset=16, patch=1)
    q.signal(dev.timeline, 2 if old else 78, patch="s")
    return q
  # the offsets stay with the fields: a patch gives the buffers' addresses
  build.new = {("w", "value"): (2 << 32) + 77, (0, "dest"): d.va, (0, "src"): c.va, (1, "dest"): c.va, (1, "src"): d.va, ("s", "value"): 78}
  sealed_equals_direct(dev, build)


def test_steps_on_two_devices_run_in_order_through_signals(amd, monkeypatch):
  """AMD computes, its result crosses to the CPU device (through a host-visible bounce buffer of the GPU), the CPU
  computes on it: each replay with new inputs gives the new result, ordered by the graph's signals."""
  cpu, n = open_device("CPU"), 256
  ga, gp = fadd(amd), fadd(cpu)
  a, b, c = (np.random.default_rng(i).standard_normal(n, dtype=np.float32) for i in range(3))
  xa, xb, xs = put(amd, a), put(amd, b), amd.alloc(4 * n)
  cs, cc, out = cpu.alloc(4 * n), put(cpu, c), cpu.alloc(4 * n)
  g = Graph()
  g.exec(ga, xs, xa, xb, global_size=(n // 64,), local_size=(64,), vals=(n,))   # on the GPU: s = a + b
  g.copy(cs, xs)                                                                # to the CPU device
  g.exec(gp, out, cs, cc, global_size=(n // 64,), local_size=(64,), vals=(n,))  # on the CPU: out = s + c
  assert g.devices == [amd, cpu]
  g(wait=True)
  np.testing.assert_array_equal(get(out), a + b + c)
  runs = [(r.device.name, r.kind) for r in g.runs]
  assert runs == [(amd.name, "compute"), (amd.name, "copy"), ("CPU", "copy"), ("CPU", "compute")]
  news = [put(amd, b * np.float32(k)) for k in range(3)]
  subs = count_submissions(monkeypatch)
  for k, xb2 in enumerate(news):
    g(replace={xb: xb2}, wait=True)
    assert subs[4 * k:] == [amd.name, amd.name, "CPU", "CPU"]   # per replay: one submission per device and queue
    np.testing.assert_array_equal(get(out), a + b * np.float32(k) + c)


def test_cpu_graph_of_integer_kernels_replays_with_new_values(cpu, vadd):
  """The int32 vadd of the queue-API tests, replayed with a new element count, on a device of its own."""
  n = 128
  a = put(cpu, np.arange(n, dtype=np.int32))
  out = cpu.alloc(4 * n)
  g = Graph(cpu)
  step = g.exec(vadd, out, a, a, global_size=(2,), local_size=(64,), vals=(n,))
  g(wait=True)
  np.testing.assert_array_equal(get(out, np.int32), 2 * np.arange(n))
  out.copyin(bytes(4 * n))
  g(vals={step: (10,)}, wait=True)
  np.testing.assert_array_equal(get(out, np.int32)[:12], [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 0, 0])


def test_a_graph_is_sealed_again_when_what_its_launches_encode_moves():
  """AMD launches encode the scratch address; a program that needs more scratch moves it, and the next replay seals the
  graph anew instead of pointing kernels at freed memory."""
  dev = open_device("MOCKPCI+AMD:1")   # a device of its own: its scratch starts small
  try:
    lib = dev.compiler.compile(AMD_SRC)
    x = put(dev, np.zeros(64, np.int32))
    g = Graph(dev)
    g.exec(dev.program("add1", lib), x, global_size=(1,), local_size=(64,))
    g(wait=True)
    before = g.runs[0].sealed
    assert before.launch_state == dev.scratch.va
    dev.program("scratch", lib)                      # 256 private bytes per lane: scratch grows and moves
    assert before.stale
    g(wait=True)
    assert g.runs[0].sealed is not before and not g.runs[0].sealed.stale
    np.testing.assert_array_equal(get(x, np.int32), np.full(64, 2))
  finally: dev.close()
