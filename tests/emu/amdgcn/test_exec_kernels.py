"""OpenCL C kernels compiled by clang-22 for gfx1100 (and, where parametrized, RDNA4's gfx1201: its split wait counters,
s_barrier_signal/s_barrier_wait, 96-bit global encodings, workgroup ids in ttmp9/ttmp7), dispatched through their kernel
descriptors and checked against numpy (wave32 and wave64)."""
import struct
from fractions import Fraction
import numpy as np
import pytest
from exec_helpers import compile_cl, CodeObject, buffer, read, VADD, MATMUL
from emu.amdgcn import Memory, KernelDescriptor

WG = "__attribute__((reqd_work_group_size(64, 1, 1)))"
GID = "(__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())"
WAVE64 = ("-mwavefrontsize64",)
# -nogpulib: no device library, so barriers, atomics and math come from clang builtins
BARRIER = ('__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); '
           '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");')

REDUCE = f"""__attribute__((reqd_work_group_size(256, 1, 1)))
kernel void reduce(global const float *x, global float *out) {{
  local float tmp[256];
  int l = __builtin_amdgcn_workitem_id_x(), g = __builtin_amdgcn_workgroup_id_x();
  tmp[l] = x[g * 256 + l];
  {BARRIER}
  for (int s = 128; s > 0; s >>= 1) {{ if (l < s) tmp[l] += tmp[l + s]; {BARRIER} }}
  if (l == 0) out[g] = tmp[0];
}}"""

ATOMICS = f"""{WG} kernel void hist(global const uint *x, global uint *bins, global int *mn, int n) {{
  int i = {GID};
  if (i < n) {{ __atomic_fetch_add(&bins[x[i] & 15], 1u, __ATOMIC_RELAXED); __atomic_fetch_min(mn, (int)x[i] - 1000, __ATOMIC_RELAXED); }}
}}"""

HALF = f"""#pragma OPENCL EXTENSION cl_khr_fp16 : enable
{WG} kernel void hmath(global const half *a, global const half *b, global half *c, global float *d) {{
  int i = {GID};
  half x = a[i], y = b[i];
  c[i] = x * y + (half)0.5f;
  d[i] = (float)(x - y) * 2.0f;
}}"""

LOOP = f"""{WG} kernel void collatz(global const uint *x, global uint *steps) {{
  int i = {GID};
  uint v = x[i], n = 0;
  while (v != 1 && n < 1000) {{ if (v & 1) v = 3 * v + 1; else v >>= 1; n++; }}
  steps[i] = n;
}}"""

DIVIDE = f"""{WG} kernel void fdiv(global const float *a, global const float *b, global float *c, global float *s) {{
  int i = {GID}; c[i] = a[i] / b[i]; s[i] = __builtin_sqrtf(a[i]) + __builtin_expf(b[i]) * __builtin_sinf(a[i]);
}}"""

PRIVATE = f"""{WG} kernel void priv(global const int *idx, global int *out) {{
  int i = {GID}; volatile int t[16];
  for (int k = 0; k < 16; k++) t[k] = k * i;
  out[i] = t[idx[i] & 15];
}}"""


TARGETS = ("gfx1100", "gfx1201")


