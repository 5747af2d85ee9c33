/* Operand gathering and result writing for the lane kernels: every VALU operation reads its sources into
   W-lane arrays (a VGPR row is used in place), runs a kernel over all lanes, and writes the result with the
   EXEC-derived mask. Sources are therefore always read before the destination is written (fact 13). */

void g_bcast32(u32 *t, u32 v) { for (int l = 0; l < W; l++) t[l] = v; }
void g_bcast64(u64 *t, u64 v) { for (int l = 0; l < W; l++) t[l] = v; }
/* the low (hi = 0) or high half of a VGPR, zero-extended */
void g_v16(u32 *t, const wave_t *w, u32 reg, u32 hi) { for (int l = 0; l < W; l++) t[l] = (V(reg, l) >> (16 * hi)) & 0xffffu; }
void g_v64(u64 *t, const wave_t *w, u32 reg) { for (int l = 0; l < W; l++) t[l] = V64(reg, l); }
/* abs / neg as sign-bit operations (fact 22): t = (s & andm) ^ xorm */
void g_mod32(u32 *t, const u32 *s, u32 andm, u32 xorm) { for (int l = 0; l < W; l++) t[l] = (s[l] & andm) ^ xorm; }
void g_mod64(u64 *t, const u64 *s, u64 andm, u64 xorm) { for (int l = 0; l < W; l++) t[l] = (s[l] & andm) ^ xorm; }
/* VOP3P: one half of each 32-bit word, its sign flipped by xorm */
void g_half(u32 *t, const u32 *s, u32 hi, u32 xorm) { for (int l = 0; l < W; l++) t[l] = ((s[l] >> (16 * hi)) & 0xffffu) ^ xorm; }
void g_pack(u32 *t, const u32 *lo, const u32 *hi) { for (int l = 0; l < W; l++) t[l] = (lo[l] & 0xffffu) | hi[l] << 16; }
/* f16 -> f32 (exact) after the f16 input-denormal rule, for FMA_MIX */
void g_h2f(u32 *t, const u32 *s, u32 fi) { for (int l = 0; l < W; l++) t[l] = h2f(ftz16(s[l], fi)); }
void g_ftz32(u32 *t, const u32 *s, u32 fi) { for (int l = 0; l < W; l++) t[l] = ftz32(s[l], fi); }

void p_32(wave_t *w, u32 reg, const u32 *r, u64 m) { for (int l = 0; l < W; l++) V(reg, l) = ((m >> l) & 1) ? r[l] : V(reg, l); }
void p_64(wave_t *w, u32 reg, const u64 *r, u64 m) {
  for (int l = 0; l < W; l++) if ((m >> l) & 1) { V(reg, l) = (u32)r[l]; V(reg + 1, l) = (u32)(r[l] >> 32); }
}
/* a 16-bit result keeps the other half of the register (fact 38) */
void p_16(wave_t *w, u32 reg, u32 hi, const u32 *r, u64 m) {
  u32 keep = hi ? 0xffffu : 0xffff0000u, sh = 16 * hi;
  for (int l = 0; l < W; l++) V(reg, l) = ((m >> l) & 1) ? (V(reg, l) & keep) | (r[l] & 0xffffu) << sh : V(reg, l);
}

/* DPP16 source lane for lane l, or -1 when it falls outside the row (RDNA3 guide, "DPP16") */
static int dpp_src(u32 ctrl, int l) {
  u32 n = ctrl & 15;
  if (ctrl <= 0xff) return (l & ~3) | ((ctrl >> ((l & 3) * 2)) & 3);                  /* quad_perm */
  if (ctrl >= 0x101 && ctrl <= 0x10f) return (l & 15) + n < 16 ? l + (int)n : -1;       /* row_shl */
  if (ctrl >= 0x111 && ctrl <= 0x11f) return (u32)(l & 15) >= n ? l - (int)n : -1;     /* row_shr */
  if (ctrl >= 0x121 && ctrl <= 0x12f) return (l & ~15) | ((l - (int)n) & 15);           /* row_ror */
  if (ctrl == 0x140) return (l & ~15) | (15 - (l & 15));                                /* row_mirror */
  if (ctrl == 0x141) return (l & ~7) | (7 - (l & 7));                                   /* row_half_mirror */
  if (ctrl == 0x142 || ctrl == 0x143) return l & ~15;                                   /* fact 47: lane 0 of the row */
  if (ctrl >= 0x150 && ctrl <= 0x15f) return (l & ~15) | (int)n;                        /* row_share */
  return (l & ~15) | ((l & 15) ^ (int)n);                                               /* row_xmask (0x160-0x16f) */
}
/* src0 through DPP16; *valid = lanes that may be written: source in range and (active or fetch-inactive),
   or bound_ctrl set (then an invalid source reads 0) */
static inline u32 part(u32 x, u32 half) { return half == 0 ? x : half == 1 ? x & 0xffffu : x >> 16; }
/* half: 0 = the whole register, 1 / 2 = its low / high 16 bits */
void g_dpp16(u32 *t, u64 *valid, const wave_t *w, u32 reg, u32 half, u32 ctrl, u32 fi, u32 bc, u64 ex) {
  u64 v = 0;
  for (int l = 0; l < W; l++) {
    int s = dpp_src(ctrl, l), ok = s >= 0 && (fi || ((ex >> s) & 1));
    t[l] = ok ? part(V(reg, s), half) : 0;
    v |= (u64)(ok || bc) << l;
  }
  *valid = v;
}
/* src0 through DPP8: lane l reads lane (l & ~7) | sel[l & 7]; an inactive source reads 0 unless FI */
void g_dpp8(u32 *t, const wave_t *w, u32 reg, u32 half, u32 sel, u32 fi, u64 ex) {
  for (int l = 0; l < W; l++) {
    int s = (l & ~7) | ((sel >> (3 * (l & 7))) & 7);
    t[l] = (fi || ((ex >> s) & 1)) ? part(V(reg, s), half) : 0;
  }
}
