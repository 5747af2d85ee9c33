/* WMMA 16x16x16 (RDNA3): lane m < 16 holds row m of A (column m of B) as 16 K-elements packed in VGPRs
   (2 per VGPR for 16-bit types, 4 for iu8, 8 for iu4; lanes 16+ repeat lanes 0-15); C and D element
   (row, col) is VGPR i, lane l with row = i * (W / 16) + l / 16, col = l % 16; 16-bit C/D use the low
   (hi = 0) or high half. kind: 0 f32<-f16, 1 f32<-bf16, 2 f16<-f16, 3 bf16<-bf16, 4 i32<-iu8, 5 i32<-iu4.
   neg: float kinds negate A (bit 0) / B (bit 1); integer kinds take them as signedness. */
static double wmma_el(wave_t *w, int kind, int base, int lane, int k, int sgn) {
  if (kind <= 3) {
    u32 h = (V(base + k / 2, lane) >> (16 * (k & 1))) & 0xffffu;
    double x = kind == 0 || kind == 2 ? (double)F(h2f(h)) : (double)F(bf2f(h));
    return sgn ? -x : x;
  }
  int bits = kind == 4 ? 8 : 4, per = 32 / bits;
  i32 x = (i32)((V(base + k / per, lane) >> (bits * (k % per))) & ((1u << bits) - 1));
  if (sgn && (x >> (bits - 1))) x -= 1 << bits;
  return (double)x;
}
/* RDNA4 (gfx12) layouts, AMD's matrix instruction calculator (--architecture rdna4, --register-layout): in wave32,
   element k of row i of A (column i of B) is in lane i + 16 * (q % 2), q = k / cs, cs = 4 (16-bit) or 8 (iu8, iu4)
   consecutive elements per lane, at position (q / 2) * cs + k % cs of the lane's packed elements; C/D (m, n) is in lane
   n + 16 * (m / 8), VGPR m % 8, or, 16-bit, VGPR (m % 8) / 2, half m % 2 (packed). Wave64 moves the upper half of
   those VGPRs to lanes 32-63 (a one-VGPR operand, iu4's A/B, stays in lanes 0-31). */
static void at12(int nv, int *v, int *lane) { if (W == 64 && nv > 1 && *v >= nv / 2) { *v -= nv / 2; *lane += 32; } }
static double wmma12_el(wave_t *w, int kind, int base, int i, int k, int sgn) {
  int bits = kind <= 3 ? 16 : kind == 4 ? 8 : 4, e = 32 / bits, cs = bits == 16 ? 4 : 8, q = k / cs, pos = q / 2 * cs + k % cs;
  int v = pos / e, lane = i + 16 * (q % 2);
  at12(8 / e, &v, &lane);
  u32 x = (V(base + v, lane) >> (pos % e * bits)) & ((1u << bits) - 1);
  if (kind <= 3) { double f = kind == 0 || kind == 2 ? (double)F(h2f(x)) : (double)F(bf2f(x)); return sgn ? -f : f; }
  i32 s = (i32)x;
  if (sgn && (s >> (bits - 1))) s -= 1 << bits;
  return (double)s;
}
static void wmma12(wave_t *w, int kind, int d, int a, int b, int c, u32 cconst, int neg, int clamp) {
  double A[16][16], B[16][16];
  int r16 = kind == 2 || kind == 3;
  for (int i = 0; i < 16; i++)   /* neg: float kinds negate A (bit 0) / B (bit 1); integer kinds take them as signedness */
    for (int k = 0; k < 16; k++) { A[i][k] = wmma12_el(w, kind, a, i, k, neg & 1); B[k][i] = wmma12_el(w, kind, b, i, k, (neg >> 1) & 1); }
  u32 out[16][16];
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < 16; n++) {
      int v = r16 ? m % 8 / 2 : m % 8, lane = n + 16 * (m / 8), lo = r16 ? 16 * (m % 2) : 0;
      at12(r16 ? 4 : 8, &v, &lane);
      u32 x = c < 0 ? cconst : r16 ? (V(c + v, lane) >> lo) & 0xffffu : V(c + v, lane);
      double s = kind <= 1 ? (double)F(x) : kind == 2 ? (double)F(h2f(x)) : kind == 3 ? (double)F(bf2f(x)) : (double)(i32)x;
      for (int k = 0; k < 16; k++) s += A[m][k] * B[k][n];
      u32 r;
      if (kind <= 1) { r = U((float)s); if (clamp) r = clamp32(r); }
      else if (kind == 2) { r = d2h(UD(s)); if (clamp) r = clamp16(r); }
      else if (kind == 3) r = f2bf(U((float)s));
      else r = clamp ? sat_i32((i64)s) : (u32)(i64)s;
      out[m][n] = r;
    }
  for (int m = 0; m < 16; m++)   /* all sources are read before D is written (D may overlap C) */
    for (int n = 0; n < 16; n++) {
      int v = r16 ? m % 8 / 2 : m % 8, lane = n + 16 * (m / 8), lo = r16 ? 16 * (m % 2) : 0;
      at12(r16 ? 4 : 8, &v, &lane);
      if (!((EXEC >> lane) & 1)) continue;
      V(d + v, lane) = r16 ? (V(d + v, lane) & ~(0xffffu << lo)) | out[m][n] << lo : out[m][n];
    }
}
void wmma(wave_t *w, int kind, int d, int a, int b, int c, u32 cconst, int hi, int neg, int clamp) {
  if (kind & 8) { wmma12(w, kind & 7, d, a, b, c, cconst, neg, clamp); return; }   /* gfx12's layouts */
  double A[16][16], B[16][16], C[16][16];
  int fl = kind <= 3, r16 = kind == 2 || kind == 3, rows = W / 16;
  for (int m = 0; m < 16; m++)
    for (int k = 0; k < 16; k++) {
      A[m][k] = wmma_el(w, kind, a, m, k, fl ? 0 : neg & 1) * (fl && (neg & 1) ? -1 : 1);
      B[k][m] = wmma_el(w, kind, b, m, k, fl ? 0 : (neg >> 1) & 1) * (fl && (neg & 2) ? -1 : 1);
    }
  for (int i = 0; i < 16 / rows; i++)
    for (int l = 0; l < W; l++) {
      int row = i * rows + l / 16, col = l % 16;
      u32 x = c < 0 ? cconst : V(c + i, l);
      if (r16) x = c < 0 ? cconst : (x >> (16 * hi)) & 0xffffu;
      C[row][col] = kind == 0 || kind == 1 ? (double)F(x) : kind == 2 ? (double)F(h2f(x)) : kind == 3 ? (double)F(bf2f(x)) : (double)(i32)x;
    }
  for (int i = 0; i < 16 / rows; i++)
    for (int l = 0; l < W; l++) {
      int row = i * rows + l / 16, col = l % 16;
      double s = C[row][col];
      for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
      u32 r;
      if (kind <= 1) { r = U((float)s); if (clamp) r = clamp32(r); }
      else if (kind == 2) { r = d2h(UD(s)); if (clamp) r = clamp16(r); }
      else if (kind == 3) r = f2bf(U((float)s));
      else r = clamp ? sat_i32((i64)s) : (u32)(i64)s;
      if (!((EXEC >> l) & 1)) continue;
      if (r16) V(d + i, l) = hi ? (V(d + i, l) & 0xffffu) | r << 16 : (V(d + i, l) & 0xffff0000u) | r;
      else V(d + i, l) = r;
    }
}
