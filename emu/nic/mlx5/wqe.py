"""Send and receive queue formats and completions (include/linux/mlx5/qp.h mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg,
mlx5_wqe_data_seg; device.h mlx5_cqe64, mlx5_err_cqe).

Send queue: 64-byte basic blocks (WQEBBs) after the receive queue in the QP's buffer. A WQE is `ds` 16-byte segments
(ctrl: opmod_idx_opcode = wqe_index << 8 | opcode, qpn_ds = qpn << 8 | ds, fm_ce_se at byte 11 (CQ_UPDATE 0x08: a
CQE on success; SOLICITED 0x02; fence mode 0xe0), imm at 12; RDMA WRITE/READ then a raddr segment (raddr, rkey); then
data segments (byte_count, lkey, addr), all big-endian) in ceil(ds / 4) WQEBBs, wrapping at the ring's end. Opcodes:
RDMA_WRITE, RDMA_WRITE_IMM, SEND, SEND_IMM, RDMA_READ; others, inline data and a zero byte_count (2 GiB on the
hardware) complete with a local QP operation error. wqe_index must be the WQE's position (16-bit WQEBB counter) and qpn
the QP's. The doorbell record's second word (big-endian, 16 bits) is the producer in WQEBBs; the UAR doorbell
(BlueFlame offset 0x800 or 0x900: a 64-bit store of the last WQE's first 8 bytes) starts the QP on everything before
the producer, and must name that last WQE (ModelError otherwise). BlueFlame: the 8-byte stores that follow it in the same
register (offset 8, 16, ... up to the WQE's WQEBBs, at most 256 bytes) are the rest of that WQE and must be what the
send queue holds (a copy that differs raises ModelError; the model executes the send queue's bytes either way). SGEs must lie in an MKEY of the QP's
PD with local
read (and local write for a READ's destination): else a local protection error. A message longer than 2^log_msg_max
bytes is a local length error.
Once a QP sent two one-packet RDMA WRITEs (with immediate) of one data segment and shape, its transmit flow
(emu/nic/txflow.py: tx_mlx5 in C) takes the WQEs of its next send doorbells that have that shape (opcode, ds, fm_ce_se
but CQ_UPDATE, byte_count, lkey) and pass the same checks (wqe_index, qpn, opmod, the segment in the same MKey), when the
doorbell names the last WQE; the first that is another shape or fails one, and those after it, come here.
Receive queue: 2^log_rq_size WQEs of 16 << log_rq_stride bytes, each data segments ended by lkey 0x100 (MLX5_INVALID_LKEY,
rdma-core providers/mlx5) or the stride; the doorbell record's first word is the producer (16 bits), read when a packet
needs a receive WQE (or the QP moves to ERR). WQEs are used in order, when messages arrive: a bad one (an SGE outside
a local-writable MKEY of the QP's PD) completes with a local protection error when a message reaches it, after the WQEs
before it, and the QP goes to ERR (rc.py).
CQEs: requester REQ (sop_drop_qpn = WQE opcode << 24 | qpn, wqe_counter = the WQE's index, byte_cnt = a READ's length)
for signaled WQEs; responder RESP_SEND / RESP_SEND_IMM / RESP_WR_IMM (byte_cnt, imm at 36, qpn, wqe_counter = the
receive WQE's index); REQ_ERR / RESP_ERR with the syndrome (MLX5_CQE_SYNDROME_*) at 55 and vendor_err_synd at 54 for every
error, flushed WQEs included (WR_FLUSH_ERR).
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autogen import mlx5_core
from emu.nic import rc, txflow
from emu.pci import ModelError, DMAFault

if TYPE_CHECKING: from emu.nic.mlx5.qp import QP, QPs

WQEBB, DS = mlx5_core.MLX5_SEND_WQE_BB, mlx5_core.MLX5_SEND_WQE_DS
# the transmit flows' decoder of this model's send queue (the doorbell record, the doorbell, the WQEs' segments)
TX = txflow.Decoder("nic/mlx5/txflow.c", "int tx_mlx5(txflow_t *f, uint32_t cons, uint64_t value, uint32_t psn, uint32_t una);")
BF_SIZE = 256                   # each of a UAR page's two doorbell / BlueFlame registers (log_bf_reg_size 9)
INVALID_LKEY = 0x100
OPCODES = {mlx5_core.MLX5_OPCODE_RDMA_WRITE: rc.WRITE, mlx5_core.MLX5_OPCODE_RDMA_WRITE_IMM: rc.WRITE_IMM, mlx5_core.MLX5_OPCODE_SEND: rc.SEND,
           mlx5_core.MLX5_OPCODE_SEND_IMM: rc.SEND_IMM, mlx5_core.MLX5_OPCODE_RDMA_READ: rc.READ}
SYNDROME = {rc.LOC_LEN_ERR: mlx5_core.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, rc.LOC_QP_OP_ERR: mlx5_core.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR,
            rc.LOC_PROT_ERR: mlx5_core.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, rc.WR_FLUSH_ERR: mlx5_core.MLX5_CQE_SYNDROME_WR_FLUSH_ERR,
            rc.BAD_RESP_ERR: mlx5_core.MLX5_CQE_SYNDROME_BAD_RESP_ERR, rc.REM_INV_REQ_ERR: mlx5_core.MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR,
            rc.REM_ACCESS_ERR: mlx5_core.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, rc.REM_OP_ERR: mlx5_core.MLX5_CQE_SYNDROME_REMOTE_OP_ERR,
            rc.RETRY_EXC_ERR: mlx5_core.MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
            rc.RNR_RETRY_EXC_ERR: mlx5_core.MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR}
VENDOR_SYNDROME = 0x68          # vendor_err_synd this model reports with every error CQE


@dataclass
class WQECtx:
  index: int                    # the WQE's 16-bit WQEBB counter
  opcode: int
  signaled: bool
  length: int


def be32(b: bytes, off: int) -> int: return int.from_bytes(b[off:off + 4], "big")


def wqe_at(qp: QP, index: int, nbb: int) -> bytes:
  size = 1 << qp.log_sq
  if nbb == 1: return qp.buf.read(qp.sq_off + (index % size) * WQEBB, WQEBB)
  return b"".join(qp.buf.read(qp.sq_off + ((index + i) % size) * WQEBB, WQEBB) for i in range(nbb))


def sq_doorbell(qps: QPs, uar: int, value: int) -> bytes:
  """A send doorbell: run the WQEs before the producer; -> the last one's bytes (what a BlueFlame copy must repeat)."""
  raw = value.to_bytes(8, "little")               # the WQE's first 8 bytes as they lie in memory
  qpn = be32(raw, 4) >> 8
  qp = qps.qps.get(qpn)
  where = f"send doorbell {raw.hex()} on UAR {uar}"
  if qp is None or qp.uar != uar: raise ModelError(f"{where}: no QP {qpn:#x} on this UAR page")
  if qp.rc.state not in ("RTS", "ERR"): raise ModelError(f"{where}: QP {qpn:#x} is in {qp.rc.state}; send doorbells need RTS")
  if qp.tx is not None and (last := sq_c(qps, qp, value)) is not None: return last
  prod = be32(qps.nic.dma.read(qp.dbr + 4, 4), 0) & 0xFFFF
  pending = (prod - qp.sq_cons) & 0xFFFF
  if pending > 1 << qp.log_sq: raise ModelError(f"{where}: the producer {prod} is {pending} WQEBBs past the consumer {qp.sq_cons & 0xFFFF}")
  starts, i = [], qp.sq_cons
  while (i - qp.sq_cons) & 0xFFFF < pending:
    first = wqe_at(qp, i, 1)
    ds = be32(first, 4) & mlx5_core.MLX5_WQE_CTRL_DS_MASK
    nbb = max(1, -(-ds // (WQEBB // DS)))
    if ((i + nbb - qp.sq_cons) & 0xFFFF) > pending: raise ModelError(f"{where}: WQE at {i & 0xFFFF} (ds {ds}) runs past the producer {prod}")
    starts.append((i & 0xFFFF, nbb, first))
    i += nbb
  if not starts or raw != starts[-1][2][:8]:
    raise ModelError(f"{where}: a doorbell carries the last posted WQE's first 8 bytes ({starts[-1][2][:8].hex() if starts else 'none'})")
  for index, nbb, first in starts:
    qp.sq_cons = (index + nbb) & 0xFFFF
    post_wqe(qps, qp, index, last := first if nbb == 1 else wqe_at(qp, index, nbb))
  return last


def sq_c(qps: QPs, qp: QP, value: int) -> bytes | None:
  """The WQEs before the producer that the QP's transmit flow posts and sends in C (emu/nic/txflow.py): it stops before
  the first that is not the shape it was armed with or fails a check post_wqe makes, and takes none if the doorbell is
  wrong; -> the last WQE's bytes if it took them all (else the Python path goes on from the consumer)."""
  (f, mk), q = qp.tx, qp.rc
  if not f.usable(q) or qps.nic.mkeys.lookup(mk.key) is not mk:
    qp.tx = None
    return None
  c = f.c
  n = f.lib.tx_mlx5(c, qp.sq_cons, value, q.next_psn, q.una)
  if not f.worth(n): qp.tx = None
  if not n: return None
  code, length, signal = c.wqe_type, c.length, mlx5_core.MLX5_WQE_CTRL_CQ_UPDATE
  f.book(q, lambda at, j, flags: (ctx := WQECtx(at, code, bool(flags & signal), length), ctx.signaled))
  qp.sq_cons = c.pos
  return bytes(c.last) if c.all else None


def arm_tx(qps: QPs, qp: QP, w: bytes, wr: rc.SendWR) -> None:
  """Arm the QP's transmit flow for WQEs like `w` after the Python path posted and sent it and the one before it of this
  path was of its shape (txflow.again, then txflow.arm, say when)."""
  if not txflow.again(qp, (w[3], w[4:8], w[11] & ~mlx5_core.MLX5_WQE_CTRL_CQ_UPDATE, w[32:40])): return
  old, buf = qp.tx and qp.tx[0], qp.buf
  if (f := txflow.arm(TX, qps.nic.port, qp.rc, wr, qps.nic.dma, buf.pages, buf.page_size, buf.nbytes, old)) is None:
    return                                                 # (a flow it has stays: C checks each WQE against its own shape)
  try: c, dbr = f.c, (f.c.dbr if f is old else f.pin(qps.nic.dma.view(qp.dbr, 8)))
  except DMAFault: return
  c.depth, c.stride, c.ring_off, c.dbr, c.qpn = 1 << qp.log_sq, WQEBB, qp.sq_off, txflow.ffi.cast("uint8_t *", dbr), qp.qpn
  c.wqe_type, c.size, c.lkey = be32(w, 0) & mlx5_core.MLX5_WQE_CTRL_OPCODE_MASK, be32(w, 4) & mlx5_core.MLX5_WQE_CTRL_DS_MASK, be32(w, 36)
  c.vary = mlx5_core.MLX5_WQE_CTRL_CQ_UPDATE
  c.flags = w[11] & ~c.vary
  qp.tx = (f, qps.nic.mkeys.lookup(c.lkey))


def post_wqe(qps: QPs, qp: QP, index: int, w: bytes) -> None:
  head, qpn_ds, flags, imm = be32(w, 0), be32(w, 4), w[11], be32(w, 12)
  opcode, ds = head & mlx5_core.MLX5_WQE_CTRL_OPCODE_MASK, qpn_ds & mlx5_core.MLX5_WQE_CTRL_DS_MASK
  kind = OPCODES.get(opcode)
  ctx = WQECtx(index, opcode, bool(flags & mlx5_core.MLX5_WQE_CTRL_CQ_UPDATE), 0)
  wr = rc.SendWR(kind or rc.SEND, rc.Buffer(), ctx=ctx, signaled=ctx.signaled, fence=bool(flags & 0xE0),
                 solicited=bool(flags & mlx5_core.MLX5_WQE_CTRL_SOLICITED), imm=imm if kind in (rc.WRITE_IMM, rc.SEND_IMM) else None)
  why = None
  if kind is None: why = f"opcode {opcode:#x} is not modelled"
  elif (head >> 8) & 0xFFFF != index: why = f"wqe_index {(head >> 8) & 0xFFFF} at position {index}"
  elif qpn_ds >> 8 != qp.qpn: why = f"qpn {qpn_ds >> 8:#x} in a WQE of QP {qp.qpn:#x}"
  elif head >> 24: why = f"opmod {head >> 24:#x}"
  else:
    first = 2 if kind in (rc.WRITE, rc.WRITE_IMM, rc.READ) else 1
    if kind in (rc.WRITE, rc.WRITE_IMM, rc.READ): wr.remote_va, wr.rkey = int.from_bytes(w[16:24], "big"), be32(w, 24)
    if ds < first: why = f"ds {ds} leaves no room for the {'raddr ' if first == 2 else ''}segments"
    else: why = sges(qps, qp, [w[DS * s:DS * (s + 1)] for s in range(first, ds)], wr, kind)
  ctx.length = wr.length
  if why is None and wr.length > 1 << qp.log_msg_max:
    why = f"a {wr.length}-byte message; the QP's log_msg_max is {qp.log_msg_max}"
  if why is not None:
    qps.nic.log(f"QP {qp.qpn:#x} WQE at {index}: {why}")
    wr.local_error = rc.LOC_PROT_ERR if why.startswith("SGE") else rc.LOC_LEN_ERR if "log_msg_max" in why else rc.LOC_QP_OP_ERR
  qp.rc.post_send(wr)
  if why is None and ds == 3: arm_tx(qps, qp, w, wr)           # (ctrl, raddr and one data segment)


def sges(qps: QPs, qp: QP, segs: list[bytes], wr: rc.SendWR, kind: str) -> str | None:
  need = rc.LOCAL_WRITE if kind == rc.READ else 0
  pieces = []
  for seg in segs:
    n, lkey, va = be32(seg, 0), be32(seg, 4), int.from_bytes(seg[8:16], "big")
    if n >> 31: return "inline data is not modelled"
    if n == 0: return "a data segment with byte_count 0 (2 GiB) is not modelled"
    if (why := local_region(qps, qp, va, n, lkey, need)) is not None: return why
    pieces.append((qps.nic.mkeys.lookup(lkey).region, va, n))
  wr.local = rc.Buffer(pieces)
  return None


def local_region(qps: QPs, qp: QP, va: int, n: int, lkey: int, need: int) -> str | None:
  mk = qps.nic.mkeys.lookup(lkey)
  if mk is None or mk.pd != qp.pd or not mk.local_read or not mk.region.allows(va, n, need):
    detail = "no such MKEY" if mk is None else f"MKEY [{mk.region.va:#x}, +{mk.region.length:#x}) PD {mk.pd} rights {mk.region.access:#x}"
    return f"SGE [{va:#x}, +{n:#x}) lkey {lkey:#x}: {detail}, QP PD {qp.pd}"
  return None


def sync_rq(qps: QPs, qp: QP) -> None:
  """Take the receive WQEs the driver posted (doorbell record word 0) into the transport."""
  if qp.rc.state == "RESET": return
  qp.rq_record = qps.nic.dma.read(qp.dbr, 4)
  prod = be32(qp.rq_record, 0) & 0xFFFF
  pending = (prod - qp.rq_cons) & 0xFFFF
  if pending > 1 << qp.log_rq:
    return rc.QP.error(qp.rc, f"receive doorbell record {prod} is {pending} WQEs past the consumer {qp.rq_cons}", rc.LOC_QP_OP_ERR, False)
  stride = DS << qp.rq_stride
  for _ in range(pending):
    index = qp.rq_cons
    qp.rq_cons = (qp.rq_cons + 1) & 0xFFFF
    raw = qp.buf.read((index % (1 << qp.log_rq)) * stride, stride)
    pieces, why = [], None
    for s in range(0, stride, DS):
      n, lkey, va = be32(raw, s), be32(raw, s + 4), int.from_bytes(raw[s + 8:s + 16], "big")
      if lkey == INVALID_LKEY: break
      if (why := local_region(qps, qp, va, n, lkey, rc.LOCAL_WRITE)) is not None: break
      pieces.append((qps.nic.mkeys.lookup(lkey).region, va, n))
    wr = rc.RecvWR(rc.Buffer(pieces), ctx=index)
    if why is not None: wr.local_error, wr.why = rc.LOC_PROT_ERR, f"QP {qp.qpn:#x} receive WQE {index}: {why}"
    qp.rc.post_recv(wr)


def req_cqe(qp: QP, ctx: WQECtx, status: str) -> bytearray:
  e = bytearray(64)
  e[56:60] = (ctx.opcode << 24 | qp.qpn).to_bytes(4, "big")
  e[60:62] = ctx.index.to_bytes(2, "big")
  if status == rc.OK:
    if ctx.opcode == mlx5_core.MLX5_OPCODE_RDMA_READ: e[44:48] = ctx.length.to_bytes(4, "big")
    e[63] = mlx5_core.MLX5_CQE_REQ << 4
  else:
    e[54], e[55], e[63] = VENDOR_SYNDROME, SYNDROME.get(status, mlx5_core.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR), mlx5_core.MLX5_CQE_REQ_ERR << 4
  return e


def resp_cqe(qp: QP, index: int, status: str, byte_len: int, imm: int | None, write_imm: bool) -> bytearray:
  e = bytearray(64)
  e[56:60] = qp.qpn.to_bytes(4, "big")
  e[60:62] = index.to_bytes(2, "big")
  if status == rc.OK:
    e[44:48] = byte_len.to_bytes(4, "big")
    if imm is not None: e[36:40] = imm.to_bytes(4, "big")
    op = mlx5_core.MLX5_CQE_RESP_WR_IMM if write_imm else mlx5_core.MLX5_CQE_RESP_SEND_IMM if imm is not None else mlx5_core.MLX5_CQE_RESP_SEND
    e[63] = op << 4
  else:
    e[54], e[55], e[63] = VENDOR_SYNDROME, SYNDROME.get(status, mlx5_core.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR), mlx5_core.MLX5_CQE_RESP_ERR << 4
  return e


class BlueFlame:
  """The copies in flight in one UAR page's two BlueFlame registers: the bytes each store must repeat."""
  def __init__(self): self.expect: dict[tuple[int, int], tuple[int, bytes]] = {}

  def doorbell(self, uar: int, reg: int, wqe: bytes) -> None:
    self.expect[(uar, reg)] = (8, wqe[:BF_SIZE])

  def store(self, uar: int, reg: int, within: int, data: bytes) -> None:
    """8-byte stores of `data` (a multiple of 8 bytes, in order) at `within` of the register."""
    at, wqe = self.expect.get((uar, reg), (None, b""))
    if at == within and at + len(data) <= len(wqe) and data == wqe[at:at + len(data)]:
      self.expect[(uar, reg)] = (at + len(data), wqe)
      return
    for i in range(0, len(data), 8):                      # (the first store that is wrong raises, those before it count)
      if within + i != at or at + 8 > len(wqe):
        raise ModelError(f"BlueFlame store at UAR {uar} register {reg} offset {within + i:#x}: the copy of the last doorbell's "
                         f"WQE continues at {at if at is not None else 'nothing (ring a doorbell at offset 0 first)'}")
      if data[i:i + 8] != wqe[at:at + 8]:
        raise ModelError(f"BlueFlame store at UAR {uar} register {reg} offset {at:#x}: {data[i:i + 8].hex()} is not the send "
                         f"queue's WQE bytes there ({wqe[at:at + 8].hex()})")
      at += 8
      self.expect[(uar, reg)] = (at, wqe)
