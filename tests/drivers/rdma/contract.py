"""The NIC provider contract: what every registered RDMA NIC's provider does alike under drivers/rdma's verbs, with no
per-vendor exceptions (what only one vendor's hardware does stays in tests/drivers/<vendor>).

tests/drivers/rdma/test_nic_contract.py runs every check in CHECKS on emulated NIC mock-0 of every vendor the registry knows
(rdma_vendors()), opened with IPv4 address IP and its PHY loopback on, so a NIC joins by registering. A check takes the
vendor's name and the open Context, makes its own QPs (a Pair: two QPs of the NIC connected to each other through the loopback) and asserts
against the bytes it wrote, never against a vendor's encoding."""
from __future__ import annotations
from typing import Callable

import numpy as np
import pytest

from drivers.rdma import (SGE, Access, Context, QPAttr, QPAttrMask as M, QPCap, QPState, RecvWR, SendWR, VerbsError, WCError,
                          WCOpcode, WCStatus, WROpcode, ipv4_to_gid, open_context, rdma_vendors)
from drivers.rdma.provider import page_sizes
from drivers.system import DeviceBusyError

RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ
IP = "10.0.0.1"
INIT_MASK = M.STATE | M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS


class Pair:
  """Two QPs of one NIC connected to each other (through its PHY loopback), with one CQ."""
  def __init__(self, ctx: Context, timeout: int = 14, retry_cnt: int = 7, connect_b: bool = True):
    self.ctx, self.pd, self.cq = ctx, ctx.alloc_pd(), ctx.create_cq(64)
    self.a, self.b = self.pd.create_qp(self.cq), self.pd.create_qp(self.cq)
    self.a.connect(self.b.endpoint(200), 100, timeout=timeout, retry_cnt=retry_cnt)
    if connect_b: self.b.connect(self.a.endpoint(100), 200)

  def mr(self, size: int, access=RW, fill: bool = False):
    mr = self.pd.reg_mr(self.ctx.alloc(size), access, size)
    if fill: mr.view[:] = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    return mr

  def write(self, src, dst, length=None, offset=0, rkey=None, opcode=WROpcode.RDMA_WRITE, **kw):
    length = src.length if length is None else length
    self.a.post_send(SendWR(1, opcode, [src.sge(0, length)], remote_addr=dst.addr + offset,
                            rkey=dst.rkey if rkey is None else rkey, **kw))
    return self.cq.wait(1, timeout_s=30)


def check_open_names_the_port_and_holds_the_nic(nic: str, ctx: Context) -> None:
  """The port has its name, a MAC and GID 0 from the IPv4 address; the NIC is this context's until it is closed, and an
  emulated NIC that does not exist is named with what to do."""
  assert ctx.name.endswith(" mock-0") and len(ctx.mac) == 6 and ctx.query_gid(0) == ipv4_to_gid(IP)
  with pytest.raises(DeviceBusyError, match="device mock-0 is in use by pid"): open_context(nic, "mock-0")
  with pytest.raises(ValueError, match=f"there is no emulated {rdma_vendors()[nic].models[0]} device 99: .*use an index below"):
    open_context(nic, "mock-99")


def check_mrs_register_in_the_nics_page_sizes(nic: str, ctx: Context) -> None:
  """MRs of 1 B to 1 MiB + 1 each get their own keys and the bytes asked for; a page size the NIC's MRs do not take
  (mr_page_sizes) is refused naming those it takes; a key from a deregistered MR reaches nothing."""
  prov, pd = ctx.provider, ctx.alloc_pd()
  assert prov.mr_page_sizes & 4096
  mrs = [pd.reg_mr(ctx.alloc(n), RW, n) for n in (1, 4096, 4097, (1 << 20) + 1)]
  assert [mr.length for mr in mrs] == [1, 4096, 4097, (1 << 20) + 1]
  assert len({mr.lkey for mr in mrs}) == len({mr.rkey for mr in mrs}) == len(mrs)
  mem = ctx.alloc(4096)
  with pytest.raises(ValueError, match=rf"{ctx.name}: MR page size 0xbb8 is not one the NIC's MRs take \({page_sizes(prov.mr_page_sizes)} bytes\)"):
    prov.reg_mr(pd.handle, mem.bus_addrs[:1], 3000, 0, 4096, Access.LOCAL_WRITE)
  p = Pair(ctx)
  src, old = p.mr(64, fill=True), p.mr(64)
  stale = old.rkey
  old.dereg()
  new = p.mr(64)
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.write(src, new, rkey=stale)
  assert bytes(new.view) == bytes(64)


