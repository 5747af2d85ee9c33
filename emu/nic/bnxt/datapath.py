"""The BCM57508's RoCE datapath: doorbells, SQ/RQ WQEs, the MSN table, CQEs and CQ notifications, and the glue to the
RC transport every QP runs (emu/nic/rc.py). Formats: roce_hsi.h (sq_send_hdr, sq_rdma_hdr, sq_sge, sq_msn_search,
rq_wqe_hdr, cq_req, cq_res_rc, nq_cn, dbc_dbc, creq_qp_error_notification); reference rdma.md 5.9-5.14.

Doorbells (BAR2, one 64-bit store each; dbc_dbc): low word index (bits 0-23), epoch (24), toggle (25-26); high word
xid (0-19), path (24-25), VALID (26, must be set), type (28-31); reserved bits must be 0. Below legacy_l2_db_size_kb
(64 KiB) they are L2 doorbells (path L2, xid an L2 ring: recorded only). Above, page p (4 KiB) is doorbell page index
(DPI) p: path RoCE, at offset 0 of the page; an SQ/RQ doorbell names a QP created with that dpi, a CQ doorbell a CQ
with it, an NQ/NQ_ARM/NQ_MASK doorbell an NQ ring (or the CREQ) in page 0. Anything else raises ModelError.
- SQ (xid QPN, index = producer): the WQEs from the model's consumer to it are executed in order. Static WQE mode
  (create_qp without VARIABLE_SIZED_WQE_ENABLED): sq_size WQEs of 128 bytes, index and epoch count WQEs. Variable
  mode: sq_size 16-byte slots, a WQE takes wqe_size slots (wrapping at the ring end), index and epoch count slots.
  The QP must be in RTS (in ERR the WQEs complete as flushed). WQE header (32 bytes): wqe_type SEND 0, SEND_W_IMMEAD 1,
  WRITE 4, WRITE_W_IMMEAD 5, READ 6 (others: not modelled, completed with LOCAL_QP_OPERATION_ERR); flags SIGNAL_COMP
  (a CQE on success), RD_OR_ATOMIC_FENCE, SE, INLINE (the data follows the header); wqe_size = 2 + SGEs (<= sq_sge,
  <= 8 in static mode); length = the sum of the SGE sizes (else LOCAL_LENGTH_ERR); imm_data, remote_va, remote_key.
  SGEs (va, l_key, size) must lie in an MR of the QP's PD (if the MR has one), with LOCAL_WRITE for a READ's
  destination (else LOCAL_PROTECTION_ERR). A bad WQE completes with its error, in order, and the QP goes to ERR.
  Once a QP in static mode sent two one-packet RDMA WRITEs (with immediate) of one SGE and shape, its transmit flow
  (emu/nic/txflow.py: tx_bnxt in C) takes its next WQEs of that shape (type, flags but SIGNAL_COMP, wqe_size, length,
  L_Key) with the same checks (the SGE in the same MR, the MSN entry); the first that is another shape or fails one, and
  those after it, come here.
- MSN table (hardware requester retransmission, the only mode modelled): entry m % T of the QP's table, which starts
  right after the SQ ring in the SQ's pages (byte sq_size * 128 static, sq_size * 16 variable; T = roundup_pow2(sq_size),
  half that in variable mode), must describe message m (the m-th WQE since the QP was created) before its doorbell:
  start_idx = its ring index (WQE or slot), start_psn = its first PSN, next_psn = first + packets. A wrong entry
  completes the WQE with LOCAL_QP_OPERATION_ERR (the hardware would retransmit from it).
- RQ (xid QPN, index = producer in WQEs of 128 bytes, rq_wqe_hdr with wqe_type RCV 0x80, wr_id, then SGEs <= rq_sge):
  the QP must not be in RESET; SGEs need LOCAL_WRITE in an MR of the QP's PD. WQEs are used in order, when messages
  arrive: a bad one completes (LOCAL_PROTECTION_ERR for an SGE, LOCAL_QP_OPERATION_ERR for a malformed header) when a
  message reaches it, after the WQEs before it, and the QP goes to ERR (rc.py).
- CQ (CQ, CQ_ARMSE, CQ_ARMALL, CQ_ARMENA; index = consumer): the consumer must not pass the producer. ARMALL/ARMSE arm
  the CQ: its next CQE (ARMSE: the next solicited one) writes an nq_cn (type CQ_NOTIFICATION, cq_handle, toggle =
  the CQ's arm toggle, which advances with each notification) to the CQ's CNQ; an arm whose toggle is stale is ignored.
- NQ/NQ_ARM/NQ_MASK (xid an NQ ring id, index = consumer): frees NQ and CREQ entries; NQ_ARM arms the ring's interrupt
  (MSI-X, rings.py), NQ_MASK disarms it.
CQEs: requester (cq_req: qp_handle, sq_cons_idx = WQEs completed so far including this one, mod 2^16; status
CQ_REQ_STATUS_*) after the ACK, for signaled WQEs and every error; responder (cq_res_rc: length, imm, flags IMM/RDMA,
wr_id from the RQ WQE, status CQ_RES_RC_STATUS_*) for SENDs and WRITEs with immediate (those of single-packet WRITEs
the C datapath takes it writes itself, with an armed CQ's nq_cn, as `completion_recipe` says). A CQ that is full (the driver
has not published consumption) overflows: the CQE is lost and a CQ_ERROR_NOTIFICATION goes to the CREQ (unless
created with DISABLE_CQ_OVERFLOW_DETECTION, when it is overwritten). A QP that goes to ERR by itself (an error
completion, a NAK it sent) posts a QP_ERROR_NOTIFICATION (event 0xc0) to the CREQ, as the firmware does: drivers must
expect these between command responses.
"""
from __future__ import annotations
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autogen import bnxt as bnxt_hsi
from emu.nic import fastpath, rc, txflow
from emu.pci import ModelError
from emu.nic.bnxt.pbl import HostRing
from emu.nic.bnxt.rings import EventRing, L2Ring, doorbell_position

