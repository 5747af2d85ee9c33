"""The device outlives the driver process: a clean exit leaves a device the next driver boots partially; kill -9 leaves
it dirty (SCRATCH_REG6 = 1, PSP and SMU alive, an HQD active with no engine) until the driver's mode-1 reset recovers it.
Facts: amdgpu_device.c amdgpu_device_mode1_reset, smu_v13_0_0_ppt.c."""
import os, signal, subprocess, sys
import pytest

from autogen.amd import gc_11_0_0 as gc, mp_13_0_0 as mp, smu_v13_0_0_ppsmc as ppsmc
from drivers.amd.pci import PCIIface
from drivers.system import DeviceBusyError, open_model
from emu.amdgpu.registers import ModelError
from tests.emu.amdgpu.regs import Regs, signal_works
from tests.emu.amdgpu.navi31_session import MARKER, MARKER_PADDR

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def session(fwdir: str, mode: str) -> subprocess.Popen:
  env = dict(os.environ, PYTHONPATH=ROOT)
  return subprocess.Popen([sys.executable, "-m", "tests.emu.amdgpu.navi31_session", fwdir, mode], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def reboot(dev, fwdir: str, monkeypatch) -> Regs:
  """The AM driver opens the device again, in this process."""
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", fwdir)
  iface = PCIIface(dev)
  return Regs(dev, iface)


def test_clean_exit_leaves_a_device_that_boots_partially(synthetic_fw, monkeypatch):
  p = session(synthetic_fw, "exit")
  out, err = p.communicate(timeout=60)
  assert p.returncode == 0 and out.split()[0] == "done", err
  dev = open_model("navi31")
  regs = Regs(dev)
  assert regs.r(gc.regSCRATCH_REG7) == int(out.split()[1], 16) != 0 and regs.r(gc.regSCRATCH_REG6) == 0   # booted, ended clean
  assert regs.vram.read_bytes(MARKER_PADDR, len(MARKER)) == MARKER
  assert regs.r(mp.regMP0_SMN_C2PMSG_81) != 0 and regs.r(mp.regMP0_SMN_C2PMSG_71) != 0   # sOS and its ring alive
  assert regs.smu_msg(ppsmc.PPSMC_MSG_GetSmuVersion)[0] == 1                                # PMFW alive
  regs.w(gc.regGRBM_GFX_CNTL, MEID=1)
  assert regs.r(gc.regCP_HQD_ACTIVE) == 0
  regs.w(gc.regGRBM_GFX_CNTL, 0)
  regs = reboot(dev, synthetic_fw, monkeypatch)
  try: assert dev.model.resets == 0 and dev.model.psp.failures == [] and signal_works(regs)   # no reset, no PSP: partial
  finally: regs.iface.close()


def test_kill_9_leaves_the_device_dirty_until_mode1_reset(synthetic_fw, monkeypatch):
  p = session(synthetic_fw, "hang")
  try:
    line = p.stdout.readline().split()
    assert line[0] == "ready", p.stderr.read()
    with pytest.raises(DeviceBusyError, match=f"pid {p.pid}"): open_model("navi31")
  finally:
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
  dev = open_model("navi31")
  regs = Regs(dev)
  assert regs.r(gc.regSCRATCH_REG7) == int(line[1], 16) and regs.r(gc.regSCRATCH_REG6) == 1   # dirty: full boot needed
  regs.w(gc.regGRBM_GFX_CNTL, MEID=1)
  assert regs.r(gc.regCP_HQD_ACTIVE) == 1                                               # the dead process's queue
  regs.w(gc.regGRBM_GFX_CNTL, 0)
  with pytest.raises(ModelError, match="previous driver instance"): regs.db.write64(0x18, 1)
  assert regs.r(mp.regMP0_SMN_C2PMSG_81) != 0 and regs.smu_msg(ppsmc.PPSMC_MSG_GetSmuVersion, timeout=0.1)[0] == 1
  regs = reboot(dev, synthetic_fw, monkeypatch)              # firmware alive: the driver resets the ASIC, then boots cold
  try: assert dev.model.resets == 1 and signal_works(regs)
  finally: regs.iface.close()
