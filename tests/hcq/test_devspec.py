import re
import pytest
from drivers.hcq import parse_device, DeviceSpec, open_device, default_device_name
from drivers.hcq.devspec import openable_vendors


@pytest.mark.parametrize("s,spec", [("CPU", DeviceSpec("CPU", None)), ("AMD", DeviceSpec("AMD", None)),
                                    ("MOCKPCI+AMD", DeviceSpec("AMD", "MOCKPCI")), ("kfd+amd:1", DeviceSpec("AMD", "KFD", 1)),
                                    ("MOCKKFD+AMD", DeviceSpec("AMD", "MOCKKFD")), ("AMD:2", DeviceSpec("AMD", None, 2)),
                                    ("MOCKUSB+AMD", DeviceSpec("AMD", "MOCKUSB")), ("usb+amd:1", DeviceSpec("AMD", "USB", 1))])
def test_valid_device_strings_parse(s, spec):
  assert parse_device(s) == spec


@pytest.mark.parametrize("s", ["", "GPU", "PCI+CPU", "MOCKUSB+NV", "AMD:x", "AMD+KFD", "CPU:1", "+AMD"])
def test_bad_device_string_lists_valid_forms(s):
  with pytest.raises(ValueError) as e: parse_device(s)
  assert "valid forms" in str(e.value) or "one CPU device" in str(e.value)
  if "valid forms" in str(e.value): assert "MOCKPCI+AMD" in str(e.value) and "CPU" in str(e.value)


def test_device_string_round_trips():
  for s in ["CPU", "AMD", "MOCKKFD+AMD", "PCI+AMD:3", "MOCKPCI+AMD:2"]: assert str(parse_device(s)) == s


@pytest.mark.parametrize("s", ["BNXT", "MLX5"])
def test_unbuilt_driver_is_a_clear_error(s):
  """BNXT and MLX5 register for hcq_smi only (no queue-API driver)."""
  with pytest.raises(ValueError, match=r"not part of this build; available: AMD, NV, QCOM, CPU\); valid forms: AMD, NV, QCOM, "
                                       r"CPU, KFD\+AMD.*MOCK\+NV, MOCK\+QCOM"):
    open_device(s)


def test_qcom_has_one_device():
  with pytest.raises(ValueError, match="one QCOM device"): parse_device("QCOM:2")


def test_interface_not_in_this_build_names_the_vendor_and_the_forms():
  with pytest.raises(ValueError, match=r"NV has no interface USB\); valid forms: .*MOCKUSB\+AMD"): parse_device("USB+NV")


def test_default_device_is_announced_as_emulated_in_one_line(monkeypatch, capsys):
  if any(v.probe() for v in openable_vendors()): pytest.skip("this machine has real hardware: it is the default")
  monkeypatch.delenv("DEV", raising=False)
  assert default_device_name() == "MOCKPCI+AMD"
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "using MOCKPCI+AMD, which is emulated" in err and "DEV=CPU" in err
  # it offers devices that run kernels: not those whose vendor compiles none (Vendor.kernels)
  offered = re.findall(r"DEV=([^,)]+)", err)
  assert "MOCK+NV" in offered and "CPU" in offered
  assert [s for v in openable_vendors() if not v.kernels for s in (v.name, *v.emulated_devices) if s in offered] == []
  monkeypatch.setenv("DEV", "CPU")
  assert default_device_name() == "CPU" and capsys.readouterr().err == ""
