"""Every queue-API contract check (tests/hcq/contract.py) on every registered emulated device string."""
import pytest
from drivers.hcq import open_device
from tests.hcq.contract import CHECKS, device_strings


@pytest.fixture(scope="module", params=device_strings())
def dev(request):
  d = open_device(request.param)
  yield d
  d.close()


@pytest.mark.parametrize("check", [c for _, c in CHECKS], ids=[name for name, _ in CHECKS])
def test_contract(dev, check):
  check(dev)


def test_every_registered_emulated_device_is_in_the_contract():
  assert {"CPU", "MOCKKFD+AMD", "MOCKPCI+AMD", "MOCKUSB+AMD", "MOCK+NV", "MOCK+QCOM"} <= set(device_strings())
