"""The C transmit flows (emu/nic/txflow.py): after the Python path sent two single-packet RDMA WRITEs (with immediate) of
one shape in a row from a bnxt or mlx5 QP, C posts and sends that QP's next WQEs of that shape, with the same result (CQEs, data, frames, the QP's
state and counters) as the Python path; a WQE C may not take (every check bnxt's decoder makes, another shape, a wire
that taps or faults must see) goes to the Python path, which handles it as always. Facts: emu/nic/bnxt/datapath.py."""
import os, random, socket, time

import pytest

from autogen import bnxt as bnxt_hsi, mlx5_core
from drivers.mlx5.qp import data_seg
from drivers.rdma import Access, RecvWR, WCError, WCStatus, open_context
from drivers.system import open_model
from emu.nic import fastpath, rc, roce
from emu.nic.mlx5 import ModelError
from tests.emu.nic.bnxt_cmds import Bnxt, QPair, wait
from tests.emu.nic.test_mlx5_datapath import post_raw

pytestmark = pytest.mark.skipif(fastpath.lib() is None, reason="the C datapath needs a host C compiler (clang-22 or gcc)")
WRITE, WRITE_IMM = bnxt_hsi.SQ_BASE_WQE_TYPE_WRITE_WQE, bnxt_hsi.SQ_BASE_WQE_TYPE_WRITE_W_IMMEAD
SIGNAL, FENCE = bnxt_hsi.SQ_SEND_FLAGS_SIGNAL_COMP, bnxt_hsi.SQ_SEND_FLAGS_RD_OR_ATOMIC_FENCE
RECVS = 16


class Link:
  """bnxt NIC 0's QP a writing into NIC 1's QP b (or, through PHY loopback, into NIC 0's QP b), 8 bytes at a time (the
  source and destination regions of 4 KiB)."""
  def __init__(self, loopback: bool = False):
    self.pcis = [open_model("bnxt", i) for i in ((0,) if loopback else (0, 1))]
    nics = [Bnxt(p) for p in self.pcis]
    self.up, self.peer = nics[0], nics[-1]
    for nic, ip in zip(nics, ("10.0.0.1", "10.0.0.2")): nic.bring_up(ip)
    if loopback: self.up.hwrm("port_phy_cfg", enables=bnxt_hsi.PORT_PHY_CFG_REQ_ENABLES_LPBK, lpbk=bnxt_hsi.PORT_PHY_CFG_REQ_LPBK_LOCAL)
    self.a, self.b = QPair(self.up), QPair(self.peer)
    self.a.connect(self.b.qpn, self.peer.gid, self.peer.mac)
    self.b.connect(self.a.qpn, self.up.gid, self.up.mac)
    self.dst, self.dmem, self.dva = self.peer.register(4096)
    self.key, self.mem, self.va = self.up.register(4096)
    self.mem.view[:] = random.Random(1).randbytes(4096)
    for i in range(RECVS): self.b.post_recv([], i)
    self.n = 0
    self.qa, self.qb = self.up.model.roce.qps[self.a.qpn], self.peer.model.roce.qps[self.b.qpn]
    self.logged = len(self.up.model.log_lines)

  def write(self, n: int = 8, wqe_type: int = WRITE_IMM, flags: int = SIGNAL, off: int | None = None, **post) -> None:
    """Post one WRITE of n bytes from (and to) offset `off` (the next 8 bytes by default)."""
    off = 8 * self.n if off is None else off
    self.n += 1
    sges = post.pop("sges", [(self.va + off, self.key, n)])
    self.a.post(wqe_type, sges, n, self.dva + off, self.dst, imm=0x100 + self.n, flags=flags, **post)

  def outcome(self) -> tuple:
    """Once a's WRs are all done: its CQEs, b's receive CQEs, the data, the QPs' states and counters."""
    wait(lambda: not self.qa.rc.wrs, "a's WRs to complete")
    with self.up.model.lock, self.peer.model.lock:   # (a CQE follows the WR's retirement, b's its ACK: once the locks are
      got = [self._drain(self.a), self._drain(self.b)]   # ours, all are written)
    qa, qb, wire = self.qa.rc, self.qb.rc, self.up.model.port.wire
    return (*got, bytes(self.dmem.view[:256]), qa.state, qa.next_psn, qa.una, qa.stats.sent, qa.stats.retransmitted, wire.sent,
            self.qa.wqes, self.qa.msn, self.qa.sq_cons, qb.state, qb.epsn, qb.msn, self.up.model.log_lines[self.logged:])

  @staticmethod
  def _drain(q: QPair) -> list:
    out, c = [], q.cq
    while c.get(c.cons)[24] & 1 == c.phase(c.cons):
      raw = c.get(c.cons)
      out.append((raw[0] & bnxt_hsi.CQ_BASE_CQE_TYPE_MASK, bnxt_hsi.cq_base.from_buffer_copy(raw).status, raw[:24].hex()))
      c.cons += 1
    return out

  def close(self) -> None:
    for p in self.pcis: p.close()


