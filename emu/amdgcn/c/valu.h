/* RDNA3 VALU helpers beyond plain arithmetic: conversions, rounding, transcendentals, the division
   macro-ops, integer bit ops. Facts: RDNA3 ISA guide chapter 6. */

/* ---- integer ---- */
static inline u32 sat_u32(u64 x) { return x > 0xffffffffull ? 0xffffffffu : (u32)x; }
static inline u32 sat_i32(i64 x) { return x > 0x7fffffff ? 0x7fffffffu : x < -0x80000000ll ? 0x80000000u : (u32)(i32)x; }
static inline u32 sat_u16(i64 x) { return x > 0xffff ? 0xffffu : x < 0 ? 0 : (u32)x; }
static inline u32 sat_i16(i64 x) { return x > 0x7fff ? 0x7fffu : x < -0x8000 ? 0x8000u : (u32)x & 0xffffu; }
static inline u32 sext(u32 x, int bits) { return (u32)(((i32)(x << (32 - bits))) >> (32 - bits)); }
static inline u32 bfe_u32(u32 x, u32 off, u32 w) { off &= 31; w &= 31; return w ? (x >> off) & ((1u << w) - 1) : 0; }
static inline u32 bfe_i32(u32 x, u32 off, u32 w) { off &= 31; w &= 31; if (!w) return 0; u32 f = (x >> off) & ((1u << w) - 1); return sext(f, w); }
static inline u64 bfe_u64(u64 x, u32 off, u32 w) { off &= 63; w &= 127; if (!w) return 0; x >>= off; return w >= 64 ? x : x & ((1ull << w) - 1); }
static inline u64 bfe_i64(u64 x, u32 off, u32 w) { off &= 63; w &= 127; if (!w) return 0; x >>= off; if (w >= 64) return x; return (u64)(((i64)(x << (64 - w))) >> (64 - w)); }
static inline u32 clz32(u32 x) { return x ? (u32)__builtin_clz(x) : 0xffffffffu; }
static inline u32 ctz32(u32 x) { return x ? (u32)__builtin_ctz(x) : 0xffffffffu; }
static inline u32 cls32(u32 x) { u32 y = (x >> 31) ? ~x : x; return y ? (u32)__builtin_clz(y) : 0xffffffffu; }
static inline u32 clz64(u64 x) { return x ? (u32)__builtin_clzll(x) : 0xffffffffu; }
static inline u32 ctz64(u64 x) { return x ? (u32)__builtin_ctzll(x) : 0xffffffffu; }
static inline u32 cls64(u64 x) { u64 y = (x >> 63) ? ~x : x; return y ? (u32)__builtin_clzll(y) : 0xffffffffu; }
static inline u32 brev32(u32 x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1); x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4); return __builtin_bswap32(x);
}
static inline u64 brev64(u64 x) { return ((u64)brev32((u32)x) << 32) | brev32((u32)(x >> 32)); }
static inline u32 alignbit(u32 hi, u32 lo, u32 sh) { return (u32)((((u64)hi << 32) | lo) >> (sh & 31)); }
static inline u32 alignbyte(u32 hi, u32 lo, u32 sh) { return (u32)((((u64)hi << 32) | lo) >> ((sh & 3) * 8)); }
/* V_PERM_B32 (fact 11): selector bytes 0-7 pick a byte of {S0,S1}, 8-11 replicate sign bits, 12 -> 0, 13+ -> 0xff */
static inline u32 perm_b32(u32 s0, u32 s1, u32 sel) {
  u64 v = ((u64)s0 << 32) | s1; u32 r = 0;
  for (int i = 0; i < 4; i++) {
    u32 s = (sel >> (8 * i)) & 0xff, b;
    if (s <= 7) b = (v >> (8 * s)) & 0xff;
    else if (s <= 11) b = ((v >> (8 * (2 * (s - 8) + 1) + 7)) & 1) ? 0xff : 0;
    else if (s == 12) b = 0;
    else b = 0xff;
    r |= b << (8 * i);
  }
  return r;
}
static inline u32 absdiff8(u32 a, u32 b) { return a > b ? a - b : b - a; }
static inline u32 sad_u8(u32 a, u32 b, u32 c) { u32 r = c; for (int i = 0; i < 32; i += 8) r += absdiff8((a >> i) & 0xff, (b >> i) & 0xff); return r; }
static inline u32 msad_u8(u32 a, u32 b, u32 c) { u32 r = c; for (int i = 0; i < 32; i += 8) if ((b >> i) & 0xff) r += absdiff8((a >> i) & 0xff, (b >> i) & 0xff); return r; }
static inline u32 sad_u16(u32 a, u32 b, u32 c) { return c + absdiff8(a & 0xffff, b & 0xffff) + absdiff8(a >> 16, b >> 16); }
static inline u32 lerp_u8(u32 a, u32 b, u32 c) {
  u32 r = 0;
  for (int i = 0; i < 32; i += 8) r |= ((((a >> i) & 0xff) + ((b >> i) & 0xff) + ((c >> i) & 1)) >> 1) << i;
  return r;
}
static inline u32 med3_i32(i32 a, i32 b, i32 c) { i32 mx = a > b ? a : b, mn = a < b ? a : b; return (u32)(c > mx ? mx : c < mn ? mn : c); }
static inline u32 med3_u32(u32 a, u32 b, u32 c) { u32 mx = a > b ? a : b, mn = a < b ? a : b; return c > mx ? mx : c < mn ? mn : c; }

