import os, shutil, tempfile
import pytest


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path, monkeypatch):
  """Each test gets its own lock directory; the compile cache is shared per test session."""
  monkeypatch.setenv("TMPDIR", str(tmp_path))
  tempfile.tempdir = None
  yield
  tempfile.tempdir = None


def pytest_addoption(parser):
  parser.addoption("--nv-ptx", action="store_true",
                   help="tests/compute: run every kernel the CPU device runs again as CUDA C on the PTX engine (NVRTC) and "
                        "compare it with the CPU's result (tests/compute/nv_ptx.py)")


def pytest_configure(config):
  os.environ.setdefault("XDG_CACHE_HOME", os.path.join(tempfile.gettempdir(), f"hcq-test-cache-{os.getuid()}"))
  # a lock and device-state directory per test process: fixtures wider than a test (module-scoped devices) must not
  # meet another xdist worker's emulated devices
  config._hcq_tmp = tempfile.mkdtemp(prefix=f"hcq-test-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-")
  os.environ["TMPDIR"] = config._hcq_tmp
  tempfile.tempdir = None


def pytest_unconfigure(config):
  if tmp := getattr(config, "_hcq_tmp", None): shutil.rmtree(tmp, ignore_errors=True)


def _am_capable_gpu() -> bool:
  from drivers.amd.smi import devices
  return any(d.emulated_index is None for d in devices())


def _usb_bridge() -> bool:
  from drivers.system.usb import list_usb
  return bool(list_usb())


def _free_bnxt_nic() -> bool:
  from drivers.bnxt import free_functions
  return os.path.exists("/dev/vfio/vfio") and bool(free_functions())


def _free_mlx5_nic() -> bool:
  from drivers.mlx5 import free_functions
  return os.path.exists("/dev/vfio/vfio") and bool(free_functions())


# what each hardware marker needs, and how to tell it is there
HARDWARE = {"amd": ("an AMD GPU under amdgpu (/dev/kfd)", lambda: os.path.exists("/dev/kfd")),
            "amd-pci": ("a supported AMD GPU free of amdgpu (bound to vfio-pci or to nothing)", _am_capable_gpu),
            "usb": ("an AMD GPU behind an ASM24xx USB bridge (USB VID:PID add1:0001 or 3801:0001) the user may open", _usb_bridge),
            "nv": ("an NVIDIA GPU (/dev/nvidiactl)", lambda: os.path.exists("/dev/nvidiactl")),
            "bnxt": ("a Broadcom NetXtreme-E (Thor) NIC unbound from bnxt_en, and VFIO (/dev/vfio/vfio, the NIC on vfio-pci)",
                     _free_bnxt_nic),
            "qcom": ("an Adreno GPU under the KGSL driver (/dev/kgsl-3d0)", lambda: os.path.exists("/dev/kgsl-3d0")),
            "mlx5": ("an NVIDIA/Mellanox ConnectX NIC unbound from mlx5_core, and VFIO (/dev/vfio/vfio, the NIC on vfio-pci)",
                     _free_mlx5_nic)}


def pytest_collection_modifyitems(config, items):
  """@pytest.mark.hardware("amd") tests run only where that hardware exists; elsewhere they skip, saying what they need."""
  present = {}
  for item in items:
    for m in item.iter_markers("hardware"):
      what, check = HARDWARE[m.args[0]]
      if m.args[0] not in present: present[m.args[0]] = check()
      if not present[m.args[0]]: item.add_marker(pytest.mark.skip(reason=f"needs real hardware: {what}"))
