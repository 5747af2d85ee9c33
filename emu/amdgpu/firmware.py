"""Firmware images as the PSP receives them: what the emulated PSP checks before it accepts a component.

Every component the PSP loads (bootloader stages, the TOC, and every LOAD_IP_FW payload) is an AMD signed
image: a 256-byte header, the body, then a 256-byte RSA signature. Header fields, found in every component
of Debian firmware-amd-graphics 20230210 for Navi31 (psp_13_0_0_sos, smu_13_0_0, sdma_6_0_0, gc_11_0_0_*):
  0x10 u32  magic "$PS1" (zero in the key database, KDB, which is not itself a signed image)
  0x14 u32  size of the signed body
  0x30 u32  signature option (1 = signed)
  0x58 u16  image id (which firmware this is; table below)
  0x60 u32  firmware version; the PMFW (SMU) image keeps it as bytes (debug, major, minor, program): smu_13_0_0.bin
            has 00 4e 4b 00 where its smc header says 0x004e4b00 (78.75.0), the value GetSmuVersion reports
  0x6C u32  total size = 256 (header) + body + 256 (signature)
The PSP cannot be shown our keys, so the model checks what a signature check implies: the magic, that the
sizes agree and fit the buffer the driver named, that a signature is present (not all zeros), and that the
image id is the one of the firmware type the driver claims, so a swapped or truncated component is refused.

The TOC (table of contents, loaded by LOAD_TOC) tells the sOS which firmware follows and how large a TMR it needs.
AMD does not publish the layout of its body, so the model reads the TOC in a layout of its own (what fwbuild writes),
after the 256-byte header:
  0x00 4s   magic "HTOC"
  0x04 u32  TMR size in bytes (what LOAD_TOC reports in resp.tmr_size): non-zero, a multiple of 1 MiB
  0x08 u32  n, then n u32 image ids (each a Navi31 LOAD_IP_FW component's, listed once): what LOAD_IP_FW accepts
A TOC whose body lacks the magic is taken to be in AMD's layout (Debian's psp_13_0_0_sos.bin): the model checks only
its signed-image header, reports Navi31's TMR size (TMR_SIZE) and accepts every Navi31 component.
"""
from __future__ import annotations
from dataclasses import dataclass

from autogen.amd import psp_gfx_if

HEADER, SIGNATURE = 256, 256
MEC_ENTRY = 0x7000000003000     # RS64 MEC ucode_start_addr (gfx v2.0 header of gc_11_0_0_mec.bin): where the MEC starts
MAGIC = b"$PS1"
OFF_MAGIC, OFF_BODY, OFF_SIGOPT, OFF_ID, OFF_VERSION, OFF_TOTAL = 0x10, 0x14, 0x30, 0x58, 0x60, 0x6C

# Bootloader commands written to C2PMSG_35 (psp_v13_0 PSP_BL__*), in the order the bootloader accepts them
BL_LOAD_KEY_DATABASE, BL_LOAD_TOS_SPL_TABLE, BL_LOAD_SYSDRV, BL_LOAD_SOCDRV = 0x80000, 0x10000000, 0x10000, 0xB0000
BL_LOAD_INTFDRV, BL_LOAD_DBGDRV, BL_LOAD_RASDRV, BL_LOAD_SOSDRV = 0xD0000, 0xC0000, 0xE0000, 0x20000
BL_COMMANDS = {BL_LOAD_KEY_DATABASE: "KDB", BL_LOAD_TOS_SPL_TABLE: "SPL", BL_LOAD_SYSDRV: "SYS_DRV",
               BL_LOAD_SOCDRV: "SOC_DRV", BL_LOAD_INTFDRV: "INTF_DRV", BL_LOAD_DBGDRV: "DBG_DRV",
               BL_LOAD_RASDRV: "RAS_DRV", BL_LOAD_SOSDRV: "SOS"}

# Image ids of the Navi31 components (header offset 0x58, observed in the Debian blobs). Components absent from
# those blobs (SOC/INTF/DBG/RAS drivers) have no known id: the model accepts any id for them.
IMAGE_IDS = {"KDB": 0x004F, "SPL": 0x0056, "SYS_DRV": 0x000A, "SOS": 0x0009, "TOC": 0x200E,
             "SMU": 0x1001, "SDMA_UCODE_TH0": 0x203E, "SDMA_UCODE_TH1": 0x203F, "RS64_MEC": 0x2048,
             "RS64_MEC_P0_STACK": 0x2049, "IMU_I": 0x203B, "IMU_D": 0x203C, "RLC_IRAM": 0x2016,
             "RLC_DRAM_BOOT": 0x2017, "RLC_P": 0x200F, "RLC_V": 0x200A, "RLC_G": 0x2009}