/* ---- float -> int, saturating; NaN -> 0 (fact 25) ---- */
static inline u32 cvt_i32_f64v(double x) { return x != x ? 0 : x >= 2147483647.0 ? 0x7fffffffu : x <= -2147483648.0 ? 0x80000000u : (u32)(i32)x; }
static inline u32 cvt_u32_f64v(double x) { return x != x || x <= 0 ? 0 : x >= 4294967295.0 ? 0xffffffffu : (u32)x; }
static inline u32 cvt_i32_f32(u32 a, int fi) { return cvt_i32_f64v(F(ftz32(a, fi))); }
static inline u32 cvt_u32_f32(u32 a, int fi) { return cvt_u32_f64v(F(ftz32(a, fi))); }
static inline u32 cvt_i32_f64(u64 a, int fi) { return cvt_i32_f64v(D(ftz64(a, fi))); }
static inline u32 cvt_u32_f64(u64 a, int fi) { return cvt_u32_f64v(D(ftz64(a, fi))); }
static inline u32 cvt_i16_f16(u32 a, int fi) { double x = F(h2f(ftz16(a, fi))); return x != x ? 0 : x >= 32767.0 ? 0x7fffu : x <= -32768.0 ? 0x8000u : (u32)(i32)x & 0xffffu; }
static inline u32 cvt_u16_f16(u32 a, int fi) { double x = F(h2f(ftz16(a, fi))); return x != x || x <= 0 ? 0 : x >= 65535.0 ? 0xffffu : (u32)x; }
/* fact 37: norm conversions scale by 32767 / 65535 and round to nearest */
static inline u32 cvt_norm_i16(double x) { if (x != x) return 0; x = x > 1 ? 1 : x < -1 ? -1 : x; return (u32)(i32)__builtin_rint(x * 32767.0) & 0xffffu; }
static inline u32 cvt_norm_u16(double x) { if (x != x) return 0; x = x > 1 ? 1 : x < 0 ? 0 : x; return (u32)__builtin_rint(x * 65535.0); }
static inline u32 cvt_pk_u8_f32(u32 a, u32 byte, u32 c, int fi) {
  double x = F(ftz32(a, fi)); u32 v = x != x || x <= 0 ? 0 : x >= 255 ? 255 : (u32)__builtin_rint(x);
  u32 sh = (byte & 3) * 8; return (c & ~(0xffu << sh)) | (v << sh);
}
/* int -> float (rounded to nearest even by the host) */
static inline u32 cvt_f32_i32(u32 a, int fo) { return ftz32(U((float)(i32)a), fo); }
static inline u32 cvt_f32_u32(u32 a, int fo) { return ftz32(U((float)a), fo); }
static inline u32 cvt_f16_f32(u32 a, int fi, int fo) { a = ftz32(a, fi); return ftz16(f2h(a, 0), fo); }
static inline u32 cvt_f32_f16(u32 a, int fi, int fo) { a = ftz16(a, fi); u32 r = h2f(a); return nan16(a) ? r | 0x400000u : ftz32(r, fo); }
static inline u64 cvt_f64_f32(u32 a, int fi, int fo) { a = ftz32(a, fi); double r = F(a); return nan32(a) ? UD(r) | 0x8000000000000ull : ftz64(UD(r), fo); }
static inline u32 cvt_f32_f64(u64 a, int fi, int fo) { a = ftz64(a, fi); if (nan64(a)) return (u32)(a >> 32 & 0x80000000u) | 0x7fc00000u | (u32)((a >> 29) & 0x3fffffu); return ftz32(U((float)D(a)), fo); }
static inline u32 cvt_f16_i16(u32 a, int fo) { return ftz16(f2h(U((float)(int16_t)a), 0), fo); }
static inline u32 cvt_f16_u16(u32 a, int fo) { return ftz16(f2h(U((float)(a & 0xffff)), 0), fo); }

