/* The PTX engine's C runtime: included by every compiled kernel (after state.h), which then defines BLOCKS[] and
   NBLOCKS. Memory access for the state spaces, float helpers for PTX's rounding rules, warp-level operations and the
   block scheduler. Lanes of a warp run in lockstep: a block function runs for the mask of lanes whose pc is that
   block (the scheduler always picks the smallest pc among the lanes that can run). */
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <fenv.h>
typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;
typedef int8_t i8; typedef int16_t i16; typedef int32_t i32; typedef int64_t i64;

enum { STOP_NONE = 0, STOP_FAULT = 1, STOP_LIMIT = 2, STOP_WARP = 3, STOP_TRAP = 4 };
/* state spaces of a faulting access (stop_arg bits 7:0; bit 8: write; bit 9: misaligned) */
enum { SP_GLOBAL = 0, SP_SHARED = 1, SP_LOCAL = 2, SP_PARAM = 3, SP_GENERIC = 4 };
/* warp-level errors (stop_arg of STOP_WARP) */
enum { WE_NOT_CONVERGED = 1, WE_NOT_MEMBER = 2 };

#define LANES 32
#define ON(l) ((M >> (l)) & 1)
#define R(T, off) ((T *)(w->regs + (off)))

static inline float uf(u32 x) { float f; memcpy(&f, &x, 4); return f; }
static inline u32 fu(float f) { u32 x; memcpy(&x, &f, 4); return x; }
static inline double ud(u64 x) { double f; memcpy(&f, &x, 8); return f; }
static inline u64 du(double f) { u64 x; memcpy(&x, &f, 8); return x; }

/* ---- stops ---- */
static int fault(warp_t *w, int l, u64 a, u32 space, int wr, int misaligned, u32 inst) {
  launch_t *d = w->d;
  d->stop = STOP_FAULT; d->stop_addr = a; d->stop_arg = space | (u32)wr << 8 | (u32)misaligned << 9;
  d->stop_warp = w->id; d->stop_lane = l; d->stop_inst = inst;
  return 0;
}
static void warp_error(warp_t *w, u32 code, u64 arg, u32 inst) {
  launch_t *d = w->d;
  d->stop = STOP_WARP; d->stop_arg = code; d->stop_addr = arg; d->stop_warp = w->id; d->stop_inst = inst;
}

/* ---- memory: global through a few cached host-backed runs, the Python callback on a miss ---- */
#define RUNS_OWNER launch_t
#include "emu/c/runs.h"
/* host pointer for an n-byte access at address a of `space` by lane l, or 0 (fault recorded). PTX requires natural
   alignment of every access (ISA "Addresses as Operands"); a misaligned one faults as on the hardware. */
static u8 *addr(warp_t *w, int l, u32 space, u64 a, u32 n, int wr, u32 inst) {
  launch_t *d = w->d;
  if (a & (n - 1)) return fault(w, l, a, space, wr, 1, inst), (u8 *)0;
  u32 sp = space;
  u64 off = a;
  if (space == SP_GENERIC) {
    if (a - d->shared_window < d->shared_bytes) { sp = SP_SHARED; off = a - d->shared_window; }
    else if (a - d->local_window < d->local_bytes) { sp = SP_LOCAL; off = a - d->local_window; }
    else sp = SP_GLOBAL;
  }
  u8 *p = 0;
  switch (sp) {
    case SP_GLOBAL:
      if (off - d->globals_window < d->globals_bytes) {   /* a module-level .global variable: the program's copy */
        if (d->globals_bytes - (off - d->globals_window) >= n) p = d->globals + (off - d->globals_window);
      } else p = mem_at(d, off, n, wr);
      break;
    case SP_SHARED: if (off < d->shared_bytes && d->shared_bytes - off >= n) p = d->shared + off; break;
    case SP_LOCAL: if (off < d->local_bytes && d->local_bytes - off >= n) p = w->local + (u64)l * d->local_bytes + off; break;
    case SP_PARAM: if (!wr && off < d->param_bytes && d->param_bytes - off >= n) p = d->params + off; break;
  }
  if (!p) fault(w, l, a, space, wr, 0, inst);
  return p;
}

