"""RC queue pairs: RCFW CREATE_QP / MODIFY_QP / DESTROY_QP, SQ and RQ WQEs, the MSN table, doorbells and the
completions they produce (roce_hsi.h sq_*, rq_*, cq_req, cq_res_rc, cmdq_modify_qp).

The QP uses static WQEs (qp_flags without VARIABLE_SIZED_WQE_ENABLED): every SQ and RQ WQE is 128 bytes (struct
sq_send / sq_rdma / rq_wqe: a 32-byte header and up to six 16-byte SGEs), sq_size and rq_size count WQEs, and
doorbell indexes, the MSN table's start index and the CQE's consumer index count WQEs. The SQ's MSN table (one
sq_msn_search per message, entry m % roundup_pow2(sq_size): its WQE's ring position, first PSN, next PSN) follows
the ring's pages in the same page table; the hardware requester retransmits from it (INITIALIZE_FW
HW_REQUESTER_RETX_SUPPORTED). A requester CQE's sq_cons_idx counts the WQEs completed, this one included; a responder
CQE names the RQ WQE by the wr_id written into it (the request's sequence number). drivers/rdma's WorkRequests matches
them to the requests and drops the NIC's flush CQEs for requests the verbs layer has flushed, as the kernel's
bnxt_qplib does for a queue on its flush list.
"""
from __future__ import annotations
import ctypes, struct
from collections import deque
from typing import TYPE_CHECKING

from autogen import bnxt as bnxt_hsi
from drivers.bnxt.hsi import REQ_STATUS, RES_RC_STATUS, Packer
from drivers.bnxt.cq import CQE_SIZE
from drivers.bnxt.doorbell import doorbell_value
from drivers.bnxt.pbl import HWQueue
from drivers.hcq.ring import Ring
from drivers.system.dma import PAGE
from drivers.rdma.provider import Completion, DevicePost, WorkRequests, ipv4_gid
from drivers.rdma.verbs import (Access, QPAttr, QPAttrMask as M, QPCap, QPState, RecvWR, SendFlags, SendWR, WCOpcode,
                                WCStatus as W, WROpcode)
if TYPE_CHECKING:
  from drivers.bnxt.cq import CQ
  from drivers.bnxt.device import BNXTDevice

WQE_SIZE = ctypes.sizeof(bnxt_hsi.sq_send)           # 128: a static WQE
HDR_SLOTS = ctypes.sizeof(bnxt_hsi.sq_send_hdr) // 16
MAX_SGE = (WQE_SIZE - ctypes.sizeof(bnxt_hsi.sq_send_hdr)) // ctypes.sizeof(bnxt_hsi.sq_sge)
MSN_SIZE = ctypes.sizeof(bnxt_hsi.sq_msn_search)

WQE_TYPE = {WROpcode.RDMA_WRITE: bnxt_hsi.SQ_RDMA_HDR_WQE_TYPE_WRITE_WQE, WROpcode.RDMA_WRITE_WITH_IMM: bnxt_hsi.SQ_RDMA_HDR_WQE_TYPE_WRITE_W_IMMEAD,
            WROpcode.RDMA_READ: bnxt_hsi.SQ_RDMA_HDR_WQE_TYPE_READ_WQE, WROpcode.SEND: bnxt_hsi.SQ_SEND_HDR_WQE_TYPE_SEND,
            WROpcode.SEND_WITH_IMM: bnxt_hsi.SQ_SEND_HDR_WQE_TYPE_SEND_W_IMMEAD}