# after four WRITEs with immediate (the Python path sends two, C the others): the WQEs of the case, then one more
CASES = {
  "same shape": lambda k: k.write(),
  "unsignaled": lambda k: k.write(flags=0),
  "bad MSN entry": lambda k: k.write(msn_entry=0x1234),
  "bad lkey": lambda k: k.write(sges=[(k.va, k.key + 0x100, 8)]),
  "length is not the SGE's": lambda k: k.write(sges=[(k.va, k.key, 4)]),
  "SGE past the MR": lambda k: k.write(sges=[(k.va + 4092, k.key, 8)]),
  "unmodelled wqe_type": lambda k: k.write(wqe_type=bnxt_hsi.SQ_BASE_WQE_TYPE_ATOMIC_CS),
  "another length": lambda k: (k.write(n=16), k.write(n=16)),
  "shapes that keep changing": lambda k: [k.write(n=16 + 8 * (i % 2)) for i in range(4)],   # (the flow is dropped)
  "without immediate": lambda k: (k.write(wqe_type=WRITE), k.write(wqe_type=WRITE)),
  "fence": lambda k: k.write(flags=SIGNAL | FENCE),
  "two packets": lambda k: k.write(n=1500, off=1024),
  "a batch with a bad one": lambda k: (k.write(ring=False), k.write(ring=False, sges=[(k.va, k.key + 0x100, 8)]), k.write()),
  "MR deregistered": lambda k: (k.up.rcfw("deregister_mr", lkey=k.key), k.write()),
  "new DMA mapping": lambda k: (k.up.pci.alloc_dma(4096), k.write()),
  "tap": lambda k: (k.up.model.port.wire.taps.append(lambda frame: None), k.write()),
  "fault planned": lambda k: (k.up.model.port.wire.faults.add("dup", k.up.model.port.wire.sent + 1), k.write()),
}
# WQEs C sends after the first three (the case's and the last one)
TAKEN = {"same shape": 2, "unsignaled": 2, "fence": 1, "two packets": 1, "a batch with a bad one": 1, "new DMA mapping": 1,
         "fault planned": 1}


def run(case: str, loopback: bool = False) -> tuple[tuple, int]:
  link = Link(loopback)
  try:
    for post in [Link.write] * 4 + [CASES[case], Link.write]:   # (each once the WRs before it are done: a bad WQE fails
      wait(lambda: not link.qa.rc.wrs, "the WRs before")          # at once, and the next one is flushed, whatever the timing)
      post(link)
    return link.outcome(), link.up.model.port.tx_taken
  finally:
    link.close()


