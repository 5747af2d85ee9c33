"""The bnxt driver against the emulated NetXtreme-E (mock-<n>) through drivers/rdma's verbs, beyond what every NIC does
(tests/drivers/rdma/contract.py): bring-up, RDMA WRITEs through PHY loopback for sizes from 1 B to 4 MiB + 1 (MR page
tables of levels 0, 1 and 2), the NIC's status for a bad rkey, a wrong field in a WQE or an MSN entry, queues wrapping,
interrupts, and the hardware's flush CQEs."""
import threading

import pytest

from drivers.rdma import queues
from drivers.rdma import (QPState, RecvWR, SendFlags, SendWR, WCError, WCOpcode,
                          WCStatus, WROpcode)
from tests.drivers.rdma.contract import Pair   # two QPs of one NIC, one CQ: the same verbs for every vendor


def test_bring_up_names_the_port_and_gives_it_its_doorbell_page_and_contexts(nic):
  assert nic.name == "bnxt mock-0" and nic.provider.db.offset > 0 and len(nic.provider.context) >= 9


@pytest.mark.parametrize("size,level", [(1, 0), (4096, 0), (4097, 1), (1 << 20, 1), ((4 << 20) + 1, 2)])
def test_rdma_write_of_every_size_lands_exactly(nic, size, level):
  p = Pair(nic)
  src, dst = p.mr(size, fill=True), p.mr(size + 64)
  (wc,) = p.write(src, dst)
  assert (wc.status, wc.opcode, wc.byte_len) == (WCStatus.SUCCESS, WCOpcode.RDMA_WRITE, size)
  assert bytes(dst.view[:size]) == bytes(src.view) and bytes(dst.view[size:]) == bytes(64)
  assert dst._hw.pt.level == (1 if level == 0 and size + 64 > 4096 else level)   # the MR's page table


def test_a_bad_rkey_is_the_remote_access_status(nic):
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  with pytest.raises(WCError) as e:
    p.write(src, dst, rkey=dst.rkey ^ 0x5A5A00)
  assert e.value.wc.status == WCStatus.REM_ACCESS_ERR and e.value.wc.vendor_status == "CQ_REQ_STATUS_REMOTE_ACCESS_ERR"


@pytest.mark.parametrize("bit", ["wqe_size", "msn_entry"])
def test_a_wrong_field_in_what_the_driver_writes_is_a_local_qp_operation_error(nic, monkeypatch, bit):
  """The WQE's wqe_size one slot too many (two SGEs on a QP created with sq_sge 1), or an MSN entry one PSN off: the
  NIC refuses the request (a cq_req with LOCAL_QP_OPERATION_ERR) and writes nothing."""
  from drivers.bnxt import qp as bnxt_qp
  if bit == "wqe_size":
    real = bnxt_qp.send_wqe
    def one_slot_more(wr):
      w = bytearray(real(wr))
      w[2] += 1                                             # sq_rdma_hdr.wqe_size: 16-byte slots
      return bytes(w)
    monkeypatch.setattr(bnxt_qp, "send_wqe", one_slot_more)
  else:
    real = bnxt_qp.msn_entry
    monkeypatch.setattr(bnxt_qp, "msn_entry", lambda index, psn, nxt: real(index, psn, nxt + 1))
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  with pytest.raises(WCError) as e: p.write(src, dst)
  assert (e.value.wc.status, e.value.wc.vendor_status) == (WCStatus.LOC_QP_OP_ERR, "CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR")
  assert bytes(dst.view) == bytes(64) and p.a.state == QPState.ERR


def wire_port(ctx):
  return ctx.provider.pci.model.port.wire


def test_phy_loopback_off_again(nic):
  nic.set_loopback(False)
  nic.set_loopback(True)


