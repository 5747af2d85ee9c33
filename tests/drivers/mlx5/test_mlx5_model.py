"""The mlx5 driver against the emulated ConnectX-6 Dx (mock-<n>) through drivers/rdma's verbs, beyond what every NIC does
(tests/drivers/rdma/contract.py): bring-up, the WQE layout, error CQEs with their syndromes, the firmware's pages given and
reclaimed (none left after teardown), failed commands naming the command, status and syndrome, and a failed bring-up."""
import select, time

import numpy as np
import pytest

from autogen import mlx5 as mlx5_ifc, mlx5_core
from drivers.mlx5.ifc import CommandError
from drivers.rdma import (SGE, Access, QPAttr, QPAttrMask, QPCap, RecvWR, SendFlags, SendWR, WCError, WCStatus, WROpcode, QPState,
                          open_context)
from emu.nic.mlx5 import syndrome
from emu.nic.mlx5.pages import REGULAR
from tests.drivers.rdma.contract import RW, Pair   # two QPs of one NIC, one CQ: the same verbs for every vendor


@pytest.fixture
def nic():
  ctx = open_context("mlx5", "mock-0", ip="10.0.0.1")
  ctx.set_loopback(True)
  yield ctx
  ctx.close()


def model(ctx):
  return ctx.provider.pci.model


def test_bring_up_reads_the_firmware_and_gives_the_port_its_mac_and_gid(nic):
  assert nic.provider.firmware == "22.39.1002" and nic.mac == bytes.fromhex("0215b3000000")
  assert nic.query_gid(0) == bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 1])
  m = model(nic)
  assert m.hca.initialized and m.hca.issi == 1 and m.hca.roce_en and m.port.gids[0] == nic.query_gid(0)
  assert m.hca.cap(0, "roce") == 1 and m.hca.cap(4, "sw_r_roce_src_udp_port") == 1
  assert set(m.pages.kind) == set(nic.provider.pages.given)          # the model holds exactly the pages it was given


def test_a_bad_rkey_gives_an_error_cqe_with_the_remote_access_syndrome(nic):
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  with pytest.raises(WCError) as e:
    p.write(src, dst, rkey=dst.rkey ^ 0x5A00)
  wc = e.value.wc
  assert (wc.status, wc.vendor_err) == (WCStatus.REM_ACCESS_ERR, mlx5_core.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR)
  assert wc.vendor_status.startswith("MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR")


def test_the_send_wqe_is_a_ctrl_raddr_and_data_segment_in_one_wqebb_and_a_wrong_wqe_index_is_refused(nic, monkeypatch):
  """mlx5_wqe_ctrl_seg (big-endian: wqe_index << 8 | opcode, qpn << 8 | ds, fm_ce_se in byte 11, the immediate),
  mlx5_wqe_raddr_seg, one mlx5_wqe_data_seg, zeros to the end of the 64-byte WQEBB. With the wqe_index one off, the NIC
  completes the request with a local QP operation error and writes nothing."""
  from drivers.mlx5 import qp as mlx5_qp
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  p.b.post_recv(RecvWR(5))                                # (the WRITE's immediate consumes a receive)
  p.a.post_send(SendWR(1, WROpcode.RDMA_WRITE_WITH_IMM, [src.sge()], imm_data=0xFEEDF00D, remote_addr=dst.addr, rkey=dst.rkey))
  assert sorted(wc.wr_id for wc in p.cq.wait(2, timeout_s=30)) == [1, 5]
  hw = p.a.hw
  wqe = bytes(hw.mem.view[hw.sq_off:hw.sq_off + 64])
  assert wqe[:16] == (0 << 8 | mlx5_core.MLX5_OPCODE_RDMA_WRITE_IMM).to_bytes(4, "big") + (p.a.qp_num << 8 | 3).to_bytes(4, "big") + \
    bytes([0, 0, 0, mlx5_core.MLX5_WQE_CTRL_CQ_UPDATE]) + (0xFEEDF00D).to_bytes(4, "big")
  assert wqe[16:32] == dst.addr.to_bytes(8, "big") + dst.rkey.to_bytes(4, "big") + bytes(4)
  assert wqe[32:48] == (64).to_bytes(4, "big") + src.lkey.to_bytes(4, "big") + src.addr.to_bytes(8, "big") and wqe[48:] == bytes(16)
  real = mlx5_qp.QP._send_wqe
  monkeypatch.setattr(mlx5_qp.QP, "_send_wqe", lambda self, *a: (w := real(self, *a))[:2] + bytes([w[2] ^ 1]) + w[3:])  # wqe_index
  dst.view[:] = bytes(64)
  with pytest.raises(WCError) as e: p.write(src, dst)
  assert (e.value.wc.status, e.value.wc.vendor_err) == (WCStatus.LOC_QP_OP_ERR, mlx5_core.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR)
  assert bytes(dst.view) == bytes(64)


