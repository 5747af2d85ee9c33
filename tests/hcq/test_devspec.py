import pytest
from drivers.hcq import parse_device, DeviceSpec, open_device


@pytest.mark.parametrize("s,spec", [("CPU", DeviceSpec("CPU", None)), ("AMD", DeviceSpec("AMD", None)),
                                    ("MOCKPCI+AMD", DeviceSpec("AMD", "MOCKPCI")), ("kfd+amd:1", DeviceSpec("AMD", "KFD", 1)),
                                    ("MOCK+NV", DeviceSpec("NV", "MOCK")), ("QCOM:2", DeviceSpec("QCOM", None, 2))])
def test_valid_device_strings_parse(s, spec):
  assert parse_device(s) == spec


@pytest.mark.parametrize("s", ["", "GPU", "PCI+CPU", "MOCKPCI+NV", "AMD:x", "AMD+KFD", "CPU:1", "+AMD"])
def test_bad_device_string_lists_valid_forms(s):
  with pytest.raises(ValueError) as e: parse_device(s)
  assert "valid forms" in str(e.value) or "one CPU device" in str(e.value)
  if "valid forms" in str(e.value): assert "MOCKPCI+AMD" in str(e.value) and "CPU" in str(e.value)


def test_device_string_round_trips():
  for s in ["CPU", "AMD", "MOCKKFD+AMD", "PCI+AMD:3", "MOCK+QCOM"]: assert str(parse_device(s)) == s


def test_unbuilt_driver_is_a_clear_error():
  with pytest.raises(ValueError, match="not part of this build"): open_device("MOCK+QCOM")
