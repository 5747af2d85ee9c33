"""RC queue pairs: CREATE_QP and the transitions, send and receive WQEs, doorbells, and the completions they produce
(include/linux/mlx5/qp.h mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg, mlx5_wqe_data_seg).

One buffer holds the receive queue (WQEs of 16 << log_rq_stride bytes: data segments, ended by lkey 0x100 when shorter)
and, after it, the send queue (64-byte WQEBBs; a WQE is a ctrl segment, a raddr segment for RDMA, then data segments;
a drivers.hcq Ring whose read pointer moves as send completions retire WQEs).
Posting writes the WQEs, the producer counters into the doorbell record (word 0 receive, word 1 send, big-endian) and,
for sends, the last WQE's first 8 bytes to the UAR's send doorbell (0x800 and 0x900 in turn), followed by the rest of
the WQE when it is the only one and fits the register (BlueFlame). A CQE names its WQE by wqe_counter (the WQE's
first WQEBB index, 16 bits); drivers/rdma's WorkRequests matches it to the request and drops the NIC's flush CQEs for
requests the verbs layer has flushed.
"""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING

from autogen import mlx5 as mlx5_ifc, mlx5_core
from drivers.hcq.ring import Ring
from drivers.mlx5.ifc import SYNDROMES
from drivers.mlx5.cq import CQE, DBR_WORD
from drivers.rdma.provider import Completion, DevicePost, WorkRequests
from drivers.rdma.verbs import (Access, IMM_OPS, QPAttr, QPAttrMask as M, QPCap, QPState, RDMA_OPS, RecvWR, SendFlags, SendWR,
                                VerbsError, WCOpcode, WCStatus as W, WROpcode)
if TYPE_CHECKING:
  from drivers.mlx5.cq import CQ
  from drivers.mlx5.device import MLX5Device

WQEBB, DS, MAX_SGE, INVALID_LKEY = mlx5_core.MLX5_SEND_WQE_BB, mlx5_core.MLX5_SEND_WQE_DS, 8, 0x100
BF_SIZE = 0x100                             # a doorbell / BlueFlame register (log_bf_reg_size 9: two per UAR page)
BF = (mlx5_core.MLX5_BF_OFFSET, mlx5_core.MLX5_BF_OFFSET + BF_SIZE)
OPCODE = {WROpcode.RDMA_WRITE: mlx5_core.MLX5_OPCODE_RDMA_WRITE, WROpcode.RDMA_WRITE_WITH_IMM: mlx5_core.MLX5_OPCODE_RDMA_WRITE_IMM,
          WROpcode.SEND: mlx5_core.MLX5_OPCODE_SEND, WROpcode.SEND_WITH_IMM: mlx5_core.MLX5_OPCODE_SEND_IMM,
          WROpcode.RDMA_READ: mlx5_core.MLX5_OPCODE_RDMA_READ}
SYNDROME_WC = {mlx5_core.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR: W.LOC_LEN_ERR, mlx5_core.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR: W.LOC_QP_OP_ERR,
               mlx5_core.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR: W.LOC_PROT_ERR, mlx5_core.MLX5_CQE_SYNDROME_WR_FLUSH_ERR: W.WR_FLUSH_ERR,
               mlx5_core.MLX5_CQE_SYNDROME_BAD_RESP_ERR: W.BAD_RESP_ERR, mlx5_core.MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR: W.LOC_ACCESS_ERR,
               mlx5_core.MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR: W.REM_INV_REQ_ERR, mlx5_core.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR: W.REM_ACCESS_ERR,
               mlx5_core.MLX5_CQE_SYNDROME_REMOTE_OP_ERR: W.REM_OP_ERR, mlx5_core.MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR: W.RETRY_EXC_ERR,
               mlx5_core.MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR: W.RNR_RETRY_EXC_ERR}
SUCCESS, RECV, RECV_RDMA_WITH_IMM = W.SUCCESS, WCOpcode.RECV, WCOpcode.RECV_RDMA_WITH_IMM   # (enum members, looked up once)
MTU_CODE = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
# SendFlags (each of the 8 combinations) -> the control segment's fm_ce_se byte
FM_CE_SE = [(mlx5_core.MLX5_WQE_CTRL_CQ_UPDATE if f & SendFlags.SIGNALED else 0) |
            (mlx5_core.MLX5_WQE_CTRL_SOLICITED if f & SendFlags.SOLICITED else 0) |
            (mlx5_core.MLX5_FENCE_MODE_FENCE if f & SendFlags.FENCE else 0) for f in map(SendFlags, range(8))]


