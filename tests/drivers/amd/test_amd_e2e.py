"""The AMD driver end to end through both interfaces: MOCKKFD+AMD (the KFD path, the same driver code as KFD+AMD)
and MOCKPCI+AMD (the AM userspace driver booting the emulated Navi31 from cold); on a machine with the hardware
the same tests run on KFD+AMD and PCI+AMD (they skip elsewhere, saying what they need)."""
import ctypes, os, re, subprocess, sys, time
import numpy as np
import pytest
from autogen import kfd
from drivers.hcq import open_device, SignalTimeout, DeviceFault
from drivers.amd.device import RING_SIZE, AMDDevice
from drivers.hcq.staging import STAGING_SIZE, STAGING_COUNT
from drivers.amd.kfd import KFDIface
from drivers.system.kernel import kernel_interface
from tests.drivers.amd.kernels import SRC

DEVICES = ["MOCKKFD+AMD", "MOCKPCI+AMD", pytest.param("KFD+AMD", marks=pytest.mark.hardware("amd")),
           pytest.param("PCI+AMD", marks=pytest.mark.hardware("amd-pci"))]


@pytest.fixture(scope="module", params=DEVICES)
def dev(request):
  d = open_device(request.param)
  yield d
  d.close()


@pytest.fixture(scope="module")
def lib(dev): return dev.compiler.compile(SRC)


def put(dev, arr):
  b = dev.alloc(arr.nbytes)
  b.copyin(arr.data)
  return b


def get(buf, dtype): return np.frombuffer(buf.copyout(), dtype)


def test_device_identity(dev):
  assert dev.arch == "gfx1100" and dev.iface.ip_versions["GC"] == (11, 0, 0)


