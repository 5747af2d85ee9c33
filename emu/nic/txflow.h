/* Transmit flows (emu/nic/txflow.py says what they take and when): the single-packet RDMA WRITEs (with immediate) a
   requester QP's SQ doorbell starts, read from the SQ in host memory, checked as the NIC model's Python decoder checks
   them, built (the flow's header template) and sent here; Python then does the transport's bookkeeping. A NIC model's
   decoder (its own C file, built with this header: txflow.Decoder) walks its ring and hands each WQE to tx_wqe. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "emu/nic/frame.h"

typedef struct {
  const uint64_t *page;        /* host address of each page of the SQ's memory (the ring, then the MSN table) */
  uint32_t page_size;
  uint32_t depth, stride;      /* ring entries (WQEs) and their bytes (128: bnxt static mode) */
  uint64_t msn_off;            /* bnxt: where the MSN table starts in that memory, and its entries */
  uint32_t msn_entries;
  uint64_t ring_off;           /* mlx5: where the send queue starts in that memory (after the receive queue) ... */
  const uint8_t *dbr;          /* ... the doorbell record (its second word: the send producer) */
  uint32_t qpn;                /* ... and the QP's number, which each WQE's ctrl segment repeats */
  const uint64_t *generation;  /* the DMA space's mapping generation ... */
  uint64_t gen;                /* ... when the pages and pieces were resolved */
  uint32_t wqe_type, flags, vary, size, length, lkey;   /* the WQE shape: type, flags but the `vary` bits, wqe_size,
                                                           length, the L_Key of its one SGE */
  uint64_t mr_va, mr_len;      /* the region that L_Key names (no access needed to read it for a WRITE) ... */
  const uint64_t *piece, *piece_start, *piece_len;     /* ... and where its bytes are (fastpath.HostMap) */
  int npieces;
  uint8_t head[MAX_HEAD + 8];  /* the frame up to the BTH's PSN word (roce.request_template) */
  uint32_t head_len, head_crc, frame_len;
  int imm;                     /* the opcode carries ImmDt */
  struct sockaddr_in to;
  int fd;
  int64_t until_ns;            /* CLOCK_MONOTONIC: when the destination must be resolved again */
  uint32_t window;             /* PSNs the requester lets be unacknowledged (rc.WINDOW) */
  /* out: the WQEs sent, in order */
  uint32_t n;
  uint64_t pos;                /* the ring position after them */
  struct { uint64_t va, sge_va; uint32_t at, flags, imm, rkey; } sent[BATCH];   /* remote and local address, ring index,
                                                                                 flags, immediate, R_Key of each */
  uint8_t last[64];            /* mlx5: the doorbell's last WQE (what a BlueFlame copy repeats) ... */
  int all;                     /* ... when all were taken */
} txflow_t;

uint64_t txflow_size(void) { return sizeof(txflow_t); }

static const uint8_t *sq_at(const txflow_t *f, uint64_t off) {
  return (const uint8_t *)(uintptr_t)f->page[off / f->page_size] + off % f->page_size;
}
static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }
static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

/* Copy n bytes at offset `off` of the flow's region: 0 if its pieces do not hold them */
static int gather(const txflow_t *f, uint64_t off, uint8_t *dst, uint64_t n) {
  int lo = 0, hi = f->npieces;
  while (hi - lo > 1) {                                   /* the last piece starting at or before off */
    int mid = (lo + hi) / 2;
    if (f->piece_start[mid] <= off) lo = mid; else hi = mid;
  }
  for (int i = lo; n; i++) {
    if (i >= f->npieces) return 0;
    uint64_t within = off - f->piece_start[i], k = f->piece_len[i] - within < n ? f->piece_len[i] - within : n;
    memcpy(dst, (const uint8_t *)(uintptr_t)f->piece[i] + within, k);
    dst += k;
    off += k;
    n -= k;
  }
  return 1;
}

/* Build and send the frame of a single-packet request at `psn` (AckReq set: a message's last packet) */
static int tx_only(txflow_t *f, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t imm, uint64_t sge_va) {
  uint8_t frame[MAX_HEAD + 8 + 4 + 16 + 4 + 4096 + 3 + ICRC_LEN];
  if (f->frame_len > sizeof frame) return 0;
  memcpy(frame, f->head, f->head_len);
  uint8_t *p = frame + f->head_len;
  put32(p, 0x80000000u | (psn & 0xFFFFFF));
  put32(p + 4, va >> 32); put32(p + 8, (uint32_t)va); put32(p + 12, rkey); put32(p + 16, f->length);
  p += 20;
  if (f->imm) { put32(p, imm); p += 4; }
  if (!gather(f, sge_va - f->mr_va, p, f->length)) return 0;
  p += f->length;
  while ((p - frame) < f->frame_len - ICRC_LEN) *p++ = 0;                  /* pad */
  uint32_t crc = crc32_update(f->head_crc, frame + f->head_len, (uint64_t)(p - frame - f->head_len));
  p[0] = crc; p[1] = crc >> 8; p[2] = crc >> 16; p[3] = crc >> 24;
  ssize_t r;
  do r = sendto(f->fd, frame, f->frame_len, 0, (const struct sockaddr *)&f->to, sizeof f->to);   /* (blocking, as the
     Python path's sends; on an error the Python path sends it again and reports it as always) */
  while (r < 0 && errno == EINTR);
  return r == (ssize_t)f->frame_len;
}

/* Whether the flow's memory and destination are still the ones it was armed with */
static int tx_fresh(txflow_t *f) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  f->n = 0;
  return *f->generation == f->gen && (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec < f->until_ns;
}

/* A WQE of the flow's shape that passed the vendor's checks: its SGE inside the region, the window open (rc.psn_delta
   < WINDOW from the oldest unacknowledged PSN, else it waits), then sent at `psn` and recorded for Python: 0 if not */
static int tx_wqe(txflow_t *f, uint32_t psn, uint32_t una, uint32_t at, uint32_t flags, uint32_t imm, uint64_t va,
                  uint32_t rkey, uint64_t sva) {
  if (sva < f->mr_va || sva - f->mr_va > f->mr_len || f->mr_len - (sva - f->mr_va) < f->length) return 0;
  if ((int32_t)((psn - una + 0x800000u) & 0xFFFFFF) - 0x800000 >= (int32_t)f->window) return 0;
  if (!tx_only(f, psn & 0xFFFFFF, va, rkey, imm, sva)) return 0;
  uint32_t k = f->n++;
  f->sent[k].va = va; f->sent[k].sge_va = sva; f->sent[k].at = at; f->sent[k].flags = flags;
  f->sent[k].imm = imm; f->sent[k].rkey = rkey;
  return 1;
}
