/* Wave, workgroup and dispatch state shared by Python (cffi cdef) and the compiled blocks.
   Plain declarations only: this text is also handed to cffi's cdef parser. */
typedef struct range { uint64_t va, len; uint8_t *host; uint64_t writable; } range_t;

typedef struct wave {
  uint32_t s[128];       /* SGPRs: s0-s105, VCC 106-107, TTMP 108-123, NULL 124, M0 125, EXEC 126-127 */
  uint64_t pc;           /* address of the next instruction */
  uint32_t scc, status;  /* status: WAVE_* below */
  uint32_t mode;         /* HW_REG_MODE: round [3:0], denorm [7:4], dx10 clamp [8], ieee [9] */
  uint32_t trapsts;
  uint32_t id, lanes;    /* wave index in its workgroup; number of valid lanes */
  uint64_t icount;       /* wave-instructions executed */
  uint64_t scratch;      /* GPU address of this wave's scratch slot (see sacc in core.h for its swizzled layout) */
  uint8_t *scratch_host;  /* where the whole slot is host-backed in one run (found at its first use), else 0 */
  struct dispatch *d;
  uint32_t v[256 * 64];  /* VGPRs: v[reg * lanes_per_wave + lane] */
} wave_t;

typedef struct dispatch {
  /* configuration, written by Python before dispatch_run */
  uint32_t grid[3], block[3];
  uint32_t wave64, nuser;
  uint32_t user[32];          /* user SGPR values */
  uint32_t tgid_en[3], scratch_off_en;   /* system SGPRs after the user SGPRs */
  uint32_t tid_mask;          /* v0's work-item id components the wave receives (COMPUTE_PGM_RSRC2.TIDIG_COMP_CNT) */
  uint32_t shared_hi, private_hi;        /* flat apertures: bits [63:32] of the LDS / scratch windows */
  uint32_t mode;              /* initial MODE register */
  uint32_t wgp_mode;          /* COMPUTE_PGM_RSRC1.WGP_MODE: the workgroup may span both CUs of a WGP */
  uint32_t lds_bytes, scratch_per_lane;
  uint64_t code_base, entry;  /* the compiled program's base address; the kernel's first instruction */
  void (*const *blocks)(struct wave *);   /* the program's block entry points, indexed by (pc - code_base) / 4 */
  uint64_t nblocks;
  uint64_t max_instructions;  /* 0: unlimited */
  uint8_t *lds;
  /* scratch backing (COMPUTE_DISPATCH_SCRATCH_BASE, COMPUTE_TMPRING_SIZE): workgroup k runs on shader engine
     k % scratch_ses; wave i of it owns slot i of that engine's ring, at
     scratch_base + (k % scratch_ses) * scratch_se_bytes + i * scratch_wave_bytes (scratch_ses 0: no scratch) */
  uint64_t scratch_base, scratch_se_bytes;
  uint32_t scratch_ses, scratch_wave_bytes;
  wave_t *waves;
  uint32_t nwaves;            /* waves per workgroup */
  /* progress (the dispatch resumes from here after returning to Python) */
  uint32_t wg[3], wg_started, cur;
  uint64_t instructions;
  /* traced execution (trace != 0): each block a wave enters, as (pc - code_base) / 4 | wave index << 32 | workgroup
     (linear) << 40; a full buffer stops the dispatch (STOP_TRACE) before the block runs, Python drains it and resumes */
  uint64_t *trace;
  uint32_t ntrace, trace_cap;
  /* memory: a small cache of host-backed runs; misses go to the Python callback */
  range_t ranges[8];
  range_t kranges[4];         /* the scalar loads' own runs (a GPU model's scalar data cache, K$) */
  range_t fill;               /* where the miss callback puts the run it found */
  int (*miss)(struct dispatch *d, uint64_t addr, uint32_t write);   /* write 2: a scalar load; 0: filled, else unmapped */
  /* why the dispatch stopped */
  uint32_t stop, stop_wave;   /* STOP_* code, wave index */
  uint64_t stop_pc, stop_addr, stop_arg;
} dispatch_t;