def test_a_zero_length_sge_gets_no_data_segment(nic):
  pd, cq = nic.alloc_pd(), nic.create_cq(64)
  a, b = (pd.create_qp(cq, cap=QPCap(max_send_sge=2)) for _ in range(2))
  a.connect(b.endpoint(200), 100)
  b.connect(a.endpoint(100), 200)
  src, dst = (pd.reg_mr(nic.alloc(64), RW, 64) for _ in range(2))
  src.view[:] = bytes(range(64))
  a.post_send(SendWR(1, WROpcode.RDMA_WRITE, [src.sge(0, 0), src.sge(0, 16)], remote_addr=dst.addr, rkey=dst.rkey))
  assert cq.wait(1, timeout_s=30)[0].byte_len == 16
  wqe = bytes(a.hw.mem.view[a.hw.sq_off:a.hw.sq_off + 64])
  assert wqe[7] == 3 and wqe[32:36] == (16).to_bytes(4, "big") and wqe[48:] == bytes(16)   # ds 3: ctrl, raddr, one data
  assert bytes(dst.view[:16]) == bytes(range(16)) and bytes(dst.view[16:]) == bytes(48)


def test_a_bad_lkey_is_a_local_protection_error(nic):
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  p.a.post_send(SendWR(1, WROpcode.RDMA_WRITE, [SGE(src.addr, 64, src.lkey ^ 0x100)], remote_addr=dst.addr, rkey=dst.rkey))
  with pytest.raises(WCError) as e: p.cq.wait(1, timeout_s=30)
  assert (e.value.wc.status, e.value.wc.vendor_err) == (WCStatus.LOC_PROT_ERR, mlx5_core.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR)


def test_a_failed_command_names_the_command_status_and_syndrome(nic):
  dev = nic.provider
  with pytest.raises(CommandError) as e:
    dev.cmd(mlx5_ifc.MLX5_CMD_OP_CREATE_CQ, {"cq_context.log_cq_size": 6, "cq_context.uar_page": dev.uar,
                                             "cq_context.c_eqn_or_apu_element": 77, "cq_context.dbr_addr": dev.dbr.bus_addr(0)},
            payload=bytes(8 * 2))
  assert (e.value.status, e.value.syndrome) == (mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, syndrome("no such eq"))
  assert f"CREATE_CQ (0x400) failed: status BAD_PARAM_ERR (0x3), syndrome {syndrome('no such eq'):#010x}" in str(e.value)
  with pytest.raises(CommandError, match=r"SET_HCA_CAP \(0x109\) failed: status BAD_SYS_STATE_ERR"):
    dev.cmd(mlx5_ifc.MLX5_CMD_OP_SET_HCA_CAP, at={16: dev.caps})            # the capabilities are set before INIT_HCA


