"""Every NIC provider contract check (tests/drivers/rdma/contract.py) on emulated NIC mock-0 of every registered RDMA NIC
vendor, and what opening and closing a NIC promises."""
import re
import pytest

from drivers.rdma import Access, VerbsError, open_context, rdma_vendors
from drivers.system import DeviceBusyError
from tests.drivers.rdma.contract import CHECKS, IP, Pair


@pytest.fixture(params=list(rdma_vendors()))
def nic(request):
  ctx = open_context(request.param, "mock-0", ip=IP)
  ctx.set_loopback(True)
  yield request.param, ctx
  ctx.close()


@pytest.mark.parametrize("check", [c for _, c in CHECKS], ids=[name for name, _ in CHECKS])
def test_contract(nic, check):
  check(*nic)


@pytest.mark.parametrize("vendor", list(rdma_vendors()))
def test_closing_a_context_gives_the_nic_back_and_the_next_one_brings_it_up_again(vendor):
  ctx = open_context(vendor, "mock-1", ip="10.0.1.1")
  ctx.set_loopback(True)
  p = Pair(ctx)
  src, dst = p.mr(64, fill=True), p.mr(64)
  p.write(src, dst)
  with pytest.raises(DeviceBusyError, match="device mock-1 is in use by pid"): open_context(vendor, "mock-1")
  ctx.close()
  for what, call in (("alloc_pd", ctx.alloc_pd), ("create_cq", ctx.create_cq), ("reg_mr", lambda: p.pd.reg_mr(bytearray(64))),
                     ("post_send", lambda: p.a.post_send([])), ("post_recv", lambda: p.b.post_recv([])), ("poll", p.cq.poll)):
    with pytest.raises(VerbsError, match=f"{re.escape(ctx.name)}: {what} on a closed context"): call()
  again = open_context(vendor, "mock-1", ip="10.0.1.1")     # the lock is free and the GID no longer on the wire
  try:
    again.set_loopback(True)
    p = Pair(again)
    src, dst = p.mr(64, fill=True), p.mr(64, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    assert p.write(src, dst)[0].byte_len == 64 and bytes(dst.view) == bytes(src.view)
  finally: again.close()


def test_every_registered_nic_is_in_the_contract():
  assert {"bnxt", "mlx5"} <= set(rdma_vendors()) and len(CHECKS) >= 12
