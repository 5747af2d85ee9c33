"""RC queue pairs: CREATE_QP, RST2INIT_QP, INIT2INIT_QP, INIT2RTR_QP, RTR2RTS_QP, RTS2RTS_QP, 2ERR_QP, 2RST_QP, DESTROY_QP (mlx5_ifc.h qpc, ads),
and the rc.Host the transport calls back (emu/nic/rc.py).

CREATE_QP: st RC, pm_state MIGRATED, an allocated PD and UAR page, existing CQs (cqn_snd, cqn_rcv), log_msg_max <= the
capability, a regular RQ (rq_type 0, log_rq_stride: 16 << stride bytes a WQE) followed in one buffer by the SQ (64-byte
WQEBBs; no_sq 0), pages of 4 KiB << log_page_size (page_offset 0) listed from byte 0x110, and an 8-byte aligned doorbell
record. A transition from the wrong state is BAD_QP_STATE_ERR. RST2INIT takes the port (primary_address_path.vhca_port_num
1), P_Key index 0 and rre/rwe (rae: atomics are not modelled), INIT2INIT the same where opt_param_mask says; INIT2RTR the MTU (256 << (mtu - 1), up to
4096),
remote_qpn, next_rcv_psn, log_rra_max (READs as responder, <= log_max_ra_res_qp), min_rnr_nak and the address path
(src_addr_index a set RoCE address, rgid_rip, rmac, hop_limit, tclass, flow_label, udp_sport), with rre/rwe/P_Key index
again only where opt_param_mask says (RRE, RWE, PKEY_INDEX; other bits are BAD_PARAM), and needs RoCE enabled (the
capability and the vport's roce_en); RTR2RTS next_send_psn, log_sra_max (<= log_max_ra_req_qp), retry_count,
rnr_retry and the path's ack_timeout, and RTS2RTS nothing more, both with rre/rwe and min_rnr_nak where
opt_param_mask says (RRE, RWE, RNR_TIMEOUT). 2ERR flushes every posted WQE with an error CQE; 2RST forgets them. A QP that
goes to ERR by itself posts a WQ_CATAS_ERROR event (qpn at data+24).
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autogen import mlx5 as mlx5_ifc, mlx5_core
from emu.nic import fastpath, rc
from emu.nic.mlx5 import CommandFailed
from emu.nic.mlx5.buffer import PagedBuffer, check_pages, page_list
from emu.nic.mlx5.cmdq import Command
from emu.nic.mlx5.cq import CQE as CQ_ENTRY, CQ
from emu.nic.mlx5.eq import EQE, EQ
from emu.nic.mlx5.pages import BAD_PARAM, BAD_STATE
from emu.nic.mlx5 import wqe
from emu.nic import roce
from emu.nic.roce import Path

if TYPE_CHECKING: from emu.nic.mlx5.cx6dx import CX6DX

PAS, BAD_QP_STATE = 0x110, mlx5_core.MLX5_CMD_STAT_BAD_QP_STATE_ERR
# the optional parameters each transition takes (opt_param_mask; others are BAD_PARAM)
OPT_INIT = mlx5_core.MLX5_QP_OPTPAR_RRE | mlx5_core.MLX5_QP_OPTPAR_RWE | mlx5_core.MLX5_QP_OPTPAR_PKEY_INDEX
OPT_RTS = mlx5_core.MLX5_QP_OPTPAR_RRE | mlx5_core.MLX5_QP_OPTPAR_RWE | mlx5_core.MLX5_QP_OPTPAR_RNR_TIMEOUT


CONSUMES_RECEIVE = frozenset(range(roce.SEND_FIRST, roce.SEND_ONLY_IMM + 1)) | {roce.WRITE_LAST_IMM, roce.WRITE_ONLY_IMM}


class TransportQP(rc.QP):
  """The transport of one mlx5 QP: receive WQEs are taken from the doorbell record when a packet needs one (a SEND, or
  the last packet of a WRITE with immediate)."""
  def receive(self, p) -> None:
    if p.opcode in CONSUMES_RECEIVE: self.host.sync(self)
    super().receive(p)

  def error(self, reason: str, status: str, requester: bool) -> None:
    if self.a.state != "ERR": self.host.sync(self)
    super().error(reason, status, requester)

  def receive_watch(self) -> tuple[memoryview, bytes]:
    """The doorbell record's receive counter, as the receive WQEs were last read at."""
    self.host.sync(self)
    qp = self.host.qps[self.qpn]
    return self.host.nic.dma.view(qp.dbr, 4), qp.rq_record