# cq_req / cq_res_rc status -> ibv_wc_status (the kernel's bnxt_re mapping)
REQ_WC = {bnxt_hsi.CQ_REQ_STATUS_OK: W.SUCCESS, bnxt_hsi.CQ_REQ_STATUS_BAD_RESPONSE_ERR: W.BAD_RESP_ERR,
          bnxt_hsi.CQ_REQ_STATUS_LOCAL_LENGTH_ERR: W.LOC_LEN_ERR, bnxt_hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR: W.LOC_QP_OP_ERR,
          bnxt_hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR: W.LOC_PROT_ERR, bnxt_hsi.CQ_REQ_STATUS_MEMORY_MGT_OPERATION_ERR: W.GENERAL_ERR,
          bnxt_hsi.CQ_REQ_STATUS_REMOTE_INVALID_REQUEST_ERR: W.REM_INV_REQ_ERR, bnxt_hsi.CQ_REQ_STATUS_REMOTE_ACCESS_ERR: W.REM_ACCESS_ERR,
          bnxt_hsi.CQ_REQ_STATUS_REMOTE_OPERATION_ERR: W.REM_OP_ERR, bnxt_hsi.CQ_REQ_STATUS_RNR_NAK_RETRY_CNT_ERR: W.RNR_RETRY_EXC_ERR,
          bnxt_hsi.CQ_REQ_STATUS_TRANSPORT_RETRY_CNT_ERR: W.RETRY_EXC_ERR, bnxt_hsi.CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR: W.WR_FLUSH_ERR}
RES_WC = {bnxt_hsi.CQ_RES_RC_STATUS_OK: W.SUCCESS, bnxt_hsi.CQ_RES_RC_STATUS_LOCAL_ACCESS_ERROR: W.LOC_ACCESS_ERR,
          bnxt_hsi.CQ_RES_RC_STATUS_LOCAL_LENGTH_ERR: W.LOC_LEN_ERR, bnxt_hsi.CQ_RES_RC_STATUS_LOCAL_PROTECTION_ERR: W.LOC_PROT_ERR,
          bnxt_hsi.CQ_RES_RC_STATUS_LOCAL_QP_OPERATION_ERR: W.LOC_QP_OP_ERR, bnxt_hsi.CQ_RES_RC_STATUS_MEMORY_MGT_OPERATION_ERR: W.GENERAL_ERR,
          bnxt_hsi.CQ_RES_RC_STATUS_REMOTE_INVALID_REQUEST_ERR: W.REM_INV_REQ_ERR,
          bnxt_hsi.CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR: W.WR_FLUSH_ERR, bnxt_hsi.CQ_RES_RC_STATUS_HW_FLUSH_ERR: W.WR_FLUSH_ERR}
# verbs modify mask -> cmdq_modify_qp modify_mask (the address vector is the GRH and Ethernet fields)
MODIFY_MASK = {M.STATE: "STATE", M.ACCESS_FLAGS: "ACCESS", M.PKEY_INDEX: "PKEY",
               M.AV: ("DGID", "SGID_INDEX", "HOP_LIMIT", "TRAFFIC_CLASS", "FLOW_LABEL", "DEST_MAC"), M.PATH_MTU: "PATH_MTU",
               M.TIMEOUT: "TIMEOUT", M.RETRY_CNT: "RETRY_CNT", M.RNR_RETRY: "RNR_RETRY", M.RQ_PSN: "RQ_PSN",
               M.MAX_QP_RD_ATOMIC: "MAX_RD_ATOMIC", M.MIN_RNR_TIMER: "MIN_RNR_TIMER", M.SQ_PSN: "SQ_PSN",
               M.MAX_DEST_RD_ATOMIC: "MAX_DEST_RD_ATOMIC", M.DEST_QPN: "DEST_QP_ID"}
QP_ACCESS = {Access.LOCAL_WRITE: bnxt_hsi.CMDQ_MODIFY_QP_ACCESS_LOCAL_WRITE, Access.REMOTE_WRITE: bnxt_hsi.CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE,
             Access.REMOTE_READ: bnxt_hsi.CMDQ_MODIFY_QP_ACCESS_REMOTE_READ, Access.REMOTE_ATOMIC: bnxt_hsi.CMDQ_MODIFY_QP_ACCESS_REMOTE_ATOMIC}