def test_regular_pages_are_requested_given_and_reclaimed(nic):
  """ICM for 40 MKEYs needs more regular pages: the firmware asks (page-request EQEs), the driver gives them; after
  the MKEYs go the firmware asks to return the spare ones and the driver takes them back."""
  dev, m = nic.provider, model(nic)
  pd = nic.alloc_pd()
  before = len(dev.pages.given)
  mrs = [pd.reg_mr(nic.alloc(4096), RW) for _ in range(40)]
  grown = len(dev.pages.given)
  assert grown >= before + 2 and set(m.pages.kind) == set(dev.pages.given) and m.pages.want(REGULAR) == 0
  for mr in mrs: mr.dereg()
  assert len(dev.pages.given) < grown and set(m.pages.kind) == set(dev.pages.given) and m.pages.want(REGULAR) == 0


def test_teardown_reclaims_every_page_and_disables_the_hca(nic):
  p = Pair(nic)
  src, dst = p.mr(4096, fill=True), p.mr(4096)
  p.write(src, dst)
  m, given = model(nic), nic.provider.pages.given
  assert len(given) > 0
  nic.close()
  assert m.pages.kind == {} and given == {} and not m.hca.enabled and not m.state.enabled


def test_a_hca_left_enabled_is_reset_by_the_next_driver():
  ctx = open_context("mlx5", "mock-3", ip="10.0.3.1")
  m = model(ctx)
  m.state.enabled = 1                 # as a killed process leaves it: the state file says enabled
  m.save()
  ctx.provider.pci._lock.release()    # without the teardown, as if the process died
  m.close()
  again = open_context("mlx5", "mock-3", ip="10.0.3.1")
  assert model(again).state.resets >= 1 and model(again).hca.initialized
  again.close()


def test_queues_wrap_with_their_owner_bits(nic):
  """300 WRITEs through a 64-WQEBB send queue and a 64-entry CQ, each CQE found by its owner bit."""
  p = Pair(nic)
  src, dst = p.mr(256, fill=True), p.mr(256)
  for i in range(300):
    (wc,) = p.write(src, dst, length=1 + i % 256)
    assert wc.status == WCStatus.SUCCESS
  assert bytes(dst.view) == bytes(src.view) and p.cq.hw.ci == 300


def test_gather_and_scatter_lists_and_unsignaled_writes(nic):
  """Three SGEs out (one WQE of 5 segments, two WQEBBs), three in (a 64-byte receive stride); unsignaled WRITEs
  complete silently before the signaled one after them."""
  pd, cq = nic.alloc_pd(), nic.create_cq(64)
  cap = QPCap(max_send_sge=3, max_recv_sge=3)
  a, b = pd.create_qp(cq, cap=cap), pd.create_qp(cq, cap=cap)
  a.connect(b.endpoint(0), 0)
  b.connect(a.endpoint(0), 0)
  src = pd.reg_mr(nic.alloc(3000), RW, 3000)
  src.view[:] = np.random.default_rng(1).integers(0, 256, 3000, dtype=np.uint8).tobytes()
  inbox = [pd.reg_mr(nic.alloc(4096), RW, n) for n in (100, 900, 2000)]
  b.post_recv(RecvWR(9, [m.sge() for m in inbox]))
  a.post_send(SendWR(1, WROpcode.SEND, [src.sge(0, 1000), src.sge(1000, 1000), src.sge(2000, 1000)]))
  got = {wc.wr_id: wc for wc in cq.wait(2, timeout_s=30)}
  assert got[9].byte_len == 3000 and b"".join(bytes(m.view) for m in inbox) == bytes(src.view)
  dst = pd.reg_mr(nic.alloc(3000), RW, 3000)
  a.post_send([SendWR(i, WROpcode.RDMA_WRITE, [src.sge(i * 1000, 1000)], send_flags=SendFlags(0), remote_addr=dst.addr + i * 1000,
                      rkey=dst.rkey) for i in range(2)] +
              [SendWR(2, WROpcode.RDMA_WRITE, [src.sge(2000, 1000)], remote_addr=dst.addr + 2000, rkey=dst.rkey)])
  (wc,) = cq.wait(1, timeout_s=30)
  assert wc.wr_id == 2 and bytes(dst.view) == bytes(src.view) and not a.sq


