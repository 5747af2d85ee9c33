"""A minimal RoCE NIC for the wire and transport tests: one emu.nic.port.RoCEPort, RC QPs over plain host memory (keys
are region numbers), completions collected in lists. It is the smallest rc.Host there is, not a NIC model. Its regions
share one mapping generation (`generation`, bumped by `remap`), so the C datapath takes WRITEs into them."""
from __future__ import annotations
import socket, threading, time

import numpy as np

from emu.nic import rc
from emu.nic.port import RoCEPort
from emu.nic.roce import Path


def ipv4_gid(ip: str) -> bytes: return bytes(10) + b"\xff\xff" + socket.inet_aton(ip)


def wait(cond, what: str = "condition", timeout: float = 10.0) -> None:
  end = time.monotonic() + timeout
  while not cond():
    if time.monotonic() > end: raise TimeoutError(f"timed out waiting for {what}")
    time.sleep(0.0005)


class MemNIC:
  def __init__(self, name: str, ip: str, mac_last: int = 1, **port_options):
    self.lock = threading.RLock()
    self.mac = bytes((2, 0, 0, 0, 0, mac_last))
    self.port = RoCEPort(name, self.mac, self.lock, **port_options)
    self.port.accept_macs.add(self.mac)
    self.gid = ipv4_gid(ip)
    self.port.add_gid(0, self.gid)
    self.regions: dict[int, tuple[rc.Region, bytearray]] = {}
    self.generation = np.zeros(1, np.uint64)
    self.sends: list[tuple[int, object, str]] = []                  # (qpn, wr.ctx, status)
    self.recvs: list[tuple[int, object, str, int, int | None, bool]] = []
    self.fatals: list[tuple[int, str]] = []
    self.on_send = None                                             # called with each send completion (tests)

  @property
  def wire(self): return self.port.wire

  def close(self) -> None: self.port.close()

  # --- objects
  def region(self, size: int, access: int = rc.LOCAL_WRITE | rc.REMOTE_WRITE | rc.REMOTE_READ, va: int = 0x10000):
    """(key, memory) of a new region of `size` bytes at virtual address `va`."""
    key, mem = len(self.regions) + 1, bytearray(size)
    view = memoryview(mem)
    self.regions[key] = (rc.Region(key, va, size, access, lambda a, n: [view[a - va:a - va + n]], self.generation), mem)
    return key, mem

  def remap(self) -> None:
    """What the regions' keys reach may have changed (as a DMA mapping change would say)."""
    self.generation[0] += 1

  def buffer(self, key: int, off: int = 0, length: int | None = None) -> rc.Buffer:
    region, mem = self.regions[key]
    return rc.Buffer([(region, region.va + off, len(mem) - off if length is None else length)])

  def qp(self, qpn: int) -> rc.QP:
    with self.lock:
      q = self.port.qps[qpn] = rc.QP(self, qpn)
    return q

  def connect(self, qp: rc.QP, peer: MemNIC, peer_qpn: int, mtu: int = 1024, timeout: int = 18, retry_cnt: int = 7,
              rnr_retry: int = 7, min_rnr_timer: int = 1, sq_psn: int = 0, rq_psn: int = 0, **attrs) -> None:
    access = attrs.pop("access", rc.LOCAL_WRITE | rc.REMOTE_WRITE | rc.REMOTE_READ)
    with self.lock:
      qp.modify("INIT", access=access)
      qp.modify("RTR", path=Path(self.mac, peer.mac, self.gid, peer.gid), dest_qpn=peer_qpn, mtu=mtu, rq_psn=rq_psn,
                min_rnr_timer=min_rnr_timer, max_dest_rd_atomic=attrs.pop("max_dest_rd_atomic", 4))
      qp.modify("RTS", sq_psn=sq_psn, timeout=timeout, retry_cnt=retry_cnt, rnr_retry=rnr_retry,
                max_rd_atomic=attrs.pop("max_rd_atomic", 4), **attrs)

  def post_send(self, qp: rc.QP, wr: rc.SendWR) -> None:
    with self.lock: qp.post_send(wr)

  def post_recv(self, qp: rc.QP, wr: rc.RecvWR) -> None:
    with self.lock: qp.post_recv(wr)

  # --- rc.Host
  def transmit(self, qp, frame): self.port.transmit(qp, frame)
  def lookup_key(self, qp, rkey): return self.regions.get(rkey, (None,))[0]
  def call_later(self, delay_s, fn): return self.port.call_later(delay_s, fn)
  def fatal(self, qp, reason, status, requester): self.fatals.append((qp.qpn, reason))
  def received(self, qp, wr, status, byte_len, imm, write_imm): self.recvs.append((qp.qpn, wr.ctx, status, byte_len, imm, write_imm))

  def completed(self, qp, wr, status):
    if self.on_send is not None: self.on_send(qp, wr, status)
    self.sends.append((qp.qpn, wr.ctx, status))