if TYPE_CHECKING: from emu.nic.bnxt.bcm57508 import BCM57508

SLOT, STATIC_WQE, RQ_WQE, CQE, NQE = 16, 128, 128, 32, 16
DB_PAGE = 4096
# the transmit flows' decoder of this model's send queue (its WQEs in static mode, the MSN table)
TX = txflow.Decoder("nic/bnxt/txflow.c", "int tx_bnxt(txflow_t *f, uint64_t pos, uint64_t end, uint32_t msn, uint32_t psn, uint32_t una);")
REQ_STATUS = {rc.OK: bnxt_hsi.CQ_REQ_STATUS_OK, rc.BAD_RESP_ERR: bnxt_hsi.CQ_REQ_STATUS_BAD_RESPONSE_ERR,
              rc.LOC_LEN_ERR: bnxt_hsi.CQ_REQ_STATUS_LOCAL_LENGTH_ERR, rc.LOC_QP_OP_ERR: bnxt_hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR,
              rc.LOC_PROT_ERR: bnxt_hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR, rc.REM_INV_REQ_ERR: bnxt_hsi.CQ_REQ_STATUS_REMOTE_INVALID_REQUEST_ERR,
              rc.REM_ACCESS_ERR: bnxt_hsi.CQ_REQ_STATUS_REMOTE_ACCESS_ERR, rc.REM_OP_ERR: bnxt_hsi.CQ_REQ_STATUS_REMOTE_OPERATION_ERR,
              rc.RNR_RETRY_EXC_ERR: bnxt_hsi.CQ_REQ_STATUS_RNR_NAK_RETRY_CNT_ERR, rc.RETRY_EXC_ERR: bnxt_hsi.CQ_REQ_STATUS_TRANSPORT_RETRY_CNT_ERR,
              rc.WR_FLUSH_ERR: bnxt_hsi.CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR}
RES_STATUS = {rc.OK: bnxt_hsi.CQ_RES_RC_STATUS_OK, rc.LOC_LEN_ERR: bnxt_hsi.CQ_RES_RC_STATUS_LOCAL_LENGTH_ERR,
              rc.LOC_PROT_ERR: bnxt_hsi.CQ_RES_RC_STATUS_LOCAL_PROTECTION_ERR, rc.LOC_QP_OP_ERR: bnxt_hsi.CQ_RES_RC_STATUS_LOCAL_QP_OPERATION_ERR,
              rc.WR_FLUSH_ERR: bnxt_hsi.CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR}
