/* Vector memory operations over the lanes of a wave, in lane order (deterministic atomics). Addresses are
   computed first for every lane; a fault stops at the first faulting lane (the helpers in core.h record it)
   and the function returns 0. space: where the addresses point. */
enum { SP_GLOBAL = 0, SP_FLAT = 1, SP_SCRATCH = 2, SP_LDS = 3 };
/* atomic operations; the order matches gen_memory.ATOMICS */
enum { A_SWAP, A_ADD, A_SUB, A_RSUB, A_AND, A_OR, A_XOR, A_INC, A_DEC, A_CSUB, A_MSKOR, A_CMPSWAP, A_MIN_I, A_MAX_I,
       A_MIN_U, A_MAX_U, A_ADD_F32, A_MIN_F32, A_MAX_F32, A_CMPSWAP_F32, A_MIN_F64, A_MAX_F64, A_CMPSWAP_F64 };

/* GLOBAL: saddr < 0 -> 64-bit VGPR address, else SGPR-pair base + 32-bit VGPR offset; plus the signed offset */
void a_global(u64 *a, const wave_t *w, u32 vaddr, i32 saddr, i64 off) {
  if (saddr < 0) for (int l = 0; l < W; l++) a[l] = V64(vaddr, l) + (u64)off;
  else { u64 base = S64(saddr) + (u64)off; for (int l = 0; l < W; l++) a[l] = base + V(vaddr, l); }
}
/* SCRATCH: offset into each lane's private memory (vaddr < 0: no VGPR term, SVE = 0) */
void a_scratch(u64 *a, const wave_t *w, i32 vaddr, u32 sval, i64 off) {
  for (int l = 0; l < W; l++) a[l] = (u32)((vaddr >= 0 ? V(vaddr, l) : 0) + sval + (u32)off);
}
void a_ds(u64 *a, const wave_t *w, u32 vaddr, u32 off) { for (int l = 0; l < W; l++) a[l] = (u64)V(vaddr, l) + off; }
/* MUBUF with the buffer resource in s[r:r+3]: base [47:0], stride [61:48], num_records [95:64], OOB_SELECT [125:124];
   *in = lanes inside the buffer (0: structured index+offset, 1: index, 2: num_records != 0, 3: raw offset range).
   Returns 0 for a swizzled resource (not modelled). */
int a_buffer(u64 *a, u64 *in, const wave_t *w, u32 r, i32 idx, i32 voff, u32 ioff, u32 soff, u32 n) {
  u64 base = S64(r) & 0xffffffffffffull; u32 stride = (S(r + 1) >> 16) & 0x3fff, nr = S(r + 2), oob = (S(r + 3) >> 28) & 3;
  if (S(r + 1) >> 30) return 0;
  u64 m = 0;
  for (int l = 0; l < W; l++) {
    u32 ix = idx >= 0 ? V(idx, l) : 0; u64 o = (u64)(voff >= 0 ? V(voff, l) : 0) + ioff;
    int out = oob == 3 ? o + (u64)ix * stride + n > nr : oob == 2 ? nr == 0 : oob == 1 ? ix >= nr : (ix >= nr || (stride && o >= stride));
    a[l] = base + soff + o + (u64)ix * stride;
    m |= (u64)!out << l;
  }
  *in = m;
  return 1;
}

static int ld_any(wave_t *w, u32 space, int l, u64 a, void *dst, u32 n) {
  switch (space) {
    case SP_GLOBAL: return gld(w, a, dst, n);
    case SP_FLAT: return fld(w, l, a, dst, n);
    case SP_SCRATCH: return sld(w, l, a, dst, n);
    default: return lld(w, a, dst, n);
  }
}
static int st_any(wave_t *w, u32 space, int l, u64 a, const void *src, u32 n) {
  switch (space) {
    case SP_GLOBAL: return gst(w, a, src, n);
    case SP_FLAT: return fst(w, l, a, src, n);
    case SP_SCRATCH: return sst(w, l, a, src, n);
    default: return lst(w, a, src, n);
  }
}
/* the lane loops are instantiated per (space, size) so the common case is an inline range check and a
   fixed-size copy; anything else (a straddled run, an aperture, a miss) takes the general path */