def check_qps_walk_the_rc_states_and_refuse_other_transitions(nic: str, ctx: Context) -> None:
  """RESET -> INIT -> RTR -> RTS; a transition the RC state machine lacks, or a send before RTS, is refused naming the
  way and leaves the QP as it was; ERR -> RESET makes a QP that connects and carries data again."""
  p = Pair(ctx)
  src, dst = p.mr(64, fill=True), p.mr(64)
  qp = p.pd.create_qp(p.cq)
  assert qp.state == QPState.RESET
  qp.modify(QPAttr(QPState.INIT, qp_access_flags=RW), INIT_MASK)
  with pytest.raises(VerbsError, match="INIT -> RTS is not a transition of an RC QP; from INIT it goes to RTR, RESET, ERR"):
    qp.modify(QPAttr(QPState.RTS), M.STATE)
  with pytest.raises(VerbsError, match="is in INIT: post_send needs RTS"): qp.post_send(SendWR(1, WROpcode.SEND))
  assert qp.state == QPState.INIT
  for q in (p.a, p.b):
    q.modify(QPAttr(QPState.ERR), M.STATE)
    q.modify(QPAttr(QPState.RESET), M.STATE)
    assert q.state == QPState.RESET
  assert p.cq.poll() == []
  p.a.connect(p.b.endpoint(300), 400)
  p.b.connect(p.a.endpoint(400), 300)
  assert p.a.state == p.b.state == QPState.RTS
  (wc,) = p.write(src, dst)
  assert wc.status == WCStatus.SUCCESS and bytes(dst.view) == bytes(src.view)


def check_rdma_write_of_every_size_lands_exactly(nic: str, ctx: Context) -> None:
  for size in (1, 4096, 4097, 1 << 20, (4 << 20) + 1):
    p = Pair(ctx)
    src, dst = p.mr(size, fill=True), p.mr(size + 64)
    (wc,) = p.write(src, dst)
    assert (wc.status, wc.opcode, wc.byte_len) == (WCStatus.SUCCESS, WCOpcode.RDMA_WRITE, size)
    assert bytes(dst.view[:size]) == bytes(src.view) and bytes(dst.view[size:]) == bytes(64)


def check_rdma_read_brings_the_remote_bytes(nic: str, ctx: Context) -> None:
  p = Pair(ctx)
  remote, local = p.mr(10000, fill=True), p.mr(10000)
  (wc,) = p.write(local, remote, opcode=WROpcode.RDMA_READ)
  assert (wc.opcode, wc.byte_len) == (WCOpcode.RDMA_READ, 10000) and bytes(local.view) == bytes(remote.view)


def check_send_lands_in_the_posted_receive_and_write_with_immediate_consumes_one(nic: str, ctx: Context) -> None:
  p = Pair(ctx)
  msg, inbox, target = p.mr(300, fill=True), p.mr(512), p.mr(300)
  p.b.post_recv([RecvWR(41, [inbox.sge()]), RecvWR(42, [])])
  p.a.post_send(SendWR(1, WROpcode.SEND_WITH_IMM, [msg.sge()], imm_data=0x1234))
  got = {wc.wr_id: wc for wc in p.cq.wait(2, timeout_s=30)}
  assert (got[41].opcode, got[41].byte_len, got[41].imm_data) == (WCOpcode.RECV, 300, 0x1234)
  assert bytes(inbox.view[:300]) == bytes(msg.view)
  p.a.post_send(SendWR(2, WROpcode.RDMA_WRITE_WITH_IMM, [msg.sge()], imm_data=0xC0FFEE, remote_addr=target.addr, rkey=target.rkey))
  got = {wc.wr_id: wc for wc in p.cq.wait(2, timeout_s=30)}
  assert (got[42].opcode, got[42].imm_data) == (WCOpcode.RECV_RDMA_WITH_IMM, 0xC0FFEE) and bytes(target.view) == bytes(msg.view)


def check_the_responder_refuses_a_bad_rkey_a_range_past_the_mr_and_missing_access(nic: str, ctx: Context) -> None:
  """Each a remote access error naming the request, nothing written, the requester's QP in ERR."""
  p = Pair(ctx)
  src, dst = p.mr(64, fill=True), p.mr(64)
  with pytest.raises(WCError) as e: p.write(src, dst, rkey=dst.rkey ^ 0x5A5A00)
  assert e.value.wc.status == WCStatus.REM_ACCESS_ERR and f"rkey {dst.rkey ^ 0x5A5A00:#x}" in str(e.value)
  assert bytes(dst.view) == bytes(64) and p.a.state == QPState.ERR
  p = Pair(ctx)
  src, dst = p.mr(4096, fill=True), p.mr(4096)
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.write(src, dst, length=4096, offset=1)
  assert bytes(dst.view) == bytes(4096)
  p = Pair(ctx)
  src, dst = p.mr(64, fill=True), p.mr(64, Access.LOCAL_WRITE)
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.write(src, dst)
  assert bytes(dst.view) == bytes(64)


