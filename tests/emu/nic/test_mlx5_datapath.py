"""The emulated ConnectX-6 Dx's datapath against hand-made WQEs and doorbells (QPs set up by drivers/mlx5): a WQE
whose control segment lies completes with an error CQE, a doorbell that does not carry the last WQE or names another
QP's UAR raises, and CQE owner bits flip with each pass of the ring."""
import os, time

import pytest

from autogen import mlx5_core
from drivers.mlx5.ifc import swap32
from drivers.mlx5.qp import data_seg
from drivers.rdma import Access, QPAttr, QPAttrMask as M, QPState, SendWR, WCError, WROpcode, open_context
from emu.nic.mlx5 import ModelError
from tests.drivers.rdma.contract import RW, Pair


@pytest.fixture
def nic():
  ctx = open_context("mlx5", "mock-0", ip="10.0.0.1")
  yield ctx
  ctx.close()


def post_raw(qp, wqes: list[bytes], doorbell: bytes | None = None) -> None:
  """Write one-WQEBB WQEs at the producer (as the verbs layer's requests), publish the producer in the doorbell record,
  ring the UAR with the last one's first 8 bytes."""
  hw = qp.hw
  for wqe in wqes:
    at = hw.sq.claim(64)
    hw.sq.bytes[at % (1 << hw.log_sq) * 64:][:64] = wqe.ljust(64, b"\0")
    hw.wrs.sq.append((at & 0xFFFF, qp._sq_seq, at + 1))
    qp.sq.append((qp._sq_seq, SendWR(99, WROpcode.RDMA_WRITE)))
    qp.send_cq.expected += 1
    qp._sq_seq += 1
  hw.dev.dbr.view[hw.dbr + 4:hw.dbr + 8] = (hw.sq.put & 0xFFFF).to_bytes(4, "big")
  hw.dev.uar_bar.write64(0x800, int.from_bytes(doorbell or wqes[-1][:8], "little"))


def model_log(ctx) -> str:
  return "\n".join(ctx.provider.pci.model.log_lines[-3:])


def write_wqe(qp, index: int, src, dst, qpn: int | None = None) -> bytes:
  ctrl = (index << 8 | mlx5_core.MLX5_OPCODE_RDMA_WRITE).to_bytes(4, "big") + ((qpn or qp.qp_num) << 8 | 3).to_bytes(4, "big") + \
         bytes([0, 0, 0, mlx5_core.MLX5_WQE_CTRL_CQ_UPDATE]) + bytes(4)
  return ctrl + dst.addr.to_bytes(8, "big") + dst.rkey.to_bytes(4, "big") + bytes(4) + data_seg(src.length, src.lkey, src.addr)


@pytest.mark.parametrize("bad", ["index", "qpn"])
def test_a_wqe_with_the_wrong_index_or_qpn_completes_with_a_local_qp_operation_error(nic, bad):
  """The bad WQE first, a good one after it (whose 8 bytes the doorbell carries): the bad one's CQE is the error."""
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  i = p.a.hw.sq.put
  wqe = write_wqe(p.a, i + 5 if bad == "index" else i, src, dst, qpn=p.b.qp_num if bad == "qpn" else None)
  post_raw(p.a, [wqe, write_wqe(p.a, i + 1, src, dst)])
  with pytest.raises(WCError) as e: p.cq.wait(1, timeout_s=30)
  assert (e.value.wc.wr.wr_id, e.value.wc.vendor_err) == (99, mlx5_core.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR) and bytes(dst.view) == bytes(64)
  assert "wqe_index" in model_log(nic) if bad == "index" else "qpn" in model_log(nic)


def test_a_doorbell_must_carry_the_last_wqe_and_name_the_qps_uar(nic):
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  wqe = write_wqe(p.a, p.a.hw.sq.put, src, dst)
  with pytest.raises(ModelError, match="a doorbell carries the last posted WQE's first 8 bytes"):
    post_raw(p.a, [wqe], doorbell=wqe[:4] + (p.a.qp_num << 8 | 2).to_bytes(4, "big"))
  dev = nic.provider
  with pytest.raises(ModelError, match="UAR page 9 is not allocated"): dev.bar.write64(9 * 4096 + 0x800, 0)
  with pytest.raises(ModelError, match="no doorbell there"): dev.uar_bar.write32(0x804, 0)
  with pytest.raises(ModelError, match="consumer .* is past the producer"):
    dev.uar_bar.write32(0x48, swap32(dev.eq.eqn << 24 | (dev.eq.cons + 5) & 0xFFFFFF))


def test_a_send_doorbell_before_rts_raises(nic):
  pd, cq = nic.alloc_pd(), nic.create_cq(64)
  qp = pd.create_qp(cq)
  qp.modify(QPAttr(QPState.INIT, qp_access_flags=RW), M.STATE | M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS)
  src = pd.reg_mr(nic.alloc(64), Access.LOCAL_WRITE, 64)
  with pytest.raises(ModelError, match="is in INIT; send doorbells need RTS"):
    qp.hw.post_send([(0, SendWR(1, WROpcode.RDMA_WRITE, [src.sge()], remote_addr=src.addr, rkey=src.rkey))])