_N = "CREQ_QP_ERROR_NOTIFICATION_"
REQ_REASON = {rc.RETRY_EXC_ERR: "REQ_TIMEOUT_RETRY_LIMIT", rc.RNR_RETRY_EXC_ERR: "REQ_RNR_TIMEOUT_RETRY_LIMIT",
              rc.REM_INV_REQ_ERR: "REQ_NAK_ARRIVAL_1", rc.REM_ACCESS_ERR: "REQ_NAK_ARRIVAL_2", rc.REM_OP_ERR: "REQ_NAK_ARRIVAL_3",
              rc.BAD_RESP_ERR: "REQ_INVALID_READ_RESP", rc.LOC_PROT_ERR: "REQ_TX_MEMORY_ERROR"}
RES_REASON = {rc.REM_ACCESS_ERR: "RES_RX_INVALID_R_KEY", rc.REM_INV_REQ_ERR: "RES_OPCODE_ERROR", rc.LOC_LEN_ERR: "RES_EXCEEDS_WQE",
              rc.REM_OP_ERR: "RES_MEMORY_ERROR", rc.LOC_PROT_ERR: "RES_MEMORY_ERROR"}
WQE_OPCODES = {bnxt_hsi.SQ_BASE_WQE_TYPE_SEND: rc.SEND, bnxt_hsi.SQ_BASE_WQE_TYPE_SEND_W_IMMEAD: rc.SEND_IMM,
               bnxt_hsi.SQ_BASE_WQE_TYPE_WRITE_WQE: rc.WRITE, bnxt_hsi.SQ_BASE_WQE_TYPE_WRITE_W_IMMEAD: rc.WRITE_IMM,
               bnxt_hsi.SQ_BASE_WQE_TYPE_READ_WQE: rc.READ}
# register_mr access bits -> the transport's (rc) rights
MR_ACCESS = ((bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE, rc.LOCAL_WRITE), (bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_READ, rc.REMOTE_READ),
             (bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE, rc.REMOTE_WRITE), (bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_ATOMIC, rc.REMOTE_ATOMIC))


def pow2_ceil(n: int) -> int: return 1 << max(n - 1, 0).bit_length()


@dataclass
class MR:
  key: int
  pd: int | None                # None: registered without a PD (REGISTER_MR with ALLOC_MR)
  region: rc.Region             # va (0 when zero-based), length, rc rights, page translation


@dataclass
class CQ:
  id: int
  handle: int
  events: EventRing
  cnq: L2Ring
  dpi: int
  overflow_check: bool
  armed: int = 0                # 0, DBC_DBC_TYPE_CQ_ARMALL or _ARMSE
  toggle: int = 0
  users: set = field(default_factory=set)
  fast: fastpath.CQRing | None = None     # the ring as the C datapath writes into it (completion_recipe)


@dataclass
class WQECtx:
  index: int                    # the WQE's ring position (WQE or slot)
  count: int                    # WQEs posted on this QP before it
  signaled: bool


@dataclass
class QP:
  qpn: int
  handle: int
  pd: int
  dpi: int
  variable: bool
  sq: HostRing                  # depth sq_size in doorbell units (WQEs static, slots variable)
  sq_sge: int
  rq: HostRing | None
  rq_sge: int
  scq: CQ
  rcq: CQ
  rc: rc.QP
  force_completion: bool = False
  sq_cons: int = 0              # positions, in doorbell units
  rq_cons: int = 0
  msn: int = 0                  # messages posted (the MSN table index)
  wqes: int = 0                 # WQEs posted
  done: int = 0                 # WQEs completed (sq_cons_idx)
  last_error: str = rc.OK
  tx: Any = None                # its transmit flow (txflow.TxFlow: WQEs posted in C) and the MR its SGEs name
  tx_shape: tuple = ()          # the shape of the last WQE the Python path sent as one RDMA WRITE packet

  @property
  def msn_entries(self) -> int: return pow2_ceil(self.sq.depth) // (2 if self.variable else 1)
  def msn_addr(self, m: int) -> int: return self.sq.addr(self.sq.depth * self.sq.stride + 8 * (m % self.msn_entries))


def _res_cqe(qp: QP, status: str, byte_len: int, imm: int | None, write_imm: bool, wr_id: int) -> bytes:
  """A responder completion (cq_res_rc), its toggle bit clear."""
  flags = (bnxt_hsi.CQ_RES_RC_FLAGS_IMM if imm is not None else 0) | (bnxt_hsi.CQ_RES_RC_FLAGS_RDMA_RDMA_WRITE if write_imm else 0)
  return bytes(bnxt_hsi.cq_res_rc(length=byte_len, imm_data_or_inv_r_key=imm or 0, qp_handle=qp.handle, flags=flags,
                                  status=RES_STATUS.get(status, bnxt_hsi.CQ_RES_RC_STATUS_LOCAL_QP_OPERATION_ERR),
                                  cqe_type_toggle=bnxt_hsi.CQ_BASE_CQE_TYPE_RES_RC, srq_or_rq_wr_id=wr_id))


