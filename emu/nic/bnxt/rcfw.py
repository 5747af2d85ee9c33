"""The RoCE firmware channel: CMDQ in, CREQ out (roce_hsi.h cmdq_* / creq_*; kernel qplib_rcfw.c; reference rdma.md
5.6, 5.8-5.11 and 8.2).

Mailbox (BAR0 0x600, RCFW_COMM_BASE_OFFSET): cmdq_init as four 32-bit words (cmdq_pbl, cmdq_size_cmdq_lvl | creq_ring_id
<< 16, prod_idx at 0x60C); a write of 1 (RCFW_CMDQ_TRIG_VAL) to 0x700 (+RCFW_COMM_TRIG_OFFSET) runs the commands from
the firmware's consumer up to prod_idx (bits 0-15, taken modulo the CMDQ size; bits 16-30 must be 0). Bit 31
(FIRMWARE_FIRST_FLAG) on the first trigger latches the CMDQ (cmdq_pbl with level bits 0-1 and size in 16-byte slots in
bits 2-15; a level 1/2 CMDQ PBL has no ring marks) and the CREQ (creq_ring_id: an HWRM NQ ring) and resets the consumer;
a trigger before that raises ModelError. A command is cmd_size slots starting with its opcode (wrapping at the ring
end), at least its structure's size; each gets one 16-byte CREQ entry: type 0x38 (QP_EVENT), status, the command's
cookie, xid (the id it created, else 0), event = opcode, and the pass's valid bit (rings.py). Commands run
synchronously in the trigger store. A full CREQ (the driver has not released entries with NQ_ARM doorbells on its
ring) raises ModelError. Side buffers (QUERY_FUNC, QUERY_QP) go to resp_addr; resp_size (16-byte units) must hold them.

Status values (roce_hsi.h defines none; the model's, the reason in nic.log): 1 bad parameter, 2 no resource,
3 wrong state, 4 not modelled / unknown opcode.

Commands, and what each checks beyond its fields' ranges:
  QUERY_VERSION, QUERY_FUNC  any time (QUERY_FUNC reports HW_REQUESTER_RETX_ENABLED, the host MSN table, no atomics)
  INITIALIZE_FW              once; backing store committed; the QPC/MRW/SRQ/CQ/TQM/TIM page directories and counts 0
                             (context memory comes from the HWRM backing store on this chip); stat_ctx_id allocated;
                             flags HW_REQUESTER_RETX_SUPPORTED (the only retransmission scheme modelled)
  DEINITIALIZE_FW            frees QPs, CQs, MRs, GIDs
  everything below needs INITIALIZE_FW:
  CREATE_CQ / DESTROY_CQ     32-byte CQEs on a ring PBL (ring marks) of pg_size_lvl's level and page size; the CNQ an
                             HWRM NQ ring other than the CREQ; cq_fco 0; a CQ context entry; DESTROY: no QP uses it
  CREATE_QP / DESTROY_QP     RC only; qp_flags VARIABLE_SIZED_WQE_ENABLED / FORCE_COMPLETION (all WQEs signaled) and the
                             harmless ones (RESERVED_LKEY, FR_PMR, EXT_STATS, STEERING_TAG, RDMA_READ_OR_ATOMICS_USED);
                             SRQs, optimized transmit, express mode are not modelled; sq/rq fwo 0; sq_sge 1-6 (static)
                             or 1-15 (variable), rq_sge 1-6; SQ pages hold the ring and the MSN table (datapath.py), RQ
                             pages rq_size WQEs of 128 bytes (rq_size 0: no RQ); existing CQs; a doorbell page inside
                             BAR2; QP and TIM context entries. QPNs start at 2. irrq/orrq addresses are not used.
  MODIFY_QP                  transitions RESET->INIT, INIT->INIT, INIT->RTR, RTR->RTS, RTS->RTS, any->RESET, any->ERR;
                             each needs the IBA's required attributes (INIT: ACCESS, PKEY; RTR: DGID, SGID_INDEX,
                             DEST_MAC, PATH_MTU, DEST_QP_ID, RQ_PSN, MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER; RTS: TIMEOUT,
                             RETRY_CNT, RNR_RETRY, SQ_PSN, MAX_RD_ATOMIC) and takes only its optional ones (HOP_LIMIT,
                             TRAFFIC_CLASS, FLOW_LABEL, SRC_MAC at RTR; ACCESS, PKEY, MIN_RNR_TIMER where the IBA
                             allows); RTR sets RoCEv2 over IPv4 (IPv4-mapped GIDs) or IPv6: RoCEv1, VLANs, congestion
                             control, SQD/SQE and QP resizing are not modelled. dgid and dest_mac are in natural byte
                             order; path MTU 256-4096
  QUERY_QP                   state, attributes, PSNs into the side buffer
  ALLOCATE_MRW / DEALLOCATE_KEY   MR keys with a PD (mrw_flags MR)
  REGISTER_MR / DEREGISTER_MR     ALLOC_MR (a new key, no PD) or a key from ALLOCATE_MRW; log2 page size 12-30,
                             PBL level 0-2 over 4 KiB PBL pages (no ring marks); access LOCAL_WRITE, REMOTE_READ,
                             REMOTE_WRITE (which needs LOCAL_WRITE), ZERO_BASED; an MRAV context entry. Keys are
                             index << 8 | a generation byte, so a key from before a DEREGISTER_MR stops working.
  ADD_GID / DELETE_GID       the GID byte-reversed in the command, src_mac with its byte pairs swapped (both as the
                             kernel writes them); no VLAN; published on the wire (a GID another live port has: status 1)
"""
from __future__ import annotations
import ctypes
from typing import TYPE_CHECKING