/* ---- rounding ---- */
static inline u32 round32(u32 a, int fi, int mode) {  /* mode: 0 trunc, 1 ceil, 2 rndne, 3 floor */
  a = ftz32(a, fi); if (nan32(a)) return a | 0x400000u;
  float x = F(a), r = mode == 0 ? __builtin_truncf(x) : mode == 1 ? __builtin_ceilf(x) : mode == 2 ? __builtin_rintf(x) : __builtin_floorf(x);
  return U(r) | (a & 0x80000000u);   /* a zero result keeps the input's sign (ceil(-0.1) = -0) */
}
static inline u64 round64(u64 a, int fi, int mode) {
  a = ftz64(a, fi); if (nan64(a)) return a | 0x8000000000000ull;
  double x = D(a), r = mode == 0 ? __builtin_trunc(x) : mode == 1 ? __builtin_ceil(x) : mode == 2 ? __builtin_rint(x) : __builtin_floor(x);
  return UD(r) | (a & 0x8000000000000000ull);
}
static inline u32 round16(u32 a, int fi, int mode) {
  a = ftz16(a, fi); if (nan16(a)) return a | 0x200u;
  return f2h(round32(h2f(a), 0, mode), 0) | (a & 0x8000u);
}
/* fract: x - floor(x), at most the largest value below 1; inf -> NaN (fact 35) */
static inline u32 fract32(u32 a, int fi, int fo) {
  a = ftz32(a, fi); if (nan32(a)) return a | 0x400000u; if (inf32(a)) return QNAN32;
  float x = F(a), r = x - __builtin_floorf(x); if (r >= 1.0f) r = 0x1.fffffep-1f;
  return ftz32(U(r), fo) | (r == 0 ? a & 0x80000000u : 0);
}
static inline u64 fract64(u64 a, int fi, int fo) {
  a = ftz64(a, fi); if (nan64(a)) return a | 0x8000000000000ull; if ((a & 0x7fffffffffffffffull) == 0x7ff0000000000000ull) return QNAN64;
  double x = D(a), r = x - __builtin_floor(x); if (r >= 1.0) r = 0x1.fffffffffffffp-1;
  return ftz64(UD(r), fo) | (r == 0 ? a & 0x8000000000000000ull : 0);
}
static inline u32 fract16(u32 a, int fi, int fo) {
  a = ftz16(a, fi); if (nan16(a)) return a | 0x200u; if ((a & 0x7fffu) == 0x7c00u) return QNAN16;
  float x = F(h2f(a)), r = x - __builtin_floorf(x); u32 h = f2h(U(r), 0); if (h == 0x3c00u) h = 0x3bffu;
  return ftz16(h, fo) | (r == 0 ? a & 0x8000u : 0);
}

