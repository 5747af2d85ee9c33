"""The verbs layer's rules, on a provider without hardware: the RC state machine and the attributes each transition
takes, queue depths, completions mapped to their work requests, error completions as exceptions, flushing."""
import numpy as np
import pytest

from drivers.rdma import (AHAttr, Access, Endpoint, QPAttr, QPAttrMask as M, QPCap, QPState as S, RecvWR, SGE, SendFlags,
                          SendWR, VerbsError, WCError, WCOpcode, WCStatus, WROpcode)
from tests.drivers.rdma.fakenic import fake_context

INIT_MASK = M.STATE | M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS
RTR_MASK = M.STATE | M.AV | M.PATH_MTU | M.DEST_QPN | M.RQ_PSN | M.MAX_DEST_RD_ATOMIC | M.MIN_RNR_TIMER
RTS_MASK = M.STATE | M.TIMEOUT | M.RETRY_CNT | M.RNR_RETRY | M.SQ_PSN | M.MAX_QP_RD_ATOMIC
PEER = Endpoint(0x123, 0x4567, bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 2]), bytes.fromhex("02aabbccdd01"), 4096)


@pytest.fixture
def ctx():
  return fake_context()


def rtr_attr(**kw):
  return QPAttr(S.RTR, ah_attr=AHAttr(PEER.gid, 0, PEER.mac), dest_qp_num=PEER.qpn, rq_psn=PEER.psn, path_mtu=1024, **kw)


def new_qp(ctx, **cap):
  cq = ctx.create_cq(64)
  return ctx.alloc_pd().create_qp(cq, cap=QPCap(**cap)), cq


def rts_qp(ctx, **cap):
  qp, cq = new_qp(ctx, **cap)
  qp.connect(PEER, psn=7)
  return qp, cq


def test_reset_init_rtr_rts_with_the_attributes_each_needs(ctx):
  qp, _ = new_qp(ctx)
  assert qp.state == S.RESET
  qp.modify(QPAttr(S.INIT, qp_access_flags=Access.LOCAL_WRITE | Access.REMOTE_WRITE), INIT_MASK)
  qp.modify(rtr_attr(), RTR_MASK)
  qp.modify(QPAttr(S.RTS, sq_psn=1), RTS_MASK)
  assert qp.state == S.RTS
  assert [(c, n) for c, n, _ in qp.hw.modifies] == [(S.RESET, S.INIT), (S.INIT, S.RTR), (S.RTR, S.RTS)]
  assert [m for _, _, m in qp.hw.modifies] == [INIT_MASK, RTR_MASK, RTS_MASK]


def test_connect_walks_the_three_transitions_toward_the_peer(ctx):
  qp, _ = rts_qp(ctx)
  assert qp.state == S.RTS and [m for _, _, m in qp.hw.modifies] == [INIT_MASK, RTR_MASK, RTS_MASK]
  assert qp.endpoint(psn=7) == Endpoint(qp.qp_num, 7, ctx.query_gid(0), ctx.mac, 4096)


@pytest.mark.parametrize("cur,new,expect", [
  (S.RESET, S.RTR, "RESET -> RTR is not a transition of an RC QP; from RESET it goes to INIT, RESET, ERR"),
  (S.RESET, S.RTS, "RESET -> RTS is not a transition"),
  (S.INIT, S.RTS, "INIT -> RTS is not a transition of an RC QP; from INIT it goes to RTR, RESET, ERR"),
])
def test_a_transition_the_state_machine_lacks_is_refused_naming_the_way(ctx, cur, new, expect):
  qp, _ = new_qp(ctx)
  if cur == S.INIT: qp.modify(QPAttr(S.INIT), INIT_MASK)
  with pytest.raises(VerbsError, match=expect):
    qp.modify(QPAttr(new), M.STATE)
  assert qp.state == cur and len(qp.hw.modifies) == (cur == S.INIT)