DEFAULT_PKEY = 0xFFFF
SUCCESS, RECV, RECV_RDMA_WITH_IMM = W.SUCCESS, WCOpcode.RECV, WCOpcode.RECV_RDMA_WITH_IMM   # (enum members, looked up once)


def modify_mask(mask: M) -> int:
  names = [n for bit, ns in MODIFY_MASK.items() if mask & bit for n in ((ns,) if isinstance(ns, str) else ns)]
  return sum(getattr(bnxt_hsi, f"CMDQ_MODIFY_QP_MODIFY_MASK_{n}") for n in names)


def _wqes(n: int) -> int: return 1 << max(n - 1, 7).bit_length()   # a power of two >= n, at least 128 (four pages)


RDMA_HDR = Packer(bnxt_hsi.sq_rdma_hdr, "wqe_type flags wqe_size imm_data length remote_va remote_key")
SEND_HDR = Packer(bnxt_hsi.sq_send_hdr, "wqe_type flags wqe_size inv_key_or_imm_data length")
RQ_HDR = Packer(bnxt_hsi.rq_wqe_hdr, "wqe_type wqe_size wr_id")
SGE_AT, SGE_PACK = ctypes.sizeof(bnxt_hsi.sq_send_hdr), Packer(bnxt_hsi.sq_sge, "va_or_pa l_key size")
SEND_FLAGS = {int(f): (bnxt_hsi.SQ_SEND_HDR_FLAGS_SIGNAL_COMP if f & SendFlags.SIGNALED else 0) |
                     (bnxt_hsi.SQ_SEND_HDR_FLAGS_SE if f & SendFlags.SOLICITED else 0) |
                      (bnxt_hsi.SQ_SEND_HDR_FLAGS_RD_OR_ATOMIC_FENCE if f & SendFlags.FENCE else 0) for f in map(SendFlags, range(8))}


def wqe_struct(hdr: Packer, sges: int) -> struct.Struct:
  """A whole 128-byte WQE in one struct: the header's fields, `sges` SGEs (va_or_pa l_key size) after it, zeros in the
  rest (struct packs pad bytes as zeros)."""
  sge = SGE_PACK.struct.format.lstrip("<") + "x" * (ctypes.sizeof(bnxt_hsi.sq_sge) - SGE_PACK.struct.size)
  return struct.Struct(hdr.struct.format + "x" * (SGE_AT - hdr.struct.size) + sge * sges +
                       "x" * (WQE_SIZE - SGE_AT - sges * ctypes.sizeof(bnxt_hsi.sq_sge)))


# opcode -> (the WQE's struct for each SGE count, wqe_type, carries immediate data, RDMA: has remote_va and remote_key)
SEND_WQES = {op: ([wqe_struct(RDMA_HDR if op.is_rdma else SEND_HDR, n) for n in range(MAX_SGE + 1)], WQE_TYPE[op], op.has_imm,
                  op.is_rdma) for op in WROpcode}


def send_wqe(wr: SendWR) -> bytes:
  """The 128-byte static SQ WQE of a work request: sq_rdma_hdr (RDMA) or sq_send_hdr (SEND), then the SGEs."""
  structs, wqe_type, imm, rdma = SEND_WQES[wr.opcode]
  sges, length, fields = wr.sg_list, 0, []
  for s in sges:
    fields += (s.addr, s.lkey, s.length)
    length += s.length
  hdr = (wqe_type, SEND_FLAGS[wr.send_flags], HDR_SLOTS + len(sges), wr.imm_data if imm else 0, length)
  return structs[len(sges)].pack(*hdr, wr.remote_addr, wr.rkey, *fields) if rdma else structs[len(sges)].pack(*hdr, *fields)


def recv_wqe(seq: int, wr: RecvWR) -> bytearray:
  wqe = bytearray(WQE_SIZE)
  for i, s in enumerate(wr.sg_list): SGE_PACK.pack_into(wqe, SGE_AT + 16 * i, s.addr, s.lkey, s.length)
  RQ_HDR.pack_into(wqe, 0, bnxt_hsi.RQ_WQE_WQE_TYPE_RCV, HDR_SLOTS + len(wr.sg_list), seq & bnxt_hsi.RQ_WQE_WR_ID_MASK)
  return wqe


