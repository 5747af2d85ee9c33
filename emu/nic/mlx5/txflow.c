/* The mlx5 model's transmit-flow decoder (emu/nic/txflow.h, emu/nic/mlx5/wqe.py sq_c). */
#include "emu/nic/txflow.h"

/* mlx5 (emu/nic/mlx5/wqe.py sq_doorbell, post_wqe, sges): the send doorbell `value` (the last WQE's first 8 bytes as
   they lie in memory) with the consumer at `cons`: the WQEs from it to the doorbell record's producer while each is the
   flow's shape and passes every check (nothing if the doorbell itself is wrong: the Python path raises); PSN `psn` for
   the first, `una` the oldest unacknowledged PSN. -> how many were sent (f->pos: the consumer after them) */
int tx_mlx5(txflow_t *f, uint32_t cons, uint64_t value, uint32_t psn, uint32_t una) {
  f->pos = cons;
  f->all = 0;
  if (!tx_fresh(f)) return 0;
  uint32_t pending = (be32(f->dbr + 4) - cons) & 0xFFFF, i = cons, last = cons;
  if (!pending || pending > f->depth) return 0;
  while (((i - cons) & 0xFFFF) < pending) {                 /* the WQEs' starts: the doorbell names the last one */
    uint32_t ds = be32(sq_at(f, f->ring_off + (i % f->depth) * 64) + 4) & 0x3F, nbb = ds > 4 ? (ds + 3) / 4 : 1;
    if (((i + nbb - cons) & 0xFFFF) > pending) return 0;
    last = i;
    i += nbb;
  }
  uint8_t db[8];
  memcpy(db, &value, 8);                                   /* (little-endian: the bytes as stored) */
  if (memcmp(sq_at(f, f->ring_off + (last % f->depth) * 64), db, 8)) return 0;
  for (i = cons; ((i - cons) & 0xFFFF) < pending && f->n < BATCH; i++, psn++) {
    const uint8_t *w = sq_at(f, f->ring_off + (i % f->depth) * 64);
    uint32_t head = be32(w), qpn_ds = be32(w + 4), index = i & 0xFFFF;
    if ((head & 0xFF) != f->wqe_type || (head >> 8 & 0xFFFF) != index || head >> 24 || qpn_ds >> 8 != f->qpn) break;
    if ((qpn_ds & 0x3F) != f->size || (w[11] & ~f->vary) != f->flags) break;
    if (be32(w + 32) != f->length || be32(w + 36) != f->lkey) break;                       /* one data segment: all of it */
    if (!tx_wqe(f, psn, una, index, w[11], be32(w + 12), be64(w + 16), be32(w + 24), be64(w + 40))) break;
    f->pos = (i + 1) & 0xFFFF;
    if (i == last) {
      memcpy(f->last, w, 64);
      f->all = 1;
    }
  }
  return f->n;
}