static inline __attribute__((always_inline)) u8 *fast_ptr(wave_t *w, u32 space, u64 a, u32 n, int wr) {
  if (space == SP_GLOBAL) { range_t *r = &w->d->ranges[0]; u64 off = a - r->va; if (off < r->len && r->len - off >= n && (!wr || r->writable)) return r->host + off; }
  if (space == SP_LDS) { u32 sz = w->d->lds_bytes; if (a <= sz && sz - a >= n) return w->d->lds + a; }
  return 0;
}
static inline __attribute__((always_inline)) int load_lanes(wave_t *w, u32 space, const u64 *a, u32 *t, u32 n, u32 sign, u64 m) {
  for (int l = 0; l < W; l++) {
    if (!((m >> l) & 1)) continue;
    u32 buf[4] = {0, 0, 0, 0};
    u8 *p = fast_ptr(w, space, a[l], n, 0);
    if (p) memcpy(buf, p, n);
    else if (!ld_any(w, space, l, a[l], buf, n)) return 0;
    if (n == 1 && sign) buf[0] = (u32)(i32)(i8)buf[0];
    if (n == 2 && sign) buf[0] = (u32)(i32)(i16)buf[0];
    for (u32 i = 0; i < (n + 3) / 4; i++) t[i * W + l] = buf[i];
  }
  return 1;
}
static inline __attribute__((always_inline)) int store_lanes(wave_t *w, u32 space, const u64 *a, u32 data, u32 n, u32 hi16, u64 m) {
  for (int l = 0; l < W; l++) {
    if (!((m >> l) & 1)) continue;
    u32 buf[4];
    for (u32 i = 0; i < (n + 3) / 4; i++) buf[i] = V(data + i, l);
    if (hi16) buf[0] >>= 16;
    u8 *p = fast_ptr(w, space, a[l], n, 1);
    if (p) memcpy(p, buf, n);
    else if (!st_any(w, space, l, a[l], buf, n)) return 0;
  }
  return 1;
}
#define BY_SIZE(f, space, ...) switch (n) { case 1: return f(w, space, a, __VA_ARGS__, 1); case 2: return f(w, space, a, __VA_ARGS__, 2); \
  case 4: return f(w, space, a, __VA_ARGS__, 4); case 8: return f(w, space, a, __VA_ARGS__, 8); case 12: return f(w, space, a, __VA_ARGS__, 12); \
  default: return f(w, space, a, __VA_ARGS__, 16); }
static inline __attribute__((always_inline)) int load_sz(wave_t *w, u32 space, const u64 *a, u32 *t, u32 sign, u64 m, u32 n) { return load_lanes(w, space, a, t, n, sign, m); }
static inline __attribute__((always_inline)) int store_sz(wave_t *w, u32 space, const u64 *a, u32 data, u32 hi16, u64 m, u32 n) { return store_lanes(w, space, a, data, n, hi16, m); }
/* scratch of whole dwords at one offset for every lane (the usual case): dword i of the lanes is W consecutive dwords
   of the swizzled slot; a store writes them at once only when every lane is active. Returns 0 if the case does not
   apply (the lane loop then handles it) */
