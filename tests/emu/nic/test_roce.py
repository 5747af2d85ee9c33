"""RoCEv2 frames byte for byte: Ethernet/IPv4/UDP/BTH/RETH/AETH/ImmDt layout and the ICRC, derived by hand from the
spec (IBA vol 1 ch. 9.2-9.4 and Table 38; RoCEv2 annex A17.4 and A17.8), not from the encoder."""
import struct, zlib

import pytest

from emu.nic import roce
from tests.emu.nic.memnic import ipv4_gid

PATH = roce.Path(src_mac=bytes.fromhex("020000000001"), dst_mac=bytes.fromhex("020000000002"),
                 sgid=ipv4_gid("10.0.0.1"), dgid=ipv4_gid("10.0.0.2"), udp_sport=0xC000)

# RDMA WRITE ONLY to QP 0x11, PSN 5, AckReq, 5 bytes "hello" (PadCnt 3) to va 0x1000 with R_Key 0x100
ETH = "020000000002" "020000000001" "0800"
# IPv4: ver/IHL 45, TOS 0, total 68 (20 + UDP 48), id 0, DF, TTL 64, UDP; checksum: 4500+0044+4000+4011+0a00+0001+0a00
# +0002 = d958 -> ~d958 = 26a7
IPV4 = "4500" "0044" "0000" "4000" "4011" "26a7" "0a000001" "0a000002"
UDP = "c000" "12b7" "0030" "0000"          # sport 0xc000, dport 4791, length 8 + 12 + 16 + 8 (5 + 3 pad) + 4, checksum 0
BTH = "0a" "30" "ffff" "00" "000011" "80000005"   # opcode 0x0a, PadCnt 3 (bits 5-4), P_Key, resv8a, dest QPN, AckReq|PSN
RETH = "0000000000001000" "00000100" "00000005"
PAYLOAD = b"hello".hex() + "000000"
# what the ICRC covers (A17.8.2): 8 bytes of ones, then the same headers with TOS, TTL, IP checksum, UDP checksum and
# BTH resv8a set to ones
COVERED = "ff" * 8 + "45ff" "0044" "0000" "4000" "ff11" "ffff" "0a000001" "0a000002" + "c000" "12b7" "0030" "ffff" + \
          "0a" "30" "ffff" "ff" "000011" "80000005" + RETH + PAYLOAD


def write_only() -> roce.Packet:
  return roce.Packet(roce.WRITE_ONLY, 5, 0x11, ack_req=True, va=0x1000, rkey=0x100, dma_len=5, payload=b"hello")


def test_write_only_frame_matches_the_spec_byte_for_byte():
  frame = b"".join(roce.encode(PATH, write_only()))
  icrc = struct.pack("<I", zlib.crc32(bytes.fromhex(COVERED)))   # CRC-32, least significant byte first
  assert frame.hex() == ETH + IPV4 + UDP + BTH + RETH + PAYLOAD + icrc.hex()


def test_decode_reads_back_every_field():
  p = roce.decode(b"".join(roce.encode(PATH, write_only())))
  assert (p.opcode, p.psn, p.dest_qpn, p.ack_req, p.pkey, p.va, p.rkey, p.dma_len) == (roce.WRITE_ONLY, 5, 0x11, True, 0xFFFF, 0x1000, 0x100, 5)
  assert bytes(p.payload) == b"hello"                               # the pad is not payload
  assert (p.sgid, p.dgid, p.src_mac, p.dst_mac, p.udp_sport) == (PATH.sgid, PATH.dgid, PATH.src_mac, PATH.dst_mac, 0xC000)


@pytest.mark.parametrize("opcode, headers", [
  (roce.WRITE_ONLY_IMM, "BTH RETH ImmDt"), (roce.WRITE_FIRST, "BTH RETH"), (roce.WRITE_MIDDLE, "BTH"), (roce.WRITE_LAST_IMM, "BTH ImmDt"),
  (roce.SEND_ONLY_IMM, "BTH ImmDt"), (roce.SEND_FIRST, "BTH"), (roce.READ_REQUEST, "BTH RETH"), (roce.READ_RESPONSE_FIRST, "BTH AETH"),
  (roce.READ_RESPONSE_MIDDLE, "BTH"), (roce.READ_RESPONSE_ONLY, "BTH AETH"), (roce.ACKNOWLEDGE, "BTH AETH")])
