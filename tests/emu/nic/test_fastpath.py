"""The C datapath (emu/nic/fastpath.py): its CRC-32 is zlib's; a run of MIDDLE packets it sends is byte for byte what
the Python path builds; the MIDDLE packets of a long WRITE are written by C once a first one passed the Python path,
and every packet C may not take (a bad ICRC, another sender, a wrong PSN or P_Key, a QP or key or mapping that changed)
goes to the Python path, which checks it as always. Facts: emu/nic/roce.py (frames), rc.py (the responder)."""
import os, random, socket, time, zlib
from types import SimpleNamespace

import numpy as np
import pytest

from emu.nic import fastpath, rc, roce
from emu.pci import DMASpace
from tests.emu.nic.memnic import MemNIC, wait

pytestmark = pytest.mark.skipif(fastpath.lib() is None, reason="the C datapath needs a host C compiler (clang-22 or gcc)")
MTU = 256


@pytest.mark.parametrize("impl", ["zlib's, loaded", "the table"])
def test_the_c_crc32_is_zlibs(impl):
  lib, data = fastpath.lib(), os.urandom(9000)
  if impl == "the table": lib.crc_use(fastpath.ffi.NULL)
  try:
    for start in range(8):
      for n in (0, 1, 7, 8, 9, 63, 4096, 8000):
        assert lib.crc32_update(0x5EED, data[start:start + n], n) == zlib.crc32(data[start:start + n], 0x5EED)
  finally:
    fastpath.lib.cache_clear()                             # loaded again as it is normally


@pytest.mark.parametrize("mapped", [True, False])
def test_a_run_sent_by_c_is_what_python_builds(mapped):
  """Six MIDDLE packets across the 24-bit PSN wrap, their payload in SGEs that do not align with packets, in a region
  with a mapping generation (C keeps its host map) or without (its views are taken for each run)."""
  rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
  rx.bind(("127.0.0.1", 0))
  rx.settimeout(10)
  tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
  path = roce.Path(b"\2\0\0\0\0\1", b"\2\0\0\0\0\2", bytes(10) + b"\xff\xff\x0a\0\0\1", bytes(10) + b"\xff\xff\x0a\0\0\2")
  mem = memoryview(bytearray(random.Random(1).randbytes(8 * MTU)))
  region = rc.Region(1, 0x1000, len(mem), rc.LOCAL_WRITE, lambda va, n: [mem[va - 0x1000:va - 0x1000 + n]],
                     np.zeros(1, np.uint64) if mapped else None)
  source = rc.Buffer([(region, 0x1000, 100), (region, 0x1000 + 300, 600), (region, 0x1000 + 100, 1), (region, 0x1000 + 1000, 900)])
  run = roce.FrameRun(path, roce.Packet(roce.WRITE_MIDDLE, 0, 0x123456, pkey=0xFFFF, solicited=True), 0xFFFFFD, 6, MTU, 3, 4, source, 5)
  head, crc, bth = run.headers()
  payload = fastpath.spans(source, 5, 6 * MTU)
  assert fastpath.send_run(tx.fileno(), rx.getsockname(), head, crc, bth, MTU, run.psn, run.n, run.k0, run.ack_every, payload) == 6
  got = [rx.recv(65536) for _ in range(6)]
  assert got == [b"".join(bytes(x) for x in f) for f in run.frames()]
  assert b"".join(roce.decode(f).payload for f in got) == b"".join(bytes(v) for v in source.chunks(5, 6 * MTU))
  assert [roce.decode(f).psn for f in got] == [0xFFFFFD, 0xFFFFFE, 0xFFFFFF, 0, 1, 2]
  assert [roce.decode(f).ack_req for f in got] == [True, False, False, False, True, False]   # (3 + j + 1) % 4 == 0
  tx.close()
  rx.close()


def connected(a, b):
  qa, qb = a.qp(10), b.qp(20)
  a.connect(qa, b, 20, mtu=MTU)
  b.connect(qb, a, 10, mtu=MTU)
  return qa, qb