@pytest.mark.parametrize("case", CASES)
def test_a_wqe_gets_the_same_outcome_with_and_without_c(monkeypatch, case):
  """C takes a WQE only if it is the flow's shape and passes bnxt's checks (the MSN table entry, the SGE's L_Key, MR and
  bounds, the length) on a wire nothing watches; the others get the Python path's error CQE, or its handling."""
  with_c, taken = run(case)
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c, none = run(case)
  assert with_c == without_c and none == 0
  assert taken == 2 + TAKEN.get(case, 0)
  statuses = [s for _, s, _ in with_c[0]]
  if case in ("same shape", "another length", "new DMA mapping"): assert statuses == [bnxt_hsi.CQ_REQ_STATUS_OK] * len(statuses)
  if case == "bad MSN entry": assert statuses[4:] == [bnxt_hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR, bnxt_hsi.CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR]
  if case in ("bad lkey", "SGE past the MR", "MR deregistered"): assert statuses[4] == bnxt_hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR
  if case == "length is not the SGE's": assert statuses[4] == bnxt_hsi.CQ_REQ_STATUS_LOCAL_LENGTH_ERR
  if case == "unsignaled": assert len(statuses) == 5                        # (the unsignaled one completes silently)


def test_wqes_past_the_window_wait_with_and_without_c(monkeypatch):
  """Four WQEs in one doorbell with a window of 2 PSNs: C sends the first two, the others wait for their ACKs (and the
  flow is dropped while they do: the next WQE is the Python path's)."""
  monkeypatch.setattr(rc, "WINDOW", 2)
  CASES["past the window"] = lambda k: (k.write(ring=False), k.write(ring=False), k.write(ring=False), k.write())
  try:
    with_c, taken = run("past the window")
    monkeypatch.setattr(fastpath, "lib", lambda: None)
    assert with_c == run("past the window")[0] and taken == 2 + 2 and with_c[0][-1][1] == bnxt_hsi.CQ_REQ_STATUS_OK
  finally: del CASES["past the window"]


@pytest.mark.parametrize("case", ["same shape", "bad MSN entry"])
def test_through_phy_loopback_the_same_outcome_with_and_without_c(monkeypatch, case):
  """With PHY loopback on, C sends each frame back into the port, as the Python path does, whatever its destination."""
  with_c, taken = run(case, loopback=True)
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  assert with_c == run(case, loopback=True)[0] and taken == 2 + TAKEN.get(case, 0)


def test_frames_c_sends_are_what_the_python_path_sends(monkeypatch):
  """To a requester's peer made by hand (a plain socket with a GID on the wire), ACKing each WRITE by hand; a WRITE C
  sent whose ACK does not come in time goes again from the Python path, byte for byte."""
  def frames() -> list[bytes]:
    pci = open_model("bnxt", 0)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(10)
    up = Bnxt(pci)
    try:
      up.bring_up("10.0.0.1")
      gid, mac = bytes(10) + b"\xff\xff\x0a\0\0\x09", b"\2\0\0\0\0\x09"
      table = up.model.port.wire.table
      fd, token = table.hold(sock.getsockname())
      table.publish(gid, sock.getsockname(), token)
      a = QPair(up)
      a.connect(9, gid, mac)
      key, mem, va = up.register(4096)
      mem.view[:] = random.Random(2).randbytes(4096)
      path, got = roce.Path(mac, up.mac, gid, up.gid), []
      for j, (n, wqe_type) in enumerate(((8, WRITE_IMM), (3, WRITE_IMM), (5, WRITE))):
        for i in range(4):
          a.post(wqe_type, [(va + 64 * i + 8 * j, key, n)], n, 0x10000 + 8 * i, 0x77, imm=i << 8 | j)
          got.append(sock.recv(65536))
          if i == 3:                                 # not ACKed in time: the transport sends it again (rc.py, Python)
            with up.model.lock:
              q = up.model.roce.qps[a.qpn].rc
              q.deadline = time.monotonic()
              q._timer()
            got.append(sock.recv(65536))
            assert got[-1] == got[-2]
          p = roce.decode(got[-1])
          ack = roce.Packet(roce.ACKNOWLEDGE, p.psn, a.qpn, syndrome=roce.AETH_ACK | roce.AETH_CREDITS_INVALID, msn=len(got))
          sock.sendto(b"".join(bytes(x) for x in roce.encode(path, ack)), up.model.port.wire.endpoint)
          assert bnxt_hsi.cq_req.from_buffer_copy(a.poll()).status == bnxt_hsi.CQ_REQ_STATUS_OK
      table.withdraw(gid, sock.getsockname())
      os.close(fd)
      return got, up.model.port.tx_taken, up.model.roce.qps[a.qpn].rc.stats.retransmitted
    finally:
      pci.close()
      sock.close()
  with_c, taken, again = frames()
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c, _, _ = frames()
  assert with_c == without_c and again == 3 and taken == 12 - 6     # (each shape's first two WQEs: Python; then C)
  assert [roce.decode(f).opcode for f in with_c[::5]] == [roce.WRITE_ONLY_IMM, roce.WRITE_ONLY_IMM, roce.WRITE_ONLY]


