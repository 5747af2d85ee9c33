"""The firmware list of the GC 11 family (MP0 13, MP1 13, SDMA 6): the PSP bootloader components and sOS, the SMU, and
the IP firmware the PSP loads (SDMA, RS64 MEC, IMU, RLC), split out of their files (amdgpu_ucode.c; load order:
psp_v13_0.c, amdgpu_psp.c)."""
from __future__ import annotations
import ctypes

from autogen.amd import amdgpu_ucode, psp_gfx_if, amdgpu_psp
from drivers.amd.am.firmware import Firmware, FirmwareError, read, header, piece

# bootloader components in load order: (PSP_FW_TYPE in the sos file, bootloader command), psp_v13_0 order
BOOTLOADER = ((amdgpu_ucode.PSP_FW_TYPE_PSP_KDB, amdgpu_psp.PSP_BL__LOAD_KEY_DATABASE),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_SPL, amdgpu_psp.PSP_BL__LOAD_TOS_SPL_TABLE),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_SYS_DRV, amdgpu_psp.PSP_BL__LOAD_SYSDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_SOC_DRV, amdgpu_psp.PSP_BL__LOAD_SOCDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_INTF_DRV, amdgpu_psp.PSP_BL__LOAD_INTFDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_DBG_DRV, amdgpu_psp.PSP_BL__LOAD_DBGDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_RAS_DRV, amdgpu_psp.PSP_BL__LOAD_RASDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_SOS, amdgpu_psp.PSP_BL__LOAD_SOSDRV))
# the header versions each file may carry (amdgpu_ucode.h structs; the GC 11 / MP0 13 / SDMA 6 family's majors)
PSP_HEADERS = {(2, 0): amdgpu_ucode.psp_firmware_header_v2_0, (2, 1): amdgpu_ucode.psp_firmware_header_v2_1}
SMC_HEADERS = {(2, 0): amdgpu_ucode.smc_firmware_header_v2_0, (2, 1): amdgpu_ucode.smc_firmware_header_v2_1}
SDMA_HEADERS = {(2, 0): amdgpu_ucode.sdma_firmware_header_v2_0}
GFX_HEADERS = {(2, 0): amdgpu_ucode.gfx_firmware_header_v2_0}
IMU_HEADERS = {(1, 0): amdgpu_ucode.imu_firmware_header_v1_0}
RLC_HEADERS = {(2, 0): amdgpu_ucode.rlc_firmware_header_v2_0, (2, 1): amdgpu_ucode.rlc_firmware_header_v2_1,
               (2, 2): amdgpu_ucode.rlc_firmware_header_v2_2, (2, 3): amdgpu_ucode.rlc_firmware_header_v2_3,
               (2, 4): amdgpu_ucode.rlc_firmware_header_v2_4}