def test_a_long_write_is_written_by_c_after_its_first_middle_packet(pair):
  a, b = pair
  qa, qb = connected(a, b)
  size = 64 * MTU + 17
  data = random.Random(2).randbytes(size)
  sk, smem = a.region(size)
  smem[:] = data
  dk, dmem = b.region(size)
  a.post_send(qa, rc.SendWR(rc.WRITE, a.buffer(sk), 0x10000, dk, ctx="w"))
  wait(lambda: a.sends, "the completion")
  assert a.sends == [(10, "w", rc.OK)] and bytes(dmem) == data
  assert b.port.wire.rx.taken == 65 - 3                    # all but FIRST, the first MIDDLE and LAST


class Hand:
  """Frames made by hand from a's QP 10 to b's QP 20: a WRITE of 8 MTUs, FIRST and one MIDDLE sent (C is armed)."""
  def __init__(self, a, b):
    self.a, self.b = a, b
    self.qa, self.qb = connected(a, b)
    self.dk, self.dmem = b.region(8 * MTU)
    self.path = self.qa.a.path
    self.rx = b.port.wire.rx
    self.send(roce.Packet(roce.WRITE_FIRST, 0, 20, va=0x10000, rkey=self.dk, dma_len=8 * MTU, payload=b"\1" * MTU))
    self.send(self.middle(1))
    wait(lambda: self.qb.epsn == 2 and self.rx.count == 1, "the flow to be armed")

  def middle(self, psn: int, byte: int = 2, **kw) -> roce.Packet:
    return roce.Packet(roce.WRITE_MIDDLE, psn, kw.pop("qpn", 20), payload=bytes([byte]) * MTU, **kw)

  def send(self, p: roce.Packet, frame: bytes | None = None, sock: socket.socket | None = None) -> None:
    frame = frame or b"".join(bytes(x) for x in roce.encode(self.path, p))
    (sock or self.a.wire.sock).sendto(frame, self.b.wire.endpoint)

  def settle(self, epsn: int) -> None:
    self.send(roce.Packet(roce.WRITE_MIDDLE, epsn, 20, ack_req=True, payload=b"\7" * MTU))   # one the QP takes: all before it are done
    wait(lambda: self.qb.epsn == epsn + 1 or self.qb.state == "ERR", "the marker packet")


def test_c_takes_the_middle_packets_of_an_armed_flow(pair):
  h = Hand(*pair)
  h.send(h.middle(2, 3))
  h.settle(3)
  assert h.rx.taken == 2 and h.dmem[2 * MTU:3 * MTU] == b"\3" * MTU and h.qb.wctx[2] == 4 * MTU


@pytest.mark.parametrize("case", ["icrc", "sender", "psn ahead", "pkey", "qpn", "tver"])
def test_a_packet_c_may_not_take_goes_to_the_python_path(pair, case):
  h = Hand(*pair)
  dropped = sum(h.b.port.rx_dropped.values())
  if case == "icrc":
    frame = bytearray(b"".join(bytes(x) for x in roce.encode(h.path, h.middle(2, 3))))
    frame[-1] ^= 1
    h.send(None, bytes(frame))
  elif case == "sender":
    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    h.send(h.middle(2, 3), sock=other)
    other.close()
  elif case == "psn ahead": h.send(h.middle(3, 3))
  elif case == "pkey": h.send(h.middle(2, 3, pkey=0x7FFF))
  elif case == "qpn": h.send(h.middle(2, 3, qpn=21))
  elif case == "tver":
    frame = bytearray(b"".join(bytes(x) for x in roce.encode(h.path, h.middle(2, 3))))
    frame[42 + 1] |= 1                                      # BTH TVer 1, the ICRC made again by hand below
    body = bytes(frame[:-4])
    frame[-4:] = roce.icrc(body[14:42], body[42:], ()).to_bytes(4, "little")
    h.send(None, bytes(frame))
  wait(lambda: sum(h.b.port.rx_dropped.values()) > dropped or h.qb.stats.out_of_sequence or h.qb.stats.dropped,
       "the Python path to drop it")
  assert h.rx.taken == 0 and h.dmem[2 * MTU:3 * MTU] == bytes(MTU) and h.qb.epsn == 2


@pytest.mark.parametrize("change, handled", [("qp to ERR", "dropped by the QP"), ("key gone", "executed"), ("remapped", "executed"),
                                             ("mac filter", "dropped by the port"), ("gid", "dropped by the port")])