class RoCEEngine:
  """QPs, CQs, MRs and GIDs of the function, and the rc.Host its QPs' transport calls back."""
  def __init__(self, nic: BCM57508):
    self.nic = nic
    self.clear()

  def clear(self) -> None:
    for q in getattr(self, "qps", {}).values(): self.nic.port.qps.pop(q.qpn, None)
    self.qps: dict[int, QP] = {}
    self.cqs: dict[int, CQ] = {}
    self.mrs: dict[int, MR] = {}
    self.mrw: dict[int, int] = {}                # allocated keys (ALLOCATE_MRW) -> PD
    for i in list(self.nic.port.gids): self.nic.port.delete_gid(i)
    self.gid_macs: dict[int, bytes] = {}

  # --- doorbells
  def doorbell(self, offset: int, value: int) -> None:
    lo, hi = value & 0xFFFFFFFF, value >> 32
    index, epoch, toggle = lo & bnxt_hsi.DBC_DBC_INDEX_MASK, lo >> 24 & 1, lo >> bnxt_hsi.DBC_DBC_TOGGLE_SFT & 3
    xid, path, dtype = hi & bnxt_hsi.DBC_DBC_XID_MASK, (hi & bnxt_hsi.DBC_DBC_PATH_MASK) >> bnxt_hsi.DBC_DBC_PATH_SFT, hi & bnxt_hsi.DBC_DBC_TYPE_MASK
    def bad(why: str) -> ModelError: return ModelError(f"doorbell {value:#018x} at BAR2 {offset:#x}: {why}")   # (formatted on errors only)
    if not hi & bnxt_hsi.DBC_DBC_VALID: raise bad("the VALID bit (bit 58) is clear")
    if lo >> 27 or hi & 0x00F00000: raise bad("reserved bits are set")
    l2_size = self.nic.l2_db_size
    if offset < l2_size:
      if path != bnxt_hsi.DBC_DBC_PATH_L2 >> bnxt_hsi.DBC_DBC_PATH_SFT: raise bad("the L2 doorbell area takes path L2 doorbells")
      if (ring := self.nic.hwrm.rings.get(xid)) is None: raise bad(f"no ring {xid}")
      ring.doorbell_index = index
      return
    dpi, within = divmod(offset - l2_size, DB_PAGE)
    if within: raise bad("RoCE doorbells go to offset 0 of a doorbell page")
    if path != bnxt_hsi.DBC_DBC_PATH_ROCE: raise bad(f"path {path}, RoCE doorbells have path 0 (ROCE)")
    if dtype in (bnxt_hsi.DBC_DBC_TYPE_SQ, bnxt_hsi.DBC_DBC_TYPE_RQ):
      if (qp := self.qps.get(xid)) is None or qp.dpi != dpi: raise bad(f"no QP {xid} with doorbell page {dpi}")
      return self._sq(qp, index, epoch) if dtype == bnxt_hsi.DBC_DBC_TYPE_SQ else self._rq(qp, index, epoch)
    if dtype in (bnxt_hsi.DBC_DBC_TYPE_CQ, bnxt_hsi.DBC_DBC_TYPE_CQ_ARMSE, bnxt_hsi.DBC_DBC_TYPE_CQ_ARMALL, bnxt_hsi.DBC_DBC_TYPE_CQ_ARMENA):
      if (cq := self.cqs.get(xid)) is None or cq.dpi != dpi: raise bad(f"no CQ {xid} with doorbell page {dpi}")
      cq.events.consumed(index, epoch)
      if dtype in (bnxt_hsi.DBC_DBC_TYPE_CQ_ARMALL, bnxt_hsi.DBC_DBC_TYPE_CQ_ARMSE):
        if toggle == cq.toggle: cq.armed = dtype
        else: self.nic.log(f"CQ {cq.id}: arm doorbell with toggle {toggle}, the CQ's is {cq.toggle}: stale, ignored")
      return
    if dtype in (bnxt_hsi.DBC_DBC_TYPE_NQ, bnxt_hsi.DBC_DBC_TYPE_NQ_ARM, bnxt_hsi.DBC_DBC_TYPE_NQ_MASK):
      ring = self.nic.hwrm.rings.get(xid)
      if ring is None or ring.events is None or dpi != 0: raise bad(f"no NQ ring {xid} (NQ doorbells use page 0)")
      ring.events.consumed(index, epoch)
      if dtype != bnxt_hsi.DBC_DBC_TYPE_NQ: ring.events.arm(dtype == bnxt_hsi.DBC_DBC_TYPE_NQ_ARM)
      return
    raise bad(f"doorbell type {dtype >> 28:#x} is not modelled (SQ, RQ, CQ, CQ_ARM*, NQ* are)")

  def _sq(self, qp: QP, index: int, epoch: int) -> None:
    what = f"QP {qp.qpn} SQ"
    end = doorbell_position(index, epoch, qp.sq_cons, qp.sq_cons + qp.sq.depth, qp.sq.depth, what)
    if qp.rc.state not in ("RTS", "ERR"): raise ModelError(f"{what} doorbell in state {qp.rc.state}: the QP must be in RTS")
    while qp.sq_cons < end:
      if qp.tx is not None and self._sq_c(qp, end): continue
      start = qp.sq_cons
      if qp.variable:
        head = qp.sq.read(start)
        size = head[2]
        if not 2 <= size <= qp.sq.depth or start + size > end:
          raise ModelError(f"{what}: WQE at slot {start % qp.sq.depth} has wqe_size {size}, beyond the producer {end}")
        raw = b"".join(qp.sq.read(start + j) for j in range(size))
      else:
        raw = qp.sq.read(start)
        size = 1
      qp.sq_cons += size
      self._post_wqe(qp, raw, start % qp.sq.depth)

  def _sq_c(self, qp: QP, end: int) -> int:
    """The WQEs from the consumer to `end` that the QP's transmit flow posts and sends in C (emu/nic/txflow.py): it
    stops before the first that is not the shape it was armed with or fails a check the Python path makes (those go to
    it); -> how many it took (the flow is dropped if it may not take any, or keeps missing)."""
    (f, mr), q = qp.tx, qp.rc
    if not f.usable(q) or self.mrs.get(mr.key) is not mr:
      qp.tx = None
      return 0
    c = f.c
    n = f.lib.tx_bnxt(c, qp.sq_cons, end, qp.msn & 0xFFFFFFFF, q.next_psn, q.una)   # (the table has 2^k entries)
    if not f.worth(n): qp.tx = None
    if not n: return 0
    count, force, signal = qp.wqes, qp.force_completion, bnxt_hsi.SQ_SEND_FLAGS_SIGNAL_COMP
    f.book(q, lambda at, j, flags: (WQECtx(at, count + j, bool(flags & signal) or force), True))
    qp.sq_cons, qp.wqes, qp.msn = c.pos, count + n, qp.msn + n
    return n

  def _post_wqe(self, qp: QP, raw: bytes, index: int) -> None:
    wqe_type, flags, size = raw[0], raw[1], raw[2]
    imm, length = struct.unpack_from("<II", raw, 4)
    ctx = WQECtx(index, qp.wqes, bool(flags & bnxt_hsi.SQ_SEND_FLAGS_SIGNAL_COMP) or qp.force_completion)
    qp.wqes += 1
    opcode = WQE_OPCODES.get(wqe_type)
    wr = rc.SendWR(opcode or rc.SEND, rc.Buffer(), ctx=ctx, fence=bool(flags & bnxt_hsi.SQ_SEND_FLAGS_RD_OR_ATOMIC_FENCE),
                   solicited=bool(flags & bnxt_hsi.SQ_SEND_FLAGS_SE), imm=imm if opcode in (rc.WRITE_IMM, rc.SEND_IMM) else None)
    error, why = self._decode(qp, raw, opcode, flags, size, length, wr)
    if error is None and qp.rc.state == "RTS":
      first, npkts = qp.rc.next_psn, max(1, -(-length // qp.rc.a.mtu))
      want = index << 48 | ((first + npkts) & 0xFFFFFF) << 24 | first
      got = int.from_bytes(self.nic.dma.read(qp.msn_addr(qp.msn), 8), "little")
      if got != want:
        error, why = rc.LOC_QP_OP_ERR, (f"MSN table entry {qp.msn % qp.msn_entries} is {got:#018x}, expected {want:#018x} "
                                        f"(start_idx {index}, next_psn {(first + npkts) & 0xFFFFFF:#x}, start_psn {first:#x})")
    qp.msn += 1
    if error is not None:
      self.nic.log(f"QP {qp.qpn} WQE {ctx.count} at {index}: {why}")
      wr.local_error = error
    qp.rc.post_send(wr)
    if error is None and not qp.variable and not flags & (bnxt_hsi.SQ_SEND_FLAGS_INLINE | bnxt_hsi.SQ_SEND_FLAGS_RD_OR_ATOMIC_FENCE):
      self._arm_tx(qp, raw, wr)

  def _arm_tx(self, qp: QP, raw: bytes, wr: rc.SendWR) -> None:
    """Arm the QP's transmit flow for WQEs like `raw` after the Python path posted and sent it and the one before it of
    this path was of its shape (txflow.again, then txflow.arm, say when)."""
    if not txflow.again(qp, (raw[0], raw[1] & ~bnxt_hsi.SQ_SEND_FLAGS_SIGNAL_COMP, raw[2], raw[8:12], raw[40:44])): return
    if (f := txflow.arm(TX, self.nic.port, qp.rc, wr, self.nic.dma, qp.sq.pages, qp.sq.page_size,
                        qp.sq.depth * qp.sq.stride + 8 * qp.msn_entries, qp.tx and qp.tx[0])) is None:
      return                                             # (a flow it has stays: C checks each WQE against its own shape)
    c = f.c
    c.depth, c.stride, c.msn_off, c.msn_entries = qp.sq.depth, qp.sq.stride, qp.sq.depth * qp.sq.stride, qp.msn_entries
    c.wqe_type, c.vary, c.size, c.lkey = raw[0], bnxt_hsi.SQ_SEND_FLAGS_SIGNAL_COMP, raw[2], int.from_bytes(raw[40:44], "little")
    c.flags = raw[1] & ~c.vary
    qp.tx = (f, self.mrs[c.lkey])

  def _decode(self, qp: QP, raw: bytes, opcode: str | None, flags: int, size: int, length: int, wr: rc.SendWR):
    """Fill `wr` from the WQE; (None, "") or (the error status, why)."""
    if opcode is None: return rc.LOC_QP_OP_ERR, f"wqe_type {raw[0]:#x} is not modelled"
    if size < 2 or (not qp.variable and size > STATIC_WQE // SLOT): return rc.LOC_QP_OP_ERR, f"wqe_size {size}"
    if opcode in (rc.WRITE, rc.WRITE_IMM, rc.READ): wr.remote_va, wr.rkey = struct.unpack_from("<QI", raw, 16)
    if flags & bnxt_hsi.SQ_SEND_FLAGS_INLINE:
      if opcode == rc.READ: return rc.LOC_QP_OP_ERR, "an inline RDMA READ"
      if length > (size - 2) * SLOT: return rc.LOC_LEN_ERR, f"{length} inline bytes in a WQE of {size} slots"
      data = memoryview(bytes(raw[32:32 + length]))
      wr.local = rc.Buffer([(rc.Region(0, 0, length, 0, lambda va, n: [data[va:va + n]]), 0, length)])
      return None, ""
    nsge = size - 2
    if nsge > qp.sq_sge: return rc.LOC_QP_OP_ERR, f"{nsge} SGEs, the QP was created with sq_sge {qp.sq_sge}"
    sges = [struct.unpack_from("<QII", raw, 32 + 16 * i) for i in range(nsge)]
    if sum(s[2] for s in sges) != length: return rc.LOC_LEN_ERR, f"length {length} but the SGEs hold {sum(s[2] for s in sges)} bytes"
    need = rc.LOCAL_WRITE if opcode == rc.READ else 0
    pieces = []
    for va, lkey, n in sges:
      mr = self.mrs.get(lkey)
      if mr is None or (mr.pd is not None and mr.pd != qp.pd) or not mr.region.allows(va, n, need):
        return rc.LOC_PROT_ERR, f"SGE [{va:#x}, +{n:#x}) L_Key {lkey:#x}: " + ("no such MR" if mr is None else
               f"MR [{mr.region.va:#x}, +{mr.region.length:#x}) PD {mr.pd} access {mr.region.access:#x}, QP PD {qp.pd}")
      pieces.append((mr.region, va, n))
    wr.local = rc.Buffer(pieces)
    return None, ""

  def _rq(self, qp: QP, index: int, epoch: int) -> None:
    what = f"QP {qp.qpn} RQ"
    if qp.rq is None: raise ModelError(f"{what} doorbell: the QP was created without an RQ")
    end = doorbell_position(index, epoch, qp.rq_cons, qp.rq_cons + qp.rq.depth, qp.rq.depth, what)
    if qp.rc.state == "RESET": raise ModelError(f"{what} doorbell in state RESET")
    while qp.rq_cons < end:
      raw = qp.rq.read(qp.rq_cons)
      qp.rq_cons += 1
      wr_id = int.from_bytes(raw[8:12], "little")
      wr = rc.RecvWR(rc.Buffer(), ctx=wr_id)
      nsge = raw[2] - 2
      if raw[0] != bnxt_hsi.RQ_WQE_WQE_TYPE_RCV: wr.local_error, why = rc.LOC_QP_OP_ERR, f"wqe_type {raw[0]:#x}, not RCV"
      elif not 0 <= nsge <= qp.rq_sge: wr.local_error, why = rc.LOC_QP_OP_ERR, f"wqe_size {raw[2]} with rq_sge {qp.rq_sge}"
      else:
        pieces = []
        for va, lkey, n in (struct.unpack_from("<QII", raw, 32 + 16 * i) for i in range(nsge)):
          mr = self.mrs.get(lkey)
          if mr is None or (mr.pd is not None and mr.pd != qp.pd) or not mr.region.allows(va, n, rc.LOCAL_WRITE):
            wr.local_error, why = rc.LOC_PROT_ERR, f"SGE [{va:#x}, +{n:#x}) L_Key {lkey:#x} is not in a local-writable MR of the QP's PD"
            break
          pieces.append((mr.region, va, n))
        wr.buffer = rc.Buffer(pieces)
      if wr.local_error is not None: wr.why = f"{what} WQE wr_id {wr_id:#x}: {why}"
      qp.rc.post_recv(wr)

  # --- rc.Host
  def _qp(self, q: rc.QP) -> QP: return self.qps[q.qpn]

  def transmit(self, q: rc.QP, frame: list) -> None: self.nic.port.transmit(q, frame)
  def call_later(self, delay_s: float, fn): return self.nic.port.call_later(delay_s, fn)

  def lookup_key(self, q: rc.QP, rkey: int) -> rc.Region | None:
    mr = self.mrs.get(rkey)
    if mr is None or (mr.pd is not None and mr.pd != self._qp(q).pd): return None
    return mr.region

  def completed(self, q: rc.QP, wr: rc.SendWR, status: str) -> None:
    qp = self._qp(q)
    qp.done += 1
    if status != rc.OK: qp.last_error = status
    if not (wr.ctx.signaled or status != rc.OK): return
    cqe = bnxt_hsi.cq_req(qp_handle=qp.handle, sq_cons_idx=qp.done & 0xFFFF, status=REQ_STATUS[status],
                          cqe_type_toggle=bnxt_hsi.CQ_BASE_CQE_TYPE_REQ)
    self._cqe(qp.scq, bytes(cqe), wr.solicited)

  def received(self, q: rc.QP, wr: rc.RecvWR, status: str, byte_len: int, imm: int | None, write_imm: bool) -> None:
    qp = self._qp(q)
    self._cqe(qp.rcq, _res_cqe(qp, status, byte_len, imm, write_imm, wr.ctx & bnxt_hsi.CQ_RES_RC_SRQ_OR_RQ_WR_ID_MASK), True)

  def completion_recipe(self, q: rc.QP) -> fastpath.Recipe:
    """How the C datapath writes q's receive completions of WRITEs with immediate (emu/nic/fastpath.py): the cq_res_rc
    `received` writes (imm_data at byte 4, srq_or_rq_wr_id at 28, little-endian), into the receive CQ's ring at its
    producer with the pass's toggle (byte 24 bit 0, 1 on even passes), and an armed CQ's nq_cn (its toggle at byte 0
    bits 6-7) into its CNQ, whose interrupt the model raises; the CQE a full CQ loses, or one whose notification a
    full CNQ would lose, the model writes."""
    qp = self._qp(q)
    cq = qp.rcq
    if cq.fast is None or not cq.fast.current():
      ev, nq = cq.events, cq.cnq.events
      if nq.fast is None or not nq.fast.current():
        r = nq.ring
        nq.fast = fastpath.CQRing(self.nic.dma, r.pages, r.page_size, r.depth, NQE, (8, 1, 1), (1 << 64) - 1,
                                  lambda: (nq.prod, nq.cons, False, 0), None)
      def produced(n: int, notes: int) -> None:
        ev.prod += n
        if notes:
          cq.armed, cq.toggle = 0, (cq.toggle + notes) & 3
          nq.produced(notes)
      note = bnxt_hsi.nq_cn(type=bnxt_hsi.NQ_CN_TYPE_CQ_NOTIFICATION, cq_handle_low=cq.handle & 0xFFFFFFFF, cq_handle_high=cq.handle >> 32)
      r = ev.ring
      cq.fast = fastpath.CQRing(self.nic.dma, r.pages, r.page_size, r.depth, CQE, (24, 1, 1), (1 << 64) - 1,
                                lambda: (ev.prod, ev.cons, bool(cq.armed), cq.toggle), produced,
                                notify=(nq.fast, bytes(note), (0, bnxt_hsi.NQ_CN_TOGGLE_SFT, 3)))
    return fastpath.Recipe(cq.fast, _res_cqe(qp, rc.OK, 0, 0, True, 0), 28, 4, 4, False,
                           lambda wr: wr.ctx & bnxt_hsi.CQ_RES_RC_SRQ_OR_RQ_WR_ID_MASK)

  def fatal(self, q: rc.QP, reason: str, status: str, requester: bool) -> None:
    qp = self._qp(q)
    self.nic.log(f"QP {qp.qpn} went to ERR: {reason}")
    note = bnxt_hsi.creq_qp_error_notification(type=bnxt_hsi.CREQ_QP_ERROR_NOTIFICATION_TYPE_QP_EVENT, xid=qp.qpn,
                                               event=bnxt_hsi.CREQ_QP_ERROR_NOTIFICATION_EVENT_QP_ERROR_NOTIFICATION,
                                               sq_cons_idx=qp.done & 0xFFFF, rq_cons_idx=qp.rq_cons & 0xFFFF)
    if requester: note.req_err_state_reason = getattr(bnxt_hsi, _N + "REQ_ERR_STATE_REASON_" + REQ_REASON.get(status, "REQ_CMP_ERROR"))
    else: note.res_err_state_reason = getattr(bnxt_hsi, _N + "RES_ERR_STATE_REASON_" + RES_REASON.get(status, "RES_CMP_ERROR"))
    self.nic.rcfw.event(bytes(note))

  def _cqe(self, cq: CQ, entry: bytes, solicited: bool) -> None:
    if not cq.events.push(entry):
      if not cq.overflow_check:
        cq.events.cons += 1                        # overwrite the oldest entry
        cq.events.push(entry)
      else:
        self.nic.log(f"CQ {cq.id} overflowed: the driver has not released its entries (CQ doorbell)")
        err = bnxt_hsi.creq_cq_error_notification(type=bnxt_hsi.CREQ_CQ_ERROR_NOTIFICATION_TYPE_CQ_EVENT, xid=cq.id,
                                                  cq_err_reason=bnxt_hsi.CREQ_CQ_ERROR_NOTIFICATION_CQ_ERR_REASON_REQ_CQ_OVERFLOW_ERROR,
                                                  event=bnxt_hsi.CREQ_CQ_ERROR_NOTIFICATION_EVENT_CQ_ERROR_NOTIFICATION)
        self.nic.rcfw.event(bytes(err))
        return
    if cq.armed == bnxt_hsi.DBC_DBC_TYPE_CQ_ARMALL or (cq.armed == bnxt_hsi.DBC_DBC_TYPE_CQ_ARMSE and solicited):
      cq.armed = 0
      cq.toggle = (cq.toggle + 1) & 3
      note = bnxt_hsi.nq_cn(type=bnxt_hsi.NQ_CN_TYPE_CQ_NOTIFICATION | cq.toggle << bnxt_hsi.NQ_CN_TOGGLE_SFT,
                            cq_handle_low=cq.handle & 0xFFFFFFFF, cq_handle_high=cq.handle >> 32)
      if not cq.cnq.events.push(bytes(note)): self.nic.log(f"NQ {cq.cnq.id} overflowed: CQ {cq.id}'s notification is lost")

