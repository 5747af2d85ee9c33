"""Firmware files for an AMD GPU, found like the kernel finds them, and what every generation's list shares: reading a
file, checking its header, slicing a piece out. Which files and pieces a GPU loads is its generation's list, picked by
the GC version (ip_table.FIRMWARE: firmware_gc11.py).

Files: <ip>_<maj>_<min>_<rev><suffix>.bin, looked up in /lib/firmware/amdgpu (Debian firmware-amd-graphics, in the
non-free-firmware component: gfx11), then /usr/local/share/hcq/firmware/amdgpu (the gfx12 files of the bookworm-backports
package, which scripts/setup.sh unpacks there without replacing the installed package); $HCQ_FIRMWARE_DIR replaces both.
Headers: amdgpu_ucode.h (autogen.amd.amdgpu_ucode).
"""
from __future__ import annotations
import ctypes, os
from dataclasses import dataclass

from autogen.amd import amdgpu_ucode

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
