"""The emulated BCM57508's datapath: RDMA WRITE/READ/SEND through WQEs, the MSN table, doorbells with epochs, CQEs with
toggle bits, PHY loopback, the responder's checks (rkey, bounds, access, QP state) with NAKs turned into error CQEs,
CQ notifications, CQ overflow and QP error events, and a write between two NICs in two processes. Facts: reference
rdma.md 5.9-5.14, 8.2, 9; roce_hsi.h; emu/nic/bnxt/datapath.py."""
import hashlib, json, os, subprocess, sys

import pytest

from autogen import bnxt as bnxt_hsi
from emu.nic.bnxt import ModelError
from tests.emu.nic.bnxt_cmds import QPair, db, wait

WRITE, WRITE_IMM, READ, SEND_IMM = (bnxt_hsi.SQ_BASE_WQE_TYPE_WRITE_WQE, bnxt_hsi.SQ_BASE_WQE_TYPE_WRITE_W_IMMEAD, bnxt_hsi.SQ_BASE_WQE_TYPE_READ_WQE,
                                     bnxt_hsi.SQ_BASE_WQE_TYPE_SEND_W_IMMEAD)
LOCAL = bnxt_hsi.PORT_PHY_CFG_REQ_LPBK_LOCAL


def loopback(nic, on: bool = True) -> None:
  nic.hwrm("port_phy_cfg", enables=bnxt_hsi.PORT_PHY_CFG_REQ_ENABLES_LPBK, lpbk=LOCAL if on else 0)


def pair(a_nic, b_nic, **connect):
  a, b = QPair(a_nic), QPair(b_nic)
  a.connect(b.qpn, b_nic.gid, b_nic.mac, **connect)
  b.connect(a.qpn, a_nic.gid, a_nic.mac, **connect)
  return a, b


def write(nic, q, size, dst, dva, src=None, wqe_type=WRITE, **post):
  key, mem, va = src or nic.register(max(size, 1))
  data = os.urandom(size)
  mem.view[:size] = data
  q.post(wqe_type, [(va, key, size)] if size else [], size, dva, dst, **post)
  return data


def cqe(raw: bytes):
  base = bnxt_hsi.cq_base.from_buffer_copy(raw)
  return base.cqe_type_toggle & bnxt_hsi.CQ_BASE_CQE_TYPE_MASK, base.status, base.cqe_type_toggle & bnxt_hsi.CQ_BASE_TOGGLE


@pytest.mark.parametrize("size", [1, 1024, 4097, 65537])
def test_rdma_write_through_phy_loopback(up, size):
  loopback(up)
  a, b = pair(up, up)
  dst, dmem, dva = up.register(size)
  data = write(up, a, size, dst, dva)
  raw = a.poll()
  req = bnxt_hsi.cq_req.from_buffer_copy(raw)
  assert cqe(raw) == (bnxt_hsi.CQ_BASE_CQE_TYPE_REQ, bnxt_hsi.CQ_REQ_STATUS_OK, 1) and (req.qp_handle, req.sq_cons_idx) == (0xABCD, 1)
  assert bytes(dmem.view[:size]) == data


def test_without_phy_loopback_a_frame_to_the_own_gid_is_lost(up):
  a, b = pair(up, up, timeout=8, retry_cnt=1)                       # 1 ms, one retry
  dst, dmem, dva = up.register(64)
  write(up, a, 64, dst, dva)
  assert cqe(a.poll()) == (bnxt_hsi.CQ_BASE_CQE_TYPE_REQ, bnxt_hsi.CQ_REQ_STATUS_TRANSPORT_RETRY_CNT_ERR, 1)
  assert sum(up.model.port.tx_dropped.values()) == 2 and "PHY loopback is off" in next(iter(up.model.port.tx_dropped))
  assert bytes(dmem.view[:64]) == bytes(64)


def test_write_between_two_nics_and_toggle_bits_across_wraps(up, peer):
  a, b = pair(up, peer)
  dst, dmem, dva = peer.register(4096)
  src = up.register(4096)
  toggles, last = [], None
  for i in range(40):                                                # 16-WQE SQ and 32-entry CQ wrap; epochs flip
    last = write(up, a, 100 + i, dst, dva, src)
    raw = a.poll()
    toggles.append(cqe(raw)[2])
    assert bnxt_hsi.cq_req.from_buffer_copy(raw).sq_cons_idx == i + 1
  assert toggles == [1] * 32 + [0] * 8 and bytes(dmem.view[:139]) == last