def test_vector_add_matches_numpy(dev, lib):
  n = 10_000
  a, b = np.random.default_rng(0).standard_normal((2, n), dtype=np.float32)
  out = dev.alloc(n * 4)
  dev.program("vadd", lib)(out, put(dev, a), put(dev, b), global_size=(-(-n // 64),), local_size=(64,), vals=(n,), wait=True)
  np.testing.assert_array_equal(get(out, np.float32), a + b)


def test_lds_reduction_with_barriers(dev, lib):
  x = np.random.default_rng(1).integers(-1000, 1000, 256 * 40).astype(np.float32)
  out = dev.alloc(40 * 4)
  prg = dev.program("lds_sum", lib)
  assert prg.kernel.descriptor.group_segment_fixed_size == 1024
  prg(out, put(dev, x), global_size=(40,), local_size=(256,), wait=True)
  np.testing.assert_array_equal(get(out, np.float32), x.reshape(40, 256).sum(1))


def test_global_atomics(dev, lib):
  x = np.random.default_rng(2).integers(0, 1 << 20, 50_000).astype(np.int32)
  bins = put(dev, np.zeros(16, np.int32))
  dev.program("histogram", lib)(bins, put(dev, x), global_size=(-(-len(x) // 128),), local_size=(128,), vals=(len(x),), wait=True)
  np.testing.assert_array_equal(get(bins, np.int32), np.bincount(x & 15, minlength=16))


def test_3d_grid_of_many_workgroups(dev, lib):
  nx, ny, nz = 64, 24, 6
  out = dev.alloc(nx * ny * nz * 4)
  dev.program("grid3d", lib)(out, global_size=(nx // 16, ny // 4, nz // 2), local_size=(16, 4, 2), vals=(nx, ny), wait=True)
  z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
  np.testing.assert_array_equal(get(out, np.int32).reshape(nz, ny, nx), x + 100 * y + 10000 * z)


def test_kernel_using_scratch(dev, lib):
  prg = dev.program("scratch", lib)
  assert prg.kernel.descriptor.private_segment_fixed_size >= 256
  n = 256
  idx = np.random.default_rng(3).integers(0, 64, n).astype(np.int32)
  out = dev.alloc(n * 4)
  prg(out, put(dev, idx), global_size=(n // 64,), local_size=(64,), wait=True)
  np.testing.assert_array_equal(get(out, np.int32), idx * np.arange(n))


@pytest.mark.parametrize("size", [1, 7, 4099, STAGING_SIZE, 3 * RING_SIZE + 5, STAGING_COUNT * STAGING_SIZE + 1])
def test_copies_of_odd_sizes_and_larger_than_the_ring(dev, size):
  data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
  a, b = dev.alloc(size), dev.alloc(size)
  a.copyin(data.data)
  a.transfer(b)                                       # device -> device on the SDMA queue
  assert np.array_equal(get(b, np.uint8), data)       # device -> host through staging
  host = dev.alloc(size, host=True)                   # pinned host memory the GPU reaches directly
  dev.copy_queue().copy(host, b).signal(dev.timeline, v := dev.next_timeline()).submit()
  dev.timeline.wait(v)
  assert np.array_equal(np.frombuffer(host.host_view, np.uint8), data)
  for x in (a, b, host): x.free()


def test_thousand_launches_chained_across_queues(dev, lib):
  x, y = put(dev, np.zeros(64, np.int32)), dev.alloc(256)
  add1 = dev.program("add1", lib)
  for _ in range(500):   # 1000 launches + copies: compute and SDMA hand the buffer back and forth through the timeline
    add1(x, global_size=(1,), local_size=(64,))
    add1(x, global_size=(1,), local_size=(64,))
    dev.ordered_submit(dev.copy_queue(), lambda q: q.copy(y, x))
  np.testing.assert_array_equal(get(y, np.int32), np.full(64, 1000))


def test_signal_never_written_times_out_naming_the_queue(dev):
  sig = dev.new_signal(0, name="never")
  dev.copy_queue().wait(sig, 1).signal(sig, 7).submit()
  with pytest.raises(SignalTimeout, match=rf"{re.escape(dev.name)}: never written by the copy queue did not reach 7 .*last seen 0"):
    sig.wait(7, timeout_ms=200)
  sig.value = 1                 # the SDMA queue's POLL_REGMEM now passes and the queue drains
  sig.wait(7, timeout_ms=5000)


def until(cond, what: str, timeout_s: float = 30) -> None:
  """Wait for a condition (the bound only turns a bug into a failure instead of a hang)."""
  deadline = time.monotonic() + timeout_s
  while not cond():
    if time.monotonic() > deadline: raise AssertionError(f"{what} within {timeout_s} s")
    time.sleep(1e-4)


@pytest.mark.parametrize("kind", ["compute", "copy"])
@pytest.mark.parametrize("start, target, release", [
  (0xFFFF_FFF0, 0x1_0000_0005, 0x1_0000_0005),     # the target's low dword is below the current value's
  (0xFFFF_FFF0, 0x1_0000_0005, 0x2_0000_0000),     # released by a later 2^32 window with a smaller low dword
  (0x7_0000_0003, 0x7_8000_0000, 0x7_8000_0001),   # above 2^32 from the start
  (0x2_0000_0000, 5, 0x2_0000_0000),               # a small target the signal is already past: no wait
])
def test_signals_and_waits_above_2_32(dev, kind, start, target, release):
  """A queue waits on the whole 64-bit value: stalled while the signal is below the target (also where a 32-bit
  compare of the low dword would pass), released once it reaches it; signals write all 64 bits."""
  q = dev.compute_queue() if kind == "compute" else dev.copy_queue()
  ring = dev.compute_ring if kind == "compute" else dev.sdma_ring
  sig, before, out = dev.new_signal(start, name="big"), dev.new_signal(0, name="before"), dev.new_signal(0, name="out")
  p0 = ring.put
  q.signal(before, 1).wait(sig, target).signal(out, (9 << 32) + 7).submit()
  if start < target:
    # the engine reports its read pointer inside this submission only where it stalls: at the wait
    until(lambda: p0 < ring.rptr < ring.put, f"the {kind} queue did not stall on the wait for {target:#x} with the signal at {start:#x}")
    assert out.value == 0 and before.value == 1
    sig.value = release
  out.wait((9 << 32) + 7, timeout_ms=10_000)
  assert out.value == (9 << 32) + 7 and sig.value == (release if start < target else start)


@pytest.mark.parametrize("iface", ["MOCKKFD", "MOCKPCI"])
def test_unmapped_address_faults_naming_address_and_kernel(iface):
  # a device of its own (the fault poisons it): a fresh KFD model, or the second emulated PCI function
  d = AMDDevice("MOCKKFD+AMD", KFDIface(kernel_interface("kfd"))) if iface == "MOCKKFD" else open_device("MOCKPCI+AMD:1")
  try:
    out = d.alloc(4)
    bad = type("Unmapped", (), {"va": 0x2234_5678_0000, "device": d})()   # an address no buffer is mapped at
    prg = d.program("read_ptr", d.compiler.compile(SRC))
    args = prg.fill_kernargs([out, out])
    args.update([out, bad], [])
    d.compute_queue().exec(prg, args, (1,), (1,)).signal(d.timeline, v := d.next_timeline()).submit()
    with pytest.raises(DeviceFault, match=r"fault at 0x223456780000.*kernel read_ptr"): d.timeline.wait(v, timeout_ms=10_000)
  finally: d.close()


def test_one_kfd_serves_two_gpus_each_with_its_own_vm_buffers_and_faults():
  """One process, one KFD, two GPUs (topology nodes 1 and 2): host memory imported into both is the same bytes; a buffer
  object maps into its own GPU only; a fault on one GPU is that device's, not the other's."""
  k = kernel_interface("kfd")
  d0 = AMDDevice("MOCKKFD+AMD", KFDIface(k, 0))
  d1 = AMDDevice("MOCKKFD+AMD:1", KFDIface(k, 1))
  try:
    assert d0.iface.gpu_id != d1.iface.gpu_id
    with pytest.raises(RuntimeError, match="AMD:2 does not exist: KFD lists 2 GPU"): KFDIface(k, 2)
    x = np.zeros(64, np.int32)
    for d in (d0, d1): d.program("add1", d.compiler.compile(SRC))(d.import_host(x), global_size=(1,), local_size=(64,), wait=True)
    np.testing.assert_array_equal(x, 2)                  # each GPU added one to the same host pages
    vram = d0.alloc(4096)
    ids = (ctypes.c_uint32 * 1)(d1.iface.gpu_id)
    with pytest.raises(OSError, match="to another GPU than the one it belongs to is not modelled"):
      k.ioctl(d0.iface.kfd, kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU, kfd.kfd_ioctl_map_memory_to_gpu_args(
        handle=vram.opaque.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1))
    out = d1.alloc(4)
    bad = type("Unmapped", (), {"va": 0x2234_5678_0000, "device": d1})()
    prg = d1.program("read_ptr", d1.compiler.compile(SRC))
    args = prg.fill_kernargs([out, out])
    args.update([out, bad], [])
    d1.compute_queue().exec(prg, args, (1,), (1,)).signal(d1.timeline, v := d1.next_timeline()).submit()
    with pytest.raises(DeviceFault, match=r"fault at 0x223456780000"): d1.timeline.wait(v, timeout_ms=10_000)
    assert d0.iface.poll_faults() is None                # d0 got the process's fault event too: it names the other GPU
    d0.program("add1", d0.compiler.compile(SRC))(d0.import_host(x), global_size=(1,), local_size=(64,), wait=True)
    np.testing.assert_array_equal(x, 3)                  # and d0 works on
  finally:
    d1.close()
    d0.close()


TWO = r"""
import numpy as np, sys
from drivers.hcq import open_device
from tests.drivers.amd.kernels import SRC
d = open_device("MOCKKFD+AMD")
n = 4096
a = d.alloc(n * 4); a.copyin(np.full(n, float(sys.argv[1]), np.float32).data)
out = d.alloc(n * 4)
d.program("vadd", d.compiler.compile(SRC))(out, a, a, global_size=(n // 64,), local_size=(64,), vals=(n,), wait=True)
print(a.va, float(np.frombuffer(out.copyout(), np.float32).sum()))
"""


def test_two_processes_each_get_their_own_vm():
  env = dict(os.environ, PYTHONPATH=os.getcwd())
  procs = [subprocess.Popen([sys.executable, "-c", TWO, str(k)], stdout=subprocess.PIPE, text=True, env=env) for k in (1, 2)]
  outs = [p.communicate(timeout=300)[0].split() for p in procs]
  assert all(p.returncode == 0 for p in procs)
  assert outs[0][0] == outs[1][0]                        # the same GPU VA in both processes ...
  assert [float(o[1]) for o in outs] == [2 * 4096, 4 * 4096]   # ... holding each process's own data


def test_close_returns_every_allocation_to_the_kernel():
  """Buffers, programs, kernel arguments, signals, rings: after close the KFD model holds no buffer object of ours."""
  d = AMDDevice("MOCKKFD+AMD", KFDIface(kernel_interface("kfd")))
  model = d.iface.k.model
  node = model.nodes[d.iface.gpu_id]
  free_at_open = node.vram_alloc.free_bytes
  bufs = [d.alloc(1 << 20), d.alloc(4096, host=True)]
  prg = d.program("add1", d.compiler.compile(SRC))
  for _ in range(3): prg(bufs[0], global_size=(4,), local_size=(64,), wait=True)
  bufs[1].free()
  assert node.vram_alloc.free_bytes < free_at_open
  d.close()
  assert model.bos == {} and model.queues == {} and node.vram_alloc.used == {}


def test_close_unmaps_every_host_page_from_the_device():
  """On the AM path the GPU reaches host memory only through DMA mappings: after close none is left."""
  d = open_device("MOCKPCI+AMD:2")
  dma = d.iface.pci.model.dma
  d.alloc(1 << 20, host=True)
  d.program("add1", d.compiler.compile(SRC))(d.alloc(4096), global_size=(1,), local_size=(64,), wait=True)
  assert dma._runs
  d.close()
  assert dma._runs == {}


def test_graph_replays_with_new_buffers_and_values(dev, lib):
  from drivers.hcq import Graph
  n = 1000
  a, b, c = (np.random.default_rng(i).standard_normal(n, dtype=np.float32) for i in range(3))
  ba, bb, bc, out, out2 = put(dev, a), put(dev, b), put(dev, c), dev.alloc(n * 4), dev.alloc(n * 4)
  g = Graph(dev)
  step = g.exec(dev.program("vadd", lib), out, ba, bb, global_size=(-(-n // 64),), local_size=(64,), vals=(n,))
  g.copy(out2, out)
  g(wait=True)
  np.testing.assert_array_equal(get(out2, np.float32), a + b)
  g(replace={bb: bc}, vals={step: (n // 2,)}, wait=True)       # a new input, and only the first half computed
  got = get(out2, np.float32)
  np.testing.assert_array_equal(got[:n // 2], (a + c)[:n // 2])
  np.testing.assert_array_equal(got[n // 2:], (a + b)[n // 2:])


def pm4_packets(dev, start: int, end: int) -> list[tuple[int, list[int]]]:
  """(opcode, payload) of each PM4 packet the compute ring got between two of its write pointers (dwords)."""
  words, out = dev.compute_ring.words, []
  while start < end:
    hdr = int(words[start % len(words)])
    n = ((hdr >> 16) & 0x3FFF) + 1
    out.append(((hdr >> 8) & 0xFF, [int(words[(start + 1 + i) % len(words)]) for i in range(n)]))
    start += n + 1
  return out


def test_each_launch_invalidates_caches_once_and_hdp_is_flushed_once_per_submission(dev, lib):
  """Compute-layer schedules and Program calls: one ACQUIRE_MEM per dispatch (the launch's own) and no memory_barrier
  between kernels; the HDP flush (register-form WAIT_REG_MEM) comes once per submission where the host does not flush
  it before the doorbell (KFD), never on the AM path (PCIIface.before_doorbell)."""
  from autogen.amd import nvd
  from compute import Tensor
  x = Tensor(np.arange(64, dtype=np.float32), device=dev.name).realize()
  start = dev.compute_ring.put
  Tensor.realize_all(*(x * k + 1 for k in range(3)), (x * 2).sum())
  dev.program("add1", lib)(dev.alloc(256), global_size=(1,), local_size=(64,), wait=True)
  pkts = pm4_packets(dev, start, dev.compute_ring.put)
  ops = [op for op, _ in pkts]
  assert ops.count(nvd.PACKET3_DISPATCH_DIRECT) >= 5
  assert ops.count(nvd.PACKET3_ACQUIRE_MEM) == ops.count(nvd.PACKET3_DISPATCH_DIRECT)
  submissions = sum(op == nvd.PACKET3_RELEASE_MEM and p[2] | p[3] << 32 == dev.timeline.va for op, p in pkts)
  hdp_flushes = [p for op, p in pkts if op == nvd.PACKET3_WAIT_REG_MEM and not p[0] & nvd.WAIT_REG_MEM_MEM_SPACE(1)]
  assert submissions == 2 and len(hdp_flushes) == (0 if dev.host_flushes_hdp else submissions)


def test_launch_packets_are_encoded_once_per_program_and_workgroup_size(dev, lib, monkeypatch):
  from drivers.amd.pm4 import PM4Queue
  made, real = [], PM4Queue._encode_launch
  monkeypatch.setattr(PM4Queue, "_encode_launch", lambda q, prg, ls: made.append(ls) or real(q, prg, ls))
  prg, x = dev.program("add1", lib), put(dev, np.zeros(64, np.int32))
  for ls in [(64,), (64,), (32,), (64,)]: prg(x, global_size=(1,), local_size=ls)
  np.testing.assert_array_equal(get(x, np.int32), np.r_[np.full(32, 4), np.full(32, 3)])
  assert made == [(64, 1, 1), (32, 1, 1)]
