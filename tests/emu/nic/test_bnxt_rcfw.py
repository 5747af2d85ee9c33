"""The RCFW channel of the emulated BCM57508: the CMDQ mailbox and trigger, CREQ responses (cookie, xid, valid bit by
pass), the first-command flag, INITIALIZE_FW's checks, and the QP/CQ/MR/GID commands' checks. Facts: kernel
qplib_rcfw.c, qplib_sp.c; roce_hsi.h; emu/nic/bnxt/rcfw.py."""
import pytest

from autogen import bnxt as bnxt_hsi
from emu.nic.bnxt import ModelError
from tests.emu.nic.bnxt_cmds import Bnxt, QPair, Ring, RING, ipv4_gid

BAD_PARAM, NO_RESOURCE, BAD_STATE, UNSUPPORTED = 1, 2, 3, 4


def test_creq_entries_echo_the_cookie_and_flip_their_valid_bit_each_pass(up):
  for _ in range(5 * RING):                                          # the 16-entry CREQ wraps five times, the CMDQ once
    resp = up.rcfw("query_version")
    assert (resp.fw_maj, resp.intf_maj, resp.intf_minor) == (230, 1, 10)
  assert up.creq.cons > 5 * RING and up.cmdq.prod > up.cmdq.depth
  entry = up.creq.get(up.creq.cons - 1)
  assert entry[8] & 1 == up.creq.phase(up.creq.cons - 1) and int.from_bytes(entry[2:4], "little") == up.cookie


def test_the_first_command_must_carry_the_first_flag(nic):
  nic.bring_up(rcfw=False, l2=False)
  nic.creq = Ring(nic, RING, 16, ring_marks=False)
  creq_id = nic.ring_alloc(nic.creq, bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX)
  cmdq = Ring(nic, 16, 16, ring_marks=False)
  for i, w in enumerate((cmdq.base & 0xFFFFFFFF, cmdq.base >> 32, 16 << 2 | creq_id << 16, 1)): nic.bar0.write32(0x600 + 4 * i, w)
  with pytest.raises(ModelError, match="FIRMWARE_FIRST_FLAG"): nic.bar0.write32(0x700, 1)
  with pytest.raises(ModelError, match="RCFW_CMDQ_TRIG_VAL"): nic.bar0.write32(0x700, 2)


def test_commands_before_initialize_fw_and_its_checks(nic):
  nic.bring_up(rcfw=False, l2=False)
  nic.creq = Ring(nic, RING, 16, ring_marks=False)
  nic.creq_id = nic.ring_alloc(nic.creq, bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX)
  nic.cmdq = Ring(nic, 64, 16, ring_marks=False)
  raw = bytes(bnxt_hsi.cmdq_init(cmdq_pbl=nic.cmdq.base, cmdq_size_cmdq_lvl=64 << 2, creq_ring_id=nic.creq_id))
  for i in range(4): nic.bar0.write32(0x600 + 4 * i, int.from_bytes(raw[4 * i:4 * i + 4], "little"))
  nic.first = True
  assert nic.rcfw("create_cq", check=False, cq_size=16) == BAD_STATE
  assert nic.rcfw("query_func", check=False) == BAD_PARAM                                     # no room for the side buffer
  stats = nic.pci.alloc_dma(4096)
  sid = nic.hwrm("stat_ctx_alloc", stats_dma_addr=stats.bus_addrs[0], stats_dma_length=176).stat_ctx_id
  assert nic.rcfw("initialize_fw", check=False, stat_ctx_id=sid) == UNSUPPORTED                # no HW requester retransmission
  retx = bnxt_hsi.CMDQ_INITIALIZE_FW_FLAGS_HW_REQUESTER_RETX_SUPPORTED
  assert nic.rcfw("initialize_fw", check=False, stat_ctx_id=sid + 1, flags=retx) == BAD_PARAM
  assert nic.rcfw("initialize_fw", check=False, stat_ctx_id=sid, flags=retx, qpc_page_dir=0x1000) == BAD_PARAM
  nic.rcfw("initialize_fw", stat_ctx_id=sid, flags=retx)
  assert nic.rcfw("initialize_fw", check=False, stat_ctx_id=sid, flags=retx) == BAD_STATE


