"""The data plane of compute.distributed: one RC queue pair per peer (a full mesh), the landing slots each rank opens to
its peers, and the engine that moves a collective's chunks over them.

Flow control is by credits, per direction of a link: each rank keeps SLOTS slots of CHUNK bytes for each peer in its
landing MR, and a sender holds one credit per free slot. A chunk goes out as one RDMA WRITE WITH IMMEDIATE into
slot `seq % SLOTS` of the receiver; the immediate (`tag << 28 | seq << 21 | length`) raises a receive completion there
(a WRITE with immediate consumes a posted receive: IBTA vol. 1, 9.4.1.1), so the receiver learns the chunk landed
without polling memory. Once it consumed the slot (reduced into or copied to its work buffer, on the GPU) it returns
the credit with a SEND WITH IMMEDIATE of no data (`CREDIT | n`: the slots freed since the last one). `tag` counts the
collectives each link carried: a chunk of another collective, out of sequence or of another length than the receiver
expects (the ranks called different collectives, or with different sizes) is an error naming the peer, never data
folded into the wrong result. The length travels in the immediate because not every NIC reports it for a WRITE with
immediate (mlx5's CQE does, bnxt's carries 0).

A chunk that lands before this rank reached the collective it belongs to waits in its slot (no credit goes back)
until that collective consumes it. A peer that dies leaves its QP's WRITEs unacknowledged until the retry count is
exhausted (an error completion) and its chunks missing (no progress for `timeout_s`): both end the collective with
a DistributedError naming the peer and the collective.
"""
from __future__ import annotations
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from drivers.hcq import Buffer as HCQBuffer, Device as HCQDevice
from drivers.rdma import MR, QP, RecvWR, SendWR, VerbsError, WCError, WCOpcode, WROpcode
from drivers.rdma.queues import CQ

CHUNK = 1 << 20            # bytes per landing slot: a chunk is one RDMA WRITE
SLOTS = 4                  # slots per sender at each receiver (its credits)
RECVS = 2 * SLOTS + 2      # receives posted per QP: at most SLOTS chunks and SLOTS credits are in flight toward it
SENDS = 4 * SLOTS          # send queue depth per QP (chunks and credits)
CREDIT = 1 << 31           # an immediate with this bit returns credits (its low bits: how many)
BYE = 1 << 30              # with CREDIT: the peer is leaving, and sends nothing after this
TAG_SHIFT, SEQ_SHIFT = 28, 21 # a chunk's immediate: tag (3 bits), seq mod 128 (7 bits), length (21 bits: up to CHUNK)
TAG_MASK, SEQ_MASK, LEN_MASK = 0x7, 0x7f, (1 << SEQ_SHIFT) - 1
assert CHUNK <= LEN_MASK


class DistributedError(RuntimeError):
  """A collective failed: the message names the collective, this rank and the peer rank it could not reach."""


@dataclass(eq=False)
class Recv:
  """A chunk from `peer` into [offset, offset+length) of the work buffer: combined with the bytes at `operand` (the
  same length) when that is given, else copied. `done` once the device work that lands it has finished."""
  peer: int
  offset: int
  length: int
  operand: int | None = None
  done: bool = False

  @property
  def reduce(self) -> bool: return self.operand is not None


@dataclass(eq=False)
class Send:
  """A chunk of the work buffer to `peer`, posted once `after` (a Recv whose data it forwards) is done."""
  peer: int
  offset: int
  length: int
  after: Recv | None = None


@dataclass(eq=False)
class Link:
  """The RC connection to one peer rank."""
  peer: int
  qp: QP
  remote_addr: int           # the first of our SLOTS slots in the peer's landing MR
  rkey: int
  slots: HCQBuffer           # the peer's SLOTS slots in our landing MR
  credits: int = SLOTS
  send_seq: int = 0
  recv_seq: int = 0
  tag: int = 0
  freed: int = 0             # slots consumed whose credit has not gone back yet
  sends_out: int = 0         # posted send requests not completed yet
  arrived: deque = field(default_factory=deque)   # (seq, tag, length) of chunks landed but not consumed yet
  wr_ids: int = 0
  bye: bool = False          # the peer said it leaves


class Plan:
  """The chunks of one collective: sends and receives per peer, in the order they go on the wire. Chunks of no
  bytes are left out (both sides compute the same plan); a send after one of them does not wait."""
  def __init__(self) -> None:
    self.sends: dict[int, deque[Send]] = {}
    self.recvs: dict[int, deque[Recv]] = {}

  def recv(self, peer: int, offset: int, length: int, operand: int | None = None) -> Recv | None:
    if length == 0: return None
    r = Recv(peer, offset, length, operand)
    self.recvs.setdefault(peer, deque()).append(r)
    return r

  def send(self, peer: int, offset: int, length: int, after: Recv | None = None) -> None:
    if length: self.sends.setdefault(peer, deque()).append(Send(peer, offset, length, after))


