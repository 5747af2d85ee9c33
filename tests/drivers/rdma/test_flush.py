"""Moving a QP to ERR completes each posted receive once, as flushed (IBA 1.4 vol 1 10.8.3.3 / 11.6.2: a QP in the
Error state completes its outstanding work requests with WR_FLUSH_ERR): the verbs layer flushes them at the transition,
and the flush CQEs the NIC itself writes for them are consumed by the driver (the CQ's consumer index passes each,
bnxt also retires each RQ WQE) without being handed up a second time."""
import pytest

from drivers.rdma import QPAttr, QPAttrMask as M, QPState, RecvWR, WCError, WCStatus, open_context, rdma_vendors
from tests.drivers.rdma.contract import Pair

HW_CONSUMED = {"bnxt": lambda p: (p.cq.hw.q.cons, len(p.b.hw.rq.posted)),
               "mlx5": lambda p: (p.cq.hw.ci, 0)}       # (CQEs the driver consumed, RQ WQEs it still holds)


@pytest.mark.parametrize("vendor", list(rdma_vendors()))
def test_moving_to_err_flushes_the_posted_receives_once_each(vendor):
  ctx = open_context(vendor, "mock-0", ip="10.0.0.1")
  try:
    ctx.set_loopback(True)
    p = Pair(ctx)
    inbox = p.mr(64)
    p.b.post_recv([RecvWR(i, [inbox.sge()]) for i in range(3)])
    p.b.modify(QPAttr(QPState.ERR), M.STATE)
    flushed = []
    for _ in range(3):
      with pytest.raises(WCError) as e: p.cq.poll()
      flushed.append((e.value.wc.wr_id, e.value.wc.status))
    assert flushed == [(i, WCStatus.WR_FLUSH_ERR) for i in range(3)] and p.cq.poll() == []
    assert HW_CONSUMED[vendor](p) == (3, 0)         # the NIC wrote a flush CQE for each; each was consumed, none handed up
  finally: ctx.close()
