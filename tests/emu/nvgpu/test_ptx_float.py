"""Floating-point results of the PTX engine, bit for bit: correctly rounded ops against numpy (round to nearest)
and against exact rational arithmetic rounded in each IEEE mode (round_to, below), for f32, f64, f16 and bf16."""
from fractions import Fraction
import numpy as np
from ptx_helpers import needs_nvrtc, run

pytestmark = needs_nvrtc
rng = np.random.default_rng(11)
FMT = {"f16": (np.float16, np.uint16, 0), "bf16": (np.float32, np.uint32, 16), "f32": (np.float32, np.uint32, 0),
       "f64": (np.float64, np.uint64, 0)}


def value(bits: int, fmt: str) -> Fraction:
  ft, ut, shift = FMT[fmt]
  return Fraction(float(np.array(bits << shift, ut).view(ft)))


def round_to(x: Fraction, fmt: str, mode: str) -> int:
  """The encoding of exact nonzero x rounded to fmt in mode rn/rz/rm/rp: the best of the neighbours of a nearby
  value, chosen by comparing exact rationals (independent of the engine's rounding code)."""
  ft, ut, shift = FMT[fmt]
  sign, a = (1, -x) if x < 0 else (0, x)
  m0 = int(np.array(float(a), ft).view(ut)) >> shift
  cands = [m for m in range(max(0, m0 - 2), m0 + 3)]
  vals = {m: value(m, fmt) for m in cands}
  down = sign == 0 and mode == "rm" or sign == 1 and mode == "rp" or mode == "rz"
  if mode == "rn": best = min(cands, key=lambda m: (abs(vals[m] - a), m & 1))
  elif down: best = max((m for m in cands if vals[m] <= a), key=lambda m: vals[m])
  else: best = min((m for m in cands if vals[m] >= a), key=lambda m: vals[m])
  width = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[fmt]
  return best | sign << (width - 1)


def rand32(n: int, lo: int = -20, hi: int = 20) -> np.ndarray:
  """Finite nonzero f32 of varied magnitude (a few subnormals too)."""
  x = (rng.standard_normal(n) * 2.0 ** rng.integers(lo, hi, n)).astype(np.float32)
  x[:4] = np.array([1e-40, -3e-39, 1.5, -2.25], np.float32)
  return x


F32_SRC = r'''
extern "C" __global__ void f(const float *a, const float *b, const float *c, unsigned *o, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], y = b[i], z = c[i];
  unsigned *r = o + 16 * i;
  r[0] = __float_as_uint(x + y); r[1] = __float_as_uint(x * y); r[2] = __float_as_uint(x / y);
  r[3] = __float_as_uint(fmaf(x, y, z)); r[4] = __float_as_uint(sqrtf(fabsf(x))); r[5] = __float_as_uint(x - y);
  r[6] = __float_as_uint(__fadd_rz(x, y)); r[7] = __float_as_uint(__fmul_rd(x, y)); r[8] = __float_as_uint(__fdiv_ru(x, y));
  r[9] = __float_as_uint(__fmaf_rz(x, y, z)); r[10] = __float_as_uint(__fadd_ru(x, y)); r[11] = __float_as_uint(__frcp_rd(y));
  r[12] = __float_as_uint(__fsqrt_rz(fabsf(x))); r[13] = __float_as_uint(__fmul_ru(x, y));
  r[14] = __float_as_uint(__fdiv_rz(x, y)); r[15] = __float_as_uint(__fsub_rd(x, y));
}'''


