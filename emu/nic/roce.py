"""RoCEv2 frames as they are on an Ethernet wire: the bytes every NIC model puts into (and takes out of) a datagram.

A frame is Ethernet II (dst MAC, src MAC, EtherType) + IPv4 (EtherType 0x0800, 20 bytes, no options) or IPv6
(0x86DD, 40 bytes) + UDP (destination port 4791) + the InfiniBand transport headers + payload + pad + ICRC; no FCS.
Transport headers (IBA 1.4 vol 1 ch. 9, Table 38 opcodes; linux include/rdma/ib_pack.h), all big-endian:
  BTH   12 B: opcode; SE(0x80) | MigReq(0x40) | PadCnt(0x30) | TVer(0x0f); P_Key; resv8a; dest QPN (24 bits);
        AckReq(bit 31) | PSN (24 bits)
  RETH  16 B: virtual address (64), R_Key (32), DMA length (32)   - RDMA WRITE FIRST/ONLY, RDMA READ request
  AETH   4 B: syndrome (8) | MSN (24)                              - ACK, READ response FIRST/LAST/ONLY
  ImmDt  4 B: immediate data                                       - SEND/WRITE LAST/ONLY "with immediate"
The payload is padded with PadCnt zero bytes to a multiple of 4.
ICRC (RoCEv2 annex A17.8; soft-RoCE rxe_icrc.c): CRC-32 (the Ethernet polynomial, as zlib computes it) over 8 bytes of
0xff (the masked LRH), the IP header, the UDP header, the transport headers, payload and pad, with the variant fields
masked to ones: IPv4 TOS, TTL and header checksum, IPv6 traffic class, flow label and hop limit, the UDP checksum and the
BTH resv8a byte; it is stored least significant byte first, as an Ethernet FCS is. IPv4 frames carry Identification 0
and DF; the UDP checksum is 0 (RoCEv2 allows it) and is neither computed nor checked.

`encode` builds a frame, `decode` checks one (every length, the IPv4 header checksum, the UDP port and the ICRC) and
raises FrameError naming what is wrong; a NIC drops such a frame as hardware does.
"""
from __future__ import annotations
import struct, zlib
from dataclasses import dataclass

ETH_P_IPV4, ETH_P_IPV6 = 0x0800, 0x86DD
ROCE_V2_UDP_DPORT = 4791            # include/rdma/ib_verbs.h
IPPROTO_UDP = 17
ETH_HLEN, IPV4_HLEN, IPV6_HLEN, UDP_HLEN = 14, 20, 40, 8
BTH_LEN, RETH_LEN, AETH_LEN, IMM_LEN, ICRC_LEN = 12, 16, 4, 4, 4
IPV4_DF = 0x4000
PSN_MASK = 0xFFFFFF

# RC opcodes (IBA Table 38; ib_pack.h IB_OPCODE_RC_*; the RC transport prefix is 0x00)
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_LAST_IMM, SEND_ONLY, SEND_ONLY_IMM = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_IMM, WRITE_ONLY, WRITE_ONLY_IMM = 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B
READ_REQUEST, READ_RESPONSE_FIRST, READ_RESPONSE_MIDDLE, READ_RESPONSE_LAST, READ_RESPONSE_ONLY = 0x0C, 0x0D, 0x0E, 0x0F, 0x10
ACKNOWLEDGE = 0x11
OPCODE_NAMES = {v: k for k, v in dict(
  SEND_FIRST=0x00, SEND_MIDDLE=0x01, SEND_LAST=0x02, SEND_LAST_WITH_IMMEDIATE=0x03, SEND_ONLY=0x04,
  SEND_ONLY_WITH_IMMEDIATE=0x05, RDMA_WRITE_FIRST=0x06, RDMA_WRITE_MIDDLE=0x07, RDMA_WRITE_LAST=0x08,
  RDMA_WRITE_LAST_WITH_IMMEDIATE=0x09, RDMA_WRITE_ONLY=0x0A, RDMA_WRITE_ONLY_WITH_IMMEDIATE=0x0B, RDMA_READ_REQUEST=0x0C,
  RDMA_READ_RESPONSE_FIRST=0x0D, RDMA_READ_RESPONSE_MIDDLE=0x0E, RDMA_READ_RESPONSE_LAST=0x0F,
  RDMA_READ_RESPONSE_ONLY=0x10, ACKNOWLEDGE=0x11).items()}