def msn_entry(start_idx: int, start_psn: int, next_psn: int) -> int:
  return (start_idx << bnxt_hsi.SQ_MSN_SEARCH_START_IDX_SFT & bnxt_hsi.SQ_MSN_SEARCH_START_IDX_MASK) | \
         (next_psn << bnxt_hsi.SQ_MSN_SEARCH_NEXT_PSN_SFT & bnxt_hsi.SQ_MSN_SEARCH_NEXT_PSN_MASK) | \
         (start_psn & bnxt_hsi.SQ_MSN_SEARCH_START_PSN_MASK)


class WorkQueue:
  """The SQ or RQ: a Ring of 128-byte WQEs whose read pointer advances as completions report WQEs consumed. `posted`
  is the QP's WorkRequests queue: (the key its completion names, the request's sequence number, the WQE's index)."""
  def __init__(self, qp: QP, name: str, wqes: int, kind: int, posted: deque[tuple[int, ...]], aux: int = 0):
    self.qp, self.kind, self.posted = qp, kind, posted
    self.q = HWQueue(qp.dev.pci, wqes, WQE_SIZE, aux)
    self.ring = Ring(qp.dev, name, self.q.ring, None, None, self._doorbell, unit=WQE_SIZE)

  def _doorbell(self, put: int) -> None:
    self.qp.dev.db.ring(self.qp.qp_num, self.kind, put % self.q.entries, self.q.epoch(put))

  def post(self, posted: list[tuple[int, int, int]], wqes: list[bytes]) -> None:
    """The WQEs of the requests `posted` (WorkRequests entries) at the producer, then one doorbell."""
    self.posted.extend(posted)
    self.ring.submit(wqes, [])

  def retire(self, entry: tuple[int, ...]) -> int:
    """The request of WorkRequests `entry` completed (and the WQEs before it): -> its sequence number."""
    self.ring.retire(entry[2] + 1)
    return entry[1]

  def reset(self) -> None: self.ring.reset()