def test_f32_arithmetic_in_every_rounding_mode_is_exact():
  n = 200
  a, b, c = rand32(n), rand32(n), rand32(n)
  (_, _, _, o), _ = run(F32_SRC, "f", (n + 63) // 64, 64, a, b, c, np.zeros(16 * n, np.uint32), n)
  o = o.reshape(n, 16)
  np.testing.assert_array_equal(o[:, 0], (a + b).view(np.uint32))
  np.testing.assert_array_equal(o[:, 1], (a * b).view(np.uint32))
  np.testing.assert_array_equal(o[:, 2], (a / b).view(np.uint32))
  np.testing.assert_array_equal(o[:, 4], np.sqrt(np.abs(a)).view(np.uint32))
  np.testing.assert_array_equal(o[:, 5], (a - b).view(np.uint32))
  for i in range(n):
    x, y, z = (Fraction(float(v[i])) for v in (a, b, c))
    want = {3: (x * y + z, "rn"), 6: (x + y, "rz"), 7: (x * y, "rm"), 8: (x / y, "rp"), 9: (x * y + z, "rz"),
            10: (x + y, "rp"), 11: (1 / y, "rm"), 13: (x * y, "rp"), 14: (x / y, "rz"), 15: (x - y, "rm")}
    for k, (v, mode) in want.items():
      if v != 0 and abs(v) < Fraction(2) ** 127: assert o[i, k] == round_to(v, "f32", mode), (i, k)
    s = Fraction(float(o[i, 12].view(np.float32)))        # sqrt.rz: s*s <= |x| < next(s)^2
    assert s * s <= abs(x) < value(int(o[i, 12]) + 1, "f32") ** 2


def test_f64_arithmetic_and_conversions():
  src = r'''
  extern "C" __global__ void d(const double *a, const double *b, unsigned long long *o, int n) {
    int i = threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i];
    unsigned long long *r = o + 12 * i;
    r[0] = __double_as_longlong(x + y); r[1] = __double_as_longlong(x * y); r[2] = __double_as_longlong(x / y);
    r[3] = __double_as_longlong(sqrt(fabs(x))); r[4] = __double_as_longlong(__dadd_rz(x, y));
    r[5] = __double_as_longlong(__dmul_ru(x, y)); r[6] = __double_as_longlong(__ddiv_rd(x, y));
    r[7] = __double_as_longlong(fma(x, y, 1.0));
    r[8] = __float_as_uint(__double2float_rd(x)) | (unsigned long long)__float_as_uint(__double2float_rz(y)) << 32;
    r[9] = (unsigned long long)__double2ll_rn(x * 1e6) ; r[10] = (unsigned long long)__double2uint_rz(fabs(y) * 1e3);
    r[11] = __double_as_longlong(__ll2double_rz((long long)(x * 1e17)));
  }'''
  n = 64
  a = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)
  b = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)
  (_, _, o), _ = run(src, "d", 1, n, a, b, np.zeros(12 * n, np.uint64), n)
  o = o.reshape(n, 12)
  np.testing.assert_array_equal(o[:, 0], (a + b).view(np.uint64))
  np.testing.assert_array_equal(o[:, 1], (a * b).view(np.uint64))
  np.testing.assert_array_equal(o[:, 2], (a / b).view(np.uint64))
  np.testing.assert_array_equal(o[:, 3], np.sqrt(np.abs(a)).view(np.uint64))
  for i in range(n):
    x, y = Fraction(float(a[i])), Fraction(float(b[i]))
    assert o[i, 4] == round_to(x + y, "f64", "rz") and o[i, 5] == round_to(x * y, "f64", "rp")
    assert o[i, 6] == round_to(x / y, "f64", "rm") and o[i, 7] == round_to(x * y + 1, "f64", "rn")
    assert o[i, 8] & 0xffffffff == round_to(x, "f32", "rm") and o[i, 8] >> 32 == round_to(y, "f32", "rz")
    v = float(np.float64(a[i]) * 1e6)
    assert np.int64(o[i, 9].view(np.int64)) == int(np.rint(v))
    assert o[i, 10] == min(int(abs(float(b[i])) * 1e3), 0xffffffff)
    big = max(min(int(float(a[i]) * 1e17), 2**63 - 1), -2**63)   # cvt.rzi.s64.f64 saturates
    assert o[i, 11] == (round_to(Fraction(big), "f64", "rz") if big else 0)


