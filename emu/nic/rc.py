"""The reliable-connected (RC) transport of one queue pair, vendor-neutral (IBA 1.4 vol 1 ch. 9.7 and ch. 10.8; soft-RoCE
rxe_req.c/rxe_resp.c/rxe_comp.c for the conventional choices): what every NIC model's QP does on the wire. The NIC model
decodes its own work-queue formats and keys into `SendWR`/`RecvWR`/`Region`, hands frames between the wire and `QP`,
and writes completions in its own format when the QP calls back (`Host`).

Requester (state RTS):
- Messages (RDMA WRITE, WRITE with immediate, SEND, SEND with immediate, RDMA READ) take consecutive PSNs from the send
  PSN, one per path-MTU packet (at least one; a READ request takes as many as its response has packets), and go out as
  FIRST/MIDDLE/LAST or ONLY packets; RETH on WRITE FIRST/ONLY and READ, ImmDt on the last packet.
- At most WINDOW PSNs are unacknowledged; AckReq is set on each message's last packet and every ACK_EVERY packets.
  Consecutive MIDDLE packets of a message go to the host as one roce.FrameRun (sent as one batch, fastpath.py).
- ACKs are cumulative. A WR completes (in posting order) when an ACK covers its last PSN, a READ when its last response
  arrives; `Host.completed` is called then, never before: the CQE follows the ACK.
- Loss: the timer (4.096 us * 2^timeout; timeout 0 = none) or a NAK-PSN-sequence-error sends again from the oldest
  unacknowledged PSN (go-back-N), each costing one of retry_cnt retries; out of retries the oldest WR completes with
  RETRY_EXC_ERR. An RNR NAK waits its timer (IBA Table 45) and resends, costing one of rnr_retry (7 = unlimited). A
  missing or out-of-order READ response re-requests the READ from the first missing PSN. Forward progress restores
  both counters. The timer is restarted by progress and by each retransmission, and stops once all is acknowledged.
- At most max_rd_atomic READs are outstanding; a WR with the fence flag waits for the READs before it.
- A WR the NIC model could not decode carries `local_error`: it completes with that status when its turn comes (after
  the WRs before it), and the QP goes to ERR.
- NAK invalid request / remote access / remote operational error: the WR completes with REM_INV_REQ_ERR /
  REM_ACCESS_ERR / REM_OP_ERR; earlier WRs complete OK; the QP goes to ERR and later WRs are flushed.
Responder (states RTR and RTS; packets reaching a QP in another state, with another P_Key or from another GID than its
destination are dropped silently):
- PSN equal to the expected PSN: executed. RDMA WRITE/READ first check the QP's access flags, then the region the R_Key
  names (`Host.lookup_key`): its access flags and that [va, va + DMA length) lies inside it (a zero-length transfer
  names no memory and is not checked); a failure moves the QP to ERR, then NAKs remote access error. A DMA fault on
  the memory is a NAK remote operational error. The data is written to memory before the ACK is sent. Opcode sequence and
  packet lengths (FIRST/MIDDLE a full MTU, LAST/ONLY the rest, the total the RETH's DMA length) are checked: a
  violation is a NAK invalid request (QP to ERR). SEND and WRITE with immediate consume a receive WR, whose completion
  follows the message's ACK (the requester is answered first, then the host told); with none posted the packet gets
  an RNR NAK (min_rnr_timer) and nothing is consumed. A SEND longer than its receive buffers completes that WR with
  LOC_LEN_ERR, NAKs invalid request and moves the QP to ERR. Receive WRs are consumed and complete in posting order
  (IBA 10.8.3); one the NIC model could not decode (a bad L_Key, a malformed WQE) carries `local_error` and fails only
  when a message reaches it: before anything of that packet is written, the WR completes with that status, the QP goes
  to ERR (the later receive WRs flush) and the packet is NAKed remote operational error.
- PSN behind (a duplicate): WRITE/SEND are not executed again but re-ACKed with the latest PSN; a READ is answered again
  (its R_Key checked again). A READ needs REMOTE_READ on the QP and max_dest_rd_atomic > 0; long responses go out
  READ_BURST packets at a time, between which the wire's other frames are served. A READ request that arrives while an
  earlier response is still going out ends that response (the requester asked again: it lost part of it).
- Requester, READ responses: the expected PSN with the opcode its position calls for (FIRST at the PSN the last
  request for the READ started from). Model choice: at that PSN a MIDDLE/LAST is taken too, since it is the same bytes
  from the response to an earlier request for the same READ, still in flight when the requester asked again.
- PSN ahead (a gap): one NAK PSN sequence error, then silence until the expected PSN arrives.
- An ACK is sent for every packet with AckReq; a READ's responses carry AETH on FIRST/LAST/ONLY.
Not modelled: atomics, UD/UC/XRC, SRQs, credits (AETH always says "no credit count"), alternate paths, APM, SQD/SQE.
"""
from __future__ import annotations
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from emu.nic import roce
from emu.nic.roce import psn_add, psn_delta
from emu.pci import DMAFault