def test_a_send_with_no_receive_posted_exhausts_the_rnr_retries(nic):
  pd, cq = nic.alloc_pd(), nic.create_cq(64)
  a, b = pd.create_qp(cq), pd.create_qp(cq)
  a.connect(b.endpoint(0), 0, rnr_retry=1)
  b.connect(a.endpoint(0), 0)
  msg = pd.reg_mr(nic.alloc(64), RW, 64)
  a.post_send(SendWR(1, WROpcode.SEND, [msg.sge()]))
  with pytest.raises(WCError) as e: cq.wait(1, timeout_s=30)
  assert (e.value.wc.status, e.value.wc.vendor_err) == (WCStatus.RNR_RETRY_EXC_ERR, mlx5_core.MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR)


def test_a_stale_key_does_not_reach_a_new_mr_at_the_same_index(nic):
  p = Pair(nic)
  src, old = p.mr(64, fill=True), p.mr(64)
  stale = old.rkey
  old.dereg()
  new = p.mr(64)
  assert new.rkey >> 8 == stale >> 8 and new.rkey != stale                        # same MKEY index, another variant
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.write(src, new, rkey=stale)
  assert bytes(new.view) == bytes(64)


def test_qp_contexts_live_in_the_pages_the_driver_gave(nic):
  """The firmware's ICM is the driver's memory: the QP context's PD field is in a page from pages.given."""
  p = Pair(nic)
  m, given = model(nic), nic.provider.pages.given
  page, slot = m.qps.qps[p.a.qp_num].slot
  assert page in given and page in m.pages.slots
  ctx = bytes(given[page].view[slot * 256:slot * 256 + 232])
  assert mlx5_ifc.LAYOUTS["qpc"].get(ctx, "pd") == p.pd.handle and mlx5_ifc.LAYOUTS["qpc"].get(ctx, "log_sq_size") == p.a.hw.log_sq


def test_the_firmware_refuses_transitions_from_the_wrong_state_and_rtr_without_roce(nic):
  dev, p = nic.provider, Pair(nic)
  with pytest.raises(CommandError) as e: dev.cmd(mlx5_ifc.MLX5_CMD_OP_RST2INIT_QP, qpn=p.a.qp_num)
  assert (e.value.status, e.value.syndrome) == (mlx5_core.MLX5_CMD_STAT_BAD_QP_STATE_ERR, syndrome("bad qp state"))
  dev.cmd(mlx5_ifc.MLX5_CMD_OP_MODIFY_NIC_VPORT_CONTEXT, {"field_select.roce_en": 1, "nic_vport_context.roce_en": 0})
  qp = p.pd.create_qp(p.cq)
  qp.modify(QPAttr(QPState.INIT, qp_access_flags=RW), QPAttrMask.STATE | QPAttrMask.PKEY_INDEX | QPAttrMask.PORT | QPAttrMask.ACCESS_FLAGS)
  qp.modify(QPAttr(QPState.INIT, qp_access_flags=Access.LOCAL_WRITE), QPAttrMask.STATE | QPAttrMask.ACCESS_FLAGS)   # INIT2INIT
  assert model(nic).qps.qps[qp.qp_num].rc.a.access == 1                                              # no remote rights now
  with pytest.raises(CommandError,
                     match=rf"INIT2RTR_QP \(0x503\) failed: status BAD_SYS_STATE_ERR \(0x4\), syndrome {syndrome('roce disabled'):#010x}"):
    qp.connect(p.b.endpoint(0), 0)