def test_query_func_reports_the_modelled_capabilities(up):
  sb = up.pci.alloc_dma(4096)
  up.rcfw("query_func", resp_addr=sb.bus_addrs[0], resp_size=10)
  f = bnxt_hsi.creq_query_func_resp_sb.from_buffer_copy(sb.view)
  assert f.dev_cap_flags & bnxt_hsi.CREQ_QUERY_FUNC_RESP_SB_HW_REQUESTER_RETX_ENABLED
  assert f.dev_cap_ext_flags_2 & bnxt_hsi.CREQ_QUERY_FUNC_RESP_SB_REQ_RETRANSMISSION_SUPPORT_MASK == \
    bnxt_hsi.CREQ_QUERY_FUNC_RESP_SB_REQ_RETRANSMISSION_SUPPORT_HOST_MSN_TABLE
  assert f.dev_cap_ext_flags & bnxt_hsi.CREQ_QUERY_FUNC_RESP_SB_ATOMIC_OPS_NOT_SUPPORTED
  assert (f.max_qp, f.max_gid) == (32, 256)                          # the QP context entries the backing store holds


def test_unknown_opcode(up):
  up.cmdq.put(up.cmdq.prod, bytes([0x7F, 1, 0, 0]) + up.cookie.to_bytes(2, "little") + bytes(10))
  up.cmdq.prod += 1
  up.bar0.write32(0x60C, up.cmdq.prod % up.cmdq.depth)
  up.bar0.write32(0x700, 1)
  entry = up.creq_next()
  assert (entry[0], entry[1], entry[9]) == (bnxt_hsi.CREQ_BASE_TYPE_QP_EVENT, UNSUPPORTED, 0x7F)


def test_a_full_creq_is_a_driver_error(up):
  with pytest.raises(ModelError, match="CREQ .* is full"):
    for _ in range(RING + 1):                                         # never released: no NQ_ARM doorbells
      up.cmdq.put(up.cmdq.prod, bytes(bnxt_hsi.cmdq_query_version(opcode=bnxt_hsi.CMDQ_BASE_OPCODE_QUERY_VERSION, cmd_size=1)))
      up.cmdq.prod += 1
      up.bar0.write32(0x60C, up.cmdq.prod % up.cmdq.depth)
      up.bar0.write32(0x700, 1)


def test_add_gid_takes_the_kernels_byte_order(up, peer):
  assert up.model.port.gids[up.gid_index] == ipv4_gid("10.0.0.1") and up.model.roce.gid_macs[up.gid_index] == up.mac
  assert up.rcfw("add_gid", check=False, gid=ipv4_gid("10.0.0.2")[::-1]) == BAD_PARAM       # the peer has it: a conflict
  up.rcfw("delete_gid", gid_index=up.gid_index)
  assert up.gid_index not in up.model.port.gids


def test_create_cq_checks(up):
  cq = Ring(up, 16, 32)
  base = dict(cq_size=16, pbl=cq.base, pg_size_lvl=cq.level, cq_fco_cnq_id=up.nq_id)
  assert up.rcfw("create_cq", check=False, **{**base, "cq_fco_cnq_id": up.creq_id}) == BAD_PARAM     # the CREQ is no CNQ
  assert up.rcfw("create_cq", check=False, **{**base, "cq_size": 256}) == BAD_PARAM                   # 8 KiB in one page
  assert up.rcfw("create_cq", check=False, **{**base, "dpi": 1000}) == BAD_PARAM
  assert up.rcfw("create_cq", **base).xid == 0


def test_uninitialized_context_memory_is_refused(nic):
  nic.bring_up(rcfw=False, l2=False)
  nic.hwrm("func_reset")
  nic.hwrm("func_drv_rgtr")
  nic.backing_store(init=False)
  nic.open_rcfw()
  cq = Ring(nic, 16, 32)
  assert nic.rcfw("create_cq", check=False, cq_size=16, pbl=cq.base, pg_size_lvl=cq.level, cq_fco_cnq_id=nic.nq_id) == NO_RESOURCE
  assert "not the init value 0xff" in nic.model.log_lines[-1] and "byte 8" in nic.model.log_lines[-1]