def load(src: str, wave64: bool = False, flags: tuple[str, ...] = (), target: str = "gfx1100"):
  mem = Memory()
  return mem, CodeObject(mem, compile_cl(src, (WAVE64 if wave64 else ()) + flags, target), target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("wave64", [False, True])
def test_vadd(wave64, target):
  mem, co = load(VADD, wave64, target=target)
  n = 4000
  a, b = np.random.default_rng(0).standard_normal((2, n)).astype(np.float32)
  pa, pb, pc = buffer(mem, a), buffer(mem, b), mem.alloc(4 * n)
  kd = KernelDescriptor.parse(mem.read(co.base + co.symbols["vadd.kd"], 64))
  assert kd.wave64 == wave64
  st = co.kernel("vadd", ((n + 63) // 64, 1, 1), (64, 1, 1), struct.pack("<QQQi", pa, pb, pc, n))
  np.testing.assert_array_equal(read(mem, pc, np.float32, n), a + b)
  assert st.waves == ((n + 63) // 64) * (1 if wave64 else 2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("wave64", [False, True])
def test_reduction_with_lds_and_barriers(wave64, target):
  mem, co = load(REDUCE, wave64, target=target)
  x = np.random.default_rng(1).standard_normal(256 * 8).astype(np.float32)
  px, po = buffer(mem, x), mem.alloc(4 * 8)
  co.kernel("reduce", (8, 1, 1), (256, 1, 1), struct.pack("<QQ", px, po))
  want = x.reshape(8, 256).copy()
  s = 128
  while s:   # the kernel's exact summation order, in f32
    want[:, :s] = want[:, :s] + want[:, s:2 * s]
    s >>= 1
  np.testing.assert_array_equal(read(mem, po, np.float32, 8), want[:, 0])


@pytest.mark.parametrize("target", TARGETS)
def test_atomics(target):
  mem, co = load(ATOMICS, target=target)
  n = 3000
  x = np.random.default_rng(2).integers(0, 5000, n).astype(np.uint32)
  px, pb, pm = buffer(mem, x), mem.alloc(64), buffer(mem, np.array([1 << 30], np.int32))
  co.kernel("hist", ((n + 63) // 64, 1, 1), (64, 1, 1), struct.pack("<QQQi", px, pb, pm, n))
  np.testing.assert_array_equal(read(mem, pb, np.uint32, 16), np.bincount(x & 15, minlength=16))
  assert read(mem, pm, np.int32, 1)[0] == int(x.min()) - 1000


@pytest.mark.parametrize("target", TARGETS)
def test_f16_math(target):
  mem, co = load(HALF, target=target)
  n = 256
  rng = np.random.default_rng(3)
  a, b = rng.standard_normal(n).astype(np.float16), rng.standard_normal(n).astype(np.float16)
  pa, pb, pc, pd = buffer(mem, a), buffer(mem, b), mem.alloc(2 * n), mem.alloc(4 * n)
  co.kernel("hmath", (n // 64, 1, 1), (64, 1, 1), struct.pack("<QQQQ", pa, pb, pc, pd))
  c = read(mem, pc, np.float16, n)
  # x * y + 0.5 may be fused (v_fma_f16) or rounded twice: accept exactly one of the two
  fused = (a.astype(np.float64) * b + 0.5).astype(np.float16)
  assert np.array_equal(c, fused) or np.array_equal(c, (a * b + np.float16(0.5)).astype(np.float16))
  np.testing.assert_array_equal(read(mem, pd, np.float32, n), (a - b).astype(np.float32) * 2)


@pytest.mark.parametrize("target", TARGETS)
def test_loop_with_branches(target):
  mem, co = load(LOOP, target=target)
  x = np.arange(1, 129, dtype=np.uint32)
  px, ps = buffer(mem, x), mem.alloc(4 * 128)
  co.kernel("collatz", (2, 1, 1), (64, 1, 1), struct.pack("<QQ", px, ps))

  def steps(v):
    n = 0
    while v != 1 and n < 1000: v, n = (3 * v + 1 if v & 1 else v >> 1), n + 1
    return n
  assert list(read(mem, ps, np.uint32, 128)) == [steps(int(v)) for v in x]


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_2d_grid(target):
  mem, co = load(MATMUL, target=target)
  n = 32
  rng = np.random.default_rng(4)
  a, b = rng.standard_normal((2, n, n)).astype(np.float32)
  pa, pb, pc = buffer(mem, a), buffer(mem, b), mem.alloc(4 * n * n)
  co.kernel("matmul", (n // 16, n // 16, 1), (16, 16, 1), struct.pack("<QQQi", pa, pb, pc, n))
  want = np.zeros((n, n), np.float32)
  for k in range(n): want = (a[:, k:k + 1].astype(np.float64) * b[k:k + 1, :] + want).astype(np.float32)   # fma per step
  np.testing.assert_array_equal(read(mem, pc, np.float32, n * n).reshape(n, n), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ftz", [False, True])
def test_division_and_transcendentals(ftz, target):
  # correctly rounded division: the v_div_scale / v_rcp / v_fma / v_div_fmas / v_div_fixup sequence; with
  # -cl-denorms-are-zero clang switches f32 denormals on around it (s_denorm_mode)
  flags = ("-cl-fp32-correctly-rounded-divide-sqrt",) + (("-cl-denorms-are-zero",) if ftz else ())
  mem, co = load(DIVIDE, flags=flags, target=target)
  rng = np.random.default_rng(5)
  a = np.abs(rng.standard_normal(64)).astype(np.float32) * 100
  b = rng.standard_normal(64).astype(np.float32)
  a[:4], b[:4] = [1.0, 0.0, 1e-30, 3e38], [0.0, 0.0, 3e38, 1e-30]
  pa, pb, pc, ps = buffer(mem, a), buffer(mem, b), mem.alloc(256), mem.alloc(256)
  co.kernel("fdiv", (1, 1, 1), (64, 1, 1), struct.pack("<QQQQ", pa, pb, pc, ps))
  with np.errstate(all="ignore"): want = a / b
  got = read(mem, pc, np.float32, 64)
  np.testing.assert_array_equal(got[4:], want[4:])
  assert np.isposinf(got[0]) and np.isnan(got[1]) and got[2] == 0 and np.isposinf(got[3])
  s = read(mem, ps, np.float32, 64)
  np.testing.assert_allclose(s[4:], np.sqrt(a[4:]) + np.exp(b[4:]) * np.sin(a[4:]), rtol=1e-5, atol=1e-4)


DIVIDE64 = f"""#pragma OPENCL EXTENSION cl_khr_fp64 : enable
{WG} kernel void ddiv(global const double *a, global const double *b, global double *c) {{ int i = {GID}; c[i] = a[i] / b[i]; }}"""


@pytest.mark.parametrize("target", TARGETS)
def test_division_of_tiny_numerators(target):
  """exponent(numerator) <= 23 (f32) / 53 (f64): V_DIV_SCALE scales the numerator alone and sets VCC, V_DIV_FMAS
  scales the quotient back (facts 32-33); scaling the denominator as well would give q * 2^-64 (0 here)."""
  for src, kern, dt in ((DIVIDE, "fdiv", np.float32), (DIVIDE64, "ddiv", np.float64)):
    mem, co = load(src, flags=("-cl-fp32-correctly-rounded-divide-sqrt",), target=target)
    a = np.full(64, 3.0, dt)
    a[:6] = [1e-32, 1e-36, 2.0 ** -100, 1e-300 if dt == np.float64 else 1e-37, 5e-324 if dt == np.float64 else 1.5e-38, -1e-33]
    b = np.full(64, 3.0, dt)
    b[5] = 7.0
    args = [buffer(mem, a), buffer(mem, b), mem.alloc(a.nbytes)] + ([mem.alloc(256)] if kern == "fdiv" else [])
    co.kernel(kern, (1, 1, 1), (64, 1, 1), struct.pack(f"<{len(args)}Q", *args))
    np.testing.assert_array_equal(read(mem, args[2], dt, 64), a / b)


@pytest.mark.parametrize("target", TARGETS)
def test_private_memory_array(target):
  mem, co = load(PRIVATE, target=target)
  idx = np.arange(64, dtype=np.int32) * 7
  pi, po = buffer(mem, idx), mem.alloc(256)
  co.kernel("priv", (1, 1, 1), (64, 1, 1), struct.pack("<QQ", pi, po))
  np.testing.assert_array_equal(read(mem, po, np.int32, 64), (idx & 15) * np.arange(64))


QUOTIENTS = f"""#pragma OPENCL EXTENSION cl_khr_fp64 : enable
{WG} kernel void quot(global const float *a, global const float *b, global float *c, global const double *x,
                      global const double *y, global double *z) {{ int i = {GID}; c[i] = a[i] / b[i]; z[i] = x[i] / y[i]; }}"""


def _edge_floats(rng, n: int, dtype, exps) -> np.ndarray:
  """Floats of either sign with exponent fields from `exps` (zero, denormal, tiny, huge, and near the thresholds
  V_DIV_SCALE tests) and random mantissas (a fifth of them zero: exact powers of two)."""
  bits, mbits = (32, 23) if dtype == np.float32 else (64, 52)
  ut = np.uint32 if bits == 32 else np.uint64
  e = rng.choice(exps, n).astype(np.uint64)
  m = np.where(rng.random(n) < 0.2, 0, rng.integers(0, 2 ** mbits, n, dtype=np.uint64))
  sign = rng.integers(0, 2, n).astype(np.uint64)
  return (sign << np.uint64(bits - 1) | e << np.uint64(mbits) | m.astype(np.uint64)).astype(ut).view(dtype)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ftz", [False, True])
def test_division_is_correctly_rounded(ftz, target):
  """LLVM's division sequence (v_div_scale x2, v_rcp, fma refinement, v_div_fmas, v_div_fixup) gives the correctly rounded
  quotient of every f32 and f64 pair, as it does on hardware: bit for bit numpy's, denormal results included (with
  -cl-denorms-are-zero, f32 inputs and results flushed; the sequence then runs partly with f32 denormals flushed)."""
  flags = ("-cl-fp32-correctly-rounded-divide-sqrt",) + (("-cl-denorms-are-zero",) if ftz else ())
  mem, co = load(QUOTIENTS, flags=flags, target=target)
  rng, n = np.random.default_rng(8), 8192
  e32 = np.r_[0:3, 20:27, 60:68, 100:106, 122:133, 150:158, 190:198, 250:256]
  e64 = np.r_[0:3, 50:56, 100:106, 960:1090, 1960:1970, 2040:2048]
  a, b = _edge_floats(rng, n, np.float32, e32), _edge_floats(rng, n, np.float32, e32)
  x, y = _edge_floats(rng, n, np.float64, e64), _edge_floats(rng, n, np.float64, e64)
  pa, pb, px, py = buffer(mem, a), buffer(mem, b), buffer(mem, x), buffer(mem, y)
  pc, pz = mem.alloc(4 * n), mem.alloc(8 * n)
  co.kernel("quot", (n // 64, 1, 1), (64, 1, 1), struct.pack("<6Q", pa, pb, pc, px, py, pz))
  flush = (lambda v: np.where(np.abs(v) < np.float32(2.0 ** -126), np.copysign(np.float32(0), v), v)) if ftz else (lambda v: v)
  with np.errstate(all="ignore"): want32, want64 = flush(flush(a) / flush(b)), x / y
  got32, got64 = read(mem, pc, np.float32, n), read(mem, pz, np.float64, n)
  for (p, q), got, want, ut in (((a, b), got32, want32, np.uint32), ((x, y), got64, want64, np.uint64)):
    bad = [i for i in np.nonzero(got.view(ut) != want.view(ut))[0] if not (np.isnan(got[i]) and np.isnan(want[i]))]
    assert not bad, [f"{p[i]!r} / {q[i]!r}: {got[i]!r}, want {want[i]!r}" for i in bad[:5]]


INTMATH = f"""#pragma OPENCL EXTENSION cl_khr_fp64 : enable
{WG} kernel void intmath(global const int *a, global const long *b, global const double *c, global int *oi,
                         global long *ol, global double *od, global float *of) {{
  int i = {GID};
  oi[i] = a[i] / (a[i + 64] | 1) + a[i] % 7 + (int)((uint)a[i] / ((uint)a[i + 64] | 1u));
  ol[i] = b[i] / (b[i + 64] | 1) + b[i] * b[i + 64] + (b[i] >> 3) + (long)c[i];
  od[i] = c[i] / c[i + 64] + __builtin_sqrt(__builtin_fabs(c[i])) + (double)a[i] + __builtin_fma(c[i], c[i + 64], 1.0)
          + __builtin_floor(c[i]) + (double)b[i];
  of[i] = (float)c[i] + (float)b[i] + __builtin_truncf((float)c[i + 64]);
}}"""


def _cdiv(p: int, q: int) -> int:
  """C integer division (truncates toward zero)."""
  r = abs(p) // abs(q)
  return r if (p < 0) == (q < 0) else -r


@pytest.mark.parametrize("target", TARGETS)
def test_integer_division_int64_and_f64_math(target):
  mem, co = load(INTMATH, target=target)
  rng = np.random.default_rng(6)
  a = rng.integers(-2 ** 31, 2 ** 31, 128, dtype=np.int64).astype(np.int32)
  b = rng.integers(-2 ** 62, 2 ** 62, 128, dtype=np.int64)
  c = rng.standard_normal(128) * 1e3
  pa, pb, pc = buffer(mem, a), buffer(mem, b), buffer(mem, c)
  oi, ol, od, of = mem.alloc(256), mem.alloc(512), mem.alloc(512), mem.alloc(256)
  co.kernel("intmath", (1, 1, 1), (64, 1, 1), struct.pack("<7Q", pa, pb, pc, oi, ol, od, of))
  ai, bi = [int(v) for v in a], [int(v) for v in b]
  want_i = [(_cdiv(ai[i], ai[64 + i] | 1) + (ai[i] - _cdiv(ai[i], 7) * 7) + (ai[i] & 0xFFFFFFFF) // ((ai[64 + i] & 0xFFFFFFFF) | 1))
            for i in range(64)]
  assert list(read(mem, oi, np.int32, 64)) == [(v + 2 ** 31) % 2 ** 32 - 2 ** 31 for v in want_i]
  want_l = [_cdiv(bi[i], bi[64 + i] | 1) + bi[i] * bi[64 + i] + (bi[i] >> 3) + int(c[i]) for i in range(64)]
  assert list(read(mem, ol, np.int64, 64)) == [(v + 2 ** 63) % 2 ** 64 - 2 ** 63 for v in want_l]
  cx, cy = c[:64], c[64:]
  fused = np.array([float(Fraction(p) * Fraction(q) + 1) for p, q in zip(cx, cy)])   # fma: the exact value, rounded once
  want_d = ((((cx / cy + np.sqrt(np.abs(cx))) + a[:64]) + fused) + np.floor(cx)) + b[:64].astype(np.float64)
  np.testing.assert_array_equal(read(mem, od, np.float64, 64), want_d)
  np.testing.assert_array_equal(read(mem, of, np.float32, 64),
                                (cx.astype(np.float32) + b[:64].astype(np.float32)) + np.trunc(cy.astype(np.float32)))
