"""Receive WRs complete in the order they were posted (IBA 1.4 vol 1 10.8.3: a QP's work requests complete in order),
a bad one included: the NIC reads a receive WQE, and checks its L_Key, only when an incoming message consumes it. Three
good receives, then one whose lkey names no MR, then one more good one: the first three SENDs (or WRITEs with
immediate) land in the good ones, in order, with their data; the fourth reaches the bad one, which completes with a
local protection error (the requester's gets a NAK, remote operational error), and the receive after it is flushed.
Nothing completes before a message arrives for it. The same, completion for completion and byte for byte, with the NIC
models' C datapath (emu/nic/fastpath.py, which takes single-packet WRITEs with immediate) and without it."""
import pytest

from drivers.rdma import SGE, Access, RecvWR, SendWR, WCError, WROpcode, open_context, rdma_vendors
from emu.nic import fastpath

RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE
SIZE = 64


def transcript(nic: str, opcode: WROpcode) -> tuple[list, bytes, int]:
  """Run it between two emulated NICs (mock-0 sends to mock-1): -> (the completions in order as (side, wr_id, status,
  byte_len, imm, whether the error names the bad lkey), mock-1's receive buffer, packets mock-1's C datapath took)."""
  ctxs = [open_context(nic, f"mock-{i}", ip=f"10.0.0.{i + 1}") for i in range(2)]
  try:
    cqs = [c.create_cq(64) for c in ctxs]
    pds = [c.alloc_pd() for c in ctxs]
    a, b = (pd.create_qp(cq) for pd, cq in zip(pds, cqs))
    a.connect(b.endpoint(0), 0)
    b.connect(a.endpoint(0), 0)
    src = pds[0].reg_mr(ctxs[0].alloc(SIZE), RW, SIZE)
    inbox = pds[1].reg_mr(ctxs[1].alloc(4 * SIZE), RW, 4 * SIZE)
    bad = inbox.lkey ^ 0x5A5A00                        # names no MR of mock-1
    b.post_recv([RecvWR(5 + i, [inbox.sge(SIZE * i, SIZE)]) for i in range(3)] +
                [RecvWR(8, [SGE(inbox.addr + 3 * SIZE, SIZE, bad)]), RecvWR(9, [inbox.sge(3 * SIZE, SIZE)])])
    got: list = [cqs[1].poll()]                        # nothing has arrived: nothing completes, the bad WQE neither

    def wait(side: str, cq) -> None:
      try: got.extend((side, wc.wr_id, wc.status.name, wc.byte_len, wc.imm_data, False) for wc in cq.wait(1, timeout_s=30))
      except WCError as e: got.append((side, e.wc.wr_id, e.wc.status.name, e.wc.byte_len, e.wc.imm_data, f"lkey {bad:#x}" in str(e)))
    for i in range(1, 5):
      src.view[:] = bytes([i]) * SIZE
      at = dict(remote_addr=inbox.addr + SIZE * (i - 1), rkey=inbox.rkey) if opcode == WROpcode.RDMA_WRITE_WITH_IMM else {}
      a.post_send(SendWR(i, opcode, [src.sge()], imm_data=0x100 + i, **at))
      wait("a", cqs[0])
      wait("b", cqs[1])
    wait("b", cqs[1])
    got.append((a.state.name, b.state.name, cqs[1].poll()))   # (the NIC's flush CQE for wr_id 9 is dropped: already flushed)
    rx = ctxs[1].provider.pci.model.port.wire.rx
    return got, bytes(inbox.view), rx.taken if rx is not None else 0
  finally:
    for c in ctxs: c.close()


@pytest.mark.parametrize("opcode", [WROpcode.SEND, WROpcode.RDMA_WRITE_WITH_IMM], ids=lambda o: o.name)
@pytest.mark.parametrize("nic", list(rdma_vendors()))
def test_a_bad_receive_wqe_fails_when_a_message_reaches_it_after_the_good_ones_before_it(monkeypatch, nic, opcode):
  with_c, have_c = transcript(nic, opcode), fastpath.lib() is not None
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c = transcript(nic, opcode)
  imm = opcode == WROpcode.RDMA_WRITE_WITH_IMM
  assert with_c[0] == [[]] + [x for i in range(1, 4) for x in (("a", i, "SUCCESS", SIZE, None, False),
                                                               ("b", 4 + i, "SUCCESS", 0 if imm else SIZE, 0x100 + i if imm else None, False))] + \
    [("a", 4, "REM_OP_ERR", SIZE, None, False), ("b", 8, "LOC_PROT_ERR", 0, None, True), ("b", 9, "WR_FLUSH_ERR", 0, None, False),
     ("ERR", "ERR", [])]
  assert with_c[1] == b"".join(bytes([i]) * SIZE for i in (1, 2, 3)) + bytes(SIZE)    # the fourth message wrote nothing
  assert with_c[:2] == without_c[:2] and without_c[2] == 0
  assert with_c[2] == (2 if imm and have_c else 0)   # C took the second and third WRITE with immediate, not the fourth
