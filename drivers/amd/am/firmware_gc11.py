"""The firmware list of the GC 11 family (MP0 13, MP1 13, SDMA 6): the PSP bootloader components and sOS, the SMU, and
the IP firmware the PSP loads (SDMA, RS64 MEC, IMU, RLC), split out of their files (amdgpu_ucode.c; load order:
psp_v13_0.c, amdgpu_psp.c)."""
from __future__ import annotations

from autogen.amd import amdgpu_ucode, psp_gfx_if
from drivers.amd.am.firmware import Firmware, read, header, piece, load_list

SDMA_HEADERS = {(2, 0): amdgpu_ucode.sdma_firmware_header_v2_0}


def sdma(name: str, files: dict[str, str]) -> list[tuple[int, bytes]]:
  """SDMA v2: TH1 (ctl, at its own file offset) then TH0 (ctx, at the ucode array)."""
  path, blob = read(name); files["sdma"] = path
  hdr, common = header(path, blob, SDMA_HEADERS, "sdma_firmware_header")
  return [(psp_gfx_if.GFX_FW_TYPE_SDMA_UCODE_TH1, piece(path, blob, hdr.ctl_ucode_offset, hdr.ctl_ucode_size_bytes, "SDMA ctl ucode")),
          (psp_gfx_if.GFX_FW_TYPE_SDMA_UCODE_TH0, piece(path, blob, common.ucode_array_offset_bytes, hdr.ctx_ucode_size_bytes, "SDMA ctx ucode"))]


def load(ip_versions: dict[str, tuple[int, int, int]]) -> Firmware: return load_list(ip_versions, sdma, "gfx11")
