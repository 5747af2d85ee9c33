"""Vendors and models plug in without an edit to the shared layers, and the shared layers name none of them."""
import ast, ctypes, errno, json, os, re, subprocess, sys
from pathlib import Path

import pytest

from common.plugin import BridgeModel, KernelModel, PCIModel
from drivers.hcq import open_device, available_vendors, valid_forms, parse_device
from drivers.system.kernel import kernel_interface
from drivers.system.registry import Mock, Vendor, model, models, vendors

REPO = Path(__file__).resolve().parents[1]
PLUGINS = REPO / "tests" / "plugins"          # the toy vendor's package, outside drivers/
HCQ_SMI = Path(sys.executable).parent / "hcq_smi"


@pytest.fixture
def toy_installed(tmp_path, monkeypatch) -> str:
  """Installs the toy vendor as a distribution would: its metadata (.dist-info with entry_points.txt) and its package on
  sys.path. Returns the PYTHONPATH that gives a child process the same."""
  dist = tmp_path / "site" / "hcq_toy-0.1.dist-info"
  dist.mkdir(parents=True)
  (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hcq-toy\nVersion: 0.1\n")
  (dist / "entry_points.txt").write_text("[hcq.vendors]\nTOY = toyvendor:VENDOR\nTOYNIC = toyvendor.nic:VENDOR\n\n[hcq.models]\n"
                                         "toyfn = toyvendor.model:MODEL\ntoykernel = toyvendor.kernel:MODEL\ntoynic = toyvendor.nic:MODEL\n")
  for p in (PLUGINS, dist.parent): monkeypatch.syspath_prepend(str(p))
  return os.pathsep.join([str(dist.parent), str(PLUGINS), *filter(None, [os.environ.get("PYTHONPATH")])])   # and this checkout


def hcq_smi(pythonpath: str, *argv: str) -> subprocess.CompletedProcess:
  """The console script in a fresh process, which finds the plugin as a user's installation would."""
  return subprocess.run([HCQ_SMI, *argv], env={**os.environ, "PYTHONPATH": pythonpath}, capture_output=True, text=True,
                        timeout=120)


def test_toy_vendor_opens_by_device_string_and_hcq_smi_lists_its_device(toy_installed):
  assert "TOY" in available_vendors() and "MOCK+TOY" in valid_forms()
  with pytest.raises(ValueError, match="TOY has no interface PCI"): parse_device("PCI+TOY")
  dev = open_device("MOCK+TOY")
  try:
    assert (type(dev).__name__, dev.name, open_device("TOY")) == ("ToyDevice", "MOCK+TOY", dev)
    buf = dev.alloc(8)
    buf.copyin(memoryview(b"toy-data"))
    assert bytes(buf.copyout()) == b"toy-data"
    r = hcq_smi(toy_installed, "toy", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert [(d["bus"], d["kind"], d["vendor_id"], d["device_id"], d["name"], d["pid"]) for d in json.loads(r.stdout)] == \
      [("mock-0", "emulated", "0x1234", "0x11e8", "emulated toy accelerator", os.getpid())]
  finally: dev.close()
  r = hcq_smi(toy_installed, "toy", "list")    # closed: its lock is free, its state keeps it listed
  assert r.returncode == 0 and r.stdout.splitlines()[1].split()[:3] == ["mock-0", "emulated", "1234:11e8"], r.stdout + r.stderr
  assert r.stdout.splitlines()[1].split()[-1] == "no"
  r = hcq_smi(toy_installed, "toy", "rmmod", "--expect")
  assert (r.returncode, r.stdout.strip()) == (0, "Kernel modules are not loaded")


def test_a_toy_kernel_driver_model_serves_its_files_and_ioctls_through_the_kernel_interface(toy_installed):
  """Its own file and one registration: the base does the fd table, the ioctl's size rule and the errors naming it."""
  from toyvendor.kernel import DEVICE, TOY_IOC_ADD, VERSION, ToyAdd
  assert "toykernel" in [m.name for m in models(KernelModel)]
  k = kernel_interface(mock="toykernel")
  fd = k.open(DEVICE)
  arg = ToyAdd((1 << 64) - 5, 7)
  assert k.ioctl(fd, TOY_IOC_ADD, arg) == 0 and arg.sum == ((1 << 64) - 5 + 7) % (1 << 64) == 2
  with pytest.raises(OSError, match="toy_accel model: TOY_IOC_ADD: the argument is not 24 bytes of memory") as e:
    k.ioctl(fd, TOY_IOC_ADD, (ctypes.c_uint64 * 2)())
  assert e.value.errno == errno.EFAULT
  with pytest.raises(OSError, match="toy_accel model: ioctl 0x7402 .* is not one this model implements") as e: k.ioctl(fd, 0x7402)
  assert e.value.errno == errno.ENOTTY
  with pytest.raises(FileNotFoundError, match="toy_accel model: no device file /dev/toy_accel1"): k.open("/dev/toy_accel1")
  assert k.read_text(VERSION) == "1.0\n" and k.model.calls == ["TOY_IOC_ADD"]
  k.close(fd)


def test_a_toy_nic_joins_the_rdma_registry_and_keeps_the_nic_provider_contract(toy_installed):
  """A NIC vendor and its model, each one declaration and one entry point: rdma_vendors() offers it and every check of
  the NIC provider contract passes on it, its lock and state its own."""
  from drivers.rdma import open_context, rdma_vendors
  from drivers.system import list_models
  from tests.drivers.rdma.contract import CHECKS, IP
  assert "toynic" in rdma_vendors()
  for _, check in CHECKS:
    ctx = open_context("toynic", "mock-0", ip=IP)
    try:
      ctx.set_loopback(True)
      check("toynic", ctx)
    finally: ctx.close()
  assert [m.bus for m in list_models("toynic")] == ["mock-0"] and list_models("mlx5") == []   # its own state
  ctx = open_context("toynic", "mock-0")
  try: assert ctx.mac == bytes.fromhex("027079000000") and ctx.provider.pci.model.port.name == "toynic-mock-0"
  finally: ctx.close()


def test_the_toys_are_named_by_their_entry_points_only():
  """Adding a vendor, a kernel-driver model or a NIC touched only the toy's own files and the registration the fixture
  writes: no file of the project outside tests/ names them."""
  names = re.compile(r"toyvendor|toyfn|toykernel|toynic|toy_accel", re.I)
  files = [p for d in ("drivers", "emu", "common", "tools", "compute", "bench") for p in (REPO / d).rglob("*") if p.suffix in (".py", ".c", ".h")]
  assert len(files) > 100 and [str(p) for p in [*files, REPO / "pyproject.toml"] if names.search(p.read_text())] == []


def test_every_mock_interface_runs_on_a_registered_model_of_its_kind():
  """Each vendor's `mocks` table names a kernel-driver model for a MOCK interface reached through the kernel, a PCI
  model for one reached as a PCI function (bare or behind the USB bridge); its PCI models are among the vendor's."""
  table = [(v, iface, m) for v in vendors() for iface, m in v.mocks.items()]
  assert {m.via for _, _, m in table} == {"kernel", "pci", "usb"}
  for v, iface, m in table:
    name = m.model or v.pci_models[0]            # None: the vendor's first registered PCI model
    assert isinstance(model(name), KernelModel if m.via == "kernel" else PCIModel), (v.name, iface, m)
    assert (name in v.pci_models) == (m.via != "kernel") and f"{iface}+{v.name}" in v.emulated_devices, (v.name, iface, m)
    if m.via == "usb": assert v.usb_bridges and isinstance(model(v.usb_bridges[0].model), BridgeModel), (v.name, iface, v.usb_bridges)


def test_a_vendor_declares_what_each_of_its_mock_interfaces_runs_on():
  with pytest.raises(ValueError, match=r"vendor TOY2: its MOCK interfaces \['MOCK'\] and those its `mocks` table names \[\] differ"):
    Vendor("TOY2", interfaces=("MOCK",))
  with pytest.raises(ValueError, match=r"interfaces \[\] and those its `mocks` table names \['MOCKPCI'\] differ"):
    Vendor("TOY2", lock_prefix="toy2", mocks={"MOCKPCI": Mock("toyfn", "pci")})
  with pytest.raises(ValueError, match=r"Mock\('toyfn', via='bus'\): via is one of kernel, pci, usb"): Mock("toyfn", "bus")  # type: ignore[arg-type]
  with pytest.raises(ValueError, match="emulated devices of model toyfn take its lock; declare lock_prefix"):
    Vendor("TOY2", interfaces=("MOCK",), mocks={"MOCK": Mock("toyfn", "pci")})
  toy2 = Vendor("TOY2", interfaces=("PCI", "MOCK"), lock_prefix="toy2", models=("toyold",), mocks={"MOCK": Mock("toyfn", "usb")})
  assert (toy2.models, toy2.kernel_models, toy2.emulated_devices) == (("toyold", "toyfn"), {}, ("MOCK+TOY2",))
  with pytest.raises(ValueError, match=r"PCI\+TOY2 is no emulated interface; those of TOY2: MOCK"): toy2.open_mock("PCI")
  with pytest.raises(ValueError, match=r"MOCK\+TOY2 runs behind a USB bridge, and TOY2 declares none \(usb_bridges\)"): toy2.open_mock("MOCK")
  with pytest.raises(ValueError, match=r"Mock\(None, via='kernel'\): name the kernel-driver model"): Mock(None, "kernel")
  with pytest.raises(ValueError, match=r"Mock\('toyfn', via='pci', chooses='chip'\): only a kernel-driver model takes its PCI model"):
    Mock("toyfn", "pci", chooses="chip")
  toy3 = Vendor("TOY3", interfaces=("MOCK",), lock_prefix="toy3", pci_vendors=(0xFFFE,), mocks={"MOCK": Mock(None, "pci")})
  assert (toy3.models, toy3.pci_models) == ((), ())          # the registry has no PCI model of vendor 0xfffe
  with pytest.raises(ValueError, match=r"^MOCK\+TOY3: no PCI model of vendor id 0xfffe is registered \(hcq.models\) in this build$"):
    toy3.open_mock("MOCK")


def test_toy_vendor_is_absent_without_its_metadata():
  assert "TOY" not in available_vendors()
  with pytest.raises(ValueError, match="the TOY driver is not part of this build"): parse_device("MOCK+TOY")
  r = subprocess.run([HCQ_SMI, "toy", "list"], capture_output=True, text=True, timeout=120)
  assert r.returncode == 2 and "invalid choice: 'toy'" in r.stderr
  from drivers.rdma import rdma_vendors
  assert "toynic" not in rdma_vendors()
  with pytest.raises(ValueError, match="no kernel-driver model named 'toykernel'"): kernel_interface(mock="toykernel")


# ---- the shared layers name no vendor in code: not in an import, not in a string literal. Comments and docstrings
# may name one as an example (a docstring is documentation, not behaviour). The host's IOMMU kernel parameters
# (intel_iommu=on, amd_iommu=on, in VFIO's advice) name the host CPU's platform, not a device vendor.
# The shared model layers are emu/'s and emu/nic/'s own files (their vendor folders are the vendors' rooms), C included.
SHARED = sorted([*REPO.glob("drivers/hcq/**/*.py"), *REPO.glob("drivers/system/**/*.py"), *REPO.glob("drivers/rdma/**/*.py"),
                 *REPO.glob("common/*.py"), *REPO.glob("emu/*.py"), *REPO.glob("emu/nic/*.py")])
SHARED_C = sorted([*REPO.glob("emu/*.[ch]"), *REPO.glob("emu/c/*.[ch]"), *REPO.glob("emu/nic/*.[ch]")])
VENDOR_WORDS = re.compile(r"(?<![a-z0-9])(amd|amdgpu|am|ati|radeon|navi\d*|gfx\d*|rdna\d*|kfd|nv|nvidia|nvrm|cuda|uvm|"
                          r"qcom|qualcomm|adreno|kgsl|bnxt|broadcom|mlx5|mellanox|connectx|asmedia|asm24xx|intel)(?![a-z]|_iommu=)", re.I)


def _docstrings(tree: ast.AST) -> set[int]:
  return {id(node.body[0].value) for node in ast.walk(tree)
          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
          and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def vendor_names_in_code(path: Path) -> list[str]:
  tree = ast.parse(path.read_text(), str(path))
  docs, found = _docstrings(tree), []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import): texts = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom): texts = [node.module or "", *(a.name for a in node.names)]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs: texts = [node.value]
    else: continue
    found += [f"{path}:{node.lineno}: {m.group(0)!r} in {t!r}" for t in texts for m in VENDOR_WORDS.finditer(t)]
  return found


def vendor_names_in_c(path: Path) -> list[str]:
  """Vendor words in C code, comments aside (a comment may name one as an example)."""
  code = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), path.read_text(), flags=re.S)
  return [f"{path}:{n}: {m.group(0)!r}" for n, line in enumerate(code.splitlines(), 1) for m in VENDOR_WORDS.finditer(line)]


