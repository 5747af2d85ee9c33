/* GPU memory as the compiled shader code sees it (emu/memory.py): a most-recently-used cache of 8 host-backed runs
   of GPU virtual addresses in the owner struct (RUNS_OWNER: ranges[8], fill, miss), and the Python callback `miss`
   on a miss, which puts the run holding the address in `fill` (returns 0) or reports it unmapped. Needs u8/u32/u64
   and range_t. Shared by the RDNA3 emulator and the PTX engine. */
static u8 *mem_lookup(RUNS_OWNER *d, u64 a, u32 n, int wr) {
  for (int i = 0; i < 8; i++) {
    range_t *r = &d->ranges[i]; u64 off = a - r->va;
    if (off < r->len && r->len - off >= n && (!wr || r->writable)) {
      if (i) { range_t t = d->ranges[0]; d->ranges[0] = *r; *r = t; }
      return d->ranges[0].host + off;
    }
  }
  if (!d->miss || d->miss(d, a, wr)) return 0;
  memmove(&d->ranges[1], &d->ranges[0], 7 * sizeof(range_t));
  d->ranges[0] = d->fill; d->ranges[0].writable = wr;
  u64 off = a - d->fill.va;
  if (off >= d->fill.len) return 0;
  if (d->fill.len - off < n) return 0;
  return d->fill.host + off;
}
static inline u8 *mem_at(RUNS_OWNER *d, u64 a, u32 n, int wr) {
  range_t *r = &d->ranges[0]; u64 off = a - r->va;
  if (off < r->len && r->len - off >= n && (!wr || r->writable)) return r->host + off;
  return mem_lookup(d, a, n, wr);
}