def test_queues_wrap_with_their_epochs(nic):
  """300 WRITEs through a 128-WQE SQ and a 128-entry CQ (the MSN table's start index is the ring slot), and 300 more
  commands than the 256-entry CREQ holds."""
  p = Pair(nic)
  src, dst = p.mr(256, fill=True), p.mr(256)
  for i in range(300):
    (wc,) = p.write(src, dst, length=1 + i % 256)
    assert wc.status == WCStatus.SUCCESS
  assert bytes(dst.view) == bytes(src.view)
  for _ in range(150): p.mr(4096).dereg()      # REGISTER_MR + DEREGISTER_MR: 300 commands, 900 CMDQ slots
  assert nic.provider.rcfw.creq.cons > 256 and nic.provider.rcfw.ring.put > 3 * 256


def test_cq_wait_sleeps_on_the_nq_interrupt_and_wakes_for_the_completion(nic, monkeypatch):
  """CQ.wait arms the CQ and sleeps on the NQ's MSI-X eventfd, and the model's notification of the CQE wakes it: the
  responder only gets ready (and the requester's retransmission completes) once the waiter sleeps, and no sleep ends
  by itself before the wait's own timeout."""
  monkeypatch.setattr(queues, "EVENT_S", 60.0)
  p = Pair(nic, connect_b=False)                   # b in RESET: a's packets are dropped until it connects
  src, dst = p.mr(64, fill=True), p.mr(64)
  prov, sleeping = nic.provider, threading.Event()
  wait = prov.nq.wait
  prov.nq.wait = lambda t: (sleeping.set(), wait(t))
  ready = threading.Thread(target=lambda: sleeping.wait(30) and p.b.connect(p.a.endpoint(100), 200))
  ready.start()
  p.a.post_send(SendWR(1, WROpcode.RDMA_WRITE, [src.sge()], remote_addr=dst.addr, rkey=dst.rkey))
  assert [wc.status for wc in p.cq.wait(1, timeout_s=30)] == [WCStatus.SUCCESS]
  ready.join()
  assert sleeping.is_set() and bytes(dst.view) == bytes(src.view)
  assert prov.nq.q.cons >= 1 and p.cq.hw.toggle == prov.nq.q.cons % 4     # each notification advanced the arm toggle


def test_after_an_error_completion_the_hardwares_flush_cqes_are_not_completed_again(nic):
  """The requests behind a failed one and the posted receives complete once each, flushed: the verbs layer flushes the
  QP on the error completion, so the NIC's own flush CQEs that follow (one per request) complete nothing again."""
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  p.a.post_recv([RecvWR(50 + i) for i in range(2)])
  wrs = [SendWR(i, WROpcode.RDMA_WRITE, [src.sge()], remote_addr=dst.addr, rkey=dst.rkey ^ 0x5A00 if i == 1 else dst.rkey,
                send_flags=SendFlags.SIGNALED if i != 2 else SendFlags(0)) for i in range(4)]
  p.a.post_send(wrs)
  assert [wc.wr_id for wc in p.cq.wait(1, timeout_s=30)] == [0]
  with pytest.raises(WCError) as e: p.cq.wait(1, timeout_s=30)
  assert (e.value.wc.wr_id, e.value.wc.status) == (1, WCStatus.REM_ACCESS_ERR)
  with nic.provider.pci.model.port.lock: pass       # the model has handled the NAK: all its CQEs are written
  flushed = []
  while len(flushed) < 4:
    with pytest.raises(WCError) as e: p.cq.poll(64)
    flushed.append((e.value.wc.wr_id, e.value.wc.status))
  assert flushed == [(2, WCStatus.WR_FLUSH_ERR), (3, WCStatus.WR_FLUSH_ERR), (50, WCStatus.WR_FLUSH_ERR), (51, WCStatus.WR_FLUSH_ERR)]
  assert p.cq.poll(64) == [] and p.cq.expected == 0 and not p.a.sq and not p.a.rq
  assert p.cq.hw.q.cons == 6      # the NIC's CQEs were all consumed: WR 0, WR 1's error, two sends and two receives flushed