# access rights (the ibv_access_flags bits); NIC models translate their own encodings to these
LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC = 1, 2, 4, 8
WINDOW = 256                # PSNs the requester lets be unacknowledged (1 MiB at a 4096-byte MTU: within the wire's socket buffers)
ACK_EVERY = 64              # AckReq at least this often within a long message (each ACK costs both ends a wake-up)
READ_BURST = 64             # READ response packets sent per turn before incoming frames are served again

# completion status (the ibv_wc_status names)
OK, LOC_LEN_ERR, LOC_QP_OP_ERR = "OK", "LOC_LEN_ERR", "LOC_QP_OP_ERR"
LOC_PROT_ERR, WR_FLUSH_ERR, BAD_RESP_ERR = "LOC_PROT_ERR", "WR_FLUSH_ERR", "BAD_RESP_ERR"
REM_INV_REQ_ERR, REM_ACCESS_ERR, REM_OP_ERR = "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR"
RETRY_EXC_ERR, RNR_RETRY_EXC_ERR = "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR"
NAK_STATUS = {roce.NAK_INVALID_REQUEST: REM_INV_REQ_ERR, roce.NAK_REMOTE_ACCESS_ERROR: REM_ACCESS_ERR,
              roce.NAK_REMOTE_OPERATIONAL_ERROR: REM_OP_ERR}
STATES = ("RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR")
WRITE, WRITE_IMM, SEND, SEND_IMM, READ = "WRITE", "WRITE_IMM", "SEND", "SEND_IMM", "READ"
SENDS = frozenset(range(roce.SEND_FIRST, roce.SEND_ONLY_IMM + 1))
# a message's packet opcodes (FIRST, MIDDLE, LAST, ONLY) and whether its last packet carries ImmDt (the opcode after)
_WRITES, _SENDS = (roce.WRITE_FIRST, roce.WRITE_MIDDLE, roce.WRITE_LAST, roce.WRITE_ONLY), (roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST,
                                                                                            roce.SEND_ONLY)
_OPCODES = {WRITE: (*_WRITES, False), WRITE_IMM: (*_WRITES, True), SEND: (*_SENDS, False), SEND_IMM: (*_SENDS, True)}


def timeout_s(timeout: int) -> float | None:
  """The local ACK timeout: 4.096 us * 2^timeout (IBA 9.7.6.1.3, C9-140); 0 means none (wait forever)."""
  return None if timeout == 0 else 4.096e-6 * (1 << timeout)


class Region:
  """Memory a key names: [va, va + length) with `access` rights; `chunks(va, n)` gives its bytes as writable views.
  `generation` (a one-element uint64 array, the DMA space's: emu/pci.py) changes whenever those views may no longer be
  what `chunks` would give; without one, nothing keeps them (the C datapath does not take WRITEs into the region)."""
  def __init__(self, key: int, va: int, length: int, access: int, chunks: Callable[[int, int], list[memoryview]],
               generation: Any = None):
    self.key, self.va, self.length, self.access, self.chunks, self.generation = key, va, length, access, chunks, generation

  def allows(self, va: int, n: int, access: int) -> bool:
    return (self.access & access) == access and self.va <= va and va + n <= self.va + self.length


class Buffer:
  """A scatter/gather list: (region, va, length) pieces, already checked by the NIC model."""
  def __init__(self, sges: list[tuple[Region, int, int]] = ()):
    self.sges = list(sges)
    self.length = sum(s[2] for s in self.sges)

  def pieces(self, off: int, n: int):
    """(region, va, length) of each SGE's share of bytes [off, off + n) of the list, in order."""
    for region, va, length in self.sges:
      if n <= 0: break
      if off >= length:
        off -= length
        continue
      k = min(n, length - off)
      yield region, va + off, k
      off, n = 0, n - k

  def chunks(self, off: int, n: int) -> list[memoryview]:
    return [view for region, va, k in self.pieces(off, n) for view in region.chunks(va, k)]

  def write(self, off: int, data: memoryview | bytes) -> None:
    data = memoryview(data).cast("B")
    for view in self.chunks(off, len(data)):
      view[:] = data[:len(view)]
      data = data[len(view):]


@dataclass(eq=False)
class SendWR:
  opcode: str
  local: Buffer
  remote_va: int = 0
  rkey: int = 0
  imm: int | None = None
  signaled: bool = True
  fence: bool = False
  solicited: bool = False
  ctx: Any = None                      # the NIC model's own (its WQE index, ...)
  first_psn: int = 0
  npkts: int = 1
  got: int = 0                         # READ: response packets received
  req_k: int = 0                       # READ: the packet the last (re-)request started at
  local_error: str | None = None       # set by the NIC model for a WR it cannot execute: completes with it, in order

  @property
  def length(self) -> int: return self.local.length
  def last_psn(self) -> int: return psn_add(self.first_psn, self.npkts - 1)


