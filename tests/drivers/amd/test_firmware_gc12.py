"""The GC 12 firmware list against the real linux-firmware files (Debian firmware-amd-graphics 20250410, whose gfx12
files scripts/setup.sh unpacks into BACKPORT_DIR): every piece the PSP loads, in Linux's order, cut where the headers say."""
import os
import pytest
from autogen.amd import amdgpu_ucode as u, psp_gfx_if as g
from drivers.amd.am import ip_table
from drivers.amd.am.firmware import BACKPORT_DIR, FirmwareError

NAVI48 = {"GC": (12, 0, 1), "MP0": (14, 0, 2), "MP1": (14, 0, 2), "SDMA0": (7, 0, 1)}
NAVI44 = {"GC": (12, 0, 0), "MP0": (14, 0, 3), "MP1": (14, 0, 3), "SDMA0": (7, 0, 0)}
HAVE = os.path.exists(os.path.join(BACKPORT_DIR, "gc_12_0_1_mec.bin"))
ORDER = [g.GFX_FW_TYPE_SDMA_UCODE_TH0, g.GFX_FW_TYPE_RS64_MEC, g.GFX_FW_TYPE_RS64_MEC_P0_STACK, g.GFX_FW_TYPE_IMU_I, g.GFX_FW_TYPE_IMU_D,
         g.GFX_FW_TYPE_RLC_IRAM, g.GFX_FW_TYPE_RLC_DRAM_BOOT, g.GFX_FW_TYPE_RLC_G]


@pytest.mark.skipif(not HAVE, reason=f"the gfx12 firmware is not unpacked in {BACKPORT_DIR} (scripts/setup.sh does it)")
@pytest.mark.parametrize("versions", [NAVI48, NAVI44], ids=["navi48", "navi44"])
def test_gc12_list_from_the_debian_backports_files(versions, monkeypatch):
  monkeypatch.delenv("HCQ_FIRMWARE_DIR", raising=False)
  fw = ip_table.FIRMWARE.pick(versions["GC"]).load(versions)
  v = lambda ip: "_".join(map(str, versions[ip]))
  assert fw.files["sdma"] == os.path.join(BACKPORT_DIR, f"sdma_{v('SDMA0')}.bin") and fw.files["mec"].endswith(f"gc_{v('GC')}_mec.bin")
  assert [t for t, _ in fw.ip] == ORDER                     # RLC header v2.2 on gfx12: no RLC P/V; SDMA 7: one thread
  assert [t for t, _, _ in fw.bootloader][-1] == u.PSP_FW_TYPE_PSP_SOS and fw.toc is not None
  dw = lambda blob, byte: int.from_bytes(blob[byte:byte + 4], "little")
  sdma = open(fw.files["sdma"], "rb").read()  # common header: ucode_array_offset_bytes at byte 24; sdma v3.0: ucode_size_bytes at 40
  off, size = dw(sdma, 24), dw(sdma, 40)
  assert dict(fw.ip)[g.GFX_FW_TYPE_SDMA_UCODE_TH0] == sdma[off:off + size] and size > 0
  mec = open(fw.files["mec"], "rb").read()
  assert fw.mec_start == dw(mec, 52) | dw(mec, 56) << 32     # gfx_firmware_header_v2_0: ucode_start_addr_lo / _hi
  assert all(len(b) > 0 and len(b) % 4 == 0 for _, b in fw.ip) and len(fw.smu) > 0


def test_gc12_list_refuses_a_gfx11_sdma_file(tmp_path, monkeypatch):
  from emu.amdgpu.fwbuild import write_firmware
  files = write_firmware(str(tmp_path))                      # gfx11 files (SDMA header v2)
  for n in files: os.rename(tmp_path / n, tmp_path / n.replace("psp_13_0_0", "psp_14_0_2").replace("smu_13_0_0", "smu_14_0_2")
                            .replace("sdma_6_0_0", "sdma_7_0_1").replace("gc_11_0_0", "gc_12_0_1"))
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  with pytest.raises(FirmwareError, match=r"sdma_7_0_1.bin: not a valid sdma_firmware_header \(header v2.0.*expected header major version 3"):
    ip_table.FIRMWARE.pick(NAVI48["GC"]).load(NAVI48)