from autogen import bnxt as bnxt_hsi, bnxt_re
from emu.nic import rc
from emu.nic.roce import MTUS, Path, is_ipv4_gid
from emu.nic.wire import GIDConflict
from emu.nic.bnxt.backing import PAGE_SIZES, BackingError, CQ as CQ_CTX, QP as QP_CTX, TIM, MRAV
from emu.nic.bnxt.datapath import CQ, QP, MR, MR_ACCESS, STATIC_WQE, SLOT, RQ_WQE, CQE, DB_PAGE, pow2_ceil
from emu.nic.memory import mr_region
from emu.nic.bnxt.pbl import HostRing, PBLError, walk
from emu.nic.bnxt.rings import EventRing
from emu.pci import ModelError, DMAFault

if TYPE_CHECKING: from emu.nic.bnxt.bcm57508 import BCM57508

MAILBOX, PROD_WORD, TRIGGER = (bnxt_re.RCFW_COMM_BASE_OFFSET, bnxt_re.RCFW_PF_VF_COMM_PROD_OFFSET // 4,
                               bnxt_re.RCFW_COMM_BASE_OFFSET + bnxt_re.RCFW_COMM_TRIG_OFFSET)
BAD_PARAM, NO_RESOURCE, BAD_STATE, UNSUPPORTED = 1, 2, 3, 4
MAX_GIDS, MAX_RD_ATOMIC = 256, 16
_MASK = {n[len("CMDQ_MODIFY_QP_MODIFY_MASK_"):]: v for n, v in vars(bnxt_hsi).items() if n.startswith("CMDQ_MODIFY_QP_MODIFY_MASK_")}
STATES = ("RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR")


def _bits(*names: str) -> int:
  out = 0
  for n in names: out |= _MASK[n]
  return out


# (from, to) -> (required mask bits, optional mask bits); IBA 1.4 vol 1 11.2.4.2 (Modify QP), ibv_modify_qp(3)
TRANSITIONS = {
  ("RESET", "INIT"): (_bits("STATE", "ACCESS", "PKEY"), 0),
  ("INIT", "INIT"): (0, _bits("STATE", "ACCESS", "PKEY")),
  ("INIT", "RTR"): (_bits("STATE", "DGID", "SGID_INDEX", "DEST_MAC", "PATH_MTU", "DEST_QP_ID", "RQ_PSN", "MAX_DEST_RD_ATOMIC",
                          "MIN_RNR_TIMER"), _bits("ACCESS", "PKEY", "HOP_LIMIT", "TRAFFIC_CLASS", "FLOW_LABEL", "SRC_MAC")),
  ("RTR", "RTS"): (_bits("STATE", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "SQ_PSN", "MAX_RD_ATOMIC"), _bits("ACCESS", "MIN_RNR_TIMER")),
  ("RTS", "RTS"): (0, _bits("STATE", "ACCESS", "MIN_RNR_TIMER")),
}


class RCFWError(Exception):
  def __init__(self, status: int, msg: str):
    super().__init__(msg)
    self.status = status


def _fail(msg: str, status: int = BAD_PARAM) -> RCFWError: return RCFWError(status, msg)