/* ---- floating point (ISA "Floating-Point Instructions") ---- */
#define NAN32 0x7fffffffu       /* the canonical NaN PTX returns */
#define NAN64 0x7fffffffffffffffull
#define NAN16 0x7fffu
static inline float ftz32(float x) { return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }
static inline float sat32(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline double sat64(double x) { return x != x ? 0.0 : x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x; }
/* min/max: a NaN operand is ignored (both NaN: canonical NaN); -0.0 < +0.0. nanp: the .NaN variant propagates NaN */
#define FMINMAX(name, T, NANV, op, zeros) static inline T name(T a, T b, int nanp) { \
  if (a != a || b != b) return (nanp || (a != a && b != b)) ? NANV : a != a ? b : a; \
  if (a == b) return zeros; \
  return a op b ? a : b; }
FMINMAX(min32, float, uf(NAN32), <, signbit(a) ? a : b)
FMINMAX(max32, float, uf(NAN32), >, signbit(a) ? b : a)
FMINMAX(min64, double, ud(NAN64), <, signbit(a) ? a : b)
FMINMAX(max64, double, ud(NAN64), >, signbit(a) ? b : a)
/* rounding modes of the IEEE rounding modifiers */
enum { RN = 0, RZ = 1, RM = 2, RP = 3, RNA = 4 };
/* Round x (+ err, the exact remainder of a two-term result; 0 when x is exact) to a binary format with p significand
   bits and `ebits` exponent bits, in rounding mode `mode`; returns the encoding. NaN -> canonical NaN. `satfinite`:
   overflow gives the largest finite value (and NaN stays NaN). Used for f16 / bf16 / f32 results. */
