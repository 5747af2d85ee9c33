/* The NIC models' bulk datapath in C (emu/nic/fastpath.py says what it does and when; the Python transport, rc.py,
   stays the reference and handles every other packet). Frame layout: emu/nic/roce.py. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "emu/nic/frame.h"

#define OP_WRITE_MIDDLE 0x07
#define SLOT 65536
#define MAX_IOV 8
#define MAX_CQE 64

/* The ICRC's transport part: the BTH with resv8a (byte 4) masked to ones, then the rest */
static uint32_t bth_crc(uint32_t crc, const uint8_t *bth) {
  uint8_t b[BTH_LEN];
  memcpy(b, bth, BTH_LEN);
  b[4] = 0xFF;
  return crc32_update(crc, b, BTH_LEN);
}

/* --- transmit: `n` MIDDLE packets of one message, PSNs psn0.., AckReq on packet j when (k0 + j + 1) % ack_every == 0 */
typedef struct {
  uint8_t head[MAX_HEAD];      /* Ethernet + IP + UDP of a MIDDLE packet of the flow */
  uint32_t head_len, lower_crc;
  uint8_t bth[BTH_LEN];        /* opcode, flags, P_Key, dest QPN (bytes 0-7); the PSN word is filled per packet */
  uint32_t mtu;
} tx_t;

int tx_run(int fd, const struct sockaddr_in *dst, const tx_t *t, uint32_t psn0, int n, int k0, int ack_every,
           const uint64_t *piece, const uint64_t *piece_len, int npieces) {
  uint8_t hdr[BATCH][MAX_HEAD + BTH_LEN], icrc[BATCH][ICRC_LEN];
  struct iovec iov[BATCH][MAX_IOV];
  struct mmsghdr msg[BATCH];
  int sent = 0, pi = 0;
  uint64_t po = 0;                                             /* offset into piece pi */
  while (sent < n) {
    int m = n - sent < BATCH ? n - sent : BATCH;
    for (int j = 0; j < m; j++) {
      int k = sent + j, v = 0;
      uint8_t *h = hdr[j];
      memcpy(h, t->head, t->head_len);
      uint8_t *b = h + t->head_len;
      memcpy(b, t->bth, 8);
      uint32_t w = ((psn0 + k) & 0xFFFFFF) | ((k0 + k + 1) % ack_every == 0 ? 0x80000000u : 0);
      b[8] = w >> 24; b[9] = w >> 16; b[10] = w >> 8; b[11] = w;
      uint32_t crc = bth_crc(t->lower_crc, b);
      iov[j][v].iov_base = h;
      iov[j][v++].iov_len = t->head_len + BTH_LEN;
      for (uint32_t need = t->mtu; need; ) {
        if (pi >= npieces || v >= MAX_IOV - 1) return sent ? sent : -EINVAL;  /* not n full packets, or too scattered */
        uint64_t k2 = piece_len[pi] - po < need ? piece_len[pi] - po : need;
        const uint8_t *p = (const uint8_t *)(uintptr_t)piece[pi] + po;
        crc = crc32_update(crc, p, k2);
        iov[j][v].iov_base = (void *)p;
        iov[j][v++].iov_len = k2;
        need -= k2;
        po += k2;
        if (po == piece_len[pi]) { pi++; po = 0; }
      }
      icrc[j][0] = crc; icrc[j][1] = crc >> 8; icrc[j][2] = crc >> 16; icrc[j][3] = crc >> 24;
      iov[j][v].iov_base = icrc[j];
      iov[j][v++].iov_len = ICRC_LEN;
      memset(&msg[j], 0, sizeof msg[j]);
      msg[j].msg_hdr.msg_name = (void *)dst;
      msg[j].msg_hdr.msg_namelen = sizeof *dst;
      msg[j].msg_hdr.msg_iov = iov[j];
      msg[j].msg_hdr.msg_iovlen = v;
    }
    for (int done = 0; done < m; ) {
      int r = sendmmsg(fd, msg + done, m - done, 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        return sent + done ? sent + done : -errno;
      }
      done += r;
    }
    sent += m;
  }
  return sent;
}

