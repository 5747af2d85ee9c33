/* Register access, memory access and stop reporting used by the compiled blocks.
   The generated file defines W (lanes per wave: 32 or 64) before including this. */
#include <stdint.h>
#include <string.h>
#include <math.h>
typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;
typedef int8_t i8; typedef int16_t i16; typedef int32_t i32; typedef int64_t i64;

enum { WAVE_RUN = 0, WAVE_BARRIER = 1, WAVE_END = 2 };
enum { STOP_NONE = 0, STOP_FAULT = 1, STOP_NOBLOCK = 2, STOP_TRAP = 3, STOP_HALT = 4, STOP_LIMIT = 5, STOP_ILLEGAL = 6 };
enum { SPACE_GLOBAL = 0, SPACE_SCRATCH = 1, SPACE_LDS = 2, SPACE_MISALIGNED = 3 };

#define S(n) (w->s[n])
#define V(r, l) (w->v[(r) * W + (l)])
#define VCC_LO 106
#define M0 125
#define EXEC_LO 126
#if W == 64
#define EXEC ((u64)w->s[126] | (u64)w->s[127] << 32)
#define VCC ((u64)w->s[106] | (u64)w->s[107] << 32)
#define SETMASK(r, m) do { u64 mask__ = (m); w->s[r] = (u32)mask__; w->s[(r) + 1] = (u32)(mask__ >> 32); } while (0)
#define LANEMASK(r) ((u64)w->s[r] | (u64)w->s[(r) + 1] << 32)
#else
#define EXEC ((u64)w->s[126])
#define VCC ((u64)w->s[106])
#define SETMASK(r, m) (w->s[r] = (u32)(m))
#define LANEMASK(r) ((u64)w->s[r])
#endif
#define LANES_ALL (W == 64 ? ~0ull : 0xffffffffull)
#define S64(n) ((u64)w->s[n] | (u64)w->s[(n) + 1] << 32)
#define SET64(n, x) do { u64 v64__ = (x); w->s[n] = (u32)v64__; w->s[(n) + 1] = (u32)(v64__ >> 32); } while (0)
#define V64(r, l) ((u64)V(r, l) | (u64)V((r) + 1, l) << 32)
#define SETV64(r, l, x) do { u64 v64__ = (x); V(r, l) = (u32)v64__; V((r) + 1, l) = (u32)(v64__ >> 32); } while (0)
/* MODE.FP_DENORM: bit 0 of each 2-bit field allows denormal inputs, bit 1 denormal outputs */
#define FI32 (!(w->mode & 0x10))
#define FO32 (!(w->mode & 0x20))
#define FI64 (!(w->mode & 0x40))
#define FO64 (!(w->mode & 0x80))
#define FI16 FI64
#define FO16 FO64
#define IEEE ((w->mode >> 9) & 1)
/* stop the dispatch from inside a block: the wave's pc points at the offending instruction */
#define STOP(code, pc_, arg) do { w->pc = (pc_); w->d->stop = (code); w->d->stop_arg = (arg); return; } while (0)
/* a memory helper already recorded the fault: leave the block with the pc at the faulting instruction */
#define FAIL(pc_) do { w->pc = (pc_); return; } while (0)
#define BASE (w->d->code_base)