class QP:
  def __init__(self, dev: BNXTDevice, pd: int, send_cq: CQ, recv_cq: CQ, cap: QPCap):
    if max(cap.max_send_sge, cap.max_recv_sge) > MAX_SGE: raise ValueError(f"a static WQE holds at most {MAX_SGE} SGEs")
    self.dev, self.handle, self.qp_num = dev, dev.new_handle(self), 0
    self.wrs = WorkRequests(dev.name, self)
    sq_wqes, rq_wqes = _wqes(cap.max_send_wr), _wqes(cap.max_recv_wr)
    self.msn_entries = sq_wqes                          # roundup_pow_of_two(sq_size) (kernel bnxt_re, static WQEs)
    self.sq = WorkQueue(self, "SQ", sq_wqes, bnxt_hsi.DBC_DBC_TYPE_SQ, self.wrs.sq, aux=self.msn_entries * MSN_SIZE)
    self.rq = WorkQueue(self, "RQ", rq_wqes, bnxt_hsi.DBC_DBC_TYPE_RQ, self.wrs.rq)
    self.msn = self.sq.q.aux.cast("Q")
    try:
      self.qp_num = dev.rcfw("create_qp", qp_handle=self.handle, type=bnxt_hsi.CMDQ_CREATE_QP_TYPE_RC, pd_id=pd,
                             sq_size=sq_wqes, rq_size=rq_wqes, sq_fwo_sq_sge=cap.max_send_sge, rq_fwo_rq_sge=cap.max_recv_sge,
                             scq_cid=send_cq.cq_id, rcq_cid=recv_cq.cq_id, sq_pbl=self.sq.q.pt.base,
                             sq_pg_size_sq_lvl=self.sq.q.pt.level | bnxt_hsi.CMDQ_CREATE_QP_SQ_PG_SIZE_PG_4K,
                             rq_pbl=self.rq.q.pt.base, rq_pg_size_rq_lvl=self.rq.q.pt.level | bnxt_hsi.CMDQ_CREATE_QP_RQ_PG_SIZE_PG_4K).xid
    except BaseException:
      self._free()
      raise
    self.sq_psn, self.path_mtu, self.network_type = 0, 1024, bnxt_hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV1   # until the AV says

  # --- state
  def modify(self, cur: QPState, new: QPState, attr: QPAttr, mask: M) -> None:
    f: dict = {}
    if mask & M.AV:
      ah = attr.ah_attr
      self.network_type = bnxt_hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4 if ipv4_gid(ah.dgid) else bnxt_hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV6
      f.update(dgid=bytes(ah.dgid), sgid_index=ah.sgid_index, hop_limit=ah.hop_limit, traffic_class=ah.traffic_class,
               flow_label=ah.flow_label, dest_mac=bytes(ah.dmac))
    if mask & M.ACCESS_FLAGS: f["access"] = sum(bit for flag, bit in QP_ACCESS.items() if attr.qp_access_flags & flag)
    if mask & M.PKEY_INDEX: f["pkey"] = DEFAULT_PKEY
    if mask & M.PATH_MTU:
      f["path_mtu_pingpong_push_enable"] = (attr.path_mtu.bit_length() - 9) << bnxt_hsi.CMDQ_MODIFY_QP_PATH_MTU_SFT
      self.path_mtu = attr.path_mtu
    for bit, name in ((M.TIMEOUT, "timeout"), (M.RETRY_CNT, "retry_cnt"), (M.RNR_RETRY, "rnr_retry"), (M.RQ_PSN, "rq_psn"),
                      (M.SQ_PSN, "sq_psn"), (M.MIN_RNR_TIMER, "min_rnr_timer"), (M.MAX_QP_RD_ATOMIC, "max_rd_atomic"),
                      (M.MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic")):
      if mask & bit: f[name] = getattr(attr, name)
    if mask & M.DEST_QPN: f["dest_qp_id"] = attr.dest_qp_num
    self.dev.rcfw("modify_qp", qp_cid=self.qp_num, qp_type=bnxt_hsi.CMDQ_MODIFY_QP_QP_TYPE_RC, modify_mask=modify_mask(mask),
                  network_type_en_sqd_async_notify_new_state=self.network_type | int(new), **f)
    if mask & M.SQ_PSN: self.sq_psn = attr.sq_psn
    self.wrs.modified(new)
    if new == QPState.RESET:                     # the hardware's queue indexes start again at 0
      self.sq.reset()
      self.rq.reset()

  # --- work requests
  def post_send(self, wrs: list[tuple[int, SendWR]]) -> None:
    index, entries, msn, posted, wqes = self.sq.ring.put, self.sq.q.entries, self.msn, [], []
    for seq, wr in wrs:
      npsn = max(1, -(-wr.length // self.path_mtu))     # packets the request (or a READ's response) takes
      nxt = (self.sq_psn + npsn) & 0xFFFFFF
      msn[index % self.msn_entries] = msn_entry(index % entries, self.sq_psn, nxt)   # start: the ring slot
      self.sq_psn = nxt
      posted.append(((index + 1) % entries, seq, index))   # its cq_req names the consumer index after it
      wqes.append(send_wqe(wr))
      index += 1
    self.sq.post(posted, wqes)

  def post_recv(self, wrs: list[tuple[int, RecvWR]]) -> None:
    put = self.rq.ring.put                               # its cq_res_rc names the wr_id written into the WQE
    self.rq.post([(seq & bnxt_hsi.RQ_WQE_WR_ID_MASK, seq, put + i) for i, (seq, _) in enumerate(wrs)], [recv_wqe(seq, wr) for seq, wr in wrs])

  def device_targets(self, cq: CQ) -> tuple[list[memoryview], int]:
    return [self.sq.q.mem.view, cq.q.mem.view], (self.dev.pci.bar_address(2) + self.dev.db.offset) & ~(PAGE - 1)

  def device_post(self, seq: int, wr: SendWR, cq: CQ, cq_ahead: int) -> DevicePost:
    """`wr` for another device to post: its WQE into the next SQ slot, then the SQ doorbell with the producer index
    past it (one 64-bit store into BAR2); its cq_req arrives in CQ slot cons + cq_ahead, whose toggle bit (byte 24,
    bit 0) is 1 in even passes of the ring and 0 in odd ones. The MSN entry (read by the hardware only to retransmit)
    is written here."""
    sq = self.sq
    index = sq.ring.claim(WQE_SIZE)
    nxt = (self.sq_psn + max(1, -(-wr.length // self.path_mtu))) & 0xFFFFFF
    self.msn[index % self.msn_entries] = msn_entry(index % sq.q.entries, self.sq_psn, nxt)
    self.sq_psn = nxt
    put = index + 1
    sq.posted.append((put % sq.q.entries, seq, index))
    db = doorbell_value(self.qp_num, sq.kind, put % sq.q.entries, sq.q.epoch(put))
    pos = cq.q.cons + cq_ahead
    return DevicePost([(sq.q.mem.view, index % sq.q.entries * WQE_SIZE, send_wqe(wr))],
                      (self.dev.pci.bar_address(2) + self.dev.db.offset, db.to_bytes(8, "little")),
                      (cq.q.mem.view, pos % cq.q.entries * CQE_SIZE + 24, bnxt_hsi.CQ_BASE_TOGGLE, 1 - cq.q.epoch(pos)))

  # --- completions
  def req_completion(self, sq_cons_idx: int, status: int) -> Completion | None:
    """cq_req: sq_cons_idx is the SQ consumer index after the WQE that completed (WQEs before it completed too);
    None for a request the verbs layer has flushed (its WQE is retired all the same)."""
    seq = self.sq.retire(self.wrs.take(False, sq_cons_idx % self.sq.q.entries, "SQ consumer index"))
    if status == bnxt_hsi.CQ_REQ_STATUS_OK: return self.wrs.completion(False, seq, SUCCESS)
    return self.wrs.completion(False, seq, REQ_WC.get(status, W.GENERAL_ERR), status, f"CQ_REQ_STATUS_{REQ_STATUS.get(status, '?')}")

  def res_completion(self, length: int, imm: int, status: int, flags: int, wr_id: int) -> Completion | None:
    """cq_res_rc: the RQ WQE's wr_id (we write the request's sequence number), the length and immediate data; None
    for a receive the verbs layer has flushed (its WQE is retired all the same)."""
    seq = self.rq.retire(self.wrs.take(True, wr_id & bnxt_hsi.CQ_RES_RC_SRQ_OR_RQ_WR_ID_MASK, "wr_id"))
    opcode = RECV_RDMA_WITH_IMM if flags & bnxt_hsi.CQ_RES_RC_FLAGS_RDMA else RECV
    imm = imm if flags & bnxt_hsi.CQ_RES_RC_FLAGS_IMM else None
    if status == bnxt_hsi.CQ_RES_RC_STATUS_OK: return self.wrs.completion(True, seq, SUCCESS, 0, "", length, imm, opcode)
    return self.wrs.completion(True, seq, RES_WC.get(status, W.GENERAL_ERR), status, f"CQ_RES_RC_STATUS_{RES_RC_STATUS.get(status, '?')}",
                               length, imm, opcode)

  def destroy(self) -> None:
    try: self.dev.rcfw("destroy_qp", qp_cid=self.qp_num)
    finally: self._free()

  def _free(self) -> None:
    self.sq.q.free()
    self.rq.q.free()
    self.dev.drop_handle(self.handle)