/* ---- transcendentals (hardware units are approximate; these are correctly rounded host results) ---- */
static inline u32 rcp32(u32 a, int fi, int fo) { a = ftz32(a, fi); return fin1_32(U(1.0f / F(a)), a, fo); }
static inline u32 sqrt32(u32 a, int fi, int fo) { a = ftz32(a, fi); return fin1_32(U(__builtin_sqrtf(F(a))), a, fo); }
static inline u32 rsq32(u32 a, int fi, int fo) { a = ftz32(a, fi); return fin1_32(U((float)(1.0 / __builtin_sqrt((double)F(a)))), a, fo); }
static inline u32 exp32(u32 a, int fi, int fo) { a = ftz32(a, fi); return fin1_32(U(exp2f(F(a))), a, fo); }
static inline u32 log32(u32 a, int fi, int fo) { a = ftz32(a, fi); return fin1_32(U(log2f(F(a))), a, fo); }
/* V_SIN/V_COS take the angle in revolutions: sin(2*pi*x) */
static inline u32 sin32(u32 a, int fi, int fo) {
  a = ftz32(a, fi); if (nan32(a)) return a | 0x400000u; if (inf32(a)) return QNAN32;
  double x = F(a); x -= __builtin_rint(x); return ftz32(U((float)sin(x * 6.283185307179586)), fo);
}
static inline u32 cos32(u32 a, int fi, int fo) {
  a = ftz32(a, fi); if (nan32(a)) return a | 0x400000u; if (inf32(a)) return QNAN32;
  double x = F(a); x -= __builtin_rint(x); return ftz32(U((float)cos(x * 6.283185307179586)), fo);
}
static inline u64 rcp64(u64 a, int fi, int fo) { a = ftz64(a, fi); return fin1_64(UD(1.0 / D(a)), a, fo); }
static inline u64 sqrt64(u64 a, int fi, int fo) { a = ftz64(a, fi); return fin1_64(UD(__builtin_sqrt(D(a))), a, fo); }
static inline u64 rsq64(u64 a, int fi, int fo) { a = ftz64(a, fi); return fin1_64(UD(1.0 / __builtin_sqrt(D(a))), a, fo); }
/* f16 transcendentals through f32 */
static inline u32 un16(u32 a, int fi, int fo, u32 (*f32op)(u32, int, int)) {
  a = ftz16(a, fi); if (nan16(a)) return a | 0x200u; return ftz16(f2h(f32op(h2f(a), 0, 0), 0), fo);
}

/* ---- frexp / ldexp (facts 26-27) ---- */
static inline u32 frexp_mant32(u32 a, int fi) {
  a = ftz32(a, fi); if (nan32(a) || inf32(a)) return a; if (!(a & 0x7fffffffu)) return a;
  int e; return U(frexpf(F(a), &e));
}
static inline u32 frexp_exp32(u32 a, int fi) {
  a = ftz32(a, fi); if (nan32(a) || inf32(a) || !(a & 0x7fffffffu)) return 0;
  int e; frexpf(F(a), &e); return (u32)e;
}
static inline u64 frexp_mant64(u64 a, int fi) {
  a = ftz64(a, fi); if (nan64(a) || (a & 0x7fffffffffffffffull) == 0x7ff0000000000000ull || !(a & 0x7fffffffffffffffull)) return a;
  int e; return UD(frexp(D(a), &e));
}
static inline u32 frexp_exp64(u64 a, int fi) {
  a = ftz64(a, fi); if (nan64(a) || (a & 0x7fffffffffffffffull) >= 0x7ff0000000000000ull || !(a & 0x7fffffffffffffffull)) return 0;
  int e; frexp(D(a), &e); return (u32)e;
}
static inline u32 frexp_mant16(u32 a, int fi) {
  a = ftz16(a, fi); if (nan16(a) || (a & 0x7fffu) == 0x7c00u || !(a & 0x7fffu)) return a;
  int e; return f2h(U(frexpf(F(h2f(a)), &e)), 0);
}
static inline u32 frexp_exp16(u32 a, int fi) {
  a = ftz16(a, fi); if (nan16(a) || (a & 0x7fffu) == 0x7c00u || !(a & 0x7fffu)) return 0;
  int e; frexpf(F(h2f(a)), &e); return (u32)e & 0xffffu;
}
static inline int clampexp(i64 e) { return e > 100000 ? 100000 : e < -100000 ? -100000 : (int)e; }
static inline u32 ldexp32(u32 a, i32 e, int fi, int fo) {
  a = ftz32(a, fi); if (nan32(a)) return a | 0x400000u; if (inf32(a) || !(a & 0x7fffffffu)) return a;
  return ftz32(U(ldexpf(F(a), clampexp(e))), fo);
}
static inline u64 ldexp64(u64 a, i32 e, int fi, int fo) {
  a = ftz64(a, fi); if (nan64(a)) return a | 0x8000000000000ull;
  if ((a & 0x7fffffffffffffffull) == 0x7ff0000000000000ull || !(a & 0x7fffffffffffffffull)) return a;
  return ftz64(UD(ldexp(D(a), clampexp(e))), fo);
}
static inline u32 ldexp16(u32 a, i32 e, int fi, int fo) {
  a = ftz16(a, fi); if (nan16(a)) return a | 0x200u; if ((a & 0x7fffu) == 0x7c00u || !(a & 0x7fffu)) return a;
  return ftz16(d2h(UD(ldexp((double)F(h2f(a)), clampexp(e)))), fo);
}

