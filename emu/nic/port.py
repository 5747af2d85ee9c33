"""The Ethernet port of an emulated RoCE NIC, vendor-neutral: what a NIC model (bnxt, mlx5) plugs its QPs into.

A `RoCEPort` owns the NIC's `WirePort` (emu/nic/wire.py) and does what the port's MAC and IP layers do in hardware:
- Transmit (`transmit(qp, frame)`): with PHY loopback on, every frame comes back into this port (a real datagram to
  its own socket), whatever its destination. Otherwise the destination GID is resolved through the GID table and the
  frame is sent there; a destination GID that is the port's own is not reflected (no switch hairpins a frame back out
  of the port it came in on), and an unknown GID has nowhere to go: both are counted in `tx_dropped` and lost.
- Receive (the wire's thread): a frame is decoded and checked (emu/nic/roce.py: lengths, IPv4 checksum, UDP port,
  ICRC); it must come from the port the GID table gives for its source IP (so a datagram from a model that is not on
  this wire, or from a port that went away, is no frame: a UDP port number is reused, a GID is not), its destination
  MAC must be one the NIC accepts (`accept_macs`, which the NIC model fills from its L2 filters), its destination IP
  one of the port's GIDs, its BTH destination QP one of `qps`; otherwise it is dropped and counted in `rx_dropped` by
  reason (the last few reasons, with their headers, in `drop_log`). A frame that passes goes to that QP's `receive`.
- Bulk (emu/nic/fastpath.py): runs of MIDDLE packets go out as one batch (`transmit` of a roce.FrameRun); received
  datagrams come in batches, and the MIDDLE packets of an RDMA WRITE a responder QP is in the middle of are written by
  C once a first one passed here (a flow armed for that QP), with every check above and the QP's made on each; the
  flows are disarmed when anything they rely on changes (the QP's state, P_Key, path MTU, path or R_Key, the MAC
  filters, the GIDs) and after any packet this path handles for the QP. Single-packet WRITEs are taken the same way
  once one passed here, C sending their ACKs (fastpath.py says when: never while taps or faults watch the wire) and, for
  a WRITE with immediate where the QP's NIC model gives a completion recipe (its `completion_recipe(qp)`), writing its
  receive completion into the CQ: before each C call the port gives it the CQ's state, right after it syncs the
  model's producer, so the model's own CQEs always follow the ones C wrote. A requester QP's single-packet WRITEs may
  be posted and sent by C as well (emu/nic/txflow.py), to where `transmit` sends them, while nothing watches the wire;
  `tx_taken` counts them.
- `gids`: the GID table (index -> GID); `add_gid` publishes a GID on the wire, `delete_gid` withdraws it.
All of it runs under the NIC model's lock, taken here for frames and timers (`call_later`) coming from the wire's thread.
"""
from __future__ import annotations
import os, threading
from collections import Counter
from typing import Callable

from emu.nic import fastpath, roce
from emu.nic.rc import OK, QP, REMOTE_WRITE
from emu.nic.wire import GIDTable, Timer, WirePort, format_gid
from emu.pci import DMAFault


