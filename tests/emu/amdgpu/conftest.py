import pytest
from drivers.system import open_model
from emu.amdgpu.fwbuild import write_firmware
from tests.emu.amdgpu.navi31_driver import Driver, firmware_pieces


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
def drv(dev) -> Driver: return Driver(dev)


@pytest.fixture
def booted(drv, synthetic_fw) -> Driver:
  drv.boot(firmware_pieces(synthetic_fw))
  return drv