HAS_RETH = frozenset((WRITE_FIRST, WRITE_ONLY, WRITE_ONLY_IMM, READ_REQUEST))
HAS_IMM = frozenset((SEND_LAST_IMM, SEND_ONLY_IMM, WRITE_LAST_IMM, WRITE_ONLY_IMM))
HAS_AETH = frozenset((READ_RESPONSE_FIRST, READ_RESPONSE_LAST, READ_RESPONSE_ONLY, ACKNOWLEDGE))
HAS_PAYLOAD = frozenset(range(SEND_FIRST, READ_REQUEST)) | frozenset(range(READ_RESPONSE_FIRST, ACKNOWLEDGE))
FIRST = frozenset((SEND_FIRST, WRITE_FIRST, READ_RESPONSE_FIRST))
MIDDLE = frozenset((SEND_MIDDLE, WRITE_MIDDLE, READ_RESPONSE_MIDDLE))
LAST = frozenset((SEND_LAST, SEND_LAST_IMM, WRITE_LAST, WRITE_LAST_IMM, READ_RESPONSE_LAST))
ONLY = frozenset((SEND_ONLY, SEND_ONLY_IMM, WRITE_ONLY, WRITE_ONLY_IMM, READ_RESPONSE_ONLY))

# AETH syndrome (IBA 9.7.5.1.1, Table 44): bits 7-5 the kind, bits 4-0 credits / RNR timer / NAK code
AETH_ACK, AETH_RNR_NAK, AETH_NAK = 0x00, 0x20, 0x60
AETH_KIND_MASK = 0xE0
AETH_CREDITS_INVALID = 0x1F          # "no credit count" (ib_pack.h: AETH credit field 0x1f)
NAK_PSN_SEQUENCE_ERROR, NAK_INVALID_REQUEST, NAK_REMOTE_ACCESS_ERROR, NAK_REMOTE_OPERATIONAL_ERROR = 0, 1, 2, 3
# RNR NAK timer field -> microseconds (IBA Table 45; ib_verbs.h IB_RNR_TIMER_*)
RNR_TIMER_US = (655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840, 5120, 7680,
                10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520)
MTUS = (256, 512, 1024, 2048, 4096)  # IB path MTUs


class FrameError(ValueError):
  """A frame the receiving NIC drops; the message says which check it failed."""


def psn_add(psn: int, n: int) -> int: return (psn + n) & PSN_MASK


def psn_delta(a: int, b: int) -> int:
  """a - b in PSN space: a signed distance in [-2^23, 2^23) (IBA 9.7.1: PSNs compare modulo 2^24)."""
  return ((a - b + (1 << 23)) & PSN_MASK) - (1 << 23)


def is_ipv4_gid(gid: bytes) -> bool:
  """An IPv4-mapped GID (::ffff:a.b.c.d) names a RoCEv2-over-IPv4 endpoint."""
  return gid[:12] == bytes(10) + b"\xff\xff"


@dataclass(frozen=True, eq=False)
class Path:
  """The addresses of one direction of a connection, as a QP's address vector gives them (compared and hashed by
  identity: each QP has its own, and frames of a path reuse what was built for it)."""
  src_mac: bytes
  dst_mac: bytes
  sgid: bytes
  dgid: bytes
  udp_sport: int = 0xC000
  hop_limit: int = 64
  traffic_class: int = 0
  flow_label: int = 0

  def __post_init__(self):
    if len(self.src_mac) != 6 or len(self.dst_mac) != 6 or len(self.sgid) != 16 or len(self.dgid) != 16:
      raise ValueError("a path needs 6-byte MACs and 16-byte GIDs")
    if is_ipv4_gid(self.sgid) != is_ipv4_gid(self.dgid):
      raise ValueError("source and destination GIDs must both be IPv4-mapped or both IPv6")

  @property
  def ipv4(self) -> bool: return is_ipv4_gid(self.dgid)


@dataclass(slots=True)
class Packet:
  """One transport packet, decoded. `payload` is a view into the received frame (without pad and ICRC)."""
  opcode: int
  psn: int
  dest_qpn: int
  ack_req: bool = False
  solicited: bool = False
  pkey: int = 0xFFFF
  va: int = 0                 # RETH
  rkey: int = 0
  dma_len: int = 0
  syndrome: int = 0           # AETH
  msn: int = 0
  imm: int | None = None      # ImmDt
  payload: memoryview | bytes = b""
  src_mac: bytes = b""        # from the frame's headers (decode)
  dst_mac: bytes = b""
  sgid: bytes = b""
  dgid: bytes = b""
  udp_sport: int = 0

  @property
  def name(self) -> str: return OPCODE_NAMES.get(self.opcode, f"opcode {self.opcode:#x}")