def load(ip_versions: dict[str, tuple[int, int, int]]) -> Firmware:
  """Every firmware piece the AM driver loads for these IP versions."""
  v = lambda ip: "_".join(map(str, ip_versions[ip]))
  names = {"sos": f"psp_{v('MP0')}_sos.bin", "smu": f"smu_{v('MP1')}.bin", "sdma": f"sdma_{v('SDMA0')}.bin",
           "mec": f"gc_{v('GC')}_mec.bin", "imu": f"gc_{v('GC')}_imu.bin", "rlc": f"gc_{v('GC')}_rlc.bin"}
  files = {}

  # PSP sOS: a table of {fw_type, version, offset, size} bins after the header (v2.0 at 36, v2.1 at 40)
  path, blob = read(names["sos"]); files["sos"] = path
  hdr, common = header(path, blob, PSP_HEADERS, "psp_firmware_header")
  table = ctypes.addressof(hdr.psp_fw_bin) - ctypes.addressof(hdr)
  bins = {}
  for i in range(hdr.psp_fw_bin_count):
    d = amdgpu_ucode.psp_fw_bin_desc.from_buffer_copy(blob, table + i * ctypes.sizeof(amdgpu_ucode.psp_fw_bin_desc))
    bins[d.fw_type] = piece(path, blob, common.ucode_array_offset_bytes + d.offset_bytes, d.size_bytes, f"PSP bin type {d.fw_type}")
  if amdgpu_ucode.PSP_FW_TYPE_PSP_SOS not in bins: raise FirmwareError(f"{path}: no sOS binary (PSP_FW_TYPE_PSP_SOS) in its bin table")
  bootloader = [(t, cmd, bins[t]) for t, cmd in BOOTLOADER if t in bins]

  # SMU: the whole ucode array
  path, blob = read(names["smu"]); files["smu"] = path
  _, common = header(path, blob, SMC_HEADERS, "smc_firmware_header")
  smu = piece(path, blob, common.ucode_array_offset_bytes, common.ucode_size_bytes, "SMU ucode")

  # SDMA v2: TH1 (ctl, at its own file offset) then TH0 (ctx, at the ucode array)
  path, blob = read(names["sdma"]); files["sdma"] = path
  hdr, common = header(path, blob, SDMA_HEADERS, "sdma_firmware_header")
  ip = [(psp_gfx_if.GFX_FW_TYPE_SDMA_UCODE_TH1, piece(path, blob, hdr.ctl_ucode_offset, hdr.ctl_ucode_size_bytes, "SDMA ctl ucode")),
        (psp_gfx_if.GFX_FW_TYPE_SDMA_UCODE_TH0, piece(path, blob, common.ucode_array_offset_bytes, hdr.ctx_ucode_size_bytes, "SDMA ctx ucode"))]

  # MEC (RS64): code at the ucode array, the P0 stack from the data section, and the program counter start
  path, blob = read(names["mec"]); files["mec"] = path
  hdr, common = header(path, blob, GFX_HEADERS, "gfx_firmware_header")
  ip += [(psp_gfx_if.GFX_FW_TYPE_RS64_MEC, piece(path, blob, common.ucode_array_offset_bytes, hdr.ucode_size_bytes, "MEC ucode")),
         (psp_gfx_if.GFX_FW_TYPE_RS64_MEC_P0_STACK, piece(path, blob, hdr.data_offset_bytes, hdr.data_size_bytes, "MEC stack"))]
  mec_start = hdr.ucode_start_addr_hi << 32 | hdr.ucode_start_addr_lo

  # IMU: IRAM then DRAM, back to back from the ucode array
  path, blob = read(names["imu"]); files["imu"] = path
  hdr, common = header(path, blob, IMU_HEADERS, "imu_firmware_header")
  i0 = common.ucode_array_offset_bytes
  ip += [(psp_gfx_if.GFX_FW_TYPE_IMU_I, piece(path, blob, i0, hdr.imu_iram_ucode_size_bytes, "IMU IRAM")),
         (psp_gfx_if.GFX_FW_TYPE_IMU_D, piece(path, blob, i0 + hdr.imu_iram_ucode_size_bytes, hdr.imu_dram_ucode_size_bytes, "IMU DRAM"))]

  # RLC v2.2+: IRAM, DRAM boot, (v2.3) P and V, then the main ucode RLC_G
  path, blob = read(names["rlc"]); files["rlc"] = path
  hdr, common = header(path, blob, RLC_HEADERS, "rlc_firmware_header")
  minor = common.header_version_minor
  if minor < 2: raise FirmwareError(f"{path}: RLC header v2.{minor} has no IRAM/DRAM ucode; gfx11 needs v2.2 or newer")
  v22 = hdr.v2_2 if minor >= 3 else hdr
  ip += [(psp_gfx_if.GFX_FW_TYPE_RLC_IRAM, piece(path, blob, v22.rlc_iram_ucode_offset_bytes, v22.rlc_iram_ucode_size_bytes, "RLC IRAM")),
         (psp_gfx_if.GFX_FW_TYPE_RLC_DRAM_BOOT, piece(path, blob, v22.rlc_dram_ucode_offset_bytes, v22.rlc_dram_ucode_size_bytes, "RLC DRAM"))]
  if minor >= 3:
    ip += [(psp_gfx_if.GFX_FW_TYPE_RLC_P, piece(path, blob, hdr.rlcp_ucode_offset_bytes, hdr.rlcp_ucode_size_bytes, "RLC P")),
           (psp_gfx_if.GFX_FW_TYPE_RLC_V, piece(path, blob, hdr.rlcv_ucode_offset_bytes, hdr.rlcv_ucode_size_bytes, "RLC V"))]
  ip.append((psp_gfx_if.GFX_FW_TYPE_RLC_G, piece(path, blob, common.ucode_array_offset_bytes, common.ucode_size_bytes, "RLC G")))
  return Firmware(bootloader, bins.get(amdgpu_ucode.PSP_FW_TYPE_PSP_TOC), smu, ip, mec_start, files)
