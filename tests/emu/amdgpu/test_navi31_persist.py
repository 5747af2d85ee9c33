"""The device outlives the driver process: a clean exit leaves a device that boots partially, kill -9 leaves it dirty
(SCRATCH_REG6 = 1, PSP and SMU alive, an HQD active with no engine) until the mode-1 reset path recovers it.
Facts: reference/amd_driver.md 2.4 and 8."""
import os, signal, subprocess, sys
import pytest

from autogen.amd import gc_11_0_0 as gc, mp_13_0_0 as mp, smu_v13_0_0_ppsmc as P
from drivers.system import DeviceBusyError, open_model
from emu.amdgpu.registers import ModelError
from tests.emu.amdgpu.navi31_driver import Driver, firmware_pieces, release_mem, VA_BASE
from tests.emu.amdgpu.navi31_session import AM_VERSION, MARKER, MARKER_PADDR

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def session(fwdir: str, mode: str) -> subprocess.Popen:
  env = dict(os.environ, PYTHONPATH=ROOT)
  return subprocess.Popen([sys.executable, "-m", "tests.emu.amdgpu.navi31_session", fwdir, mode], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def signal_works(drv: Driver) -> bool:
  q = drv.compute_queue()
  sig = drv.dev.alloc_dma(4096)
  drv.map_dma(VA_BASE + (3 << 30), sig)
  drv.flush_tlb("GC")
  q.submit(release_mem(VA_BASE + (3 << 30), 0x5EED))
  q.wait_idle()
  return int.from_bytes(sig.view[:4], "little") == 0x5EED


def test_clean_exit_leaves_a_device_that_boots_partially(synthetic_fw):
  p = session(synthetic_fw, "exit")
  out, err = p.communicate(timeout=60)
  assert p.returncode == 0 and out.strip() == "done", err
  with open_model("navi31") as dev:
    drv = Driver(dev)
    assert drv.r(gc.regSCRATCH_REG7) == AM_VERSION and drv.r(gc.regSCRATCH_REG6) == 0     # booted by AM, ended clean
    assert drv.vram.read_bytes(MARKER_PADDR, len(MARKER)) == MARKER
    assert drv.r(mp.regMP0_SMN_C2PMSG_81) != 0 and drv.r(mp.regMP0_SMN_C2PMSG_71) == 0x10000  # sOS and its ring alive
    assert drv.smu_msg(P.PPSMC_MSG_GetSmuVersion)[0] == 1                                   # PMFW alive
    drv.w_fields(gc.regGRBM_GFX_CNTL, MEID=1)
    assert drv.r(gc.regCP_HQD_ACTIVE) == 0
    drv.w(gc.regGRBM_GFX_CNTL, 0)
    drv.boot(firmware_pieces(synthetic_fw), partial=True)                                  # GFX + SDMA only
    assert signal_works(drv)


def test_kill_9_leaves_the_device_dirty_until_mode1_reset(synthetic_fw):
  p = session(synthetic_fw, "hang")
  try:
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    with pytest.raises(DeviceBusyError, match=f"pid {p.pid}"): open_model("navi31")
  finally:
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
  with open_model("navi31") as dev:
    drv = Driver(dev)
    assert drv.r(gc.regSCRATCH_REG7) == AM_VERSION and drv.r(gc.regSCRATCH_REG6) == 1     # dirty: full boot needed
    drv.w_fields(gc.regGRBM_GFX_CNTL, MEID=1)
    assert drv.r(gc.regCP_HQD_ACTIVE) == 1                                                 # the dead process's queue
    drv.soc_init()
    with pytest.raises(ModelError, match="previous driver instance"): drv.db.write64(0x18, 1)
    # the driver sees firmware alive (sOS up, SMU answering) and resets the ASIC through the SMU debug mailbox
    assert drv.r(mp.regMP0_SMN_C2PMSG_81) != 0 and drv.smu_msg(P.PPSMC_MSG_GetSmuVersion, timeout=0.1)[0] == 1
    dev.write_config(0x04, 2, dev.read_config(0x04, 2) & ~0x4)
    drv.w(mp.regMP1_SMN_C2PMSG_53, 0, "MP1")
    drv.w(mp.regMP1_SMN_C2PMSG_75, 2, "MP1")
    drv.w(mp.regMP1_SMN_C2PMSG_54, 0, "MP1")
    assert drv.r(mp.regMP0_SMN_C2PMSG_81) == 0 and drv.r(gc.regSCRATCH_REG6) == 0 and drv.r(gc.regSCRATCH_REG7) == 0
    drv.w_fields(gc.regGRBM_GFX_CNTL, MEID=1)
    assert drv.r(gc.regCP_HQD_ACTIVE) == 0
    drv.w(gc.regGRBM_GFX_CNTL, 0)
    drv.boot(firmware_pieces(synthetic_fw))                                                # cold boot again
    assert signal_works(drv)
