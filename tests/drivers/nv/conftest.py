import pytest
from drivers.hcq import open_device


@pytest.fixture
def nv():
  d = open_device("MOCK+NV")
  model = d.gpu.k.model
  yield d
  d.close()
  assert model.rm.clients == {} and model.hosts == {} and model.uvm.ranges == []   # nothing left in RM, UVM or the host
