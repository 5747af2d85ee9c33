"""The IP discovery binary of an emulated GPU (chips.py), as the firmware leaves it in the last 64 KiB of VRAM.

Layout (discovery.h structs from autogen.amd.discovery): a `binary_header` at 0 whose table_list points at
the IP discovery table (an `ip_discovery_header`, one die, `ip_v4` records with 32-bit segment bases) and at
the GC table (`gpu_info_header` + `gc_info_v1_2`). Checksums are the 16-bit byte sums the driver verifies:
the binary's over [offsetof(binary_size), binary_size), each table's over the table's own `size` bytes.
"""
from __future__ import annotations
import ctypes

from autogen.amd import discovery
from emu.amdgpu.chips import Chip

DISCOVERY_SIZE = 64 << 10        # reserved at the top of VRAM
IP_TABLE_VERSION = 4


def checksum(data: bytes) -> int:
  return sum(data) & 0xFFFF


def _ip_table(chip: Chip, at: int) -> bytes:
  """The IP discovery table placed at binary offset `at` (die offsets are absolute in the binary)."""
  ips = b""
  for name, hw_id, (major, minor, rev) in chip.ips():
    bases = chip.ip_bases[name]
    head = discovery.ip_v4(hw_id=hw_id, instance_number=0, num_base_address=len(bases), major=major, minor=minor, revision=rev)
    ips += bytes(head)[:8] + b"".join(b.to_bytes(4, "little") for b in bases)
  hdr_size = ctypes.sizeof(discovery.ip_discovery_header)
  die = bytes(discovery.die_header(die_id=0, num_ips=len(chip.versions)))
  hdr = discovery.ip_discovery_header(signature=discovery.DISCOVERY_TABLE_SIGNATURE, version=IP_TABLE_VERSION,
                                      size=hdr_size + len(die) + len(ips), id=0, num_dies=1)
  hdr.die_info[0].die_id, hdr.die_info[0].die_offset = 0, at + hdr_size
  return bytes(hdr) + die + ips


def _gc_table(chip: Chip) -> bytes:
  gc = discovery.gc_info_v1_2(**chip.gc_info)
  gc.header.table_id, gc.header.version_major, gc.header.version_minor = discovery.GC_TABLE_ID, 1, 2
  gc.header.size = ctypes.sizeof(gc)
  return bytes(gc)


def build(chip: Chip) -> bytes:
  """The discovery binary (binary header, IP table, GC table) with valid signatures and checksums."""
  hsize = ctypes.sizeof(discovery.binary_header)
  ip_at = (hsize + 15) & ~15
  ip = _ip_table(chip, ip_at)
  gc_at = (ip_at + len(ip) + 15) & ~15
  gc = _gc_table(chip)
  size = gc_at + len(gc)
  hdr = discovery.binary_header(binary_signature=discovery.BINARY_SIGNATURE, version_major=1, version_minor=0, binary_size=size)
  for idx, at, tbl in ((discovery.IP_DISCOVERY, ip_at, ip), (discovery.GC, gc_at, gc)):
    hdr.table_list[idx].offset, hdr.table_list[idx].checksum, hdr.table_list[idx].size = at, checksum(tbl), len(tbl)
  out = bytearray(size)
  out[:hsize] = bytes(hdr)
  out[ip_at:ip_at + len(ip)], out[gc_at:gc_at + len(gc)] = ip, gc
  body_from = discovery.binary_header.binary_size.offset   # the sum starts right after binary_checksum
  out[discovery.binary_header.binary_checksum.offset:body_from] = checksum(out[body_from:size]).to_bytes(2, "little")
  return bytes(out)
