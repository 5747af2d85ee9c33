"""The AM userspace PCI driver on the emulated Navi31: cold and warm boot, firmware errors, ownership,
recovery after a killed process, and the VFIO path (each test gets a fresh device: TMPDIR is per test)."""
import os, signal, threading, time
import numpy as np
import pytest
from autogen.amd import soc15_ih_clientid as ih_client, irqsrcs_gfx_11_0_0 as irq_src
from drivers.amd.device import AMDDevice
from drivers.amd.pci import PCIIface
from drivers.amd.am.firmware import FirmwareError, DEFAULT_DIR
from drivers.amd.am.psp_v13_0 import PSPError, PSPv13_0
from drivers.amd.am.smu_v13_0 import SMUError
from drivers.system import DeviceBusyError, open_model
from drivers.system.kernel import kernel_interface
from drivers.system.vfio import VFIOPCIDevice
from emu.amdgpu.fwbuild import write_firmware
from emu.amdgpu.chips import NAVI31
from emu.amdgpu.function import GPUFunction
from tests.drivers.amd.kernels import SRC
from tests.procs import start

REAL_FW = os.path.exists(os.path.join(DEFAULT_DIR, "psp_13_0_0_sos.bin"))


def vadd_ok(dev) -> bool:
  n = 777
  a = np.arange(n, dtype=np.float32)
  x, out = dev.alloc(n * 4), dev.alloc(n * 4)
  x.copyin(a.data)
  dev.program("vadd", dev.compiler.compile(SRC))(out, x, x, global_size=(-(-n // 64),), local_size=(64,), vals=(n,), wait=True)
  return np.array_equal(np.frombuffer(out.copyout(), np.float32), 2 * a)


def boot(index: int = 0) -> AMDDevice:
  """A fresh driver instance on emulated device `index` (not open_device's per-process cache: each call boots)."""
  return AMDDevice("MOCKPCI+AMD", PCIIface(open_model("navi31", index, "am")))


@pytest.mark.skipif(not REAL_FW, reason=f"Debian firmware-amd-graphics is not installed in {DEFAULT_DIR} (scripts/setup.sh installs it)")
def test_cold_boot_with_debian_firmware_then_partial_boot():
  dev = boot()
  assert not dev.iface.core.partial_boot and vadd_ok(dev)
  assert dev.iface.core.fw.files["sos"] == os.path.join(DEFAULT_DIR, "psp_13_0_0_sos.bin")
  dev.close()
  dev = boot()                                  # the GPU still runs our firmware and was left clean: partial boot
  assert dev.iface.core.partial_boot and vadd_ok(dev)
  dev.close()


def test_cold_boot_with_synthetic_firmware(tmp_path, monkeypatch):
  write_firmware(str(tmp_path))
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  dev = boot()
  assert not dev.iface.core.partial_boot and vadd_ok(dev)
  dev.close()


def test_missing_firmware_names_the_file_and_the_package(tmp_path, monkeypatch):
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  with pytest.raises(FirmwareError, match=r"firmware file .*/psp_13_0_0_sos.bin not found: install firmware-amd-graphics"):
    boot()
  files = write_firmware(str(tmp_path))
  os.remove(files["sdma_6_0_0.bin"])
  with pytest.raises(FirmwareError, match=r"firmware file .*/sdma_6_0_0.bin not found"): boot()
  write_firmware(str(tmp_path), omit=("RLC_P",))                    # a piece the RLC v2.3 header must list
  with pytest.raises(FirmwareError, match=r"gc_11_0_0_rlc.bin: the header lists no RLC P \(size 0\)"): boot()


def test_corrupt_firmware_header_names_the_file(tmp_path, monkeypatch):
  write_firmware(str(tmp_path), bad_header=("gc_11_0_0_mec.bin",))
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  with pytest.raises(FirmwareError, match=r"gc_11_0_0_mec.bin: not a valid gfx_firmware_header \(header v9"): boot()


def test_firmware_the_psp_rejects_fails_boot_naming_the_component(tmp_path, monkeypatch):
  write_firmware(str(tmp_path), damage={"RLC_G": "unsigned"})
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  with pytest.raises(PSPError, match=r"LOAD_IP_FW RLC_G failed with status"): boot()


@pytest.mark.parametrize("tmr", [0x800000, 0x1400000])
def test_the_tmr_is_the_size_the_toc_asks_for(tmr, tmp_path, monkeypatch):
  """SETUP_TMR carries the TOC's TMR size (what LOAD_TOC answered); a TOC asking for more than the driver reserved
  fails the boot saying so."""
  write_firmware(str(tmp_path), toc_tmr=tmr)
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  if tmr > 0x1300000:
    with pytest.raises(PSPError, match=r"PSP asks for a 0x1400000-byte TMR; 0x1300000 was reserved"): boot()
    return
  sent = []
  submit = PSPv13_0._submit
  monkeypatch.setattr(PSPv13_0, "_submit", lambda psp, cmd, what: sent.append((what, cmd.cmd.cmd_setup_tmr.buf_size)) or submit(psp, cmd, what))
  dev = boot()
  assert ("SETUP_TMR", tmr) in sent and vadd_ok(dev)
  dev.close()


HOLD = "from drivers.hcq import open_device; d = open_device('MOCKPCI+AMD'); print('up', flush=True); import time; time.sleep(120)"
RUN = r"""
import numpy as np
from drivers.hcq import open_device
from tests.drivers.amd.kernels import SRC
d = open_device('MOCKPCI+AMD')
x = d.alloc(4096)
add1 = d.program("add1", d.compiler.compile(SRC))
print('up', flush=True)
said = False
while True:
  add1(x, global_size=(16,), local_size=(64,))
  if not said and d.timeline.value < d.timeline_value - 1:   # launches queued that the GPU has not finished
    print('in flight', flush=True); said = True
"""


def test_device_locked_by_another_process_names_its_pid():
  p = start(HOLD)
  try:
    with pytest.raises(DeviceBusyError, match=rf"device mock-0 is in use by pid {p.pid} .*hcq_smi amd kill_pids --pci_bus mock-0"): boot()
  finally: p.kill(); p.wait()


def test_process_killed_mid_run_leaves_a_dirty_device_the_next_open_resets():
  p = start(RUN)
  assert p.stdout.readline().strip() == "in flight"   # killed with the queues busy
  p.send_signal(signal.SIGKILL); p.wait()
  dev = boot()                    # SCRATCH_REG6 still says "running": a full boot, through the mode-1 reset
  core = dev.iface.core
  assert not core.partial_boot and core.mode1_reset_done and vadd_ok(dev)
  dev.close()


def test_an_interrupt_the_last_instance_left_is_not_read_again_after_a_partial_boot():
  # every open clears the IH ring; a partial boot sets its read and write pointers back to 0 with it (ih_v6_0_resume),
  # else the walk takes the cleared entries behind the old write pointer for new ones
  dev = boot()
  dev.iface.pci.model.ih.post(ih_client.SOC21_IH_CLIENTID_GRBM_CP, irq_src.GFX_11_0_0__SRCID__CP_EOP_INTERRUPT, (1,))   # end of pipe: no fault
  dev.close()
  dev = boot()
  try: assert dev.iface.core.partial_boot and dev.iface.poll_faults() is None and vadd_ok(dev)
  finally: dev.close()


def test_a_fault_no_wait_collected_before_close_makes_the_next_open_reset_the_device():
  dev = boot()
  dev.iface.pci.model.ih.shader_error()     # an illegal instruction reported; the process ends before anything looks
  dev.close(wait=False)
  dev = boot()
  core = dev.iface.core
  try: assert not core.partial_boot and core.mode1_reset_done and dev.iface.poll_faults() is None and vadd_ok(dev)
  finally: dev.close()


def test_boot_through_vfio():
  """The same driver on VFIOPCIDevice, over the fake VFIO kernel interface serving the Navi31 model."""
  fn = GPUFunction(NAVI31, "0000:0c:00.0")
  k = kernel_interface("vfio", function=fn)
  dev = AMDDevice("PCI+AMD", PCIIface(VFIOPCIDevice("0000:0c:00.0", "am", kernel=k)))
  assert vadd_ok(dev)
  dev.close()


def test_failed_open_leaves_the_device_free(tmp_path, monkeypatch):
  """A driver that cannot finish opening (here: no firmware) releases the device: the next open succeeds."""
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  with pytest.raises(FirmwareError): boot()
  monkeypatch.delenv("HCQ_FIRMWARE_DIR")
  if not REAL_FW: write_firmware(str(tmp_path)); monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  dev = boot()
  assert vadd_ok(dev)
  dev.close()


def test_failure_after_boot_releases_queues_memory_and_lock(monkeypatch):
  """A failure while the device sets up its queues (here: the SDMA queue, after the compute queue) unwinds everything."""
  real = PCIIface.create_queue
  def failing(self, kind, ring_size):
    if kind == "sdma": raise OSError("injected: no SDMA queue")
    return real(self, kind, ring_size)
  monkeypatch.setattr(PCIIface, "create_queue", failing)
  engines = lambda: {t for t in threading.enumerate() if t.name.startswith("emu-")}
  before = engines()                      # may hold an earlier test's engines that are still on their way out
  with pytest.raises(OSError, match="injected"): boot()
  monkeypatch.undo()
  deadline = time.monotonic() + 60
  while engines() - before:               # the compute queue's engine was stopped (it exits), not orphaned (it would run on)
    assert time.monotonic() < deadline, f"engine threads left running: {sorted(t.name for t in engines() - before)}"
    time.sleep(0.01)
  dev = boot()                                                # not DeviceBusyError: the lock was released
  assert vadd_ok(dev)
  dev.close()


def test_smu_power_limit_and_dpm_levels():
  dev = boot()
  smu = dev.iface.core.smu
  assert smu.levels("mem") == sorted(smu.levels("mem")) and len(smu.levels("mem")) >= 2
  default = smu.power_limit()
  smu.set_power_limit(150)
  assert smu.power_limit() == 150 and smu.metrics().dGPU_W_MAX == 150
  with pytest.raises(SMUError, match=r"SMU message 0x32 \(param 0x3e8\) failed"): smu.set_power_limit(1000)
  smu.set_power_limit(default)
  dev.close()


def test_firmware_search_order_and_the_missing_file_error(tmp_path, monkeypatch):
  from drivers.amd.am import firmware
  sys_dir, backport = tmp_path / "sys", tmp_path / "bpo"
  sys_dir.mkdir(); backport.mkdir()
  (sys_dir / "a.bin").write_bytes(b"sys"); (backport / "a.bin").write_bytes(b"bpo"); (backport / "b.bin").write_bytes(b"b")
  monkeypatch.delenv("HCQ_FIRMWARE_DIR", raising=False)
  monkeypatch.setattr(firmware, "DEFAULT_DIR", str(sys_dir)); monkeypatch.setattr(firmware, "BACKPORT_DIR", str(backport))
  assert firmware.read("a.bin") == (str(sys_dir / "a.bin"), b"sys") and firmware.read("b.bin") == (str(backport / "b.bin"), b"b")
  with pytest.raises(FirmwareError, match=rf"{sys_dir}/c.bin or {backport}/c.bin not found: install firmware-amd-graphics"): firmware.read("c.bin")
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(backport))                        # the override replaces both
  assert firmware.read("a.bin") == (str(backport / "a.bin"), b"bpo")
