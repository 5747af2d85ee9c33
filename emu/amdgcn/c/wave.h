/* Scalar helpers: bit-field ops, WQM, hardware registers (s_getreg / s_setreg). */
static inline u32 sbfe_u32(u32 a, u32 b) { u32 off = b & 31, wd = (b >> 16) & 0x7f; if (!wd) return 0; a >>= off; return wd >= 32 ? a : a & ((1u << wd) - 1); }
static inline u32 sbfe_i32(u32 a, u32 b) {
  u32 off = b & 31, wd = (b >> 16) & 0x7f; if (!wd) return 0;
  if (wd + off >= 32) return (u32)((i32)a >> off);
  return sext((a >> off) & ((1u << wd) - 1), wd);
}
static inline u64 wqm64(u64 a) { u64 r = 0; for (int i = 0; i < 64; i += 4) if ((a >> i) & 15) r |= 15ull << i; return r; }
static inline u64 quadmask(u64 a) { u64 r = 0; for (int i = 0; i < 16; i++) if ((a >> (4 * i)) & 15) r |= 1ull << i; return r; }

/* hardware registers (s_getreg / s_setreg): simm16 = id [5:0], offset [10:6], size - 1 [15:11] */
enum { HW_MODE = 1, HW_STATUS = 2, HW_TRAPSTS = 3, HW_SH_MEM_BASES = 15, HW_HW_ID1 = 23, HW_SHADER_CYCLES = 29 };
static u32 getreg(wave_t *w, u32 spec, int *ok) {
  u32 id = spec & 63, off = (spec >> 6) & 31, size = ((spec >> 11) & 31) + 1, v;
  *ok = 1;
  switch (id) {
    case HW_MODE: v = w->mode; break;
    case HW_STATUS: v = (w->scc & 1) | (u32)(EXEC == 0) << 9 | (u32)(VCC == 0) << 10 | 1u << 16; break;   /* SCC, EXECZ, VCCZ, VALID */
    case HW_TRAPSTS: v = w->trapsts; break;
    case HW_SH_MEM_BASES: v = (w->d->private_hi >> 16) | (w->d->shared_hi >> 16) << 16; break;
    case HW_HW_ID1: v = w->id & 31; break;                                     /* WAVE_ID [4:0] */
    case HW_SHADER_CYCLES: v = (u32)w->d->instructions & 0xfffffu; break;       /* 20-bit counter: instructions here */
    default: *ok = 0; return 0;
  }
  return size >= 32 ? v >> off : (v >> off) & ((1u << size) - 1);
}
/* returns 0, or an ILLEGAL_* reason code */
static int setreg(wave_t *w, u32 spec, u32 val) {
  u32 id = spec & 63, off = (spec >> 6) & 31, size = ((spec >> 11) & 31) + 1;
  u32 mask = (size >= 32 ? 0xffffffffu : (1u << size) - 1) << off;
  u32 *reg = id == HW_MODE ? &w->mode : id == HW_TRAPSTS ? &w->trapsts : 0;
  if (!reg) return 4;
  u32 nv = (*reg & ~mask) | ((val << off) & mask);
  if (id == HW_MODE && (nv & 0xf)) return 2;   /* non-default rounding modes are not modelled */
  *reg = nv;
  return 0;
}