def _log2(n: int) -> int: return max(n - 1, 0).bit_length()


def udp_sport(lqpn: int, rqpn: int) -> int:
  """The RoCEv2 UDP source port of a flow (the kernel's rdma_flow_label_to_udp_sport of the
  flow label made from both QPNs): in 0xC000-0xFFFF."""
  v = lqpn * rqpn
  v = (v ^ v >> 20 ^ v >> 40) & 0xFFFFF
  return (v & 0x3FFF) ^ ((v & 0xFC000) >> 14) | 0xC000


def data_seg(length: int, lkey: int, addr: int) -> bytes:
  return length.to_bytes(4, "big") + lkey.to_bytes(4, "big") + addr.to_bytes(8, "big")


def wqe_struct(rdma: bool, segs: int) -> struct.Struct:
  """A send WQE in whole WQEBBs, big-endian: mlx5_wqe_ctrl_seg (opmod_idx_opcode, qpn_ds, signature and two reserved
  bytes, fm_ce_se, imm), mlx5_wqe_raddr_seg for RDMA (raddr, rkey, reserved), `segs` mlx5_wqe_data_seg (byte_count,
  lkey, addr), zeros to the end of the last WQEBB (struct packs pad bytes as zeros)."""
  fmt = ">II3xBI" + ("QI4x" if rdma else "") + "IIQ" * segs
  size = struct.calcsize(fmt)
  return struct.Struct(fmt + "x" * (-size % WQEBB))


