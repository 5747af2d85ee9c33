"""Completion queues: RCFW CREATE_CQ and polling with toggle bits (reference/rdma.md 5.9, 5.13; roce_hsi.h cq_*).

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

from autogen import bnxt as H
from drivers.bnxt.hsi import decode
from drivers.bnxt.pbl import HWQueue
from drivers.rdma.provider import Completion
if TYPE_CHECKING: from drivers.bnxt.device import BNXTDevice

CQE_SIZE = ctypes.sizeof(H.cq_base)


class CQ:
  def __init__(self, dev: BNXTDevice, depth: int):
    self.dev, self.handle = dev, dev.new_handle(self)
    entries = 1 << max(depth - 1, 127).bit_length()    # a power of two with room for `depth`, at least one page
    self.q = HWQueue(dev.pci, entries, CQE_SIZE)
    try:
      self.cq_id = dev.rcfw("create_cq", cq_handle=self.handle, cq_size=entries, pbl=self.q.pt.base,
                            pg_size_lvl=self.q.pt.level | H.CMDQ_CREATE_CQ_PG_SIZE_PG_4K,
                            cq_fco_cnq_id=dev.nq_id & H.CMDQ_CREATE_CQ_CNQ_ID_MASK).xid
    except BaseException:
      self.q.free()
      raise
    self.depth = entries
    self.toggle = 0                                    # the arm toggle: advanced by each notification (nq_cn)

  def notified(self, toggle: int) -> None: self.toggle = toggle

  def _new(self) -> bool:
    e = self.q.slot(self.q.cons)
    return bool(e[24] & H.CQ_BASE_TOGGLE) != bool(self.q.epoch(self.q.cons))   # written in this pass

  def wait_event(self, timeout_s: float) -> bool:
    """Arm the CQ and sleep until its next completion is notified or `timeout_s` passes; False at once where the
    platform gives no interrupts."""
    nq = self.dev.nq
    if nq.event is None: return False
    nq.service()                                       # the toggles of notifications not seen yet
    q = self.q
    self.dev.db.ring(self.cq_id, H.DBC_DBC_TYPE_CQ_ARMALL, q.cons % q.entries, q.epoch(q.cons), self.toggle)
    if not self._new(): nq.wait(timeout_s)             # else it came before the arm: no notification follows
    return True

  def poll(self, max_entries: int) -> list[Completion]:
    q, out = self.q, []
    while len(out) < max_entries and self._new():
      cqe = bytes(q.slot(q.cons))
      q.cons += 1
      if (c := self._decode(cqe)) is not None: out.append(c)
    if out: self.dev.db.ring(self.cq_id, H.DBC_DBC_TYPE_CQ, q.cons % q.entries, q.epoch(q.cons))
    return out

  def _decode(self, cqe: bytes) -> Completion | None:
    kind = cqe[24] & H.CQ_BASE_CQE_TYPE_MASK
    if kind == H.CQ_BASE_CQE_TYPE_REQ:
      req = decode(H.cq_req, cqe)
      return self.dev.qp_by_handle(req.qp_handle, self).req_completion(req)
    if kind == H.CQ_BASE_CQE_TYPE_RES_RC:
      res = decode(H.cq_res_rc, cqe)
      return self.dev.qp_by_handle(res.qp_handle, self).res_completion(res)
    raise RuntimeError(f"{self.dev.name}: CQ {self.cq_id:#x} entry {self.q.cons - 1} has type {kind >> 1:#x}, which an RC QP "
                       f"does not produce: {cqe.hex()}")

  def destroy(self) -> None:
    try: self.dev.rcfw("destroy_cq", cq_cid=self.cq_id)
    finally:
      self.q.free()
      self.dev.drop_handle(self.handle)
