"""SysfsPCIDevice on a fake /sys/bus/pci/devices tree (regular files stand in for config and resourceN)."""
import os, pathlib, re, shutil, tempfile
import pytest
from drivers.system import SysfsPCIDevice


def _fake(tmp_path, bus="0000:03:00.0", driver=None):
  d = tmp_path / bus
  d.mkdir()
  cfg = bytearray(4096)
  cfg[0:4] = (0x744C << 16 | 0x1002).to_bytes(4, "little")
  (d / "config").write_bytes(bytes(cfg))
  # sysfs `resource`: one "start end flags" line per BAR (PCI resource file format)
  lines = ["0x0000000000000000 0x0000000000000000 0x0000000000000000"] * 6
  lines[0] = "0x000000f000000000 0x000000f00000ffff 0x000000000014220c"
  (d / "resource").write_text("\n".join(lines) + "\n")
  (d / "resource0").write_bytes(bytes(0x10000))
  (d / "reset").write_text("")
  if driver:
    (tmp_path / "drivers" / driver).mkdir(parents=True)
    os.symlink(tmp_path / "drivers" / driver, d / "driver")
  return d


def test_config_bar_mapping_and_reset(tmp_path):
  d = _fake(tmp_path)
  with SysfsPCIDevice("0000:03:00.0", "am", sysfs=str(tmp_path)) as dev:
    assert (dev.vendor_id, dev.device_id) == (0x1002, 0x744C)
    dev.enable_bus_master()
    assert int.from_bytes((d / "config").read_bytes()[4:6], "little") & 0x6 == 0x6
    assert dev.bar_size(0) == 0x10000 and dev.bar_size(2) == 0
    bar = dev.map_bar(0)
    bar.write32(0x100, 0xDEADBEEF)
    assert (d / "resource0").read_bytes()[0x100:0x104] == (0xDEADBEEF).to_bytes(4, "little")
    with pytest.raises(ValueError, match="no BAR2"): dev.map_bar(2)
    dev.reset()
    assert (d / "reset").read_text() == "1"


def test_missing_device_names_path_and_how_to_list(tmp_path):
  with pytest.raises(FileNotFoundError, match="no PCI device 0000:09:00.0.*hcq_smi"):
    SysfsPCIDevice("0000:09:00.0", "am", sysfs=str(tmp_path))


def test_device_bound_to_kernel_driver_says_how_to_unbind(tmp_path):
  _fake(tmp_path, driver="amdgpu")
  with pytest.raises(RuntimeError, match=r"bound to kernel driver amdgpu; unbind it first: `echo 0000:03:00.0 > .*/unbind`"):
    SysfsPCIDevice("0000:03:00.0", "am", sysfs=str(tmp_path))


def test_vfio_bound_device_is_usable(tmp_path):
  _fake(tmp_path, driver="vfio-pci")
  SysfsPCIDevice("0000:03:00.0", "am", sysfs=str(tmp_path)).close()


def test_no_permission_names_the_file_and_the_fix(tmp_path, monkeypatch):
  """Opened by an unprivileged process: a forked child that drops to `nobody` when the suite runs as root
  (root bypasses file modes), else this user with the config file made read-only."""
  root = pathlib.Path(tempfile.mkdtemp(prefix="hcq-perm-", dir="/tmp"))   # outside the 0700 pytest tree
  try:
    os.chmod(root, 0o777)
    monkeypatch.setenv("TMPDIR", str(root))   # the lock file goes where `nobody` may write
    d = _fake(root)
    os.chmod(d, 0o755)
    os.chmod(d / "config", 0o600 if os.geteuid() == 0 else 0o400)
    r, w = os.pipe()
    if (pid := os.fork()) == 0:
      try:
        if os.geteuid() == 0: os.setgid(65534); os.setuid(65534)
        try: SysfsPCIDevice("0000:03:00.0", "am", sysfs=str(root)); msg = "opened"
        except Exception as e: msg = f"{type(e).__name__}: {e}"
        os.write(w, msg.encode())
      finally: os._exit(0)
    os.close(w)
    msg = os.read(r, 4096).decode()
    os.waitpid(pid, 0)
    assert re.search(r"PermissionError: no permission to access .*/config: run as root or add a udev rule", msg), msg
  finally:
    shutil.rmtree(root, ignore_errors=True)


def _locked_kb() -> int:
  return int(re.search(r"VmLck:\s+(\d+) kB", pathlib.Path("/proc/self/status").read_text()).group(1))


@pytest.mark.skipif(os.geteuid() != 0, reason="physical page addresses from /proc/self/pagemap need root")
def test_existing_memory_mapped_for_dma_on_the_sysfs_path_is_locked_with_its_page_frames_until_freed(tmp_path):
  """The sysfs path pins existing memory (mlock) and reads each covered page's physical address from pagemap."""
  import numpy as np
  arr = np.ones(3 * 4096, np.uint8)[100:]
  pages = -(-(arr.ctypes.data % 4096 + arr.nbytes) // 4096)
  _fake(tmp_path)
  before = _locked_kb()
  with SysfsPCIDevice("0000:03:00.0", "am", sysfs=str(tmp_path)) as dev:
    mem = dev.map_dma(arr)
    assert mem.first == arr.ctypes.data % 4096 and len(mem.bus_addrs) == pages
    assert all(a and a % 4096 == 0 for a in mem.bus_addrs) and len(set(mem.bus_addrs)) == pages
    assert _locked_kb() >= before + 4 * pages
    dev.free_dma(mem)
    assert _locked_kb() == before