def test_a_flow_is_disarmed_when_what_it_relies_on_changes(pair, change, handled):
  """The Python path gets the next packet (and does with it what it always does: a write in progress goes on into the
  region its FIRST named, rc.py)."""
  h = Hand(*pair)
  with h.b.lock:
    if change == "qp to ERR": h.qb.modify("ERR")
    elif change == "key gone": del h.b.regions[h.dk]
    elif change == "remapped": h.b.remap()
    elif change == "mac filter": h.b.port.accept_macs.clear()
    elif change == "gid": h.b.port.delete_gid(0)
  h.send(h.middle(2, 3, ack_req=True))
  wait({"dropped by the QP": lambda: h.qb.stats.dropped, "executed": lambda: h.qb.epsn == 3,
        "dropped by the port": lambda: h.b.port.rx_dropped}[handled], handled)
  with h.b.lock:                                  # (the receive batch holds it until it has re-armed the flow)
    assert h.rx.taken == 0 and h.rx.count == (1 if change == "remapped" else 0)   # (armed again with the new mapping)


def test_without_the_c_datapath_the_python_path_does_everything(monkeypatch):
  """No host C compiler: ports receive datagram by datagram and runs go out frame by frame, with the same result."""
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  a, b = MemNIC("a", "10.0.0.1", 1), MemNIC("b", "10.0.0.2", 2)
  try:
    assert a.wire.rx is None and b.wire.rx is None
    qa, qb = connected(a, b)
    data = random.Random(3).randbytes(40 * MTU + 5)
    sk, smem = a.region(len(data))
    smem[:] = data
    dk, dmem = b.region(len(data))
    sent = a.wire.sent
    a.post_send(qa, rc.SendWR(rc.WRITE, a.buffer(sk), 0x10000, dk, ctx="w"))
    wait(lambda: a.sends, "the completion")
    assert a.sends == [(10, "w", rc.OK)] and bytes(dmem) == data and a.wire.sent - sent == 41
  finally:
    a.close()
    b.close()


class HandMade:
  """The other end of b's QP 20 made by hand: a plain socket that owns GID 10.0.0.9 on the wire, as QP 9."""
  def __init__(self, b):
    self.b, self.sock = b, socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    self.sock.bind(("127.0.0.1", 0))
    self.sock.settimeout(10)
    self.endpoint, self.gid, self.mac = self.sock.getsockname(), bytes(10) + b"\xff\xff\x0a\0\0\x09", b"\2\0\0\0\0\x09"
    self.fd, token = b.wire.table.hold(self.endpoint)
    b.wire.table.publish(self.gid, self.endpoint, token)
    self.qb = b.qp(20)
    b.connect(self.qb, SimpleNamespace(mac=self.mac, gid=self.gid), 9, mtu=MTU)
    self.path = roce.Path(self.mac, b.mac, self.gid, b.gid)

  def close(self) -> None:
    self.b.wire.table.withdraw(self.gid, self.endpoint)
    os.close(self.fd)
    self.sock.close()


class Requester(HandMade):
  """A requester made by hand, sending single-packet WRITEs to b's QP 20 and reading what b answers."""
  def __init__(self, b, receives: int = 8):
    super().__init__(b)
    self.dk, self.dmem = b.region(4 * MTU)
    self.ro, _ = b.region(MTU, access=rc.LOCAL_WRITE | rc.REMOTE_READ, va=0x90000)
    for i in range(receives): b.post_recv(self.qb, rc.RecvWR(rc.Buffer(), ctx=i))
    self.answers: list[bytes] = []

  def frame(self, psn: int, n: int = 8, va: int = 0x10000, rkey: int | None = None, imm: bool = True, byte: int = 1) -> bytearray:
    """A WRITE ONLY (with immediate 0x1000 + psn) of n bytes `byte`, AckReq set."""
    p = roce.Packet(roce.WRITE_ONLY_IMM if imm else roce.WRITE_ONLY, psn, 20, True, False, 0xFFFF, va=va,
                    rkey=self.dk if rkey is None else rkey, dma_len=n, imm=0x1000 + psn if imm else None, payload=bytes([byte]) * n)
    return bytearray(b"".join(bytes(x) for x in roce.encode(self.path, p)))

  def write(self, psn: int, n: int = 8, va: int = 0x10000, rkey: int | None = None, imm: bool = True, byte: int = 1,
            answers: int = 1, corrupt: bool = False) -> None:
    """Send one WRITE ONLY (with immediate), then wait for the `answers` datagrams it gets back."""
    frame = self.frame(psn, n, va, rkey, imm, byte)
    if corrupt: frame[-5] ^= 1
    dropped = sum(self.b.port.rx_dropped.values())
    self.sock.sendto(bytes(frame), self.b.wire.endpoint)
    if corrupt: wait(lambda: sum(self.b.port.rx_dropped.values()) > dropped, "the frame to be dropped")
    self.answers += [self.sock.recv(65536) for _ in range(answers)]

  def outcome(self) -> tuple:
    with self.b.lock:
      return (self.answers, self.b.recvs, self.b.fatals, self.qb.state, self.qb.epsn, self.qb.msn, bytes(self.b.regions[self.dk][1]))


