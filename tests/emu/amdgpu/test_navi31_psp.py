"""PSP (MP0 13.0.0): bootloader handshake, KM ring, firmware loading in Navi31's order; every refusal names the
component. Facts: reference/amd_driver.md 2.9 and 3, psp_gfx_if.h, the Debian firmware headers."""
import os
import pytest

from autogen.amd import gc_11_0_0 as gc, mp_13_0_0 as mp, psp_gfx_if as G, amdgpu_ucode as U
from emu.amdgpu.fwbuild import write_firmware, SOS_VERSION, SMU_VERSION
from tests.emu.amdgpu.navi31_driver import firmware_pieces, GFX_ORDER

DEBIAN = "/lib/firmware/amdgpu"
debian = pytest.mark.skipif(not os.path.exists(os.path.join(DEBIAN, "psp_13_0_0_sos.bin")),
                            reason=f"Debian firmware-amd-graphics is not installed ({DEBIAN}/psp_13_0_0_sos.bin is absent)")
READY = 0x80000000


def fw(tmp_path, **corrupt) -> dict[str, bytes]:
  write_firmware(str(tmp_path / "fw"), **corrupt)
  return firmware_pieces(str(tmp_path / "fw"))


def start(drv, pieces, **kw):
  drv.dev.enable_bus_master()
  drv.root = drv.alloc(4096)
  drv.soc_init()
  drv.hub_init("MM")
  drv.psp_bootloader(pieces, **kw)


def sos_up(drv, pieces):
  start(drv, pieces)
  drv.psp_ring_create()


def test_bootloader_handshake_starts_the_sos(drv, synthetic_fw):
  pieces = firmware_pieces(synthetic_fw)
  start(drv, pieces, order=("KDB", "SPL", "SYS_DRV"))
  assert drv.r(mp.regMP0_SMN_C2PMSG_35) == READY and drv.r(mp.regMP0_SMN_C2PMSG_81) == 0   # waiting for SOS
  assert drv.r(mp.regMP0_SMN_C2PMSG_64) == 0                                                 # no sOS to answer yet
  drv.psp_bootloader(pieces, order=("SOS",))
  assert drv.r(mp.regMP0_SMN_C2PMSG_81) == SOS_VERSION
  assert drv.r(mp.regMP0_SMN_C2PMSG_64) == READY
  drv.psp_ring_create()
  assert drv.r(mp.regMP0_SMN_C2PMSG_64) & 0x8000FFFF == READY


def test_full_firmware_load_autoloads_the_rlc(drv, synthetic_fw):
  pieces = firmware_pieces(synthetic_fw)
  sos_up(drv, pieces)
  assert drv.r(gc.regCP_STAT) >> 31 and not drv.r(gc.regRLC_RLCS_BOOTLOAD_STATUS) >> 31
  drv.w_fields(gc.regRLC_SAFE_MODE, CMD=1, MESSAGE=1)
  assert drv.r(gc.regRLC_SAFE_MODE) & 1                               # no RLC firmware yet: nobody acknowledges
  drv.psp_load_all(pieces)
  drv.w_fields(gc.regRLC_SAFE_MODE, CMD=1, MESSAGE=1)
  assert drv.r(gc.regRLC_SAFE_MODE) == gc.regRLC_SAFE_MODE.encode(MESSAGE=1)   # the RLC clears CMD
  assert drv.tmr_size == 0x1300000
  assert drv.r(gc.regRLC_RLCS_BOOTLOAD_STATUS) >> 31 and drv.r(gc.regCP_STAT) == 0
  assert drv.smu_msg(0x2)[1] == SMU_VERSION                           # GetSmuVersion: the PMFW the PSP loaded
  assert drv.dev.model.psp.failures == []


@debian
def test_debian_firmware_boots_with_the_observed_sizes(drv):
  pieces = firmware_pieces(DEBIAN)
  sizes = {"SMU": 261632, "SDMA_UCODE_TH1": 16896, "SDMA_UCODE_TH0": 17408, "RS64_MEC": 267552, "RS64_MEC_P0_STACK": 139264,
           "IMU_I": 66048, "IMU_D": 66048, "RLC_IRAM": 66048, "RLC_DRAM_BOOT": 33280, "RLC_P": 8704, "RLC_V": 12800, "RLC_G": 25088}
  assert {k: len(pieces[k]) for k in sizes} == sizes                  # amd_driver.md 2.9's observed Navi31 order and sizes
  sos = U.psp_firmware_header_v2_0.from_buffer_copy(open(os.path.join(DEBIAN, "psp_13_0_0_sos.bin"), "rb").read())
  smu = U.common_firmware_header.from_buffer_copy(open(os.path.join(DEBIAN, "smu_13_0_0.bin"), "rb").read())
  drv.boot(pieces)
  assert drv.r(mp.regMP0_SMN_C2PMSG_81) == sos.header.ucode_version   # the sOS reports its version (0x310025)
  assert drv.smu_msg(0x2) == (1, smu.ucode_version)                    # the PMFW reports the smc header's version
  assert pieces["mec_start"] == 0x7000000003000 and drv.dev.model.psp.failures == []


