"""Two emulated GPUs in one process: host memory imported into both (Device.import_host over PCIDevice.map_dma on the
AM path, USERPTR buffer objects on KFD), transfers device to device through it, and Graphs whose steps on the second
GPU wait on the device for a signal the first one writes there. Pairs: two MOCKPCI+AMD, two MOCKKFD+AMD, and one of
each."""
import numpy as np
import pytest
from drivers.amd.device import AMDDevice
from drivers.amd.kfd import KFDIface
from drivers.hcq import Graph, open_device
from drivers.hcq.hostshare import PeerLink
from drivers.system.kernel import kernel_interface
from tests.drivers.amd.kernels import SRC as AMD_SRC
from tests.hcq.conftest import count_submissions

PAIRS = {"pci": ("MOCKPCI+AMD", "MOCKPCI+AMD:1"), "kfd": ("MOCKKFD+AMD", "MOCKKFD+AMD:1"), "mixed": ("MOCKKFD+AMD", "MOCKPCI+AMD:1")}


def rand(n, seed): return np.random.default_rng(seed).standard_normal(n, dtype=np.float32)


def put(dev, arr):
  b = dev.alloc(arr.nbytes)
  b.copyin(np.ascontiguousarray(arr).data)
  return b


def get(buf) -> np.ndarray: return np.frombuffer(buf.copyout(), np.float32)


@pytest.fixture(params=list(PAIRS))
def pair(request):
  return tuple(open_device(n) for n in PAIRS[request.param])


@pytest.fixture(params=["MOCKPCI+AMD", "MOCKKFD+AMD"])
def gpu(request):
  return open_device(request.param)


def vadd(dev): return dev.program("vadd", dev.compiler.compile(AMD_SRC))


def mappings(dev) -> int:
  """What the GPU's interface holds for it: DMA mappings on the AM path, buffer objects on KFD."""
  return len(dev.iface.pci.model.dma._runs) if hasattr(dev.iface, "pci") else len(dev.iface.k.model.bos)


