"""Firmware files for an AMD GPU, found like the kernel finds them, and what every generation's list shares: reading a
file, checking its header, slicing a piece out. Which files and pieces a GPU loads is its generation's list, picked by
the GC version (ip_table.FIRMWARE: firmware_gc11.py, firmware_gc12.py), built from the per-file parsers here (the
files' formats are shared across generations; which header versions a generation takes is its list's).

Files: <ip>_<maj>_<min>_<rev><suffix>.bin, looked up in /lib/firmware/amdgpu (Debian firmware-amd-graphics, in the
non-free-firmware component: gfx11), then /usr/local/share/hcq/firmware/amdgpu (the gfx12 files of the bookworm-backports
package, which scripts/setup.sh unpacks there without replacing the installed package); $HCQ_FIRMWARE_DIR replaces both.
Headers: amdgpu_ucode.h (autogen.amd.amdgpu_ucode).
"""
from __future__ import annotations
import ctypes, os
from dataclasses import dataclass
from typing import Callable

from autogen.amd import amdgpu_ucode, psp_gfx_if, amdgpu_psp

DEFAULT_DIR = "/lib/firmware/amdgpu"
BACKPORT_DIR = "/usr/local/share/hcq/firmware/amdgpu"
PACKAGE = "firmware-amd-graphics (Debian non-free-firmware; gfx12: its bookworm-backports version, which scripts/setup.sh unpacks)"


class FirmwareError(RuntimeError):
  """A firmware file is missing or its header does not parse; the message names the file."""


@dataclass
class Firmware:
  bootloader: list[tuple[int, int, bytes]]   # (PSP_FW_TYPE, bootloader command, blob), in load order
  toc: bytes | None
  smu: bytes
  ip: list[tuple[int, bytes]]                # (GFX_FW_TYPE, ucode) for LOAD_IP_FW, in load order
  mec_start: int                             # RS64 MEC program counter start (CP_MEC_RS64_PRGRM_CNTR_START)
  files: dict[str, str]


def fw_dirs() -> list[str]:
  """The directories searched, in order."""
  return [d] if (d := os.environ.get("HCQ_FIRMWARE_DIR")) else [DEFAULT_DIR, BACKPORT_DIR]


def read(name: str) -> tuple[str, bytes]:
  for d in fw_dirs():
    try:
      with open(path := os.path.join(d, name), "rb") as f: return path, f.read()
    except FileNotFoundError: pass
  where = " or ".join(os.path.join(d, name) for d in fw_dirs())
  raise FirmwareError(f"firmware file {where} not found: install {PACKAGE}, or point HCQ_FIRMWARE_DIR at a directory "
                      "holding it")


def header(path: str, blob: bytes, headers: dict[tuple[int, int], type], struct_base: str):
  """The header struct of the file's version (one of `headers`) after checking the common header."""
  if len(blob) < ctypes.sizeof(amdgpu_ucode.common_firmware_header):
    raise FirmwareError(f"{path}: {len(blob)} bytes is too short for a firmware header")
  common = amdgpu_ucode.common_firmware_header.from_buffer_copy(blob)
  ver = (common.header_version_major, common.header_version_minor)
  cls = headers.get(ver)
  if common.size_bytes != len(blob) or cls is None or common.header_size_bytes > len(blob):
    expected = sorted({major for major, _ in headers})
    raise FirmwareError(f"{path}: not a valid {struct_base} (header v{ver[0]}.{ver[1]}, size field {common.size_bytes} for "
                        f"a {len(blob)}-byte file); expected header major version {' or '.join(map(str, expected))}")
  hdr = cls.from_buffer_copy(blob)
  return hdr, common


def piece(path: str, blob: bytes, off: int, size: int, what: str) -> bytes:
  if size == 0: raise FirmwareError(f"{path}: the header lists no {what} (size 0): the file is incomplete")
  if off + size > len(blob):
    raise FirmwareError(f"{path}: {what} at {off:#x}+{size:#x} lies outside the {len(blob):#x}-byte file")
  return blob[off:off + size]