/* ---- division macro-ops (facts 32-34) ---- */
static inline int fexp32(u32 x) { return (int)((x >> 23) & 0xff); }
static inline int fexp64(u64 x) { return (int)((x >> 52) & 0x7ff); }
/* V_DIV_SCALE (S0 = the operand to scale, S1 = denominator, S2 = numerator) returns S0, scaled by 2^+-64 (f64: 2^+-128)
   where the division sequence needs it (LLVM's: div_scale of both operands, rcp, fma refinement, div_fmas with the
   numerator's VCC, div_fixup); VCC = 1 tells div_fmas to undo a one-sided scaling. The RDNA3 ISA guide's pseudocode
   with these readings, each fixed by measurements on gfx1100 (tinygrad test/amd/hw/test_vop3.py TestDivScale) or by
   the sequence giving correctly rounded quotients (tests/emu/amdgcn/test_exec_kernels.py, against numpy, with f32
   denormals kept and flushed):
   - a zero (or flushed denormal) operand gives NaN with VCC = 1 (zero_denom, zero_numer, denorm_denom);
   - "1/S1 is denormal" is tested in S1's own precision (the guide's f32 form converts to f64, which never holds),
     and with a denormal quotient the denominator is scaled by 2^-64, not 2^64 (which overflows it): 1 / 2^127
     keeps S0 = 1.0 with VCC = 1 (result_would_be_denorm);
   - "S2/S1 is denormal" is the exponent test exponent(S2) - exponent(S1) <= -126 (-1022): 2^-126 / 1.0 scales the
     numerator to 2^-62 with VCC = 1 (tiny_numer_exp_le_23);
   - a tiny numerator (exponent <= 23 / 53) alone scales both operands, quotient unchanged, VCC = 0. */
static inline u32 div_scale32(u32 s0, u32 den, u32 num, int fi, int *vcc) {
  s0 = ftz32(s0, fi); den = ftz32(den, fi); num = ftz32(num, fi); *vcc = 0;
  float d = F(den), n = F(num);
  int diff = fexp32(num) - fexp32(den), big_den = fabsf(d) > 0x1p126f, tiny_q = diff <= -126;
  if (d == 0 || n == 0) { *vcc = 1; return QNAN32; }
  if (diff >= 96) { *vcc = 1; return s0 == den ? ldexp32(s0, 64, 0, 0) : s0; }
  if (den32(den)) return ldexp32(s0, 64, 0, 0);
  if (big_den && tiny_q) { *vcc = 1; return s0 == den ? ldexp32(s0, -64, 0, 0) : s0; }
  if (big_den) return ldexp32(s0, -64, 0, 0);
  if (tiny_q) { *vcc = 1; return s0 == num ? ldexp32(s0, 64, 0, 0) : s0; }
  if (fexp32(num) <= 23) return ldexp32(s0, 64, 0, 0);
  return s0;
}
static inline u64 div_scale64(u64 s0, u64 den, u64 num, int fi, int *vcc) {
  s0 = ftz64(s0, fi); den = ftz64(den, fi); num = ftz64(num, fi); *vcc = 0;
  double d = D(den), n = D(num);
  int diff = fexp64(num) - fexp64(den), big_den = fabs(d) > 0x1p1022, tiny_q = diff <= -1022;
  if (d == 0 || n == 0) { *vcc = 1; return QNAN64; }
  if (diff >= 768) { *vcc = 1; return s0 == den ? ldexp64(s0, 128, 0, 0) : s0; }
  if (!(den & 0x7ff0000000000000ull)) return ldexp64(s0, 128, 0, 0);
  if (big_den && tiny_q) { *vcc = 1; return s0 == den ? ldexp64(s0, -128, 0, 0) : s0; }
  if (big_den) return ldexp64(s0, -128, 0, 0);
  if (tiny_q) { *vcc = 1; return s0 == num ? ldexp64(s0, 128, 0, 0) : s0; }
  if (fexp64(num) <= 53) return ldexp64(s0, 128, 0, 0);
  return s0;
}
/* a * b + c scaled by 2^e with one rounding (V_DIV_FMAS scales inside the fma, so a quotient in the denormal range is
   rounded once): fma_odd for f32, the same in binary128 for f64 */