# after three good WRITEs with immediate (PSN 0-2; C takes the second and third): the packet, then what follows it
CASES = {
  "bad rkey": lambda r: r.write(3, rkey=0x77),
  "no remote write": lambda r: r.write(3, va=0x90000, rkey=r.ro),
  "out of bounds": lambda r: r.write(3, va=0x10000 + 4 * MTU - 4),
  "psn ahead": lambda r: (r.write(5), r.write(3), r.write(4)),
  "duplicate": lambda r: (r.write(1, byte=9), r.write(3)),
  "no receive": lambda r: (r.write(3), r.write(4), r.write(5), r.write(6), r.b.post_recv(r.qb, rc.RecvWR(rc.Buffer(), ctx=6)),
                          r.write(6), r.write(7)),
  "another length": lambda r: (r.write(3, n=24), r.write(4, n=24), r.write(5)),
  "without immediate": lambda r: (r.write(3, imm=False), r.write(4, imm=False), r.write(5)),
  "bad icrc": lambda r: (r.write(3, answers=0, corrupt=True), r.write(3)),
}
TAKEN = {"psn ahead": 1, "duplicate": 0, "no receive": 3, "another length": 1, "without immediate": 1, "bad icrc": 1}


def small_writes(case: str) -> tuple[tuple, int]:
  b = MemNIC("b", "10.0.0.2", 2)
  r = Requester(b, receives=6 if case == "no receive" else 8)
  try:
    for psn in range(3): r.write(psn, va=0x10000 + 8 * psn, byte=psn + 1)
    CASES[case](r)
    return r.outcome(), b.wire.rx.taken if b.wire.rx is not None else 0
  finally:
    r.close()
    b.close()


@pytest.mark.parametrize("case", CASES)
def test_a_small_write_gets_the_same_answer_with_and_without_c(monkeypatch, case):
  """Single-packet WRITEs after the first go to C, which writes them and sends their ACKs byte for byte as the Python
  path does; any it may not take (a bad R_Key, a region without remote write, out of bounds, a PSN ahead or behind, no
  receive WR left, another length or opcode, a bad ICRC) gets what the Python path gives it (rc.py: NAKs, ERR, RNR)."""
  with_c, taken = small_writes(case)
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c, _ = small_writes(case)
  assert with_c == without_c
  assert taken == 2 + TAKEN.get(case, 0)
  answers = [roce.decode(a) for a in with_c[0]]
  assert all(a.opcode == roce.ACKNOWLEDGE for a in answers)
  if case in ("bad rkey", "no remote write", "out of bounds"):
    assert answers[-1].syndrome == roce.AETH_NAK | roce.NAK_REMOTE_ACCESS_ERROR and with_c[3] == "ERR"
  if case == "no receive":                            # PSN 6, then it again once a receive is posted, then PSN 7
    assert [a.syndrome & roce.AETH_KIND_MASK for a in answers[-3:]] == [roce.AETH_RNR_NAK, roce.AETH_ACK, roce.AETH_RNR_NAK]