static u32 dround(double x, double err, int p, int ebits, int mode, int satfinite) {
  u32 sign = signbit(x) ? 1u : 0u, mbits = p - 1, bias = (1u << (ebits - 1)) - 1;
  u32 inf = ((1u << ebits) - 1) << mbits, maxf = inf - 1, sb = sign << (ebits + mbits);
  if (x != x) return ((1u << (ebits + mbits)) - 1);
  double a = fabs(x);
  if (a == INFINITY) return sb | (satfinite ? maxf : inf);
  if (a == 0 && err == 0) return sb;
  if (a == 0) { sign = err < 0; sb = sign << (ebits + mbits); }
  int e; frexp(a ? a : fabs(err), &e);
  int E = e - 1, emin = 1 - (int)bias;
  if (E < emin) E = emin;
  double q = ldexp(1.0, E - (int)mbits);
  double n = a / q, fl = floor(n), fr = n - fl;
  /* the exact value is x + err: nudge off a tie or an exact point in err's direction (err is tiny next to q) */
  if (err != 0 && (fr == 0 || fr == 0.5)) { n += (signbit(err) == signbit(x) || a == 0) ? 0.25 : -0.25; fl = floor(n); fr = n - fl; }
  int up;
  switch (mode) {
    case RZ: up = 0; break;
    case RM: up = sign && fr > 0; break;
    case RP: up = !sign && fr > 0; break;
    case RNA: up = fr >= 0.5; break;
    default: up = fr > 0.5 || (fr == 0.5 && fmod(fl, 2.0) != 0); break;
  }
  double m = fl + up;                               /* integer significand at quantum q */
  if (m >= ldexp(1.0, p)) { m /= 2; E += 1; }       /* rounding carried into the next binade */
  if (m < ldexp(1.0, mbits)) return sb | (u32)m;   /* subnormal (or zero) */
  if (E + (int)bias >= (int)((1u << ebits) - 1)) { /* overflow */
    int to_inf = !satfinite && (mode == RN || mode == RNA || (mode == RP && !sign) || (mode == RM && sign));
    return sb | (to_inf ? inf : maxf);
  }
  return sb | (u32)(E + bias) << mbits | ((u32)m & ((1u << mbits) - 1));
}
static inline float h2f(u16 h) {               /* f16 -> f32, exact */
  u32 s = (u32)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return uf(s | 0x7f800000u | m << 13);
  if (e == 0) return uf(s) + (s ? -1.0f : 1.0f) * ldexpf((float)m, -24);
  return uf(s | (e + 112) << 23 | m << 13);
}
static inline float b2f(u16 h) { return uf((u32)h << 16); }   /* bf16 -> f32, exact */
static inline u16 f2h(double x, int mode) { return (u16)dround(x, 0, 11, 5, mode, 0); }
static inline u16 f2b(double x, int mode) { return (u16)dround(x, 0, 8, 8, mode, 0); }
static inline u16 ftz16(u16 h) { return (h & 0x7c00) == 0 ? (u16)(h & 0x8000) : h; }
static inline u16 ftzb16(u16 h) { return (h & 0x7f80) == 0 ? (u16)(h & 0x8000) : h; }
/* exact sum of two doubles as s + err (Knuth's TwoSum) */
static inline double two_sum(double a, double b, double *err) {
  double s = a + b, bb = s - a; *err = (a - (s - bb)) + (b - bb); return s;
}
static inline float relu32(float x) { return x != x ? uf(NAN32) : x < 0 ? 0.0f : x; }
static inline double relu64(double x) { return x != x ? x : x < 0 ? 0.0 : x; }
/* f16 / bf16 arithmetic: computed exactly (s + err) in double, rounded once to nearest even */
enum { H_ADD, H_SUB, H_MUL, H_FMA, H_MIN, H_MAX, H_NEG, H_ABS, H_EX2, H_TANH };
static inline u16 hop(int op, u16 a, u16 b, u16 c, int bf, int ftz, int sat, int nanp) {
  if (ftz) { a = bf ? ftzb16(a) : ftz16(a); b = bf ? ftzb16(b) : ftz16(b); c = bf ? ftzb16(c) : ftz16(c); }
  if (op == H_NEG) return a ^ 0x8000;
  if (op == H_ABS) return a & 0x7fff;
  float x = bf ? b2f(a) : h2f(a), y = bf ? b2f(b) : h2f(b), z = bf ? b2f(c) : h2f(c);
  if (op == H_MIN || op == H_MAX) {
    float m = op == H_MIN ? min32(x, y, nanp) : max32(x, y, nanp);
    if (m != m) return NAN16;
    return (m == x && signbit(m) == signbit(x)) ? a : b;
  }
  double s, err = 0;
  switch (op) {
    case H_ADD: s = two_sum(x, y, &err); break;
    case H_SUB: s = two_sum(x, -(double)y, &err); break;
    case H_MUL: s = (double)x * y; break;
    case H_EX2: s = exp2f(x); break;
    case H_TANH: s = tanhf(x); break;
    default: s = two_sum((double)x * y, z, &err); break;
  }
  u16 r = (u16)dround(s, err, bf ? 8 : 11, bf ? 8 : 5, RN, 0);
  if (ftz) r = bf ? ftzb16(r) : ftz16(r);
  if (sat) { float v = h2f(r); r = v != v || v <= 0 ? 0 : v >= 1 ? 0x3c00 : r; }
  return r;
}
static inline i64 sat_s32(i64 x) { return x < INT32_MIN ? INT32_MIN : x > INT32_MAX ? INT32_MAX : x; }
/* float -> integer with rounding `mode` (RN: nearest even), saturating to [lo, hi]; NaN -> 0 (ISA "cvt") */
static inline double fround(double x, int mode) {
  return mode == RZ ? trunc(x) : mode == RM ? floor(x) : mode == RP ? ceil(x) : nearbyint(x);
}
static inline i64 f2i(double x, int mode, double lo, double hi) {
  if (x != x) return 0;
  x = fround(x, mode);
  return x <= lo ? (i64)lo : x >= hi ? (i64)hi : (i64)x;
}
static inline u64 f2u64(double x, int mode) {
  if (x != x) return 0;
  x = fround(x, mode);
  return x <= 0 ? 0 : x >= 0x1p64 ? ~0ull : (u64)x;
}
static inline i64 f2s64(double x, int mode) {
  if (x != x) return 0;
  x = fround(x, mode);
  return x <= -0x1p63 ? INT64_MIN : x >= 0x1p63 ? INT64_MAX : (i64)x;
}
static int testp(double x, int what, int f32) {   /* testp: finite, infinite, number, notanumber, normal, subnormal */
  double a = fabs(x);
  switch (what) {
    case 0: return a < INFINITY;
    case 1: return a == INFINITY;
    case 2: return x == x;
    case 3: return x != x;
    case 4: return a >= (f32 ? 0x1p-126 : 0x1p-1022) && a < INFINITY;
    default: return a > 0 && a < (f32 ? 0x1p-126 : 0x1p-1022);
  }
}