def test_create_qp_checks(up):
  q = QPair(up)
  assert up.model.roce.qps[q.qpn].msn_entries == 16 and q.qpn == 2
  small = Ring(up, 32, 128)                                           # one page: no room for the MSN table after the ring
  fields = dict(type=bnxt_hsi.CMDQ_CREATE_QP_TYPE_RC, sq_size=32, sq_fwo_sq_sge=6, scq_cid=q.cq_id, rcq_cid=q.cq_id, sq_pbl=small.base)
  assert up.rcfw("create_qp", check=False, **fields) == BAD_PARAM
  assert "level 0 names one page, but 2 pages" in up.model.log_lines[-1]
  assert up.rcfw("create_qp", check=False, **{**fields, "type": bnxt_hsi.CMDQ_CREATE_QP_TYPE_UD}) == UNSUPPORTED
  assert up.rcfw("create_qp", check=False, **{**fields, "qp_flags": bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_SRQ_USED}) == UNSUPPORTED
  assert up.rcfw("create_qp", check=False, **{**fields, "scq_cid": 9}) == BAD_PARAM
  assert up.rcfw("destroy_cq", check=False, cq_cid=q.cq_id) == BAD_STATE                # a QP uses it
  up.rcfw("destroy_qp", qp_cid=q.qpn)
  up.rcfw("destroy_cq", cq_cid=q.cq_id)


def test_queue_pbls_need_their_ring_marks(up):
  cq = Ring(up, 256, 32, ring_marks=False)                           # two pages at level 1, no LAST / NEXT_TO_LAST
  assert cq.level == 1
  assert up.rcfw("create_cq", check=False, cq_size=256, pbl=cq.base, pg_size_lvl=1, cq_fco_cnq_id=up.nq_id) == BAD_PARAM
  assert "NEXT_TO_LAST" in up.model.log_lines[-1]
  good = Ring(up, 256, 32)
  assert up.rcfw("create_cq", cq_size=256, pbl=good.base, pg_size_lvl=1, cq_fco_cnq_id=up.nq_id).xid == 0


def test_modify_qp_transitions_and_required_attributes(up):
  q = QPair(up)
  init, rts = bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_INIT, bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_RTS
  rtr = bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_RTR | bnxt_hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4
  assert q.modify(rtr, "STATE", check=False) == BAD_STATE                                    # RESET -> RTR
  assert q.modify(init, "STATE ACCESS", check=False, access=7) == BAD_PARAM                 # P_Key missing
  assert "needs PKEY" in up.model.log_lines[-1]
  assert q.modify(init, "STATE ACCESS PKEY QKEY", check=False, access=7, pkey=0xFFFF) == BAD_PARAM   # QKEY is UD's
  q.modify(init, "STATE ACCESS PKEY", access=7, pkey=0xFFFF)
  rtr_mask = "STATE DGID SGID_INDEX DEST_MAC PATH_MTU DEST_QP_ID RQ_PSN MAX_DEST_RD_ATOMIC MIN_RNR_TIMER"
  fields = dict(dgid=up.gid, sgid_index=up.gid_index, dest_mac=up.mac, path_mtu_pingpong_push_enable=0x20, dest_qp_id=3)
  assert q.modify(bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_RTR, rtr_mask, check=False, **fields) == UNSUPPORTED   # RoCEv1
  assert q.modify(rtr, rtr_mask, check=False, **{**fields, "path_mtu_pingpong_push_enable": 0x50}) == BAD_PARAM   # 8192
  assert q.modify(rtr, rtr_mask, check=False, **{**fields, "sgid_index": 9}) == BAD_PARAM
  assert q.modify(rtr, rtr_mask, check=False, **{**fields, "rq_psn": 1 << 24}) == BAD_PARAM
  q.modify(rtr, rtr_mask, **fields)
  assert up.model.roce.qps[q.qpn].rc.a.path.dgid == up.gid and up.model.roce.qps[q.qpn].rc.a.mtu == 1024
  assert q.modify(rts, "STATE TIMEOUT RETRY_CNT RNR_RETRY SQ_PSN MAX_RD_ATOMIC", check=False, retry_cnt=8) == BAD_PARAM
  q.modify(rts, "STATE TIMEOUT RETRY_CNT RNR_RETRY SQ_PSN MAX_RD_ATOMIC", timeout=14, retry_cnt=7, rnr_retry=7, sq_psn=0x123, max_rd_atomic=4)
  sb = up.pci.alloc_dma(4096)
  up.rcfw("query_qp", qp_cid=q.qpn, resp_addr=sb.bus_addrs[0], resp_size=7)
  st = bnxt_hsi.creq_query_qp_resp_sb.from_buffer_copy(sb.view)
  assert (st.en_sqd_async_notify_state, st.sq_psn, st.dest_qp_id, bytes(st.dgid), st.timeout) == (3, 0x123, 3, up.gid, 14)
  assert q.modify(bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_SQD, "STATE", check=False) == UNSUPPORTED
  q.modify(bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_ERR, "STATE")
  q.modify(bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_RESET, "STATE")