static u8 *scratch_row(wave_t *w, const u64 *a, u32 n, u64 m) {
  if (!m || (n & 3)) return 0;
  u64 off = a[__builtin_ctzll(m)];
  for (int l = 0; l < W; l++) if (((m >> l) & 1) && a[l] != off) return 0;
  dispatch_t *d = w->d;
  if ((off & 3) || off > d->scratch_per_lane || d->scratch_per_lane - off < n) return 0;
  if (!w->scratch_host) w->scratch_host = mem_lookup(d, w->scratch, d->scratch_wave_bytes, 1);
  return w->scratch_host ? w->scratch_host + (off >> 2) * W * 4 : 0;
}
/* n bytes per lane into t (dword i of lane l at t[i * W + l]); 1- and 2-byte loads are sign- or zero-extended */
int m_load(wave_t *w, u32 space, const u64 *a, u32 *t, u32 n, u32 sign, u64 m) {
  u8 *row = space == SP_SCRATCH ? scratch_row(w, a, n, m) : 0;
  if (row) { memcpy(t, row, n * W); return 1; }
  if (space == SP_GLOBAL) { BY_SIZE(load_sz, SP_GLOBAL, t, sign, m) }
  if (space == SP_LDS) { BY_SIZE(load_sz, SP_LDS, t, sign, m) }
  return load_lanes(w, space, a, t, n, sign, m);
}
/* n bytes per lane from VGPRs data..; hi16: a D16_HI store takes the register's high half */
int m_store(wave_t *w, u32 space, const u64 *a, u32 data, u32 n, u32 hi16, u64 m) {
  u8 *row = space == SP_SCRATCH && m == LANES_ALL ? scratch_row(w, a, n, m) : 0;
  if (row) { memcpy(row, &V(data, 0), n * W); return 1; }
  if (space == SP_GLOBAL) { BY_SIZE(store_sz, SP_GLOBAL, data, hi16, m) }
  if (space == SP_LDS) { BY_SIZE(store_sz, SP_LDS, data, hi16, m) }
  return store_lanes(w, space, a, data, n, hi16, m);
}
static u64 atomic_new(u32 op, u64 o, u64 x, u64 y, int b64) {
  switch (op) {
    case A_SWAP: return x;
    case A_ADD: return o + x;
    case A_SUB: return o - x;
    case A_RSUB: return x - o;
    case A_AND: return o & x;
    case A_OR: return o | x;
    case A_XOR: return o ^ x;
    case A_INC: return o >= x ? 0 : o + 1;                               /* fact 44 */
    case A_DEC: return (o == 0 || o > x) ? x : o - 1;
    case A_CSUB: return o > x ? o - x : 0;
    case A_MSKOR: return (o & ~x) | y;
    case A_CMPSWAP: return o == y ? x : o;
    case A_MIN_I: return b64 ? ((i64)o < (i64)x ? o : x) : ((i32)o < (i32)x ? o : x);
    case A_MAX_I: return b64 ? ((i64)o > (i64)x ? o : x) : ((i32)o > (i32)x ? o : x);
    case A_MIN_U: return o < x ? o : x;
    case A_MAX_U: return o > x ? o : x;
    case A_ADD_F32: return add32((u32)o, (u32)x, 0, 0);
    case A_MIN_F32: return min32((u32)o, (u32)x, 0, 1);
    case A_MAX_F32: return max32((u32)o, (u32)x, 0, 1);
    case A_CMPSWAP_F32: return F((u32)o) == F((u32)y) ? x : o;
    case A_MIN_F64: return minmax64(o, x, 0, 1, 0);
    case A_MAX_F64: return minmax64(o, x, 0, 1, 1);
    default: return D(o) == D(y) ? x : o;                                /* A_CMPSWAP_F64 */
  }
}
/* x = DATA (VGPRs data..), y = the second operand (ydata..); the old value goes to vdst when rtn */
int m_atomic(wave_t *w, u32 space, const u64 *a, u32 op, u32 bits, u32 data, u32 ydata, u32 vdst, u32 rtn, u64 m) {
  u32 n = bits / 8;
  for (int l = 0; l < W; l++) {
    if (!((m >> l) & 1)) continue;
    /* a flat atomic in the private aperture: the lane's own (swizzled) scratch dwords, read, updated and written back */
    u8 old[8], *p = old;
    int priv = space == SP_FLAT && (u32)(a[l] >> 32) == w->d->private_hi;
    if (priv && a[l] & (n - 1)) return fault(w, a[l], SPACE_MISALIGNED);
    if (priv) { if (!sacc(w, l, (u32)a[l], old, n, 0)) return 0; }
    else p = space == SP_LDS ? latom(w, a[l], n) : space == SP_FLAT ? fatom(w, a[l], n) : gatom(w, a[l], n);
    if (!p) return 0;
    u64 o = bits == 64 ? ld64(p) : ld32(p);
    u64 x = bits == 64 ? V64(data, l) : V(data, l), y = bits == 64 ? V64(ydata, l) : V(ydata, l);   /* ydata: a valid register */
    u64 r = atomic_new(op, o, x, y, bits == 64);
    if (bits == 64) st64(p, r); else st32(p, (u32)r);
    if (priv && !sacc(w, l, (u32)a[l], old, n, 1)) return 0;
    if (rtn) { V(vdst, l) = (u32)o; if (bits == 64) V(vdst + 1, l) = (u32)(o >> 32); }
  }
  return 1;
}
/* DS 2ADDR stores and exchanges: each lane does both of its accesses before the next lane */
int m_store2(wave_t *w, const u64 *a0, const u64 *a1, u32 d0, u32 d1, u32 n, u64 m) {
  for (int l = 0; l < W; l++) {
    if (!((m >> l) & 1)) continue;
    u32 x[2] = {V(d0, l), n == 8 ? V(d0 + 1, l) : 0}, y[2] = {V(d1, l), n == 8 ? V(d1 + 1, l) : 0};
    if (!lst(w, a0[l], x, n) || !lst(w, a1[l], y, n)) return 0;
  }
  return 1;
}
int m_xchg2(wave_t *w, const u64 *a0, const u64 *a1, u32 d0, u32 d1, u32 vdst, u32 bits, u64 m) {
  u32 n = bits / 8, k = bits / 32;
  for (int l = 0; l < W; l++) {
    if (!((m >> l) & 1)) continue;
    u8 *p = latom(w, a0[l], n), *q = p ? latom(w, a1[l], n) : 0;
    if (!q) return 0;
    u32 o0[2], o1[2], x[2] = {V(d0, l), k == 2 ? V(d0 + 1, l) : 0}, y[2] = {V(d1, l), k == 2 ? V(d1 + 1, l) : 0};
    memcpy(o0, p, n); memcpy(p, x, n); memcpy(o1, q, n); memcpy(q, y, n);
    for (u32 i = 0; i < k; i++) { V(vdst + i, l) = o0[i]; V(vdst + k + i, l) = o1[i]; }
  }
  return 1;
}
