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
- `gids`: the GID table (index -> GID); `add_gid` publishes a GID on the wire, `delete_gid` withdraws it.
All of it runs under the NIC model's lock, taken here for frames and timers (`call_later`) coming from the wire's thread.
"""
from __future__ import annotations
import threading
from collections import Counter
from typing import Callable

from emu.nic import roce as R
from emu.nic.rc import QP
from emu.nic.wire import GIDTable, Timer, WirePort, format_gid


class RoCEPort:
  def __init__(self, name: str, mac: bytes, lock: threading.RLock, host: str = "127.0.0.1", udp_port: int = 0,
               faults: str | None = None, table: GIDTable | None = None):
    self.name, self.mac, self.lock = name, bytes(mac), lock
    self.wire = WirePort(name, self._on_frame, host, udp_port, faults, table)
    self.gids: dict[int, bytes] = {}
    self.own: set[bytes] = set()                  # the GIDs, as a set
    self.qps: dict[int, QP] = {}
    self.accept_macs: set[bytes] = set()
    self.loopback = False
    self.tx_dropped: Counter[str] = Counter()
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
  def transmit(self, qp: QP, frame: list) -> None:
    dgid = qp.a.path.dgid
    if self.loopback: return self.wire.send(self.wire.endpoint, frame)
    if dgid in self.own: return self._tx_drop("destination GID is this port's own and PHY loopback is off")
    if (endpoint := self.wire.table.resolve(dgid)) is None: return self._tx_drop(f"no port on the wire has GID {format_gid(dgid)}")
    self.wire.send(endpoint, frame)

  def _tx_drop(self, why: str) -> None:
    self.tx_dropped[why] += 1

  # --- frames in (the wire's thread)
  def _on_frame(self, frame: memoryview, src: tuple[str, int]) -> None:
    with self.lock:
      try: p = R.decode(frame)
      except R.FrameError as e: return self._rx_drop(str(e))
      if src != self.wire.table.resolve(p.sgid) and src != self.wire.table.resolve(p.sgid, refresh=True):
        return self._rx_drop(f"sent from {src[0]}:{src[1]}, not by the port that has GID {format_gid(p.sgid)}", p)
      if p.dst_mac not in self.accept_macs: return self._rx_drop(f"destination MAC {p.dst_mac.hex(':')} has no L2 filter", p)
      if p.dgid not in self.own: return self._rx_drop(f"destination {format_gid(p.dgid)} is not a GID of this port", p)
      if (qp := self.qps.get(p.dest_qpn)) is None: return self._rx_drop(f"no QP {p.dest_qpn}", p)
      qp.receive(p)

  def _rx_drop(self, why: str, p: R.Packet | None = None) -> None:
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
