"""PSP (MP0 13.0.0): bootloader handshake, KM ring, firmware loading in Navi31's order; every refusal names the
component. Facts: psp_v13_0.c, amdgpu_psp.c, psp_gfx_if.h, the Debian firmware headers."""
import os
import pytest

from autogen.amd import gc_11_0_0 as gc, mp_13_0_0 as mp, psp_gfx_if, amdgpu_ucode
from drivers.amd.pci import PCIIface
from drivers.system import open_model
from emu.amdgpu import firmware
from emu.amdgpu.fwbuild import images, SOS_VERSION, SMU_VERSION
from tests.emu.amdgpu.regs import Regs, GFX_ORDER

DEBIAN = "/lib/firmware/amdgpu"
debian = pytest.mark.skipif(not os.path.exists(os.path.join(DEBIAN, "psp_13_0_0_sos.bin")),
                            reason=f"Debian firmware-amd-graphics is not installed ({DEBIAN}/psp_13_0_0_sos.bin is absent)")
READY = 0x80000000


def sos_up(regs, imgs):
  regs.psp_bootloader(imgs)
  regs.psp_ring_create()


def load_all(regs, imgs) -> None:
  """TOC, SMU, TMR, the GFX firmware in Navi31's order, AUTOLOAD_RLC: each accepted."""
  resp = regs.psp_load(psp_gfx_if.GFX_CMD_ID_LOAD_TOC, "cmd_load_toc", imgs["TOC"])
  assert (resp.status, resp.tmr_size) == (0, 0x1300000)
  assert regs.load_ip_fw("SMU", imgs["SMU"]) == 0 and regs.setup_tmr() == 0
  for name in GFX_ORDER: assert regs.load_ip_fw(name, imgs[name]) == 0, name
  assert regs.psp_cmd(psp_gfx_if.GFX_CMD_ID_AUTOLOAD_RLC).status == 0


def test_bootloader_handshake_starts_the_sos(regs):
  imgs = images()
  regs.psp_bootloader(imgs, order=("KDB", "SPL", "SYS_DRV"))
  assert regs.r(mp.regMP0_SMN_C2PMSG_35) == READY and regs.r(mp.regMP0_SMN_C2PMSG_81) == 0   # waiting for SOS
  assert regs.r(mp.regMP0_SMN_C2PMSG_64) == 0                                                 # no sOS to answer yet
  regs.psp_bootloader(imgs, order=("SOS",))
  assert regs.r(mp.regMP0_SMN_C2PMSG_81) == SOS_VERSION
  assert regs.r(mp.regMP0_SMN_C2PMSG_64) == READY
  regs.psp_ring_create()
  assert regs.r(mp.regMP0_SMN_C2PMSG_64) & 0x8000FFFF == READY


def test_full_firmware_load_autoloads_the_rlc(regs):
  imgs = images()
  sos_up(regs, imgs)
  assert regs.r(gc.regCP_STAT) >> 31 and not regs.r(gc.regRLC_RLCS_BOOTLOAD_STATUS) >> 31
  regs.w(gc.regRLC_SAFE_MODE, CMD=1, MESSAGE=1)
  assert regs.r(gc.regRLC_SAFE_MODE) & 1                              # no RLC firmware yet: nobody acknowledges
  load_all(regs, imgs)
  regs.w(gc.regRLC_SAFE_MODE, CMD=1, MESSAGE=1)
  assert regs.r(gc.regRLC_SAFE_MODE) == gc.regRLC_SAFE_MODE.encode(MESSAGE=1)   # the RLC clears CMD
  assert regs.r(gc.regRLC_RLCS_BOOTLOAD_STATUS) >> 31 and regs.r(gc.regCP_STAT) == 0
  assert regs.smu_msg(0x2)[1] == SMU_VERSION                          # GetSmuVersion: the PMFW the PSP loaded
  assert regs.model.psp.failures == []


@debian
def test_debian_firmware_boots_and_reports_its_versions(monkeypatch):
  monkeypatch.delenv("HCQ_FIRMWARE_DIR", raising=False)
  sos = amdgpu_ucode.psp_firmware_header_v2_0.from_buffer_copy(open(os.path.join(DEBIAN, "psp_13_0_0_sos.bin"), "rb").read())
  smu = amdgpu_ucode.common_firmware_header.from_buffer_copy(open(os.path.join(DEBIAN, "smu_13_0_0.bin"), "rb").read())
  iface = PCIIface(open_model("navi31"))                              # the AM driver, with the Debian files
  try:
    regs = Regs(iface.pci, iface)
    assert regs.r(mp.regMP0_SMN_C2PMSG_81) == sos.header.ucode_version  # the sOS reports its version (0x310025)
    assert regs.smu_msg(0x2) == (1, smu.ucode_version)                  # the PMFW reports the smc header's version
    assert regs.model.psp.failures == [] and regs.r(gc.regRLC_RLCS_BOOTLOAD_STATUS) >> 31
  finally: iface.close()