def _ipv4_checksum(hdr: bytes | bytearray | memoryview) -> int:
  s = sum(struct.unpack("!10H", hdr))
  s = (s & 0xFFFF) + (s >> 16)
  s = (s & 0xFFFF) + (s >> 16)
  return ~s & 0xFFFF


def _masked_ip_udp(ip_udp: bytes | bytearray | memoryview, ipv4: bool) -> bytearray:
  """The IP and UDP headers with their variant fields set to ones (A17.8): what the ICRC covers."""
  m = bytearray(ip_udp)
  if ipv4:
    m[1] = 0xFF                      # TOS (DSCP, ECN)
    m[8] = 0xFF                      # TTL
    m[10:12] = b"\xff\xff"           # header checksum
    u = IPV4_HLEN
  else:
    m[0] |= 0x0F                     # traffic class (low nibble of byte 0, high of byte 1) and flow label
    m[1:4] = b"\xff\xff\xff"
    m[7] = 0xFF                      # hop limit
    u = IPV6_HLEN
  m[u + 6:u + 8] = b"\xff\xff"       # UDP checksum
  return m


def _lower_crc(ip_udp: bytes, ipv4: bool) -> int:
  """The ICRC's running CRC after the masked LRH and the masked IP and UDP headers."""
  return zlib.crc32(b"\xff" * 8 + _masked_ip_udp(ip_udp, ipv4))


def _transport_crc(crc: int, transport: bytes | bytearray | memoryview, rest) -> int:
  bth = bytearray(transport[:BTH_LEN])
  bth[4] = 0xFF                      # BTH resv8a
  crc = zlib.crc32(transport[BTH_LEN:], zlib.crc32(bth, crc))
  for part in rest: crc = zlib.crc32(part, crc)
  return crc


def icrc(ip_udp: bytes | bytearray | memoryview, transport: bytes | bytearray | memoryview,
         rest: tuple = (), ipv4: bool = True) -> int:
  """The ICRC of a frame whose IP+UDP headers are `ip_udp` and whose transport part (BTH first) is `transport`
  followed by the buffers in `rest` (payload, pad)."""
  return _transport_crc(_lower_crc(bytes(ip_udp), ipv4), transport, rest)


def _bth_fixed(p: Packet, payload_len: int) -> bytes:
  """The BTH's first 8 bytes (opcode, flags with the pad count, P_Key, resv8a, dest QPN): the same for every packet of
  a connection with that opcode and pad."""
  return struct.pack("!BBHI", p.opcode, (0x80 if p.solicited else 0) | (-payload_len % 4) << 4, p.pkey, p.dest_qpn & 0xFFFFFF)


# opcode -> the struct of the BTH's last word (AckReq, PSN) and the extension headers after it
_VARIABLE = {op: struct.Struct("!I" + "QII" * (op in HAS_RETH) + "I" * (op in HAS_AETH) + "I" * (op in HAS_IMM))
             for op in range(256)}


def _bth_variable(p: Packet) -> bytes:
  """The BTH's AckReq/PSN word and the extension headers of `p` (RETH, AETH, ImmDt)."""
  op, fields = p.opcode, [(0x80000000 if p.ack_req else 0) | (p.psn & PSN_MASK)]
  if op in HAS_RETH: fields += (p.va, p.rkey, p.dma_len)
  if op in HAS_AETH: fields.append((p.syndrome & 0xFF) << 24 | (p.msn & 0xFFFFFF))
  if op in HAS_IMM:
    if p.imm is None: raise ValueError(f"{p.name} carries immediate data: imm is required")
    fields.append(p.imm)
  return _VARIABLE[op].pack(*fields)


def transport_headers(p: Packet, payload_len: int) -> bytes:
  """BTH and the extension headers of `p`, whose payload is `payload_len` bytes (the BTH's pad count)."""
  return _bth_fixed(p, payload_len) + _bth_variable(p)