@dataclass
class QP:
  qpn: int
  pd: int
  uar: int
  scq: CQ
  rcq: CQ
  buf: PagedBuffer
  log_sq: int
  log_rq: int
  rq_stride: int
  sq_off: int
  dbr: int
  slot: tuple[int, int]
  rc: TransportQP
  log_msg_max: int = 31
  sq_cons: int = 0
  rq_cons: int = 0
  rq_record: bytes = bytes(4)   # the doorbell record's receive word when the receive WQEs were last read
  tx: Any = None                # its transmit flow (txflow.TxFlow: WQEs posted in C) and the MKey its data segments name
  tx_shape: tuple = ()          # the shape of the last WQE the Python path sent as one RDMA WRITE packet


class QPs:
  def __init__(self, nic: CX6DX):
    self.nic = nic
    for op, fn in ((mlx5_ifc.MLX5_CMD_OP_CREATE_QP, self.create), (mlx5_ifc.MLX5_CMD_OP_DESTROY_QP, self.destroy),
                   (mlx5_ifc.MLX5_CMD_OP_RST2INIT_QP, self.rst2init), (mlx5_ifc.MLX5_CMD_OP_INIT2INIT_QP, self.init2init),
                   (mlx5_ifc.MLX5_CMD_OP_INIT2RTR_QP, self.init2rtr),
                   (mlx5_ifc.MLX5_CMD_OP_RTR2RTS_QP, self.rtr2rts), (mlx5_ifc.MLX5_CMD_OP_RTS2RTS_QP, self.rts2rts),
                   (mlx5_ifc.MLX5_CMD_OP_2ERR_QP, self.to_err),
                   (mlx5_ifc.MLX5_CMD_OP_2RST_QP, self.to_rst)):
      nic.cmdq.register(op, fn)
    self.qps: dict[int, QP] = {}

  def reset(self) -> None:
    for qp in self.qps.values():
      qp.rc.modify("RESET")
      self.nic.port.qps.pop(qp.qpn, None)
    self.qps.clear()

  # --- commands
  def create(self, c: Command) -> None:
    nic, hca = self.nic, self.nic.hca
    hca.need_init("CREATE_QP")
    q = lambda n: c.get(f"qpc.{n}")
    if q("st") != mlx5_ifc.MLX5_QPC_ST_RC: raise CommandFailed(BAD_PARAM, "qp type not modelled", f"st {q('st')}: RC (0) is")
    if q("pm_state") != mlx5_ifc.MLX5_QPC_PM_STATE_MIGRATED: raise CommandFailed(BAD_PARAM, "pm_state", f"pm_state {q('pm_state')}: MIGRATED (3)")
    if q("pd") not in hca.pds: raise CommandFailed(BAD_PARAM, "no such pd", f"pd {q('pd')}")
    if q("uar_page") not in hca.uars: raise CommandFailed(BAD_PARAM, "no such uar", f"uar_page {q('uar_page')}")
    cqs = [nic.cqs.cqs.get(q(n)) for n in ("cqn_snd", "cqn_rcv")]
    if None in cqs: raise CommandFailed(BAD_PARAM, "no such cq", f"cqn_snd {q('cqn_snd')}, cqn_rcv {q('cqn_rcv')}")
    if q("log_msg_max") > hca.cap(0, "log_max_msg"): raise CommandFailed(BAD_PARAM, "log_msg_max", f"{q('log_msg_max')}")
    if q("no_sq") or q("rq_type") or q("page_offset") or c.get("wq_umem_valid") or q("dbr_umem_valid"):
      raise CommandFailed(BAD_PARAM, "qp context not modelled", "no_sq, rq_type, page_offset and the umem fields must be 0")
    log_sq, log_rq, stride = q("log_sq_size"), q("log_rq_size"), q("log_rq_stride")
    if max(log_sq, log_rq) > hca.cap(0, "log_max_qp_sz"):
      raise CommandFailed(BAD_PARAM, "qp too large", f"log_sq_size {log_sq}, log_rq_size {log_rq}")
    dbr = q("dbr_addr")
    if dbr % 8 or not dbr: raise CommandFailed(BAD_PARAM, "doorbell record alignment", f"dbr_addr {dbr:#x}")
    if len(self.qps) >= 1 << hca.cap(0, "log_max_qp"): raise CommandFailed(mlx5_core.MLX5_CMD_STAT_NO_RES_ERR, "out of qps", f"{len(self.qps)} QPs")
    page, sq_off = 4096 << q("log_page_size"), (wqe.DS << stride) << log_rq
    nbytes = sq_off + (wqe.WQEBB << log_sq)
    npages = -(-nbytes // page)
    c.need(PAS + 8 * npages, f"{npages} QP pages")
    pages = page_list(c.raw(PAS, 8 * npages), npages)
    if why := check_pages(pages, page): raise CommandFailed(BAD_PARAM, "bad page list", why)
    qpn = next(i for i in range(0x100, 1 << 24) if i not in self.qps)
    slot = nic.pages.alloc_slot(c.raw(24, 232), f"QP {qpn:#x}")
    qp = QP(qpn, q("pd"), q("uar_page"), cqs[0], cqs[1], PagedBuffer(nic.dma, pages, page, nbytes), log_sq, log_rq, stride,
            sq_off, dbr, slot, TransportQP(self, qpn), q("log_msg_max"))
    self.qps[qpn] = qp
    for cq in cqs: cq.users.add(qpn)
    nic.port.qps[qpn] = qp.rc
    c.put("qpn", qpn)

  def _qp(self, c: Command, state: str | None) -> QP:
    if (qp := self.qps.get(c.get("qpn"))) is None: raise CommandFailed(BAD_PARAM, "no such qp", f"qpn {c.get('qpn'):#x}")
    if state is not None and qp.rc.state != state:
      raise CommandFailed(BAD_QP_STATE, "bad qp state", f"QP {qp.qpn:#x} is in {qp.rc.state}, the transition starts in {state}")
    return qp

  def _opt(self, c: Command, allowed: int = OPT_INIT) -> int:
    if (m := c.get("opt_param_mask")) & ~allowed:
      raise CommandFailed(BAD_PARAM, "opt_param_mask not modelled", f"{m:#x}: this transition takes {allowed:#x}")
    return m

  def _rts_options(self, c: Command, qp: QP) -> dict:
    """RTR2RTS / RTS2RTS optional parameters: rre/rwe, min_rnr_nak."""
    opt, attrs = self._opt(c, OPT_RTS), {}
    if opt & (mlx5_core.MLX5_QP_OPTPAR_RRE | mlx5_core.MLX5_QP_OPTPAR_RWE): attrs["access"] = self._optional_access(c, opt, qp)
    if opt & mlx5_core.MLX5_QP_OPTPAR_RNR_TIMEOUT: attrs["min_rnr_timer"] = c.get("qpc.min_rnr_nak")
    return attrs

  @staticmethod
  def _access(c: Command) -> int:
    if c.get("qpc.rae"): raise CommandFailed(BAD_PARAM, "atomics not modelled", "rae must be 0")
    return rc.LOCAL_WRITE | (rc.REMOTE_READ if c.get("qpc.rre") else 0) | (rc.REMOTE_WRITE if c.get("qpc.rwe") else 0)

  @staticmethod
  def _port(c: Command, pkey: bool = True) -> None:
    a = lambda n: c.get(f"qpc.primary_address_path.{n}")
    if a("vhca_port_num") != 1: raise CommandFailed(BAD_PARAM, "bad port", f"vhca_port_num {a('vhca_port_num')}: the port is 1")
    if pkey and a("pkey_index"): raise CommandFailed(BAD_PARAM, "pkey index", f"pkey_index {a('pkey_index')}: the table has the default P_Key at 0")

  def rst2init(self, c: Command) -> None:
    qp = self._qp(c, "RESET")
    self._port(c)
    qp.rc.modify("INIT", access=self._access(c), pkey=0xFFFF)

  def init2init(self, c: Command) -> None:
    qp = self._qp(c, "INIT")
    opt = self._opt(c)
    self._port(c, bool(opt & mlx5_core.MLX5_QP_OPTPAR_PKEY_INDEX))
    if opt & (mlx5_core.MLX5_QP_OPTPAR_RRE | mlx5_core.MLX5_QP_OPTPAR_RWE): qp.rc.modify("INIT", access=self._optional_access(c, opt, qp))

  def _optional_access(self, c: Command, opt: int, qp: QP) -> int:
    """The access rights with rre / rwe taken from the context only where opt_param_mask names them."""
    acc, keep = self._access(c), qp.rc.a.access
    if not opt & mlx5_core.MLX5_QP_OPTPAR_RRE: acc = acc & ~rc.REMOTE_READ | keep & rc.REMOTE_READ
    if not opt & mlx5_core.MLX5_QP_OPTPAR_RWE: acc = acc & ~rc.REMOTE_WRITE | keep & rc.REMOTE_WRITE
    return acc

  def init2rtr(self, c: Command) -> None:
    qp, hca = self._qp(c, "INIT"), self.nic.hca
    opt = self._opt(c)
    if not (hca.roce_en and hca.cap(0, "roce")):
      raise CommandFailed(BAD_STATE, "roce disabled", "enable RoCE (SET_HCA_CAP roce, MODIFY_NIC_VPORT_CONTEXT roce_en)")
    q, a = (lambda n: c.get(f"qpc.{n}")), (lambda n: c.get(f"qpc.primary_address_path.{n}"))
    self._port(c, bool(opt & mlx5_core.MLX5_QP_OPTPAR_PKEY_INDEX))
    if not 1 <= q("mtu") <= mlx5_ifc.MLX5_QPC_MTU_4K_BYTES: raise CommandFailed(BAD_PARAM, "mtu", f"mtu {q('mtu')}: 1 (256) .. 5 (4096)")
    if q("log_rra_max") > hca.cap(0, "log_max_ra_res_qp"): raise CommandFailed(BAD_PARAM, "log_rra_max", f"{q('log_rra_max')}")
    gid = self.nic.port.gids.get(a("src_addr_index"))
    if gid is None: raise CommandFailed(BAD_PARAM, "src_addr_index unset", f"RoCE address {a('src_addr_index')} is not set (SET_ROCE_ADDRESS)")
    dgid = c.raw(c.layout.locate("qpc.primary_address_path.rgid_rip")[0] // 8, 16)
    rmac = (a("rmac_47_32") << 32 | a("rmac_31_0")).to_bytes(6, "big")
    if not any(rmac): raise CommandFailed(BAD_PARAM, "no remote mac", "rmac is 0")
    if not a("udp_sport"): raise CommandFailed(BAD_PARAM, "udp source port", "udp_sport is 0")
    try: path = Path(hca.roce_macs[a("src_addr_index")], rmac, gid, dgid, a("udp_sport"), a("hop_limit"), a("tclass"), a("flow_label"))
    except ValueError as e: raise CommandFailed(BAD_PARAM, "gid types differ", str(e)) from None
    attrs = dict(path=path, mtu=256 << (q("mtu") - 1), dest_qpn=q("remote_qpn"), rq_psn=q("next_rcv_psn"),
                 max_dest_rd_atomic=1 << q("log_rra_max"), min_rnr_timer=q("min_rnr_nak"))
    if opt & (mlx5_core.MLX5_QP_OPTPAR_RRE | mlx5_core.MLX5_QP_OPTPAR_RWE): attrs["access"] = self._optional_access(c, opt, qp)
    qp.rc.modify("RTR", **attrs)

  def rtr2rts(self, c: Command) -> None:
    qp, hca = self._qp(c, "RTR"), self.nic.hca
    attrs = self._rts_options(c, qp)
    q = lambda n: c.get(f"qpc.{n}")
    if q("log_sra_max") > hca.cap(0, "log_max_ra_req_qp"): raise CommandFailed(BAD_PARAM, "log_sra_max", f"{q('log_sra_max')}")
    qp.rc.modify("RTS", sq_psn=q("next_send_psn"), max_rd_atomic=1 << q("log_sra_max"), retry_cnt=q("retry_count"),
                 rnr_retry=q("rnr_retry"), timeout=c.get("qpc.primary_address_path.ack_timeout"), **attrs)

  def rts2rts(self, c: Command) -> None:
    qp = self._qp(c, "RTS")
    if attrs := self._rts_options(c, qp): qp.rc.modify("RTS", **attrs)

  def to_err(self, c: Command) -> None:
    qp = self._qp(c, None)
    if qp.rc.state == "RESET": raise CommandFailed(BAD_QP_STATE, "bad qp state", f"QP {qp.qpn:#x} is in RESET")
    self.sync(qp.rc)
    qp.rc.modify("ERR")

  def to_rst(self, c: Command) -> None:
    qp = self._qp(c, None)
    qp.rc.modify("RESET")
    qp.sq_cons = qp.rq_cons = 0

  def destroy(self, c: Command) -> None:
    qp = self._qp(c, None)
    qp.rc.modify("RESET")
    self.nic.port.qps.pop(qp.qpn, None)
    for cq in (qp.scq, qp.rcq): cq.users.discard(qp.qpn)
    self.nic.pages.free_slot(qp.slot)
    del self.qps[qp.qpn]

  # --- rc.Host
  def sync(self, q: rc.QP) -> None: wqe.sync_rq(self, self.qps[q.qpn])

  def transmit(self, q: rc.QP, frame) -> None:
    """To the wire; a frame to one of the port's own GIDs comes back into the port instead (the NIC's unicast local
    loopback, unless disable_uc_local_lb): the port's loopback for that frame."""
    port = self.nic.port
    if self.nic.hca.uc_lb_disabled or q.a.path.dgid not in port.own: return port.transmit(q, frame)
    port.loopback, was = True, port.loopback
    try: port.transmit(q, frame)
    finally: port.loopback = was

  def call_later(self, delay_s: float, fn): return self.nic.port.call_later(delay_s, fn)

  def lookup_key(self, q: rc.QP, rkey: int) -> rc.Region | None:
    mk = self.nic.mkeys.lookup(rkey)
    return mk.region if mk is not None and mk.pd == self.qps[q.qpn].pd else None

  def completed(self, q: rc.QP, wr: rc.SendWR, status: str) -> None:
    if status == rc.OK and not wr.ctx.signaled: return
    qp = self.qps[q.qpn]
    self.nic.cqs.push(qp.scq, wqe.req_cqe(qp, wr.ctx, status))

  def received(self, q: rc.QP, wr: rc.RecvWR, status: str, byte_len: int, imm: int | None, write_imm: bool) -> None:
    qp = self.qps[q.qpn]
    self.nic.cqs.push(qp.rcq, wqe.resp_cqe(qp, wr.ctx, status, byte_len, imm, write_imm))

  def completion_recipe(self, q: rc.QP) -> fastpath.Recipe:
    """How the C datapath writes q's receive completions of WRITEs with immediate (emu/nic/fastpath.py): the RESP_WR_IMM
    CQE `received` writes (imm at byte 36, wqe_counter at 60, big-endian) into the receive CQ at its producer with the
    pass's owner bit (byte 63 bit 0, 0 on even passes), full against the doorbell record's consumer, and an armed CQ's
    completion EQE into its EQ, whose interrupt the model raises (cq.py, eq.py); the CQE an overrun loses, or one whose
    event a full EQ would lose, the model writes."""
    qp = self.qps[q.qpn]
    cq = qp.rcq
    if cq.fast is None or not cq.fast.current():
      eq, notify = self.nic.eqs.eqs.get(cq.eqn), None
      if eq is not None:
        if eq.fast is None or not eq.fast.current():
          eq.fast = fastpath.CQRing(self.nic.dma, eq.buf.pages, eq.buf.page_size, 1 << eq.log_size, EQE, (63, 1, 0),
                                    (1 << 64) - 1, lambda: (eq.prod, eq.cons, False, 0), None)
        notify = (eq.fast, bytes(EQ.entry(mlx5_core.MLX5_EVENT_TYPE_COMP, 0, bytes(24) + cq.cqn.to_bytes(4, "big"))), (0, 0, 0))
      def produced(n: int, notes: int) -> None:
        cq.prod = (cq.prod + n) % (1 << 24)
        if notes:
          cq.armed = False
          eq.produced(notes)
      cq.fast = fastpath.CQRing(self.nic.dma, cq.buf.pages, cq.buf.page_size, 1 << cq.log_size, CQ_ENTRY, (63, 1, 0),
                                0xFFFFFF, lambda: (cq.prod, 0, cq.armed, 0), produced, consumer=cq.dbr, notify=notify)
    return fastpath.Recipe(cq.fast, bytes(wqe.resp_cqe(qp, 0, rc.OK, 0, 0, True)), 60, 2, 36, True, lambda wr: wr.ctx)

  def fatal(self, q: rc.QP, reason: str, status: str, requester: bool) -> None:
    self.nic.log(f"QP {q.qpn:#x} went to ERR: {reason}")
    self.nic.eqs.event(mlx5_core.MLX5_EVENT_TYPE_WQ_CATAS_ERROR, 0, bytes(20) + bytes([mlx5_core.MLX5_EVENT_QUEUE_TYPE_QP, 0, 0, 0]) +
                       q.qpn.to_bytes(4, "big"))