def test_the_event_queue_sees_command_completions_and_page_requests(nic):
  dev = nic.provider
  pd = nic.alloc_pd()
  mrs = [pd.reg_mr(nic.alloc(4096), RW) for _ in range(20)]
  kinds = [(k, int.from_bytes(d[0:4], "big")) for k, d in dev.eq.events]
  assert (mlx5_core.MLX5_EVENT_TYPE_CMD, 1 << 0) in kinds                          # slot 0: every command but MANAGE_PAGES
  assert (mlx5_core.MLX5_EVENT_TYPE_CMD, 1 << (dev.cmdq.slots - 1)) in kinds       # MANAGE_PAGES in the last slot
  assert any(k == mlx5_core.MLX5_EVENT_TYPE_PAGE_REQUEST for k, _ in dev.eq.events)
  for mr in mrs: mr.dereg()


def test_a_pd_in_use_cannot_go(nic):
  pd = nic.alloc_pd()
  mr = pd.reg_mr(nic.alloc(4096), RW)
  with pytest.raises(CommandError) as e: nic.provider.cmd(mlx5_ifc.MLX5_CMD_OP_DEALLOC_PD, pd=pd.handle)
  assert (e.value.status, e.value.syndrome) == (mlx5_core.MLX5_CMD_STAT_BAD_RES_STATE_ERR, syndrome("pd in use"))
  mr.dereg()
  nic.provider.cmd(mlx5_ifc.MLX5_CMD_OP_DEALLOC_PD, pd=pd.handle)


def test_a_cq_the_driver_does_not_drain_overruns_and_the_driver_reports_it(nic):
  """Past the verbs layer's accounting: 80 signaled WRITEs into a 64-entry CQ with nothing polled."""
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  wr = SendWR(1, WROpcode.RDMA_WRITE, [src.sge()], remote_addr=dst.addr, rkey=dst.rkey)
  for qp in (p.a, p.b): qp.hw.post_send([(i, wr) for i in range(40)])
  m, deadline = model(nic), time.monotonic() + 30
  while not any(f"CQ {p.cq.hw.cqn} overrun" in line for line in m.log_lines):     # the ACKs come back on the wire's thread
    assert time.monotonic() < deadline, m.log_lines[-5:]
    time.sleep(0.01)
  with pytest.raises(RuntimeError, match=f"CQ {p.cq.hw.cqn:#x} overran"): nic.alloc_pd()


def test_a_failed_bring_up_leaves_no_lock_no_pages_and_no_enabled_hca():
  first = open_context("mlx5", "mock-1", ip="10.0.9.9")
  try:
    with pytest.raises(CommandError, match=rf"SET_ROCE_ADDRESS \(0x761\) failed: status BAD_PARAM_ERR \(0x3\), "
                                           rf"syndrome {syndrome('gid in use on the wire'):#010x}"):
      open_context("mlx5", "mock-2", ip="10.0.9.9")                         # the GID is mock-1's
  finally: first.close()
  again = open_context("mlx5", "mock-2", ip="10.0.9.9")                     # free again, brought up from cold
  assert model(again).state.resets == 2 and not model(again).stale
  again.close()


def test_a_message_longer_than_the_qps_log_msg_max_is_a_local_length_error(nic):
  dev = nic.provider
  caps = bytearray(dev.caps)
  mlx5_ifc.LAYOUTS["cmd_hca_cap"].set(caps, "log_max_msg", 10)        # QPs created now say log_msg_max 10: 1 KiB messages
  dev.caps = bytes(caps)
  p = Pair(nic)
  src, dst = p.mr(2048, fill=True), p.mr(2048)
  (wc,) = p.write(src, dst, length=1024)
  assert wc.status == WCStatus.SUCCESS
  with pytest.raises(WCError) as e: p.write(src, dst)
  assert (e.value.wc.status, e.value.wc.vendor_err) == (WCStatus.LOC_LEN_ERR, mlx5_core.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR)
  assert bytes(dst.view[1024:]) == bytes(1024)


