"""Completion queues: RCFW CREATE_CQ and polling with toggle bits (roce_hsi.h cq_*; kernel qplib_fp.c bnxt_qplib_poll_cq).

A CQE is 32 bytes; byte 24 holds the toggle bit (bit 0) and the type (bits 1-4: REQ for the send queue, RES_RC for
the receive queue), byte 25 the status. The hardware writes toggle 1 during the ring's first pass, 0 during the
second, and so on, so an entry is new when its toggle differs from the consumer's pass parity. Consumed entries are
handed back with a CQ doorbell (index = consumer modulo the ring, epoch = its pass parity).
`wait_event` arms the CQ (CQ_ARMALL with the arm toggle the last notification gave, 0 at first) and sleeps on the
NQ's interrupt (nq.py) until the next CQE is notified.
"""
from __future__ import annotations
import ctypes
from typing import TYPE_CHECKING

from autogen import bnxt as bnxt_hsi
from drivers.bnxt.hsi import Packer
from drivers.bnxt.pbl import HWQueue
from drivers.rdma.provider import Completion
if TYPE_CHECKING: from drivers.bnxt.device import BNXTDevice

CQE_SIZE = ctypes.sizeof(bnxt_hsi.cq_base)
REQ = Packer(bnxt_hsi.cq_req, "qp_handle sq_cons_idx status")
RES_RC = Packer(bnxt_hsi.cq_res_rc, "length imm_data_or_inv_r_key qp_handle status flags srq_or_rq_wr_id")


class CQ:
  def __init__(self, dev: BNXTDevice, depth: int):
    self.dev, self.handle = dev, dev.new_handle(self)
    entries = 1 << max(depth - 1, 127).bit_length()    # a power of two with room for `depth`, at least one page
    self.q = HWQueue(dev.pci, entries, CQE_SIZE)
    try:
      self.cq_id = dev.rcfw("create_cq", cq_handle=self.handle, cq_size=entries, pbl=self.q.pt.base,
                            pg_size_lvl=self.q.pt.level | bnxt_hsi.CMDQ_CREATE_CQ_PG_SIZE_PG_4K,
                            cq_fco_cnq_id=dev.nq_id & bnxt_hsi.CMDQ_CREATE_CQ_CNQ_ID_MASK).xid
    except BaseException:
      self.q.free()
      raise
    self.depth = entries
    self.toggle = 0                                    # the arm toggle: advanced by each notification (nq_cn)

  def notified(self, toggle: int) -> None: self.toggle = toggle

  def _new(self) -> bool:
    q = self.q
    return bool(q.ring[q.cons % q.entries * CQE_SIZE + 24] & bnxt_hsi.CQ_BASE_TOGGLE) != q.epoch(q.cons)   # written in this pass

  def wait_event(self, timeout_s: float) -> bool:
    """Arm the CQ and sleep until its next completion is notified or `timeout_s` passes; False at once where the
    platform gives no interrupts."""
    nq = self.dev.nq
    if nq.event is None: return False
    nq.service()                                       # the toggles of notifications not seen yet
    q = self.q
    self.dev.db.ring(self.cq_id, bnxt_hsi.DBC_DBC_TYPE_CQ_ARMALL, q.cons % q.entries, q.epoch(q.cons), self.toggle)
    if not self._new(): nq.wait(timeout_s)             # else it came before the arm: no notification follows
    return True

  def poll(self, max_entries: int) -> list[Completion]:
    q, out, start = self.q, [], self.q.cons
    while len(out) < max_entries and self._new():
      at = q.cons % q.entries * CQE_SIZE
      q.cons += 1
      if (c := self._decode(q.ring, at)) is not None: out.append(c)
    if q.cons != start: self.dev.db.ring(self.cq_id, bnxt_hsi.DBC_DBC_TYPE_CQ, q.cons % q.entries, q.epoch(q.cons))
    return out

  def _decode(self, ring: memoryview, at: int) -> Completion | None:
    """The entry at byte `at` of the ring as a completion (None: one for a request of a QP the verbs layer has flushed,
    dropped: qp.py). The NIC does not write an entry again before the consumer index has passed it."""
    kind = ring[at + 24] & bnxt_hsi.CQ_BASE_CQE_TYPE_MASK
    if kind == bnxt_hsi.CQ_BASE_CQE_TYPE_REQ:
      handle, cons, status = REQ.unpack_from(ring, at)
      return self.dev.qp_by_handle(handle, self).req_completion(cons, status)
    if kind == bnxt_hsi.CQ_BASE_CQE_TYPE_RES_RC:
      length, imm, handle, status, flags, wr_id = RES_RC.unpack_from(ring, at)
      return self.dev.qp_by_handle(handle, self).res_completion(length, imm, status, flags, wr_id)
    raise RuntimeError(f"{self.dev.name}: CQ {self.cq_id:#x} entry {self.q.cons - 1} has type {kind >> 1:#x}, which an RC QP "
                       f"does not produce: {bytes(ring[at:at + CQE_SIZE]).hex()}")

  def destroy(self) -> None:
    try: self.dev.rcfw("destroy_cq", cq_cid=self.cq_id)
    finally:
      self.q.free()
      self.dev.drop_handle(self.handle)