@dataclass(eq=False)
class RecvWR:
  buffer: Buffer
  ctx: Any = None
  local_error: str | None = None       # set by the NIC model for a WQE it cannot use: fails when a message consumes it
  why: str = ""                        # (what is wrong with it)


@dataclass
class Stats:
  sent: int = 0
  retransmitted: int = 0
  timeouts: int = 0
  naks_sent: int = 0
  naks_received: int = 0
  rnr_naks_sent: int = 0
  rnr_naks_received: int = 0
  duplicates: int = 0
  out_of_sequence: int = 0
  dropped: int = 0


class Host(Protocol):
  """What the NIC model does for its QPs. `transmit` takes one frame (a list of buffers) or a roce.FrameRun (the
  MIDDLE packets of a message, to send as one batch): both go to the port's RoCEPort.transmit. Optional:
  `completion_recipe(qp) -> fastpath.Recipe`, how the C datapath writes the `received` completion of a single-packet
  WRITE with immediate into qp's receive CQ itself (emu/nic/fastpath.py); without it `received` is always called."""
  def transmit(self, qp: QP, frame: list | roce.FrameRun) -> None: ...
  def lookup_key(self, qp: QP, rkey: int) -> Region | None: ...
  def completed(self, qp: QP, wr: SendWR, status: str) -> None: ...
  def received(self, qp: QP, wr: RecvWR, status: str, byte_len: int, imm: int | None, write_imm: bool) -> None: ...
  def fatal(self, qp: QP, reason: str, status: str, requester: bool) -> None: ...
  def call_later(self, delay_s: float, fn: Callable[[], None]) -> Any: ...


@dataclass
class Attrs:
  """The QP attributes the transport acts on (set by modify_qp)."""
  state: str = "RESET"
  access: int = 0
  pkey: int = 0xFFFF
  dest_qpn: int = 0
  path: roce.Path | None = None
  mtu: int = 1024
  rq_psn: int = 0
  sq_psn: int = 0
  timeout: int = 0
  retry_cnt: int = 7
  rnr_retry: int = 7
  min_rnr_timer: int = 0
  max_rd_atomic: int = 1
  max_dest_rd_atomic: int = 0


