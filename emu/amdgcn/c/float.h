/* RDNA3 floating-point semantics on raw bit patterns (u32 for f32 and f16-in-low-bits, u64 for f64).
   Facts: RDNA3 ISA guide chapter 6 and MODE. Every helper takes the denormal flags explicitly:
   fi = flush denormal inputs to signed zero, fo = flush denormal results (MODE.FP_DENORM, per precision).
   NaN results: the first NaN operand (src0, src1, src2 order) quieted with sign and payload kept; an
   invalid operation on non-NaN inputs gives the canonical quiet NaN. */
#define QNAN32 0x7fc00000u
#define QNAN16 0x7e00u
#define QNAN64 0x7ff8000000000000ull

static inline float F(u32 x) { float f; memcpy(&f, &x, 4); return f; }
static inline u32 U(float f) { u32 x; memcpy(&x, &f, 4); return x; }
static inline double D(u64 x) { double f; memcpy(&f, &x, 8); return f; }
static inline u64 UD(double f) { u64 x; memcpy(&x, &f, 8); return x; }

/* ---- f32 ---- */
static inline int nan32(u32 x) { return (x & 0x7fffffffu) > 0x7f800000u; }
static inline int snan32(u32 x) { return nan32(x) && !(x & 0x400000u); }
static inline int inf32(u32 x) { return (x & 0x7fffffffu) == 0x7f800000u; }
static inline int den32(u32 x) { return !(x & 0x7f800000u) && (x & 0x7fffffu); }
static inline u32 ftz32(u32 x, int on) { return (on && !(x & 0x7f800000u)) ? (x & 0x80000000u) : x; }
static inline u32 nan2_32(u32 a, u32 b) { return nan32(a) ? a | 0x400000u : nan32(b) ? b | 0x400000u : QNAN32; }
static inline u32 nan3_32(u32 a, u32 b, u32 c) { return nan32(a) ? a | 0x400000u : nan32(b) ? b | 0x400000u : nan32(c) ? c | 0x400000u : QNAN32; }
static inline u32 fin2_32(u32 r, u32 a, u32 b, int fo) { return nan32(r) ? nan2_32(a, b) : ftz32(r, fo); }
static inline u32 fin1_32(u32 r, u32 a, int fo) { return nan32(r) ? (nan32(a) ? a | 0x400000u : QNAN32) : ftz32(r, fo); }

static inline u32 add32(u32 a, u32 b, int fi, int fo) { a = ftz32(a, fi); b = ftz32(b, fi); return fin2_32(U(F(a) + F(b)), a, b, fo); }
static inline u32 sub32(u32 a, u32 b, int fi, int fo) { a = ftz32(a, fi); b = ftz32(b, fi); return fin2_32(U(F(a) - F(b)), a, b, fo); }
static inline u32 mul32(u32 a, u32 b, int fi, int fo) { a = ftz32(a, fi); b = ftz32(b, fi); return fin2_32(U(F(a) * F(b)), a, b, fo); }
static inline u32 fma32(u32 a, u32 b, u32 c, int fi, int fo) {
  a = ftz32(a, fi); b = ftz32(b, fi); c = ftz32(c, fi);
  u32 r = U(__builtin_fmaf(F(a), F(b), F(c)));
  return nan32(r) ? nan3_32(a, b, c) : ftz32(r, fo);
}
/* a * b + c of f32 values in a double rounded to odd: the product is exact in double, the sum's exact error comes from
   TwoSum, and an inexact sum gets its last bit set. Rounding that once more to f32 or f16 (any direction) rounds the
   exact value once, since double has more than 2 bits beyond either. */
static inline double fma_odd(u32 a, u32 b, u32 c) {
  double p = (double)F(a) * F(b), q = F(c), s = p + q, t = s - p, err = (p - (s - t)) + (q - t);
  if (s - s != 0) return s;   /* inf or NaN: only from an inf or NaN input */
  if (err != 0 && !(UD(s) & 1)) s = D(UD(s) + ((err > 0) == (s > 0) ? 1 : -1));
  return s;
}
/* DX9 "legacy" multiply: +-0 times anything (inf and NaN included) is +0 */
static inline u32 mul32_dx9(u32 a, u32 b, int fi, int fo) {
  a = ftz32(a, fi); b = ftz32(b, fi);
  if (!(a & 0x7fffffffu) || !(b & 0x7fffffffu)) return 0;
  return mul32(a, b, 0, fo);
}
static inline u32 fma32_dx9(u32 a, u32 b, u32 c, int fi, int fo) {
  a = ftz32(a, fi); b = ftz32(b, fi); c = ftz32(c, fi);
  if (!(a & 0x7fffffffu) || !(b & 0x7fffffffu)) return add32(0, c, 0, fo);
  return fma32(a, b, c, 0, fo);
}