def test_f16_and_bf16_arithmetic_and_conversions():
  src = r'''
  extern "C" __global__ void h(const float *a, const float *b, const float *c, unsigned short *o, int n) {
    int i = threadIdx.x;
    if (i >= n) return;
    __half x = __float2half_rn(a[i]), y = __float2half_rn(b[i]), z = __float2half_rn(c[i]);
    __nv_bfloat16 p = __float2bfloat16_rn(a[i]), q = __float2bfloat16_rn(b[i]), s = __float2bfloat16_rn(c[i]);
    unsigned short *r = o + 12 * i;
    r[0] = __half_as_ushort(x); r[1] = __half_as_ushort(__hadd(x, y)); r[2] = __half_as_ushort(__hmul(x, y));
    r[3] = __half_as_ushort(__hfma(x, y, z)); r[4] = __half_as_ushort(__float2half_rz(a[i]));
    r[5] = __half_as_ushort(__hsub(x, y));
    r[6] = __bfloat16_as_ushort(p); r[7] = __bfloat16_as_ushort(__float2bfloat16_rz(a[i]));
    r[8] = __bfloat16_as_ushort(__hfma(p, q, s)); r[9] = __bfloat16_as_ushort(__hmul(p, q));
    r[10] = __bfloat16_as_ushort(__hadd(p, q));
    __half2 v = __hmul2(__halves2half2(x, y), __halves2half2(z, x));
    r[11] = __half_as_ushort(__low2half(v)) ^ __half_as_ushort(__high2half(v));
  }'''
  n = 64
  a, b, c = (rng.standard_normal(n).astype(np.float32) * np.float32(4) for _ in range(3))
  for arch in ("sm_80", "sm_90"):          # sm_90 has native bf16 add/mul; sm_80 emulates them with fma.rn.bf16
    (_, _, _, o), _ = run(src, "h", 1, n, a, b, c, np.zeros(12 * n, np.uint16), n, arch=arch)
    o = o.reshape(n, 12)
    x, y, z = a.astype(np.float16), b.astype(np.float16), c.astype(np.float16)
    np.testing.assert_array_equal(o[:, 0], x.view(np.uint16))
    np.testing.assert_array_equal(o[:, 1], (x + y).view(np.uint16))
    np.testing.assert_array_equal(o[:, 2], (x * y).view(np.uint16))
    np.testing.assert_array_equal(o[:, 5], (x - y).view(np.uint16))
    np.testing.assert_array_equal(o[:, 11], ((x * z).view(np.uint16) ^ (y * x).view(np.uint16)))
    for i in range(n):
      fa, fb, fc = (Fraction(float(v[i])) for v in (a, b, c))
      hx, hy, hz = (Fraction(float(v[i])) for v in (x, y, z))
      if hx * hy + hz: assert o[i, 3] == round_to(hx * hy + hz, "f16", "rn"), (arch, i)
      assert o[i, 4] == round_to(fa, "f16", "rz")
      bp, bq, bs = (round_to(f, "bf16", "rn") for f in (fa, fb, fc))
      assert o[i, 6] == bp and o[i, 7] == round_to(fa, "bf16", "rz")
      p, q, s = (value(v & 0x7fff, "bf16") * (-1 if v >> 15 else 1) for v in (bp, bq, bs))
      if p * q + s: assert o[i, 8] == round_to(p * q + s, "bf16", "rn"), (arch, i)
      assert o[i, 9] == round_to(p * q, "bf16", "rn")
      if p + q: assert o[i, 10] == round_to(p + q, "bf16", "rn"), (arch, i)


def test_min_max_nan_rules_and_ftz():
  src = r'''
  extern "C" __global__ void m(const float *a, const float *b, unsigned *o) {
    int i = threadIdx.x;
    float x = a[i], y = b[i];
    o[4 * i] = __float_as_uint(fminf(x, y)); o[4 * i + 1] = __float_as_uint(fmaxf(x, y));
    o[4 * i + 2] = __float_as_uint(x * y); o[4 * i + 3] = __float_as_uint(__fsqrt_rn(x));
  }'''
  nan = np.float32("nan")
  a = np.array([nan, 1.0, nan, -0.0, 0.0, 1e-39, 3.0, -2e-39], np.float32)
  b = np.array([2.0, nan, nan, 0.0, -0.0, 1.0, 1e-39, 1.0], np.float32)
  (_, _, o), _ = run(src, "m", 1, 8, a, b, np.zeros(32, np.uint32))
  o = o.reshape(8, 4)
  assert list(o[:3, 0]) == [np.float32(2).view(np.uint32), np.float32(1).view(np.uint32), 0x7fffffff]
  assert o[3, 0] == o[4, 0] == 0x80000000 and o[3, 1] == o[4, 1] == 0      # -0 < +0
  np.testing.assert_array_equal(o[5:, 2], (a[5:] * b[5:]).view(np.uint32))  # subnormals kept by default
  (_, _, o), _ = run(src, "m", 1, 8, a, b, np.zeros(32, np.uint32), options=("--ftz=true",))
  o = o.reshape(8, 4)
  assert list(o[5:, 2]) == [0, 0, 0x80000000]                               # .ftz: flushed to signed zero
  assert o[5, 3] == 0 and o[6, 3] == np.sqrt(np.float32(3)).view(np.uint32)


