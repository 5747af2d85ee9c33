"""hcq_smi against fake sysfs/proc trees, a recording command runner, and real processes holding real locks."""
import json, os, shutil, signal, subprocess, sys, tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from drivers.system.discovery import PCIInfo
from drivers.system.lock import DeviceLock, holder, lock_path
from tools.hcq_smi import Host, main, NOT_IN_USE
from tests.procs import start

REPO = Path(__file__).resolve().parents[2]
# a process that owns one device: a real PCI address through DeviceLock, anything else as an emulated model
HOLDER = """
import os, sys, time
from drivers.system.lock import DeviceLock
from drivers.system.pci import ModelPCIDevice
from emu.pci import PCIFunction
prefix, bus = sys.argv[1], sys.argv[2]
dev = DeviceLock(prefix, bus) if bus.startswith("0000:") else ModelPCIDevice(PCIFunction(bus, 0x1002, 0x744C, 0x030000), prefix)
if len(sys.argv) > 3: os.setresuid(*[int(sys.argv[3])] * 3)   # keep the lock, become that user
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def hold():
  """hold(prefix, bus) starts a process that owns the device; every one still running is killed at the end."""
  procs = []
  def start(prefix: str, bus: str, *uid: str, **kw) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, prefix, bus, *uid], stdout=subprocess.PIPE, cwd=REPO, text=True, **kw)
    procs.append(p)
    assert p.stdout.readline().strip() == "ready", f"holder of {bus} did not start"
    return p
  yield start
  for p in procs:
    if p.poll() is None: p.kill()
    p.wait(10)
    p.stdout.close()


def add_pci(sysfs: Path, bus: str, vendor: int, device: int, cls: int, driver: str | None = None,
            group: int | None = None) -> Path:
  """One PCI function the way sysfs exports it: id/class attributes, config space, reset, driver/iommu links."""
  d = sysfs / "bus" / "pci" / "devices" / bus
  d.mkdir(parents=True)
  (d / "vendor").write_text(f"{vendor:#06x}\n")
  (d / "device").write_text(f"{device:#06x}\n")
  (d / "class").write_text(f"{cls:#08x}\n")
  (d / "config").write_bytes(vendor.to_bytes(2, "little") + device.to_bytes(2, "little") + bytes(252))
  (d / "reset").write_text("")
  if driver:
    (drv := sysfs / "bus" / "pci" / "drivers" / driver).mkdir(parents=True, exist_ok=True)
    (d / "driver").symlink_to(drv)
  if group is not None:
    (g := sysfs / "kernel" / "iommu_groups" / str(group)).mkdir(parents=True, exist_ok=True)
    (d / "iommu_group").symlink_to(g)
  return d


def modules_line(name: str) -> str:
  return f"{name} 16384 0 - Live 0x0000000000000000\n"   # /proc/modules: name size refcount deps state address


class FakeKernel:
  """Runner standing in for modprobe/kill: records every argv; modprobe edits the fake /proc/modules (and
  unbinds the devices of a removed driver, as the kernel does); kill signals the real process."""
  def __init__(self, tmp: Path, loaded=(), rc: int = 0, stderr: str = ""):
    self.proc, self.sysfs, self.calls, self.rc, self.stderr = tmp / "proc", tmp / "sys", [], rc, stderr
    self.proc.mkdir(exist_ok=True)
    (self.proc / "modules").write_text("".join(map(modules_line, ("snd_hda_intel", *loaded))))

  def loaded(self) -> list[str]: return [ln.split()[0] for ln in (self.proc / "modules").read_text().splitlines()]

  def __call__(self, argv):
    self.calls.append(argv)
    args = argv[1:] if argv[0] == "sudo" else argv
    if self.rc == 0 and args[:2] == ["modprobe", "-r"]:
      (self.proc / "modules").write_text("".join(modules_line(m) for m in self.loaded() if m not in args[2:]))
      for link in self.sysfs.glob("bus/pci/devices/*/driver"):
        if link.resolve().name in args[2:]: link.unlink()
    elif self.rc == 0 and args[:2] == ["modprobe", "-a"]:
      (self.proc / "modules").write_text("".join(map(modules_line, self.loaded() + args[2:])))
    elif self.rc == 0 and args[:2] == ["kill", "-KILL"]:
      os.kill(int(args[2]), signal.SIGKILL)
    return subprocess.CompletedProcess(argv, self.rc, "", self.stderr)


def host(tmp: Path, kernel: FakeKernel | None = None, **kw) -> Host:
  kernel = kernel or FakeKernel(tmp)
  return Host(sysfs=str(tmp / "sys"), proc=str(kernel.proc), run=kernel, **{"root": False, **kw})


@pytest.fixture
def amd_tree(tmp_path):
  """A Navi31 (with its HDMI audio function), an MI300X (processing-accelerator class) and an NVIDIA GPU."""
  sysfs = tmp_path / "sys"
  add_pci(sysfs, "0000:03:00.0", 0x1002, 0x744C, 0x030000, driver="amdgpu", group=12)
  add_pci(sysfs, "0000:03:00.1", 0x1002, 0xAB30, 0x040300, driver="snd_hda_intel", group=12)
  add_pci(sysfs, "0000:05:00.0", 0x1002, 0x74A1, 0x120000)
  add_pci(sysfs, "0000:01:00.0", 0x10DE, 0x2684, 0x030000, driver="nvidia", group=3)
  return tmp_path


# ---- list

def test_list_json_merges_pci_functions_with_held_locks(amd_tree, hold, capsys):
  gpu = hold("am", "0000:05:00.0")
  model = hold("am", "mock-0")
  DeviceLock("am", "mock-1").release()       # a lock file left by an earlier run: no device
  hold("nv", "mock-0")                       # another backend's device
  assert main(["amd", "list", "--json"], host(amd_tree)) == 0
  rows = {r["bus"]: r for r in json.loads(capsys.readouterr().out)}
  assert list(rows) == ["0000:03:00.0", "0000:05:00.0", "mock-0"]   # display + accelerator classes, no audio, no NV
  assert rows["0000:03:00.0"] == {"bus": "0000:03:00.0", "kind": "pci", "vendor_id": "0x1002", "device_id": "0x744c",
                                  "name": "Navi 31 [Radeon RX 7900 XT/XTX]", "driver": "amdgpu", "iommu_group": 12,
                                  "in_use": False, "pid": None, "process": None, "lock": None, "usb_path": None,
                                  "bridge_firmware": None}
  mi = rows["0000:05:00.0"]
  assert (mi["name"], mi["driver"], mi["iommu_group"]) == ("Aqua Vanjaram [Instinct MI300X]", None, None)
  assert (mi["in_use"], mi["pid"], mi["lock"]) == (True, gpu.pid, lock_path("am", "0000:05:00.0"))
  assert mi["process"] == Path(f"/proc/{gpu.pid}/comm").read_text().strip()
  emu = rows["mock-0"]
  assert (emu["kind"], emu["pid"], emu["vendor_id"], emu["driver"]) == ("emulated", model.pid, None, None)


def test_list_shows_emulated_navi31_with_state_even_when_free(amd_tree, capsys):
  from drivers.system import open_model
  open_model("navi31", 2, "am").close()         # powered on once: its state directory exists, nobody holds it
  assert main(["amd", "list", "--json"], host(amd_tree)) == 0
  emu = {r["bus"]: r for r in json.loads(capsys.readouterr().out)}["mock-2"]
  assert (emu["kind"], emu["vendor_id"], emu["device_id"], emu["in_use"]) == ("emulated", "0x1002", "0x744c", False)
  assert main(["nv", "list", "--json"], host(amd_tree)) == 0
  assert "mock-2" not in capsys.readouterr().out


def test_list_table_marks_emulated_rows(amd_tree, hold, capsys):
  model = hold("am", "mock-0")
  assert main(["amd", "list"], host(amd_tree)) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[0].split() == ["BUS", "KIND", "ID", "NAME", "DRIVER", "IOMMU", "IN", "USE"]
  assert lines[1].split()[:3] == ["0000:03:00.0", "pci", "1002:744c"] and lines[1].split()[-3:] == ["amdgpu", "12", "no"]
  assert lines[3].split()[:2] == ["mock-0", "emulated"] and f"pid {model.pid} (" in lines[3]


def test_list_nic_backends_take_network_functions(tmp_path, capsys):
  sysfs = tmp_path / "sys"
  add_pci(sysfs, "0000:41:00.0", 0x15B3, 0x101B, 0x020700, driver="mlx5_core")   # InfiniBand subclass
  add_pci(sysfs, "0000:42:00.0", 0x14E4, 0x1750, 0x020000, driver="bnxt_en")
  assert main(["mlx5", "list", "--json"], host(tmp_path)) == 0
  assert [(r["bus"], r["name"]) for r in json.loads(capsys.readouterr().out)] == [("0000:41:00.0", "MT28908 Family [ConnectX-6]")]
  assert main(["bnxt", "list", "--json"], host(tmp_path)) == 0
  assert [r["driver"] for r in json.loads(capsys.readouterr().out)] == ["bnxt_en"]


def test_marketing_name_prefers_the_udev_database():
  gpu = PCIInfo("0000:03:00.0", 0x1002, 0x744C, 0x030000, None, None)
  assert gpu.name == "Navi 31 [Radeon RX 7900 XT/XTX]"
  assert replace(gpu, db_name="Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]").name.endswith("7900M]")
  assert replace(gpu, device_id=0x1234).name == ""


def test_list_without_devices_says_where_it_looked_and_what_there_is(tmp_path, capsys):
  assert main(["nv", "list"], host(tmp_path)) == 0
  assert capsys.readouterr().out.splitlines() == [
    f"No nv hardware here (no PCI function of vendor 0x10de), no held nv_*.lock in {tmp_path}. What there is:",
    "MOCK+NV: emulated GH100 [H200 SXM 141GB] (RM/UVM model), built in each process that opens it"]


def test_a_fresh_machine_says_how_to_make_the_default_device(tmp_path, capsys):
  """No hardware and no emulated device made yet: the listing names what exists and a command that makes the default
  device, which then lists."""
  assert main(["amd", "list"], host(tmp_path)) == 0
  out = capsys.readouterr().out.splitlines()
  assert out[0].startswith("No amd hardware here (no PCI function of vendor 0x1002), no emulated device made yet")
  assert out[1] == "MOCKKFD+AMD: two emulated Navi31s (KFD model), built in each process that opens it"
  assert out[2].startswith("MOCKPCI+AMD: emulated Navi31 (hcq model), the default device when no DEV is set and no hardware")
  assert main([], host(tmp_path)) == 0
  assert out[2] in (every := capsys.readouterr().out.splitlines())
  assert "bnxt mock-<n>: emulated BCM57508 NetXtreme-E (hcq model) NICs, made when first opened: " \
         "hcq-rdma loopback --nic bnxt --pci mock-0" in every
  make = out[2].split("(then listed as mock-0): ", 1)[1]
  assert make.startswith("python -c ")
  r = subprocess.run(sys.executable + make[len("python"):], shell=True, cwd=REPO, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr
  assert main(["amd", "list", "--json"], host(tmp_path)) == 0
  assert [(r["bus"], r["kind"], r["in_use"]) for r in json.loads(capsys.readouterr().out)] == [("mock-0", "emulated", False)]
  assert main([], host(tmp_path)) == 0
  assert not any(ln.startswith("MOCKPCI+AMD: ") for ln in capsys.readouterr().out.splitlines())   # made: a row, no hint


def test_list_shows_every_family_in_one_table(amd_tree, capsys):
  from drivers.rdma import rdma_vendors
  from drivers.system import open_model
  add_pci(amd_tree / "sys", "0000:41:00.0", 0x15B3, 0x101D, 0x020000, driver="vfio-pci")
  for kind in {m for v in rdma_vendors().values() for m in v.models}: open_model(kind, 0).close()   # an emulated NIC of each with state: all mock-0
  owner = _owner("amd")                                        # boots emulated mock-0 and keeps it
  try:
    assert main(["list", "--json"], host(amd_tree)) == 0
    rows = {(r["family"], r["bus"], r["interface"]): r for r in json.loads(capsys.readouterr().out)}
    assert list(rows) == [("AMD", "0000:03:00.0", "KFD+AMD"), ("AMD", "0000:05:00.0", "sysfs"), ("AMD", "mock-0", "MOCKPCI+AMD:0"),
                          ("AMD", None, "MOCKKFD+AMD"), ("NV", "0000:01:00.0", "kernel (nvidia)"), ("NV", None, "MOCK+NV"),
                          ("bnxt", "mock-0", "model"), ("mlx5", "0000:41:00.0", "VFIO"), ("mlx5", "mock-0", "model"),
                          ("QCOM", None, "MOCK+QCOM")]
    gpu = rows["AMD", "mock-0", "MOCKPCI+AMD:0"]
    assert (gpu["pid"], gpu["in_use"], gpu["memory_total"]) == (owner.pid, True, 512 << 20)   # the model's 512 MiB of VRAM
    assert 0 < gpu["memory_used"] < gpu["memory_total"] and 0 <= gpu["utilisation"] <= 100
    assert rows["mlx5", "mock-0", "model"]["name"] == "emulated ConnectX-6 Dx (hcq model)"
    assert rows["NV", None, "MOCK+NV"]["kind"] == "in-process" and rows["NV", None, "MOCK+NV"]["holder"] == "one per process"
    assert all(r["memory_used"] is None for k, r in rows.items() if k[2] != "MOCKPCI+AMD:0")   # no other driver reads it
    assert main([], host(amd_tree)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["FAMILY", "BUS", "NAME", "INTERFACE", "MEMORY", "UTIL", "IN", "USE"] and len(lines) == 11
    row = next(ln for ln in lines if "MOCKPCI+AMD:0" in ln)
    assert row.split()[:2] == ["AMD", "mock-0"] and " / 512 MiB " in row and row.endswith(f"pid {owner.pid} (python)")
  finally: owner.kill(); owner.wait()


def test_python_m_and_console_script(hold, tmp_path):
  model = hold("am", "mock-7")
  r = subprocess.run([sys.executable, "-m", "tools.hcq_smi", "amd", "list", "--json"], cwd=REPO, capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
  assert {"bus": "mock-7", "pid": model.pid, "kind": "emulated"}.items() <= next(
    row for row in json.loads(r.stdout) if row["bus"] == "mock-7").items()
  script = Path(sys.executable).parent / "hcq_smi"
  assert script.exists(), "console script missing: rerun scripts/setup.sh"
  r = subprocess.run([script, "amd", "pids", "--pci_bus", "mock-7"], capture_output=True, text=True)
  assert (r.returncode, r.stdout.split(": ", 1)[1].split()[:2]) == (0, ["pid", str(model.pid)])


# ---- bad input

@pytest.mark.parametrize("argv", [["intel", "list"], ["amd", "frobnicate"], ["amd"], ["amd", "list", "--pci_bus", "x"],
                                  ["amd", "pids", "--sudoless"]])
def test_bad_backend_or_command_prints_usage_and_exits_2(argv, tmp_path, capsys):
  with pytest.raises(SystemExit) as e: main(argv, host(tmp_path))
  assert e.value.code == 2 and "usage: hcq_smi" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["reset", "pids", "kill_pids"])
def test_bus_matching_nothing_is_a_user_error(amd_tree, command, capsys):
  assert main(["amd", command, "--pci_bus", "0000:09"], host(amd_tree)) == 2
  err = capsys.readouterr().err
  assert "no amd device matches --pci_bus 0000:09" in err and "0000:03:00.0, 0000:05:00.0" in err


# ---- rmmod / insmod

def test_rmmod_expect_reports_loaded_modules(tmp_path, capsys):
  k = FakeKernel(tmp_path, loaded=["nvidia_uvm", "nvidia", "bnxt_en"])
  assert main(["nv", "rmmod", "--expect"], host(tmp_path, k)) == 1
  assert capsys.readouterr().out.strip() == "Kernel modules are loaded: nvidia_uvm, nvidia"
  assert main(["mlx5", "rmmod", "--expect"], host(tmp_path, k)) == 0
  assert capsys.readouterr().out.strip() == "Kernel modules are not loaded"
  assert k.calls == []


@pytest.mark.parametrize("root,prefix", [(False, ["sudo"]), (True, [])])
def test_rmmod_unloads_loaded_modules_dependents_first(tmp_path, root, prefix, capsys):
  k = FakeKernel(tmp_path, loaded=["nvidia", "nvidia_modeset", "nvidia_drm", "nvidia_uvm", "amdgpu"])
  assert main(["nv", "rmmod"], host(tmp_path, k, root=root)) == 0
  assert k.calls == [prefix + ["modprobe", "-r", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"]]
  assert k.loaded() == ["snd_hda_intel", "amdgpu"]
  assert main(["nv", "rmmod", "--expect"], host(tmp_path, k)) == 0
  assert main(["bnxt", "rmmod"], host(tmp_path, k)) == 0 and len(k.calls) == 1   # nothing loaded: no modprobe


def test_rmmod_failure_names_the_command(tmp_path, capsys):
  k = FakeKernel(tmp_path, loaded=["amdgpu"], rc=1, stderr="modprobe: FATAL: Module amdgpu is in use.\n")
  assert main(["amd", "rmmod"], host(tmp_path, k)) == 1
  err = capsys.readouterr().err
  assert "needs root" in err and "`sudo modprobe -r amdgpu` failed (exit 1)" in err and "is in use" in err


def test_missing_modprobe_is_named(tmp_path, capsys):
  k = FakeKernel(tmp_path, loaded=["mlx5_core"])
  def absent(argv): raise FileNotFoundError(argv[0])
  assert main(["mlx5", "rmmod"], Host(sysfs=str(tmp_path), proc=str(k.proc), run=absent, root=True)) == 1
  assert "`modprobe` is not installed" in capsys.readouterr().err


def test_insmod_unloads_resets_and_loads(amd_tree, capsys):
  k = FakeKernel(amd_tree, loaded=["amdgpu"])
  assert main(["amd", "insmod"], host(amd_tree, k)) == 0
  assert k.calls == [["sudo", "modprobe", "-r", "amdgpu"], ["sudo", "modprobe", "-a", "amdgpu"]]
  devs = amd_tree / "sys" / "bus" / "pci" / "devices"
  assert [(devs / b / "reset").read_text() for b in ("0000:03:00.0", "0000:05:00.0", "0000:01:00.0")] == ["1", "1", ""]
  assert "amdgpu" in k.loaded() and capsys.readouterr().out.splitlines()[-1] == "Loaded amdgpu"


def test_insmod_stops_before_loading_when_a_device_is_in_use(amd_tree, hold, capsys):
  gpu = hold("am", "0000:05:00.0")
  k = FakeKernel(amd_tree, loaded=["amdgpu"])
  assert main(["amd", "insmod"], host(amd_tree, k)) == 1
  assert k.calls == [["sudo", "modprobe", "-r", "amdgpu"]]
  assert f"0000:05:00.0: reset failed: device 0000:05:00.0 is in use by pid {gpu.pid}" in capsys.readouterr().err


# ---- reset

def test_reset_writes_sysfs_reset_of_matched_functions(amd_tree, capsys):
  devs = amd_tree / "sys" / "bus" / "pci" / "devices"
  (devs / "0000:03:00.0" / "driver").unlink()
  assert main(["amd", "reset", "--pci_bus", "05:00"], host(amd_tree)) == 0
  assert (devs / "0000:05:00.0" / "reset").read_text() == "1" and (devs / "0000:03:00.0" / "reset").read_text() == ""
  assert main(["amd", "reset", "--yes"], host(amd_tree)) == 0
  assert (devs / "0000:03:00.0" / "reset").read_text() == "1" and (devs / "0000:01:00.0" / "reset").read_text() == ""
  assert capsys.readouterr().out.splitlines() == ["0000:05:00.0: reset", "0000:03:00.0: reset", "0000:05:00.0: reset"]
  assert holder(lock_path("am", "0000:03:00.0")) is None   # the lock taken for the reset is released


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")   # a refused DeviceLock cleans up quietly
def test_reset_refuses_bound_and_busy_devices(amd_tree, hold, capsys):
  gpu = hold("am", "0000:05:00.0")
  assert main(["amd", "reset", "--yes"], host(amd_tree)) == 1
  err = capsys.readouterr().err
  assert "0000:03:00.0: reset failed: PCI device 0000:03:00.0 is bound to kernel driver amdgpu" in err
  assert f"in use by pid {gpu.pid}" in err and "kill_pids --pci_bus 0000:05:00.0" in err
  devs = amd_tree / "sys" / "bus" / "pci" / "devices"
  assert (devs / "0000:03:00.0" / "reset").read_text() == (devs / "0000:05:00.0" / "reset").read_text() == ""


def test_reset_of_every_device_is_refused_without_a_terminal_or_yes(amd_tree, capsys):
  from drivers.system import open_model
  open_model("navi31", 1, "am").close()                                 # a device to reset on any machine: emulated mock-1
  r = subprocess.run([sys.executable, "-m", "tools.hcq_smi", "amd", "reset"], cwd=REPO, stdin=subprocess.DEVNULL,
                     capture_output=True, text=True, timeout=120)       # stdin is no terminal: nobody to ask
  assert (r.returncode, r.stdout) == (2, ""), r.stderr
  assert r.stderr.count("\n") == 1 and r.stderr.startswith("hcq_smi: reset without --pci_bus resets every amd device (")
  assert "mock-1)" in r.stderr and "confirm with --yes" in r.stderr
  devs = amd_tree / "sys" / "bus" / "pci" / "devices"
  (devs / "0000:03:00.0" / "driver").unlink()
  assert main(["amd", "reset"], host(amd_tree)) == 2                     # the same through Host (tty False)
  assert capsys.readouterr().err == ("hcq_smi: reset without --pci_bus resets every amd device (0000:03:00.0, 0000:05:00.0, "
                                     "mock-1): confirm with --yes, or pick one with --pci_bus BUS\n")
  assert [(devs / b / "reset").read_text() for b in ("0000:03:00.0", "0000:05:00.0")] == ["", ""]


@pytest.mark.parametrize("answer,reset", [("y\n", True), ("YES", True), ("n", False), ("", False), (EOFError, False)])
def test_reset_of_every_device_asks_on_a_terminal(amd_tree, answer, reset, capsys):
  devs = amd_tree / "sys" / "bus" / "pci" / "devices"
  (devs / "0000:03:00.0" / "driver").unlink()
  asked = []
  def ask(question: str) -> str:
    asked.append(question)
    if answer is EOFError: raise EOFError
    return answer
  assert main(["amd", "reset"], host(amd_tree, tty=True, ask=ask)) == (0 if reset else 1)
  assert asked == ["Reset every amd device (0000:03:00.0, 0000:05:00.0)? [y/N] "]
  assert [(devs / b / "reset").read_text() for b in ("0000:03:00.0", "0000:05:00.0")] == (["1", "1"] if reset else ["", ""])
  assert capsys.readouterr().out.splitlines() == (["0000:03:00.0: reset", "0000:05:00.0: reset"] if reset else ["Nothing was reset"])
  assert main(["amd", "reset", "--pci_bus", "05:00"], host(amd_tree, tty=True, ask=ask)) == 0 and len(asked) == 1   # one device: no question


def test_reset_of_a_device_known_only_by_its_lock_says_why_not(amd_tree, hold, capsys):
  p = hold("am", "mock-0")                   # a holder of the lock, no emulated state behind it
  assert main(["amd", "reset", "--pci_bus", "mock-0"], host(amd_tree)) == 2
  out, err = capsys.readouterr()
  assert f"mock-0: emulated device known only by its lock (pid {p.pid} (" in out and "no emulated state to reset" in out
  assert "no amd device to reset matches --pci_bus mock-0" in err


# a process that drives an emulated device and keeps it (its state: a booted GPU, a NIC holding firmware resources)
OWN = {"amd": "from drivers.hcq import open_device; d = open_device('MOCKPCI+AMD')",
       "bnxt": "from drivers.rdma import open_context; ctx = open_context('bnxt', 'mock-0', ip='10.0.0.1')"}


def _owner(backend: str) -> subprocess.Popen:
  return start(OWN[backend] + "\nprint('up', flush=True)\nimport signal; signal.pause()")


def test_reset_of_an_emulated_navi31_is_a_mode1_reset_of_its_model(amd_tree, capsys):
  from drivers.amd.smi import devices, status
  owner = _owner("amd")
  try:
    assert main(["amd", "reset", "--pci_bus", "mock-0"], host(amd_tree)) == 1   # in use: refused, saying by whom
    assert f"mock-0: reset failed: device mock-0 is in use by pid {owner.pid}" in capsys.readouterr().err
  finally: owner.kill(); owner.wait()
  gpu = devices("mock-0")[0]
  assert status(gpu).error is None                  # the dead owner left it booted
  assert main(["amd", "reset", "--pci_bus", "mock-0"], host(amd_tree)) == 0
  assert capsys.readouterr().out.splitlines() == ["mock-0: reset"]
  assert "has not been booted by the AM driver" in status(gpu).error   # mode-1 reset: back to its power-on state
  assert holder(lock_path("am", "mock-0")) is None


def test_reset_of_an_emulated_bnxt_is_a_function_reset_of_its_model(tmp_path, capsys):
  from emu import state
  from emu.nic.bnxt.bcm57508 import STATE_MAGIC, STATE_VERSION, DeviceState, state_dir
  _load = lambda path: state.load(path, DeviceState, STATE_MAGIC, STATE_VERSION)
  owner = _owner("bnxt")
  owner.kill(); owner.wait()                        # killed holding firmware resources: the next driver must FUNC_RESET
  st = _load(state_dir(0))
  assert (st.registered, st.needs_reset, st.resets) == (1, 1, 0)
  assert main(["bnxt", "reset", "--pci_bus", "mock-0"], host(tmp_path)) == 0
  assert capsys.readouterr().out.splitlines() == ["mock-0: reset"]
  st = _load(state_dir(0))
  assert (st.registered, st.needs_reset, st.resets) == (0, 0, 1)   # FLR: every function resource given back


# ---- pids / kill_pids

def test_pids_names_real_holders(amd_tree, hold, capsys):
  model = hold("am", "mock-0")
  assert main(["amd", "pids"], host(amd_tree)) == 0
  out = capsys.readouterr().out.splitlines()
  comm = Path(f"/proc/{model.pid}/comm").read_text().strip()
  assert out == [f"0000:03:00.0: {NOT_IN_USE}", f"0000:05:00.0: {NOT_IN_USE}", f"mock-0: pid {model.pid} ({comm})"]
  assert main(["amd", "pids", "--pci_bus", "0000:03:00.0"], host(amd_tree)) == 0
  assert capsys.readouterr().out == f"0000:03:00.0: {NOT_IN_USE}\n"


def test_kill_pids_sudoless_kills_the_holder_and_frees_the_lock(amd_tree, hold, capsys):
  model, gpu = hold("am", "mock-0"), hold("am", "0000:05:00.0")
  k = FakeKernel(amd_tree)
  assert main(["amd", "kill_pids", "--pci_bus", "mock", "--sudoless"], host(amd_tree, k)) == 0
  assert model.wait(10) == -signal.SIGKILL and k.calls == []
  with pytest.raises(ProcessLookupError): os.kill(model.pid, 0)
  assert holder(lock_path("am", "mock-0")) is None and gpu.poll() is None   # the other device is left alone
  assert capsys.readouterr().out.splitlines()[-1] == f"mock-0: killed pid {model.pid}; the device is free"
  DeviceLock("am", "mock-0").release()   # the device can be opened again


# another tool holding a device's lock file: flock, no pid written
FOREIGN = "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); " \
          "print('ready', flush=True); sys.stdin.read()"


def test_pids_and_kill_pids_find_a_holder_that_wrote_no_pid(amd_tree, capsys):
  path = lock_path("am", "mock-4")
  p = subprocess.Popen([sys.executable, "-c", FOREIGN, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    assert p.stdout.readline().strip() == "ready" and Path(path).read_text() == ""
    comm = Path(f"/proc/{p.pid}/comm").read_text().strip()
    assert main(["amd", "pids", "--pci_bus", "mock-4"], host(amd_tree)) == 0
    assert capsys.readouterr().out == f"mock-4: pid {p.pid} ({comm})\n"
    assert main(["amd", "kill_pids", "--pci_bus", "mock-4", "--sudoless"], host(amd_tree)) == 0
    assert p.wait(10) == -signal.SIGKILL and holder(path) is None
    assert capsys.readouterr().out.splitlines()[-1] == f"mock-4: killed pid {p.pid}; the device is free"
  finally:
    if p.poll() is None: p.kill()
    p.wait(); p.stdin.close(); p.stdout.close()


def test_kill_pids_uses_sudo_kill(amd_tree, hold, capsys):
  gpu = hold("am", "0000:05:00.0")
  k = FakeKernel(amd_tree)
  assert main(["amd", "kill_pids"], host(amd_tree, k)) == 0
  assert k.calls == [["sudo", "kill", "-KILL", str(gpu.pid)]]
  assert gpu.wait(10) == -signal.SIGKILL and holder(lock_path("am", "0000:05:00.0")) is None
  out = capsys.readouterr().out.splitlines()
  assert f"0000:03:00.0: {NOT_IN_USE}" in out and f"0000:05:00.0: killed pid {gpu.pid}; the device is free" in out


def test_kill_pids_gives_up_after_bounded_retries(amd_tree, hold, capsys):
  gpu = hold("am", "0000:05:00.0")
  def inert(argv): return subprocess.CompletedProcess(argv, 0, "", "")   # a kill that has no effect
  h = Host(sysfs=str(amd_tree / "sys"), run=inert, root=True, tries=4, poll_s=0.01)
  assert main(["amd", "kill_pids", "--pci_bus", "0000:05:00.0"], h) == 1
  err = capsys.readouterr().err
  assert f"lock {lock_path('am', '0000:05:00.0')} still held after 0.04 s: pid {gpu.pid}" in err and "has not exited" in err
  assert gpu.poll() is None


# hcq_smi as one unprivileged user, the holder as another: imports first, then drop root (and with it CAP_KILL)
# the registry is read before privileges drop, as the imports are: the checkout may sit in a directory (root's home,
# a 0700 temp dir) that the other user cannot read
AS_USER = "import os, sys; from tools.hcq_smi import main; from drivers.system.registry import vendors; vendors(); " \
          "os.setgroups([]); os.setresgid(65534, 65534, 65534); " \
          "os.setresuid(65533, 65533, 65533); sys.exit(main(sys.argv[1:]))"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the holder and hcq_smi as two other users")
def test_kill_pids_sudoless_without_permission_says_so(hold):
  shared = Path(tempfile.mkdtemp(dir="/tmp"))   # searchable by other users, unlike pytest's tmp dirs
  try:
    shared.chmod(0o755)
    env = {**os.environ, "TMPDIR": str(shared)}
    gpu = hold("nv", "mock-3", "65534", env=env)
    r = subprocess.run([sys.executable, "-c", AS_USER, "nv", "kill_pids", "--sudoless"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert f"no permission to kill pid {gpu.pid}" in r.stderr and "sudo kill" in r.stderr
    assert gpu.poll() is None and holder(str(shared / "nv_mock-3.lock")) == gpu.pid
  finally: shutil.rmtree(shared)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run hcq_smi as another user")
def test_pids_as_another_user_finds_a_holder_through_proc_locks():
  """Another user's /proc/<pid>/fd is closed to hcq_smi; /proc/locks still names the pid that took the flock."""
  shared = Path(tempfile.mkdtemp(dir="/tmp"))
  p = None
  try:
    shared.chmod(0o755)
    env = {**os.environ, "TMPDIR": str(shared)}
    p = subprocess.Popen([sys.executable, "-c", FOREIGN, str(shared / "nv_mock-3.lock")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    r = subprocess.run([sys.executable, "-c", AS_USER, "nv", "pids", "--pci_bus", "mock-3"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, f"mock-3: pid {p.pid} ({Path(f'/proc/{p.pid}/comm').read_text().strip()})\n"), r.stderr
  finally:
    if p is not None:
      p.kill(); p.wait(); p.stdin.close(); p.stdout.close()
    shutil.rmtree(shared)


def test_list_shows_gpus_behind_usb_bridges_with_path_firmware_and_holder(amd_tree, hold, capsys, monkeypatch):
  import tools.hcq_smi as smi
  from drivers.system.usb import bridge_info
  from emu.usb.asm24xx import MockUSBDevice
  attached = [MockUSBDevice(None, bus=3, address=5, firmware=0x0207), MockUSBDevice(None, (0x3801, 0x0001), bus=3, address=6)]
  monkeypatch.setattr(smi, "list_bridges", lambda: [bridge_info(d) for d in attached])
  owner = hold("am", "usb-3-5")
  assert main(["amd", "list", "--json"], host(amd_tree)) == 0
  rows = {r["bus"]: r for r in json.loads(capsys.readouterr().out)}
  assert (rows["usb-3-5"]["kind"], rows["usb-3-5"]["usb_path"], rows["usb-3-5"]["bridge_firmware"]) == ("usb", "3-4", "2.07")
  assert rows["usb-3-5"]["pid"] == owner.pid and not rows["usb-3-6"]["in_use"]
  assert main(["amd", "list"], host(amd_tree)) == 0
  line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("usb-3-6"))
  assert line.split()[:3] == ["usb-3-6", "usb", "3801:0001"] and "path 3-5, bridge firmware 1.00" in line
  assert main(["nv", "list", "--json"], host(amd_tree)) == 0
  assert "usb-3" not in capsys.readouterr().out                       # bridges are listed for vendors behind them only
  assert main(["amd", "reset", "--pci_bus", "usb-3-6"], host(amd_tree)) == 2
  assert "usb-3-6: a GPU behind a USB bridge (path 3-5) has no function reset through the bridge" in capsys.readouterr().out


def test_a_fresh_machine_lists_how_to_open_each_emulated_chip(tmp_path, capsys):
  """Every registered AMD PCI model after the default one, by the device string that opens it (MOCKPCI+AMD:<model>)."""
  assert main(["amd", "list"], host(tmp_path)) == 0
  out = capsys.readouterr().out.splitlines()
  for chip in ("navi44", "navi48"):
    assert f"MOCKPCI+AMD:{chip}: emulated {chip.capitalize()} (hcq model), made the same way: open_device('MOCKPCI+AMD:{chip}') " \
           f"(device n: 'MOCKPCI+AMD:{chip}:<n>')" in out
