"""CQ and QP (RC): ibv_create_cq/ibv_poll_cq, ibv_create_qp/ibv_modify_qp/ibv_post_send/ibv_post_recv.

The QP state machine and the attributes each transition takes are the IBTA's (vol. 1, 10.3 and the modify-QP
attribute table of 11.2.4.2, which the Linux kernel's ib_modify_qp_is_ok encodes): RESET -> INIT needs the port,
P_Key index and access flags; INIT -> RTR the address vector, path MTU, dest QPN, RQ PSN, responder RDMA READ depth and
minimum RNR timer; RTR -> RTS the ACK timeout, retry counts, SQ PSN and requester RDMA READ depth; every state goes to
RESET or ERR. A wrong transition, a missing or an extra attribute, or a value out of range is a VerbsError naming it.
"""
from __future__ import annotations
import os, time
from collections import deque
from typing import TYPE_CHECKING, Iterable, cast

from drivers.rdma.device_post import device_write
from drivers.rdma.exchange import Endpoint
from drivers.rdma.provider import Completion
from drivers.rdma.verbs import (AHAttr, Access, IMM_OPS, PATH_MTUS, RDMA_OPS, QPAttr, QPAttrMask as M, QPCap, QPState as S,
                                RecvWR, SendWR, SEND_WC, SendFlags, VerbsError, WCError, WCOpcode, WCStatus, WorkCompletion,
                                WROpcode)
if TYPE_CHECKING: from drivers.rdma.context import Context, PD

SPIN_S = 20e-6                       # CQ.wait polls this long before it sleeps on the CQ's completion notification
EVENT_S = 1.0                        # the longest one sleep on a notification lasts before the CQ is polled again
POLL_S, POLL_MAX_S = 10e-6, 250e-6   # a CQ without notifications: sleeps between empty polls double from one to the other
U24, U31, U32, U64 = (1 << 24) - 1, (1 << 31) - 1, (1 << 32) - 1, (1 << 64) - 1
# enum members read on every post and poll, looked up once (Python 3.11 finds a member through a descriptor, ~0.1 us each)
UNSENDABLE, ERR, SUCCESS, RECV, READ = (S.RESET, S.INIT, S.RTR), S.ERR, WCStatus.SUCCESS, WCOpcode.RECV, WROpcode.RDMA_READ

# (current, next) -> (required, optional) attributes besides STATE; any state goes to RESET or ERR with STATE alone
TRANSITIONS = {
  (S.RESET, S.INIT): (M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS, M(0)),
  (S.INIT, S.INIT): (M(0), M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS),
  (S.INIT, S.RTR): (M.AV | M.PATH_MTU | M.DEST_QPN | M.RQ_PSN | M.MAX_DEST_RD_ATOMIC | M.MIN_RNR_TIMER,
                    M.ACCESS_FLAGS | M.PKEY_INDEX),
  (S.RTR, S.RTS): (M.TIMEOUT | M.RETRY_CNT | M.RNR_RETRY | M.SQ_PSN | M.MAX_QP_RD_ATOMIC,
                   M.CUR_STATE | M.ACCESS_FLAGS | M.MIN_RNR_TIMER),
  (S.RTS, S.RTS): (M(0), M.CUR_STATE | M.ACCESS_FLAGS | M.MIN_RNR_TIMER),
}


def _names(mask: M) -> str: return ", ".join(str(m.name) for m in M if m & mask)


def _uint(qp: QP, wr: SendWR, name: str, v, hi: int) -> None:
  """A work request's field `name` is an int in [0, hi] (bool is not)."""
  if (v.__class__ is not int and (isinstance(v, bool) or not isinstance(v, int))) or not 0 <= v <= hi:
    raise VerbsError(f"QP {qp.qp_num:#x}: {wr.describe()}: {name} {v!r} is outside [0, {hi:#x}]")


def _field(qp: QP, name: str, value, lo: int, hi: int) -> None:
  if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
    raise VerbsError(f"QP {qp.qp_num:#x}: {name} {value!r} is outside [{lo}, {hi}]")


