"""IP discovery: the table the GPU keeps at the end of VRAM, naming every IP block, its version and the
register segment bases of each instance (discovery.h; amdgpu_discovery.c amdgpu_discovery_reg_base_init)."""
from __future__ import annotations
import ctypes
from dataclasses import dataclass, field

from autogen.amd import discovery, soc15_hw_ip as hw_ip

DISCOVERY_TMR_SIZE = 64 << 10     # the table lives in the last 64 KiB of VRAM
DISCOVERY_READ = 10 << 10         # of which the driver reads the first 10 KiB
# hw ids (soc15_hw_ip.h) of the blocks the AM driver programs -> the names it uses for them
BLOCKS = {hw_ip.GC_HWID: "GC", hw_ip.SDMA0_HWID: "SDMA0", hw_ip.MMHUB_HWID: "MMHUB", hw_ip.NBIF_HWID: "NBIO", hw_ip.MP0_HWID: "MP0",
          hw_ip.MP1_HWID: "MP1", hw_ip.HDP_HWID: "HDP", hw_ip.OSSSYS_HWID: "OSSSYS", hw_ip.SMUIO_HWID: "SMUIO", hw_ip.ATHUB_HWID: "ATHUB",
          hw_ip.DF_HWID: "DF", hw_ip.THM_HWID: "THM", hw_ip.UMC_HWID: "UMC"}
# the GC info table versions discovery.h defines
GC_INFO = {(1, 0): discovery.gc_info_v1_0, (1, 1): discovery.gc_info_v1_1, (1, 2): discovery.gc_info_v1_2, (1, 3): discovery.gc_info_v1_3,
           (2, 0): discovery.gc_info_v2_0, (2, 1): discovery.gc_info_v2_1}


class DiscoveryError(RuntimeError):
  """The IP discovery table is missing or corrupt."""


@dataclass
class Discovery:
  versions: dict[str, tuple[int, int, int]] = field(default_factory=dict)
  bases: dict[str, tuple[int, ...]] = field(default_factory=dict)        # instance 0 segment bases (dwords)
  gc_info: ctypes.Structure | None = None


def checksum(data: bytes) -> int:
  """discovery.h tables carry a 16-bit byte sum."""
  return sum(data) & 0xFFFF


def parse(blob: bytes) -> Discovery:
  bh = discovery.binary_header.from_buffer_copy(blob)
  if bh.binary_signature != discovery.BINARY_SIGNATURE:
    raise DiscoveryError(f"IP discovery binary signature {bh.binary_signature:#x}, expected {discovery.BINARY_SIGNATURE:#x}: the GPU "
                         "did not publish its discovery table (VRAM not initialised by the firmware?)")
  start = discovery.binary_header.binary_checksum.offset + discovery.binary_header.binary_checksum.size   # the sum covers what follows it
  if bh.binary_size > len(blob) or checksum(blob[start:bh.binary_size]) != bh.binary_checksum:
    raise DiscoveryError("IP discovery binary checksum mismatch: the table is corrupt")
  out = Discovery()
  t = bh.table_list[discovery.IP_DISCOVERY]
  if checksum(blob[t.offset:t.offset + t.size]) != t.checksum: raise DiscoveryError("IP discovery table checksum mismatch")
  ihdr = discovery.ip_discovery_header.from_buffer_copy(blob, t.offset)
  if ihdr.signature != discovery.DISCOVERY_TABLE_SIGNATURE: raise DiscoveryError(f"IP discovery table signature {ihdr.signature:#x} is not IPDS")
  wide = bool(ihdr.base_addr_64_bit)
  for die in ihdr.die_info[:ihdr.num_dies]:
    dh = discovery.die_header.from_buffer_copy(blob, die.die_offset)
    off = die.die_offset + ctypes.sizeof(discovery.die_header)
    for _ in range(dh.num_ips):
      ip = discovery.ip_v4.from_buffer_copy(blob, off)
      off += 8
      n, size = ip.num_base_address, 8 if wide else 4
      bases = tuple(int.from_bytes(blob[off + i * size:off + (i + 1) * size], "little") for i in range(n))
      off += n * size
      name = BLOCKS.get(ip.hw_id)
      if name is not None and ip.instance_number == 0:
        out.versions[name], out.bases[name] = (ip.major, ip.minor, ip.revision), bases
  g = bh.table_list[discovery.GC]
  if g.offset:
    if checksum(blob[g.offset:g.offset + g.size]) != g.checksum: raise DiscoveryError("GC info table checksum mismatch")
    gh = discovery.gpu_info_header.from_buffer_copy(blob, g.offset)
    cls = GC_INFO.get((gh.version_major, gh.version_minor))
    if gh.table_id != discovery.GC_TABLE_ID or cls is None:
      raise DiscoveryError(f"GC info table v{gh.version_major}.{gh.version_minor} is not supported")
    out.gc_info = cls.from_buffer_copy(blob, g.offset)
  for need in ("GC", "SDMA0", "MMHUB", "NBIO", "MP0", "MP1", "HDP", "OSSSYS"):
    if need not in out.versions: raise DiscoveryError(f"IP discovery lists no {need} block")
  return out