# (RDMA, data segments) -> the WQE's struct
WQE_STRUCTS = {(rdma, n): wqe_struct(rdma, n) for rdma in (False, True) for n in range(MAX_SGE + 1)}
# 64-bit stores to the doorbell: its first 8 bytes, or a BlueFlame copy of a WQE of 1 to BF_SIZE / WQEBB WQEBBs
BF_WORDS = {n: struct.Struct(f"<{n}Q") for n in (1, *range(WQEBB // 8, BF_SIZE // 8 + 1, WQEBB // 8))}


class QP:
  def __init__(self, dev: MLX5Device, pd: int, send_cq: CQ, recv_cq: CQ, cap: QPCap):
    if max(cap.max_send_sge, cap.max_recv_sge) > MAX_SGE: raise ValueError(f"a WQE here holds at most {MAX_SGE} SGEs")
    self.dev, self.pd, self.qp_num = dev, pd, 0
    self.wqebbs = -(-(2 + cap.max_send_sge) // (WQEBB // DS))        # the largest WQE
    self.log_sq, self.log_rq = max(_log2(cap.max_send_wr * self.wqebbs), 4), max(_log2(cap.max_recv_wr), 4)
    self.rq_stride = _log2(max(cap.max_recv_sge, 1))
    self.sq_off = (DS << self.rq_stride) << self.log_rq
    sq_bytes = WQEBB << self.log_sq
    self.mem = dev.pci.alloc_dma(self.sq_off + sq_bytes)
    self.dbr = dev.alloc_dbr()
    # the send queue: a Ring of WQEBBs (a WQE may wrap), read as far as the WQEs completions retired
    self.sq = Ring(dev, "SQ", self.mem.view[self.sq_off:self.sq_off + sq_bytes], None, None, self._ring_sq, unit=WQEBB)
    self.rq_pi = self.bf = 0
    self.bf_words: list[int] = []            # what the next send doorbell stores (_ring_sq)
    self.wrs = WorkRequests(dev.name, self)                  # (WQE index & 0xFFFF, sequence number[, SQ: the producer after it])
    self.cqs = (send_cq, recv_cq)
    self.blueflame = bool(dev._cap("bf"))     # the HCA takes BlueFlame copies (HCA capability bf)
    try:
      self.qp_num = dev.cmd(mlx5_ifc.MLX5_CMD_OP_CREATE_QP, self._base() | {
        "qpc.log_msg_max": dev._cap("log_max_msg"), "qpc.log_rq_size": self.log_rq, "qpc.log_rq_stride": self.rq_stride,
        "qpc.log_sq_size": self.log_sq, "qpc.uar_page": dev.uar, "qpc.dbr_addr": dev.dbr.bus_addr(self.dbr)},
        payload=b"".join(a.to_bytes(8, "big") for a in self.mem.bus_addrs)).get("qpn")
    except BaseException:
      self._free()
      raise
    dev.qps[self.qp_num] = self

  def _base(self) -> dict[str, int]:
    """What every QP command carries again (the kernel's mlx5_ib does the same)."""
    return {"qpc.st": mlx5_ifc.MLX5_QPC_ST_RC, "qpc.pm_state": mlx5_ifc.MLX5_QPC_PM_STATE_MIGRATED, "qpc.pd": self.pd,
            "qpc.cqn_snd": self.cqs[0].cqn, "qpc.cqn_rcv": self.cqs[1].cqn}

  # --- state
  def modify(self, cur: QPState, new: QPState, attr: QPAttr, mask: M) -> None:
    dev, p = self.dev, "qpc.primary_address_path."
    f = self._base() | {f"{p}vhca_port_num": 1}
    acc = attr.qp_access_flags if mask & M.ACCESS_FLAGS else 0
    access = {"qpc.rre": int(bool(acc & Access.REMOTE_READ)), "qpc.rwe": int(bool(acc & Access.REMOTE_WRITE))}
    if new == QPState.ERR:
      self.wrs.modified(new)
      return self._cmd(mlx5_ifc.MLX5_CMD_OP_2ERR_QP, {})
    if new == QPState.RESET:
      self._cmd(mlx5_ifc.MLX5_CMD_OP_2RST_QP, {})
      self.wrs.modified(new)
      self.sq.reset()
      self.rq_pi = 0
      dev.dbr.view[self.dbr:self.dbr + 8] = bytes(8)
      return
    if (cur, new) == (QPState.RESET, QPState.INIT): return self._cmd(mlx5_ifc.MLX5_CMD_OP_RST2INIT_QP, f | access)
    if (cur, new) == (QPState.INIT, QPState.INIT):
      opt = (mlx5_core.MLX5_QP_OPTPAR_RRE | mlx5_core.MLX5_QP_OPTPAR_RWE if mask & M.ACCESS_FLAGS else 0) | \
            (mlx5_core.MLX5_QP_OPTPAR_PKEY_INDEX if mask & M.PKEY_INDEX else 0)
      return self._cmd(mlx5_ifc.MLX5_CMD_OP_INIT2INIT_QP, f | access | {"opt_param_mask": opt})
    if (cur, new) == (QPState.INIT, QPState.RTR):
      ah = attr.ah_attr
      rmac = int.from_bytes(ah.dmac, "big")
      f |= {"qpc.mtu": MTU_CODE[attr.path_mtu], "qpc.log_msg_max": dev._cap("log_max_msg"), "qpc.remote_qpn": attr.dest_qp_num,
            "qpc.next_rcv_psn": attr.rq_psn, "qpc.log_rra_max": _log2(max(attr.max_dest_rd_atomic, 1)),
            "qpc.min_rnr_nak": attr.min_rnr_timer, f"{p}src_addr_index": ah.sgid_index, f"{p}hop_limit": ah.hop_limit,
            f"{p}tclass": ah.traffic_class, f"{p}flow_label": ah.flow_label,
            f"{p}udp_sport": udp_sport(self.qp_num, attr.dest_qp_num), f"{p}rmac_47_32": rmac >> 32, f"{p}rmac_31_0": rmac & 0xFFFFFFFF}
      opt = (mlx5_core.MLX5_QP_OPTPAR_RRE | mlx5_core.MLX5_QP_OPTPAR_RWE if mask & M.ACCESS_FLAGS else 0) | \
            (mlx5_core.MLX5_QP_OPTPAR_PKEY_INDEX if mask & M.PKEY_INDEX else 0)
      gid_at = mlx5_ifc.LAYOUTS["init2rtr_qp_in"].locate("qpc.primary_address_path.rgid_rip")[0] // 8
      return self._cmd(mlx5_ifc.MLX5_CMD_OP_INIT2RTR_QP, f | (access if opt else {}) | {"opt_param_mask": opt}, at={gid_at: bytes(ah.dgid)})
    if new == QPState.RTS:                # RTR -> RTS, RTS -> RTS: access flags and the RNR timer are optional
      opt = (mlx5_core.MLX5_QP_OPTPAR_RRE | mlx5_core.MLX5_QP_OPTPAR_RWE if mask & M.ACCESS_FLAGS else 0) | \
            (mlx5_core.MLX5_QP_OPTPAR_RNR_TIMEOUT if mask & M.MIN_RNR_TIMER else 0)
      f |= (access if mask & M.ACCESS_FLAGS else {}) | {"opt_param_mask": opt}
      if mask & M.MIN_RNR_TIMER: f["qpc.min_rnr_nak"] = attr.min_rnr_timer
      if cur == QPState.RTS: return self._cmd(mlx5_ifc.MLX5_CMD_OP_RTS2RTS_QP, f)
      return self._cmd(mlx5_ifc.MLX5_CMD_OP_RTR2RTS_QP, f | {"qpc.next_send_psn": attr.sq_psn, "qpc.log_sra_max": _log2(max(attr.max_rd_atomic, 1)),
                       "qpc.retry_count": attr.retry_cnt, "qpc.rnr_retry": attr.rnr_retry, f"{p}ack_timeout": attr.timeout})
    raise VerbsError(f"{dev.name}: QP {self.qp_num:#x}: {cur.name} -> {new.name} is not supported by this driver")

  def _cmd(self, opcode: int, fields: dict, at: dict | None = None) -> None:
    self.dev.cmd(opcode, fields, qpn=self.qp_num, at=at)

  # --- work requests
  def _send_wqe(self, wr: SendWR, index: int) -> bytes:
    """The WQE of `wr` at WQEBB `index`, whole WQEBBs: ctrl segment, raddr segment (RDMA), data segments (those of
    SGEs with bytes)."""
    data = []
    for s in wr.sg_list:
      if s.length: data += (s.length, s.lkey, s.addr)
    ds = 1 + (wr.opcode in RDMA_OPS) + len(data) // 3
    ctrl = ((index & 0xFFFF) << 8 | OPCODE[wr.opcode], self.qp_num << 8 | ds, FM_CE_SE[int(wr.send_flags) & 7],
            wr.imm_data if wr.opcode in IMM_OPS else 0)
    if wr.opcode in RDMA_OPS: return WQE_STRUCTS[True, len(data) // 3].pack(*ctrl, wr.remote_addr, wr.rkey, *data)
    return WQE_STRUCTS[False, len(data) // 3].pack(*ctrl, *data)

  def post_send(self, wrs: list[tuple[int, SendWR]]) -> None:
    """The WQEs at the producer; each WorkRequests entry: (its first WQEBB's index & 0xFFFF, the request's sequence
    number, the producer index after it)."""
    if not wrs: return
    index, wqes = self.sq.put, []
    for seq, wr in wrs:
      wqes.append(wqe := self._send_wqe(wr, index))
      self.wrs.sq.append((index & 0xFFFF, seq, index := index + len(wqe) // WQEBB))
    # one WQE that fits the register goes whole (BlueFlame: the doorbell, then the rest of the WQE), else the doorbell
    last = wqes[-1]
    self.bf_words = list(BF_WORDS[len(last) // 8 if len(wrs) == 1 and len(last) <= BF_SIZE and self.blueflame else 1].unpack_from(last))
    self.sq.submit(wqes, [])

  def _ring_sq(self, put: int) -> None:
    """The send doorbell: the producer into the doorbell record (word 1, big-endian), then bf_words into the UAR page's
    register at 0x800 or 0x900 in turn."""
    DBR_WORD.pack_into(self.dev.dbr.view, self.dbr + 4, put & 0xFFFF)
    self.dev.uar_bar.write64s(BF[self.bf], self.bf_words)
    self.bf ^= 1

  def device_targets(self, cq: CQ) -> tuple[list[memoryview], int]:
    return [self.mem.view, self.dev.dbr.view, cq.mem.view], self.dev.pci.bar_address(0) + self.dev.uar_bar.base

  def device_post(self, seq: int, wr: SendWR, cq: CQ, cq_ahead: int) -> DevicePost:
    """`wr` for another device to post: its WQEBBs at the producer, the send counter into the doorbell record (word 1,
    big-endian), then the send doorbell (the WQE's first 8 bytes, one 64-bit store into the UAR page's register at
    0x800 or 0x900 in turn; no BlueFlame copy). Its CQE lands cq_ahead entries after the CQ's consumer; byte 63's owner
    bit (bit 24 of the little-endian word at 60) is that position's pass parity once it is written."""
    wqe = self._send_wqe(wr, self.sq.put)
    nbb, pi = len(wqe) // WQEBB, self.sq.claim(len(wqe))
    writes = [(self.mem.view, self.sq_off + ((pi + i) % (1 << self.log_sq)) * WQEBB, wqe[i * WQEBB:(i + 1) * WQEBB]) for i in range(nbb)]
    self.wrs.sq.append((pi & 0xFFFF, seq, pi + nbb))
    writes.append((self.dev.dbr.view, self.dbr + 4, ((pi + nbb) & 0xFFFF).to_bytes(4, "big")))
    db = self.dev.pci.bar_address(0) + self.dev.uar_bar.base + BF[self.bf]
    self.bf ^= 1
    pos = cq.ci + cq_ahead
    return DevicePost(writes, (db, wqe[:8]), (cq.mem.view, (pos % cq.depth) * CQE + 60, 1 << 24, ((pos >> cq.log_size) & 1) << 24))

  def post_recv(self, wrs: list[tuple[int, RecvWR]]) -> None:
    if not wrs: return
    stride = DS << self.rq_stride
    for seq, wr in wrs:
      segs = b"".join(data_seg(s.length, s.lkey, s.addr) for s in wr.sg_list)
      if len(segs) < stride: segs += data_seg(0, INVALID_LKEY, 0)
      off = (self.rq_pi % (1 << self.log_rq)) * stride
      self.mem.view[off:off + stride] = segs[:stride].ljust(stride, b"\0")
      self.wrs.rq.append((self.rq_pi & 0xFFFF, seq))
      self.rq_pi += 1
    self.dev.dbr.view[self.dbr:self.dbr + 4] = (self.rq_pi & 0xFFFF).to_bytes(4, "big")

  # --- completions
  def completion(self, op: int, counter: int, byte_len: int, imm: int, syndrome: int, vendor_syndrome: int) -> Completion | None:
    """A CQE of this QP (its opcode, wqe_counter, byte_cnt, immediate, and an error CQE's syndromes); None for one the
    verbs layer has flushed already."""
    recv = op != mlx5_core.MLX5_CQE_REQ and op != mlx5_core.MLX5_CQE_REQ_ERR
    entry, wrs = self.wrs.take(recv, counter), self.wrs
    if not recv: self.sq.retire(entry[2])                   # the NIC is done with its WQEs (and those before it)
    seq = entry[1]
    if op == mlx5_core.MLX5_CQE_REQ_ERR or op == mlx5_core.MLX5_CQE_RESP_ERR:
      return wrs.completion(recv, seq, SYNDROME_WC.get(syndrome, W.GENERAL_ERR), syndrome,
                            f"MLX5_CQE_SYNDROME_{SYNDROMES.get(syndrome, '?')} (vendor syndrome {vendor_syndrome:#x})")
    if not recv: return wrs.completion(False, seq, SUCCESS, 0, "", byte_len)
    return wrs.completion(True, seq, SUCCESS, 0, "", byte_len,
                          imm if op == mlx5_core.MLX5_CQE_RESP_WR_IMM or op == mlx5_core.MLX5_CQE_RESP_SEND_IMM else None,
                          RECV_RDMA_WITH_IMM if op == mlx5_core.MLX5_CQE_RESP_WR_IMM else RECV)

  def destroy(self) -> None:
    try: self.dev.cmd(mlx5_ifc.MLX5_CMD_OP_DESTROY_QP, qpn=self.qp_num)
    finally:
      self.dev.qps.pop(self.qp_num, None)
      self._free()

  def _free(self) -> None:
    self.dev.pci.free_dma(self.mem)
    self.dev.free_dbr(self.dbr)