def test_unsignaled_wqes_complete_under_the_next_signaled_one(up, peer):
  a, b = pair(up, peer)
  dst, _, dva = peer.register(4096)
  src = up.register(4096)
  write(up, a, 10, dst, dva, src, flags=0)
  write(up, a, 10, dst, dva, src)
  assert bnxt_hsi.cq_req.from_buffer_copy(a.poll()).sq_cons_idx == 2
  with pytest.raises(TimeoutError): a.poll(timeout=0.05)


@pytest.mark.parametrize("case", ["bad rkey", "remote MR too small", "no remote write on the MR", "no remote write on the QP"])
def test_the_responder_checks_then_naks_and_the_requester_gets_an_error_cqe(up, peer, case):
  access = 0x1 if case == "no remote write on the MR" else 0x7
  a, b = QPair(up), QPair(peer)
  a.connect(b.qpn, peer.gid, peer.mac)
  b.connect(a.qpn, up.gid, up.mac, access=0x5 if case == "no remote write on the QP" else 0x7)
  dst, dmem, dva = peer.register(100 if case == "remote MR too small" else 4096, access=access)
  write(up, a, 4096, dst + (0x100 if case == "bad rkey" else 0), dva)
  assert cqe(a.poll()) == (bnxt_hsi.CQ_BASE_CQE_TYPE_REQ, bnxt_hsi.CQ_REQ_STATUS_REMOTE_ACCESS_ERR, 1)
  assert bytes(dmem.view) == bytes(len(dmem.view))                  # nothing written
  assert up.model.roce.qps[a.qpn].rc.state == peer.model.roce.qps[b.qpn].rc.state == "ERR"
  ours, theirs = (bnxt_hsi.creq_qp_error_notification.from_buffer_copy(n.creq_next()) for n in (up, peer))   # QP error events
  assert (ours.event, ours.xid, ours.req_err_state_reason) == (0xC0, a.qpn,
                                                               bnxt_hsi.CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_NAK_ARRIVAL_2)
  assert (theirs.event, theirs.xid) == (0xC0, b.qpn) and theirs.res_err_state_reason
  assert "R_Key" in peer.model.log_lines[-1] or "remote write" in peer.model.log_lines[-1]


def test_a_peer_qp_not_in_rtr_gives_a_retry_error(up, peer):
  a, b = QPair(up), QPair(peer)                                     # b stays in RESET
  a.connect(b.qpn, peer.gid, peer.mac, timeout=8, retry_cnt=2)
  dst, dmem, dva = peer.register(4096)
  write(up, a, 64, dst, dva)
  assert cqe(a.poll()) == (bnxt_hsi.CQ_BASE_CQE_TYPE_REQ, bnxt_hsi.CQ_REQ_STATUS_TRANSPORT_RETRY_CNT_ERR, 1)
  wait(lambda: peer.model.roce.qps[b.qpn].rc.stats.dropped == 3, "the three copies to reach the QP in RESET")


@pytest.mark.parametrize("case, status", [("msn", bnxt_hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR), ("lkey",
                                                                                                   bnxt_hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR),
                                          ("length", bnxt_hsi.CQ_REQ_STATUS_LOCAL_LENGTH_ERR), ("opcode",
                                                                                                bnxt_hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR)])
def test_bad_wqes_complete_with_local_errors_in_order(up, peer, case, status):
  a, b = pair(up, peer)
  dst, dmem, dva = peer.register(4096)
  key, mem, va = up.register(4096)
  write(up, a, 64, dst, dva, (key, mem, va))                        # a good one first
  post = dict(msn_entry=0x1234) if case == "msn" else {}
  sges = [(va, key + (0x100 if case == "lkey" else 0), 64)]
  a.post(bnxt_hsi.SQ_BASE_WQE_TYPE_ATOMIC_CS if case == "opcode" else WRITE, sges, 65 if case == "length" else 64, dva, dst, **post)
  assert cqe(a.poll())[1] == bnxt_hsi.CQ_REQ_STATUS_OK and cqe(a.poll())[1] == status
  assert up.model.roce.qps[a.qpn].rc.state == "ERR"