@pytest.mark.parametrize("pages", [1, 2, 513])                        # PBL levels 0, 1 and 2
def test_register_mr_with_pbl_levels(up, pages):
  key, mem, va = up.register(pages * 4096)
  mr = up.model.roce.mrs[key]
  assert (mr.region.va, mr.region.length) == (va, pages * 4096) and key >> 8 == 0 and key & 0xFF == 1
  mem.view[-1] = 0x5A
  assert bytes(mr.region.chunks(va + pages * 4096 - 1, 1)[0]) == b"\x5a"     # the last page through the PBL
  up.rcfw("deregister_mr", lkey=key)
  key2, _, _ = up.register(4096)
  assert key2 >> 8 == 0 and key2 != key                               # same index, next generation: the old key is dead


@pytest.mark.parametrize("fields, status", [({"access": 0x4}, BAD_PARAM),                       # remote write without local write
                                            ({"access": 0x8}, UNSUPPORTED),                     # atomics
                                            ({"log2_pg_size_lvl": 11 << 2}, BAD_PARAM),
                                            ({"log2_pg_size_lvl": 12 << 2 | 1}, BAD_PARAM),     # level 1 but pbl is a data page
                                            ({"flags": 0}, BAD_PARAM)])                         # a key never allocated
def test_register_mr_checks(up, fields, status):
  mem = up.pci.alloc_dma(4096)
  mem.view[:8] = (0x1234).to_bytes(8, "little")                        # not a valid PTE
  req = dict(flags=bnxt_hsi.CMDQ_REGISTER_MR_FLAGS_ALLOC_MR, log2_pg_size_lvl=12 << 2, access=1, log2_pbl_pg_size=12, pbl=mem.bus_addrs[0],
             va=mem.bus_addrs[0], mr_size=4096)
  assert up.rcfw("register_mr", check=False, **{**req, **fields}) == status


def test_allocate_mrw_then_register(up):
  key = up.rcfw("allocate_mrw", pd_id=5).xid
  mem = up.pci.alloc_dma(4096)
  up.rcfw("register_mr", key=key, log2_pg_size_lvl=12 << 2, access=7, log2_pbl_pg_size=12, pbl=mem.bus_addrs[0], va=0x10000, mr_size=4096)
  assert up.model.roce.mrs[key].pd == 5
  up.rcfw("deallocate_key", key=key)
  assert key not in up.model.roce.mrs


def test_deinitialize_frees_the_roce_objects(up):
  QPair(up)
  up.rcfw("deinitialize_fw")
  assert not up.model.roce.qps and not up.model.roce.cqs and not up.model.port.gids
  assert up.rcfw("create_cq", check=False) == BAD_STATE


def test_hwrm_func_reset_takes_rcfw_down_too(up):
  QPair(up)
  up.hwrm("func_reset")
  assert not up.model.roce.qps and up.model.rcfw.cmdq is None and not up.model.hwrm.rings
  Bnxt.bring_up(up, "10.0.0.1")                                       # and it comes up again
  assert QPair(up).qpn == 2