def test_shared_layers_name_no_vendor_in_code():
  assert len(SHARED) > 20 and REPO / "drivers/hcq/device.py" in SHARED and REPO / "emu/pci.py" in SHARED
  assert REPO / "drivers/rdma/queues.py" in SHARED and REPO / "emu/nic/txflow.py" in SHARED
  assert [hit for path in SHARED for hit in vendor_names_in_code(path)] == []


def test_shared_c_sources_name_no_vendor_in_code(tmp_path):
  assert REPO / "emu/nic/fastpath.c" in SHARED_C and REPO / "emu/nic/txflow.h" in SHARED_C
  assert [hit for path in SHARED_C for hit in vendor_names_in_c(path)] == []
  (f := tmp_path / "x.c").write_text("/* bnxt in a comment */\nint tx_mlx5(void);  // mlx5\n")
  assert [h.split(": ", 1)[1] for h in vendor_names_in_c(f)] == ["'mlx5'"]


def test_the_vendor_name_check_finds_imports_and_literals(tmp_path):
  (f := tmp_path / "x.py").write_text('"""Docstrings may say AMD."""\nimport drivers.amd\n'
                                      'x = f"{y}+NV"  # comments may say mlx5\nenv, nvram = 1, "nvram"\n')
  assert [h.split(": ", 1)[1] for h in vendor_names_in_code(f)] == ["'amd' in 'drivers.amd'", "'NV' in '+NV'"]