def test_rdma_read(up, peer):
  a, b = pair(up, peer, mtu=512)
  src, smem, sva = peer.register(5000)
  smem.view[:] = os.urandom(len(smem.view))
  key, mem, va = up.register(5000)
  a.post(READ, [(va, key, 5000)], 5000, sva, src)
  assert cqe(a.poll())[:2] == (bnxt_hsi.CQ_BASE_CQE_TYPE_REQ, bnxt_hsi.CQ_REQ_STATUS_OK)
  assert bytes(mem.view[:5000]) == bytes(smem.view[:5000])


def test_send_and_write_with_immediate_complete_receives(up, peer):
  a, b = pair(up, peer)
  rkey, rmem, rva = peer.register(4096)
  b.post_recv([(rva, rkey, 4096)], wr_id=0x77)
  b.post_recv([(rva, rkey, 4096)], wr_id=0x78)
  data = write(up, a, 3000, 0, 0, wqe_type=SEND_IMM, imm=0xDEADBEEF)
  write(up, a, 10, rkey, rva + 3000, wqe_type=WRITE_IMM, imm=0x1234)
  assert cqe(a.poll())[1] == cqe(a.poll())[1] == bnxt_hsi.CQ_REQ_STATUS_OK
  r1, r2 = (bnxt_hsi.cq_res_rc.from_buffer_copy(b.poll()) for _ in range(2))
  assert (r1.length, r1.imm_data_or_inv_r_key, r1.flags, r1.srq_or_rq_wr_id, r1.status) == (3000, 0xDEADBEEF, bnxt_hsi.CQ_RES_RC_FLAGS_IMM, 0x77, 0)
  assert r1.cqe_type_toggle & bnxt_hsi.CQ_BASE_CQE_TYPE_MASK == bnxt_hsi.CQ_BASE_CQE_TYPE_RES_RC and r1.qp_handle == 0xABCD
  assert (r2.imm_data_or_inv_r_key, r2.flags, r2.srq_or_rq_wr_id) == (0x1234, bnxt_hsi.CQ_RES_RC_FLAGS_IMM | bnxt_hsi.CQ_RES_RC_FLAGS_RDMA_RDMA_WRITE,
                                                                      0x78)
  assert bytes(rmem.view[:3000]) == data


def test_a_cq_armed_writes_an_nq_notification(up, peer):
  a, b = pair(up, peer)
  up.ring_db(db(a.cq_id, bnxt_hsi.DBC_DBC_TYPE_CQ_ARMALL, 0, 0, toggle=0))
  dst, _, dva = peer.register(64)
  write(up, a, 8, dst, dva)
  a.poll()
  wait(lambda: up.nq.get(0)[8] & 1 == 1, "the NQ entry")
  note = bnxt_hsi.nq_cn.from_buffer_copy(up.nq.get(0))
  assert (note.type & bnxt_hsi.NQ_CN_TYPE_MASK, note.type >> bnxt_hsi.NQ_CN_TOGGLE_SFT, note.cq_handle_low) == (bnxt_hsi.NQ_CN_TYPE_CQ_NOTIFICATION,
                                                                                                                1, 0xC0FFEE)


def test_an_armed_nq_raises_its_msix_vector_once_per_arm(up, peer):
  """NQ_ARM arms the NQ's interrupt (MSI-X vector = the ring's logical_id, 1 here): the CQ notification raises it once;
  the next one, with the NQ not armed again, raises nothing; an NQ_ARM that leaves an entry unconsumed raises it at once;
  NQ_MASK disarms it."""
  a, b = pair(up, peer)
  irq = up.pci.msix_eventfd(1)
  dst, _, dva = peer.register(64)

  def notify(k: int) -> None:
    up.ring_db(db(a.cq_id, bnxt_hsi.DBC_DBC_TYPE_CQ_ARMALL, k % a.cq.depth, 0, toggle=k & 3))
    write(up, a, 8, dst, dva)
    a.poll()
    wait(lambda: up.nq.get(k)[8] & 1 == 1, f"NQ entry {k}")

  def interrupts() -> int:
    try: return os.eventfd_read(irq)
    except BlockingIOError: return 0

  up.ring_db(db(up.nq_id, bnxt_hsi.DBC_DBC_TYPE_NQ_ARM, 0))
  notify(0)
  assert interrupts() == 1
  notify(1)                                                       # the NQ was not armed again
  assert interrupts() == 0
  up.ring_db(db(up.nq_id, bnxt_hsi.DBC_DBC_TYPE_NQ_ARM, 1))              # entry 1 is still unconsumed: at once
  assert interrupts() == 1
  up.ring_db(db(up.nq_id, bnxt_hsi.DBC_DBC_TYPE_NQ_ARM, 2))
  up.ring_db(db(up.nq_id, bnxt_hsi.DBC_DBC_TYPE_NQ_MASK, 2))
  notify(2)
  assert interrupts() == 0