/* ---- integer (ISA "Integer Arithmetic Instructions") ---- */
/* bfe: bits [pos, pos+len) of the `bits`-wide a, filled above with 0 (unsigned) or the field's top bit (signed) */
static inline u64 bfe(u64 a, u32 pos, u32 len, int sgn, u32 bits) {
  pos &= 0xff; len &= 0xff;
  u32 msb = bits - 1;
  int sbit = sgn ? (len == 0 ? 0 : (int)((pos + len - 1 > msb ? a >> msb : a >> (pos + len - 1)) & 1)) : 0;
  u64 r = 0;
  for (u32 i = 0; i < bits; i++) r |= (u64)(i < len && pos + i <= msb ? (a >> (pos + i)) & 1 : sbit) << i;
  return r;
}
static inline u64 bfi(u64 a, u64 b, u32 pos, u32 len, u32 bits) {
  pos &= 0xff; len &= 0xff;
  u64 r = b;
  for (u32 i = 0; i < len && pos + i < bits; i++) r = (r & ~(1ull << (pos + i))) | (((a >> i) & 1) << (pos + i));
  return r;
}
static inline u32 brev32(u32 x) { u32 r = 0; for (int i = 0; i < 32; i++) r |= ((x >> i) & 1) << (31 - i); return r; }
static inline u64 brev64(u64 x) { u64 r = 0; for (int i = 0; i < 64; i++) r |= ((x >> i) & 1) << (63 - i); return r; }
static inline u32 prmt(u32 a, u32 b, u32 c) {    /* prmt.b32 default mode: each selector nibble picks a byte */
  u64 v = (u64)b << 32 | a; u32 r = 0;
  for (int i = 0; i < 4; i++) {
    u32 s = (c >> (4 * i)) & 0xf; u32 byte = (v >> (8 * (s & 7))) & 0xff;
    if (s & 8) byte = (byte & 0x80) ? 0xff : 0;
    r |= byte << (8 * i);
  }
  return r;
}

/* lanes of M whose predicate register (at byte offset off) is set (neg: clear) */
static inline u32 pmask(warp_t *w, u32 M, u32 off, int neg) {
  u32 m = 0;
  for (int l = 0; l < LANES; l++) m |= (u32)(ON(l) && (R(u8, off)[l] != 0) != neg) << l;
  return m;
}

/* ---- warp-level (ISA "Parallel Synchronization and Communication Instructions") ---- */
/* every lane named in a .sync membermask must execute the instruction together with the executing lanes */
static int check_members(warp_t *w, u32 M, const u32 *mm, u32 inst) {
  for (int l = 0; l < LANES; l++) {
    if (!ON(l)) continue;
    if (!((mm[l] >> l) & 1)) { warp_error(w, WE_NOT_MEMBER, mm[l], inst); return 0; }
    if (mm[l] & w->live & ~M) { warp_error(w, WE_NOT_CONVERGED, mm[l] & w->live & ~M, inst); return 0; }
  }
  return 1;
}
/* shfl.sync mode: 0 up, 1 down, 2 bfly, 3 idx. c packs the clamp value [4:0] and the segment mask [12:8]. */
static void shfl(u32 M, int mode, const u32 *a, const u32 *b, const u32 *c, u32 *d, u8 *p) {
  for (int l = 0; l < LANES; l++) {
    if (!ON(l)) continue;
    u32 bv = b[l] & 0x1f, cv = c[l] & 0x1f, seg = (c[l] >> 8) & 0x1f;
    u32 maxl = ((u32)l & seg) | (cv & ~seg), minl = (u32)l & seg;
    int j, ok;
    switch (mode) {
      case 0: j = l - (int)bv; ok = j >= (int)maxl; break;
      case 1: j = l + (int)bv; ok = j <= (int)maxl; break;
      case 2: j = l ^ (int)bv; ok = j <= (int)maxl; break;
      default: j = (int)(minl | (bv & ~seg)); ok = j <= (int)maxl; break;
    }
    if (!ok) j = l;
    d[l] = a[j]; p[l] = (u8)ok;
  }
}