# PSP bootloader components in load order: (PSP_FW_TYPE in the sos file, bootloader command): psp_v13_0.c and psp_v14_0.c
# load the same sequence (psp_v13_0_bootloader_load_*, psp_v14_0_bootloader_load_*)
BOOTLOADER = ((amdgpu_ucode.PSP_FW_TYPE_PSP_KDB, amdgpu_psp.PSP_BL__LOAD_KEY_DATABASE),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_SPL, amdgpu_psp.PSP_BL__LOAD_TOS_SPL_TABLE),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_SYS_DRV, amdgpu_psp.PSP_BL__LOAD_SYSDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_SOC_DRV, amdgpu_psp.PSP_BL__LOAD_SOCDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_INTF_DRV, amdgpu_psp.PSP_BL__LOAD_INTFDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_DBG_DRV, amdgpu_psp.PSP_BL__LOAD_DBGDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_RAS_DRV, amdgpu_psp.PSP_BL__LOAD_RASDRV),
              (amdgpu_ucode.PSP_FW_TYPE_PSP_SOS, amdgpu_psp.PSP_BL__LOAD_SOSDRV))
PSP_HEADERS = {(2, 0): amdgpu_ucode.psp_firmware_header_v2_0, (2, 1): amdgpu_ucode.psp_firmware_header_v2_1}
SMC_HEADERS = {(2, 0): amdgpu_ucode.smc_firmware_header_v2_0, (2, 1): amdgpu_ucode.smc_firmware_header_v2_1}
GFX_HEADERS = {(2, 0): amdgpu_ucode.gfx_firmware_header_v2_0}
IMU_HEADERS = {(1, 0): amdgpu_ucode.imu_firmware_header_v1_0}
RLC_HEADERS = {(2, 0): amdgpu_ucode.rlc_firmware_header_v2_0, (2, 1): amdgpu_ucode.rlc_firmware_header_v2_1,
               (2, 2): amdgpu_ucode.rlc_firmware_header_v2_2, (2, 3): amdgpu_ucode.rlc_firmware_header_v2_3,
               (2, 4): amdgpu_ucode.rlc_firmware_header_v2_4}


def psp_sos(name: str, files: dict[str, str]) -> tuple[list[tuple[int, int, bytes]], bytes | None]:
  """(bootloader components in load order, the TOC or None) of a PSP sOS file: a table of {fw_type, version, offset,
  size} bins after the header (v2.0 at 36, v2.1 at 40)."""
  path, blob = read(name); files["sos"] = path
  hdr, common = header(path, blob, PSP_HEADERS, "psp_firmware_header")
  table = ctypes.addressof(hdr.psp_fw_bin) - ctypes.addressof(hdr)
  bins = {}
  for i in range(hdr.psp_fw_bin_count):
    d = amdgpu_ucode.psp_fw_bin_desc.from_buffer_copy(blob, table + i * ctypes.sizeof(amdgpu_ucode.psp_fw_bin_desc))
    bins[d.fw_type] = piece(path, blob, common.ucode_array_offset_bytes + d.offset_bytes, d.size_bytes, f"PSP bin type {d.fw_type}")
  if amdgpu_ucode.PSP_FW_TYPE_PSP_SOS not in bins: raise FirmwareError(f"{path}: no sOS binary (PSP_FW_TYPE_PSP_SOS) in its bin table")
  return [(t, cmd, bins[t]) for t, cmd in BOOTLOADER if t in bins], bins.get(amdgpu_ucode.PSP_FW_TYPE_PSP_TOC)


def smc(name: str, files: dict[str, str]) -> bytes:
  """The SMU firmware: the whole ucode array."""
  path, blob = read(name); files["smu"] = path
  _, common = header(path, blob, SMC_HEADERS, "smc_firmware_header")
  return piece(path, blob, common.ucode_array_offset_bytes, common.ucode_size_bytes, "SMU ucode")