def test_extension_headers_per_opcode(opcode, headers):
  """IBA Table 38: which headers follow the BTH, in order (RETH, then ImmDt; AETH on ACKs and read responses)."""
  p = roce.Packet(opcode, 1, 2, va=0x1122334455667788, rkey=0xAABBCCDD, dma_len=0x99, syndrome=0x1F, msn=0x123456, imm=0xCAFEF00D)
  raw = roce.transport_headers(p, 0)
  expect = {"BTH": f"{opcode:02x}00ffff00000002" "00000001", "RETH": "1122334455667788aabbccdd00000099", "AETH": "1f123456",
            "ImmDt": "cafef00d"}
  assert raw.hex() == "".join(expect[h] for h in headers.split())


def test_aeth_nak_and_ack_encoding():
  ack = roce.Packet(roce.ACKNOWLEDGE, 7, 3, syndrome=roce.AETH_NAK | roce.NAK_REMOTE_ACCESS_ERROR, msn=9)
  p = roce.decode(b"".join(roce.encode(PATH, ack)))
  assert (p.syndrome, p.msn, bytes(p.payload)) == (0x62, 9, b"")
  assert roce.AETH_RNR_NAK | 14 == 0x2E and roce.RNR_TIMER_US[14] == 1280     # RNR NAK, timer 14 = 1.28 ms (Table 45)


def test_variant_fields_do_not_change_the_icrc_but_invariant_ones_do():
  frame = bytearray(b"".join(roce.encode(PATH, write_only())))
  ip = slice(14, 34)
  frame[15], frame[22] = 0xB8, 3                                    # TOS (DSCP EF) and TTL change along the path
  frame[24:26] = b"\0\0"
  frame[24:26] = struct.pack("!H", roce._ipv4_checksum(frame[ip]))    # routers rewrite the checksum
  frame[40:42] = b"\x12\x34"                                        # a UDP checksum
  frame[46] = 0xC0                                                  # FECN/BECN in resv8a
  assert bytes(roce.decode(frame).payload) == b"hello"
  frame[49] ^= 1                                                    # the destination QP number is covered
  with pytest.raises(roce.FrameError, match="ICRC"): roce.decode(frame)


@pytest.mark.parametrize("offset, value, match", [(12, 0x86, "EtherType"), (14, 0x46, "IHL"), (23, 6, "protocol"),
                                                  (36, 0x11, "destination port"), (20, 0x20, "fragment")])
def test_malformed_frames_are_rejected_with_the_reason(offset, value, match):
  frame = bytearray(b"".join(roce.encode(PATH, write_only())))
  frame[offset] = value
  if 14 <= offset < 34 and offset not in (24, 25):
    frame[24:26] = b"\0\0"
    frame[24:26] = struct.pack("!H", roce._ipv4_checksum(frame[14:34]))
  with pytest.raises(roce.FrameError, match=match): roce.decode(frame)


def test_ipv4_checksum_and_lengths_are_checked():
  frame = bytearray(b"".join(roce.encode(PATH, write_only())))
  bad = bytearray(frame)
  bad[22] = 1                                                       # TTL changed without fixing the checksum
  with pytest.raises(roce.FrameError, match="checksum"): roce.decode(bad)
  with pytest.raises(roce.FrameError, match="total length"): roce.decode(frame[:-1])


def test_ipv6_frame_layout_and_masks():
  path = roce.Path(PATH.src_mac, PATH.dst_mac, bytes.fromhex("fe80" + "00" * 12 + "0001"), bytes.fromhex("fe80" + "00" * 12 + "0002"),
                   traffic_class=0x12, flow_label=0x34567)
  frame = b"".join(roce.encode(path, roce.Packet(roce.SEND_ONLY, 1, 2, payload=b"abcd")))
  # version 6, traffic class 0x12, flow label 0x34567; payload length = UDP 8 + BTH 12 + 4 + ICRC 4; next header UDP; hop 64
  assert frame[12:14].hex() == "86dd" and frame[14:22].hex() == "6123456700" "1c" "11" "40"
  covered = b"\xff" * 8 + bytes.fromhex("6fffffff001c11ff") + frame[22:54] + frame[54:60] + b"\xff\xff" + \
            bytes.fromhex("0400ffffff00000200000001") + b"abcd"
  assert frame[-4:] == struct.pack("<I", zlib.crc32(covered))
  assert bytes(roce.decode(frame).payload) == b"abcd"


def test_psn_arithmetic_wraps_at_24_bits():
  assert roce.psn_add(0xFFFFFF, 1) == 0 and roce.psn_delta(0, 0xFFFFFF) == 1 and roce.psn_delta(0xFFFFFF, 0) == -1
  assert roce.psn_delta(0x7FFFFF, 0) == 0x7FFFFF and roce.psn_delta(0x800000, 0) == -0x800000
