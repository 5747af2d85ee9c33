/* Pixel parameter interpolation (AMD "RDNA3.5" ISA guide 12.2-12.4; gfx11's LDSDIR and VINTERP are the same):
   LDS_PARAM_LOAD / LDS_DIRECT_LOAD fill a VGPR from LDS, the V_INTERP_* FMAs unpack it across the lanes of each
   quad. Both loads work per quad: a quad with any active lane is written in all four lanes; a wave with EXEC = 0
   loads nothing. The callers have checked M0's reserved bits. */
static u64 quad_exec(u64 ex) { u64 m = 0; for (int q = 0; q < W; q += 4) if ((ex >> q) & 15) m |= 15ull << q; return m; }

/* LDS_DIRECT_LOAD: M0 = {13'b0, type[2:0], byte address[15:0]}; type 0 u8, 1 u16, 2 b32, 4 i8, 5 i16, extended to 32
   bits and broadcast */
int m_lds_direct(wave_t *w, u32 vdst, u64 ex) {
  u32 m0 = S(M0), type = (m0 >> 16) & 7, n = type == 2 ? 4 : (type & 3) == 1 ? 2 : 1, v = 0;
  u64 m = quad_exec(ex);
  if (!m) return 1;
  if (!lld(w, m0 & 0xffff, &v, n)) return 0;
  if (type == 4) v = (u32)(i32)(i8)v;
  if (type == 5) v = (u32)(i32)(i16)v;
  for (int l = 0; l < W; l++) if ((m >> l) & 1) V(vdst, l) = v;
  return 1;
}

/* LDS_PARAM_LOAD: M0 = {1'b0, new_prim_mask[15:1], param_offset[15:0]}, a mask bit per quad that starts a new primitive
   (quad 0 always does). Quad q holds primitive popcount(new_prim_mask[q:1]) of the wave's 1 + popcount(new_prim_mask);
   its lanes 0, 1, 2 get P0, P10, P20 of attribute `attr` channel `chan` and lane 3 gets 0, from the dwords at
   param_offset + 4 * (attr * nprims * 12 + prim * 12 + 4 * k + chan), k = 0, 1, 2 */
int m_lds_param(wave_t *w, u32 vdst, u32 attr, u32 chan, u64 ex) {
  u32 m0 = S(M0), mask = (m0 >> 15) & 0xfffeu, nprims = 1 + __builtin_popcount(mask), t[W];
  u64 m = quad_exec(ex);
  for (int q = 0; q < W / 4; q++) {
    if (!((m >> (4 * q)) & 1)) continue;
    u32 prim = __builtin_popcount(mask & ((2u << q) - 1));
    for (int k = 0; k < 3; k++)
      if (!lld(w, (m0 & 0xffff) + 4 * (attr * nprims * 12 + prim * 12 + 4 * k + chan), &t[4 * q + k], 4)) return 0;
    t[4 * q + 3] = 0;
  }
  for (int l = 0; l < W; l++) if ((m >> l) & 1) V(vdst, l) = t[l];
  return 1;
}

static inline float d2f_rtz(double e) { float f = (float)e; return fabs((double)f) > fabs(e) ? nextafterf(f, 0.0f) : f; }
/* V_INTERP_* (op = the VINTERP opcode: 0 p10_f32, 1 p2_f32, 2 p10_f16_f32, 3 p2_f16_f32, 4/5 those two rounding toward
   zero): D = fma(src0 of lane 1 (p10) / lane 2 (p2) of the lane's quad, src1 (I or J, the lane's own), src2: p10 ops
   lane 0 of the quad (P0), p2 ops the lane's own (the p10 result)). The quad reads ignore EXEC (the built-in DPP8 acts
   as fetch-invalid = 1). f16 ops take src0 (and a p10 op's src2) as f16, the half picked by opsel[0] / opsel[2]; p10
   results are f32, p2_f16 results f16, rounded once (12.3.1: dst.f16 = P20.f16 * J.f32 + tmp.f32). neg[i] flips the
   sign of source i. */
void k_interp(const wave_t *w, u32 *r, u32 s0, const u32 *b, u32 s2, u32 op, u32 opsel, u32 neg, u32 CL) {
  int p2 = op & 1, f16 = op >= 2, rtz = op >= 4;
  for (int l = 0; l < W; l++) {
    int q = l & ~3;
    u32 a = V(s0, q + 1 + p2), x = ftz32(b[l] ^ (neg & 2 ? 0x80000000u : 0), FI32), c = V(s2, p2 ? l : q);
    if (f16) a = h2f(ftz16((a >> (16 * (opsel & 1))) ^ (neg & 1 ? 0x8000u : 0), FI16));
    else a = ftz32(a ^ (neg & 1 ? 0x80000000u : 0), FI32);
    if (f16 && !p2) c = h2f(ftz16((c >> (16 * ((opsel >> 2) & 1))) ^ (neg & 4 ? 0x8000u : 0), FI16));
    else c = ftz32(c ^ (neg & 4 ? 0x80000000u : 0), FI32);
    double e = fma_odd(a, x, c);
    if (f16 && p2) {
      u32 h = e != e ? f2h(nan3_32(a, x, c), 0) : ftz16(rtz ? f2h(U(d2f_rtz(e)), 1) : d2h(UD(e)), FO16);
      r[l] = CL ? clamp16(h) : h;
    } else {
      u32 v = e != e ? nan3_32(a, x, c) : ftz32(U(rtz ? d2f_rtz(e) : (float)e), FO32);
      r[l] = CL ? clamp32(v) : v;
    }
  }
}
