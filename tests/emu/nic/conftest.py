import pytest

from drivers.system import open_model
from tests.emu.nic.bnxt_cmds import Bnxt
from tests.emu.nic.memnic import MemNIC


@pytest.fixture
def nic():
  """Emulated NIC 0 through drivers.system, bus mastering on, nothing brought up."""
  pci = open_model("bnxt", 0)
  yield Bnxt(pci)
  pci.close()


@pytest.fixture
def up(nic):
  """Emulated NIC 0 brought up as a driver does (rdma.md 5.4): HWRM, backing store, RCFW, L2 receive path, GID 10.0.0.1."""
  nic.bring_up("10.0.0.1")
  return nic


@pytest.fixture
def peer():
  """Emulated NIC 1, brought up with GID 10.0.0.2."""
  pci = open_model("bnxt", 1)
  n = Bnxt(pci)
  n.bring_up("10.0.0.2")
  yield n
  pci.close()


@pytest.fixture
def pair():
  """Two minimal RoCE NICs on the wire (tests/emu/nic/memnic.py), a at 10.0.0.1 and b at 10.0.0.2."""
  a, b = MemNIC("a", "10.0.0.1", 1), MemNIC("b", "10.0.0.2", 2)
  yield a, b
  a.close()
  b.close()