def test_cqe_owner_bits_flip_with_each_pass_of_the_ring(nic):
  p = Pair(nic)
  nic.set_loopback(True)
  src, dst = p.mr(8, fill=True), p.mr(8)
  cq = p.cq.hw
  for i in range(cq.depth + 1):
    p.write(src, dst)
    e = (i % cq.depth) * 64
    assert cq.mem.view[e + 63] == mlx5_core.MLX5_CQE_REQ << 4 | (i // cq.depth) & 1


def test_an_armed_cq_posts_one_completion_event_and_the_armed_eq_interrupts_once(nic):
  p = Pair(nic)
  src, dst = p.mr(8, fill=True), p.mr(8)
  cq, eq, dev = p.cq.hw, nic.provider.comp_eq, nic.provider
  eq.poll(arm=True)                                                        # the completion EQ armed, nothing pending
  dev.uar_bar.write64(mlx5_core.MLX5_CQ_DOORBELL, int.from_bytes((cq.ci & 0xFFFFFF).to_bytes(4, "big") + cq.cqn.to_bytes(4, "big"), "little"))
  p.a.post_send([SendWR(i, WROpcode.RDMA_WRITE, [src.sge()], remote_addr=dst.addr, rkey=dst.rkey) for i in range(2)])
  e = (cq.ci + 1) % cq.depth * 64
  deadline = time.monotonic() + 30
  while cq.mem.view[e + 63] >> 4 == mlx5_core.MLX5_CQE_INVALID:                  # the second CQE (the ACKs come on the wire's thread)
    assert time.monotonic() < deadline
    time.sleep(0.01)
  assert os.eventfd_read(eq.irq) == 1                                      # one interrupt
  assert [(k, int.from_bytes(d[24:28], "big")) for k, d in eq.poll()] == [(mlx5_core.MLX5_EVENT_TYPE_COMP, cq.cqn)]  # one event
  assert len(p.cq.wait(2, timeout_s=30)) == 2
  with pytest.raises(ModelError, match="no CQ 4660 on this UAR page"):
    dev.uar_bar.write64(mlx5_core.MLX5_CQ_DOORBELL, int.from_bytes(bytes(4) + (0x1234).to_bytes(4, "big"), "little"))


def test_a_receive_doorbell_record_past_the_ring_moves_the_qp_to_err(nic):
  p = Pair(nic)
  src = p.mr(64, fill=True)
  p.mr(64)
  hw = p.b.hw
  hw.dev.dbr.view[hw.dbr:hw.dbr + 4] = ((1 << hw.log_rq) + 1).to_bytes(4, "big")     # more receive WQEs than the ring holds
  p.a.post_send(SendWR(1, WROpcode.SEND, [src.sge()]))
  with pytest.raises(WCError): p.cq.wait(1, timeout_s=30)
  assert nic.provider.pci.model.qps.qps[p.b.qp_num].rc.state == "ERR" and "WQEs past the consumer" in model_log(nic)


def test_a_blueflame_copy_must_repeat_the_wqe_in_order(nic):
  """The driver posts one WQE as a doorbell plus the rest of it (BlueFlame); a copy that differs or skips raises."""
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  (wc,) = p.write(src, dst)                               # one WQE: doorbell + 7 more words at 0x800 or 0x900
  assert bytes(dst.view) == bytes(src.view) and nic.provider.pci.model.blueflame.expect
  bar, reg = nic.provider.uar_bar, 0x800 + 0x100 * (p.a.hw.bf ^ 1)      # the register that WQE went to
  with pytest.raises(ModelError, match="continues at 64"): bar.write64(reg + 8, 0)
  wqe = write_wqe(p.a, p.a.hw.sq.put, src, dst)
  post_raw(p.a, [wqe])
  with pytest.raises(ModelError, match="is not the send queue's WQE bytes there"):
    bar.write64(0x800 + 8, int.from_bytes(wqe[8:16], "little") ^ 1)
  bar.write64(0x800 + 8, int.from_bytes(wqe[8:16], "little"))              # the right bytes carry on
  p.cq.wait(1, timeout_s=30)
  wqe = write_wqe(p.a, p.a.hw.sq.put, src, dst)             # stores in a row (MMIO.write64s) are checked as each would be
  post_raw(p.a, [wqe])
  words = [int.from_bytes(wqe[i:i + 8], "little") for i in range(8, 64, 8)]
  with pytest.raises(ModelError, match="offset 0x20: .* is not the send queue's WQE bytes there"):
    bar.write64s(0x800 + 8, words[:3] + [words[3] ^ 1] + words[4:])
  bar.write64s(0x800 + 0x20, words[3:])                    # the three before it counted
  p.cq.wait(1, timeout_s=30)