def test_imported_host_memory_is_the_same_bytes_for_kernels_and_copies(gpu):
  """A numpy array that starts mid-page: a kernel writes it, the host sees it; the host writes it, a copy reads it."""
  n, prg = 1000, vadd(gpu)
  host = np.zeros(n + 7, np.float32)[7:]                 # 28 bytes into its first page
  a, b = rand(n, 1), rand(n, 2)
  ba, bb, out = put(gpu, a), put(gpu, b), gpu.alloc(host.nbytes)
  prg(out, ba, bb, global_size=(1,), local_size=(64,), vals=(0,), wait=True)
  held = mappings(gpu)
  buf = gpu.import_host(host)
  assert buf.size == host.nbytes and buf.va % 4096 == host.ctypes.data % 4096
  prg(buf, ba, bb, global_size=(-(-n // 64),), local_size=(64,), vals=(n,), wait=True)
  np.testing.assert_array_equal(host, a + b)
  host[:] = a * 3
  buf.transfer(out)                                      # the copy queue reads the host's new values
  np.testing.assert_array_equal(get(out), a * 3)
  buf.free()
  assert mappings(gpu) == held                           # unmapped again
  np.testing.assert_array_equal(host, a * 3)             # and the memory is left alone


def test_memory_a_device_cannot_write_is_refused_with_what_to_pass(gpu):
  with pytest.raises(ValueError, match="read-only"): gpu.import_host(bytes(4096))
  with pytest.raises(ValueError, match="non-contiguous"): gpu.import_host(np.zeros(64, np.float32)[::2])
  with pytest.raises(ValueError, match="0 bytes"): gpu.import_host(bytearray())
  with pytest.raises(TypeError, match="writable buffer"): gpu.import_host(3)


def test_transfer_between_two_gpus_is_device_to_device_through_shared_host_memory(pair, monkeypatch):
  """No host copy; the shared memory is kept for the next transfer, so that one maps nothing new. (Two PCI GPUs go
  peer to peer instead, through the destination's BAR: tests/drivers/amd/test_am_peer.py.)"""
  a, b = pair
  x, y = rand(5000, 3), rand(5000, 4)
  src, dest = put(a, x), b.alloc(x.nbytes)
  def no_host_copy(*args): raise AssertionError("the transfer went through the host")
  monkeypatch.setattr(type(a), "_copyout", no_host_copy)
  src.transfer(dest)
  monkeypatch.undo()
  np.testing.assert_array_equal(get(dest), x)
  src.copyin(y.data)
  held = [(d.allocated_bytes, mappings(d)) for d in pair]
  monkeypatch.setattr(type(a), "_copyout", no_host_copy)
  src.transfer(dest)
  assert [(d.allocated_bytes, mappings(d)) for d in pair] == held
  monkeypatch.undo()
  np.testing.assert_array_equal(get(dest), y)


def test_a_transfer_larger_than_what_is_kept_maps_its_memory_for_itself_only(monkeypatch):
  a, b = open_device("MOCKKFD+AMD"), open_device("MOCKKFD+AMD:1")
  monkeypatch.setattr(PeerLink, "KEEP_MAX", 64 << 10)
  x = rand(40000, 6)                                     # 160 KB
  src, dest = put(a, x), b.alloc(x.nbytes)
  get(dest)
  held = [mappings(d) for d in (a, b)]
  src.transfer(dest)
  assert [mappings(d) for d in (a, b)] == held
  np.testing.assert_array_equal(get(dest), x)


def test_closing_either_gpu_unmaps_the_memory_their_transfers_shared():
  k = kernel_interface("kfd")
  d0, d1 = AMDDevice("MOCKKFD+AMD", KFDIface(k, 0)), AMDDevice("MOCKKFD+AMD:1", KFDIface(k, 1))
  try:
    src, dest = put(d0, rand(100, 5)), d1.alloc(400)
    get(dest)                                            # d1's staging buffers exist before counting
    bos = lambda d: sum(bo.node.gpu_id == d.iface.gpu_id for bo in k.model.bos.values())
    own = bos(d1)
    src.transfer(dest)
    np.testing.assert_array_equal(get(dest), rand(100, 5))
    assert bos(d1) == own + 1                            # the shared memory, kept
    d0.close()
    assert bos(d1) == own                                # d0 closing unmapped it from d1 too
  finally:
    d1.close()
    d0.close()


def two_gpu_graph(a, b, n, out=None):
  """On A: s = x + y; s crosses to B; on B: out = s + z."""
  x, y, z = rand(n, 4), rand(n, 5), rand(n, 6)
  bx, by, bs = put(a, x), put(a, y), a.alloc(4 * n)
  bs_b, bz, out = b.alloc(4 * n), put(b, z), out or b.alloc(4 * n)
  g = Graph()
  kw = dict(global_size=(n // 64,), local_size=(64,), vals=(n,))
  g.exec(vadd(a), bs, bx, by, **kw)
  g.copy(bs_b, bs)
  g.exec(vadd(b), out, bs_b, bz, **kw)
  return g, (x, y, z), (by, out)


def test_graph_across_two_gpus_replays_with_new_inputs_one_submission_per_device_and_queue(pair, monkeypatch):
  a, b = pair
  n = 256
  g, (x, y, z), (by, out) = two_gpu_graph(a, b, n)
  g(wait=True)
  np.testing.assert_array_equal(get(out), x + y + z)
  assert [(r.device, r.kind) for r in g.runs] == [(a, "compute"), (a, "copy"), (b, "copy"), (b, "compute")]
  news = [(put(a, rand(n, 10 + k)), rand(n, 10 + k)) for k in range(3)]
  subs = count_submissions(monkeypatch)
  for by2, y2 in news:
    subs.clear()
    g(replace={by: by2}, wait=True)
    assert subs == [a.name, a.name, b.name, b.name]   # A's kernel, A's copy out, B's copy in, B's kernel
    np.testing.assert_array_equal(get(out), x + y2 + z)
  g.free()


def test_the_second_gpu_waits_on_the_device_for_the_first(pair):
  """A's compute queue is held at a gate the host opens; the replay is submitted to both GPUs at once. B's copy queue
  reaches its wait for A's signal and stops there (its read pointer moves, its timeline does not) until A has run:
  then B computes on A's new output."""
  a, b = pair
  n = 256
  result = np.zeros(n, np.float32)                       # B's output in host memory: readable while B is held
  g, (x, y, z), (by, out) = two_gpu_graph(a, b, n, b.import_host(result))
  g(wait=True)
  np.testing.assert_array_equal(result, x + y + z)
  y2 = rand(n, 20)
  by.copyin(y2.data)
  gate = a.new_signal(0, "gate")
  a.compute_queue().wait(gate, 1).submit()               # what A's compute queue gets next waits for the gate
  b.synchronize()
  start, before = b.sdma_ring.rptr, b.timeline.value
  g()                                                    # not waiting: the host takes no part in the order
  while b.sdma_ring.rptr == start and b.timeline.value == before: b.check_faults()
  assert b.timeline.value == before                      # B's copy queue stopped at its wait: A has not run
  np.testing.assert_array_equal(result, x + y + z)       # so B's output is still the last replay's
  gate.value = 1
  b.synchronize()
  np.testing.assert_array_equal(result, x + y2 + z)
  g.free()
  out.free()


def test_kernels_on_two_gpus_over_shared_host_memory_replay_as_one_submission_per_device(pair, monkeypatch):
  """A's kernel writes host memory both GPUs map, B's kernel reads it: the graph is one run per GPU, so each replay is
  one submission to each, B's ordered after A's by the signal B's compute queue waits on."""
  a, b = pair
  n = 256
  shared = np.zeros(n, np.float32)
  on_a, on_b = a.import_host(shared), b.import_host(shared)
  x, z = rand(n, 30), rand(n, 31)
  bx, bz, out = put(a, x), put(b, z), b.alloc(4 * n)
  g = Graph()
  kw = dict(global_size=(n // 64,), local_size=(64,), vals=(n,))
  g.exec(vadd(a), on_a, bx, bx, **kw)                    # shared = 2x
  g.exec(vadd(b), out, on_b, bz, **kw)                   # out = 2x + z
  g(wait=True)
  np.testing.assert_array_equal(get(out), x + x + z)
  subs = count_submissions(monkeypatch)
  for k in range(3):
    x2 = put(a, rand(n, 40 + k))
    subs.clear()
    g(replace={bx: x2}, wait=True)
    assert subs == [a.name, b.name]
    np.testing.assert_array_equal(get(out), rand(n, 40 + k) * 2 + z)
  g.free()
  on_a.free(); on_b.free()