#if defined(__x86_64__)
typedef __float128 f128;
#else
typedef long double f128;     /* IEEE binary128 on aarch64 Linux */
#endif
static inline u32 fma32_scaled(u32 a, u32 b, u32 c, int e) { return U((float)(fma_odd(a, b, c) * (e > 0 ? 0x1p64 : 0x1p-64))); }
static inline u64 fma64_scaled(u64 a, u64 b, u64 c, int e) {
  f128 p = (f128)D(a) * D(b), q = D(c), s = p + q, t = s - p, err = (p - (s - t)) + (q - t);
  unsigned __int128 bits; memcpy(&bits, &s, 16);
  if (err != 0 && !(bits & 1)) { bits += (err > 0) == (s > 0) ? 1 : -1; memcpy(&s, &bits, 16); }
  f128 scale = 0x1p64; scale *= scale;
  return UD((double)(e > 0 ? s * scale : s / scale));
}
/* V_DIV_FMAS: fma; with VCC set the result is scaled by 2^64 (exponent(S2) > 127) or 2^-64; f64 uses 2^+-128 and 1023 */
static inline int fin32(u32 x) { return (x & 0x7f800000u) != 0x7f800000u; }
static inline int fin64(u64 x) { return (x & 0x7ff0000000000000ull) != 0x7ff0000000000000ull; }
static inline u32 div_fmas32(u32 a, u32 b, u32 c, int vcc, int fi, int fo) {
  a = ftz32(a, fi); b = ftz32(b, fi); c = ftz32(c, fi);
  if (!vcc || !fin32(a) || !fin32(b) || !fin32(c)) return fma32(a, b, c, 0, fo);   /* inf and NaN stay as they are */
  return ftz32(fma32_scaled(a, b, c, fexp32(c) > 127 ? 64 : -64), fo);
}
static inline u64 div_fmas64(u64 a, u64 b, u64 c, int vcc, int fi, int fo) {
  a = ftz64(a, fi); b = ftz64(b, fi); c = ftz64(c, fi);
  if (!vcc || !fin64(a) || !fin64(b) || !fin64(c)) return fma64(a, b, c, 0, fo);
  return ftz64(fma64_scaled(a, b, c, fexp64(c) > 1023 ? 128 : -128), fo);
}
/* V_DIV_FIXUP: S0 = quotient estimate, S1 = denominator, S2 = numerator */
static inline u32 div_fixup32(u32 q, u32 den, u32 num, int fi, int fo) {
  q = ftz32(q, fi); den = ftz32(den, fi); num = ftz32(num, fi);
  u32 sign = (den ^ num) & 0x80000000u;
  if (nan32(num)) return num | 0x400000u;
  if (nan32(den)) return den | 0x400000u;
  int dz = !(den & 0x7fffffffu), nz = !(num & 0x7fffffffu);
  if ((dz && nz) || (inf32(den) && inf32(num))) return 0xffc00000u;
  if (dz || inf32(num)) return sign | 0x7f800000u;
  if (inf32(den) || nz) return sign;
  if (fexp32(num) - fexp32(den) < -150) return sign;            /* underflow */
  if (fexp32(den) == 255) return sign | 0x7f800000u;            /* overflow */
  if (nan32(q)) return sign | 0x7f800000u;
  return sign | ftz32(q & 0x7fffffffu, fo);
}
static inline u64 div_fixup64(u64 q, u64 den, u64 num, int fi, int fo) {
  q = ftz64(q, fi); den = ftz64(den, fi); num = ftz64(num, fi);
  u64 sign = (den ^ num) & 0x8000000000000000ull, inf = 0x7ff0000000000000ull;
  if (nan64(num)) return num | 0x8000000000000ull;
  if (nan64(den)) return den | 0x8000000000000ull;
  int dz = !(den << 1), nz = !(num << 1), di = (den << 1) == inf << 1, ni = (num << 1) == inf << 1;
  if ((dz && nz) || (di && ni)) return 0xfff8000000000000ull;
  if (dz || ni) return sign | inf;
  if (di || nz) return sign;
  if (fexp64(num) - fexp64(den) < -1075) return sign;
  if (fexp64(den) == 2047) return sign | inf;
  if (nan64(q)) return sign | inf;
  return sign | ftz64(q & 0x7fffffffffffffffull, fo);
}
static inline u32 div_fixup16(u32 q, u32 den, u32 num, int fi, int fo) {
  q = ftz16(q, fi); den = ftz16(den, fi); num = ftz16(num, fi);
  u32 sign = (den ^ num) & 0x8000u;
  if (nan16(num)) return (num | 0x200u) & 0xffffu;
  if (nan16(den)) return (den | 0x200u) & 0xffffu;
  int dz = !(den & 0x7fffu), nz = !(num & 0x7fffu), di = (den & 0x7fffu) == 0x7c00u, ni = (num & 0x7fffu) == 0x7c00u;
  if ((dz && nz) || (di && ni)) return 0xfe00u;
  if (dz || ni) return sign | 0x7c00u;
  if (di || nz) return sign;
  if (nan16(q)) return sign | 0x7c00u;
  return sign | ftz16(q & 0x7fffu, fo);
}
/* V_TRIG_PREOP_F64: the 53 bits of 2/pi (1201 bits held by the hardware) starting at bit (S1 & 31) * 53, plus
   exponent(S0) - 1077 for large inputs, as a double scaled by 2^-(shift+53) (and 2^128 when exponent(S0) >= 1968) */