def test_float_to_int_conversions_saturate_and_approx_functions():
  src = r'''
  extern "C" __global__ void c(const float *a, int *o, float *f) {
    int i = threadIdx.x;
    float x = a[i];
    o[4 * i] = __float2int_rn(x); o[4 * i + 1] = (int)__float2uint_rz(x); o[4 * i + 2] = __float2int_rd(x);
    o[4 * i + 3] = __half_as_short(__float2half_rn(x));
    f[3 * i] = __sinf(x); f[3 * i + 1] = __expf(x * 0.01f); f[3 * i + 2] = __log2f(fabsf(x) + 1.0f);
  }'''
  a = np.array([2.5, -2.5, 3.5, 1e10, -1e10, np.nan, 4e9, -0.7] + list(rng.standard_normal(24) * 100), np.float32)
  (_, o, f), _ = run(src, "c", 1, 32, a, np.zeros(128, np.int32), np.zeros(96, np.float32))
  o, f = o.reshape(32, 4), f.reshape(32, 3)
  with np.errstate(invalid="ignore"):
    rn = np.where(np.isnan(a), 0, np.clip(np.rint(a.astype(np.float64)), -2**31, 2**31 - 1)).astype(np.int64)
    rz = np.where(np.isnan(a), 0, np.clip(np.trunc(a.astype(np.float64)), 0, 2**32 - 1)).astype(np.int64)
    rd = np.where(np.isnan(a), 0, np.clip(np.floor(a.astype(np.float64)), -2**31, 2**31 - 1)).astype(np.int64)
  np.testing.assert_array_equal(o[:, 0], rn)
  np.testing.assert_array_equal(o[:, 1].view(np.uint32), rz)
  np.testing.assert_array_equal(o[:, 2], rd)
  with np.errstate(over="ignore"):     # 1e10 overflows f16 and exp(1e8) overflows: inf, as on the GPU
    fin = np.isfinite(a)
    h = o[:, 3].astype(np.int16).view(np.uint16)
    np.testing.assert_array_equal(h[~np.isnan(a)], a[~np.isnan(a)].astype(np.float16).view(np.uint16))
    assert (h[np.isnan(a)] == 0x7fff).all()                                  # the canonical NaN
    np.testing.assert_allclose(f[fin, 0], np.sin(a[fin].astype(np.float64)), atol=1e-6)
    np.testing.assert_allclose(f[fin, 1], np.exp(a[fin].astype(np.float64) * 0.01), rtol=1e-6)
    np.testing.assert_allclose(f[fin, 2], np.log2(np.abs(a[fin].astype(np.float64)) + 1), rtol=1e-6)


def test_half_exp2_through_ex2_approx_f16():
  src = r'''
  extern "C" __global__ void e(const __half *a, __half *o) {
    int i = threadIdx.x;
    o[i] = hexp2(a[i]);
    __half2 v = h2exp2(__halves2half2(a[i], __hneg(a[i])));
    o[32 + i] = __high2half(v);
  }'''
  a = (rng.standard_normal(32) * 4).astype(np.float16)
  (_, o), _ = run(src, "e", 1, 32, a, np.zeros(64, np.float16))
  for i in range(32):
    for k, x in ((i, float(a[i])), (32 + i, -float(a[i]))):
      want = round_to(Fraction(2.0 ** x), "f16", "rn")      # ex2.approx: within an ulp of the exact power
      assert abs(int(o[k].view(np.uint16)) - want) <= 1, (k, x)