def test_a_missing_attribute_is_named(ctx):
  qp, _ = new_qp(ctx)
  with pytest.raises(VerbsError, match="RESET -> INIT needs PKEY_INDEX, PORT in the mask"):
    qp.modify(QPAttr(S.INIT), M.STATE | M.ACCESS_FLAGS)
  qp.modify(QPAttr(S.INIT), INIT_MASK)
  with pytest.raises(VerbsError, match="INIT -> RTR needs RQ_PSN, DEST_QPN in the mask"):
    qp.modify(rtr_attr(), RTR_MASK & ~(M.DEST_QPN | M.RQ_PSN))


def test_an_attribute_the_transition_does_not_take_is_named(ctx):
  qp, _ = new_qp(ctx)
  with pytest.raises(VerbsError, match=r"RESET -> INIT does not take TIMEOUT, SQ_PSN \(it takes ACCESS_FLAGS, PKEY_INDEX, PORT\)"):
    qp.modify(QPAttr(S.INIT), INIT_MASK | M.TIMEOUT | M.SQ_PSN)


@pytest.mark.parametrize("change,expect", [
  (dict(path_mtu=8192), "path_mtu 8192 is not one of 256, 512, 1024, 2048, 4096 bytes"),
  (dict(path_mtu=1000), "path_mtu 1000 is not one of"),
  (dict(dest_qp_num=1 << 24), r"dest_qp_num 16777216 is outside \[0, 16777215\]"),
  (dict(rq_psn=-1), r"rq_psn -1 is outside"),
  (dict(rq_psn=True), r"rq_psn True is outside"),
  (dict(max_dest_rd_atomic=17), r"max_dest_rd_atomic 17 is outside \[0, 16\]"),
  (dict(min_rnr_timer=32), r"min_rnr_timer 32 is outside \[0, 31\]"),
  (dict(ah_attr=AHAttr(PEER.gid, 3, PEER.mac)), "sgid_index 3 is not in fake mock-0's GID table"),
  (dict(ah_attr=AHAttr(PEER.gid, 0, None)), "RoCE needs the peer's Ethernet address"),
  (dict(ah_attr=AHAttr(b"\0" * 15, 0, PEER.mac)), "dgid must be 16 bytes"),
  (dict(ah_attr=None), "the mask has AV but ah_attr is None"),
])
def test_rtr_values_out_of_range_are_refused(ctx, change, expect):
  qp, _ = new_qp(ctx)
  qp.modify(QPAttr(S.INIT), INIT_MASK)
  attr = rtr_attr()
  for k, v in change.items(): setattr(attr, k, v)
  with pytest.raises(VerbsError, match=expect):
    qp.modify(attr, RTR_MASK)
  assert qp.state == S.INIT


@pytest.mark.parametrize("change,expect", [(dict(retry_cnt=8), r"retry_cnt 8 is outside \[0, 7\]"),
                                           (dict(timeout=32), r"timeout 32 is outside \[0, 31\]"),
                                           (dict(sq_psn=1 << 24), "sq_psn 16777216 is outside")])
def test_rts_values_out_of_range_are_refused(ctx, change, expect):
  qp, _ = new_qp(ctx)
  qp.modify(QPAttr(S.INIT), INIT_MASK)
  qp.modify(rtr_attr(), RTR_MASK)
  with pytest.raises(VerbsError, match=expect):
    qp.modify(QPAttr(S.RTS, **change), RTS_MASK)


def test_init_takes_port_1_and_pkey_index_0_only(ctx):
  qp, _ = new_qp(ctx)
  with pytest.raises(VerbsError, match="has one port, 1; not 2"):
    qp.modify(QPAttr(S.INIT, port_num=2), INIT_MASK)
  with pytest.raises(VerbsError, match=r"pkey_index 1 is outside \[0, 0\]"):
    qp.modify(QPAttr(S.INIT, pkey_index=1), INIT_MASK)


def test_every_state_goes_to_err_and_reset_with_state_alone(ctx):
  qp, _ = rts_qp(ctx)
  qp.modify(QPAttr(S.ERR), M.STATE)
  with pytest.raises(VerbsError, match="ERR -> RTS is not a transition"):
    qp.modify(QPAttr(S.RTS), M.STATE)
  qp.modify(QPAttr(S.RESET), M.STATE)
  assert qp.state == S.RESET
  with pytest.raises(VerbsError, match="RESET -> ERR does not take TIMEOUT"):
    qp.modify(QPAttr(S.ERR), M.STATE | M.TIMEOUT)