/* --- receive: a batch of datagrams (recvmmsg), then the MIDDLE packets of armed WRITEs */
typedef struct {
  uint8_t *buf;                /* BATCH slots of SLOT bytes */
  uint32_t len[BATCH];
  struct sockaddr_in addr[BATCH];
  uint32_t flags[BATCH];
  uint8_t by[BATCH];           /* the flow that took each datagram rx_take took, so that Python follows their order */
  int resync;                  /* rx_take stopped only for Python to catch up (the completions of ACKs it took first) */
} batch_t;

int rx_batch(int fd, batch_t *b) {
  struct mmsghdr msg[BATCH];
  struct iovec iov[BATCH];
  memset(msg, 0, sizeof msg);
  for (int i = 0; i < BATCH; i++) {
    iov[i].iov_base = b->buf + (uint64_t)i * SLOT;
    iov[i].iov_len = SLOT;
    msg[i].msg_hdr.msg_iov = &iov[i];
    msg[i].msg_hdr.msg_iovlen = 1;
    msg[i].msg_hdr.msg_name = &b->addr[i];
    msg[i].msg_hdr.msg_namelen = sizeof b->addr[i];
  }
  int r;
  do r = recvmmsg(fd, msg, BATCH, MSG_DONTWAIT, NULL); while (r < 0 && errno == EINTR);
  if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  for (int i = 0; i < r; i++) {
    b->len[i] = msg[i].msg_len;
    b->flags[i] = msg[i].msg_hdr.msg_flags;
  }
  return r;
}

/* A CQ C writes receive completions into, as the NIC model describes it (fastpath.CQRing): its entries in host memory,
   where the phase bit is, the producer, consumer and arm state Python gives it before each rx_take, and the ring (an
   NQ / EQ, the same struct) an armed CQ's notification goes to */
typedef struct cq_s {
  const uint64_t *entry;       /* host address of each entry */
  uint32_t depth, size;        /* entries, bytes each (<= MAX_CQE) */
  uint32_t phase_at, phase_bit, phase_even;   /* the byte and bit of the phase (valid / owner) bit, its value on even passes */
  uint64_t index_mask;         /* the ring is full when (prod - cons) & index_mask >= depth */
  const uint8_t *cons_be;      /* if set, the consumer is the big-endian 32-bit word there (the driver's doorbell record) */
  const uint64_t *generation;  /* the entries' DMA mapping generation ... */
  uint64_t gen;                /* ... when they were resolved */
  struct cq_s *note;           /* where an armed CQ's notification goes (NULL: Python writes those) */
  uint8_t note_entry[MAX_CQE]; /* the notification, its toggle field 0 */
  uint32_t toggle_at, toggle_shift, toggle_mask;   /* where the CQ's arm toggle goes in it (mask 0: nowhere) */
  /* what Python gives C before each rx_take (one store: fastpath.CQRing.refresh) and reads back after it */
  uint64_t prod, cons;         /* positions */
  uint32_t armed;              /* a completion notification is due at the next CQE */
  uint32_t toggle;             /* the CQ's arm toggle, advanced by each notification */
  uint32_t wrote, notified;    /* entries and notifications written since Python last looked */
} cq_t;