class RoCEPort:
  def __init__(self, name: str, mac: bytes, lock: threading.RLock, host: str = "127.0.0.1", udp_port: int = 0,
               faults: str | None = None, table: GIDTable | None = None):
    self.name, self.mac, self.lock = name, bytes(mac), lock
    self.wire = WirePort(name, self._on_frame, host, udp_port, faults, table, on_batch=self._on_frames)
    self.gids: dict[int, bytes] = {}
    self.own: set[bytes] = set()                  # the GIDs, as a set
    self.qps: dict[int, QP] = {}
    self.accept_macs: set[bytes] = set()
    self.loopback = False
    self.tx_dropped: Counter[str] = Counter()
    self.tx_taken = 0                             # single-packet WRITEs C posted and sent (emu/nic/txflow.py)
    self.rx_dropped: Counter[str] = Counter()
    self.drop_log: list[str] = []

  # --- GIDs
  def add_gid(self, index: int, gid: bytes) -> None:
    """Publish `gid` on the wire (raises wire.GIDConflict if another live port has it)."""
    self.wire.table.publish(gid, self.wire.endpoint, self.wire.token)
    self.gids[index] = bytes(gid)
    self.own = set(self.gids.values())

  def delete_gid(self, index: int) -> None:
    gid = self.gids.pop(index)
    self.own = set(self.gids.values())
    if gid not in self.own: self.wire.table.withdraw(gid, self.wire.endpoint)

  # --- frames out
  def transmit(self, qp: QP, frame: list | roce.FrameRun) -> None:
    """Send one frame, or the frames of a FrameRun (each counted in tx_dropped if it has nowhere to go)."""
    dgid, n = qp.a.path.dgid, frame.n if isinstance(frame, roce.FrameRun) else 1
    send = self.wire.send_many if isinstance(frame, roce.FrameRun) else self.wire.send
    if self.loopback: return send(self.wire.endpoint, frame)
    if dgid in self.own: return self._tx_drop("destination GID is this port's own and PHY loopback is off", n)
    if (endpoint := self.wire.table.resolve(dgid)) is None: return self._tx_drop(f"no port on the wire has GID {format_gid(dgid)}", n)
    send(endpoint, frame)

  def _tx_drop(self, why: str, n: int = 1) -> None:
    self.tx_dropped[why] += n

  # --- frames in (the wire's thread)
  def _on_frame(self, frame: memoryview, src: tuple[str, int]) -> None:
    with self.lock: self._receive(frame, src)

  def _receive(self, frame: memoryview, src: tuple[str, int]) -> tuple[QP, roce.Packet] | None:
    """Check one frame and hand it to its QP: (the QP, the packet) if it got there."""
    try: p = roce.decode(frame)
    except roce.FrameError as e: return self._rx_drop(str(e))
    if src != self.wire.table.resolve(p.sgid) and src != self.wire.table.resolve(p.sgid, refresh=True):
      return self._rx_drop(f"sent from {src[0]}:{src[1]}, not by the port that has GID {format_gid(p.sgid)}", p)
    if p.dst_mac not in self.accept_macs: return self._rx_drop(f"destination MAC {p.dst_mac.hex(':')} has no L2 filter", p)
    if p.dgid not in self.own: return self._rx_drop(f"destination {format_gid(p.dgid)} is not a GID of this port", p)
    if (qp := self.qps.get(p.dest_qpn)) is None: return self._rx_drop(f"no QP {p.dest_qpn}", p)
    qp.receive(p)
    return qp, p

  def _on_frames(self, rx: fastpath.Receiver, n: int) -> None:
    """A batch of datagrams: runs of armed flows' MIDDLE packets in C, the others one by one in _receive."""
    with self.lock:
      i = 0
      while i < n:
        if rx.count:                                  # (nothing to check or to take while no flow is armed)
          self._check_flows(rx)
          j = rx.take(i, n) if rx.count else i
          acked = self._sync_flows(rx, i, j)
          if j > i and (acked or j == n or rx.batch.resync):
            i = j
            continue
        else: j = i
        frame, src = rx.datagram(j)
        if rx.truncated(j): self._rx_drop(f"a datagram longer than {fastpath.SLOT} bytes")
        elif (got := self._receive(frame, src)) is not None: self._flow_after(rx, *got, frame, src)
        i = j + 1

  def _check_flows(self, rx: fastpath.Receiver) -> None:
    """Disarm the flows whose QP, its attributes or key, or this port's filters and GIDs no longer let C take them."""
    for slot, f in rx.armed():
      qp, c = f.qp, f.c
      ok = self.qps.get(qp.qpn) is qp and qp.a.pkey == f.pkey and qp.a.path is f.path and f.dst_mac in self.accept_macs and \
           f.dgid in self.own
      if ok and f.kind == 2: ok = qp.a.state == "RTS"               # (responses reach the requester in RTS only)
      elif ok:
        ok = qp.a.state in ("RTR", "RTS") and (qp.wctx is None) == (f.kind == 1) and qp.a.mtu == f.mtu and \
             qp.host.lookup_key(qp, f.rkey if f.kind else f.region.key) is f.region and \
             (f.kind == 0 or self._only_ok(qp) and qp.epsn == c.epsn and qp.msn == c.msn)
      if not ok: rx.free(slot)
      elif f.kind == 1: rx.refresh(f, qp.usable_recvs())

  def _only_ok(self, qp: QP) -> bool:
    """Whether C may take qp's single-packet WRITEs and send their ACKs: the QP between messages with remote write
    access, its ACKs going where the Python path sends them (no PHY loopback, a peer's GID) and through a wire nothing
    watches (no taps, no planned faults, nothing held back)."""
    return qp.sctx is None and bool(qp.a.access & REMOTE_WRITE) and not qp.nak_pending and not self.loopback and \
      qp.a.path.dgid not in self.own and self.wire.unwatched

  def _sync_flows(self, rx: fastpath.Receiver, i: int, j: int) -> bool:
    """Give the QPs what C did with datagrams [i, j) (PSN, the WRITE's progress; single-packet WRITEs: MSN, the ACKs it
    sent, the receive WRs their immediates consumed; ACKs: the PSNs they acknowledge, in the order the packets came) and
    send the ACKs MIDDLE packets asked for: True if there were any."""
    acked = False
    for slot, f in rx.armed():                           # first the CQEs C wrote, which every later one follows
      if f.recipe is not None: rx.cqes += f.recipe.ring.sync()
    for slot, f in rx.armed():
      c = f.c
      if f.kind == 1: self._sync_only(f)
      if f.kind or not c.done: continue
      qp, (region, _, _) = f.qp, f.qp.wctx
      qp.epsn, qp.wctx, qp.nak_pending = c.epsn, (region, f.va + c.off, c.left), False
      rx.taken, c.done = rx.taken + c.done, 0
      if c.ack:
        c.ack, acked = 0, True
        qp._ack(c.ack_psn)
    seen = [0] * fastpath.FLOWS
    for x in range(i, j):                                # the single-packet WRITEs' receive WRs and the ACKs, in order
      k = rx.batch.by[x]
      f = rx.flows[k]
      if f is None or f.kind == 0: continue
      c, qp, at = f.c, f.qp, seen[k]
      seen[k] += 1
      if f.kind == 1 and f.op == roce.WRITE_ONLY_IMM:
        wr = qp.recvs.popleft()
        if f.recipe is None: qp.host.received(qp, wr, OK, 0, c.got[at], True)   # (else C wrote its completion)
      elif f.kind == 2 and qp.a.state == "RTS":
        qp._acked(c.got[at])
        qp._pump()
    for slot, f in rx.armed():
      if f.kind: rx.taken, f.c.done = rx.taken + f.c.done, 0
    return acked

  def _sync_only(self, f: fastpath.Flow) -> None:
    c, qp = f.c, f.qp
    if c.acks or c.ack_err:
      qp.stats.sent += c.acks
      with self.wire._txlock: self.wire.sent += c.acks
      if c.ack_err: self.wire._error(f"send: {os.strerror(c.ack_err)} (an ACK the C datapath sent is lost)")
      c.acks = c.ack_err = 0
    if c.done: qp.epsn, qp.msn, qp.nak_pending = c.epsn, c.msn, False

  def _flow_after(self, rx: fastpath.Receiver, qp: QP, p: roce.Packet, frame: memoryview, src: tuple[str, int]) -> None:
    """After the Python path handled a packet for `qp`: its flow is re-armed from it if it was a WRITE MIDDLE packet, a
    single-packet WRITE that executed or an ACK (the next ones look the same), else disarmed; a response (ACK, READ
    response) leaves the responder's single-packet flow armed, a request the requester's ACK flow."""
    response = p.opcode == roce.ACKNOWLEDGE or roce.READ_RESPONSE_FIRST <= p.opcode <= roce.READ_RESPONSE_ONLY
    if rx.count: rx.disarm(qp, keep=1 if response else 2)
    if p.opcode == roce.ACKNOWLEDGE: return self._arm_ack(rx, qp, p, frame, src)
    if p.opcode in (roce.WRITE_ONLY, roce.WRITE_ONLY_IMM): return self._arm_only(rx, qp, p, frame, src)
    if p.opcode != roce.WRITE_MIDDLE or qp.wctx is None or qp.a.state not in ("RTR", "RTS") or qp.nak_pending: return
    region, va, left = qp.wctx
    if left <= qp.a.mtu or region.generation is None or qp.epsn != roce.psn_add(p.psn, 1) or \
       qp.host.lookup_key(qp, region.key) is not region: return
    head_len = roce.lower_len(frame)
    endpoint, until = self.wire.table.resolved(p.sgid)
    if endpoint == src: rx.arm(qp, p, frame, head_len, roce.lower_crc(frame, head_len), src, until)

  def _arm_ack(self, rx: fastpath.Receiver, qp: QP, p: roce.Packet, frame: memoryview, src: tuple[str, int]) -> None:
    """Arm C for the ACKs requester qp gets after the Python path handled `p`, one of them (a plain ACK)."""
    if qp.a.state != "RTS" or p.syndrome != roce.AETH_ACK | roce.AETH_CREDITS_INVALID: return
    endpoint, until = self.wire.table.resolved(p.sgid)
    if endpoint != src: return
    rx.arm_ack(qp, p, frame, (n := roce.lower_len(frame)), roce.lower_crc(frame, n), src, until)

  def _arm_only(self, rx: fastpath.Receiver, qp: QP, p: roce.Packet, frame: memoryview, src: tuple[str, int]) -> None:
    """Arm C for qp's next single-packet WRITEs after the Python path executed `p`, one of them."""
    if qp.a.state not in ("RTR", "RTS") or qp.wctx is not None or qp.epsn != roce.psn_add(p.psn, 1) or not p.dma_len or \
       not self._only_ok(qp) or (region := qp.host.lookup_key(qp, p.rkey)) is None or region.generation is None or \
       not region.allows(p.va, p.dma_len, REMOTE_WRITE):
      return
    watch = qp.receive_watch() if p.opcode == roce.WRITE_ONLY_IMM else None
    if qp.a.state not in ("RTR", "RTS"): return                  # (reading the receive WRs failed)
    endpoint, until = self.wire.table.resolved(p.sgid)
    ack_to, ack_until = self.wire.table.resolved(qp.a.path.dgid)
    if endpoint != src or ack_to is None: return
    head_len, recipe = roce.lower_len(frame), None
    if p.opcode == roce.WRITE_ONLY_IMM and (completion_recipe := getattr(qp.host, "completion_recipe", None)) is not None:
      try: recipe = completion_recipe(qp)
      except DMAFault: pass                                      # (a CQ outside host memory: the model writes its CQEs)
    rx.arm_only(qp, p, frame, head_len, roce.lower_crc(frame, head_len), src, min(until, ack_until), region,
                roce.ack_template(qp.a.path, qp.a.dest_qpn, qp.a.pkey), ack_to, self.wire.sock.fileno(), watch, recipe)

  def _rx_drop(self, why: str, p: roce.Packet | None = None) -> None:
    self.rx_dropped[why] += 1
    self.drop_log.append(why if p is None else f"{p.name} PSN {p.psn} to QP {p.dest_qpn}: {why}")
    del self.drop_log[:-20]

  # --- timers
  def call_later(self, delay_s: float, fn: Callable[[], None]) -> Timer:
    def locked():
      with self.lock: fn()
    return self.wire.call_later(delay_s, locked)

  def close(self) -> None:
    for gid in self.own: self.wire.table.withdraw(gid, self.wire.endpoint)
    self.gids.clear()
    self.own = set()
    self.wire.close()
