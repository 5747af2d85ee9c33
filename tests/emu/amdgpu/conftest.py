import pytest
from drivers.amd.pci import PCIIface
from drivers.system import open_model
from emu.amdgpu.fwbuild import write_firmware
from tests.emu.amdgpu.regs import Regs


@pytest.fixture(scope="session")
def synthetic_fw(tmp_path_factory) -> str:
  path = str(tmp_path_factory.mktemp("navi31-fw"))
  write_firmware(path)
  return path


@pytest.fixture
def dev():
  d = open_model("navi31")
  yield d
  d.close()


@pytest.fixture
def regs(dev) -> Regs: return Regs(dev)


@pytest.fixture
def booted(synthetic_fw, monkeypatch) -> Regs:
  """The emulated Navi31 as the real AM driver booted it (synthetic firmware); the test drives it from there."""
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", synthetic_fw)
  iface = PCIIface(open_model("navi31"))
  yield Regs(iface.pci, iface)
  iface.pci.close()   # not the driver's fini: a test may leave the device reset, faulted or with its queues dropped