/* One RDMA WRITE in progress at a responder QP, as the Python transport handed it over (fastpath.Flow) */
typedef struct {
  uint8_t head[MAX_HEAD];      /* the Ethernet + IP + UDP bytes of its MIDDLE packets, as checked in Python */
  uint32_t head_len, lower_crc, frame_len;
  uint32_t src_ip, src_port;   /* network order: the port the GID table gives for the requester's GID */
  int64_t until_ns;            /* CLOCK_MONOTONIC: when that resolution must be made again */
  uint32_t qpn, pkey, mtu;
  uint32_t epsn;               /* expected PSN */
  uint64_t left;               /* bytes of the WRITE still to come (more than one MTU while armed) */
  uint64_t off;                /* where the next byte goes: offset into the pieces */
  const uint64_t *piece, *piece_len;
  int npieces;
  const uint64_t *generation;  /* the DMA space's mapping generation ... */
  uint64_t gen;                /* ... when the pieces were resolved */
  int armed;
  uint32_t done;               /* packets written since Python last looked */
  int ack;                     /* the last one asked for an ACK (AckReq) */
  uint32_t ack_psn;
  /* kind 1: one-packet RDMA WRITEs (ONLY) at a responder QP between messages; C also sends their ACKs */
  int kind;                    /* 0: the MIDDLE packets of one WRITE, 1: single-packet WRITEs, 2: ACKs (below) */
  uint32_t op, bth1;           /* the opcode (WRITE_ONLY or WRITE_ONLY_IMM) and BTH byte 1 (SE, pad count, TVer) */
  uint32_t rkey, dma_len;      /* the R_Key Python checked, and the length of every message (the frames' length) */
  uint64_t region_va, region_len;  /* the region it names, which grants REMOTE_WRITE; the pieces cover all of it */
  uint32_t recvs;              /* receive WRs a WRITE with immediate may consume (before one Python must fail) */
  uint32_t msn;
  uint32_t got[BATCH];         /* per packet taken, in order: its immediate data (kind 1), its PSN (kind 2) */
  uint8_t ack_frame[MAX_HEAD + BTH_LEN + 4];   /* an ACK as Python builds it (lower headers, BTH, AETH), no ICRC */
  uint32_t ack_head_len, ack_len, ack_lower_crc;
  struct sockaddr_in ack_to;
  int fd;
  uint32_t acks;               /* ACKs sent since Python last looked */
  int ack_err;                 /* errno of an ACK that could not be sent (lost, as a datagram the wire drops) */
  const uint8_t *watch;        /* WRITE with immediate: host memory that must still hold ... */
  uint32_t watch_len;
  uint8_t watch_seen[8];       /* ... these bytes (a receive doorbell record the receive WRs were read at) */
  /* kind 2: the ACKs a requester QP gets (op ACKNOWLEDGE, bth1, and this AETH syndrome: ACK, no credit count) */
  uint32_t syndrome;
  /* kind 1, WRITE with immediate: C writes the receive completion (else Python does) into `cq`, the QP's receive CQ */
  cq_t *cq;
  uint8_t cqe[MAX_CQE];        /* the QP's receive completion of a WRITE with immediate, wr_id and imm 0 */
  uint32_t wr_id_at, wr_id_len, imm_at, big_endian;   /* where they go (wr_id 2 or 4 bytes, imm 4), byte order */
  uint32_t wr_ids[BATCH];      /* the wr_id fields of the receive WRs `recvs` counts, in order */
  uint32_t used;               /* of them, consumed since Python last looked */
} flow_t;

uint64_t flow_size(void) { return sizeof(flow_t); }
uint64_t cq_size(void) { return sizeof(cq_t); }


/* Write n bytes at offset `off` of the flow's pieces: 0 if they do not hold them */
static int place(const flow_t *f, uint64_t off, const uint8_t *src, uint64_t n) {
  int i = 0;
  while (i < f->npieces && off >= f->piece_len[i]) off -= f->piece_len[i++];
  for (uint64_t at = 0; n; i++) {
    if (i >= f->npieces) return 0;
    uint64_t k = f->piece_len[i] - off < n ? f->piece_len[i] - off : n;
    memcpy((uint8_t *)(uintptr_t)f->piece[i] + off, src + at, k);
    at += k;
    n -= k;
    off = 0;
  }
  return 1;
}

static void send_ack(flow_t *f, uint32_t psn) {
  uint8_t a[MAX_HEAD + BTH_LEN + 4 + ICRC_LEN];
  memcpy(a, f->ack_frame, f->ack_len);
  uint8_t *bth = a + f->ack_head_len, *aeth = bth + BTH_LEN;
  bth[8] = 0; bth[9] = psn >> 16; bth[10] = psn >> 8; bth[11] = psn;   /* AckReq 0 */
  aeth[1] = f->msn >> 16; aeth[2] = f->msn >> 8; aeth[3] = f->msn;
  uint32_t crc = crc32_update(bth_crc(f->ack_lower_crc, bth), aeth, 4);
  uint8_t *t = a + f->ack_len;
  t[0] = crc; t[1] = crc >> 8; t[2] = crc >> 16; t[3] = crc >> 24;
  ssize_t r;
  do r = sendto(f->fd, a, f->ack_len + ICRC_LEN, 0, (const struct sockaddr *)&f->ack_to, sizeof f->ack_to);   /* (blocking, as
     the Python path's sends) */
  while (r < 0 && errno == EINTR);
  if (r < 0) f->ack_err = errno;
  else f->acks++;
}