@pytest.mark.parametrize("corrupt, order, why", [
  (dict(damage={"SYS_DRV": "magic"}), ("KDB", "SPL", "SYS_DRV"), "SYS_DRV: no signed-image header"),
  (dict(damage={"KDB": "size"}), ("KDB",), "KDB: sizes disagree"),
  ({}, ("KDB", "SYS_DRV", "SPL"), "SPL sent after SYS_DRV"),
  ({}, ("SYS_DRV",), "SYS_DRV sent before KDB"),
  ({}, ("KDB", "SPL", "SOS"), "SOS sent before SYS_DRV"),
])
def test_bad_bootloader_component_halts_the_psp_naming_it(drv, tmp_path, corrupt, order, why):
  start(drv, fw(tmp_path, **corrupt), order=order)
  assert not drv.r(mp.regMP0_SMN_C2PMSG_35) & READY and drv.r(mp.regMP0_SMN_C2PMSG_81) == 0
  assert any(why in f for f in drv.dev.model.psp.failures), drv.dev.model.psp.failures


def test_without_sos_the_sos_never_starts(drv, tmp_path):
  pieces = fw(tmp_path, omit=("SOS",))
  assert "SOS" not in pieces
  start(drv, pieces, order=("KDB", "SPL", "SYS_DRV"))
  drv.timeout = 0.2
  with pytest.raises(TimeoutError, match="sOS not ready"): drv.psp_ring_create()
  assert drv.r(mp.regMP0_SMN_C2PMSG_81) == 0


def test_spl_step_accepts_the_kdb_image(drv, synthetic_fw):
  start(drv, firmware_pieces(synthetic_fw), spl_piece="KDB")          # what drivers send for the SPL step on MP0 13.x
  assert drv.r(mp.regMP0_SMN_C2PMSG_81) == SOS_VERSION


def ip_fw_status(drv, pieces, upto: str, **steps) -> int:
  """Load TOC, SMU, TMR, then the GFX firmware up to (and including) `upto`; return that command's status."""
  drv.vram.write_bytes(drv.msg1, pieces["TOC"])
  toc = dict(toc_phy_addr_lo=drv.mc(drv.msg1) & 0xFFFFFFFF, toc_phy_addr_hi=drv.mc(drv.msg1) >> 32, toc_size=len(pieces["TOC"]))
  assert drv.psp_cmd(G.GFX_CMD_ID_LOAD_TOC, "cmd_load_toc", **toc).status == 0
  if not steps.get("tmr_first"): assert drv.load_ip_fw("SMU", pieces["SMU"]) == 0
  tmr = drv.alloc(0x1300000, 1 << 20)
  status = drv.psp_cmd(G.GFX_CMD_ID_SETUP_TMR, "cmd_setup_tmr", buf_phy_addr_lo=drv.mc(tmr) & 0xFFFFFFFF,
                       buf_phy_addr_hi=drv.mc(tmr) >> 32, buf_size=0x1300000, tmr_flags=2, system_phy_addr_lo=tmr).status
  if upto == "TMR": return status
  for name in steps.get("order", GFX_ORDER):
    status = drv.load_ip_fw(name, pieces[name])
    if name == upto: return status
    assert status == 0, name
  return drv.psp_cmd(G.GFX_CMD_ID_AUTOLOAD_RLC).status


@pytest.mark.parametrize("corrupt, upto, steps, why", [
  (dict(damage={"RLC_G": "unsigned"}), "RLC_G", {}, "RLC_G: signature block is all zeros"),
  (dict(damage={"IMU_I": "id"}), "IMU_I", {}, "IMU_I: image id 0x004f is KDB"),
  ({}, "TMR", dict(tmr_first=True), "SETUP_TMR before the SMU firmware"),
  ({}, "RLC_G", dict(order=("SDMA_UCODE_TH1", "RLC_G", "IMU_I")), None),
  ({}, "IMU_I", dict(order=("SDMA_UCODE_TH1", "RLC_G", "IMU_I")), "IMU_I after RLC_G"),
  (dict(omit=("RLC_IRAM",)), "AUTOLOAD", dict(order=[n for n in GFX_ORDER if n != "RLC_IRAM"]), "AUTOLOAD_RLC before RLC_IRAM"),
])
def test_bad_or_misordered_ip_firmware_is_refused_naming_it(drv, tmp_path, corrupt, upto, steps, why):
  pieces = fw(tmp_path, **corrupt)
  sos_up(drv, pieces)
  status = ip_fw_status(drv, pieces, upto, **steps)
  if why is None: return
  assert status == G.TEE_ERROR_NOT_SUPPORTED
  assert any(why in f for f in drv.dev.model.psp.failures), drv.dev.model.psp.failures
  assert not drv.r(gc.regRLC_RLCS_BOOTLOAD_STATUS) >> 31                # GFX never autoloads


def test_unknown_psp_command_gets_an_error_status(drv, synthetic_fw):
  sos_up(drv, firmware_pieces(synthetic_fw))
  assert drv.psp_cmd(0x7F).status == G.PSP_ERR_UNKNOWN_COMMAND
  assert drv.psp_cmd(G.GFX_CMD_ID_LOAD_TA).status == G.TEE_ERROR_NOT_SUPPORTED
  assert "0x7f" in drv.dev.model.psp.failures[0]