def check_a_bad_lkey_is_a_local_protection_error(nic: str, ctx: Context) -> None:
  p = Pair(ctx)
  src, dst = p.mr(64, fill=True), p.mr(64)
  p.a.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(src.addr, 64, src.lkey ^ 0x100)], remote_addr=dst.addr, rkey=dst.rkey))
  with pytest.raises(WCError) as e: p.cq.wait(1, timeout_s=30)
  assert e.value.wc.status == WCStatus.LOC_PROT_ERR and bytes(dst.view) == bytes(64)


def check_a_responder_not_in_rtr_or_rts_gives_a_retry_error(nic: str, ctx: Context) -> None:
  p = Pair(ctx, timeout=8, retry_cnt=2, connect_b=False)         # b stays in RESET: its packets are dropped
  src, dst = p.mr(64, fill=True), p.mr(64)
  with pytest.raises(WCError) as e: p.write(src, dst)
  assert e.value.wc.status == WCStatus.RETRY_EXC_ERR and "transport retry counter exceeded" in str(e.value)


def check_a_full_cq_takes_no_more_requests_until_polled(nic: str, ctx: Context) -> None:
  """As many signaled requests as the CQ holds (its depth as the NIC made it) are taken; one more is refused naming the
  CQ's count, and taken once the completions are polled."""
  p = Pair(ctx)
  cq = ctx.create_cq(16)
  n = cq.depth
  a, b = p.pd.create_qp(cq, cap=QPCap(max_send_wr=n + 1)), p.pd.create_qp(p.cq)
  a.connect(b.endpoint(0), 0)
  b.connect(a.endpoint(0), 0)
  src, dst = p.mr(64, fill=True), p.mr(64)
  wr = lambda i: SendWR(i, WROpcode.RDMA_WRITE, [src.sge()], remote_addr=dst.addr, rkey=dst.rkey)
  a.post_send([wr(i) for i in range(n)])
  with pytest.raises(VerbsError, match=rf"{ctx.name}: posting 1 more send requests would overflow the CQ \({n} of {n} completions outstanding\)"):
    a.post_send(wr(n))
  assert [wc.status for wc in cq.wait(n, timeout_s=30)] == [WCStatus.SUCCESS] * n
  a.post_send(wr(n))
  assert [wc.wr_id for wc in cq.wait(1, timeout_s=30)] == [n] and bytes(dst.view) == bytes(src.view)


def check_bad_arguments_are_named(nic: str, ctx: Context) -> None:
  """Queue and CQ sizes beyond what the NIC reports, SGE counts beyond its own or the QP's: refused before the hardware
  sees them, naming the limit."""
  pd, cq = ctx.alloc_pd(), ctx.create_cq(8)
  n = ctx.provider.max_sge
  with pytest.raises(ValueError, match=rf"max_send_sge {n + 1} is outside \[1, {n}\] for {ctx.name}"):
    pd.create_qp(cq, cap=QPCap(max_send_sge=n + 1))
  with pytest.raises(ValueError, match="a CQ needs room for at least one completion, not 0"): ctx.create_cq(0)
  most = ctx.provider.max_cqe
  with pytest.raises(ValueError, match=f"a CQ of {most + 1} completions: {ctx.name}'s CQs hold at most {most}"): ctx.create_cq(most + 1)
  most = ctx.provider.max_qp_wr
  with pytest.raises(ValueError, match=f"max_recv_wr {most + 1}: {ctx.name}'s queues hold at most {most} work requests"):
    pd.create_qp(cq, cap=QPCap(max_recv_wr=most + 1))
  qp = pd.create_qp(cq, cap=QPCap(max_send_sge=1))
  p = Pair(ctx)
  qp.connect(p.b.endpoint(0), 0)
  mr = p.mr(64)
  with pytest.raises(VerbsError, match="has 2 SGEs; the QP takes 1"): qp.post_send(SendWR(1, WROpcode.SEND, [mr.sge()] * 2))


def check_a_lost_duplicated_or_reordered_datagram_is_recovered(nic: str, ctx: Context) -> None:
  faults = ("drop", "dup", "reorder")
  for i, fault in enumerate(faults):
    p = Pair(ctx, timeout=10)
    src, dst = p.mr(64 << 10, fill=True), p.mr(64 << 10)
    port = ctx.provider.pci.model.port.wire
    port.faults.add(fault, port.sent + 3)
    (wc,) = p.write(src, dst)
    assert wc.status == WCStatus.SUCCESS and bytes(dst.view) == bytes(src.view)
    assert [k for _, k in port.faults.applied] == list(faults[:i + 1])


CHECKS: list[tuple[str, Callable[[str, Context], None]]] = [(name.removeprefix("check_"), fn) for name, fn in globals().items()
                                                        if name.startswith("check_")]