class Verbs:
  """mlx5 NIC 0's QP a writing into NIC 1's QP b (QPs set up by drivers/mlx5), its WQEs made by hand: WRITEs with
  immediate of 8 bytes, signaled, one data segment each."""
  def __init__(self):
    self.ca, self.cb = open_context("mlx5", "mock-0", ip="10.0.0.1"), open_context("mlx5", "mock-1", ip="10.0.0.2")
    pa, pb = self.ca.alloc_pd(), self.cb.alloc_pd()
    self.cqa, self.cqb = self.ca.create_cq(64), self.cb.create_cq(64)
    self.a, self.b = pa.create_qp(self.cqa), pb.create_qp(self.cqb)
    # an ACK timeout of 4.096 us * 2^20 (4.3 s), as Bnxt's QPair has one of 2^18: no retransmission on a loaded machine
    # makes the two runs' packet counts differ
    self.a.connect(self.b.endpoint(200), 100, timeout=20)
    self.b.connect(self.a.endpoint(100), 200)
    self.src = pa.reg_mr(self.ca.alloc(4096), Access.LOCAL_WRITE, 4096)
    self.src.view[:] = random.Random(3).randbytes(4096)
    self.dst = pb.reg_mr(self.cb.alloc(4096), Access.LOCAL_WRITE | Access.REMOTE_WRITE, 4096)
    self.b.post_recv([RecvWR(i) for i in range(RECVS)])
    self.model = self.ca.provider.pci.model
    self.qa, self.n = self.model.qps.qps[self.a.qp_num], 0
    self.done: list = []

  def wqe(self, n: int = 8, flags: int = mlx5_core.MLX5_WQE_CTRL_CQ_UPDATE, index: int = 0, qpn: int = 0, lkey: int = 0,
          at: int | None = None, opmod: int = 0) -> bytes:
    """The next WRITE with immediate (its fields as given, the right ones by default)."""
    at, index = 8 * self.n if at is None else at, self.a.hw.sq.put + index
    self.n += 1
    ctrl = (opmod << 24 | (index & 0xFFFF) << 8 | mlx5_core.MLX5_OPCODE_RDMA_WRITE_IMM).to_bytes(4, "big") + \
           ((qpn or self.a.qp_num) << 8 | 3).to_bytes(4, "big") + bytes([0, 0, 0, flags]) + (0x100 + self.n).to_bytes(4, "big")
    raddr = (self.dst.addr + at % 4096).to_bytes(8, "big") + self.dst.rkey.to_bytes(4, "big") + bytes(4)
    return ctrl + raddr + data_seg(n, lkey or self.src.lkey, self.src.addr + at)

  def post(self, *wqes: bytes, doorbell: bytes | None = None) -> None:
    try: post_raw(self.a, list(wqes), doorbell)
    except ModelError as e: self.done.append(str(e))

  def outcome(self) -> tuple:
    wait(lambda: not self.qa.rc.wrs, "a's WRs to complete")
    with self.model.lock, self.cb.provider.pci.model.lock:   # (as Link.outcome)
      for cq in (self.cqa, self.cqb):
        while True:
          try: got = cq.poll()
          except WCError as e: got = [e.wc]
          if not got: break
          self.done += [(wc.wr_id, wc.status, wc.opcode, wc.imm_data, wc.vendor_err) for wc in got]
    q, wire = self.qa.rc, self.model.port.wire
    return (self.done, bytes(self.dst.view[:256]), q.state, q.next_psn, q.una, q.stats.sent, wire.sent, self.qa.sq_cons,
            self.model.log_lines[-2:])

  def close(self) -> None:
    self.ca.close()
    self.cb.close()