def rs64_mec(name: str, files: dict[str, str]) -> tuple[list[tuple[int, bytes]], int]:
  """([RS64 MEC code at the ucode array, its P0 stack from the data section], the program counter start)."""
  path, blob = read(name); files["mec"] = path
  hdr, common = header(path, blob, GFX_HEADERS, "gfx_firmware_header")
  return [(psp_gfx_if.GFX_FW_TYPE_RS64_MEC, piece(path, blob, common.ucode_array_offset_bytes, hdr.ucode_size_bytes, "MEC ucode")),
          (psp_gfx_if.GFX_FW_TYPE_RS64_MEC_P0_STACK, piece(path, blob, hdr.data_offset_bytes, hdr.data_size_bytes, "MEC stack"))], \
    hdr.ucode_start_addr_hi << 32 | hdr.ucode_start_addr_lo


def imu(name: str, files: dict[str, str]) -> list[tuple[int, bytes]]:
  """IMU IRAM then DRAM, back to back from the ucode array."""
  path, blob = read(name); files["imu"] = path
  hdr, common = header(path, blob, IMU_HEADERS, "imu_firmware_header")
  i0 = common.ucode_array_offset_bytes
  return [(psp_gfx_if.GFX_FW_TYPE_IMU_I, piece(path, blob, i0, hdr.imu_iram_ucode_size_bytes, "IMU IRAM")),
          (psp_gfx_if.GFX_FW_TYPE_IMU_D, piece(path, blob, i0 + hdr.imu_iram_ucode_size_bytes, hdr.imu_dram_ucode_size_bytes, "IMU DRAM"))]


def rlc(name: str, files: dict[str, str], gen: str) -> list[tuple[int, bytes]]:
  """RLC v2.2+: IRAM, DRAM boot, (v2.3) P and V, then the main ucode RLC_G."""
  path, blob = read(name); files["rlc"] = path
  hdr, common = header(path, blob, RLC_HEADERS, "rlc_firmware_header")
  minor = common.header_version_minor
  if minor < 2: raise FirmwareError(f"{path}: RLC header v2.{minor} has no IRAM/DRAM ucode; {gen} needs v2.2 or newer")
  v22 = hdr.v2_2 if minor >= 3 else hdr
  ip = [(psp_gfx_if.GFX_FW_TYPE_RLC_IRAM, piece(path, blob, v22.rlc_iram_ucode_offset_bytes, v22.rlc_iram_ucode_size_bytes, "RLC IRAM")),
        (psp_gfx_if.GFX_FW_TYPE_RLC_DRAM_BOOT, piece(path, blob, v22.rlc_dram_ucode_offset_bytes, v22.rlc_dram_ucode_size_bytes, "RLC DRAM"))]
  if minor >= 3:
    ip += [(psp_gfx_if.GFX_FW_TYPE_RLC_P, piece(path, blob, hdr.rlcp_ucode_offset_bytes, hdr.rlcp_ucode_size_bytes, "RLC P")),
           (psp_gfx_if.GFX_FW_TYPE_RLC_V, piece(path, blob, hdr.rlcv_ucode_offset_bytes, hdr.rlcv_ucode_size_bytes, "RLC V"))]
  return ip + [(psp_gfx_if.GFX_FW_TYPE_RLC_G, piece(path, blob, common.ucode_array_offset_bytes, common.ucode_size_bytes, "RLC G"))]


def load_list(ip_versions: dict[str, tuple[int, int, int]], sdma: Callable[[str, dict[str, str]], list[tuple[int, bytes]]],
              gen: str) -> Firmware:
  """Every piece the AM driver loads for these IP versions, in PSP load order (SDMA, MEC, IMU, RLC: amdgpu_psp.c
  psp_load_non_psp_fw), `sdma` parsing the generation's SDMA file."""
  v = lambda ip: "_".join(map(str, ip_versions[ip]))
  files: dict[str, str] = {}
  bootloader, toc = psp_sos(f"psp_{v('MP0')}_sos.bin", files)
  smu = smc(f"smu_{v('MP1')}.bin", files)
  ip = sdma(f"sdma_{v('SDMA0')}.bin", files)
  mec, mec_start = rs64_mec(f"gc_{v('GC')}_mec.bin", files)
  ip += mec + imu(f"gc_{v('GC')}_imu.bin", files) + rlc(f"gc_{v('GC')}_rlc.bin", files, gen)
  return Firmware(bootloader, toc, smu, ip, mec_start, files)