static int ring_free(const cq_t *q) {
  uint64_t cons = q->cons_be ? be32(q->cons_be) : q->cons;
  return *q->generation == q->gen && ((q->prod - cons) & q->index_mask) < q->depth;
}

/* Whether the CQ takes a CQE from C now: not if it is full or its mapping changed, nor if a notification is due that
   C cannot write (Python writes that one) */
static int cq_room(const cq_t *q) { return ring_free(q) && (!q->armed || (q->note && ring_free(q->note))); }

static void put(uint8_t *p, uint32_t v, uint32_t n, int big) {
  for (uint32_t k = 0; k < n; k++) p[big ? n - 1 - k : k] = v >> 8 * k;
}

/* Entry e at the ring's producer: the body first, the byte with the phase bit of this pass last */
static void ring_write(cq_t *q, uint8_t *e) {
  uint8_t *slot = (uint8_t *)(uintptr_t)q->entry[q->prod % q->depth];
  int odd = (q->prod / q->depth) & 1;
  e[q->phase_at] = (e[q->phase_at] & ~q->phase_bit) | ((odd ? !q->phase_even : q->phase_even) ? q->phase_bit : 0);
  memcpy(slot, e, q->phase_at);
  memcpy(slot + q->phase_at + 1, e + q->phase_at + 1, q->size - q->phase_at - 1);
  __atomic_store_n(slot + q->phase_at, e[q->phase_at], __ATOMIC_RELEASE);
  q->prod++;
}

/* The receive completion, then the notification an armed CQ owes (one per arm) */
static void write_cqe(flow_t *f, uint32_t wr_id, uint32_t imm) {
  cq_t *q = f->cq;
  uint8_t e[MAX_CQE];
  memcpy(e, f->cqe, q->size);
  put(e + f->wr_id_at, wr_id, f->wr_id_len, f->big_endian);
  put(e + f->imm_at, imm, 4, f->big_endian);
  ring_write(q, e);
  q->wrote++;
  if (!q->armed) return;
  memcpy(e, q->note_entry, q->note->size);
  q->toggle = (q->toggle + 1) & q->toggle_mask;
  e[q->toggle_at] |= q->toggle << q->toggle_shift;
  ring_write(q->note, e);
  q->armed = 0;
  q->notified++;
}

