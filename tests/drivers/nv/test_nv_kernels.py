"""Kernels on MOCK+NV end to end: CUDA C compiled by NVRTC to a cubin and its PTX, loaded by drivers/nv (cubin
parsing, QMD V04 on Hopper / V03 on Ampere, constant buffer 0 at sm_90's / sm_80's parameter offset), launched on
the compute channel and run by the model's PTX engine; results against numpy, ordering against the copy channel,
graph replay, and the faults a bad kernel or a bad cubin gives."""
import sys, time
import numpy as np
import pytest
from drivers.hcq import DeviceFault, Graph, open_device
from drivers.nv import image
from drivers.nv.cubin import CubinError
from drivers.nv.device import NVDevice
from drivers.nv.gpu import NVGPU
from drivers.system.kernel import kernel_interface
from drivers.nv import nvrtc
from tests.emu.nvgpu.ptx_helpers import HEADERS, VADD, needs_nvrtc

pytestmark = needs_nvrtc
rng = np.random.default_rng(17)
REDUCE = r'''
extern "C" __global__ void block_sum(const float *a, float *out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? a[i] : 0.0f;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) out[blockIdx.x] = s[0];
}'''
HALF = HEADERS + r'''
extern "C" __global__ void mix(const __half *a, const __half *b, __half *h, const __nv_bfloat16 *x, __nv_bfloat16 *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { h[i] = __hadd(a[i], b[i]); y[i] = __hmul(x[i], x[i]); }
}'''
GRID2D = r'''
extern "C" __global__ void transpose(const int *a, int *t, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) t[c * rows + r] = a[r * cols + c] + gridDim.x * 1000 + blockDim.y * 100000;
}'''

LOCAL = r'''
extern "C" __global__ void rotate(const int *a, int *out, int k) {
  int v[48];                                      // indexed by a run-time value: in local memory
  int t = threadIdx.x;
  for (int i = 0; i < 48; i++) v[i] = a[t * 48 + i];
  for (int i = 0; i < 48; i++) out[t * 48 + i] = v[(i + k) % 48];
}'''


def build(dev, src: str, name: str):
  return dev.program(name, image.pack(nvrtc.cubin(src, dev.arch), nvrtc.ptx(src, dev.arch)))


def upload(dev, arr: np.ndarray):
  buf = dev.alloc(arr.nbytes)
  buf.copyin(arr.data)
  return buf


def read(buf, dtype, n=None):
  return np.frombuffer(buf.copyout(), dtype)[:n]


@pytest.fixture(params=["GH100", "GA100", "GA102"])
def chip_dev(request):
  d = NVDevice(f"MOCK+NV ({request.param})", NVGPU(kernel_interface(mock="nv", chip=request.param)))
  yield d
  d.close()


