"""The receive completions of single-packet RDMA WRITEs with immediate, which each NIC model's C datapath writes itself
into the receive CQ (emu/nic/fastpath.py: the model's completion recipe), are byte for byte the CQEs the model writes
with the C datapath off (HCQ_NIC_FASTPATH=0), over more than one pass of the ring (the phase bit); the requester
completions the model writes into the same CQ between them land after them, never in their slots; and an armed CQ
gets the same notification (bnxt: the nq_cn with the CQ's toggle, mlx5: the completion EQE). Two emulated NICs
ping-pong: each WRITE's receiver polls its CQ for it, then answers with one of its own."""
import os, time

import pytest

from drivers.rdma import Access, RecvWR, SendFlags, SendWR, WROpcode, open_context, rdma_vendors
from emu.nic import fastpath

pytestmark = pytest.mark.skipif(fastpath.lib() is None, reason="the C datapath needs a host C compiler (clang-22 or gcc)")
RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE
ROUNDS, RECVS = 80, 40                 # 160 CQEs into each CQ of 128: the ring wraps
ARMED = (30, 31)                       # rounds in which the receiver arms its CQ before the WRITE comes


def poll(cq, n: int) -> list[tuple]:
  out, end = [], time.monotonic() + 30
  while len(out) < n:
    out += [(wc.wr_id, wc.status.name, wc.opcode.name, wc.imm_data, wc.byte_len) for wc in cq.poll(n - len(out))]
    if time.monotonic() > end: raise TimeoutError(f"{len(out)} of {n} completions")
    os.sched_yield()
  return out


def notifications(ctx, cq) -> int:
  """Completion notifications the model has written for `cq` (bnxt: its arm toggle, mlx5: its EQ's producer)."""
  model = ctx.provider.pci.model
  with model.lock:
    if hasattr(model, "roce"): return model.roce.cqs[cq.hw.cq_id].toggle
    return model.eqs.eqs[model.cqs.cqs[cq.hw.cqn].eqn].prod


def ping_pong(nic: str, armed: bool) -> tuple[list, list, list, int]:
  """-> (each side's completions in order, each side's CQ ring bytes, each side's notifications, CQEs C wrote)."""
  ctxs = [open_context(nic, f"mock-{i}", ip=f"10.0.0.{i + 1}") for i in range(2)]
  try:
    cqs = [c.create_cq(128) for c in ctxs]
    pds = [c.alloc_pd() for c in ctxs]
    qps = [pd.create_qp(cq) for pd, cq in zip(pds, cqs)]
    for i in range(2): qps[i].connect(qps[1 - i].endpoint(0), 0)
    mrs = [pd.reg_mr(c.alloc(64), RW, 64) for pd, c in zip(pds, ctxs)]
    for qp in qps: qp.post_recv([RecvWR(1000 + i) for i in range(RECVS)])
    got: list[list] = [[], []]
    for r in range(ROUNDS):
      for side in (0, 1):
        other = 1 - side
        if armed and side == 0 and r in ARMED: cqs[other].hw.wait_event(0)    # (arms it; nothing to sleep for)
        mrs[side].view[:8] = bytes([r, side]) * 4
        qps[side].post_send(SendWR(2 * r + side, WROpcode.RDMA_WRITE_WITH_IMM, [mrs[side].sge(0, 8)], SendFlags.SIGNALED,
                                   imm_data=2 * r + side, remote_addr=mrs[other].addr + 8 * (r % 7), rkey=mrs[other].rkey))
        while not any(c[3] == 2 * r + side for c in got[other]): got[other] += poll(cqs[other], 1)
        if sum(c[3] is not None for c in got[other]) % (RECVS // 2) == 0:
          qps[other].post_recv([RecvWR(2000 + r)] * (RECVS // 2))
    for side in (0, 1): got[side] += poll(cqs[side], ROUNDS - sum(c[3] is None for c in got[side]))
    rings = [bytes(getattr(cq.hw, "q", cq.hw).mem.view[:128 * (32 if nic == "bnxt" else 64)]) for cq in cqs]
    rxs = [c.provider.pci.model.port.wire.rx for c in ctxs]
    return got, rings, [notifications(c, cq) for c, cq in zip(ctxs, cqs)], sum(rx.cqes for rx in rxs if rx is not None)
  finally:
    for c in ctxs: c.close()


@pytest.mark.parametrize("armed", [False, True], ids=["polled", "armed twice"])
@pytest.mark.parametrize("nic", list(rdma_vendors()))
def test_c_written_receive_completions_are_the_models(monkeypatch, nic, armed):
  with_c = ping_pong(nic, armed)
  monkeypatch.setattr(fastpath, "lib", lambda: None)
  without_c = ping_pong(nic, armed)
  assert with_c[:3] == without_c[:3] and without_c[3] == 0 and with_c[3] > 0
  for side in (0, 1):                  # its own WRITE's completion, then the answer's receive, round after round
    assert [c[3] for c in with_c[0][side] if c[3] is not None] == list(range(1 - side, 2 * ROUNDS, 2))
    assert [c[0] for c in with_c[0][side] if c[3] is None] == list(range(side, 2 * ROUNDS, 2))
  assert with_c[2] == ([0, len(ARMED)] if armed else [0, 0])