/* min/max (facts 19-20; RDNA3.5 ISA guide V_MIN_F32 pseudocode): IEEE mode: an sNaN operand gives that NaN quieted
   (src0 checked first), then a qNaN gives the other operand; IEEE off: a NaN src1 gives src0 as it is, a NaN src0
   gives src1. -0 < +0; inputs are denormal-flushed (to signed zero) before selecting. */
static inline u32 minmax32(u32 a, u32 b, int fi, int ieee, int is_max) {
  a = ftz32(a, fi); b = ftz32(b, fi);
  if (ieee && snan32(a)) return a | 0x400000u;
  if (ieee && snan32(b)) return b | 0x400000u;
  if (nan32(b)) return a;
  if (nan32(a)) return b;
  if (((a | b) & 0x7fffffffu) == 0) return is_max ? (a & b) : (a | b);
  float x = F(a), y = F(b);
  return is_max ? (x >= y ? a : b) : (x <= y ? a : b);
}
static inline u32 min32(u32 a, u32 b, int fi, int ieee) { return minmax32(a, b, fi, ieee, 0); }
static inline u32 max32(u32 a, u32 b, int fi, int ieee) { return minmax32(a, b, fi, ieee, 1); }
/* med3: any NaN input returns min3 (fact 20) */
static inline u32 med3_32(u32 a, u32 b, u32 c, int fi, int ieee) {
  a = ftz32(a, fi); b = ftz32(b, fi); c = ftz32(c, fi);
  if (nan32(a) || nan32(b) || nan32(c)) return min32(min32(a, b, 0, ieee), c, 0, ieee);
  u32 mx = max32(max32(a, b, 0, ieee), c, 0, ieee);
  if (mx == a) return max32(b, c, 0, ieee);
  if (mx == b) return max32(a, c, 0, ieee);
  return max32(a, b, 0, ieee);
}
/* clamp modifier: [0, 1], NaN -> +0, -0 -> +0 (fact 23) */
static inline u32 clamp32(u32 r) {
  if (nan32(r) || (r & 0x80000000u)) return 0;
  return F(r) > 1.0f ? 0x3f800000u : r;
}
static inline u64 clamp64(u64 r) {
  if ((r & 0x7fffffffffffffffull) > 0x7ff0000000000000ull || (r >> 63)) return 0;
  return D(r) > 1.0 ? 0x3ff0000000000000ull : r;
}