@pytest.mark.parametrize("change", ["remote write revoked", "qp to ERR", "key gone", "remapped", "tap", "fault planned", "loopback"])
def test_a_small_write_flow_is_disarmed_when_what_it_relies_on_changes(change):
  """The next single-packet WRITE goes to the Python path, which does with it what it always does."""
  b = MemNIC("b", "10.0.0.2", 2)
  r = Requester(b)
  try:
    for psn in range(3): r.write(psn)
    seen = []
    with b.lock:                        # (C sent the ACK under the lock: taken is up to date once it is ours)
      assert b.wire.rx.taken == 2 and b.wire.rx.count == 1
      if change == "remote write revoked": r.qb.modify("RTS", access=rc.LOCAL_WRITE)
      elif change == "qp to ERR": r.qb.modify("ERR")
      elif change == "key gone": del b.regions[r.dk]
      elif change == "remapped": b.remap()
      elif change == "tap": b.wire.taps.append(seen.append)
      elif change == "fault planned": b.wire.faults.add("drop", b.wire.sent + 1)
      elif change == "loopback": b.port.loopback = True
    answers = 0 if change in ("qp to ERR", "fault planned", "loopback") else 1
    r.write(3, byte=7, answers=answers)
    if not answers:
      wait(lambda: r.qb.stats.dropped or b.wire.faults.applied or r.qb.epsn == 4, "the Python path to handle it")
    with b.lock: assert b.wire.rx.taken == 2
    if change in ("remote write revoked", "key gone"):
      assert roce.decode(r.answers[-1]).syndrome == roce.AETH_NAK | roce.NAK_REMOTE_ACCESS_ERROR and r.qb.state == "ERR"
    if change in ("remapped", "tap", "fault planned"): assert r.qb.epsn == 4 and r.dmem[:8] == b"\7" * 8
    if change == "tap": assert [roce.decode(f).opcode for f in seen] == [roce.ACKNOWLEDGE]
    if change == "fault planned": assert b.wire.faults.applied == [(b.wire.sent, "drop")]
  finally:
    r.close()
    b.close()