@pytest.mark.parametrize("corrupt, order, why", [
  (dict(damage={"SYS_DRV": "magic"}), ("KDB", "SPL", "SYS_DRV"), "SYS_DRV: no signed-image header"),
  (dict(damage={"KDB": "size"}), ("KDB",), "KDB: sizes disagree"),
  ({}, ("KDB", "SYS_DRV", "SPL"), "SPL sent after SYS_DRV"),
  ({}, ("SYS_DRV",), "SYS_DRV sent before KDB"),
  ({}, ("KDB", "SPL", "SOS"), "SOS sent before SYS_DRV"),
])
def test_bad_bootloader_component_halts_the_psp_naming_it(regs, corrupt, order, why):
  regs.psp_bootloader(images(**corrupt), order=order)
  assert not regs.r(mp.regMP0_SMN_C2PMSG_35) & READY and regs.r(mp.regMP0_SMN_C2PMSG_81) == 0
  assert any(why in f for f in regs.model.psp.failures), regs.model.psp.failures


def test_without_sos_the_sos_never_starts(regs):
  imgs = images(omit=("SOS",))
  assert "SOS" not in imgs
  regs.psp_bootloader(imgs, order=("KDB", "SPL", "SYS_DRV"))
  with pytest.raises(TimeoutError, match="sOS not ready"):
    regs.wait(lambda: regs.r(mp.regMP0_SMN_C2PMSG_64) & READY, "sOS not ready", timeout=0.2)
  assert regs.r(mp.regMP0_SMN_C2PMSG_81) == 0


def test_spl_step_accepts_the_kdb_image(regs):
  regs.psp_bootloader(images(), spl="KDB")                            # what drivers send for the SPL step on MP0 13.x
  assert regs.r(mp.regMP0_SMN_C2PMSG_81) == SOS_VERSION


def ip_fw_status(regs, imgs, upto: str, **steps) -> int:
  """Load TOC, SMU, TMR, then the GFX firmware up to (and including) `upto`; return that command's status."""
  assert regs.psp_load(psp_gfx_if.GFX_CMD_ID_LOAD_TOC, "cmd_load_toc", imgs["TOC"]).status == 0
  if not steps.get("tmr_first"): assert regs.load_ip_fw("SMU", imgs["SMU"]) == 0
  status = regs.setup_tmr()
  if upto == "TMR": return status
  for name in steps.get("order", GFX_ORDER):
    status = regs.load_ip_fw(name, imgs[name])
    if name == upto: return status
    assert status == 0, name
  return regs.psp_cmd(psp_gfx_if.GFX_CMD_ID_AUTOLOAD_RLC).status


@pytest.mark.parametrize("corrupt, upto, steps, why", [
  (dict(damage={"RLC_G": "unsigned"}), "RLC_G", {}, "RLC_G: signature block is all zeros"),
  (dict(damage={"IMU_I": "id"}), "IMU_I", {}, "IMU_I: image id 0x004f is KDB"),
  ({}, "TMR", dict(tmr_first=True), "SETUP_TMR before the SMU firmware"),
  ({}, "RLC_G", dict(order=("SDMA_UCODE_TH1", "RLC_G", "IMU_I")), None),
  ({}, "IMU_I", dict(order=("SDMA_UCODE_TH1", "RLC_G", "IMU_I")), "IMU_I after RLC_G"),
  (dict(omit=("RLC_IRAM",)), "AUTOLOAD", dict(order=[n for n in GFX_ORDER if n != "RLC_IRAM"]), "AUTOLOAD_RLC before RLC_IRAM"),
])
def test_bad_or_misordered_ip_firmware_is_refused_naming_it(regs, corrupt, upto, steps, why):
  imgs = images(**corrupt)
  sos_up(regs, imgs)
  status = ip_fw_status(regs, imgs, upto, **steps)
  if why is None:                                                     # allowed: RLC_G early, as long as it is the last GFX one
    assert status == 0 and regs.model.psp.failures == []
    return
  assert status == psp_gfx_if.TEE_ERROR_NOT_SUPPORTED
  assert any(why in f for f in regs.model.psp.failures), regs.model.psp.failures
  assert not regs.r(gc.regRLC_RLCS_BOOTLOAD_STATUS) >> 31               # GFX never autoloads


