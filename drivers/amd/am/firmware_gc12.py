"""The firmware list of the GC 12 family (MP0 14.0.2/14.0.3, MP1 14.0.2/14.0.3, SDMA 7.0): as GC 11's, but SDMA 7 is one
RS64 engine whose single ucode (sdma_firmware_header_v3_0) the PSP loads as SDMA_UCODE_TH0 (amdgpu_ucode.c
AMDGPU_UCODE_ID_SDMA_RS64; amdgpu_psp.c psp_get_fw_type). Files: gc_12_0_<n>_*, psp_14_0_<n>_sos, smu_14_0_<n>, sdma_7_0_<n>
(linux-firmware; Debian firmware-amd-graphics 20250410 from bookworm-backports)."""
from __future__ import annotations

from autogen.amd import amdgpu_ucode, psp_gfx_if
from drivers.amd.am.firmware import Firmware, read, header, piece, load_list

SDMA_HEADERS = {(3, 0): amdgpu_ucode.sdma_firmware_header_v3_0}


def sdma(name: str, files: dict[str, str]) -> list[tuple[int, bytes]]:
  """SDMA v3: the one RS64 ucode, at the ucode array."""
  path, blob = read(name); files["sdma"] = path
  hdr, common = header(path, blob, SDMA_HEADERS, "sdma_firmware_header")
  return [(psp_gfx_if.GFX_FW_TYPE_SDMA_UCODE_TH0, piece(path, blob, common.ucode_array_offset_bytes, hdr.ucode_size_bytes, "SDMA RS64 ucode"))]


def load(ip_versions: dict[str, tuple[int, int, int]]) -> Firmware: return load_list(ip_versions, sdma, "gfx12")
