"""Small RDMA WRITEs with immediate between two emulated NICs (mock-0 and mock-1, no loopback), through each vendor's
driver: after the first, the NIC model's C datapath takes them (emu/nic/fastpath.py), and what the verbs layer sees is
what it sees with the Python path alone (HCQ_NIC_FASTPATH=0): the same completions, bytes and errors, a bad R_Key or a
write out of the remote MR's bounds and a bad receive WR posted meanwhile (it fails after the three before it) included."""
import pytest

from drivers.rdma import SGE, Access, RecvWR, SendFlags, SendWR, WCError, WROpcode, open_context, rdma_vendors
from emu.nic import fastpath

pytestmark = pytest.mark.skipif(fastpath.lib() is None, reason="the C datapath needs a host C compiler (clang-22 or gcc)")
RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE


class Ends:
  """Two contexts with one QP each, connected; b's MR is the target of a's WRITEs."""
  def __init__(self, nic: str):
    self.ctxs = [open_context(nic, f"mock-{i}", ip=f"10.0.0.{i + 1}") for i in range(2)]
    self.cqs = [c.create_cq(64) for c in self.ctxs]
    pds = [c.alloc_pd() for c in self.ctxs]
    self.qps = [pd.create_qp(cq) for pd, cq in zip(pds, self.cqs)]
    self.qps[0].connect(self.qps[1].endpoint(0), 0)
    self.qps[1].connect(self.qps[0].endpoint(0), 0)
    self.src = pds[0].reg_mr(self.ctxs[0].alloc(64), RW, 64)
    self.dst = pds[1].reg_mr(self.ctxs[1].alloc(256), RW, 256)
    self.qps[1].post_recv([RecvWR(100 + i) for i in range(8)])

  def write(self, i: int, offset: int = 0, rkey: int | None = None) -> tuple:
    """WRITE with immediate i (8 bytes of i at `offset` of b's MR): (a's completion, b's) as (wr_id, status, imm)."""
    self.src.view[:8] = bytes([i]) * 8
    self.qps[0].post_send(SendWR(i, WROpcode.RDMA_WRITE_WITH_IMM, [self.src.sge(0, 8)], SendFlags.SIGNALED, imm_data=i,
                                 remote_addr=self.dst.addr + offset, rkey=self.dst.rkey if rkey is None else rkey))
    return tuple(self.result(cq) for cq in self.cqs)

  @staticmethod
  def result(cq) -> tuple:
    try: (wc,) = cq.wait(1, timeout_s=30)
    except WCError as e: wc = e.wc
    return wc.wr_id, wc.status.name, wc.imm_data

  def taken(self) -> int:
    return self.ctxs[1].provider.pci.model.port.wire.rx.taken

  def close(self) -> None:
    for c in self.ctxs: c.close()


def run(nic: str, case: str) -> tuple[list, bytes, int]:
  e = Ends(nic)
  try:
    got = [e.write(i, offset=8 * i) for i in range(1, 6)]
    if case == "bad rkey": got.append(e.write(6, rkey=e.dst.rkey ^ 0x100))
    elif case == "out of bounds": got.append(e.write(6, offset=256 - 4))
    elif case == "bad receive":          # posted after C took the others: the three receives before it go first
      e.qps[1].post_recv(RecvWR(200, [SGE(e.dst.addr, 8, e.dst.lkey ^ 0x100)]))
      got += [e.write(i, offset=8 * i) for i in range(6, 10)]
    return got, bytes(e.dst.view), e.taken() if e.ctxs[1].provider.pci.model.port.wire.rx is not None else 0
  finally: e.close()


@pytest.mark.parametrize("nic, case", [(n, c) for n in rdma_vendors() for c in ("good", "bad rkey", "out of bounds", "bad receive")])
def test_small_writes_give_the_same_completions_with_and_without_the_c_datapath(monkeypatch, nic, case):
  with_c = run(nic, case)
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c = run(nic, case)
  bad_receive = case == "bad receive"   # C takes the three WRITEs after the bad receive WR is posted (on mlx5 the first
  late = 3 if nic == "bnxt" else 2      # goes to Python, which reads the new receive WQE), never the fourth
  assert with_c[:2] == without_c[:2] and with_c[2] == 4 + late * bad_receive and without_c[2] == 0   # all but the first
  assert with_c[0][:5] == [((i, "SUCCESS", None), (100 + i - 1, "SUCCESS", i)) for i in range(1, 6)]
  assert with_c[1][:48] == bytes(8) + b"".join(bytes([i]) * 8 for i in range(1, 6))
  if case in ("bad rkey", "out of bounds"): assert with_c[0][5][0] == (6, "REM_ACCESS_ERR", None)
  if bad_receive:
    assert with_c[0][5:] == [((i, "SUCCESS", None), (100 + i - 1, "SUCCESS", i)) for i in range(6, 9)] + \
                            [((9, "REM_OP_ERR", None), (200, "LOC_PROT_ERR", None))]
    assert with_c[1][48:72] == b"".join(bytes([i]) * 8 for i in range(6, 9)) and with_c[1][72:] == bytes(256 - 72)