class CQNIC(MemNIC):
  """A MemNIC whose receive completions go to a CQ ring in DMA memory, as a NIC model's: 16-byte CQEs (wr_id at 0, imm
  at 4, little-endian; status at 8; the phase bit, bit 0 of byte 15, 1 on even passes); a full ring loses the CQE, an
  armed one notifies once: with `notify`, a 16-byte entry into a ring of 2 (0x30 | the CQ's arm toggle, advanced, << 6
  at byte 0; the phase bit as the CQ's), which loses it when full. It gives the C datapath the recipe (fastpath.Recipe)."""
  DEPTH, NOTES = 4, 2

  def __init__(self, *args, notify: bool = True, **kw):
    super().__init__(*args, **kw)
    self.dma, self.mem = DMASpace(), memoryview(bytearray(4096))
    self.page, self.notify = self.dma.map(self.mem)[0], notify
    self.prod = self.cons = self.lost = self.notified = self.toggle = self.nprod = self.ncons = 0
    self.armed, self.ring = False, None

  @staticmethod
  def cqe(wr_id: int, status: str, imm: int | None, phase: int = 0) -> bytearray:
    e = bytearray(16)
    e[0:4], e[4:8], e[8], e[15] = wr_id.to_bytes(4, "little"), (imm or 0).to_bytes(4, "little"), status != rc.OK, phase
    return e

  def _push(self, e: bytearray) -> bool:
    if self.prod - self.cons >= self.DEPTH:
      self.lost += 1
      return False
    e[15] = (self.prod // self.DEPTH) & 1 ^ 1
    self.mem[16 * (self.prod % self.DEPTH):][:16] = e
    self.prod += 1
    return True

  def completed(self, qp, wr, status):               # (requester completions: byte 8 bit 1, no notification)
    super().completed(qp, wr, status)
    e = self.cqe(wr.ctx, status, None)
    e[8] |= 2
    self._push(e)

  def received(self, qp, wr, status, byte_len, imm, write_imm):
    if not self._push(self.cqe(wr.ctx, status, imm)) or not self.armed: return
    self.armed, self.toggle = False, (self.toggle + 1) & 3
    if not self.notify or self.nprod - self.ncons >= self.NOTES: self.lost += 1
    else:
      self.mem[2048 + 16 * (self.nprod % self.NOTES):][:16] = \
        bytes([0x30 | self.toggle << 6]) + bytes(14) + bytes([(self.nprod // self.NOTES) & 1 ^ 1])
      self.nprod, self.notified = self.nprod + 1, self.notified + 1

  def completion_recipe(self, qp):
    if self.ring is None:
      def produced(n: int, notes: int) -> None:
        self.prod += n
        if notes: self.armed, self.toggle, self.nprod, self.notified = False, (self.toggle + notes) & 3, self.nprod + notes, self.notified + notes
      notes = fastpath.CQRing(self.dma, [self.page + 2048], 2048, self.NOTES, 16, (15, 1, 1), (1 << 64) - 1,
                              lambda: (self.nprod, self.ncons, False, 0), None)
      self.ring = fastpath.CQRing(self.dma, [self.page], 4096, self.DEPTH, 16, (15, 1, 1), (1 << 64) - 1,
                                  lambda: (self.prod, self.cons, self.armed, self.toggle), produced,
                                  notify=(notes, b"\x30" + bytes(15), (0, 6, 3)) if self.notify else None)
    return fastpath.Recipe(self.ring, bytes(self.cqe(0, rc.OK, 0)), 0, 4, 4, False, lambda wr: wr.ctx)

  def consume(self, arm: bool = False) -> None:
    """The driver publishes that it consumed every CQE (and notification) so far, and arms the CQ."""
    with self.lock: self.cons, self.ncons, self.armed = self.prod, self.nprod, self.armed or arm


def consumed_writes(r, psns, arm=()) -> None:
  for psn in psns:
    r.b.consume(arm=psn in arm)
    r.write(psn, va=0x10000 + 8 * psn, byte=psn + 1)


def unconsumed_notes(r) -> None:
  consumed_writes(r, (3,), arm=(3,))
  for psn in (4, 5):                   # the CQ's entries consumed, the notifications not: the third one is lost
    with r.b.lock: r.b.cons, r.b.armed = r.b.prod, True
    r.write(psn, va=0x10000 + 8 * psn, byte=psn + 1)


CQ_CASES = {                        # after three WRITEs with immediate (PSN 0-2, C takes the second and third)
  "consumed as they come": lambda r: consumed_writes(r, range(3, 9)),        # around the ring, then once more
  "full": lambda r: (r.write(3), r.write(4), r.write(5), consumed_writes(r, (6, 7))),  # 4 and 5 are lost
  "armed": lambda r: consumed_writes(r, range(3, 8), arm=(3, 5, 6, 7)),      # and the notifications go around their ring
  "armed, no notification ring": lambda r: consumed_writes(r, (3, 4, 5), arm=(3,)),
  "notification ring full": unconsumed_notes,
  "bad receive": lambda r: (r.b.post_recv(r.qb, rc.RecvWR(rc.Buffer(), ctx=0xBAD, local_error=rc.LOC_PROT_ERR)),
                            consumed_writes(r, (3, 4, 5))),                  # 5 reaches it
}
CQ_TAKEN = {"consumed as they come": 8, "full": 5, "armed": 7, "armed, no notification ring": 4, "notification ring full": 4,
            "bad receive": 4}
CQ_LOST_NOTIFIED = {"full": (2, 0), "armed": (0, 4), "armed, no notification ring": (1, 0), "notification ring full": (1, 2)}


def written_cqes(case: str) -> tuple[tuple, int, int]:
  b = CQNIC("b", "10.0.0.2", 2, notify=case != "armed, no notification ring")
  r = Requester(b, receives=5 if case == "bad receive" else 12)
  try:
    for psn in range(3): r.write(psn, va=0x10000 + 8 * psn, byte=psn + 1)
    CQ_CASES[case](r)
    with b.lock:
      rx = b.wire.rx
      return (r.outcome(), bytes(b.mem[:16 * b.DEPTH]), bytes(b.mem[2048:2048 + 16 * b.NOTES]), b.prod, b.cons, b.lost,
              b.notified, b.toggle), rx.taken if rx else 0, rx.cqes if rx else 0
  finally:
    r.close()
    b.close()


@pytest.mark.parametrize("case", CQ_CASES)
def test_c_writes_the_receive_completions_the_model_writes(monkeypatch, case):
  """C writes a WRITE with immediate's CQE as the model's recipe says, byte for byte what the model writes (the wr_id
  and immediate in place, the phase bit of the pass), at the producer, then an armed CQ's notification (the CQ's toggle
  advanced), and advances the model's producers; one the model must write itself goes to the Python path: the CQ full
  against the consumer the driver published (the model loses the CQE), an armed CQ whose notification C cannot write
  (no ring for it, or that ring full: the model loses the notification), or a receive WR that fails (its error CQE,
  the NAK, ERR)."""
  with_c, taken, cqes = written_cqes(case)
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c, _, _ = written_cqes(case)
  assert with_c == without_c and taken == cqes == CQ_TAKEN[case]
  outcome, ring, notes, prod, cons, lost, notified, toggle = with_c
  assert (lost, notified) == CQ_LOST_NOTIFIED.get(case, (0, 0))
  if case == "consumed as they come":                  # 9 CQEs in a ring of 4: the last one is the ninth, in a third pass
    assert prod == 9 and ring[0:16] == CQNIC.cqe(8, rc.OK, 0x1008, 1) and ring[16:32] == CQNIC.cqe(5, rc.OK, 0x1005, 0)
  if case == "armed":                                  # the fourth notification: toggle 0, the second pass over 2 entries
    assert toggle == 0 and notes[16:] == b"\x30" + bytes(14) + b"\0" and notes[:16] == b"\xf0" + bytes(14) + b"\0"
  if case == "bad receive": assert outcome[3] == "ERR" and ring[16 * 5 % 64 + 8] == 1   # its error CQE, after the 5 good ones


class Responder(HandMade):
  """A responder made by hand, answering the WRITEs b's QP 20 sends with ACKs made by hand."""
  def __init__(self, b):
    super().__init__(b)
    self.sk, _ = b.region(64)
    self.msn = 0

  def post(self, n: int = 1) -> list[int]:
    """b posts n WRITEs; -> their PSNs, as they arrive here."""
    for i in range(n): self.b.post_send(self.qb, rc.SendWR(rc.WRITE, self.b.buffer(self.sk, 0, 8), 0x10000, 0x77, ctx=len(self.b.sends) + i))
    return self.packets(n)

  def packets(self, n: int) -> list[int]:
    """The PSNs of the next n packets b sends here."""
    return [roce.decode(self.sock.recv(65536)).psn for _ in range(n)]

  def expire(self) -> None:
    """b's ACK timer runs out now (what the wire's thread runs at the deadline)."""
    with self.b.lock:
      self.qb.deadline = time.monotonic()
      self.qb._timer()

  def ack(self, psn: int, syndrome: int = roce.AETH_ACK | roce.AETH_CREDITS_INVALID, corrupt: bool = False, completes: int = 1) -> None:
    """Answer with an ACK (or NAK) for `psn`, then wait until b has `completes` more completions."""
    self.msn += 1
    frame = bytearray(b"".join(bytes(x) for x in roce.encode(self.path, roce.Packet(roce.ACKNOWLEDGE, psn, 20, pkey=0xFFFF, syndrome=syndrome,
                                                                                    msn=self.msn))))
    if corrupt: frame[-1] ^= 1
    done, dropped = len(self.b.sends), sum(self.b.port.rx_dropped.values())
    self.sock.sendto(bytes(frame), self.b.wire.endpoint)
    if corrupt: wait(lambda: sum(self.b.port.rx_dropped.values()) > dropped, "the ACK to be dropped")
    else: wait(lambda: len(self.b.sends) >= done + completes, "the completions")


ACK_CASES = {                            # after three WRITEs ACKed one by one (C takes the second and third ACK)
  "coalesced": lambda r: r.ack(r.post(2)[1], completes=2),
  "stale": lambda r: (r.ack(1, completes=0), r.ack(r.post()[0])),
  "credit count": lambda r: r.ack(r.post()[0], syndrome=roce.AETH_ACK | 5),
  "nak remote access": lambda r: r.ack(r.post()[0], syndrome=roce.AETH_NAK | roce.NAK_REMOTE_ACCESS_ERROR),
  "bad icrc": lambda r: (psn := r.post()[0], r.ack(psn, corrupt=True), r.ack(psn)),
  # the timer runs out while the ACK covering two WRITEs is in flight: both go again; that ACK completes each once, and
  # the responder's ACK for the copies (a duplicate, now stale) completes nothing again
  "retransmitted": lambda r: (psns := r.post(2), r.expire(), r.packets(2) == psns or pytest.fail("not sent again"),
                              r.ack(psns[1], completes=2), r.ack(psns[1], completes=0), r.ack(r.post()[0])),
}
ACK_TAKEN = {"coalesced": 1, "stale": 2, "bad icrc": 1, "retransmitted": 3}


def acked_writes(case: str) -> tuple[tuple, int]:
  b = MemNIC("b", "10.0.0.2", 2)
  r = Responder(b)
  try:
    for _ in range(3): r.ack(r.post()[0])
    ACK_CASES[case](r)
    with b.lock: return (b.sends, b.fatals, r.qb.state, r.qb.una, r.qb.stats.retransmitted), b.wire.rx.taken if b.wire.rx else 0
  finally:
    r.close()
    b.close()


@pytest.mark.parametrize("case", ACK_CASES)
def test_an_ack_gets_the_same_handling_with_and_without_c(monkeypatch, case):
  """The ACKs a requester gets after the first go to C, which checks them (headers, source, P_Key, QPN, AETH syndrome,
  ICRC) and hands their PSNs to the transport in order; a NAK, another syndrome or a bad ICRC goes to the Python path."""
  with_c, taken = acked_writes(case)
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c, _ = acked_writes(case)
  assert with_c == without_c and taken == 2 + ACK_TAKEN.get(case, 0)
  if case == "nak remote access": assert with_c[0][-1][2] == rc.REM_ACCESS_ERR and with_c[2] == "ERR"
  if case == "retransmitted": assert with_c[0] == [(20, i, rc.OK) for i in range(6)] and with_c[4] == 2


class Peer(Requester):
  """b's QP 20 gets WRITEs with immediate from here, and sends its WRITEs here, ACKed by hand."""
  ack, post, packets = Responder.ack, Responder.post, Responder.packets

  def __init__(self, b):
    super().__init__(b, receives=12)
    self.sk, _ = b.region(64)
    self.msn = 0


def ack_then_write() -> tuple[tuple, int, int]:
  b = CQNIC("b", "10.0.0.2", 2)
  p = Peer(b)
  try:
    for psn in range(3): p.write(psn, va=0x10000 + 8 * psn, byte=psn + 1)   # C takes the second and third
    for _ in range(2):                                 # C takes the second ACK
      b.consume()
      p.ack(p.post()[0])
    b.consume()
    psn = p.post()[0]
    with b.lock:                                       # the ACK for that WRITE and a WRITE with immediate in one batch:
      seen = b.wire.received                          # b's thread waits for the lock with a datagram it drops ...
      p.sock.sendto(b"not a frame", b.wire.endpoint)
      wait(lambda: b.wire.received > seen, "the datagram before them")
      p.msn += 1                                       # ... while these two come in
      p.sock.sendto(b"".join(bytes(x) for x in roce.encode(p.path, roce.Packet(roce.ACKNOWLEDGE, psn, 20, pkey=0xFFFF,
                    syndrome=roce.AETH_ACK | roce.AETH_CREDITS_INVALID, msn=p.msn))), b.wire.endpoint)
      p.sock.sendto(bytes(p.frame(3, va=0x10000 + 24, byte=4)), b.wire.endpoint)
    p.answers.append(p.sock.recv(65536))
    wait(lambda: len(b.sends) == 3, "the third send completion")
    with b.lock:
      rx = b.wire.rx
      return (p.outcome(), bytes(b.mem[:16 * b.DEPTH]), b.prod, b.lost), rx.taken if rx else 0, rx.cqes if rx else 0
  finally:
    p.close()
    b.close()


def test_a_requester_completion_before_a_c_written_one_comes_first(monkeypatch):
  """An ACK C takes and a WRITE with immediate right behind it in one batch: the model writes the requester completion
  the ACK brings before C writes the receive completion (C stops, the port syncs, C goes on: batch.resync), the order
  the Python path writes them in; each lands in its own slot."""
  with_c, taken, cqes = ack_then_write()
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c, _, _ = ack_then_write()
  assert with_c == without_c and (taken, cqes) == (2 + 1 + 2, 2 + 1)
  outcome, ring, prod, lost = with_c
  send = CQNIC.cqe(2, rc.OK, None, 0)
  send[8] |= 2
  assert (prod, lost) == (7, 0) and ring[16:32] == send and ring[32:48] == CQNIC.cqe(3, rc.OK, 0x1003, 0)