class Engine:
  """Runs plans over the links of one rank. `consume(recv, slot)` starts the device work that folds a landed chunk
  into the work buffer and returns the device's timeline value that marks it done (None: done already); the slot's
  credit goes back, and sends that forward the chunk go out, once the device reached that value. Meanwhile the engine
  keeps posting and polling, so the wire carries the next chunks while the device reduces the ones before."""
  def __init__(self, rank: int, links: dict[int, Link], cq: CQ, timeout_s: float, device: HCQDevice):
    self.rank, self.links, self.cq, self.timeout_s, self.device = rank, links, cq, timeout_s, device
    self.by_qp = {l.qp.qp_num: l for l in links.values()}
    self.failed: str | None = None
    self.pending: deque[tuple[int, Recv, Link]] = deque()   # chunks whose device work runs: (timeline value, recv, link)
    self.active: tuple | None = None   # the plan running: (what, plan, work MR, consume, timeout)
    for l in links.values(): l.qp.post_recv([RecvWR(i) for i in range(RECVS)])

  def run(self, what: str, plan: Plan, work_mr: MR, consume: Callable[[Recv, HCQBuffer], int | None],
          timeout_s: float | None = None) -> None:
    """Run `plan` to its end."""
    self.start(what, plan, work_mr, consume, timeout_s)
    self.finish()

  def start(self, what: str, plan: Plan, work_mr: MR, consume: Callable[[Recv, HCQBuffer], int | None],
            timeout_s: float | None = None) -> None:
    """Begin `plan` (its first chunks go out) and return; poll() moves it on, finish() runs it to its end. One plan
    runs at a time."""
    if self.failed is not None: raise DistributedError(f"{what}: the process group failed earlier ({self.failed})")
    if self.active is not None: raise RuntimeError(f"{what}: {self.active[0]} is still running on rank {self.rank}")
    for peer in set(plan.sends) | set(plan.recvs): self.links[peer].tag = (self.links[peer].tag + 1) & TAG_MASK
    self.active = (what, plan, work_mr, consume, self.timeout_s if timeout_s is None else timeout_s)
    self._guard(False)

  def poll(self) -> bool:
    """Move the running plan on without blocking: True once it is done (or when none runs)."""
    return self.active is None or self._guard(False)

  def finish(self) -> None:
    """Block until the running plan is done."""
    while self.active is not None and not self._guard(True): pass

  def _guard(self, block: bool) -> bool:
    assert self.active is not None
    what = self.active[0]
    try: done = self._step(block)
    except BaseException as e:   # the links' state is unknown now: no collective runs on them again
      self.active = None
      self.failed = str(e) if isinstance(e, DistributedError) else f"{what} on rank {self.rank}: {type(e).__name__}: {e}"
      raise
    if done: self.active = None
    return done

  def _step(self, block: bool) -> bool:
    """One pass: fold what landed, finish what the device did, post what may go, take completions (waiting for one
    when `block` and nothing else moved). -> whether the plan is done."""
    assert self.active is not None
    what, plan, work_mr, consume, timeout_s = self.active
    sends, recvs = plan.sends, plan.recvs
    moved = self._consume(what, recvs, consume) | self._landed() | self._post(sends, work_mr)
    self._credit()
    if not any(sends.values()) and not any(recvs.values()) and not self.pending and not any(l.sends_out for l in self.links.values()):
      return True
    try:
      if moved or self.pending or not block: wcs = self.cq.poll(64)
      else: wcs = self.cq.wait(1, timeout_s)
      if block and not wcs and not moved and self.pending: self.device.timeline.wait(self.pending[0][0])   # nothing on the wire to do
    except WCError as e:
      link = self.by_qp.get(e.wc.qp_num)
      peer = f"rank {link.peer}" if link else f"QP {e.wc.qp_num:#x}"
      raise DistributedError(f"{what} on rank {self.rank}: the connection to {peer} failed ({peer} died or stopped "
                             f"answering?): {e}") from None
    except TimeoutError:
      raise DistributedError(f"{what} on rank {self.rank}: no progress for {timeout_s:g} s waiting for "
                             f"{self._waiting(sends, recvs)} (did that rank die, or call another collective?)") from None
    except VerbsError as e: raise DistributedError(f"{what} on rank {self.rank}: {e}") from None
    for wc in wcs: self._completion(what, wc)
    return False

  def goodbye(self) -> None:
    """Tell every peer this rank leaves and wait until each said the same (or the timeout passed): a rank that left
    at once could leave a peer's last credit unacknowledged, which that peer would report as a failure. A process
    group that failed skips this."""
    if self.failed is not None: return
    for link in self.links.values():
      link.qp.post_send(SendWR(self._wr_id(link), WROpcode.SEND_WITH_IMM, [], imm_data=CREDIT | BYE))
      link.sends_out += 1
    while any(not l.bye or l.sends_out for l in self.links.values()):
      try: wcs = self.cq.wait(1, self.timeout_s)
      except WCError as e:      # a peer that said bye may be gone before our last message's acknowledgement
        if not (link := self.by_qp[e.wc.qp_num]).bye: return
        link.sends_out = 0
        continue
      except (TimeoutError, VerbsError): return
      for wc in wcs:
        if (link := self.by_qp[wc.qp_num]).bye and wc.opcode not in (WCOpcode.RDMA_WRITE, WCOpcode.SEND): continue
        self._completion("goodbye", wc)

  def _waiting(self, sends: dict[int, deque[Send]], recvs: dict[int, deque[Recv]]) -> str:
    parts = [f"a chunk from rank {p} ({len(q)} to come)" for p, q in sorted(recvs.items()) if q]
    parts += [f"a free slot at rank {p} ({len(q)} chunks to send)" for p, q in sorted(sends.items())
              if q and self.links[p].credits == 0]
    parts += [f"rank {l.peer} to acknowledge {l.sends_out} writes" for l in self.links.values() if l.sends_out]
    return ", ".join(parts) or "nothing"

  def _post(self, sends: dict[int, deque[Send]], work_mr: MR) -> bool:
    moved = False
    for peer, q in sends.items():
      link = self.links[peer]
      batch: list[SendWR] = []
      while q and link.credits and link.sends_out + len(batch) < SENDS and (q[0].after is None or q[0].after.done):
        s = q.popleft()
        slot = link.send_seq % SLOTS
        imm = link.tag << TAG_SHIFT | (link.send_seq & SEQ_MASK) << SEQ_SHIFT | s.length
        batch.append(SendWR(self._wr_id(link), WROpcode.RDMA_WRITE_WITH_IMM, [work_mr.sge(s.offset, s.length)], imm_data=imm,
                            remote_addr=link.remote_addr + slot * CHUNK, rkey=link.rkey))
        link.credits -= 1
        link.send_seq += 1
      if batch:
        link.qp.post_send(batch)
        link.sends_out += len(batch)
        moved = True
    return moved

  def _wr_id(self, link: Link) -> int:
    link.wr_ids += 1
    return link.wr_ids

  def _completion(self, what: str, wc) -> None:
    link = self.by_qp[wc.qp_num]
    if wc.opcode in (WCOpcode.RDMA_WRITE, WCOpcode.SEND):
      link.sends_out -= 1
      return
    link.qp.post_recv(RecvWR(self._wr_id(link)))      # the receive it consumed, again
    imm = wc.imm_data
    if imm is None:
      raise DistributedError(f"{what} on rank {self.rank}: rank {link.peer} sent a message without immediate data")
    if imm & CREDIT and imm & BYE:
      link.bye = True
      return
    if imm & CREDIT:
      link.credits += imm & ~CREDIT
      if link.credits > SLOTS:
        raise DistributedError(f"{what} on rank {self.rank}: rank {link.peer} returned more credits than it holds slots")
      return
    if imm >> SEQ_SHIFT & SEQ_MASK != link.recv_seq & SEQ_MASK:
      raise DistributedError(f"{what} on rank {self.rank}: rank {link.peer} sent chunk #{imm >> SEQ_SHIFT & SEQ_MASK}, "
                             f"expected #{link.recv_seq & SEQ_MASK}")
    link.arrived.append((link.recv_seq, imm >> TAG_SHIFT & TAG_MASK, imm & LEN_MASK))
    link.recv_seq += 1

  def _consume(self, what: str, recvs: dict[int, deque[Recv]], consume: Callable[[Recv, HCQBuffer], int | None]) -> bool:
    moved = False
    for peer, q in recvs.items():
      link = self.links[peer]
      while q and link.arrived:
        seq, tag, length = link.arrived.popleft()
        r = q.popleft()
        if tag != link.tag or length != r.length:
          raise DistributedError(f"{what} on rank {self.rank}: rank {peer} sent a {length}-byte chunk of collective "
                                 f"#{tag}, while this rank expects {r.length} bytes of #{link.tag}: the ranks called "
                                 "different collectives, or with different sizes")
        value = consume(r, link.slots.view((seq % SLOTS) * CHUNK, CHUNK))
        if value is None: self._done(r, link)
        else: self.pending.append((value, r, link))
        moved = True
    return moved

  def _landed(self) -> bool:
    """Finish the chunks whose device work is done (in the order it was queued): their sends may go, their slots free."""
    pending, timeline = self.pending, self.device.timeline
    if not pending: return False
    if timeline.value < pending[0][0]:
      self.device.check_faults()
      self.device.progress()       # where the host sees a copy of what the device wrote, bring it up to date
      if timeline.value < pending[0][0]: return False
    while pending and timeline.value >= pending[0][0]:
      _, r, link = pending.popleft()
      self._done(r, link)
    return True

  def _done(self, r: Recv, link: Link) -> None:
    r.done = True
    link.freed += 1

  def _credit(self) -> None:
    """Give the slots freed in this pass back: one SEND WITH IMMEDIATE per link, whatever their number."""
    for link in self.links.values():
      if link.freed:
        link.qp.post_send(SendWR(self._wr_id(link), WROpcode.SEND_WITH_IMM, [], imm_data=CREDIT | link.freed))
        link.sends_out += 1
        link.freed = 0
