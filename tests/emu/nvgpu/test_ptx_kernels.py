"""Compute kernels compiled by NVRTC and run on the PTX engine, checked against numpy."""
import numpy as np
import pytest
from ptx_helpers import needs_nvrtc, run, MATMUL, VADD

pytestmark = needs_nvrtc
rng = np.random.default_rng(7)

@pytest.mark.parametrize("n", [1, 31, 1000])
def test_vector_add_with_a_partial_last_block(n):
  a, b = rng.random(n, np.float32), rng.random(n, np.float32)
  (_, _, c), st = run(VADD, "vadd", (n + 127) // 128, 128, a, b, np.zeros(n, np.float32), n)
  np.testing.assert_array_equal(c, a + b)
  assert st.blocks == (n + 127) // 128 and st.thread_instructions > 0


def test_3d_grid_and_block_indices():
  src = r'''
  extern "C" __global__ void idx(int *out) {
    int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int b = bx + gridDim.x * (by + gridDim.y * bz);
    int nt = blockDim.x * blockDim.y * blockDim.z;
    out[b * nt + t] = (bx << 24) | (by << 20) | (bz << 16) | (threadIdx.x << 8) | (threadIdx.y << 4) | threadIdx.z;
  }'''
  grid, block = (3, 2, 2), (4, 3, 5)
  (out,), _ = run(src, "idx", grid, block, np.zeros(3 * 2 * 2 * 60, np.int32))
  want = [(bx << 24) | (by << 20) | (bz << 16) | (tx << 8) | (ty << 4) | tz
          for bz in range(2) for by in range(2) for bx in range(3) for tz in range(5) for ty in range(3) for tx in range(4)]
  np.testing.assert_array_equal(out, want)


def test_2d_matmul_tiled_in_shared_memory():
  src = MATMUL
  n = 32
  A, B = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
  (_, _, C), _ = run(src, "mm", (n // 16, n // 16), (16, 16), A, B, np.zeros((n, n), np.float32), n)
  want = np.zeros((n, n), np.float32)                # the same fma sequence, in numpy: exactly the same rounding
  for j in range(n): want = (A[:, j:j + 1].astype(np.float64) * B[j].astype(np.float64) + want).astype(np.float32)
  np.testing.assert_array_equal(C, want)


def test_shared_memory_tree_reduction_with_syncthreads():
  src = r'''
  extern "C" __global__ void red(const int *a, int *out) {
    __shared__ int s[256];
    int t = threadIdx.x;
    s[t] = a[blockIdx.x * 256 + t];
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
    if (t == 0) out[blockIdx.x] = s[0];
  }'''
  a = rng.integers(-1000, 1000, 256 * 5).astype(np.int32)
  (_, out), st = run(src, "red", 5, 256, a, np.zeros(5, np.int32))
  np.testing.assert_array_equal(out, a.reshape(5, 256).sum(1))
  assert st.warps_per_block == 8


def test_dynamic_shared_memory():
  src = r'''
  extern "C" __global__ void rev(int *a) {
    extern __shared__ int s[];
    int t = threadIdx.x;
    s[t] = a[t];
    __syncthreads();
    a[t] = s[blockDim.x - 1 - t];
  }'''
  a = np.arange(100, dtype=np.int32)
  (out,), _ = run(src, "rev", 1, 100, a, shared_bytes=400)
  np.testing.assert_array_equal(out, a[::-1])


def test_warp_reduction_with_shfl_down_and_xor():
  src = r'''
  extern "C" __global__ void wr(const float *a, float *out, unsigned *lanes) {
    float v = a[blockIdx.x * blockDim.x + threadIdx.x], x = v;
    for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    for (int o = 1; o < 32; o <<= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, o));
    int lane = threadIdx.x & 31, w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (lane == 0) out[w] = v;
    lanes[blockIdx.x * blockDim.x + threadIdx.x] = __shfl_sync(0xffffffff, (unsigned)(lane * 3), 31 - lane)
                                                   + (__shfl_up_sync(0xffffffff, lane, 2) << 8);
    if (lane == 0) out[64 + w] = x;
  }'''
  a = rng.standard_normal(128, np.float32)
  (_, out, lanes), _ = run(src, "wr", 2, 64, a, np.zeros(128, np.float32), np.zeros(128, np.uint32))
  w = a.reshape(4, 32)
  tree = w.copy()                                    # the shuffle-down tree's order of additions
  for o in (16, 8, 4, 2, 1):
    shifted = np.concatenate([tree[:, o:], tree[:, 32 - o:]], 1)   # lanes past 31 read their own value
    tree = (tree + shifted).astype(np.float32)
  np.testing.assert_array_equal(out[:4], tree[:, 0])
  np.testing.assert_array_equal(out[64:68], w.max(1))
  lane = np.arange(32)
  want = (31 - lane) * 3 + (np.where(lane >= 2, lane - 2, lane) << 8)
  np.testing.assert_array_equal(lanes.reshape(4, 32), np.tile(want, (4, 1)))


def test_vote_ballot_any_all_under_divergence():
  src = r'''
  extern "C" __global__ void v(const int *a, unsigned *out) {
    int t = threadIdx.x, x = a[t];
    unsigned b = __ballot_sync(0xffffffff, x > 0);
    int any = __any_sync(0xffffffff, x > 5), all = __all_sync(0xffffffff, x > -100);
    unsigned half = 0;
    if (t & 1) half = __ballot_sync(0xaaaaaaaa, x > 0);     // only the odd lanes, converged among themselves
    out[t] = t == 0 ? b : t == 1 ? (unsigned)(any | all << 1) : half;
  }'''
  a = rng.integers(-10, 10, 32).astype(np.int32)
  (_, out), _ = run(src, "v", 1, 32, a, np.zeros(32, np.uint32))
  ballot = int(sum(1 << i for i in range(32) if a[i] > 0))
  assert out[0] == ballot
  assert out[1] == int((a > 5).any()) | int((a > -100).all()) << 1
  assert all(out[i] == (ballot & 0xaaaaaaaa) for i in range(3, 32, 2)) and all(out[i] == 0 for i in range(2, 32, 2))


def test_divergent_branches_and_loops_within_a_warp():
  src = r'''
  extern "C" __global__ void d(const int *a, int *out) {
    int t = threadIdx.x, x = a[t], r = 0;
    if (x & 1) { for (int i = 0; i < x; i++) r += i * x; }
    else if (x % 3 == 0) { r = x; while (r < 100) r = r * 2 + 7; }
    else r = x * x;
    out[t] = r + __shfl_sync(0xffffffff, x, 0);              // reconverged: every lane takes part
  }'''
  a = rng.integers(0, 40, 64).astype(np.int32)
  (_, out), _ = run(src, "d", 1, 64, a, np.zeros(64, np.int32))
  def ref(x):
    if x & 1: return sum(i * x for i in range(x))
    if x % 3 == 0:
      r = x
      while r < 100: r = r * 2 + 7
      return r
    return x * x
  np.testing.assert_array_equal(out, [ref(int(x)) + int(a[0 if i < 32 else 32]) for i, x in enumerate(a)])


def test_atomics_on_global_and_shared_memory():
  src = r'''
  extern "C" __global__ void at(const int *a, int *g, unsigned *u, float *f, unsigned long long *q) {
    __shared__ int s[2];
    int t = threadIdx.x, x = a[blockIdx.x * blockDim.x + t];
    if (t == 0) { s[0] = 0; s[1] = 0; }
    __syncthreads();
    atomicAdd(&s[0], x); atomicMax(&s[1], x);
    atomicAdd(&g[0], x); atomicMin(&g[1], x); atomicMax(&g[2], x);
    atomicAnd(&u[0], ~(1u << (t & 31))); atomicOr(&u[1], 1u << (x & 31)); atomicXor(&u[2], (unsigned)x);
    atomicInc(&u[3], 9u);
    atomicAdd(&f[0], 0.5f);
    atomicAdd(&q[0], (unsigned long long)x << 32);
    atomicCAS(&g[3], blockIdx.x * blockDim.x + t, blockIdx.x * blockDim.x + t + 1);   // a chain: ends at n
    __syncthreads();
    if (t == 0) { atomicAdd(&g[4], s[0]); atomicMax(&g[5], s[1]); atomicExch(&g[6], 77); }
  }'''
  n = 256
  a = rng.integers(-1000, 1000, n).astype(np.int32)
  g = np.array([0, 1 << 30, -(1 << 30), 0, 0, -(1 << 30), 0], np.int32)
  u = np.array([0xffffffff, 0, 0, 0], np.uint32)
  (_, g, u, f, q), _ = run(src, "at", 2, 128, a, g, u, np.zeros(1, np.float32), np.zeros(1, np.uint64))
  assert list(g[:3]) == [a.sum(), a.min(), a.max()]
  assert g[3] == n   # the model runs lanes in order and warps one after another: each CAS extends the chain
  assert g[4] == a.sum() and g[5] == a.max() and g[6] == 77
  assert u[0] == 0 and u[1] == np.bitwise_or.reduce(1 << (a.astype(np.int64) & 31)) and u[2] == np.bitwise_xor.reduce(a.view(np.uint32))
  assert u[3] == n % 10 and f[0] == n * 0.5
  assert q[0] == (int(a.astype(np.int64).sum()) << 32) % (1 << 64)


def test_integer_ops_64_bit_mul_hi_and_bits():
  src = r'''
  extern "C" __global__ void io(const unsigned long long *a, const long long *s, unsigned long long *o) {
    int t = threadIdx.x;
    unsigned long long x = a[2 * t], y = a[2 * t + 1];
    long long p = s[2 * t], q = s[2 * t + 1];
    unsigned xl = (unsigned)x, yl = (unsigned)y;
    unsigned long long *r = o + 16 * t;
    r[0] = __umul64hi(x, y); r[1] = (unsigned long long)__mul64hi(p, q); r[2] = x * y; r[3] = x / (y | 1) + x % (y | 1);
    r[4] = (unsigned long long)(p / (q | 1)) ^ (unsigned long long)(p % (q | 1));
    r[5] = __umulhi(xl, yl) | ((unsigned long long)(unsigned)__mulhi((int)xl, (int)yl) << 32);
    r[6] = (unsigned long long)xl * yl; r[7] = (unsigned long long)((long long)(int)xl * (int)yl);
    r[8] = __popcll(x) | (unsigned long long)__clzll(y) << 8 | (unsigned long long)__ffsll(x) << 16 | (unsigned long long)__popc(xl) << 24;
    r[9] = __brevll(x); r[10] = (x << (yl & 63)) ^ (x >> (yl & 63)) ^ (unsigned long long)(p >> (yl & 63));
    r[11] = (unsigned long long)(p < q) | (unsigned long long)(x < y) << 1 | (unsigned long long)(xl < yl) << 2
          | (unsigned long long)((int)xl < (int)yl) << 3;
    r[12] = (unsigned long long)max(p, q) + (unsigned long long)min(x, y) + (unsigned long long)llabs(p);
    r[13] = __funnelshift_l(xl, yl, t) | (unsigned long long)__funnelshift_r(xl, yl, t) << 32;
    r[14] = __byte_perm(xl, yl, 0x5140 + t) | (unsigned long long)__brev(xl) << 32;
    r[15] = (unsigned long long)(x >> 60) * 0x9e3779b97f4a7c15ull + (unsigned long long)(-p);
  }'''
  n = 32
  a = rng.integers(0, 1 << 64, 2 * n, dtype=np.uint64)
  a[:4] = [0, 1, (1 << 64) - 1, (1 << 63)]
  s = rng.integers(-(1 << 63), 1 << 63, 2 * n, dtype=np.int64)
  s[:2] = [-(1 << 63), -1]
  (_, _, o), _ = run(src, "io", 1, n, a, s, np.zeros(16 * n, np.uint64))
  M = (1 << 64) - 1
  def tdiv(x, y): return -(abs(x) // abs(y)) if (x < 0) != (y < 0) else abs(x) // abs(y)
  def s32(v): v &= 0xffffffff; return v - (1 << 32) if v >> 31 else v
  def brev(v, n): return int(f"{v:0{n}b}"[::-1], 2)
  def funnel_l(lo, hi, sh): sh = sh & 31; return ((((hi << 32) | lo) << sh) >> 32) & 0xffffffff
  def funnel_r(lo, hi, sh): sh = sh & 31; return (((hi << 32) | lo) >> sh) & 0xffffffff
  def perm(x, y, c):
    v = (y << 32) | x
    return sum(((v >> (8 * ((c >> (4 * i)) & 7))) & 0xff) << (8 * i) for i in range(4))
  for t in range(n):
    x, y, p, q = int(a[2 * t]), int(a[2 * t + 1]), int(s[2 * t]), int(s[2 * t + 1])
    xl, yl = x & 0xffffffff, y & 0xffffffff
    qq = q | 1
    div = tdiv(p, qq) if not (p == -(1 << 63) and qq == -1) else p
    want = [(x * y) >> 64, ((p * q) >> 64) & M, (x * y) & M, (x // (y | 1) + x % (y | 1)) & M,
            ((div & M) ^ ((p - qq * tdiv(p, qq)) & M if qq != -1 else 0)),
            ((xl * yl) >> 32) | ((((s32(xl) * s32(yl)) >> 32) & 0xffffffff) << 32),
            xl * yl, (s32(xl) * s32(yl)) & M,
            bin(x).count("1") | (64 - y.bit_length()) << 8 | ((x & -x).bit_length()) << 16 | bin(xl).count("1") << 24,
            brev(x, 64), ((x << (yl & 63)) & M) ^ (x >> (yl & 63)) ^ ((p >> (yl & 63)) & M),
            int(p < q) | int(x < y) << 1 | int(xl < yl) << 2 | int(s32(xl) < s32(yl)) << 3,
            (max(p, q) + min(x, y) + abs(p)) & M,
            funnel_l(xl, yl, t) | funnel_r(xl, yl, t) << 32,
            perm(xl, yl, 0x5140 + t) | brev(xl, 32) << 32,
            ((x >> 60) * 0x9e3779b97f4a7c15 + (-p)) & M]
    assert [int(v) for v in o[16 * t:16 * t + 16]] == want, t


def test_local_arrays_generic_pointers_and_struct_parameters():
  src = r'''
  struct P { int scale; float bias; long long off; };
  extern "C" __global__ void loc(const int *idx, float *out, struct P p) {
    int t = threadIdx.x;
    int v[16];                                    // indexed by data: lives in local memory
    for (int i = 0; i < 16; i++) v[i] = (i * t) ^ p.scale;
    __shared__ float s[64];
    float *g = (t & 1) ? &s[t] : &out[t + 64];    // a generic pointer to shared or global memory
    *g = (float)v[idx[t] & 15] + p.bias;
    __syncthreads();
    out[t] = (t & 1) ? s[t] : out[t + 64] + (float)p.off;
  }'''
  idx = rng.integers(0, 100, 64).astype(np.int32)
  import struct
  param = struct.pack("<ifq", 5, 0.5, 1000)
  (_, out), _ = run(src, "loc", 1, 64, idx, np.zeros(128, np.float32), param)
  t = np.arange(64)
  want = (((idx & 15) * t) ^ 5).astype(np.float32) + np.float32(0.5)
  want = np.where(t & 1, want, want + np.float32(1000))
  np.testing.assert_array_equal(out[:64], want)


def test_syncthreads_count_and_or_reduce_over_the_block():
  src = r'''
  extern "C" __global__ void c(const int *a, int *o) {
    int t = threadIdx.x, x = a[blockIdx.x * blockDim.x + t];
    if (t == 77) return;                                  // an exited thread is not counted
    int n = __syncthreads_count(x > 0), all = __syncthreads_and(x > -5), any = __syncthreads_or(x > 8);
    o[blockIdx.x * blockDim.x + t] = n | all << 16 | any << 17;
  }'''
  a = rng.integers(-10, 10, 2 * 96).astype(np.int32)
  (_, o), _ = run(src, "c", 2, 96, a, np.zeros(2 * 96, np.int32))
  for b in range(2):
    x = np.delete(a[96 * b:96 * (b + 1)], 77)
    want = int((x > 0).sum()) | int((x > -5).all()) << 16 | int((x > 8).any()) << 17
    assert all(o[96 * b + t] == want for t in range(96) if t != 77) and o[96 * b + 77] == 0


def test_vector_loads_narrow_types_and_grid_stride_loops():
  src = r'''
  extern "C" __global__ void v(const float4 *__restrict__ a, const signed char *__restrict__ c,
                               const unsigned short *__restrict__ s, float4 *o, double *d, long long n) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
      float4 x = __ldg(&a[i]);
      float k = (float)c[i] + (float)s[i];
      o[i] = make_float4(x.w * k, x.z + k, x.y - k, x.x);
      d[i] = (double)__half2float(__double2half((double)x.x * 3.0)) + (double)i;
    }
  }'''
  n = 300
  a = rng.standard_normal((n, 4)).astype(np.float32)
  c = rng.integers(-128, 128, n).astype(np.int8)
  s = rng.integers(0, 1 << 16, n).astype(np.uint16)
  (_, _, _, o, d), _ = run(src, "v", 2, 64, a, c, s, np.zeros((n, 4), np.float32), np.zeros(n), n)
  k = c.astype(np.float32) + s.astype(np.float32)
  np.testing.assert_array_equal(o, np.stack([a[:, 3] * k, a[:, 2] + k, a[:, 1] - k, a[:, 0]], 1))
  np.testing.assert_array_equal(d, (a[:, 0].astype(np.float64) * 3.0).astype(np.float16).astype(np.float64) + np.arange(n))


def test_128_bit_integers_through_carry_chains():
  src = r'''
  extern "C" __global__ void w(const unsigned __int128 *a, unsigned __int128 *o) {
    int t = threadIdx.x;
    unsigned __int128 x = a[2 * t], y = a[2 * t + 1];
    o[4 * t] = x + y; o[4 * t + 1] = x * y; o[4 * t + 2] = x - y; o[4 * t + 3] = (x >> 7) * 1000003u + (y << 3);
  }'''
  n = 32
  raw = rng.integers(0, 1 << 64, 4 * n, dtype=np.uint64)
  raw[:4] = [(1 << 64) - 1, (1 << 64) - 1, 1, 0]            # carries across the halves
  (_, o), _ = run(src, "w", 1, n, raw, np.zeros(8 * n, np.uint64), options=("--device-int128",))
  M = (1 << 128) - 1
  def u128(v, i): return int(v[2 * i]) | int(v[2 * i + 1]) << 64
  for t in range(n):
    x, y = u128(raw, 2 * t), u128(raw, 2 * t + 1)
    want = [(x + y) & M, (x * y) & M, (x - y) & M, ((x >> 7) * 1000003 + (y << 3)) & M]
    assert [u128(o, 4 * t + k) for k in range(4)] == want, t


def test_module_level_global_variables_start_initialised_and_persist_across_launches():
  src = r'''
  __device__ int table[5] = {3, -1, 4, 1, -5};
  __device__ unsigned int launches;
  extern "C" __global__ void lut(const int *i, int *out) {
    out[threadIdx.x] = table[i[threadIdx.x]] * 10 + launches;
    __syncthreads();
    if (threadIdx.x == 0) launches += 1;
  }'''
  from ptx_helpers import program
  from emu.memory import Memory
  from emu.nvgpu.ptx import launch
  p, mem, idx = program(src, "lut"), Memory(), rng.integers(0, 5, 32).astype(np.int32)
  pi, po = mem.alloc(128), mem.alloc(128)
  mem.write(pi, idx.tobytes())
  for n in range(3):
    launch(p, mem, 1, 32, p.pack(pi, po))
    np.testing.assert_array_equal(np.frombuffer(mem.read(po, 128), np.int32), np.array([3, -1, 4, 1, -5])[idx] * 10 + n)


def test_sinf_of_huge_arguments_reads_cudas_reduction_table():
  """CUDA's sinf / cosf reduce |x| > 105615 with the bits of 2/pi from a table in a module-level .global variable."""
  src = r'''
  extern "C" __global__ void s(const float *x, float *y) { y[threadIdx.x] = sinf(x[threadIdx.x]) + cosf(x[threadIdx.x]); }'''
  x = np.array([1e5, 3e7, 1e20, -7.5e37, 0.5, 2e9, 1e38, 12345.678] * 4, np.float32)
  (_, y), _ = run(src, "s", 1, 32, x, np.zeros(32, np.float32))
  np.testing.assert_allclose(y, np.sin(x.astype(np.float64)) + np.cos(x.astype(np.float64)), atol=1e-6)
