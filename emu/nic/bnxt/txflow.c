/* The bnxt model's transmit-flow decoder (emu/nic/txflow.h, emu/nic/bnxt/datapath.py _sq_c). */
#include "emu/nic/txflow.h"

/* bnxt in static WQE mode (emu/nic/bnxt/datapath.py _sq, _post_wqe, _decode): the WQEs at ring positions [pos, end)
   while each is the flow's shape and passes every check; message `msn` and PSN `psn` for the first, `una` the oldest
   unacknowledged PSN. -> how many were sent (f->sent says what they were, f->pos where the next one is) */
int tx_bnxt(txflow_t *f, uint64_t pos, uint64_t end, uint32_t msn, uint32_t psn, uint32_t una) {
  f->pos = pos;
  if (!tx_fresh(f)) return 0;
  while (f->pos < end && f->n < BATCH) {
    uint8_t raw[128];
    memcpy(raw, sq_at(f, (f->pos % f->depth) * f->stride), 128);
    if (raw[0] != f->wqe_type || (raw[1] & ~f->vary) != f->flags || raw[2] != f->size || le32(raw + 8) != f->length) break;
    if (le32(raw + 40) != f->lkey || le32(raw + 44) != f->length) break;                    /* one SGE: all the length */
    uint32_t index = (uint32_t)(f->pos % f->depth), first = psn & 0xFFFFFF, next = (psn + 1) & 0xFFFFFF;
    uint64_t want = (uint64_t)index << 48 | (uint64_t)next << 24 | first;
    if (le64(sq_at(f, f->msn_off + 8 * (msn % f->msn_entries))) != want) break;            /* (a LOCAL_QP_OPERATION_ERR) */
    if (!tx_wqe(f, psn, una, index, raw[1], le32(raw + 4), le64(raw + 16), le32(raw + 24), le64(raw + 32))) break;
    f->pos++;
    psn++;
    msn++;
  }
  return f->n;
}
