/* Warp, block and launch state shared by Python (cffi cdef) and the compiled kernel. Plain declarations only:
   this text is also handed to cffi's cdef parser. */
typedef struct range { uint64_t va, len; uint8_t *host; uint64_t writable; } range_t;

typedef struct warp {
  uint32_t pc[32];       /* per lane: index of the basic block it runs next */
  uint32_t live;         /* lanes that exist and have not exited */
  uint32_t bar;          /* lanes waiting at a barrier */
  uint32_t id;           /* warp index in its block */
  uint32_t red_off, red_kind;   /* bar.red waiting: destination register offset, RED_* kind (0: none) */
  uint8_t cf[32];        /* per lane: the carry flag CC.CF of add.cc / sub.cc / mad.cc */
  uint32_t tid[3][32];   /* %tid of each lane */
  uint8_t *regs;         /* this warp's registers: register at byte offset o, lane l at o + l * size */
  uint8_t *local;        /* this warp's local memory: lane l owns [l * local_bytes, (l + 1) * local_bytes) */
  struct launch *d;
} warp_t;

typedef struct launch {
  /* configuration, written by Python */
  uint32_t grid[3], block[3];
  uint32_t shared_bytes, local_bytes, reg_bytes, param_bytes;
  uint64_t shared_window, local_window;   /* generic addresses of shared / local memory (cvta) */
  uint64_t globals_window, globals_bytes; /* global addresses of the module-level .global variables (globals) */
  uint64_t max_instructions;              /* 0: unlimited */
  uint8_t *params, *shared, *local, *regs, *globals;
  warp_t *warps;
  uint32_t nwarps;
  /* progress */
  uint32_t ctaid[3];
  uint64_t cta;                           /* linear index of the block being run */
  uint32_t red_count, red_all, red_any;   /* bar.red: the predicates of the threads arrived so far */
  uint64_t instructions;                  /* thread-instructions executed */
  /* memory: a small cache of host-backed runs; misses go to the Python callback */
  range_t ranges[8];
  range_t fill;
  int (*miss)(struct launch *d, uint64_t addr, uint32_t write);   /* 0: filled, else unmapped */
  /* why the launch stopped */
  uint32_t stop, stop_warp, stop_lane, stop_inst;   /* STOP_* code; stop_inst: instruction index in the kernel */
  uint64_t stop_addr, stop_arg;
} launch_t;