FW_TYPE_NAMES = {v: k[12:] for k, v in vars(psp_gfx_if).items() if k.startswith("GFX_FW_TYPE_") and isinstance(v, int)}
# what Navi31's sOS loads through LOAD_IP_FW: the PMFW, then the GFX firmware (amd_driver.md 2.9); anything else is refused
IP_FIRMWARE = ("SMU", "SDMA_UCODE_TH0", "SDMA_UCODE_TH1", "RS64_MEC", "RS64_MEC_P0_STACK", "IMU_I", "IMU_D",
               "RLC_IRAM", "RLC_DRAM_BOOT", "RLC_P", "RLC_V", "RLC_G")
TMR_SIZE, TMR_ALIGN = 0x1300000, 1 << 20   # the TMR Navi31's TOC asks for (amd_driver.md 2.5: 19 MiB), its alignment
TOC_MAGIC = b"HTOC"


@dataclass(frozen=True)
class Rules:
  """What one PSP generation takes: its components' image ids, the LOAD_IP_FW components (the SMU first, then the GFX
  firmware AUTOLOAD_RLC needs), and where an image's total size comes from: the header's 0x6C (PSP 13's images), or
  256 + body + 256 (PSP 14's images leave 0x6C zero, or give a padded size; the MEC P0 stack is zero-padded past its
  signature)."""
  psp: str
  image_ids: dict[str, int]
  ip_firmware: tuple[str, ...]
  total_field: bool

  def total(self, header: bytes) -> int:
    u32 = lambda off: int.from_bytes(header[off:off + 4], "little")
    return u32(OFF_TOTAL) if self.total_field else HEADER + u32(OFF_BODY) + SIGNATURE


PSP13 = Rules("Navi31's PSP 13.0.0", IMAGE_IDS, IP_FIRMWARE, True)
# Image ids of the gfx12 components, observed in Debian firmware-amd-graphics 20250410 (psp_14_0_2/14_0_3_sos, smu_14_0_2/3,
# sdma_7_0_0/1, gc_12_0_0/1_*; the same in both chips' files). SDMA 7 is one RS64 engine: TH0 only; RLC v2.2: no P/V.
PSP14 = Rules("PSP 14.0.2/14.0.3", {"KDB": 0x004F, "SPL": 0x0056, "SYS_DRV": 0x000A, "SOC_DRV": 0x014A, "INTF_DRV": 0x014C,
                                    "DBG_DRV": 0x014B, "RAS_DRV": 0x0152, "SOS": 0x0009, "TOC": 0x200E, "SMU": 0x1001,
                                    "SDMA_UCODE_TH0": 0x2025, "RS64_MEC": 0x2048, "RS64_MEC_P0_STACK": 0x2049, "IMU_I": 0x203B,
                                    "IMU_D": 0x203C, "RLC_IRAM": 0x2016, "RLC_DRAM_BOOT": 0x2017, "RLC_G": 0x2009},
              ("SMU", "SDMA_UCODE_TH0", "RS64_MEC", "RS64_MEC_P0_STACK", "IMU_I", "IMU_D", "RLC_IRAM", "RLC_DRAM_BOOT", "RLC_G"), False)
RULES = {(13, 0, 0): PSP13, (14, 0, 2): PSP14, (14, 0, 3): PSP14}     # by MP0 version


class Rejected(Exception):
  """The PSP refused a component; the message says which and why."""


@dataclass(frozen=True)
class Image:
  name: str
  image_id: int
  version: int
  total: int


def check(name: str, data: bytes, limit: int, accept_ids: tuple[str, ...] = (), rules: Rules = PSP13) -> Image:
  """Validate `data` (at least the whole image) as component `name` loaded from a buffer of `limit` bytes;
  `accept_ids` names other components whose image the PSP also takes for this slot."""
  u32 = lambda off: int.from_bytes(data[off:off + 4], "little")
  ids = rules.image_ids
  if len(data) < HEADER: raise Rejected(f"{name}: {len(data)} bytes is shorter than the {HEADER}-byte image header")
  magic, body, total = data[OFF_MAGIC:OFF_MAGIC + 4], u32(OFF_BODY), rules.total(data)
  if magic != MAGIC and not (magic == bytes(4) and "KDB" in (name, *accept_ids)):
    raise Rejected(f"{name}: no signed-image header (magic {bytes(magic)!r} at offset 0x10, expected {MAGIC!r})")
  if u32(OFF_SIGOPT) != 1: raise Rejected(f"{name}: image is not signed (signature option {u32(OFF_SIGOPT)} at 0x30, expected 1)")
  if total != HEADER + body + SIGNATURE:
    raise Rejected(f"{name}: sizes disagree: total {total} != 256 + body {body} + 256")
  if total > limit: raise Rejected(f"{name}: image of {total} bytes does not fit the {limit} bytes the driver gave")
  if len(data) < total: raise Rejected(f"{name}: truncated: {len(data)} of {total} bytes")
  if not any(data[total - SIGNATURE:total]): raise Rejected(f"{name}: signature block is all zeros")
  image_id = int.from_bytes(data[OFF_ID:OFF_ID + 2], "little")
  wanted = {ids[n] for n in (name, *accept_ids) if n in ids}
  if wanted and image_id not in wanted:
    what = next((k for k, v in ids.items() if v == image_id), "an unknown image")
    raise Rejected(f"{name}: image id {image_id:#06x} is {what}, not {name} ({ids.get(name, 0):#06x})")
  return Image(name, image_id, u32(OFF_VERSION), total)