def test_vector_add_on_hopper_and_ampere(chip_dev):
  """V04 QMDs with params at cb0 0x210 on GH100 (sm_90), V03 with params at 0x160 on GA100 (sm_80) and GA102 (sm_86)."""
  n = 1000
  a, b = rng.random(n, np.float32), rng.random(n, np.float32)
  prg = build(chip_dev, VADD, "vadd")
  assert prg.kernel.param_offset == (0x210 if chip_dev.arch == "sm_90" else 0x160)
  A, B, C = upload(chip_dev, a), upload(chip_dev, b), chip_dev.alloc(4 * n)
  secs = prg(A, B, C, global_size=((n + 127) // 128,), local_size=(128,), vals=(n,), wait=True)
  assert secs is not None and secs >= 0
  np.testing.assert_array_equal(read(C, np.float32), a + b)


def test_a_constant_buffer_besides_cb0_is_uploaded_64_byte_aligned_and_relocated(chip_dev):
  """sinf keeps the address of CUDA's 2/pi table (in .nv.global.init) in constant buffer 4, whose section the file
  aligns to 8 only: the QMD needs its address 64-byte aligned, and its 8 bytes are the table's device address."""
  import io
  from elftools.elf.elffile import ELFFile
  src = r'''extern "C" __global__ void s(const float *x, float *y) { y[threadIdx.x] = sinf(x[threadIdx.x]); }'''
  prg = build(chip_dev, src, "s")
  assert all(a % 64 == 0 for a, _ in prg.constants.values()) and prg.constants[4][1] == 8
  addr = prg.constants[4][0]
  init = ELFFile(io.BytesIO(nvrtc.cubin(src, chip_dev.arch))).get_section_by_name(".nv.global.init")["sh_offset"]
  assert int.from_bytes(prg.code.view.view[addr:addr + 8], "little") == prg.code.va + init
  x = np.array([0.5, -3.0, 1e5, 3e7, 1e20, -7.5e37, 2e9, 12345.678] * 4, np.float32)
  X, Y = upload(chip_dev, x), chip_dev.alloc(x.nbytes)
  prg(X, Y, global_size=(1,), local_size=(32,), wait=True)
  np.testing.assert_allclose(read(Y, np.float32), np.sin(x.astype(np.float64)), atol=1e-6)


def test_reduction_in_shared_memory_with_syncthreads(nv):
  n = 256 * 7 - 5
  a = rng.integers(-100, 100, n).astype(np.float32)   # integers: every order of additions gives the same sum
  prg = build(nv, REDUCE, "block_sum")
  out = nv.alloc(4 * 7)
  prg(upload(nv, a), out, global_size=(7,), local_size=(256,), vals=(n,), wait=True)
  np.testing.assert_array_equal(read(out, np.float32), np.pad(a, (0, 5)).reshape(7, 256).sum(1))


def test_f16_and_bf16_arithmetic(nv):
  n = 300
  a, b = rng.standard_normal(n).astype(np.float16), rng.standard_normal(n).astype(np.float16)
  x = rng.standard_normal(n).astype(np.float32)
  xb = (x.view(np.uint32) >> 16).astype(np.uint16)              # bf16: the top half of an f32 (truncated)
  prg = build(nv, HALF, "mix")
  h, y = nv.alloc(2 * n), nv.alloc(2 * n)
  prg(upload(nv, a), upload(nv, b), h, upload(nv, xb), y, global_size=(3,), local_size=(128,), vals=(n,), wait=True)
  np.testing.assert_array_equal(read(h, np.float16), (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16))
  xf = (xb.astype(np.uint32) << 16).view(np.float32)
  sq = (xf.astype(np.float64) ** 2).astype(np.float32).view(np.uint32)   # exact, then round to nearest even to bf16
  want = ((sq + 0x7FFF + (sq >> 16 & 1)) >> 16).astype(np.uint16)
  np.testing.assert_array_equal(read(y, np.uint16), want)


def test_2d_grid_reads_its_ids_and_dims(nv):
  rows, cols = 37, 53
  a = np.arange(rows * cols, dtype=np.int32).reshape(rows, cols)
  prg = build(nv, GRID2D, "transpose")
  t = nv.alloc(a.nbytes)
  grid = ((cols + 15) // 16, (rows + 7) // 8)
  prg(upload(nv, a), t, global_size=grid, local_size=(16, 8), vals=(rows, cols), wait=True)
  np.testing.assert_array_equal(read(t, np.int32).reshape(cols, rows), a.T + grid[0] * 1000 + 8 * 100000)


def test_a_kernel_with_a_stack_gets_local_memory(nv):
  """MIN_STACK_SIZE from .nv.info sizes the QMD's local memory and the SET_SHADER_LOCAL_MEMORY area the model checks."""
  a = rng.integers(0, 1 << 20, (64, 48)).astype(np.int32)
  prg = build(nv, LOCAL, "rotate")
  assert prg.kernel.local_bytes >= 48 * 4
  out = nv.alloc(a.nbytes)
  prg(upload(nv, a), out, global_size=(1,), local_size=(64,), vals=(5,), wait=True)
  np.testing.assert_array_equal(read(out, np.int32).reshape(64, 48), np.roll(a, -5, axis=1))
  gr = nv.gpu.gr
  assert nv.local.size >= prg.kernel.local_bytes * 32 * gr["max_warps_per_sm"] * gr["sm_per_tpc"] * gr["tpc_per_gpc"] * gr["gpcs"]


def test_a_qmd_with_less_local_memory_than_the_stack_is_refused(nv):
  from autogen.qmdlayout import V04_HOPPER as L
  prg = build(nv, LOCAL, "rotate")
  buf = nv.alloc(64 * 48 * 4)
  args = prg.fill_kernargs([buf, buf], [5], (1,), (64,))
  o = prg.qmd_offset
  q = L.set(int.from_bytes(args.view[o:o + L.nbytes], "little"), "SHADER_LOCAL_MEMORY_HIGH_SIZE", 16)
  args.view[o:o + L.nbytes] = q.to_bytes(L.nbytes, "little")
  nv.compute_queue().exec(prg, args, (1,), (64,)).signal(nv.timeline, v := nv.next_timeline()).submit()
  with pytest.raises(DeviceFault, match="compute channel stopped"): nv.timeline.wait(v, timeout_ms=120000)
  model = nv.gpu.k.model
  assert "local memory of 16 bytes per thread is less than kernel rotate's" in model.hosts[model.rm.channels[nv.compute_ring.ch.token].chid].error


def test_compute_waits_on_copy_signals_and_copy_on_compute_signals(nv):
  """Each queue has its own channel: a kernel waits for a copy that waits for the host, then a copy for the kernel."""
  n = 512
  a, b = rng.random(n, np.float32), rng.random(n, np.float32)
  prg = build(nv, VADD, "vadd")
  A, B, tmp, C, D = upload(nv, a), upload(nv, b), nv.alloc(4 * n), nv.alloc(4 * n), nv.alloc(4 * n)
  go, copied, added = nv.new_signal(0), nv.new_signal(0), nv.new_signal(0)
  nv.copy_queue().wait(go, 1).copy(tmp, A).signal(copied, 1).submit()
  nv.compute_queue().wait(copied, 1).exec(prg, prg.fill_kernargs([tmp, B, C], [n]), (4,), (128,)).signal(added, 1).submit()
  nv.copy_queue().wait(added, 1).copy(D, C).signal(nv.timeline, v := nv.next_timeline()).submit()
  assert copied.value == 0 and added.value == 0 and nv.timeline.value < v
  go.value = 1
  nv.timeline.wait(v, timeout_ms=60000)
  assert (copied.value, added.value) == (1, 1)
  np.testing.assert_array_equal(read(D, np.float32), a + b)


def test_timestamps_on_the_compute_queue_bracket_the_kernel(nv):
  prg = build(nv, VADD, "vadd")
  A = upload(nv, np.ones(64, np.float32))
  t0, t1 = nv.new_signal(), nv.new_signal()
  before = time.monotonic_ns() / 1000
  nv.ordered_submit(nv.compute_queue(), lambda q: q.timestamp(t0).exec(prg, prg.fill_kernargs([A, A, A], [64]), (1,), (64,)).timestamp(t1))
  nv.synchronize()
  assert before <= t0.timestamp <= t1.timestamp <= time.monotonic_ns() / 1000     # the PTIMER's clock
  assert t0.value == t1.value == 0
  np.testing.assert_array_equal(read(A, np.float32), np.full(64, 2, np.float32))


def test_a_compute_queue_timestamp_keeps_the_value_another_queue_gave_the_signal(nv):
  """The timestamp is stamped when the command runs, and the signal keeps the value the copy queue wrote after the
  compute queue was built (a release of the build-time value would put 0 back)."""
  go, sig = nv.new_signal(), nv.new_signal()
  q = nv.compute_queue().wait(go, 1).timestamp(sig).signal(nv.timeline, v := nv.next_timeline())
  q.submit()
  nv.copy_queue().signal(sig, 41).signal(go, 1).submit()
  nv.timeline.wait(v, timeout_ms=60000)
  assert sig.value == 41 and sig.timestamp > 0


def test_graph_replays_kernels_with_other_buffers_and_values(nv):
  n = 200
  prg = build(nv, VADD, "vadd")
  a, b = rng.random(n, np.float32), rng.random(n, np.float32)
  A, B, C = upload(nv, a), upload(nv, b), nv.alloc(4 * n)
  g = Graph()
  step = g.exec(prg, A, B, C, global_size=(2,), local_size=(128,), vals=(n,))
  g(wait=True)
  np.testing.assert_array_equal(read(C, np.float32), a + b)
  D = nv.alloc(4 * n)
  g(replace={C: D}, vals={step: (n // 2,)}, wait=True)             # the patched SEND_PCAS_A points at new arguments
  got = read(D, np.float32)
  np.testing.assert_array_equal(got[:n // 2], (a + b)[:n // 2])
  assert not got[n // 2:].any()


def test_a_kernel_touching_an_unmapped_address_stops_the_compute_channel(nv):
  prg = build(nv, VADD, "vadd")
  A = upload(nv, np.ones(64, np.float32))
  args = prg.fill_kernargs([A, A, A], [64])
  args.view[prg.kernel.param_offset:prg.kernel.param_offset + 8] = (0x7000_0000_0000).to_bytes(8, "little")   # a = a hole
  nv.compute_queue().exec(prg, args, (1,), (64,)).submit()
  model = nv.gpu.k.model
  host = model.hosts[model.rm.channels[nv.compute_ring.ch.token].chid]
  with host.changed: assert host.changed.wait_for(lambda: host.error, timeout=120)
  assert "kernel vadd" in host.error and "0x700000000000" in host.error and "is not mapped" in host.error


def test_program_checks_the_cubin(nv):
  cub, ptx = nvrtc.cubin(VADD, "sm_80"), nvrtc.ptx(VADD, "sm_80")
  with pytest.raises(CubinError, match="the cubin is for sm_80, .* is sm_90"): nv.program("vadd", image.pack(cub, ptx))
  cub, ptx = nvrtc.cubin(VADD, "sm_90"), nvrtc.ptx(VADD, "sm_90")
  with pytest.raises(ValueError, match="no kernel named 'nope'"): nv.program("nope", image.pack(cub, ptx))
  bad = bytearray(cub)
  bad[0x28:0x30] = (len(cub) * 4).to_bytes(8, "little")          # e_shoff past the file
  with pytest.raises(CubinError, match="malformed cubin"): nv.program("vadd", image.pack(bytes(bad), ptx))
  with open(sys.executable, "rb") as f: host = f.read()
  with pytest.raises(CubinError, match=r"not a 64-bit CUDA cubin \(EM_CUDA\)"): nv.program("vadd", image.pack(host, ptx))
  renamed = cub.replace(b".nv.info.vadd", b".nv.inxo.vadd")       # the kernel's attributes gone
  with pytest.raises(CubinError, match=r"kernel vadd: no \.nv\.info\.vadd section"): nv.program("vadd", image.pack(renamed, ptx))


@pytest.mark.hardware("nv")
def test_vector_add_on_the_real_gpu():
  """The same cubin path on nvidia.ko: the GPU runs the SASS (QMD V04 on Hopper, V03 on Ampere)."""
  dev = open_device("NV")
  n = 1 << 20
  a, b = rng.random(n, np.float32), rng.random(n, np.float32)
  prg = build(dev, VADD, "vadd")
  C = dev.alloc(4 * n)
  prg(upload(dev, a), upload(dev, b), C, global_size=(n // 256,), local_size=(256,), vals=(n,), wait=True)
  np.testing.assert_array_equal(read(C, np.float32), a + b)
