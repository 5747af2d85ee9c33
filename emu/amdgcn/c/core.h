/* Register access, memory access and stop reporting used by the compiled blocks.
   The generated file defines W (lanes per wave: 32 or 64) before including this. */
#include <stdint.h>
#include <string.h>
#include <math.h>
typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;
typedef int8_t i8; typedef int16_t i16; typedef int32_t i32; typedef int64_t i64;

enum { WAVE_RUN = 0, WAVE_BARRIER = 1, WAVE_END = 2 };
enum { STOP_NONE = 0, STOP_FAULT = 1, STOP_NOBLOCK = 2, STOP_TRAP = 3, STOP_HALT = 4, STOP_LIMIT = 5, STOP_ILLEGAL = 6, STOP_TRACE = 7 };
enum { SPACE_GLOBAL = 0, SPACE_SCRATCH = 1, SPACE_LDS = 2, SPACE_MISALIGNED = 3, SPACE_SCRATCH_BACKING = 4 };

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
/* scalar loads (SMEM) read through runs of their own, which the miss callback fills with write = 2: a GPU model hands
   out its scalar data cache (K$) there, whose lines stay as they were until the cache is invalidated */
static u8 *klookup(dispatch_t *d, u64 a, u32 n) {
  for (int i = 0; i < 4; i++) {
    range_t *r = &d->kranges[i]; u64 off = a - r->va;
    if (off < r->len && r->len - off >= n) {
      if (i) { range_t t = d->kranges[0]; d->kranges[0] = *r; *r = t; }
      return d->kranges[0].host + off;
    }
  }
  if (!d->miss || d->miss(d, a, 2)) return 0;
  memmove(&d->kranges[1], &d->kranges[0], 3 * sizeof(range_t));
  d->kranges[0] = d->fill;
  u64 off = a - d->fill.va;
  return off < d->fill.len && d->fill.len - off >= n ? d->fill.host + off : 0;
}
/* n bytes (whole dwords, dword aligned) by a scalar load; one that straddles two runs goes dword by dword */
static int kld(wave_t *w, u64 a, void *dst, u32 n) {
  u8 *p = klookup(w->d, a, n);
  if (p) { memcpy(dst, p, n); return 1; }
  for (u32 i = 0; i < n; i += 4) {
    u8 *q = klookup(w->d, a + i, 4);
    if (!q) return fault(w, a + i, SPACE_GLOBAL);
    memcpy((u8 *)dst + i, q, 4);
  }
  return 1;
}
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
/* private (scratch) memory: each lane owns scratch_per_lane bytes at offsets [0, scratch_per_lane), kept in the wave's
   slot of the driver's scratch ring (GPU memory, through the MMU). The slot is swizzled in dwords (element size 4,
   index stride W, as the scratch buffer resource describes it): byte b of dword k of lane l is at
   scratch + (k * W + l) * 4 + b, so an access is split at dword boundaries */
static int sacc(wave_t *w, int lane, u64 off, u8 *buf, u32 n, int wr) {
  dispatch_t *d = w->d;
  u32 spl = d->scratch_per_lane;
  if (off > spl || spl - off < n) return fault(w, off, SPACE_SCRATCH);
  if (!w->scratch_host) w->scratch_host = mem_lookup(d, w->scratch, d->scratch_wave_bytes, 1);
  u8 *h = w->scratch_host;
  if (h && !((off | n) & 3)) {   /* whole dwords: W * 4 bytes apart */
    u8 *p = h + ((off >> 2) * W + (u64)lane) * 4;
    for (u32 i = 0; i < n; i += 4, p += 4 * W) { if (wr) memcpy(p, buf + i, 4); else memcpy(buf + i, p, 4); }
    return 1;
  }
  while (n) {
    u32 b = off & 3, k = 4 - b < n ? 4 - b : n;
    u64 rel = ((off >> 2) * W + (u64)lane) * 4 + b;
    u8 *p = h ? h + rel : mem_at(d, w->scratch + rel, k, wr);
    if (!p) return fault(w, w->scratch + rel, SPACE_SCRATCH_BACKING);
    if (wr) memcpy(p, buf, k); else memcpy(buf, p, k);
    buf += k; off += k; n -= k;
  }
  return 1;
}
/* LDS: byte offsets [0, lds_bytes) of the workgroup's allocation */
static inline u8 *lptr(wave_t *w, u64 off, u32 n) {
  u32 sz = w->d->lds_bytes;
  if (off > sz || sz - off < n) return fault(w, off, SPACE_LDS), (u8 *)0;
  return w->d->lds + off;
}
/* flat: the shared and private apertures redirect to LDS and scratch, everything else is global (fptr: LDS or global;
   the private aperture goes through sacc) */
static inline u8 *fptr(wave_t *w, u64 a, u32 n, int wr) {
  if ((u32)(a >> 32) == w->d->shared_hi) return lptr(w, (u32)a, n);
  u8 *p = mem_at(w->d, a, n, wr);
  if (!p) fault(w, a, SPACE_GLOBAL);
  return p;
}
static inline int fld(wave_t *w, int lane, u64 a, void *dst, u32 n) {
  u32 hi = (u32)(a >> 32);
  if (hi == w->d->private_hi) return sacc(w, lane, (u32)a, dst, n, 0);
  if (hi != w->d->shared_hi) return gld(w, a, dst, n);
  u8 *p = fptr(w, a, n, 0); if (!p) return 0; memcpy(dst, p, n); return 1;
}
static inline int fst(wave_t *w, int lane, u64 a, const void *src, u32 n) {
  u32 hi = (u32)(a >> 32);
  if (hi == w->d->private_hi) return sacc(w, lane, (u32)a, (u8 *)src, n, 1);
  if (hi != w->d->shared_hi) return gst(w, a, src, n);
  u8 *p = fptr(w, a, n, 1); if (!p) return 0; memcpy(p, src, n); return 1;
}
static inline u8 *fatom(wave_t *w, u64 a, u32 n) {
  if (a & (n - 1)) return fault(w, a, SPACE_MISALIGNED), (u8 *)0;
  return fptr(w, a, n, 1);
}
static inline u32 ld32(const u8 *p) { u32 x; memcpy(&x, p, 4); return x; }
static inline u64 ld64(const u8 *p) { u64 x; memcpy(&x, p, 8); return x; }
static inline void st32(u8 *p, u32 x) { memcpy(p, &x, 4); }
static inline void st64(u8 *p, u64 x) { memcpy(p, &x, 8); }
/* scratch and LDS through the same load/store shape as global memory */
static inline int sld(wave_t *w, int lane, u64 off, void *dst, u32 n) { return sacc(w, lane, off, dst, n, 0); }
static inline int sst(wave_t *w, int lane, u64 off, const void *src, u32 n) { return sacc(w, lane, off, (u8 *)src, n, 1); }
static inline int lld(wave_t *w, u64 off, void *dst, u32 n) { u8 *p = lptr(w, off, n); if (!p) return 0; memcpy(dst, p, n); return 1; }
static inline int lst(wave_t *w, u64 off, const void *src, u32 n) { u8 *p = lptr(w, off, n); if (!p) return 0; memcpy(p, src, n); return 1; }
static inline u8 *latom(wave_t *w, u64 off, u32 n) {
  if (off & (n - 1)) return fault(w, off, SPACE_MISALIGNED), (u8 *)0;
  return lptr(w, off, n);
}