/* ---- memory: a few cached host-backed runs, the Python callback on a miss ---- */
static int fault(wave_t *w, u64 addr, u32 space) {
  w->d->stop = STOP_FAULT; w->d->stop_addr = addr; w->d->stop_arg = space; return 0;
}
#define RUNS_OWNER dispatch_t
#include "emu/c/runs.h"
/* byte-wise fallback for an access that straddles two runs */
static int mem_bytes(wave_t *w, u64 a, u8 *buf, u32 n, int wr) {
  for (u32 i = 0; i < n; i++) {
    u8 *p = mem_at(w->d, a + i, 1, wr);
    if (!p) return fault(w, a + i, SPACE_GLOBAL);
    if (wr) *p = buf[i]; else buf[i] = *p;
  }
  return 1;
}
static inline int gld(wave_t *w, u64 a, void *dst, u32 n) {
  u8 *p = mem_at(w->d, a, n, 0);
  if (p) { memcpy(dst, p, n); return 1; }
  return mem_bytes(w, a, dst, n, 0);
}
static inline int gst(wave_t *w, u64 a, const void *src, u32 n) {
  u8 *p = mem_at(w->d, a, n, 1);
  if (p) { memcpy(p, src, n); return 1; }
  return mem_bytes(w, a, (u8 *)src, n, 1);
}
/* atomics must be naturally aligned and inside one run */
static inline u8 *gatom(wave_t *w, u64 a, u32 n) {
  if (a & (n - 1)) return fault(w, a, SPACE_MISALIGNED), (u8 *)0;
  u8 *p = mem_at(w->d, a, n, 1);
  if (!p) fault(w, a, SPACE_GLOBAL);
  return p;
}
/* private (scratch) memory: each lane owns scratch_per_lane bytes at offsets [0, scratch_per_lane) */
static inline u8 *sptr(wave_t *w, int lane, u64 off, u32 n) {
  u32 spl = w->d->scratch_per_lane;
  if (off > spl || spl - off < n) return fault(w, off, SPACE_SCRATCH), (u8 *)0;
  return w->scratch + (u64)lane * spl + off;
}
/* LDS: byte offsets [0, lds_bytes) of the workgroup's allocation */
static inline u8 *lptr(wave_t *w, u64 off, u32 n) {
  u32 sz = w->d->lds_bytes;
  if (off > sz || sz - off < n) return fault(w, off, SPACE_LDS), (u8 *)0;
  return w->d->lds + off;
}
/* flat: the shared and private apertures redirect to LDS and scratch, everything else is global */
static inline u8 *fptr(wave_t *w, int lane, u64 a, u32 n, int wr) {
  u32 hi = (u32)(a >> 32);
  if (hi == w->d->shared_hi) return lptr(w, (u32)a, n);
  if (hi == w->d->private_hi) return sptr(w, lane, (u32)a, n);
  u8 *p = mem_at(w->d, a, n, wr);
  if (!p) fault(w, a, SPACE_GLOBAL);
  return p;
}
static inline int fld(wave_t *w, int lane, u64 a, void *dst, u32 n) {
  u32 hi = (u32)(a >> 32);
  if (hi != w->d->shared_hi && hi != w->d->private_hi) return gld(w, a, dst, n);
  u8 *p = fptr(w, lane, a, n, 0); if (!p) return 0; memcpy(dst, p, n); return 1;
}
static inline int fst(wave_t *w, int lane, u64 a, const void *src, u32 n) {
  u32 hi = (u32)(a >> 32);
  if (hi != w->d->shared_hi && hi != w->d->private_hi) return gst(w, a, src, n);
  u8 *p = fptr(w, lane, a, n, 1); if (!p) return 0; memcpy(p, src, n); return 1;
}
static inline u8 *fatom(wave_t *w, int lane, u64 a, u32 n) {
  if (a & (n - 1)) return fault(w, a, SPACE_MISALIGNED), (u8 *)0;
  return fptr(w, lane, a, n, 1);
}
static inline u32 ld32(const u8 *p) { u32 x; memcpy(&x, p, 4); return x; }
static inline u64 ld64(const u8 *p) { u64 x; memcpy(&x, p, 8); return x; }
static inline void st32(u8 *p, u32 x) { memcpy(p, &x, 4); }
static inline void st64(u8 *p, u64 x) { memcpy(p, &x, 8); }
/* scratch and LDS through the same load/store shape as global memory */
static inline int sld(wave_t *w, int lane, u64 off, void *dst, u32 n) { u8 *p = sptr(w, lane, off, n); if (!p) return 0; memcpy(dst, p, n); return 1; }
static inline int sst(wave_t *w, int lane, u64 off, const void *src, u32 n) { u8 *p = sptr(w, lane, off, n); if (!p) return 0; memcpy(p, src, n); return 1; }
static inline int lld(wave_t *w, u64 off, void *dst, u32 n) { u8 *p = lptr(w, off, n); if (!p) return 0; memcpy(dst, p, n); return 1; }
static inline int lst(wave_t *w, u64 off, const void *src, u32 n) { u8 *p = lptr(w, off, n); if (!p) return 0; memcpy(p, src, n); return 1; }
static inline u8 *latom(wave_t *w, u64 off, u32 n) {
  if (off & (n - 1)) return fault(w, off, SPACE_MISALIGNED), (u8 *)0;
  return lptr(w, off, n);
}