def test_cur_state_must_match(ctx):
  qp, _ = rts_qp(ctx)
  with pytest.raises(VerbsError, match="is in RTS, not"):
    qp.modify(QPAttr(cur_qp_state=S.RTR), M.CUR_STATE | M.MIN_RNR_TIMER)
  qp.modify(QPAttr(cur_qp_state=S.RTS, min_rnr_timer=3), M.CUR_STATE | M.MIN_RNR_TIMER)   # RTS -> RTS


@pytest.mark.parametrize("state", [S.RESET, S.INIT, S.RTR])
def test_post_send_needs_rts(ctx, state):
  qp, _ = new_qp(ctx)
  if state >= S.INIT: qp.modify(QPAttr(S.INIT), INIT_MASK)
  if state >= S.RTR: qp.modify(rtr_attr(), RTR_MASK)
  with pytest.raises(VerbsError, match=f"is in {state.name}: post_send needs RTS"):
    qp.post_send(SendWR(1, WROpcode.SEND))
  assert qp.hw.sent == []


def test_post_recv_needs_init_or_later(ctx):
  qp, _ = new_qp(ctx)
  with pytest.raises(VerbsError, match="is in RESET: post_recv needs INIT, RTR or RTS"):
    qp.post_recv(RecvWR(1))
  qp.modify(QPAttr(S.INIT), INIT_MASK)
  qp.post_recv(RecvWR(1))
  assert qp.hw.received == [[(0, RecvWR(1))]]


def test_work_requests_are_checked_before_they_reach_the_hardware(ctx):
  qp, _ = rts_qp(ctx, max_send_sge=2)
  mr = ctx.alloc_pd().reg_mr(ctx.alloc(64), Access.LOCAL_WRITE)
  for wr, expect in ((SendWR(1, WROpcode.RDMA_WRITE, [mr.sge()], remote_addr=1 << 64, rkey=1), "remote_addr 18446744073709551616"),
                     (SendWR(1, WROpcode.RDMA_WRITE, [mr.sge()], remote_addr=0, rkey=1 << 32), "rkey 4294967296"),
                     (SendWR(1, WROpcode.SEND_WITH_IMM, [mr.sge()], imm_data=-1), "imm_data -1"),
                     (SendWR(1, WROpcode.SEND, [mr.sge()] * 3), "has 3 SGEs; the QP takes 2"),
                     (SendWR(1, WROpcode.RDMA_READ, [], remote_addr=0, rkey=1), "needs an SGE to read into"),
                     (SendWR(1, 9), "opcode 9 is not a WROpcode"),
                     (SendWR(1, WROpcode.SEND, [SGE(mr.addr, 8, 1 << 32)]), "SGE lkey 4294967296 is outside"),
                     (SendWR(1, WROpcode.SEND, [SGE(mr.addr, -1, mr.lkey)]), "SGE length -1 is outside"),
                     (SendWR(1, WROpcode.SEND, [SGE(True, 8, mr.lkey)]), "SGE addr True is outside"),   # a bool is no address
                     (SendWR(1, WROpcode.SEND, [SGE(mr.addr, 1 << 30, mr.lkey)] * 2), r"is longer than 2\^31 - 1 bytes"),
                     (SendWR(1, WROpcode.RDMA_WRITE, [mr.sge()], remote_addr=None, rkey=1), "remote None .*remote_addr None is outside"),
                     (SendWR(1, WROpcode.SEND, [SGE(mr.addr, None, mr.lkey)]), r"\(0 B\): SGE length None is outside")):
    with pytest.raises(VerbsError, match=expect):
      qp.post_send(wr)
  assert qp.hw.sent == []