class CQ:
  """A completion queue. poll() returns successful completions and raises WCError for an error completion
  (the completions before it are returned first)."""
  def __init__(self, ctx: Context, cqe: int):
    if cqe < 1: raise ValueError(f"a CQ needs room for at least one completion, not {cqe}")
    if cqe > (most := ctx.provider.max_cqe): raise ValueError(f"a CQ of {cqe} completions: {ctx.name}'s CQs hold at most {most}")
    self.ctx, self.hw = ctx, ctx.provider.create_cq(cqe)
    self.depth = self.hw.depth
    self._wait_event = getattr(self.hw, "wait_event", None)   # optional in the provider interface
    self._ready: deque[WorkCompletion] = deque()
    self.expected = 0                 # posted work requests whose completion this CQ will hold
    self.qps: set[int] = set()

  def _reserve(self, n: int, what: str) -> None:
    if self.expected + n > self.depth:
      raise VerbsError(f"{self.ctx.name}: posting {n} more {what} would overflow the CQ ({self.expected} of {self.depth} "
                       "completions outstanding): poll it first")
    self.expected += n

  def poll(self, num_entries: int = 16) -> list[WorkCompletion]:
    if self.ctx.closed: raise self.ctx.gone("poll")
    ready = self._ready
    while len(ready) < num_entries and (got := self.hw.poll(num_entries - len(ready))):
      for c in got: self._resolve(c)
    out: list[WorkCompletion] = []
    while ready and len(out) < num_entries:
      if ready[0].status != SUCCESS:
        if out: break
        raise WCError(ready.popleft())
      out.append(ready.popleft())
    return out

  def _resolve(self, c: Completion) -> None:
    if (qp := self.ctx.qps.get(c.qp_num)) is None:
      raise VerbsError(f"{self.ctx.name}: a completion for QP {c.qp_num:#x}, which this context has not created")
    qp._complete(c)

  def wait(self, n: int = 1, timeout_s: float = 10.0) -> list[WorkCompletion]:
    """Poll until `n` completions arrived; TimeoutError when none arrives for `timeout_s`. An error completion raises
    WCError with the successful ones polled before it in `.completed`. Between empty polls it spins for SPIN_S
    (yielding the CPU between polls), then sleeps until the CQ notifies its next completion (ibv_req_notify_cq + a
    completion channel); a provider whose CQ cannot notify is polled with growing sleeps."""
    out: list[WorkCompletion] = []
    deadline, spin_until, nap = time.monotonic() + timeout_s, None, POLL_S
    while len(out) < n:
      try: got = self.poll(n - len(out))
      except WCError as e:
        e.completed = out
        raise
      now = time.monotonic()
      if got:
        out += got
        deadline, spin_until, nap = now + timeout_s, None, POLL_S
        continue
      if now > deadline:
        pending = [self.ctx.qps[q].describe_outstanding() for q in sorted(self.qps)]
        raise TimeoutError(f"{self.ctx.name}: {len(out)} of {n} completions arrived and then none for {timeout_s} s; "
                           f"outstanding: {'; '.join(p for p in pending if p) or 'nothing'}")
      if spin_until is None: spin_until = now + SPIN_S             # the first empty poll starts the spin
      if now < spin_until:
        os.sched_yield()                   # (lets other threads, a NIC model's among them, have the interpreter)
        continue
      if self._wait_event is None or not self._wait_event(min(deadline - now, EVENT_S)):
        time.sleep(nap)
        nap = min(2 * nap, POLL_MAX_S)
    return out

  def destroy(self) -> None:
    if self.qps: raise VerbsError(f"{self.ctx.name}: the CQ is still used by QP {', '.join(f'{q:#x}' for q in sorted(self.qps))}")
    self.hw.destroy()


