import pytest

from drivers.rdma import open_context


@pytest.fixture
def nic():
  """The emulated NetXtreme-E mock-0 with its PHY loopback on."""
  ctx = open_context("bnxt", "mock-0", ip="10.0.0.1")
  ctx.set_loopback(True)
  yield ctx
  ctx.close()