def test_mr_sge_bounds_and_remote_write_needs_local_write(ctx):
  pd = ctx.alloc_pd()
  mr = pd.reg_mr(ctx.alloc(5000), Access.LOCAL_WRITE | Access.REMOTE_WRITE, length=4097)
  assert (mr.length, mr.lkey, len(ctx.provider.mrs[0][0])) == (4097, 0x101, 2)   # two pages for 4097 bytes
  assert mr.sge(4096).length == 1 and mr.contains(mr.addr, 4097) and not mr.contains(mr.addr + 1, 4097)
  with pytest.raises(ValueError, match=r"\[4000, \+100\) is outside the 4097-byte MR"):
    mr.sge(4000, 100)
  with pytest.raises(VerbsError, match="REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE"):
    pd.reg_mr(ctx.alloc(64), Access.REMOTE_WRITE)
  with pytest.raises(TypeError, match="reg_mr takes DMA memory from Context.alloc, host memory .* not int"):
    pd.reg_mr(64)


def test_mr_over_host_memory_keeps_its_offset_in_the_first_page_and_is_unmapped_at_dereg(ctx):
  """An MR over a numpy array that starts mid-page: the NIC gets the pages that hold it, the MR's address has the
  array's offset in its first page (where the NIC's translation starts), and dereg unmaps it."""
  arr = np.zeros(8192, np.uint8)[100:4200]
  first = arr.ctypes.data % 4096
  mr = ctx.alloc_pd().reg_mr(arr, Access.LOCAL_WRITE)
  pages, page_size, iova, length, _ = ctx.provider.mrs[-1]
  assert (iova, length, page_size) == (mr.addr, arr.nbytes, 4096) and mr.addr % 4096 == first
  assert len(pages) == -(-(first + arr.nbytes) // 4096)
  mr.view[:3] = b"abc"
  assert bytes(arr[:3]) == b"abc"                        # the MR's bytes are the array's
  assert len(ctx.provider.mapped) == 1
  mr.dereg()
  assert ctx.provider.mapped == []
  with pytest.raises(ValueError, match="read-only"): ctx.alloc_pd().reg_mr(bytes(64))
  assert ctx.provider.mapped == []


def test_send_queue_depth_is_enforced(ctx):
  qp, _ = rts_qp(ctx, max_send_wr=2)
  qp.post_send([SendWR(1, WROpcode.SEND), SendWR(2, WROpcode.SEND)])
  with pytest.raises(VerbsError, match="the send queue holds 2 work requests and 2 are outstanding"):
    qp.post_send(SendWR(3, WROpcode.SEND))
  qp.hw.complete(1)
  assert [wc.wr_id for wc in qp.send_cq.poll()] == [2]   # the unsignaled-or-not first one retired with it
  qp.post_send(SendWR(3, WROpcode.SEND))


def test_queue_and_cq_sizes_beyond_the_providers_limits_are_refused(ctx):
  with pytest.raises(ValueError, match="max_send_wr 1025: fake mock-0's queues hold at most 1024 work requests"):
    new_qp(ctx, max_send_wr=1025)
  with pytest.raises(ValueError, match="a CQ of 4097 completions: fake mock-0's CQs hold at most 4096"): ctx.create_cq(4097)
  assert new_qp(ctx, max_send_wr=1024, max_recv_wr=1024)[0].cap.max_send_wr == 1024 and ctx.create_cq(4096).depth >= 4096


def test_cq_overflow_is_refused(ctx):
  cq = ctx.create_cq(3)
  qp = ctx.alloc_pd().create_qp(cq, cap=QPCap(max_send_wr=8))
  qp.connect(PEER, psn=0)
  qp.post_send([SendWR(i, WROpcode.SEND) for i in range(3)])
  with pytest.raises(VerbsError, match="would overflow the CQ \\(3 of 3 completions outstanding\\)"):
    qp.post_send(SendWR(4, WROpcode.SEND))


def test_completions_map_to_their_work_requests(ctx):
  qp, cq = rts_qp(ctx)
  wrs = [SendWR(10, WROpcode.RDMA_WRITE, send_flags=SendFlags(0), remote_addr=0x1000, rkey=5),
         SendWR(11, WROpcode.RDMA_READ, [ctx.alloc_pd().reg_mr(ctx.alloc(64), Access.LOCAL_WRITE, 64).sge()], remote_addr=0, rkey=5)]
  qp.post_send(wrs)
  assert qp.hw.sent == [[(0, wrs[0]), (1, wrs[1])]]
  qp.hw.complete(1)         # the signaled READ: the unsignaled WRITE before it completed silently
  (wc,) = cq.poll()
  assert (wc.wr_id, wc.opcode, wc.byte_len, wc.wr, wc.status) == (11, WCOpcode.RDMA_READ, 64, wrs[1], WCStatus.SUCCESS)
  assert cq.expected == 0 and not qp.sq
  qp.post_recv(RecvWR(20))
  qp.hw.complete(0, recv=True, byte_len=12, imm_data=0xabcd, opcode=WCOpcode.RECV_RDMA_WITH_IMM)
  (wc,) = cq.poll()
  assert (wc.wr_id, wc.opcode, wc.byte_len, wc.imm_data) == (20, WCOpcode.RECV_RDMA_WITH_IMM, 12, 0xabcd)


def test_an_error_completion_raises_with_status_hardware_status_and_the_request(ctx):
  qp, cq = rts_qp(ctx)
  wrs = [SendWR(i, WROpcode.RDMA_WRITE, remote_addr=0x7000, rkey=0xdead) for i in range(3)]
  qp.post_send(wrs)
  qp.post_recv(RecvWR(99))
  qp.hw.complete(0)
  qp.hw.complete(1, WCStatus.REM_ACCESS_ERR, vendor_err=7)
  assert [wc.wr_id for wc in cq.poll()] == [0]        # the good one first, the error on the next poll
  with pytest.raises(WCError) as e:
    cq.poll()
  assert (e.value.wc.status, e.value.wc.vendor_err, e.value.wc.wr) == (WCStatus.REM_ACCESS_ERR, 7, wrs[1])
  msg = str(e.value)
  assert "RDMA_WRITE wr_id 1" in msg and "rkey 0xdead" in msg and "REM_ACCESS_ERR" in msg and "hardware status 0x7 FAKE_STATUS" in msg
  assert qp.state == S.ERR
  flushed = []
  for _ in range(2):          # the rest of the send queue and the receive queue: flushed
    with pytest.raises(WCError) as e:
      cq.poll()
    flushed.append((e.value.wc.wr_id, e.value.wc.status))
  assert flushed == [(2, WCStatus.WR_FLUSH_ERR), (99, WCStatus.WR_FLUSH_ERR)] and cq.poll() == [] and cq.expected == 0
  qp.post_send(SendWR(5, WROpcode.SEND))             # a QP in ERR completes new requests as flushed
  with pytest.raises(WCError, match="WR_FLUSH_ERR"):
    cq.poll()


def test_a_completion_for_nothing_outstanding_is_an_error(ctx):
  qp, cq = rts_qp(ctx)
  qp.hw.complete(4)
  with pytest.raises(VerbsError, match="completed send request #4, which is not outstanding"):
    cq.poll()


def test_wait_times_out_when_nothing_completes_naming_what_is_outstanding(ctx):
  qp, cq = rts_qp(ctx)
  qp.post_send(SendWR(3, WROpcode.RDMA_WRITE, remote_addr=0x40, rkey=9))
  with pytest.raises(TimeoutError, match=r"0 of 1 completions arrived and then none for 0.05 s; outstanding: QP 0x40 "
                                          r"\(RTS\): 1 send \(first: RDMA_WRITE wr_id 3 \(0 B, remote 0x40 rkey 0x9\)\)"):
    cq.wait(1, timeout_s=0.05)


def test_reset_empties_the_queues_without_completions(ctx):
  qp, cq = rts_qp(ctx)
  qp.post_send(SendWR(1, WROpcode.SEND))
  qp.modify(QPAttr(S.RESET), M.STATE)
  assert cq.poll() == [] and cq.expected == 0
  with pytest.raises(VerbsError, match="still used by QP 0x40"):
    cq.destroy()
  qp.destroy()
  cq.destroy()
