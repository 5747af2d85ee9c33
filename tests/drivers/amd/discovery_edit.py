"""Rewriting the IP discovery table an emulated GPU keeps at the end of VRAM, to make it report other IP versions."""
import ctypes
import numpy as np
from autogen.amd import discovery


def set_ip_version(pci, hw_id: int, version: tuple[int, int, int]) -> None:
  """Rewrite one IP's version in the discovery table the GPU keeps at the end of VRAM (through BAR0), with the
  checksums the driver verifies (discovery.h: the table's byte sum, then the binary's over what follows its checksum)."""
  vram = np.frombuffer(pci.map_bar(0).view, np.uint8)
  at = len(vram) - (64 << 10)
  bh = discovery.binary_header.from_buffer_copy(bytes(vram[at:at + ctypes.sizeof(discovery.binary_header)]))
  blob = bytearray(vram[at:at + bh.binary_size])
  t = bh.table_list[discovery.IP_DISCOVERY]
  die = discovery.ip_discovery_header.from_buffer_copy(blob, t.offset).die_info[0]
  off = die.die_offset + ctypes.sizeof(discovery.die_header)
  for _ in range(discovery.die_header.from_buffer_copy(blob, die.die_offset).num_ips):
    ip = discovery.ip_v4.from_buffer_copy(blob, off)
    if ip.hw_id == hw_id:
      ip.major, ip.minor, ip.revision = version
      blob[off:off + 8] = bytes(ip)[:8]
    off += 8 + 4 * ip.num_base_address
  bh.table_list[discovery.IP_DISCOVERY].checksum = sum(blob[t.offset:t.offset + t.size]) & 0xFFFF
  blob[:ctypes.sizeof(bh)] = bytes(bh)
  start = discovery.binary_header.binary_checksum.offset + discovery.binary_header.binary_checksum.size
  bh.binary_checksum = sum(blob[start:]) & 0xFFFF
  blob[:ctypes.sizeof(bh)] = bytes(bh)
  vram[at:at + len(blob)] = np.frombuffer(bytes(blob), np.uint8)