static const u32 TWO_OVER_PI[40] = {   /* 1280 bits of 2/pi, most significant first */
  0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0, 0xdb629599, 0x3c439041, 0xfe5163ab, 0xdebbc561,
  0xb7246e3a, 0x424dd2e0, 0x06492eea, 0x09d1921c, 0xfe1deb1c, 0xb129a73e, 0xe88235f5, 0x2ebb4484,
  0xe99c7026, 0xb45f7e41, 0x3991d639, 0x835339f4, 0x9c845f8b, 0xbdf9283b, 0x1ff897ff, 0xde05980f,
  0xef2f118b, 0x5a0a6d1f, 0x6d367ecf, 0x27cb09b7, 0x4f463f66, 0x9e5fea2d, 0x7527bac7, 0xebe5f17b,
  0x3d0739f7, 0x8a5292ea, 0x6bfb5fb1, 0x1f8d5d08, 0x56033046, 0xfc7b6bab, 0xf0cfbc20, 0x9af4361d};
static inline u64 trig_preop64(u64 a, u32 sel) {
  int e = fexp64(a), shift = (int)(sel & 31) * 53 + (e > 1077 ? e - 1077 : 0);
  u64 bits = 0;
  for (int i = 0; i < 53; i++) {
    int b = shift + i; u32 bit = b < 1201 ? (TWO_OVER_PI[b >> 5] >> (31 - (b & 31))) & 1 : 0;
    bits = (bits << 1) | bit;
  }
  double r = ldexp((double)bits, -shift - 53);
  if (e >= 1968) r = ldexp(r, 128);   /* large inputs: the result is pre-scaled by 2^128 */
  return UD(r);
}
/* V_MULLIT_F32 (fact 36): S2 guard <= 0 or NaN -> -MAX_FLOAT */
static inline u32 mullit32(u32 a, u32 b, u32 c, int fi, int fo) {
  c = ftz32(c, fi);
  if (nan32(c) || F(c) <= 0) return 0xff7fffffu;
  return mul32(a, b, fi, fo);
}
/* cube map ops: major axis selection per the RDNA3 guide's V_CUBE* pseudocode */
static inline int cube_face(float x, float y, float z) {
  float ax = fabsf(x), ay = fabsf(y), az = fabsf(z);
  if (az >= ax && az >= ay) return z < 0 ? 5 : 4;
  if (ay >= ax) return y < 0 ? 3 : 2;
  return x < 0 ? 1 : 0;
}
static inline u32 cubeid32(u32 x, u32 y, u32 z) { return U((float)cube_face(F(x), F(y), F(z))); }
static inline u32 cubema32(u32 x, u32 y, u32 z) {
  int f = cube_face(F(x), F(y), F(z)); return U(2.0f * (f >= 4 ? F(z) : f >= 2 ? F(y) : F(x)));
}
static inline u32 cubesc32(u32 x, u32 y, u32 z) {
  switch (cube_face(F(x), F(y), F(z))) { case 4: return x; case 5: return x ^ 0x80000000u; case 2: case 3: return x;
    case 0: return z ^ 0x80000000u; default: return z; }
}
static inline u32 cubetc32(u32 x, u32 y, u32 z) {
  switch (cube_face(F(x), F(y), F(z))) { case 2: return z; case 3: return z ^ 0x80000000u; default: return y ^ 0x80000000u; }
}

