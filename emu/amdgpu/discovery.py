"""The IP discovery binary of a Navi31, as the firmware leaves it in the last 64 KiB of VRAM (amd_driver.md 2.2).

Layout (discovery.h structs from autogen.amd.discovery): a `binary_header` at 0 whose table_list points at
the IP discovery table (an `ip_discovery_header`, one die, `ip_v4` records with 32-bit segment bases) and at
the GC table (`gpu_info_header` + `gc_info_v1_2`). Checksums are the 16-bit byte sums the driver verifies:
the binary's over [offsetof(binary_size), binary_size), each table's over the table's own `size` bytes.
"""
from __future__ import annotations
import ctypes

from autogen.amd import discovery, soc15_hw_ip as hw_ip

DISCOVERY_SIZE = 64 << 10        # reserved at the top of VRAM
# Navi31 IP blocks: (hw id, version, segment bases); bases are emu.amdgpu.gpu.IP_BASES
NAVI31_IPS = (("GC", hw_ip.GC_HWID, (11, 0, 0)), ("SDMA0", hw_ip.SDMA0_HWID, (6, 0, 0)), ("MMHUB", hw_ip.MMHUB_HWID, (3, 0, 0)),
              ("NBIO", hw_ip.NBIF_HWID, (4, 3, 0)), ("MP0", hw_ip.MP0_HWID, (13, 0, 0)),
              ("MP1", hw_ip.MP1_HWID, (13, 0, 0)), ("HDP", hw_ip.HDP_HWID, (6, 0, 0)), ("OSSSYS", hw_ip.OSSSYS_HWID, (6, 0, 0)))
# RX 7900 XTX: 6 shader engines x 2 shader arrays x 4 WGPs (96 CUs), wave32, 16 waves/SIMD, 64 KiB LDS
GC_INFO = dict(gc_num_se=6, gc_num_wgp0_per_sa=4, gc_num_wgp1_per_sa=0, gc_num_rb_per_se=4, gc_num_gl2c=16,
               gc_num_gprs=1536, gc_num_max_gs_thds=32, gc_gs_table_depth=32, gc_gsprim_buff_depth=1792,
               gc_parameter_cache_depth=1024, gc_double_offchip_lds_buffer=1, gc_wave_size=32, gc_max_waves_per_simd=16,
               gc_max_scratch_slots_per_cu=32, gc_lds_size=64, gc_num_sc_per_se=1, gc_num_sa_per_se=2,
               gc_num_packer_per_sc=4, gc_num_gl2a=4, gc_num_tcp_per_sa=8, gc_num_sdp_interface=16, gc_num_tcps=96)
IP_TABLE_VERSION = 4


def checksum(data: bytes) -> int:
  return sum(data) & 0xFFFF


def _ip_table(ip_bases: dict[str, tuple[int, ...]], at: int) -> bytes:
  """The IP discovery table placed at binary offset `at` (die offsets are absolute in the binary)."""
  ips = b""
  for name, hw_id, (major, minor, rev) in NAVI31_IPS:
    bases = ip_bases[name]
    head = discovery.ip_v4(hw_id=hw_id, instance_number=0, num_base_address=len(bases), major=major, minor=minor, revision=rev)
    ips += bytes(head)[:8] + b"".join(b.to_bytes(4, "little") for b in bases)
  hdr_size = ctypes.sizeof(discovery.ip_discovery_header)
  die = bytes(discovery.die_header(die_id=0, num_ips=len(NAVI31_IPS)))
  hdr = discovery.ip_discovery_header(signature=discovery.DISCOVERY_TABLE_SIGNATURE, version=IP_TABLE_VERSION,
                                      size=hdr_size + len(die) + len(ips), id=0, num_dies=1)
  hdr.die_info[0].die_id, hdr.die_info[0].die_offset = 0, at + hdr_size
  return bytes(hdr) + die + ips


def _gc_table() -> bytes:
  gc = discovery.gc_info_v1_2(**GC_INFO)
  gc.header.table_id, gc.header.version_major, gc.header.version_minor = discovery.GC_TABLE_ID, 1, 2
  gc.header.size = ctypes.sizeof(gc)
  return bytes(gc)


def build(ip_bases: dict[str, tuple[int, ...]]) -> bytes:
  """The discovery binary (binary header, IP table, GC table) with valid signatures and checksums."""
  hsize = ctypes.sizeof(discovery.binary_header)
  ip_at = (hsize + 15) & ~15
  ip = _ip_table(ip_bases, ip_at)
  gc_at = (ip_at + len(ip) + 15) & ~15
  gc = _gc_table()
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