MLX5_CASES = {                 # after four good WQEs (C takes the third and fourth): the case's, then one more
  "same shape": lambda v: v.post(v.wqe()),
  "unsignaled": lambda v: v.post(v.wqe(flags=0)),
  "wrong wqe_index": lambda v: v.post(v.wqe(index=5)),
  "wrong qpn": lambda v: v.post(v.wqe(qpn=v.a.qp_num + 1), v.wqe(index=1)),    # (the doorbell names the QP)
  "opmod": lambda v: v.post(v.wqe(opmod=1)),
  "bad lkey": lambda v: v.post(v.wqe(lkey=v.src.lkey ^ 0x100)),
  "SGE past the MR": lambda v: v.post(v.wqe(at=4092)),
  "another length": lambda v: (v.post(v.wqe(n=16)), v.post(v.wqe(n=16))),
  "a batch": lambda v: v.post(v.wqe(), v.wqe(index=1), v.wqe(index=2)),
  "a batch with a bad one": lambda v: v.post(v.wqe(), v.wqe(index=1, lkey=1), v.wqe(index=2)),
  "doorbell not the last WQE": lambda v: (wqe := v.wqe(), v.post(wqe, doorbell=wqe[:4] + (v.a.qp_num << 8 | 2).to_bytes(4, "big"))),
}
MLX5_TAKEN = {"same shape": 2, "unsignaled": 2, "a batch": 4, "a batch with a bad one": 1, "wrong qpn": 0,
              "doorbell not the last WQE": 2}             # (its WQE goes with the next doorbell's)


def run_mlx5(case: str) -> tuple[tuple, int]:
  v = Verbs()
  try:
    for post in [lambda v: v.post(v.wqe())] * 4 + [MLX5_CASES[case], lambda v: v.post(v.wqe())]:
      wait(lambda: not v.qa.rc.wrs, "the WRs before")
      post(v)
    return v.outcome(), v.model.port.tx_taken
  finally:
    v.close()


@pytest.mark.parametrize("case", MLX5_CASES)
def test_an_mlx5_wqe_gets_the_same_outcome_with_and_without_c(monkeypatch, case):
  """mlx5's checks (opcode, wqe_index, qpn, opmod, ds, fm_ce_se but CQ_UPDATE, byte_count, the data segment in the same
  MKey), the doorbell naming the last WQE: C takes what passes, the Python path gets the rest, with the same outcome."""
  with_c, taken = run_mlx5(case)
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c, none = run_mlx5(case)
  assert with_c == without_c and none == 0
  assert taken == 2 + MLX5_TAKEN.get(case, 0)
  errors = [done[1] for done in with_c[0] if isinstance(done, tuple) and done[1] != WCStatus.SUCCESS]
  if case == "doorbell not the last WQE": assert "a doorbell carries the last posted WQE's first 8 bytes" in with_c[0][0]
  if case in ("wrong wqe_index", "wrong qpn", "opmod"): assert errors[0] == WCStatus.LOC_QP_OP_ERR
  if case in ("bad lkey", "SGE past the MR", "a batch with a bad one"): assert errors[0] == WCStatus.LOC_PROT_ERR
  if case in ("same shape", "a batch", "another length"): assert not errors