# Frames of one flow repeat their lower headers: both ends keep what they built or checked, keyed by it.
_BUILT: dict[tuple[Path, int], tuple[bytes, int]] = {}       # (path, UDP length) -> (Ethernet+IP+UDP bytes, lower CRC)
_CHECKED: dict[bytes, tuple] = {}                             # Ethernet+IP+UDP bytes -> what _check_lower found
_FIXED: dict[tuple, tuple[bytes, int]] = {}   # (path, UDP length, opcode, BTH byte 1, P_Key, dest QPN) -> (Ethernet+IP+UDP
                                              # and the BTH's first 8 bytes, the ICRC's CRC after them, resv8a masked)
_CACHE_MAX = 4096


def _lower_headers(path: Path, udp_len: int) -> tuple[bytes, int]:
  """The Ethernet, IP and UDP headers of a frame on `path` whose UDP datagram is `udp_len` bytes, and their CRC."""
  if (hit := _BUILT.get((path, udp_len))) is not None: return hit
  if len(_BUILT) > _CACHE_MAX: _BUILT.clear()
  if path.ipv4:
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, path.traffic_class, IPV4_HLEN + udp_len, 0, IPV4_DF,
                               path.hop_limit, IPPROTO_UDP, 0, path.sgid[12:], path.dgid[12:]))
    ip[10:12] = struct.pack("!H", _ipv4_checksum(ip))
    eth_type = ETH_P_IPV4
  else:
    ip = bytearray(struct.pack("!IHBB16s16s", 6 << 28 | (path.traffic_class & 0xFF) << 20 | (path.flow_label & 0xFFFFF),
                               udp_len, IPPROTO_UDP, path.hop_limit, path.sgid, path.dgid))
    eth_type = ETH_P_IPV6
  ip_udp = bytes(ip) + struct.pack("!HHHH", path.udp_sport, ROCE_V2_UDP_DPORT, udp_len, 0)
  hit = _BUILT[(path, udp_len)] = (path.dst_mac + path.src_mac + struct.pack("!H", eth_type) + ip_udp, _lower_crc(ip_udp, path.ipv4))
  return hit


def ack_template(path: Path, dest_qpn: int, pkey: int) -> tuple[bytes, int, int]:
  """An ACK on `path` as `encode` builds it, without its ICRC, for the C datapath to fill in (PSN, MSN, ICRC): (the
  bytes, the length of its Ethernet+IP+UDP headers, their ICRC part)."""
  p = Packet(ACKNOWLEDGE, 0, dest_qpn, pkey=pkey, syndrome=AETH_ACK | AETH_CREDITS_INVALID)
  head, crc = _lower_headers(path, UDP_HLEN + BTH_LEN + AETH_LEN + ICRC_LEN)
  return head + transport_headers(p, 0), len(head), crc


def request_template(path: Path, p: Packet, payload_len: int) -> tuple[bytes, int, int]:
  """A single-packet request like `p` (its opcode, SE, P_Key, dest QPN) with `payload_len` bytes of payload on `path` as
  `encode` builds it, for the C datapath to fill in (PSN word, RETH, ImmDt, payload, pad, ICRC): (the bytes up to the
  BTH's PSN word, their ICRC part, the frame's length)."""
  n = len(_bth_variable(p)) + payload_len + -payload_len % 4
  fixed, crc = _fixed_headers(path, UDP_HLEN + 8 + n + ICRC_LEN, p, payload_len)
  return fixed, crc, len(fixed) + n + ICRC_LEN


def _fixed_headers(path: Path, udp_len: int, p: Packet, payload_len: int) -> tuple[bytes, int]:
  """The bytes every frame of p's connection with its opcode and length starts with, up to the BTH's PSN word, and
  their CRC (the frame's template)."""
  key = (path, udp_len, p.opcode, p.solicited, payload_len % 4, p.pkey, p.dest_qpn)
  if (hit := _FIXED.get(key)) is not None: return hit
  if len(_FIXED) > _CACHE_MAX: _FIXED.clear()
  head, crc = _lower_headers(path, udp_len)
  bth = _bth_fixed(p, payload_len)
  hit = _FIXED[key] = (head + bth, zlib.crc32(bth[5:], zlib.crc32(b"\xff", zlib.crc32(bth[:4], crc))))   # (resv8a masked)
  return hit