class QP:
  def __init__(self, host: Host, qpn: int):
    self.host, self.qpn = host, qpn
    self.a = Attrs()
    self.stats = Stats()
    self.recvs: deque[RecvWR] = deque()
    self.bad_recvs = 0                        # of them, with a local_error
    self.timer = None                         # the host timer chasing `deadline` (at most one)
    self._reset()

  def _reset(self) -> None:
    self.wrs: deque[SendWR] = deque()        # posted, not completed, in order
    self._hint: SendWR | None = None
    self.next_psn = self.a.sq_psn             # PSN the next posted message starts at
    self.tx_psn = self.a.sq_psn               # PSN of the next packet to (re)transmit
    self.una = self.a.sq_psn                  # oldest unacknowledged PSN
    self.high = self.a.sq_psn                 # one past the highest PSN sent
    self.retry_left, self.rnr_left = self.a.retry_cnt, self.a.rnr_retry
    self.deadline: float | None = None
    self.rnr_wait = False
    self.read_gap = False
    self.responding = 0                       # generation of the READ response going out (a new request ends it)
    self.epsn, self.msn = self.a.rq_psn, 0   # responder
    self.nak_pending = False
    self.wctx: tuple[Region, int, int] | None = None   # WRITE in progress: region, next va, bytes left
    self.sctx: tuple[RecvWR, int] | None = None        # SEND in progress: receive WR, bytes so far
    self.last_op: int | None = None

  # --- state
  @property
  def state(self) -> str: return self.a.state

  def modify(self, state: str, **attrs) -> None:
    """Apply attributes, then move to `state` (the NIC model has checked the transition is legal)."""
    if state not in STATES: raise ValueError(f"unknown QP state {state!r}")
    for k, v in attrs.items():
      if not hasattr(self.a, k): raise AttributeError(f"QP attribute {k!r}")
      setattr(self.a, k, v)
    old, self.a.state = self.a.state, state
    if state == "RESET":
      self._cancel_timer()
      self.recvs.clear()
      self.bad_recvs = 0
      self._reset()
    elif state == "RTR" and old != "RTR": self.epsn, self.msn = self.a.rq_psn, 0
    elif state == "RTS" and old == "RTR":
      self.next_psn = self.tx_psn = self.una = self.high = self.a.sq_psn
      self.retry_left, self.rnr_left = self.a.retry_cnt, self.a.rnr_retry
    elif state == "ERR" and old != "ERR": self._flush()

  def error(self, reason: str, status: str, requester: bool) -> None:
    """The QP goes to ERR on its own (an error completion or a NAK it sent): flush, then tell the NIC model."""
    if self.a.state == "ERR": return
    self.a.state = "ERR"
    self._flush()
    self.host.fatal(self, reason, status, requester)

  def _flush(self) -> None:
    """ERR: every outstanding WR completes with WR_FLUSH_ERR, sends first, in order."""
    self._cancel_timer()
    while self.wrs: self.host.completed(self, self.wrs.popleft(), WR_FLUSH_ERR)
    if self.sctx is not None: self.sctx = None
    while self.recvs: self.host.received(self, self.recvs.popleft(), WR_FLUSH_ERR, 0, None, False)
    self.bad_recvs = 0

  # --- work posting
  def post_send(self, wr: SendWR) -> None:
    if self.a.state == "ERR":
      self.host.completed(self, wr, WR_FLUSH_ERR)
      return
    if self.a.state != "RTS": raise RuntimeError(f"QP {self.qpn}: send posted in state {self.a.state} (needs RTS)")
    wr.first_psn = self.next_psn
    wr.npkts = max(1, -(-wr.length // self.a.mtu))
    self.next_psn = psn_add(self.next_psn, wr.npkts)
    self.wrs.append(wr)
    self._pump()

  def posted_sent(self, wrs: list[SendWR]) -> None:
    """WRs of one packet each (first_psn from next_psn on) that the C datapath posted and sent (emu/nic/txflow.py) while
    post_send would have sent them at once (RTS, nothing left to send before them, the window open): its bookkeeping."""
    self.wrs.extend(wrs)
    self.next_psn = self.tx_psn = self.high = psn_add(self.next_psn, len(wrs))
    self.stats.sent += len(wrs)
    self._arm()

  def receive_watch(self) -> tuple[memoryview, bytes] | None:
    """For the C datapath (fastpath.py): host memory whose change means receive WRs were posted that `recvs` does not
    hold yet, and what it holds now; None where the NIC model puts every posted receive WR in `recvs` at once."""
    return None

  def post_recv(self, wr: RecvWR) -> None:
    if self.a.state == "ERR": self.host.received(self, wr, WR_FLUSH_ERR, 0, None, False)
    else:
      self.recvs.append(wr)
      self.bad_recvs += wr.local_error is not None

  def usable_recvs(self) -> int:
    """How many receive WRs messages can consume before one that fails (the C datapath consumes only those)."""
    if not self.bad_recvs: return len(self.recvs)
    return next(i for i, wr in enumerate(self.recvs) if wr.local_error is not None)

  # --- requester: transmit
  def _wr_at(self, psn: int) -> SendWR | None:
    hint = self._hint                         # usually the WR the last lookup found (WRs leave only from the left)
    if hint is not None and self.wrs and 0 <= psn_delta(psn, hint.first_psn) < hint.npkts and \
       psn_delta(hint.first_psn, self.wrs[0].first_psn) >= 0: return hint
    for wr in self.wrs:
      if 0 <= psn_delta(psn, wr.first_psn) < wr.npkts:
        self._hint = wr
        return wr
    return None

  def _pump(self) -> None:
    if self.a.state != "RTS" or self.rnr_wait: return
    while psn_delta(self.tx_psn, self.next_psn) < 0 and psn_delta(self.tx_psn, self.una) < WINDOW:
      wr = self._wr_at(self.tx_psn)
      if wr.local_error is not None:
        if wr is self.wrs[0]: self._fail(wr, wr.local_error)
        break
      if wr.opcode == READ:
        reads = [w for w in self.wrs if w.opcode == READ and psn_delta(w.first_psn, wr.first_psn) < 0 and w.got < w.npkts]
        if len(reads) >= max(1, self.a.max_rd_atomic): break
      if wr.fence and any(w.opcode == READ and psn_delta(w.first_psn, wr.first_psn) < 0 for w in self.wrs): break
      k = psn_delta(self.tx_psn, wr.first_psn)
      run = min(wr.npkts - 1 - k, WINDOW - psn_delta(self.tx_psn, self.una)) if k > 0 and wr.opcode != READ else 0
      if run > 1: self._transmit_run(wr, k, run)
      else: self._transmit(wr, k)
    self._arm()

  def _transmit(self, wr: SendWR, k: int) -> None:
    mtu, n = self.a.mtu, wr.npkts
    self.stats.retransmitted += psn_delta(self.tx_psn, self.high) < 0
    p = roce.Packet(0, self.tx_psn, self.a.dest_qpn, pkey=self.a.pkey, solicited=wr.solicited)
    if wr.opcode == READ:
      off, wr.req_k = k * mtu, k
      p.opcode, p.ack_req, p.va, p.rkey, p.dma_len = roce.READ_REQUEST, True, wr.remote_va + off, wr.rkey, wr.length - off
      self._send(p)
      self.tx_psn = psn_add(wr.first_psn, n)
      self._sent_to(self.tx_psn)
      return
    first, middle, last, only, imm = _OPCODES[wr.opcode]
    p.opcode = only if n == 1 else first if k == 0 else last if k == n - 1 else middle
    if k == n - 1 and imm: p.opcode, p.imm = p.opcode + 1, wr.imm
    if p.opcode in roce.HAS_RETH: p.va, p.rkey, p.dma_len = wr.remote_va, wr.rkey, wr.length
    p.ack_req = k == n - 1 or (k + 1) % ACK_EVERY == 0
    try: payload = tuple(wr.local.chunks(k * mtu, min(mtu, wr.length - k * mtu)))
    except DMAFault:
      wr.local_error = LOC_PROT_ERR
      return
    self._send(p, payload)
    self.tx_psn = psn_add(self.tx_psn, 1)
    self._sent_to(self.tx_psn)

  def _transmit_run(self, wr: SendWR, k: int, n: int) -> None:
    """Packets k .. k + n - 1 of `wr`, all MIDDLE packets, as one roce.FrameRun (its payload is read, all of it, before
    anything is sent: on a DMA fault nothing was, and it goes packet by packet so that the one that faults fails the WR)."""
    mtu = self.a.mtu
    op = roce.WRITE_MIDDLE if wr.opcode in (WRITE, WRITE_IMM) else roce.SEND_MIDDLE
    p = roce.Packet(op, 0, self.a.dest_qpn, pkey=self.a.pkey, solicited=wr.solicited)
    try: self.host.transmit(self, roce.FrameRun(self.a.path, p, self.tx_psn, n, mtu, k, ACK_EVERY, wr.local, k * mtu))
    except DMAFault: return self._transmit(wr, k)
    self.stats.sent += n
    self.stats.retransmitted += max(0, min(n, -psn_delta(self.tx_psn, self.high)))
    self.tx_psn = psn_add(self.tx_psn, n)
    self._sent_to(self.tx_psn)

  def _sent_to(self, psn: int) -> None:
    if psn_delta(psn, self.high) > 0: self.high = psn

  def _send(self, p: roce.Packet, payload: tuple = ()) -> None:
    self.stats.sent += 1
    self.host.transmit(self, roce.encode(self.a.path, p, payload))

  # --- requester: timer
  def _arm(self, restart: bool = False) -> None:
    """Run the ACK timer while packets are unacknowledged: started when the first goes out, restarted on progress
    and on each retransmission, stopped when all are acknowledged. The timer is a deadline; one host timer at a time
    chases it (a restart only moves the deadline), so the wire's thread is not woken for each message."""
    if not (self.wrs and psn_delta(self.high, self.una) > 0) or (t := timeout_s(self.a.timeout)) is None:
      self.deadline = None
      return
    if restart or self.deadline is None: self.deadline = time.monotonic() + t
    if self.timer is None: self.timer = self.host.call_later(self.deadline - time.monotonic(), self._timer)

  def _cancel_timer(self) -> None:
    self.deadline = None                      # the pending host timer, if any, finds no deadline and ends

  def _timer(self) -> None:
    self.timer = None
    if self.deadline is None: return
    if (left := self.deadline - time.monotonic()) > 0:
      self.timer = self.host.call_later(left, self._timer)
      return
    self.deadline = None
    if self.a.state != "RTS" or not self.wrs or self.rnr_wait: return
    self.stats.timeouts += 1
    self._retry(self.una, RETRY_EXC_ERR)

  def _retry(self, psn: int, status: str) -> None:
    """Send again from `psn`, spending a retry, or fail the WR holding it."""
    left = "rnr_left" if status == RNR_RETRY_EXC_ERR else "retry_left"
    if status == RNR_RETRY_EXC_ERR and self.a.rnr_retry == 7: pass      # 7: retry forever (IBA 9.7.5.2.8)
    elif getattr(self, left) == 0:
      self._fail(self._wr_at(psn) or self.wrs[0], status)
      return
    else: setattr(self, left, getattr(self, left) - 1)
    wr = self._wr_at(psn)
    self.tx_psn = psn_add(wr.first_psn, wr.got) if wr is not None and wr.opcode == READ else psn
    self._cancel_timer()
    self._pump()

  def _fail(self, wr: SendWR, status: str) -> None:
    while self.wrs and self.wrs[0] is not wr: self.host.completed(self, self.wrs.popleft(), OK)
    if self.wrs:
      self.wrs.popleft()
      self.host.completed(self, wr, status)
    self.error(f"send WR failed: {status}", status, True)

  # --- requester: responses
  def _acked(self, psn: int) -> None:
    """Everything up to and including `psn` is acknowledged: complete the WRs it covers, in order."""
    if not 0 <= psn_delta(psn, self.una) < max(psn_delta(self.next_psn, self.una), 1): return   # stale or bogus
    self.una = psn_add(psn, 1)
    self.retry_left, self.rnr_left = self.a.retry_cnt, self.a.rnr_retry
    if psn_delta(self.tx_psn, self.una) < 0: self.tx_psn = self.una
    self._arm(restart=True)
    while self.wrs and psn_delta(self.wrs[0].last_psn(), psn) <= 0:
      wr = self.wrs[0]
      if wr.opcode == READ and wr.got < wr.npkts:     # acknowledged past an unfinished READ: its responses were lost
        self.una = psn_add(wr.first_psn, wr.got)
        self.tx_psn = self.una
        break
      self.wrs.popleft()
      self.host.completed(self, wr, OK)

  def _response(self, p: roce.Packet) -> None:
    if p.opcode == roce.ACKNOWLEDGE:
      kind, code = p.syndrome & roce.AETH_KIND_MASK, p.syndrome & 0x1F
      if kind == roce.AETH_ACK: self._acked(p.psn)
      elif kind == roce.AETH_RNR_NAK:
        self.stats.rnr_naks_received += 1
        if self._wr_at(p.psn) is None: return
        self._acked(psn_add(p.psn, -1))
        self.rnr_wait = True
        self._cancel_timer()
        self.host.call_later(roce.RNR_TIMER_US[code] * 1e-6, lambda: self._rnr_done(p.psn))
      elif kind == roce.AETH_NAK:
        self.stats.naks_received += 1
        if self._wr_at(p.psn) is None: return
        self._acked(psn_add(p.psn, -1))
        if code == roce.NAK_PSN_SEQUENCE_ERROR: self._retry(p.psn, RETRY_EXC_ERR)
        else: self._fail(self._wr_at(p.psn), NAK_STATUS.get(code, REM_OP_ERR))
        return
      self._pump()
      return
    wr = self._wr_at(p.psn)
    if wr is None or wr.opcode != READ: return self._drop()          # a response to nothing outstanding
    k = psn_delta(p.psn, wr.first_psn)
    if k != wr.got:                                                    # duplicate, or a response was lost
      if k > wr.got and not self.read_gap:
        self.read_gap = True
        self.tx_psn = psn_add(wr.first_psn, wr.got)
        self._pump()
      return self._drop()
    self.read_gap = False
    n, mtu = wr.npkts, self.a.mtu
    in_place = roce.READ_RESPONSE_LAST if k == n - 1 else roce.READ_RESPONSE_MIDDLE    # this PSN's opcode from the first request
    want = roce.READ_RESPONSE_ONLY if n - wr.req_k == 1 else roce.READ_RESPONSE_FIRST if k == wr.req_k else in_place
    size = min(mtu, wr.length - k * mtu)
    if p.opcode not in (want, in_place if k == wr.req_k > 0 else want) or len(p.payload) != size:
      return self._fail(wr, BAD_RESP_ERR)
    try: wr.local.write(k * mtu, p.payload)
    except DMAFault: return self._fail(wr, LOC_PROT_ERR)
    wr.got += 1
    # an in-sequence response acknowledges everything up to its own PSN (IBA 9.7.5.1.1: responses are implicit ACKs),
    # a MIDDLE too: the timer restarts and the retries are back, and the window (counted from the oldest unacknowledged
    # PSN) moves with the READ, so a re-request after a gap deep into a long READ can still go out
    self._acked(p.psn)
    self._pump()

  def _rnr_done(self, psn: int) -> None:
    self.rnr_wait = False
    if self.a.state == "RTS" and self.wrs: self._retry(psn, RNR_RETRY_EXC_ERR)

  # --- responder
  def receive(self, p: roce.Packet) -> None:
    """A packet addressed to this QP (the NIC model has checked the frame: MAC, IP, UDP, ICRC)."""
    a = self.a
    if a.state not in ("RTR", "RTS") or p.pkey != a.pkey or a.path is None or p.sgid != a.path.dgid or p.dgid != a.path.sgid:
      return self._drop()
    if p.opcode in (roce.ACKNOWLEDGE,) or roce.READ_RESPONSE_FIRST <= p.opcode <= roce.READ_RESPONSE_ONLY:
      if a.state == "RTS": self._response(p)
      return
    d = psn_delta(p.psn, self.epsn)
    if d > 0:
      self.stats.out_of_sequence += 1
      if not self.nak_pending: self._nak(roce.AETH_NAK | roce.NAK_PSN_SEQUENCE_ERROR)
      return
    if d < 0:
      self.stats.duplicates += 1
      if p.opcode == roce.READ_REQUEST: self._read(p, duplicate=True)
      else: self._ack(psn_add(self.epsn, -1))
      return
    self.nak_pending = False
    self._execute(p)

  def _ack(self, psn: int, syndrome: int = roce.AETH_ACK | roce.AETH_CREDITS_INVALID) -> None:
    self._send(roce.Packet(roce.ACKNOWLEDGE, psn, self.a.dest_qpn, pkey=self.a.pkey, syndrome=syndrome, msn=self.msn))

  def _nak(self, syndrome: int) -> None:
    """NAK the expected PSN (sequence error, RNR) and stay there."""
    self.nak_pending = True
    self.stats.naks_sent += syndrome & roce.AETH_KIND_MASK == roce.AETH_NAK
    self.stats.rnr_naks_sent += syndrome & roce.AETH_KIND_MASK == roce.AETH_RNR_NAK
    self._ack(self.epsn, syndrome)

  def _fatal_nak(self, code: int, reason: str, status: str | None = None) -> None:
    """The QP goes to ERR, then NAKs: the requester learns of the error after the responder is in ERR."""
    self.stats.naks_sent += 1
    self.error(reason, status or NAK_STATUS.get(code, REM_OP_ERR), False)
    self._ack(self.epsn, roce.AETH_NAK | code)

  def _drop(self) -> None:
    self.stats.dropped += 1

  def _execute(self, p: roce.Packet) -> None:
    a, op, mtu, n = self.a, p.opcode, self.a.mtu, len(p.payload)
    if op == roce.WRITE_MIDDLE and self.wctx is not None and n == mtu < self.wctx[2]:   # the bulk of a long WRITE
      region, va, left = self.wctx
      try: self._write(region, va, p.payload)
      except DMAFault as e: return self._fatal_nak(roce.NAK_REMOTE_OPERATIONAL_ERROR, f"{p.name}: {e}")
      self.wctx = (region, va + n, left - n)
      self.epsn = psn_add(self.epsn, 1)
      if p.ack_req: self._ack(p.psn)
      return
    mid_write, mid_send = self.wctx is not None, self.sctx is not None
    if op in (roce.WRITE_MIDDLE, roce.WRITE_LAST, roce.WRITE_LAST_IMM) and not mid_write or \
       op in (roce.SEND_MIDDLE, roce.SEND_LAST, roce.SEND_LAST_IMM) and not mid_send or \
       op in roce.FIRST | roce.ONLY | {roce.READ_REQUEST} and (mid_write or mid_send) or \
       mid_write and op not in (roce.WRITE_MIDDLE, roce.WRITE_LAST, roce.WRITE_LAST_IMM) or \
       mid_send and op not in (roce.SEND_MIDDLE, roce.SEND_LAST, roce.SEND_LAST_IMM):
      return self._fatal_nak(roce.NAK_INVALID_REQUEST, f"{p.name} at PSN {p.psn} breaks the opcode sequence")
    if op == roce.READ_REQUEST: return self._read(p)
    last, done = op in roce.LAST or op in roce.ONLY, None     # done: the receive WR the message completes (after its ACK)
    if op in roce.MIDDLE or op in roce.FIRST:
      if n != mtu: return self._fatal_nak(roce.NAK_INVALID_REQUEST, f"{p.name} of {n} bytes: must be a full path MTU ({mtu})")
    elif not 0 < n <= mtu and not (op in roce.ONLY and n == 0):
      return self._fatal_nak(roce.NAK_INVALID_REQUEST, f"{p.name} of {n} bytes with path MTU {mtu}")
    if op in (roce.WRITE_LAST_IMM, roce.WRITE_ONLY_IMM, roce.SEND_FIRST, roce.SEND_ONLY, roce.SEND_ONLY_IMM):
      if not self.recvs: return self._nak(roce.AETH_RNR_NAK | (a.min_rnr_timer & 0x1F))   # receiver not ready: nothing consumed
      if (bad := self.recvs[0]).local_error is not None:
        self.recvs.popleft()
        self.bad_recvs -= 1
        self.host.received(self, bad, bad.local_error, 0, None, False)
        return self._fatal_nak(roce.NAK_REMOTE_OPERATIONAL_ERROR, f"{p.name} consumes a bad receive WQE: {bad.why}", bad.local_error)
    if op in (roce.WRITE_FIRST, roce.WRITE_ONLY, roce.WRITE_ONLY_IMM):
      if not a.access & REMOTE_WRITE:
        return self._fatal_nak(roce.NAK_REMOTE_ACCESS_ERROR, "RDMA WRITE to a QP without remote write access")
      region = self._region(p, REMOTE_WRITE) if p.dma_len else None
      if region is None and p.dma_len: return
      if (op in roce.ONLY) != (p.dma_len <= mtu) or (op in roce.ONLY and n != p.dma_len):
        return self._fatal_nak(roce.NAK_INVALID_REQUEST, f"{p.name} of {n} bytes with DMA length {p.dma_len}")
      self.wctx = (region, p.va, p.dma_len)
    if op in (roce.SEND_FIRST, roce.SEND_ONLY, roce.SEND_ONLY_IMM):
      self.sctx = (self.recvs[0], 0)
    if self.wctx is not None:
      region, va, left = self.wctx
      if n > left or (last and n != left): return self._fatal_nak(roce.NAK_INVALID_REQUEST, f"{p.name}: {n} bytes with {left} left of the RDMA WRITE")
      try:
        if n: self._write(region, va, p.payload)
      except DMAFault as e: return self._fatal_nak(roce.NAK_REMOTE_OPERATIONAL_ERROR, f"{p.name}: {e}")
      self.wctx = None if last else (region, va + n, left - n)
    elif self.sctx is not None:
      wr, got = self.sctx
      if got + n > wr.buffer.length:
        self.recvs.popleft()
        self.sctx = None
        self.host.received(self, wr, LOC_LEN_ERR, got + n, None, False)
        return self._fatal_nak(roce.NAK_INVALID_REQUEST, f"SEND of more than the {wr.buffer.length} bytes posted to receive it", LOC_LEN_ERR)
      try:
        if n: wr.buffer.write(got, p.payload)
      except DMAFault as e:
        self.recvs.popleft()
        self.sctx = None
        self.host.received(self, wr, LOC_PROT_ERR, got, None, False)
        return self._fatal_nak(roce.NAK_REMOTE_OPERATIONAL_ERROR, f"{p.name} into the receive buffer: {e}", LOC_PROT_ERR)
      self.sctx = None if last else (wr, got + n)
      if last: done = (self.recvs.popleft(), got + n, False)
    if op in (roce.WRITE_LAST_IMM, roce.WRITE_ONLY_IMM): done = (self.recvs.popleft(), 0, True)
    if last: self.msn = (self.msn + 1) & 0xFFFFFF
    self.epsn = psn_add(self.epsn, 1)
    if p.ack_req: self._ack(p.psn)
    if done is not None: self.host.received(self, done[0], OK, done[1], p.imm, done[2])

  def _region(self, p: roce.Packet, access: int) -> Region | None:
    """The region p's R_Key names if it grants `access` over p's range; else NAK remote access error (QP to ERR)."""
    region = self.host.lookup_key(self, p.rkey)
    if region is None or not region.allows(p.va, p.dma_len, access):
      what = "no region" if region is None else f"region [{region.va:#x}, +{region.length:#x}) access {region.access:#x}"
      self._fatal_nak(roce.NAK_REMOTE_ACCESS_ERROR, f"{p.name} R_Key {p.rkey:#x} [{p.va:#x}, +{p.dma_len:#x}): {what}")
      return None
    return region

  def _write(self, region: Region, va: int, data: memoryview) -> None:
    for view in region.chunks(va, len(data)):
      view[:] = data[:len(view)]
      data = data[len(view):]

  def _read(self, p: roce.Packet, duplicate: bool = False) -> None:
    a = self.a
    if not a.access & REMOTE_READ or a.max_dest_rd_atomic == 0:
      return self._fatal_nak(roce.NAK_REMOTE_ACCESS_ERROR if not a.access & REMOTE_READ else roce.NAK_INVALID_REQUEST,
                             "RDMA READ to a QP without remote read access or read resources")
    region = self._region(p, REMOTE_READ) if p.dma_len else None
    if region is None and p.dma_len: return
    n = max(1, -(-p.dma_len // a.mtu))
    if not duplicate:
      self.epsn = psn_add(self.epsn, n)
      self.msn = (self.msn + 1) & 0xFFFFFF
    self.responding += 1
    self._respond(region, p.va, p.dma_len, p.psn, 0, n, self.responding)

  def _respond(self, region: Region | None, va: int, length: int, psn: int, k: int, n: int, gen: int) -> None:
    if gen != self.responding: return          # a later READ request ended this response
    mtu, end = self.a.mtu, min(n, k + READ_BURST)
    for i in range(k, end):
      op = roce.READ_RESPONSE_ONLY if n == 1 else roce.READ_RESPONSE_FIRST if i == 0 else \
        roce.READ_RESPONSE_LAST if i == n - 1 else roce.READ_RESPONSE_MIDDLE
      p = roce.Packet(op, psn_add(psn, i), self.a.dest_qpn, pkey=self.a.pkey, syndrome=roce.AETH_ACK | roce.AETH_CREDITS_INVALID, msn=self.msn)
      size = min(mtu, length - i * mtu)
      try: payload = tuple(region.chunks(va + i * mtu, size)) if size > 0 else ()
      except DMAFault as e: return self._fatal_nak(roce.NAK_REMOTE_OPERATIONAL_ERROR, f"RDMA READ response: {e}")
      self._send(p, payload)
    if end < n: self.host.call_later(0, lambda: self.a.state in ("RTR", "RTS") and self._respond(region, va, length, psn, end, n, gen))