def test_with_the_internal_loopback_off_frames_to_the_own_gid_are_dropped(nic):
  nic.set_loopback(False)
  p = Pair(nic, timeout=8, retry_cnt=1)
  src, dst = p.mr(64, fill=True), p.mr(64)
  with pytest.raises(WCError) as e: p.write(src, dst)
  assert (e.value.wc.status, e.value.wc.vendor_err) == (WCStatus.RETRY_EXC_ERR, mlx5_core.MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR)
  assert model(nic).port.tx_dropped["destination GID is this port's own and PHY loopback is off"] >= 2
  assert bytes(dst.view) == bytes(64)


def test_an_ipv6_gid_carries_roce_over_ipv6(nic):
  gid = bytes.fromhex("fd000000000000000000000000000042")
  index = nic.add_gid(gid)
  assert model(nic).port.gids[index] == gid and index == 1
  pd, cq = nic.alloc_pd(), nic.create_cq(64)
  a, b = pd.create_qp(cq), pd.create_qp(cq)
  a.connect(b.endpoint(0, gid_index=index), 0, sgid_index=index)
  b.connect(a.endpoint(0, gid_index=index), 0, sgid_index=index)
  src, dst = pd.reg_mr(nic.alloc(5000), RW, 5000), pd.reg_mr(nic.alloc(5000), RW, 5000)
  src.view[:] = np.random.default_rng(6).integers(0, 256, 5000, dtype=np.uint8).tobytes()
  a.post_send(SendWR(1, WROpcode.RDMA_WRITE, [src.sge()], remote_addr=dst.addr, rkey=dst.rkey))
  (wc,) = cq.wait(1, timeout_s=30)
  assert wc.status == WCStatus.SUCCESS and bytes(dst.view) == bytes(src.view)
  assert not model(nic).qps.qps[a.qp_num].rc.a.path.ipv4


def test_rts_to_rts_changes_the_access_flags_and_the_rnr_timer(nic):
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  p.b.modify(QPAttr(QPState.RTS, qp_access_flags=Access.LOCAL_WRITE, min_rnr_timer=3),
             QPAttrMask.STATE | QPAttrMask.ACCESS_FLAGS | QPAttrMask.MIN_RNR_TIMER)
  a = model(nic).qps.qps[p.b.qp_num].rc.a
  assert (a.access, a.min_rnr_timer) == (1, 3)                 # no remote rights any more
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.write(src, dst)


def test_pages_the_driver_cannot_allocate_are_refused_to_the_firmware(nic):
  dev, m = nic.provider, model(nic)
  real = dev.pci._alloc_dma
  def exhausted(size, contiguous): raise MemoryError("no more pinned memory")
  dev.pci._alloc_dma = exhausted                    # the host is out of DMA memory
  try:
    with pytest.raises(MemoryError, match=r"cannot allocate the \d+ pages the firmware asked for"):
      dev.pages.give(3)
  finally: dev.pci._alloc_dma = real
  assert any("the driver could not give 3 pages" in line for line in m.log_lines) and set(m.pages.kind) == set(dev.pages.given)


def test_wait_event_arms_the_cq_and_the_completion_eq_interrupts(nic):
  p = Pair(nic)
  src, dst = p.mr(64, fill=True), p.mr(64)
  cq, eq = p.cq.hw, nic.provider.comp_eq
  assert eq.irq is not None and cq.wait_event(0) is True               # armed, nothing to wait for yet
  p.a.post_send(SendWR(1, WROpcode.RDMA_WRITE, [src.sge()], remote_addr=dst.addr, rkey=dst.rkey))
  assert select.select([eq.irq], [], [], 30)[0]                        # MSI-X vector 1 fired for the CQE
  assert [int.from_bytes(d[24:28], "big") for _, d in eq.poll()] == [cq.cqn]
  (wc,) = p.cq.wait(1, timeout_s=30)
  assert wc.status == WCStatus.SUCCESS and bytes(dst.view) == bytes(src.view)