def encode(path: Path, p: Packet, payload_parts: tuple = ()) -> list:
  """The frame for packet `p` on `path`, as a list of buffers to send in one datagram. The payload is `p.payload`
  or, to send it without copying, the buffers in `payload_parts` (then `p.payload` must be empty)."""
  parts = payload_parts or ((p.payload,) if len(p.payload) else ())
  plen = sum(map(len, parts))
  if p.opcode not in HAS_PAYLOAD and plen: raise ValueError(f"{p.name} carries no payload")
  pad = -plen % 4
  variable = _bth_variable(p)
  fixed, crc = _fixed_headers(path, UDP_HLEN + 8 + len(variable) + plen + pad + ICRC_LEN, p, plen)
  crc = zlib.crc32(variable, crc)
  for part in parts: crc = zlib.crc32(part, crc)
  if not pad: return [fixed + variable, *parts, crc.to_bytes(4, "little")]
  tail = b"\0" * pad
  return [fixed + variable, *parts, tail, zlib.crc32(tail, crc).to_bytes(4, "little")]


class FrameRun:
  """`n` consecutive packets of one message that are all full path-MTU MIDDLE packets (WRITE or SEND): the same headers
  but the PSN (from `psn`) and AckReq (on packet j when (k0 + j + 1) % ack_every == 0, k0 being the first one's index
  in its message). Their payload is n * mtu bytes from `offset` of `source` (an rc.Buffer: `chunks(off, n)` gives the
  views). Sent as one batch (emu/nic/fastpath.py) or, with `frames`, frame by frame; either reads all of the payload
  (DMA faults included) before it sends anything."""
  def __init__(self, path: Path, p: Packet, psn: int, n: int, mtu: int, k0: int, ack_every: int, source, offset: int):
    if p.opcode not in MIDDLE: raise ValueError(f"a frame run is of MIDDLE packets, not {p.name}")
    self.path, self.p, self.psn, self.n, self.mtu, self.k0, self.ack_every = path, p, psn, n, mtu, k0, ack_every
    self.source, self.offset = source, offset

  def headers(self) -> tuple[bytes, int, bytes]:
    """(Ethernet+IP+UDP bytes, their ICRC part, the BTH without its PSN word) of every packet of the run."""
    head, crc = _lower_headers(self.path, UDP_HLEN + BTH_LEN + self.mtu + ICRC_LEN)
    return head, crc, transport_headers(self.p, self.mtu)[:8]

  def ack_req(self, j: int) -> bool: return (self.k0 + j + 1) % self.ack_every == 0

  def frames(self, start: int = 0) -> list[list]:
    """The frames of packets start, start + 1, ... (as `encode` builds them)."""
    if start >= self.n: return []
    p, out = self.p, []
    for j in range(start, self.n):
      parts = tuple(self.source.chunks(self.offset + j * self.mtu, self.mtu))
      out.append(encode(self.path, Packet(p.opcode, psn_add(self.psn, j), p.dest_qpn, self.ack_req(j), p.solicited, p.pkey), parts))
    return out


def _check_lower(f: memoryview, n: int) -> tuple:
  """Check the Ethernet, IP and UDP headers of an n-byte frame: (n, transport offset, lower CRC, sgid, dgid, sport)."""
  eth_type = f[12] << 8 | f[13]
  if eth_type == ETH_P_IPV4:
    ipv4, ip = True, f[ETH_HLEN:ETH_HLEN + IPV4_HLEN]
    if ip[0] != 0x45: raise FrameError(f"IPv4 version/IHL byte {ip[0]:#x}: expected 0x45 (no options)")
    total, frag, proto = ip[2] << 8 | ip[3], (ip[6] << 8 | ip[7]) & 0x3FFF, ip[9]
    if total != n - ETH_HLEN: raise FrameError(f"IPv4 total length {total} but {n - ETH_HLEN} bytes follow the Ethernet header")
    if frag: raise FrameError("IPv4 fragment (RoCEv2 frames are never fragmented)")
    if _ipv4_checksum(ip) != 0: raise FrameError("IPv4 header checksum mismatch")
    sgid, dgid = bytes(10) + b"\xff\xff" + bytes(ip[12:16]), bytes(10) + b"\xff\xff" + bytes(ip[16:20])
    u = ETH_HLEN + IPV4_HLEN
  elif eth_type == ETH_P_IPV6:
    if n < ETH_HLEN + IPV6_HLEN + UDP_HLEN + BTH_LEN + ICRC_LEN: raise FrameError(f"runt IPv6 frame of {n} bytes")
    ipv4, ip = False, f[ETH_HLEN:ETH_HLEN + IPV6_HLEN]
    if ip[0] >> 4 != 6: raise FrameError(f"IPv6 version {ip[0] >> 4}")
    plen, proto = ip[4] << 8 | ip[5], ip[6]
    if plen != n - ETH_HLEN - IPV6_HLEN: raise FrameError(f"IPv6 payload length {plen} but {n - ETH_HLEN - IPV6_HLEN} bytes follow")
    sgid, dgid = bytes(ip[8:24]), bytes(ip[24:40])
    u = ETH_HLEN + IPV6_HLEN
  else: raise FrameError(f"EtherType {eth_type:#06x} is neither IPv4 nor IPv6")
  if proto != IPPROTO_UDP: raise FrameError(f"IP protocol {proto}, not UDP")
  sport, dport, ulen = struct.unpack_from("!HHH", f, u)
  if dport != ROCE_V2_UDP_DPORT: raise FrameError(f"UDP destination port {dport}, not {ROCE_V2_UDP_DPORT} (RoCEv2)")
  if ulen != n - u: raise FrameError(f"UDP length {ulen} but {n - u} bytes follow the IP header")
  return n, u + UDP_HLEN, _lower_crc(bytes(f[ETH_HLEN:u + UDP_HLEN]), ipv4), sgid, dgid, sport