def test_unknown_psp_command_gets_an_error_status(regs):
  sos_up(regs, images())
  assert regs.psp_cmd(0x7F).status == psp_gfx_if.PSP_ERR_UNKNOWN_COMMAND
  assert regs.psp_cmd(psp_gfx_if.GFX_CMD_ID_LOAD_TA).status == psp_gfx_if.TEE_ERROR_NOT_SUPPORTED
  assert "0x7f" in regs.model.psp.failures[0]


@pytest.mark.parametrize("tmr", [0x800000, 0x1300000, 0x1400000])
def test_load_toc_reports_the_tmr_size_the_toc_names_and_setup_tmr_needs_it(regs, tmr):
  imgs = images(toc_tmr=tmr)
  sos_up(regs, imgs)
  resp = regs.psp_load(psp_gfx_if.GFX_CMD_ID_LOAD_TOC, "cmd_load_toc", imgs["TOC"])
  assert (resp.status, resp.tmr_size) == (0, tmr)
  assert regs.load_ip_fw("SMU", imgs["SMU"]) == 0
  status = regs.setup_tmr()                                            # a TMR of 0x1300000 bytes
  if tmr <= 0x1300000: assert status == 0 and regs.model.psp.failures == []
  else:
    assert status == psp_gfx_if.TEE_ERROR_NOT_SUPPORTED
    assert any("the TOC asks for >= 0x1400000 bytes" in f for f in regs.model.psp.failures), regs.model.psp.failures


@pytest.mark.parametrize("body, why", [
  (firmware.toc_body(0x123456, ("SMU",)), "TOC: TMR size 0x123456 is not a non-zero multiple of 1 MiB"),
  (firmware.toc_body(0, ("SMU",)), "TOC: TMR size 0x0"),
  (firmware.toc_body(1 << 20, ("SMU",))[:-2], "TOC: 1 entries do not fit"),
  (firmware.toc_body(1 << 20, ("SMU", "KDB")), "TOC: image id 0x4f is no firmware"),
  (firmware.toc_body(1 << 20, ("SMU", "IMU_I", "SMU")), "TOC: a component is listed twice"),
  (firmware.TOC_MAGIC + b"\0\0", "shorter than its 12-byte table header"),
])
def test_malformed_toc_contents_are_refused(regs, body, why):
  sos_up(regs, images())
  resp = regs.psp_load(psp_gfx_if.GFX_CMD_ID_LOAD_TOC, "cmd_load_toc", firmware.make_image("TOC", body))
  assert (resp.status, resp.tmr_size) == (psp_gfx_if.TEE_ERROR_NOT_SUPPORTED, 0)
  assert any(why in f for f in regs.model.psp.failures), regs.model.psp.failures
  assert regs.load_ip_fw("SMU", images()["SMU"]) == psp_gfx_if.TEE_ERROR_NOT_SUPPORTED   # no TOC was taken


def test_firmware_the_toc_does_not_list_is_refused(regs):
  imgs = images(toc_omit=("RLC_V",))
  sos_up(regs, imgs)
  assert ip_fw_status(regs, imgs, "RLC_V") == psp_gfx_if.TEE_ERROR_NOT_SUPPORTED
  assert any("RLC_V: the TOC does not list it" in f for f in regs.model.psp.failures), regs.model.psp.failures


@pytest.mark.parametrize("fw_type", [psp_gfx_if.GFX_FW_TYPE_RS64_PFP, psp_gfx_if.GFX_FW_TYPE_RS64_MES, psp_gfx_if.GFX_FW_TYPE_VCN,
                                     psp_gfx_if.GFX_FW_TYPE_MAX + 5])
def test_unknown_firmware_types_are_refused(regs, fw_type):
  """LOAD_IP_FW of a type Navi31's sOS does not load gets TEE_ERROR_NOT_SUPPORTED, even as a well-formed image."""
  imgs = images()
  sos_up(regs, imgs)
  assert ip_fw_status(regs, imgs, "TMR") == 0
  name = firmware.FW_TYPE_NAMES.get(fw_type, f"fw_type {fw_type}")
  image = firmware.make_image("SMU", bytes(64), image_id=0x1234)
  assert regs.psp_load(psp_gfx_if.GFX_CMD_ID_LOAD_IP_FW, "cmd_load_ip_fw", image, fw_type=fw_type).status == psp_gfx_if.TEE_ERROR_NOT_SUPPORTED
  assert any(f"LOAD_IP_FW {name}: not a firmware type" in f for f in regs.model.psp.failures), regs.model.psp.failures