/* ---- f64 ---- */
static inline int nan64(u64 x) { return (x & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
static inline int snan64(u64 x) { return nan64(x) && !(x & 0x8000000000000ull); }
static inline u64 ftz64(u64 x, int on) { return (on && !(x & 0x7ff0000000000000ull)) ? (x & 0x8000000000000000ull) : x; }
static inline u64 nan2_64(u64 a, u64 b) { return nan64(a) ? a | 0x8000000000000ull : nan64(b) ? b | 0x8000000000000ull : QNAN64; }
static inline u64 nan3_64(u64 a, u64 b, u64 c) { return nan64(a) ? a | 0x8000000000000ull : nan64(b) ? b | 0x8000000000000ull : nan64(c) ? c | 0x8000000000000ull : QNAN64; }
static inline u64 fin2_64(u64 r, u64 a, u64 b, int fo) { return nan64(r) ? nan2_64(a, b) : ftz64(r, fo); }
static inline u64 fin1_64(u64 r, u64 a, int fo) { return nan64(r) ? (nan64(a) ? a | 0x8000000000000ull : QNAN64) : ftz64(r, fo); }
static inline u64 add64(u64 a, u64 b, int fi, int fo) { a = ftz64(a, fi); b = ftz64(b, fi); return fin2_64(UD(D(a) + D(b)), a, b, fo); }
static inline u64 mul64(u64 a, u64 b, int fi, int fo) { a = ftz64(a, fi); b = ftz64(b, fi); return fin2_64(UD(D(a) * D(b)), a, b, fo); }
static inline u64 fma64(u64 a, u64 b, u64 c, int fi, int fo) {
  a = ftz64(a, fi); b = ftz64(b, fi); c = ftz64(c, fi);
  u64 r = UD(__builtin_fma(D(a), D(b), D(c)));
  return nan64(r) ? nan3_64(a, b, c) : ftz64(r, fo);
}
static inline u64 minmax64(u64 a, u64 b, int fi, int ieee, int is_max) {
  a = ftz64(a, fi); b = ftz64(b, fi);
  if (ieee && snan64(a)) return a | 0x8000000000000ull;
  if (ieee && snan64(b)) return b | 0x8000000000000ull;
  if (nan64(b)) return a;
  if (nan64(a)) return b;
  if (((a | b) & 0x7fffffffffffffffull) == 0) return is_max ? (a & b) : (a | b);
  double x = D(a), y = D(b);
  return is_max ? (x >= y ? a : b) : (x <= y ? a : b);
}

/* ---- f16 (held in the low 16 bits of a u32) ---- */
static inline int nan16(u32 x) { return (x & 0x7fffu) > 0x7c00u; }
static inline int snan16(u32 x) { return nan16(x) && !(x & 0x200u); }
static inline u32 ftz16(u32 x, int on) { x &= 0xffffu; return (on && !(x & 0x7c00u)) ? (x & 0x8000u) : x; }
/* exact f16 -> f32 (denormal f16 values are normal f32 values) */
static inline u32 h2f(u32 h) {
  u32 s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
  if (e == 0x1f) return s | 0x7f800000u | (m << 13);
  if (e) return s | ((e + 112) << 23) | (m << 13);
  if (!m) return s;
  return U((h & 0x8000u) ? -(float)m * 0x1p-24f : (float)m * 0x1p-24f);
}
/* f32 -> f16, round to nearest even (rtz=0) or toward zero (rtz=1); a NaN keeps its sign and top payload, quieted */
static inline u32 f2h(u32 f, int rtz) {
  u32 s = (f >> 16) & 0x8000u, a = f & 0x7fffffffu, e = a >> 23, q, rem, half;
  if (a > 0x7f800000u) return s | 0x7e00u | ((a >> 13) & 0x3ffu);
  if (e >= 143) return s | (rtz && a != 0x7f800000u ? 0x7bffu : 0x7c00u);   /* |x| >= 2^16 */
  if (e >= 113) { q = (a >> 13) - (112u << 10); rem = a & 0x1fffu; half = 0x1000u; }
  else {
    u32 m = (a & 0x7fffffu) | (e ? 0x800000u : 0), shift = e ? 126 - e : 125;
    if (shift > 24) return s;
    q = m >> shift; rem = m & ((1u << shift) - 1); half = 1u << (shift - 1);
  }
  if (!rtz && (rem > half || (rem == half && (q & 1)))) q++;
  if (rtz && q >= 0x7c00u) q = 0x7bffu;
  return s | q;
}
/* f64 -> f16, round to nearest even, in one rounding */
static inline u32 d2h(u64 d) {
  u32 s = (u32)(d >> 48) & 0x8000u; u64 a = d & 0x7fffffffffffffffull, q, rem, half; u32 e = (u32)(a >> 52);
  if (a > 0x7ff0000000000000ull) return s | 0x7e00u | (u32)((a >> 42) & 0x3ffu);
  if (e >= 1039) return s | 0x7c00u;
  if (e >= 1009) { q = (a >> 42) - (1008ull << 10); rem = a & ((1ull << 42) - 1); half = 1ull << 41; }
  else {
    u64 m = (a & 0xfffffffffffffull) | (e ? 1ull << 52 : 0); u32 shift = e ? 1051 - e : 1050;
    if (shift > 53) return s;
    q = m >> shift; rem = m & ((1ull << shift) - 1); half = 1ull << (shift - 1);
  }
  if (rem > half || (rem == half && (q & 1))) q++;
  return s | (u32)q;
}
static inline u32 nan2_16(u32 a, u32 b) { return nan16(a) ? (a | 0x200u) & 0xffffu : nan16(b) ? (b | 0x200u) & 0xffffu : QNAN16; }
static inline u32 nan3_16(u32 a, u32 b, u32 c) { return nan16(a) ? (a | 0x200u) & 0xffffu : nan16(b) ? (b | 0x200u) & 0xffffu : nan16(c) ? (c | 0x200u) & 0xffffu : QNAN16; }
/* binary f16 ops are computed in f32 and rounded once: correctly rounded since 24 >= 2*11+2 */
static inline u32 fin2_16(u32 r32, u32 a, u32 b, int fo) { return nan32(r32) ? nan2_16(a, b) : ftz16(f2h(r32, 0), fo); }
static inline u32 add16(u32 a, u32 b, int fi, int fo) { a = ftz16(a, fi); b = ftz16(b, fi); return fin2_16(U(F(h2f(a)) + F(h2f(b))), a, b, fo); }
static inline u32 sub16(u32 a, u32 b, int fi, int fo) { a = ftz16(a, fi); b = ftz16(b, fi); return fin2_16(U(F(h2f(a)) - F(h2f(b))), a, b, fo); }
static inline u32 mul16(u32 a, u32 b, int fi, int fo) { a = ftz16(a, fi); b = ftz16(b, fi); return fin2_16(U(F(h2f(a)) * F(h2f(b))), a, b, fo); }
/* f16 fma: the product of two f16 values is exact in f64; fma in f64 then one rounding to f16 */
static inline u32 fma16(u32 a, u32 b, u32 c, int fi, int fo) {
  a = ftz16(a, fi); b = ftz16(b, fi); c = ftz16(c, fi);
  double r = __builtin_fma((double)F(h2f(a)), (double)F(h2f(b)), (double)F(h2f(c)));
  if (r != r) return nan3_16(a, b, c);
  return ftz16(d2h(UD(r)), fo);
}
static inline u32 minmax16(u32 a, u32 b, int fi, int ieee, int is_max) {
  a = ftz16(a, fi); b = ftz16(b, fi);
  if (ieee && snan16(a)) return a | 0x200u;
  if (ieee && snan16(b)) return b | 0x200u;
  if (nan16(b)) return a;
  if (nan16(a)) return b;
  if (((a | b) & 0x7fffu) == 0) return is_max ? (a & b) : (a | b);
  float x = F(h2f(a)), y = F(h2f(b));
  return is_max ? (x >= y ? a : b) : (x <= y ? a : b);
}
static inline u32 clamp16(u32 r) {
  if (nan16(r) || (r & 0x8000u)) return 0;
  return (r & 0x7fffu) > 0x3c00u ? 0x3c00u : r;
}

/* ---- classification (V_CMP_CLASS): raw bits, denormals are denormals (fact 28) ---- */
static inline u32 class32(u32 x) {
  u32 neg = x >> 31, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (x & 0x400000u) ? 1u << 1 : 1u << 0;
  if (a == 0x7f800000u) return neg ? 1u << 2 : 1u << 9;
  if (a >= 0x800000u) return neg ? 1u << 3 : 1u << 8;
  if (a) return neg ? 1u << 4 : 1u << 7;
  return neg ? 1u << 5 : 1u << 6;
}
static inline u32 class64(u64 x) {
  u32 neg = x >> 63; u64 a = x & 0x7fffffffffffffffull;
  if (a > 0x7ff0000000000000ull) return (x & 0x8000000000000ull) ? 1u << 1 : 1u << 0;
  if (a == 0x7ff0000000000000ull) return neg ? 1u << 2 : 1u << 9;
  if (a >= 0x10000000000000ull) return neg ? 1u << 3 : 1u << 8;
  if (a) return neg ? 1u << 4 : 1u << 7;
  return neg ? 1u << 5 : 1u << 6;
}
static inline u32 class16(u32 x) {
  u32 neg = (x >> 15) & 1, a = x & 0x7fffu;
  if (a > 0x7c00u) return (x & 0x200u) ? 1u << 1 : 1u << 0;
  if (a == 0x7c00u) return neg ? 1u << 2 : 1u << 9;
  if (a >= 0x400u) return neg ? 1u << 3 : 1u << 8;
  if (a) return neg ? 1u << 4 : 1u << 7;
  return neg ? 1u << 5 : 1u << 6;
}