def lower_len(frame: bytes | bytearray | memoryview) -> int:
  """The length of the Ethernet, IP and UDP headers of a frame `decode` accepted."""
  return ETH_HLEN + (IPV4_HLEN if frame[12:14] == b"\x08\x00" else IPV6_HLEN) + UDP_HLEN


def lower_crc(frame: memoryview, head_len: int) -> int:
  """The ICRC part of the Ethernet, IP and UDP headers (the first `head_len` bytes) of a frame `decode` accepted."""
  hit = _CHECKED.get(bytes(frame[:head_len]))             # (the cache may have been emptied since)
  return (hit or _check_lower(memoryview(frame).cast("B"), len(frame)))[2]


def decode(frame: bytes | bytearray | memoryview) -> Packet:
  """Parse and check one frame (see the module docstring); raises FrameError."""
  f = memoryview(frame).cast("B")
  n = len(f)
  if n < ETH_HLEN + IPV4_HLEN + UDP_HLEN + BTH_LEN + ICRC_LEN: raise FrameError(f"runt frame of {n} bytes")
  key = bytes(f[:ETH_HLEN + (IPV4_HLEN if f[12:14] == b"\x08\x00" else IPV6_HLEN) + UDP_HLEN])
  hit = _CHECKED.get(key)
  if hit is None or hit[0] != n:
    hit = _check_lower(f, n)
    if len(_CHECKED) > _CACHE_MAX: _CHECKED.clear()
    _CHECKED[key] = hit
  _, t, crc, sgid, dgid, sport = hit
  opcode, flags, pkey, dqpn, apsn = struct.unpack_from("!BBHII", f, t)
  if opcode not in OPCODE_NAMES: raise FrameError(f"BTH opcode {opcode:#x} is not an RC opcode the model knows")
  if flags & 0x0F: raise FrameError(f"BTH transport header version {flags & 0x0F} (must be 0)")
  p = Packet(opcode, apsn & PSN_MASK, dqpn & 0xFFFFFF, bool(apsn >> 31), bool(flags & 0x80), pkey,
             src_mac=key[6:12], dst_mac=key[0:6], sgid=sgid, dgid=dgid, udp_sport=sport)
  h = t + BTH_LEN
  if opcode in HAS_RETH:
    p.va, p.rkey, p.dma_len = struct.unpack_from("!QII", f, h) if n - h >= RETH_LEN + ICRC_LEN else (0, 0, 0)
    h += RETH_LEN
  if opcode in HAS_AETH:
    if n - h >= AETH_LEN + ICRC_LEN: p.syndrome, p.msn = f[h], int.from_bytes(f[h + 1:h + 4], "big")
    h += AETH_LEN
  if opcode in HAS_IMM:
    if n - h >= IMM_LEN + ICRC_LEN: p.imm = int.from_bytes(f[h:h + 4], "big")
    h += IMM_LEN
  pad = (flags >> 4) & 3
  end = n - ICRC_LEN
  if h + pad > end: raise FrameError(f"{p.name}: {n} bytes are too few for its headers and {pad} pad bytes")
  if opcode not in HAS_PAYLOAD and end - h: raise FrameError(f"{p.name} with {end - h} bytes of payload")
  if _transport_crc(crc, f[t:h], (f[h:end],)) != int.from_bytes(f[end:], "little"):
    raise FrameError(f"{p.name} PSN {p.psn}: ICRC mismatch")
  p.payload = f[h:end - pad]
  return p