@dataclass(frozen=True)
class TOC:
  tmr_size: int
  firmware: frozenset[str]     # the IP_FIRMWARE components it lists


def parse_toc(image: bytes, rules: Rules = PSP13) -> TOC:
  """The TOC's contents from its checked signed image (layout in the module docstring)."""
  body = image[HEADER:HEADER + int.from_bytes(image[OFF_BODY:OFF_BODY + 4], "little")]
  if body[:4] != TOC_MAGIC: return TOC(TMR_SIZE, frozenset(rules.ip_firmware))   # AMD's own layout: not readable here
  if len(body) < 12: raise Rejected(f"TOC: a {len(body)}-byte body is shorter than its 12-byte table header")
  tmr, n = int.from_bytes(body[4:8], "little"), int.from_bytes(body[8:12], "little")
  if not tmr or tmr % TMR_ALIGN: raise Rejected(f"TOC: TMR size {tmr:#x} is not a non-zero multiple of 1 MiB")
  if 12 + 4 * n > len(body): raise Rejected(f"TOC: {n} entries do not fit its {len(body)}-byte body")
  ids = [int.from_bytes(body[12 + 4 * i:16 + 4 * i], "little") for i in range(n)]
  by_id = {rules.image_ids[name]: name for name in rules.ip_firmware}
  if unknown := [i for i in ids if i not in by_id]:
    raise Rejected(f"TOC: image id {unknown[0]:#x} is no firmware of {rules.psp}")
  if len(set(ids)) != len(ids): raise Rejected("TOC: a component is listed twice")
  return TOC(tmr, frozenset(by_id[i] for i in ids))


def toc_body(tmr_size: int, firmware: tuple[str, ...], rules: Rules = PSP13) -> bytes:
  """A TOC body in the model's layout (for synthetic firmware): the TMR size and the components' image ids."""
  ids = [rules.image_ids[name] for name in firmware]
  return TOC_MAGIC + b"".join(v.to_bytes(4, "little") for v in (tmr_size, len(ids), *ids))


def pmfw_version(image_version: int) -> int:
  """GetSmuVersion's program << 24 | major << 16 | minor << 8 | debug from the PMFW image header's version field."""
  debug, major, minor, program = image_version.to_bytes(4, "little")
  return program << 24 | major << 16 | minor << 8 | debug


def pmfw_image_version(version: int) -> int:
  """The inverse of pmfw_version: the header field that makes GetSmuVersion report `version`."""
  program, major, minor, debug = version.to_bytes(4, "big")
  return int.from_bytes(bytes((debug, major, minor, program)), "little")


def make_image(name: str, body: bytes, version: int = 1, image_id: int | None = None) -> bytes:   # image_id None: Navi31's
  """A well-formed signed image of component `name` (for synthetic firmware): header, body, signature."""
  hdr = bytearray(HEADER)
  hdr[OFF_MAGIC:OFF_MAGIC + 4] = bytes(4) if name == "KDB" else MAGIC
  hdr[OFF_BODY:OFF_BODY + 4] = len(body).to_bytes(4, "little")
  hdr[OFF_SIGOPT:OFF_SIGOPT + 4] = (1).to_bytes(4, "little")
  hdr[OFF_ID:OFF_ID + 2] = (IMAGE_IDS[name] if image_id is None else image_id).to_bytes(2, "little")
  hdr[OFF_VERSION:OFF_VERSION + 4] = version.to_bytes(4, "little")
  hdr[OFF_TOTAL:OFF_TOTAL + 4] = (HEADER + len(body) + SIGNATURE).to_bytes(4, "little")
  sig = bytes((i * 151 + len(body) + 1) & 0xFF or 1 for i in range(SIGNATURE))
  return bytes(hdr) + body + sig