/* ---- the scheduler ---- */
enum { RED_NONE = 0, RED_POPC = 1, RED_AND = 2, RED_OR = 3 };
/* bar.red: lanes M arrive with predicate bits p (one per lane) */
static void bar_red(warp_t *w, u32 M, u32 p, u32 kind, u32 off) {
  launch_t *d = w->d;
  d->red_count += __builtin_popcount(p & M); d->red_all &= (p & M) == M; d->red_any |= (p & M) != 0;
  w->red_kind = kind; w->red_off = off; w->bar |= M;
}
/* the barrier released: every warp waiting in bar.red gets the block-wide result */
static void bar_red_release(launch_t *d) {
  for (u32 i = 0; i < d->nwarps; i++) {
    warp_t *w = &d->warps[i];
    if (!w->red_kind) continue;
    for (int l = 0; l < LANES; l++) {
      if (!((w->bar >> l) & 1)) continue;
      if (w->red_kind == RED_POPC) R(u32, w->red_off)[l] = d->red_count;
      else R(u8, w->red_off)[l] = w->red_kind == RED_AND ? d->red_all : d->red_any;
    }
    w->red_kind = 0;
  }
  d->red_count = 0; d->red_all = 1; d->red_any = 0;
}
typedef void (*block_fn)(warp_t *, u32);
static const block_fn BLOCKS[];
static int run_warp(warp_t *w) {
  launch_t *d = w->d;
  for (;;) {
    u32 act = w->live & ~w->bar;
    if (!act) return 0;
    u32 pc = 0xffffffffu, M = 0;
    for (int l = 0; l < LANES; l++) if ((act >> l) & 1 && w->pc[l] < pc) pc = w->pc[l];
    for (int l = 0; l < LANES; l++) if ((act >> l) & 1 && w->pc[l] == pc) M |= 1u << l;
    BLOCKS[pc](w, M);
    if (d->stop) return -1;
    if (d->max_instructions && d->instructions > d->max_instructions) { d->stop = STOP_LIMIT; d->stop_warp = w->id; return -1; }
  }
}
/* Run blocks from d->cta on; returns 0 when the grid is done, else the stop code (d->cta is the block that stopped). */
int launch_run(launch_t *d) {
  u64 nctas = (u64)d->grid[0] * d->grid[1] * d->grid[2];
  u32 nthreads = d->block[0] * d->block[1] * d->block[2];
  for (; d->cta < nctas; d->cta++) {
    u64 c = d->cta;
    d->ctaid[0] = c % d->grid[0]; d->ctaid[1] = (c / d->grid[0]) % d->grid[1]; d->ctaid[2] = c / ((u64)d->grid[0] * d->grid[1]);
    memset(d->shared, 0, d->shared_bytes);
    d->red_count = 0; d->red_all = 1; d->red_any = 0;
    memset(d->regs, 0, (size_t)d->reg_bytes * d->nwarps);
    memset(d->local, 0, (size_t)d->local_bytes * LANES * d->nwarps);
    for (u32 i = 0; i < d->nwarps; i++) {
      warp_t *w = &d->warps[i];
      w->d = d; w->id = i; w->bar = 0; w->live = 0; w->red_kind = 0;
      w->regs = d->regs + (size_t)i * d->reg_bytes;
      w->local = d->local + (size_t)i * d->local_bytes * LANES;
      for (int l = 0; l < LANES; l++) {
        u32 t = i * LANES + l;
        w->pc[l] = 0;
        w->tid[0][l] = t % d->block[0]; w->tid[1][l] = (t / d->block[0]) % d->block[1]; w->tid[2][l] = t / (d->block[0] * d->block[1]);
        if (t < nthreads) w->live |= 1u << l;
      }
    }
    /* bar.sync: each warp runs until all its live lanes wait at a barrier or have exited; then all are released */
    for (;;) {
      int waiting = 0;
      for (u32 i = 0; i < d->nwarps; i++) {
        if (run_warp(&d->warps[i])) return d->stop;
        waiting |= d->warps[i].live != 0;
      }
      if (!waiting) break;
      bar_red_release(d);
      for (u32 i = 0; i < d->nwarps; i++) d->warps[i].bar = 0;
    }
  }
  return 0;
}
