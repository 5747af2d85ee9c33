/* Workgroup scheduler: runs the dispatch's workgroups one after another; inside a workgroup the waves
   run round-robin, each until s_barrier, s_endpgm or a time slice ends. A barrier releases when every
   wave that has not ended waits at it (ended waves do not count). Compiled once per wave size; the
   program's blocks come in through d->blocks. */

/* wave setup per the AMDGPU HSA ABI: user SGPRs, then workgroup ids (enabled ones: tgid_en 1), then the private
   segment wave offset; a gfx12 target has the ids in TTMP9 = x, TTMP7 = y | z << 16 instead (tgid_en 2: architected
   SGPRs, LLVM AMDGPUUsage); v0 = workitem id x | y << 10 | z << 20; EXEC = the wave's valid lanes */
static void wave_init(dispatch_t *d, wave_t *w, u32 id, u32 first, u32 nthreads) {
  memset(w->s, 0, sizeof(w->s));
  u32 n = 0;
  for (; n < d->nuser; n++) w->s[n] = d->user[n];
  for (int i = 0; i < 3; i++) if (d->tgid_en[i] == 1) w->s[n++] = d->wg[i];
  if (d->tgid_en[0] == 2) { w->s[108 + 9] = d->wg[0]; w->s[108 + 7] = (d->wg[1] & 0xffffu) | d->wg[2] << 16; }
  if (d->scratch_off_en) w->s[n++] = 0;
  w->lanes = nthreads - first < W ? nthreads - first : W;
  for (u32 l = 0; l < W; l++) {
    u32 t = first + (l < w->lanes ? l : 0), x = t % d->block[0], y = t / d->block[0] % d->block[1], z = t / (d->block[0] * d->block[1]);
    V(0, l) = (x | y << 10 | z << 20) & d->tid_mask;
  }
  SETMASK(EXEC_LO, w->lanes == 64 ? ~0ull : (1ull << w->lanes) - 1);
  w->pc = d->entry; w->scc = 0; w->status = WAVE_RUN; w->mode = d->mode; w->trapsts = 0; w->id = id; w->d = d;
  u64 k = d->wg[0] + (u64)d->grid[0] * (d->wg[1] + (u64)d->grid[1] * d->wg[2]);
  w->scratch = d->scratch_ses ? d->scratch_base + k % d->scratch_ses * d->scratch_se_bytes + (u64)id * d->scratch_wave_bytes : 0;
  w->scratch_host = 0;
}

static int next_wg(dispatch_t *d) {
  if (++d->wg[0] < d->grid[0]) return 1;
  d->wg[0] = 0;
  if (++d->wg[1] < d->grid[1]) return 1;
  d->wg[1] = 0;
  return ++d->wg[2] < d->grid[2];
}

/* run one wave until it leaves the RUN state, its slice ends, or the dispatch must stop */
static int run_wave(dispatch_t *d, wave_t *w) {
  for (u32 slice = 0; slice < 65536 && w->status == WAVE_RUN; slice++) {
    u64 pc = w->pc, off = pc - d->code_base;
    void (*blk)(wave_t *) = off < 4 * d->nblocks && !(off & 3) ? d->blocks[off >> 2] : 0;
    if (!blk) { d->stop = STOP_NOBLOCK; d->stop_pc = pc; return 1; }
    if (d->trace) {
      if (d->ntrace == d->trace_cap) { d->stop = STOP_TRACE; d->stop_pc = pc; return 1; }
      u64 k = d->wg[0] + (u64)d->grid[0] * (d->wg[1] + (u64)d->grid[1] * d->wg[2]);
      d->trace[d->ntrace++] = off >> 2 | (u64)w->id << 32 | k << 40;
    }
    blk(w);
    if (d->stop) { d->stop_pc = w->pc; return 1; }
    if (d->max_instructions && d->instructions > d->max_instructions) { d->stop = STOP_LIMIT; d->stop_pc = w->pc; return 1; }
  }
  return 0;
}

int dispatch_run(dispatch_t *d) {
  d->stop = STOP_NONE;
  u32 nthreads = d->block[0] * d->block[1] * d->block[2], nw = (nthreads + W - 1) / W;
  if (d->grid[0] == 0 || d->grid[1] == 0 || d->grid[2] == 0 || nthreads == 0) return STOP_NONE;
  for (;;) {
    if (!d->wg_started) {
      for (u32 i = 0; i < nw; i++) wave_init(d, &d->waves[i], i, i * W, nthreads);
      if (d->lds) memset(d->lds, 0, d->lds_bytes);
      d->wg_started = 1; d->cur = 0;
    }
    for (;;) {   /* round-robin over the workgroup's waves */
      int running = 0, waiting = 0;
      for (u32 i = 0; i < nw; i++) {
        u32 k = (d->cur + i) % nw; wave_t *w = &d->waves[k];
        if (w->status == WAVE_RUN) {
          d->cur = k;
          if (run_wave(d, w)) { d->stop_wave = k; return (int)d->stop; }
        }
        running += w->status == WAVE_RUN; waiting += w->status == WAVE_BARRIER;
      }
      if (running) continue;
      if (!waiting) break;
      for (u32 i = 0; i < nw; i++) if (d->waves[i].status == WAVE_BARRIER) d->waves[i].status = WAVE_RUN;
    }
    d->wg_started = 0;
    if (!next_wg(d)) return STOP_NONE;
  }
}