class RCFW:
  def __init__(self, nic: BCM57508):
    self.nic = nic
    self.mbox = [0, 0, 0, 0]
    self.handlers = {bnxt_hsi.CMDQ_BASE_OPCODE_QUERY_VERSION: self.query_version, bnxt_hsi.CMDQ_BASE_OPCODE_QUERY_FUNC: self.query_func,
                     bnxt_hsi.CMDQ_BASE_OPCODE_INITIALIZE_FW: self.initialize_fw, bnxt_hsi.CMDQ_BASE_OPCODE_DEINITIALIZE_FW: self.deinitialize_fw,
                     bnxt_hsi.CMDQ_BASE_OPCODE_CREATE_CQ: self.create_cq, bnxt_hsi.CMDQ_BASE_OPCODE_DESTROY_CQ: self.destroy_cq,
                     bnxt_hsi.CMDQ_BASE_OPCODE_CREATE_QP: self.create_qp, bnxt_hsi.CMDQ_BASE_OPCODE_DESTROY_QP: self.destroy_qp,
                     bnxt_hsi.CMDQ_BASE_OPCODE_MODIFY_QP: self.modify_qp, bnxt_hsi.CMDQ_BASE_OPCODE_QUERY_QP: self.query_qp,
                     bnxt_hsi.CMDQ_BASE_OPCODE_ALLOCATE_MRW: self.allocate_mrw, bnxt_hsi.CMDQ_BASE_OPCODE_DEALLOCATE_KEY: self.deallocate_key,
                     bnxt_hsi.CMDQ_BASE_OPCODE_REGISTER_MR: self.register_mr, bnxt_hsi.CMDQ_BASE_OPCODE_DEREGISTER_MR: self.deregister_mr,
                     bnxt_hsi.CMDQ_BASE_OPCODE_ADD_GID: self.add_gid, bnxt_hsi.CMDQ_BASE_OPCODE_DELETE_GID: self.delete_gid}
    self.names = {v: n[len("CMDQ_BASE_OPCODE_"):].lower() for n, v in vars(bnxt_hsi).items() if n.startswith("CMDQ_BASE_OPCODE_")}
    self.clear()

  def clear(self) -> None:
    if getattr(self, "creq", None) is not None: self.creq.users.discard("RCFW CREQ")
    self.cmdq: HostRing | None = None
    self.creq = None
    self.cons = 0
    self.initialized = False
    self._mr_index = 0
    self._generation: dict[int, int] = {}

  # --- the channel
  def mailbox_write(self, word: int, value: int) -> None: self.mbox[word] = value
  def mailbox_read(self, word: int) -> int: return self.mbox[word]

  def trigger(self, value: int) -> None:
    if value != bnxt_re.RCFW_CMDQ_TRIG_VAL: raise ModelError(f"CMDQ trigger {value:#x}: write RCFW_CMDQ_TRIG_VAL (1)")
    prod = self.mbox[PROD_WORD]
    if prod & 0x7FFF0000: raise ModelError(f"CMDQ producer {prod:#x}: bits 16-30 are reserved")
    if prod >> bnxt_re.FIRMWARE_FIRST_FLAG & 1: self._latch()
    elif self.cmdq is None: raise ModelError("CMDQ rung before the first command set FIRMWARE_FIRST_FLAG (bit 31 of the producer)")
    target = (prod & 0xFFFF) % self.cmdq.depth
    for _ in range(self.cmdq.depth):
      if self.cons % self.cmdq.depth == target: break
      self._command()

  def _latch(self) -> None:
    size_lvl, creq_id = self.mbox[2] & 0xFFFF, self.mbox[2] >> 16
    depth, level = (size_lvl & bnxt_hsi.CMDQ_INIT_CMDQ_SIZE_MASK) >> bnxt_hsi.CMDQ_INIT_CMDQ_SIZE_SFT, size_lvl & bnxt_hsi.CMDQ_INIT_CMDQ_LVL_MASK
    ring = self.nic.hwrm.rings.get(creq_id)
    if ring is None or ring.events is None: raise ModelError(f"cmdq_init.creq_ring_id {creq_id} is not an NQ ring allocated with HWRM_RING_ALLOC")
    base = self.mbox[0] | self.mbox[1] << 32
    try: self.cmdq = HostRing(self.nic.dma, walk(self.nic.dma, base, level, -(-depth * SLOT // 4096), what="CMDQ"), 4096, depth, SLOT, "CMDQ")
    except (PBLError, DMAFault) as e: raise ModelError(f"cmdq_init: {e}") from None
    if self.creq is not None: self.creq.users.discard("RCFW CREQ")
    self.creq, self.cons = ring, 0
    ring.users.add("RCFW CREQ")

  def _command(self) -> None:
    head = self.cmdq.read(self.cons)
    opcode, slots, cookie = head[0], head[1], int.from_bytes(head[4:6], "little")
    if not 1 <= slots <= self.cmdq.depth:
      raise ModelError(f"CMDQ slot {self.cons % self.cmdq.depth}: cmd_size {slots} (opcode {opcode:#x})")
    raw = b"".join(self.cmdq.read(self.cons + i) for i in range(slots))
    self.cons += slots
    name = self.names.get(opcode, f"opcode {opcode:#x}")
    resp = bytearray(16)
    try:
      if (fn := self.handlers.get(opcode)) is None: raise _fail("unknown or not modelled", UNSUPPORTED)
      cls = getattr(bnxt_hsi, f"cmdq_{name}")
      if len(raw) < ctypes.sizeof(cls): raise _fail(f"cmd_size {slots} is shorter than the command ({ctypes.sizeof(cls)} bytes)")
      if not self.initialized and opcode not in (bnxt_hsi.CMDQ_BASE_OPCODE_QUERY_VERSION, bnxt_hsi.CMDQ_BASE_OPCODE_QUERY_FUNC,
                                                 bnxt_hsi.CMDQ_BASE_OPCODE_INITIALIZE_FW):
        raise _fail("the RoCE firmware is not initialized (INITIALIZE_FW)", BAD_STATE)
      out = fn(cls.from_buffer_copy(raw[:ctypes.sizeof(cls)]))
      if isinstance(out, int): resp[4:8] = out.to_bytes(4, "little")
      elif out is not None: resp[:] = out
    except RCFWError as e:
      self.nic.log(f"RCFW {name.upper()} (cookie {cookie}): status {e.status}: {e}")
      resp[1] = e.status
    resp[0], resp[2:4], resp[9] = bnxt_hsi.CREQ_BASE_TYPE_QP_EVENT, cookie.to_bytes(2, "little"), opcode
    if not self.creq.events.push(resp):
      raise ModelError(f"CREQ (ring {self.creq.id}) is full: the driver has not released entries (NQ_ARM doorbell on ring {self.creq.id})")

  def event(self, entry: bytes) -> None:
    """An asynchronous event (QP/CQ error notification) to the CREQ."""
    if self.creq is None or not self.creq.events.push(entry): self.nic.log(f"CREQ event {entry.hex()} lost: no CREQ space")

  def _side_buffer(self, req, sb) -> None:
    if req.resp_size * 16 < ctypes.sizeof(sb): raise _fail(f"resp_size {req.resp_size} slots cannot hold the {ctypes.sizeof(sb)}-byte side buffer")
    try: self.nic.dma.write(req.resp_addr, bytes(sb))
    except DMAFault as e: raise _fail(f"side buffer: {e}") from None

  # --- function
  def query_version(self, req):
    resp = bnxt_hsi.creq_query_version_resp(fw_maj=230, fw_minor=0, fw_bld=168, intf_maj=1, intf_minor=10, intf_bld=3)
    return bytes(resp)

  def query_func(self, req):
    bs = self.nic.backing
    sb = bnxt_hsi.creq_query_func_resp_sb(opcode=bnxt_hsi.CMDQ_BASE_OPCODE_QUERY_FUNC, cookie=req.cookie,
                                          resp_size=ctypes.sizeof(bnxt_hsi.creq_query_func_resp_sb) // 16,
                                          max_mr_size=1 << 40, max_qp=bs.entries(QP_CTX), max_qp_wr=65535, max_cq=bs.entries(CQ_CTX),
                                          max_cqe=65536, max_pd=65536, max_sge=6, max_srq_sge=6, max_qp_rd_atom=MAX_RD_ATOMIC,
                                          max_qp_init_rd_atom=MAX_RD_ATOMIC, max_mr=bs.entries(MRAV), max_pkeys=1, max_inline_data=STATIC_WQE - 32,
                                          max_gid=MAX_GIDS, max_dpi=(self.nic.doorbell_size - self.nic.l2_db_size) // DB_PAGE, max_sge_var_wqe=15,
                                          dev_cap_flags=bnxt_hsi.CREQ_QUERY_FUNC_RESP_SB_MR_REGISTER_ALLOC |
                                          bnxt_hsi.CREQ_QUERY_FUNC_RESP_SB_HW_REQUESTER_RETX_ENABLED,
                                          dev_cap_ext_flags=bnxt_hsi.CREQ_QUERY_FUNC_RESP_SB_ATOMIC_OPS_NOT_SUPPORTED,
                                          dev_cap_ext_flags_2=bnxt_hsi.CREQ_QUERY_FUNC_RESP_SB_REQ_RETRANSMISSION_SUPPORT_HOST_MSN_TABLE)
    self._side_buffer(req, sb)
    return bytes(bnxt_hsi.creq_query_func_resp(size=ctypes.sizeof(sb) // 16))

  def initialize_fw(self, req):
    if self.initialized: raise _fail("INITIALIZE_FW twice (DEINITIALIZE_FW first)", BAD_STATE)
    if not self.nic.backing.done: raise _fail("the backing store is not committed (BS_CFG_ALL_DONE)", BAD_STATE)
    dirs = ("qpc", "mrw", "srq", "cq", "tqm", "tim")
    if any(getattr(req, f"{d}_page_dir") or getattr(req, f"{d}_pg_size_{d}_lvl") for d in dirs) or \
       any(getattr(req, f"number_of_{d}") for d in ("qp", "mrw", "srq", "cq")):
      raise _fail("context page directories and counts must be 0: this chip's context memory is the HWRM backing store")
    if req.stat_ctx_id not in self.nic.hwrm.stat_ctxs: raise _fail(f"stat_ctx_id {req.stat_ctx_id} is not allocated")
    if req.flags != bnxt_hsi.CMDQ_INITIALIZE_FW_FLAGS_HW_REQUESTER_RETX_SUPPORTED:
      raise _fail(f"flags {req.flags:#x}: the model implements hardware requester retransmission with the host MSN table "
                  "only (HW_REQUESTER_RETX_SUPPORTED, 0x2)", UNSUPPORTED)
    self.initialized = True

  def deinitialize_fw(self, req):
    self.nic.roce.clear()
    self.initialized = False

  # --- CQs
  def create_cq(self, req):
    roce = self.nic.roce
    if req.flags & ~bnxt_hsi.CMDQ_CREATE_CQ_FLAGS_DISABLE_CQ_OVERFLOW_DETECTION & ~bnxt_hsi.CMDQ_CREATE_CQ_FLAGS_STEERING_TAG_VALID:
      raise _fail(f"flags {req.flags:#x}: infinite CQ mode is not modelled", UNSUPPORTED)
    level, psize = req.pg_size_lvl & bnxt_hsi.CMDQ_CREATE_CQ_LVL_MASK, PAGE_SIZES.get((req.pg_size_lvl & bnxt_hsi.CMDQ_CREATE_CQ_PG_SIZE_MASK) >> 2)
    if psize is None or req.pg_size_lvl >> 5: raise _fail(f"pg_size_lvl {req.pg_size_lvl:#x}")
    if req.cq_fco_cnq_id >> 12: raise _fail(f"cq_fco {req.cq_fco_cnq_id >> 12}: a first-CQE offset is not modelled", UNSUPPORTED)
    cnq = self.nic.hwrm.rings.get(req.cq_fco_cnq_id & bnxt_hsi.CMDQ_CREATE_CQ_CNQ_ID_MASK)
    if cnq is None or cnq.events is None or cnq is self.creq: raise _fail(f"cnq_id {req.cq_fco_cnq_id & 0xFFF} is not an NQ ring (the CREQ is none)")
    if not 1 <= req.cq_size <= 65536: raise _fail(f"cq_size {req.cq_size}")
    self._dpi(req.dpi)
    cid = next(i for i in range(len(roce.cqs) + 1) if i not in roce.cqs)
    self._touch(CQ_CTX, cid)
    ring = self._ring(req.pbl, level, psize, req.cq_size, CQE, f"CQ {cid}")
    cq = roce.cqs[cid] = CQ(cid, req.cq_handle, EventRing(ring, 24), cnq, req.dpi,
                            not req.flags & bnxt_hsi.CMDQ_CREATE_CQ_FLAGS_DISABLE_CQ_OVERFLOW_DETECTION)
    cnq.users.add(f"CQ {cq.id}")
    return cid

  def destroy_cq(self, req):
    cq = self._cq(req.cq_cid)
    if cq.users: raise _fail(f"CQ {cq.id} is used by QP {', '.join(map(str, sorted(cq.users)))}", BAD_STATE)
    cq.cnq.users.discard(f"CQ {cq.id}")
    del self.nic.roce.cqs[cq.id]

  def _cq(self, cid: int) -> CQ:
    if (cq := self.nic.roce.cqs.get(cid)) is None: raise _fail(f"no CQ {cid}")
    return cq

  def _dpi(self, dpi: int) -> None:
    if self.nic.l2_db_size + (dpi + 1) * DB_PAGE > self.nic.doorbell_size: raise _fail(f"dpi {dpi}: BAR2 has no such doorbell page")

  def _touch(self, type_: int, index: int) -> None:
    try: self.nic.backing.touch(type_, index)
    except BackingError as e: raise _fail(str(e), NO_RESOURCE) from None

  def _ring(self, base: int, level: int, psize: int, depth: int, stride: int, what: str, extra: int = 0) -> HostRing:
    try: return HostRing(self.nic.dma, walk(self.nic.dma, base, level, -(-(depth * stride + extra) // psize), psize, True, what),
                         psize, depth, stride, what)
    except (PBLError, DMAFault) as e: raise _fail(str(e)) from None

  # --- QPs
  def create_qp(self, req):
    roce = self.nic.roce
    if req.type != bnxt_hsi.CMDQ_CREATE_QP_TYPE_RC: raise _fail(f"QP type {req.type}: only RC is modelled", UNSUPPORTED)
    ok = (bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_VARIABLE_SIZED_WQE_ENABLED | bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_FORCE_COMPLETION |
          bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_RESERVED_LKEY_ENABLE | bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_FR_PMR_ENABLED |
          bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_EXT_STATS_ENABLED | bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_STEERING_TAG_VALID |
          bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_RDMA_READ_OR_ATOMICS_USED)
    if req.qp_flags & ~ok: raise _fail(f"qp_flags {req.qp_flags:#x}: SRQs, optimized transmit and express mode are not modelled", UNSUPPORTED)
    variable = bool(req.qp_flags & bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_VARIABLE_SIZED_WQE_ENABLED)
    sq_sge, rq_sge = req.sq_fwo_sq_sge & bnxt_hsi.CMDQ_CREATE_QP_SQ_SGE_MASK, req.rq_fwo_rq_sge & bnxt_hsi.CMDQ_CREATE_QP_RQ_SGE_MASK
    if req.sq_fwo_sq_sge >> 4 or req.rq_fwo_rq_sge >> 4: raise _fail("a first-WQE offset (sq/rq fwo) is not modelled", UNSUPPORTED)
    if not 1 <= sq_sge <= (15 if variable else 6): raise _fail(f"sq_sge {sq_sge}")
    if not 1 <= req.sq_size <= 65536: raise _fail(f"sq_size {req.sq_size}")
    scq, rcq = self._cq(req.scq_cid), self._cq(req.rcq_cid)
    self._dpi(req.dpi)
    qpn = next((i for i in range(2, self.nic.backing.entries(QP_CTX)) if i not in roce.qps), None)
    if qpn is None: raise _fail(f"all {self.nic.backing.entries(QP_CTX)} QP contexts are in use", NO_RESOURCE)
    self._touch(QP_CTX, qpn)
    self._touch(TIM, qpn)
    stride = SLOT if variable else STATIC_WQE
    msn = pow2_ceil(req.sq_size) // (2 if variable else 1)
    sq = self._ring(req.sq_pbl, req.sq_pg_size_sq_lvl & 0xF, self._psize(req.sq_pg_size_sq_lvl), req.sq_size, stride,
                    f"QP {qpn} SQ", extra=8 * msn)
    rq = None
    if req.rq_size:
      if not 1 <= rq_sge <= 6: raise _fail(f"rq_sge {rq_sge}")
      rq = self._ring(req.rq_pbl, req.rq_pg_size_rq_lvl & 0xF, self._psize(req.rq_pg_size_rq_lvl), req.rq_size, RQ_WQE, f"QP {qpn} RQ")
    qp = roce.qps[qpn] = QP(qpn, req.qp_handle, req.pd_id, req.dpi, variable, sq, sq_sge, rq, rq_sge, scq, rcq, rc.QP(roce, qpn),
                            force_completion=bool(req.qp_flags & bnxt_hsi.CMDQ_CREATE_QP_QP_FLAGS_FORCE_COMPLETION))
    self.nic.port.qps[qpn] = qp.rc
    scq.users.add(qpn)
    rcq.users.add(qpn)
    return qpn

  @staticmethod
  def _psize(pg_size_lvl: int) -> int:
    if (p := PAGE_SIZES.get(pg_size_lvl >> 4)) is None: raise _fail(f"page size code {pg_size_lvl >> 4}")
    return p

  def _qp(self, qpn: int) -> QP:
    if (qp := self.nic.roce.qps.get(qpn)) is None: raise _fail(f"no QP {qpn}")
    return qp

  def destroy_qp(self, req):
    qp = self._qp(req.qp_cid)
    qp.rc.modify("RESET")
    self.nic.port.qps.pop(qp.qpn, None)
    qp.scq.users.discard(qp.qpn)
    qp.rcq.users.discard(qp.qpn)
    del self.nic.roce.qps[qp.qpn]

  def modify_qp(self, req):
    qp = self._qp(req.qp_cid)
    mask, byte = req.modify_mask, req.network_type_en_sqd_async_notify_new_state
    cur, new = qp.rc.state, qp.rc.state
    if mask & _MASK["STATE"]:
      if (byte & 0xF) >= len(STATES): raise _fail(f"new_state {byte & 0xF}")
      new = STATES[byte & 0xF]
    if req.qp_type not in (0, bnxt_hsi.CMDQ_MODIFY_QP_QP_TYPE_RC): raise _fail(f"qp_type {req.qp_type}: QP {qp.qpn} is RC")
    if req.ext_modify_mask: raise _fail(f"ext_modify_mask {req.ext_modify_mask:#x}: not modelled", UNSUPPORTED)
    if new in ("RESET", "ERR"):
      if mask & ~_MASK["STATE"]: raise _fail(f"{cur}->{new} takes no attributes (mask {mask:#x})")
      return qp.rc.modify(new)
    if (cur, new) not in TRANSITIONS:
      raise _fail(f"{cur}->{new} is not a modelled transition", BAD_STATE if new not in ("SQD", "SQE") else UNSUPPORTED)
    required, optional = TRANSITIONS[(cur, new)]
    names = lambda m: ", ".join(n for n, v in _MASK.items() if m & v)
    if (missing := required & ~mask): raise _fail(f"{cur}->{new} needs {names(missing)}")
    if (extra := mask & ~required & ~optional): raise _fail(f"{cur}->{new} does not take {names(extra)}")
    attrs = {}
    if mask & _MASK["ACCESS"]:
      if req.access & ~0xF: raise _fail(f"access {req.access:#x}")
      if req.access & rc.REMOTE_ATOMIC: raise _fail("remote atomic access: atomics are not modelled", UNSUPPORTED)
      attrs["access"] = req.access           # LOCAL_WRITE 1, REMOTE_WRITE 2, REMOTE_READ 4: the IB verbs bits
    if mask & _MASK["PKEY"]:
      if not req.pkey & 0x7FFF: raise _fail(f"P_Key {req.pkey:#x} is invalid")
      attrs["pkey"] = req.pkey
    if new == "RTR": self._rtr(qp, req, mask, attrs)
    if mask & _MASK["MIN_RNR_TIMER"]: attrs["min_rnr_timer"] = self._range("min_rnr_timer", req.min_rnr_timer, 31)
    if new == "RTS" and cur == "RTR":
      attrs.update(timeout=self._range("timeout", req.timeout, 31), retry_cnt=self._range("retry_cnt", req.retry_cnt, 7),
                   rnr_retry=self._range("rnr_retry", req.rnr_retry, 7), sq_psn=self._range("sq_psn", req.sq_psn, 0xFFFFFF),
                   max_rd_atomic=self._range("max_rd_atomic", req.max_rd_atomic, MAX_RD_ATOMIC))
    qp.rc.modify(new, **attrs)

  @staticmethod
  def _range(name: str, v: int, top: int) -> int:
    if not 0 <= v <= top: raise _fail(f"{name} {v} is outside 0-{top}")
    return v

  def _rtr(self, qp: QP, req, mask: int, attrs: dict) -> None:
    net = req.network_type_en_sqd_async_notify_new_state & bnxt_hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_MASK
    if net not in (bnxt_hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4, bnxt_hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV6):
      raise _fail(f"network type {net >> 6}: RoCEv1 is not modelled (RoCEv2 over IPv4 or IPv6 is)", UNSUPPORTED)
    if (sgid := self.nic.port.gids.get(req.sgid_index)) is None: raise _fail(f"sgid_index {req.sgid_index} has no GID")
    dgid = bytes(req.dgid)
    v4 = net == bnxt_hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4
    if is_ipv4_gid(sgid) != v4 or is_ipv4_gid(dgid) != v4:
      raise _fail(f"network type RoCEv2-{'IPv4' if v4 else 'IPv6'} with source GID {sgid.hex()} and destination GID {dgid.hex()}")
    code = req.path_mtu_pingpong_push_enable >> 4
    if code >= len(MTUS) or req.path_mtu_pingpong_push_enable & 0xF:
      raise _fail(f"path_mtu_pingpong_push_enable {req.path_mtu_pingpong_push_enable:#x}: path MTU 256-4096, no push")
    src_mac = bytes(req.src_mac) if mask & _MASK["SRC_MAC"] else self.nic.roce.gid_macs[req.sgid_index]
    flow = req.flow_label if mask & _MASK["FLOW_LABEL"] else 0
    if flow >> 20: raise _fail(f"flow_label {flow:#x} has more than 20 bits")
    path = Path(src_mac, bytes(req.dest_mac), sgid, dgid, 0xC000 | (qp.qpn & 0x3FFF),
                req.hop_limit if mask & _MASK["HOP_LIMIT"] else 64, req.traffic_class if mask & _MASK["TRAFFIC_CLASS"] else 0, flow)
    attrs.update(path=path, mtu=MTUS[code], dest_qpn=self._range("dest_qp_id", req.dest_qp_id, 0xFFFFFF),
                 rq_psn=self._range("rq_psn", req.rq_psn, 0xFFFFFF),
                 max_dest_rd_atomic=self._range("max_dest_rd_atomic", req.max_dest_rd_atomic, MAX_RD_ATOMIC))

  def query_qp(self, req):
    qp = self._qp(req.qp_cid)
    a, path = qp.rc.a, qp.rc.a.path
    sb = bnxt_hsi.creq_query_qp_resp_sb(opcode=bnxt_hsi.CMDQ_BASE_OPCODE_QUERY_QP, cookie=req.cookie,
                                        resp_size=ctypes.sizeof(bnxt_hsi.creq_query_qp_resp_sb) // 16,
                                        xid=qp.qpn, en_sqd_async_notify_state=STATES.index(a.state), access=a.access, pkey=a.pkey,
                                        timeout=a.timeout, retry_cnt=a.retry_cnt, rnr_retry=a.rnr_retry, min_rnr_timer=a.min_rnr_timer,
                                        rq_psn=qp.rc.epsn, sq_psn=qp.rc.next_psn, max_rd_atomic=a.max_rd_atomic,
                                        max_dest_rd_atomic=a.max_dest_rd_atomic, sq_size=qp.sq.depth, rq_size=qp.rq.depth if qp.rq else 0,
                                        sq_sge=qp.sq_sge, rq_sge=qp.rq_sge, dest_qp_id=a.dest_qpn,
                                        path_mtu_dest_vlan_id=MTUS.index(a.mtu) << bnxt_hsi.CREQ_QUERY_QP_RESP_SB_PATH_MTU_SFT)
    if path is not None:
      ctypes.memmove(ctypes.addressof(sb) + bnxt_hsi.creq_query_qp_resp_sb.dgid.offset, path.dgid, 16)
      ctypes.memmove(ctypes.addressof(sb) + bnxt_hsi.creq_query_qp_resp_sb.dest_mac.offset, path.dst_mac, 6)
      ctypes.memmove(ctypes.addressof(sb) + bnxt_hsi.creq_query_qp_resp_sb.src_mac.offset, path.src_mac, 6)
      sb.hop_limit, sb.traffic_class, sb.flow_label = path.hop_limit, path.traffic_class, path.flow_label
      sb.sgid_index = next((i for i, g in self.nic.port.gids.items() if g == path.sgid), 0)
    self._side_buffer(req, sb)
    return bytes(bnxt_hsi.creq_query_qp_resp(size=ctypes.sizeof(sb) // 16))

  # --- memory
  def _key(self) -> int:
    """A new key: an MRAV context index (checked) << 8 | its generation."""
    used = {k >> 8 for k in (*self.nic.roce.mrs, *self.nic.roce.mrw)}
    index = next(i for i in range(len(used) + 1) if i not in used)
    self._touch(MRAV, index)
    self._generation[index] = gen = (self._generation.get(index, 0) + 1) & 0xFF
    return index << 8 | gen

  def allocate_mrw(self, req):
    if req.mrw_flags & bnxt_hsi.CMDQ_ALLOCATE_MRW_MRW_FLAGS_MASK != bnxt_hsi.CMDQ_ALLOCATE_MRW_MRW_FLAGS_MR:
      raise _fail(f"mrw_flags {req.mrw_flags:#x}: memory windows and physical MRs are not modelled", UNSUPPORTED)
    key = self._key()
    self.nic.roce.mrw[key] = req.pd_id
    return key

  def deallocate_key(self, req):
    if self.nic.roce.mrw.pop(req.key, None) is None: raise _fail(f"key {req.key:#x} was not allocated (ALLOCATE_MRW)")
    self.nic.roce.mrs.pop(req.key, None)

  def register_mr(self, req):
    roce = self.nic.roce
    if req.flags & ~(bnxt_hsi.CMDQ_REGISTER_MR_FLAGS_ALLOC_MR | bnxt_hsi.CMDQ_REGISTER_MR_FLAGS_STEERING_TAG_VALID |
                     bnxt_hsi.CMDQ_REGISTER_MR_FLAGS_ENABLE_RO):
      raise _fail(f"flags {req.flags:#x}")
    level, log2 = req.log2_pg_size_lvl & bnxt_hsi.CMDQ_REGISTER_MR_LVL_MASK, (req.log2_pg_size_lvl & bnxt_hsi.CMDQ_REGISTER_MR_LOG2_PG_SIZE_MASK) >> 2
    if not 12 <= log2 <= 30 or req.log2_pg_size_lvl & 0x80: raise _fail(f"log2_pg_size_lvl {req.log2_pg_size_lvl:#x}: page sizes 4 KiB - 1 GiB")
    if level and req.log2_pbl_pg_size != 12: raise _fail(f"log2_pbl_pg_size {req.log2_pbl_pg_size}: PBL pages are 4 KiB (12)")
    ok = (bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE | bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_READ |
          bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE | bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_ZERO_BASED)
    if req.access & ~ok: raise _fail(f"access {req.access:#x}: atomics and memory windows are not modelled", UNSUPPORTED)
    if req.access & bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE and not req.access & bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE:
      raise _fail("REMOTE_WRITE needs LOCAL_WRITE (IBA C10-93)")
    if not 1 <= req.mr_size <= 1 << 40: raise _fail(f"mr_size {req.mr_size}")
    if req.flags & bnxt_hsi.CMDQ_REGISTER_MR_FLAGS_ALLOC_MR: key, pd = self._key(), None
    elif (pd := roce.mrw.get(req.key)) is None or req.key in roce.mrs: raise _fail(f"key {req.key:#x}: not allocated, or already registered")
    else: key = req.key
    psize = 1 << log2
    first = req.va % psize
    try: pages = walk(self.nic.dma, req.pbl, level, -(-(first + req.mr_size) // psize), psize, False, f"MR {key:#x}")
    except (PBLError, DMAFault) as e: raise _fail(str(e)) from None
    access = sum(r for bit, r in MR_ACCESS if req.access & bit)
    va = 0 if req.access & bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_ZERO_BASED else req.va
    roce.mrs[key] = MR(key, pd, mr_region(self.nic.dma, key, va, req.mr_size, access, pages, psize, first))
    return key

  def deregister_mr(self, req):
    if self.nic.roce.mrs.pop(req.lkey, None) is None: raise _fail(f"no MR with key {req.lkey:#x}")

  # --- GIDs
  def add_gid(self, req):
    roce, raw = self.nic.roce, bytes(req)
    gid = raw[16:32][::-1]
    mac = bytes((raw[33], raw[32], raw[35], raw[34], raw[37], raw[36]))
    if req.vlan & bnxt_hsi.CMDQ_ADD_GID_VLAN_VLAN_EN: raise _fail("VLANs are not modelled", UNSUPPORTED)
    index = next((i for i in range(MAX_GIDS) if i not in self.nic.port.gids), None)
    if index is None: raise _fail(f"the GID table has {MAX_GIDS} entries", NO_RESOURCE)
    try: self.nic.port.add_gid(index, gid)
    except GIDConflict as e: raise _fail(str(e)) from None
    roce.gid_macs[index] = mac
    return index

  def delete_gid(self, req):
    if req.gid_index not in self.nic.port.gids: raise _fail(f"no GID at index {req.gid_index}")
    self.nic.port.delete_gid(req.gid_index)
    self.nic.roce.gid_macs.pop(req.gid_index, None)