class QP:
  """A reliable-connected queue pair (ibv_qp), created in RESET."""
  def __init__(self, pd: PD, send_cq: CQ, recv_cq: CQ, cap: QPCap):
    prov = pd.ctx.provider
    for name, v in (("max_send_wr", cap.max_send_wr), ("max_recv_wr", cap.max_recv_wr)):
      if v < 1: raise ValueError(f"{name} must be at least 1, not {v}")
      if v > prov.max_qp_wr: raise ValueError(f"{name} {v}: {prov.name}'s queues hold at most {prov.max_qp_wr} work requests")
    for name, v in (("max_send_sge", cap.max_send_sge), ("max_recv_sge", cap.max_recv_sge)):
      if not 1 <= v <= prov.max_sge: raise ValueError(f"{name} {v} is outside [1, {prov.max_sge}] for {prov.name}")
    self.pd, self.ctx, self.send_cq, self.recv_cq, self.cap = pd, pd.ctx, send_cq, recv_cq, cap
    self.hw = prov.create_qp(pd.handle, send_cq.hw, recv_cq.hw, cap)
    self.qp_num, self.state = self.hw.qp_num, S.RESET
    self.sq: deque[tuple[int, SendWR]] = deque()
    self.rq: deque[tuple[int, RecvWR]] = deque()
    self._sq_seq = self._rq_seq = 0
    self.device_posted: set[int] = set()                # outstanding requests another device posts (device_post.py)
    self.device_maps: dict = {}                         # device -> what it maps to post them (freed at destroy)
    self.ctx.qps[self.qp_num] = self
    send_cq.qps.add(self.qp_num)
    recv_cq.qps.add(self.qp_num)

  # --- the state machine
  def modify(self, attr: QPAttr, mask: M) -> None:
    """ibv_modify_qp: move to attr.qp_state (mask STATE) with the attributes the mask names."""
    if self.ctx.closed: raise self.ctx.gone("modify")
    mask, cur = M(mask), self.state
    if mask & M.CUR_STATE and attr.cur_qp_state != cur:
      raise VerbsError(f"QP {self.qp_num:#x} is in {cur.name}, not {attr.cur_qp_state!r} (cur_qp_state)")
    if mask & M.STATE and not isinstance(attr.qp_state, S):
      raise VerbsError(f"QP {self.qp_num:#x}: the mask has STATE but qp_state is {attr.qp_state!r}")
    new = attr.qp_state if mask & M.STATE and isinstance(attr.qp_state, S) else cur   # STATE with no S raised above
    if mask & M.STATE and new in (S.RESET, S.ERR): required, optional = M(0), M(0)
    elif (cur, new) in TRANSITIONS: required, optional = TRANSITIONS[(cur, new)]
    else:
      nexts = [n.name for c, n in TRANSITIONS if c == cur and n != cur] + ["RESET", "ERR"]
      raise VerbsError(f"QP {self.qp_num:#x}: {cur.name} -> {new.name} is not a transition of an RC QP; from {cur.name} "
                       f"it goes to {', '.join(nexts)}" + ("" if mask & M.STATE or cur in (S.INIT, S.RTS) else
                                                          " (the mask has no STATE: it stays in its state)"))
    if missing := required & ~mask:
      raise VerbsError(f"QP {self.qp_num:#x}: {cur.name} -> {new.name} needs {_names(missing)} in the mask and the attributes")
    if extra := mask & ~(required | optional | M.STATE):
      allowed = _names(required | optional) or "nothing but STATE"
      raise VerbsError(f"QP {self.qp_num:#x}: {cur.name} -> {new.name} does not take {_names(extra)} (it takes {allowed})")
    self._check_values(attr, mask)
    self.hw.modify(cur, new, attr, mask)
    self.state = new
    if new == S.ERR: self._flush()
    elif new == S.RESET:    # RESET empties both work queues without completions (IBTA 10.3.1)
      for q, cq in ((self.sq, self.send_cq), (self.rq, self.recv_cq)):
        cq.expected -= len(q)
        q.clear()
      self.device_posted.clear()

  def connect(self, remote: Endpoint, psn: int, access: Access = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ,
              sgid_index: int = 0, mtu: int = 4096, timeout: int = 14, retry_cnt: int = 7, rnr_retry: int = 7) -> None:
    """RESET -> INIT -> RTR -> RTS toward `remote`, sending from PSN `psn` (what perftest's ctx_connect does)."""
    rd = min(self.ctx.provider.max_rd_atomic, 16)
    self.modify(QPAttr(S.INIT, qp_access_flags=access, pkey_index=0, port_num=self.ctx.port_num),
                M.STATE | M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS)
    self.modify(QPAttr(S.RTR, ah_attr=AHAttr(remote.gid, sgid_index, remote.mac), dest_qp_num=remote.qpn, rq_psn=remote.psn,
                       path_mtu=min(mtu, remote.mtu, self.ctx.provider.max_mtu), max_dest_rd_atomic=rd, min_rnr_timer=12),
                M.STATE | M.AV | M.PATH_MTU | M.DEST_QPN | M.RQ_PSN | M.MAX_DEST_RD_ATOMIC | M.MIN_RNR_TIMER)
    self.modify(QPAttr(S.RTS, sq_psn=psn, timeout=timeout, retry_cnt=retry_cnt, rnr_retry=rnr_retry, max_rd_atomic=rd),
                M.STATE | M.TIMEOUT | M.RETRY_CNT | M.RNR_RETRY | M.SQ_PSN | M.MAX_QP_RD_ATOMIC)

  def endpoint(self, psn: int, gid_index: int = 0) -> Endpoint:
    """What the peer needs to connect to this QP."""
    return Endpoint(self.qp_num, psn, self.ctx.query_gid(gid_index), self.ctx.mac, self.ctx.provider.max_mtu)

  def _check_values(self, a: QPAttr, mask: M) -> None:
    prov = self.ctx.provider
    if mask & M.PORT: self.ctx._check_port(a.port_num)
    if mask & M.PKEY_INDEX: _field(self, "pkey_index", a.pkey_index, 0, 0)   # one P_Key: the default 0xffff
    if mask & M.ACCESS_FLAGS and (not isinstance(a.qp_access_flags, int) or a.qp_access_flags & ~sum(Access)):
      raise VerbsError(f"QP {self.qp_num:#x}: qp_access_flags {a.qp_access_flags!r} are not Access flags")
    if mask & M.AV:
      ah = a.ah_attr
      if ah is None: raise VerbsError(f"QP {self.qp_num:#x}: the mask has AV but ah_attr is None")
      if not isinstance(ah.dgid, (bytes, bytearray)) or len(ah.dgid) != 16:
        raise VerbsError(f"QP {self.qp_num:#x}: ah_attr.dgid must be 16 bytes, not {ah.dgid!r}")
      if ah.sgid_index not in self.ctx.gid_table:
        raise VerbsError(f"QP {self.qp_num:#x}: ah_attr.sgid_index {ah.sgid_index} is not in {self.ctx.name}'s GID table "
                         f"({self.ctx._gids()})")
      if not isinstance(ah.dmac, (bytes, bytearray)) or len(ah.dmac) != 6:
        raise VerbsError(f"QP {self.qp_num:#x}: RoCE needs the peer's Ethernet address: ah_attr.dmac must be 6 bytes, "
                         f"not {ah.dmac!r}")
      _field(self, "ah_attr.hop_limit", ah.hop_limit, 0, 255)
      _field(self, "ah_attr.traffic_class", ah.traffic_class, 0, 255)
      _field(self, "ah_attr.flow_label", ah.flow_label, 0, (1 << 20) - 1)
    if mask & M.PATH_MTU and (a.path_mtu not in PATH_MTUS or a.path_mtu > prov.max_mtu):
      raise VerbsError(f"QP {self.qp_num:#x}: path_mtu {a.path_mtu!r} is not one of "
                       f"{', '.join(str(m) for m in PATH_MTUS if m <= prov.max_mtu)} bytes")
    for bit, name, hi in ((M.DEST_QPN, "dest_qp_num", U24), (M.RQ_PSN, "rq_psn", U24), (M.SQ_PSN, "sq_psn", U24),
                          (M.TIMEOUT, "timeout", 31), (M.RETRY_CNT, "retry_cnt", 7), (M.RNR_RETRY, "rnr_retry", 7),
                          (M.MIN_RNR_TIMER, "min_rnr_timer", 31), (M.MAX_QP_RD_ATOMIC, "max_rd_atomic", prov.max_rd_atomic),
                          (M.MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic", prov.max_rd_atomic)):
      if mask & bit: _field(self, name, getattr(a, name), 0, hi)

  # --- work requests
  def post_send(self, wrs: SendWR | Iterable[SendWR]) -> None:
    """ibv_post_send: the requests go to the hardware in order, with one doorbell."""
    wrs = [wrs] if isinstance(wrs, SendWR) else list(wrs)
    if self.ctx.closed: raise self.ctx.gone("post_send")
    if (state := self.state) in UNSENDABLE:
      raise VerbsError(f"QP {self.qp_num:#x} is in {state.name}: post_send needs RTS (modify it INIT -> RTR -> RTS first)")
    for wr in wrs: self._check_send(wr)
    if self.device_posted:
      raise VerbsError(f"QP {self.qp_num:#x}: {len(self.device_posted)} request(s) a device's queue posts (Queue.rdma_write) "
                       "are outstanding; the host posts on this QP once their completions are polled (the device rings "
                       "the doorbell for its slot only when its queue gets there)")
    n, sq, seq = len(wrs), self.sq, self._sq_seq
    if len(sq) + n > self.cap.max_send_wr:
      raise VerbsError(f"QP {self.qp_num:#x}: the send queue holds {self.cap.max_send_wr} work requests and {len(sq)} "
                       f"are outstanding; poll the CQ before posting {n} more")
    self.send_cq._reserve(n, "send requests")
    batch = [(seq, wrs[0])] if n == 1 else [(seq + i, wr) for i, wr in enumerate(wrs)]
    self._sq_seq = seq + n
    sq.extend(batch)
    if state == ERR: self._flush()               # a QP in ERR completes new requests as flushed
    else: self.hw.post_send(batch)

  def _check_send(self, wr: SendWR) -> None:
    op, sges = wr.opcode, wr.sg_list
    if not isinstance(op, WROpcode): raise VerbsError(f"QP {self.qp_num:#x}: opcode {op!r} is not a WROpcode")
    if len(sges) > self.cap.max_send_sge:
      raise VerbsError(f"QP {self.qp_num:#x}: {wr.describe()} has {len(sges)} SGEs; the QP takes {self.cap.max_send_sge}")
    if op == READ and not sges:
      raise VerbsError(f"QP {self.qp_num:#x}: {wr.describe()} needs an SGE to read into")
    length = 0
    for s in sges:
      _uint(self, wr, "SGE addr", s.addr, U64)
      _uint(self, wr, "SGE length", s.length, U31)
      _uint(self, wr, "SGE lkey", s.lkey, U32)
      length += s.length
    if length > U31: raise VerbsError(f"QP {self.qp_num:#x}: {wr.describe()} is longer than 2^31 - 1 bytes")
    if op in RDMA_OPS:
      _uint(self, wr, "remote_addr", wr.remote_addr, U64)
      _uint(self, wr, "rkey", wr.rkey, U32)
    if op in IMM_OPS: _uint(self, wr, "imm_data", wr.imm_data, U32)

  def device_write(self, device, local, remote, size: int | None = None, local_offset: int = 0, remote_offset: int = 0,
                   wr_id: int = 0):
    """An RDMA WRITE for `device`'s queue to post itself (hcq's Queue.rdma_write calls this): -> its DeviceCommands.
    See drivers/rdma/device_post.py."""
    return device_write(self, device, local, remote, size, local_offset, remote_offset, wr_id)

  def check_device_post(self, wr: SendWR) -> None:
    """What post_send checks, and that the place of the request's completion in the send CQ is known."""
    if self.state != S.RTS: raise VerbsError(f"QP {self.qp_num:#x} is in {self.state.name}: a device posts on a QP in RTS")
    self._check_send(wr)
    if len(self.sq) + 1 > self.cap.max_send_wr:
      raise VerbsError(f"QP {self.qp_num:#x}: the send queue holds {self.cap.max_send_wr} work requests and {len(self.sq)} "
                       "are outstanding; poll the CQ first")
    cq, unsignaled = self.send_cq, sum(not w.send_flags & SendFlags.SIGNALED for _, w in self.sq)
    if (others := cq.expected - len(self.sq)) or unsignaled:
      raise VerbsError(f"QP {self.qp_num:#x}: a device-posted request waits for its completion at a known place in the send "
                       f"CQ, but the CQ has {others} completion(s) outstanding for other queues and this QP has "
                       f"{unsignaled} unsignaled request(s) outstanding: give the QP a send CQ of its own, or poll first")
    if cq.expected + 1 > cq.depth:
      raise VerbsError(f"{self.ctx.name}: one more send request would overflow the CQ ({cq.expected} of {cq.depth} "
                       "completions outstanding): poll it first")

  def take_device_post(self, wr: SendWR) -> int:
    """Take the request's place (checked by check_device_post) -> its sequence number."""
    self.send_cq._reserve(1, "send requests")
    seq, self._sq_seq = self._sq_seq, self._sq_seq + 1
    self.sq.append((seq, wr))
    self.device_posted.add(seq)
    return seq

  def post_recv(self, wrs: RecvWR | Iterable[RecvWR]) -> None:
    """ibv_post_recv: buffers for incoming SENDs (and the completion of RDMA WRITE with immediate)."""
    wrs = [wrs] if isinstance(wrs, RecvWR) else list(wrs)
    if self.ctx.closed: raise self.ctx.gone("post_recv")
    if self.state == S.RESET: raise VerbsError(f"QP {self.qp_num:#x} is in RESET: post_recv needs INIT, RTR or RTS")
    for wr in wrs:
      if len(wr.sg_list) > self.cap.max_recv_sge:
        raise VerbsError(f"QP {self.qp_num:#x}: receive wr_id {wr.wr_id} has {len(wr.sg_list)} SGEs; the QP takes "
                         f"{self.cap.max_recv_sge}")
    if len(self.rq) + len(wrs) > self.cap.max_recv_wr:
      raise VerbsError(f"QP {self.qp_num:#x}: the receive queue holds {self.cap.max_recv_wr} work requests and {len(self.rq)} "
                       "are outstanding")
    self.recv_cq._reserve(len(wrs), "receive requests")
    batch = [(self._rq_seq + i, wr) for i, wr in enumerate(wrs)]
    self._rq_seq += len(wrs)
    self.rq.extend(batch)
    if self.state == S.ERR: self._flush()
    else: self.hw.post_recv(batch)

  # --- completions (called by the CQ that polled them)
  def _complete(self, c: Completion) -> None:
    recv, seq = c.recv, c.seq
    q, cq = (self.rq, self.recv_cq) if recv else (self.sq, self.send_cq)
    if not q or not q[0][0] <= seq <= q[-1][0]:
      raise VerbsError(f"{self.ctx.name}: QP {self.qp_num:#x} completed {'receive' if recv else 'send'} request #{seq}, "
                       "which is not outstanding")
    while q[0][0] < seq:            # unsignaled requests before it completed without a record (IBTA 10.8.3.1)
      q.popleft()
      cq.expected -= 1
    _, wr = q.popleft()
    cq.expected -= 1
    if recv: opcode, length = c.opcode or RECV, c.byte_len
    else:
      if self.device_posted: self.device_posted.discard(seq)
      swr = cast(SendWR, wr)
      opcode, length = SEND_WC[swr.opcode], c.byte_len or swr.length
    cq._ready.append(WorkCompletion(wr.wr_id, c.status, opcode, self.qp_num, length, c.imm_data, c.vendor_err,
                                    c.vendor_status, wr))
    if c.status != SUCCESS and self.state != ERR:
      self.state = ERR             # an error completion puts the QP in ERR: the rest is flushed (IBTA 10.8.3.3)
      self._flush()

  def _flush(self) -> None:
    self.device_posted.clear()
    for q, cq, recv in ((self.sq, self.send_cq, False), (self.rq, self.recv_cq, True)):
      while q:
        _, wr = q.popleft()
        cq.expected -= 1
        opcode = WCOpcode.RECV if recv else SEND_WC[cast(SendWR, wr).opcode]
        cq._ready.append(WorkCompletion(wr.wr_id, WCStatus.WR_FLUSH_ERR, opcode, self.qp_num, wr=wr))

  def describe_outstanding(self) -> str:
    parts = [f"{len(q)} {kind} (first: {q[0][1].describe()})"
             for q, kind in ((self.sq, "send"), (self.rq, "receive")) if q]
    return f"QP {self.qp_num:#x} ({self.state.name}): {', '.join(parts)}" if parts else ""

  def unmap_devices(self) -> None:
    """Devices that post on this QP stop reaching its queues' memory and doorbell (before that memory goes)."""
    for maps in self.device_maps.values():
      for buf in maps.values(): buf.free()
    self.device_maps.clear()

  def destroy(self) -> None:
    self.unmap_devices()
    self.hw.destroy()
    self.ctx.qps.pop(self.qp_num, None)
    for cq, q in ((self.send_cq, self.sq), (self.recv_cq, self.rq)):
      cq.qps.discard(self.qp_num)
      cq.expected -= len(q)
      q.clear()

  def __repr__(self) -> str: return f"<QP {self.qp_num:#x} RC {self.state.name}>"