def test_a_cq_the_driver_does_not_release_overflows(up, peer):
  a, b = pair(up, peer)
  dst, _, dva = peer.register(64)
  src = up.register(64)
  for _ in range(a.cq.depth + 1):                                   # 33 CQEs for 32 entries, none released
    write(up, a, 8, dst, dva, src)
  note = bnxt_hsi.creq_cq_error_notification.from_buffer_copy(up.creq_next())
  assert (note.event, note.xid, note.cq_err_reason) == (0xC1, a.cq_id, bnxt_hsi.CREQ_CQ_ERROR_NOTIFICATION_CQ_ERR_REASON_REQ_CQ_OVERFLOW_ERROR)
  assert "overflowed" in up.model.log_lines[-1]


@pytest.mark.parametrize("case, match", [("valid", "VALID"), ("epoch", "epoch"), ("page", "doorbell page"), ("offset", "offset 0"),
                                         ("state", "must be in RTS"), ("type", "not modelled")])
def test_malformed_doorbells_raise(up, case, match):
  q = QPair(up)
  value = db(q.qpn, bnxt_hsi.DBC_DBC_TYPE_SQ, 1, 1 if case == "epoch" else 0)
  if case == "valid": value &= ~(bnxt_hsi.DBC_DBC_VALID << 32)
  if case == "type": value = db(q.qpn, bnxt_hsi.DBC_DBC_TYPE_SRQ, 0)
  if case != "state":
    q.connect(q.qpn, up.gid, up.mac)
    q.sq.put(0, bytes(bnxt_hsi.sq_rdma_hdr(wqe_type=WRITE, wqe_size=2)))
  offset = up.db_off + (4096 if case == "page" else 0) + (8 if case == "offset" else 0)
  with pytest.raises(ModelError, match=match): up.dbar.write64(offset, value)


def test_injected_faults_on_the_nic_path(up, peer):
  up.model.port.wire.faults.add("drop", 2)
  peer.model.port.wire.faults.add("dup", 1)
  a, b = pair(up, peer, timeout=14)
  dst, dmem, dva = peer.register(8192)
  data = write(up, a, 8192, dst, dva)
  assert cqe(a.poll())[1] == bnxt_hsi.CQ_REQ_STATUS_OK and bytes(dmem.view) == data
  assert up.model.roce.qps[a.qpn].rc.stats.retransmitted >= 1


CHILD = """
import hashlib, json, sys
sys.path.insert(0, {root!r})
from drivers.system import open_model
from tests.emu.nic.bnxt_cmds import Bnxt, QPair
n = Bnxt(open_model("bnxt", 1))
n.bring_up("10.0.0.2")
q = QPair(n)
key, mem, va = n.register(1 << 16)
print(json.dumps(dict(qpn=q.qpn, mac=n.mac.hex(), gid=n.gid.hex(), va=va, rkey=key)), flush=True)
peer = json.loads(sys.stdin.readline())
q.connect(peer["qpn"], bytes.fromhex(peer["gid"]), bytes.fromhex(peer["mac"]), mtu=peer["mtu"])
print("ready", flush=True)
sys.stdin.readline()
print(hashlib.sha256(bytes(mem.view[:1 << 16])).hexdigest(), flush=True)
n.pci.close()
"""


def test_rdma_write_between_two_nics_in_two_processes(up):
  child = subprocess.Popen([sys.executable, "-c", CHILD.format(root=os.getcwd())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    remote = json.loads(child.stdout.readline())
    a = QPair(up)
    child.stdin.write(json.dumps(dict(qpn=a.qpn, mac=up.mac.hex(), gid=up.gid.hex(), mtu=4096)) + "\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "ready"
    a.connect(remote["qpn"], bytes.fromhex(remote["gid"]), bytes.fromhex(remote["mac"]), mtu=4096)
    data = write(up, a, 1 << 16, remote["rkey"], remote["va"])
    assert cqe(a.poll())[1] == bnxt_hsi.CQ_REQ_STATUS_OK
    child.stdin.write("done\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == hashlib.sha256(data).hexdigest()
  finally:
    child.kill()
    child.wait()