/* ---- packed / dot helpers ---- */
static inline u32 sat_pk_u8_i16(u32 a) {
  i32 lo = (i16)a, hi = (i16)(a >> 16);
  lo = lo < 0 ? 0 : lo > 255 ? 255 : lo; hi = hi < 0 ? 0 : hi > 255 ? 255 : hi;
  return (u32)lo | (u32)hi << 8;
}
static inline u32 bf2f(u32 h) { return (h & 0xffffu) << 16; }
static inline u32 f2bf(u32 f) {   /* round to nearest even; NaN stays NaN (quieted) */
  if (nan32(f)) return ((f | 0x400000u) >> 16) & 0xffffu;
  return ((f + 0x7fffu + ((f >> 16) & 1)) >> 16) & 0xffffu;
}
static inline u32 med3_16(u32 a, u32 b, u32 c, int fi, int ieee) {
  a = ftz16(a, fi); b = ftz16(b, fi); c = ftz16(c, fi);
  if (nan16(a) || nan16(b) || nan16(c)) return minmax16(minmax16(a, b, 0, ieee, 0), c, 0, ieee, 0);
  u32 mx = minmax16(minmax16(a, b, 0, ieee, 1), c, 0, ieee, 1);
  if (mx == a) return minmax16(b, c, 0, ieee, 1);
  if (mx == b) return minmax16(a, c, 0, ieee, 1);
  return minmax16(a, b, 0, ieee, 1);
}
/* dot2: c + a.lo*b.lo + a.hi*b.hi; the f16 and bf16 products are exact in f32 */
static inline u32 dot2_f32_f16(u32 a, u32 b, u32 c, int fi, int fo) {
  u32 r = fma32(h2f(ftz16(a, fi)), h2f(ftz16(b, fi)), c, 0, 0);
  return fma32(h2f(ftz16(a >> 16, fi)), h2f(ftz16(b >> 16, fi)), r, 0, fo);
}
static inline u32 dot2_f32_bf16(u32 a, u32 b, u32 c, int fo) {
  u32 r = fma32(bf2f(a), bf2f(b), c, 0, 0);
  return fma32(bf2f(a >> 16), bf2f(b >> 16), r, 0, fo);
}
static inline u32 dot2_f16_f16(u32 a, u32 b, u32 c, int fi, int fo) {
  u32 r = dot2_f32_f16(a, b, h2f(ftz16(c, fi)), fi, 0);
  return nan32(r) ? nan3_16(a, b, c) : ftz16(f2h(r, 0), fo);
}
static inline u32 dot2_bf16_bf16(u32 a, u32 b, u32 c) { return f2bf(dot2_f32_bf16(a, b, bf2f(c), 0)); }
static inline u32 cvt_i16_f32(u32 a, int fi) { double x = F(ftz32(a, fi)); return x != x ? 0 : x >= 32767.0 ? 0x7fffu : x <= -32768.0 ? 0x8000u : (u32)(i32)x & 0xffffu; }
static inline u32 cvt_u16_f32(u32 a, int fi) { double x = F(ftz32(a, fi)); return x != x || x <= 0 ? 0 : x >= 65535.0 ? 0xffffu : (u32)x; }
/* V_QSAD_PK_U16_U8 / V_MQSAD_PK_U16_U8: four SADs of S1 against S0 shifted by 0-3 bytes, into 16-bit fields */
static inline u64 qsad_pk(u64 a, u32 b, u64 c, int masked) {
  u64 r = 0;
  for (int i = 0; i < 4; i++) {
    u32 win = (u32)(a >> (8 * i)), acc = (u32)(c >> (16 * i)) & 0xffffu;
    r |= (u64)((masked ? msad_u8(win, b, acc) : sad_u8(win, b, acc)) & 0xffffu) << (16 * i);
  }
  return r;
}