/* kind 1: a WRITE ONLY (with immediate) like the one Python executed, at the expected PSN, into the region */
static int take_only(flow_t *f, const uint8_t *d, int held) {
  const uint8_t *bth = d + f->head_len, *reth = bth + BTH_LEN;
  if (bth[0] != f->op || bth[1] != f->bth1 || ((uint32_t)bth[2] << 8 | bth[3]) != f->pkey) return 0;
  if ((be32(bth + 4) & 0xFFFFFF) != f->qpn || (be32(bth + 8) & 0xFFFFFF) != f->epsn || f->done >= BATCH) return 0;
  uint64_t va = be64(reth);
  if (be32(reth + 8) != f->rkey || be32(reth + 12) != f->dma_len) return 0;
  if (va < f->region_va || va - f->region_va > f->region_len || f->region_len - (va - f->region_va) < f->dma_len) return 0;
  int imm = f->op == 0x0B;
  if (imm && (!f->recvs || (f->watch_len && memcmp(f->watch, f->watch_seen, f->watch_len)))) return 0;   /* (Python
     reads the receive WRs posted since, sends the RNR NAK, or fails the bad receive WR) */
  if (imm && f->cq) {
    if (!cq_room(f->cq)) return 0;       /* (Python writes the CQE that overflows, or the notification C cannot) */
    if (held) return -1;                 /* after ACKs C took: Python completes their WRs first, then calls again */
  }
  uint32_t rest = f->frame_len - f->head_len - BTH_LEN - ICRC_LEN;
  const uint8_t *tail = bth + BTH_LEN + rest;
  uint32_t crc = crc32_update(bth_crc(f->lower_crc, bth), bth + BTH_LEN, rest);
  if (crc != ((uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 | (uint32_t)tail[3] << 24)) return 0;
  if (!place(f, va - f->region_va, reth + 16 + (imm ? 4 : 0), f->dma_len)) return 0;
  if (imm) {
    f->got[f->done] = be32(reth + 16);
    f->recvs--;
  }
  f->epsn = (f->epsn + 1) & 0xFFFFFF;
  f->msn = (f->msn + 1) & 0xFFFFFF;
  f->done++;
  if (bth[8] & 0x80) send_ack(f, be32(bth + 8) & 0xFFFFFF);
  if (imm && f->cq) write_cqe(f, f->wr_ids[f->used++], be32(reth + 16));   /* (after the ACK, as rc.py) */
  return 1;
}

/* kind 2: an ACK like the one Python handled (the same headers, BTH flags, P_Key, QPN and AETH syndrome): its PSN goes
   to Python, which acknowledges what it covers (stale or bogus PSNs included: rc.py decides) */
static int take_ack(flow_t *f, const uint8_t *d) {
  const uint8_t *bth = d + f->head_len, *aeth = bth + BTH_LEN;
  if (bth[0] != f->op || bth[1] != f->bth1 || ((uint32_t)bth[2] << 8 | bth[3]) != f->pkey) return 0;
  if ((be32(bth + 4) & 0xFFFFFF) != f->qpn || aeth[0] != f->syndrome || f->done >= BATCH) return 0;
  const uint8_t *tail = aeth + 4;
  uint32_t crc = crc32_update(bth_crc(f->lower_crc, bth), aeth, 4);
  if (crc != ((uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 | (uint32_t)tail[3] << 24)) return 0;
  f->got[f->done++] = be32(bth + 8) & 0xFFFFFF;
  return 1;
}

/* 1: taken; 0: not by this flow; -1: not yet (Python must catch up first, then call again) */
static int take(flow_t *f, const uint8_t *d, uint32_t len, const struct sockaddr_in *src, int64_t now, int held) {
  if (!f->armed || len != f->frame_len || (!f->kind && f->left <= f->mtu) || *f->generation != f->gen || now >= f->until_ns) return 0;
  if (src->sin_addr.s_addr != f->src_ip || src->sin_port != f->src_port) return 0;
  if (memcmp(d, f->head, f->head_len)) return 0;
  if (f->kind == 1) return take_only(f, d, held);
  if (f->kind == 2) return take_ack(f, d);
  const uint8_t *bth = d + f->head_len;
  if (bth[0] != OP_WRITE_MIDDLE || (bth[1] & 0x3F) || ((uint32_t)bth[2] << 8 | bth[3]) != f->pkey) return 0;
  if ((be32(bth + 4) & 0xFFFFFF) != f->qpn || (be32(bth + 8) & 0xFFFFFF) != f->epsn) return 0;
  const uint8_t *payload = bth + BTH_LEN, *tail = payload + f->mtu;
  uint32_t crc = crc32_update(bth_crc(f->lower_crc, bth), payload, f->mtu);
  if (crc != ((uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 | (uint32_t)tail[3] << 24)) return 0;
  if (!place(f, f->off, payload, f->mtu)) return 0;
  f->off += f->mtu;
  f->left -= f->mtu;
  f->epsn = (f->epsn + 1) & 0xFFFFFF;
  f->done++;
  if (bth[8] & 0x80) {
    f->ack = 1;
    f->ack_psn = be32(bth + 8) & 0xFFFFFF;
  }
  return 1;
}

/* Datagrams [i, n) of the batch in order: -> the index of the first not taken, or one past a taken one that asked for
   an ACK (Python sends it, then calls again), or (b->resync) of one C takes once Python has caught up */
int rx_take(batch_t *b, int i, int n, flow_t *flows, int nflows) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  int held = 0;                /* C took ACKs whose WRs Python completes: a CQE C wrote now would come before theirs */
  b->resync = 0;
  for (; i < n; i++) {
    if (b->flags[i] & MSG_TRUNC || b->addr[i].sin_family != AF_INET) return i;
    const uint8_t *d = b->buf + (uint64_t)i * SLOT;
    int k = 0, r = 0;
    while (k < nflows && !(r = take(&flows[k], d, b->len[i], &b->addr[i], now, held))) k++;
    if (k == nflows) return i;
    if (r < 0) {
      b->resync = 1;
      return i;
    }
    b->by[i] = k;
    held |= flows[k].kind == 2;
    if (flows[k].ack) return i + 1;
  }
  return n;
}
