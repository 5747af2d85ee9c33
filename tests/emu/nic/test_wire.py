"""The wire and the RC transport on it, without a NIC model: two minimal NICs (memnic.MemNIC) on real UDP sockets.
Segmentation, ACK/NAK, RNR, retransmission, and each injected fault (drop, dup, reorder, corrupt) handled without
silent corruption. Facts: IBA vol 1 ch. 9.7 (RC), Tables 38, 44, 45; emu/nic/rc.py's docstring."""
import os, random, subprocess, sys

import pytest

from emu.nic import rc, roce
from emu.nic.wire import GIDConflict, WirePort, check_loopback
from tests.emu.nic.memnic import MemNIC, ipv4_gid, wait


def connected(a, b, **attrs):
  """QP 10 on a and QP 20 on b, connected both ways (both start at the same PSN)."""
  attrs.setdefault("rq_psn", attrs.get("sq_psn", 0))
  qa, qb = a.qp(10), b.qp(20)
  a.connect(qa, b, 20, **attrs)
  b.connect(qb, a, 10, **attrs)
  return qa, qb


def sniff(nic):
  frames = []
  nic.wire.taps.append(lambda f: frames.append(roce.decode(f)))
  return frames


def write(a, qa, b, size, ctx="w", opcode=rc.WRITE, imm=None, src_key=None, dst_key=None, offset=0):
  data = random.Random(size).randbytes(size)
  sk, smem = (src_key, a.regions[src_key][1]) if src_key else a.region(size)
  smem[:size] = data
  dk = dst_key or b.region(size + offset)[0]
  a.post_send(qa, rc.SendWR(opcode, a.buffer(sk, 0, size), b.regions[dk][0].va + offset, dk, imm=imm, ctx=ctx))
  return data, dk


def done(nic, n=1): wait(lambda: len(nic.sends) >= n, f"{n} send completion(s) on {nic.port.name}")


@pytest.mark.parametrize("size, mtu, opcodes", [
  (0, 1024, [roce.WRITE_ONLY]), (1, 256, [roce.WRITE_ONLY]), (256, 256, [roce.WRITE_ONLY]),
  (257, 256, [roce.WRITE_FIRST, roce.WRITE_LAST]), (3 * 1024 + 5, 1024, [roce.WRITE_FIRST] + [roce.WRITE_MIDDLE] * 2 + [roce.WRITE_LAST]),
  (8192, 4096, [roce.WRITE_FIRST, roce.WRITE_LAST])])
def test_rdma_write_is_segmented_by_path_mtu(pair, size, mtu, opcodes):
  a, b = pair
  qa, qb = connected(a, b, mtu=mtu, sq_psn=0xFFFFFE)              # PSNs wrap past 2^24
  frames = sniff(a)
  data, dk = write(a, qa, b, size)
  done(a)
  assert a.sends == [(10, "w", rc.OK)] and bytes(b.regions[dk][1]) == data
  assert [f.opcode for f in frames] == opcodes
  assert [f.psn for f in frames] == [(0xFFFFFE + i) & 0xFFFFFF for i in range(len(opcodes))]
  assert frames[0].dma_len == size and all(len(f.payload) == mtu for f in frames[:-1]) and frames[-1].ack_req


def test_the_requester_completes_only_after_the_responder_wrote_the_memory(pair):
  a, b = pair
  qa, qb = connected(a, b)
  seen = []
  a.on_send = lambda qp, wr, status: seen.append(bytes(b.regions[1][1]))
  data, _ = write(a, qa, b, 5000)
  done(a)
  assert seen == [data]


def test_write_with_immediate_and_send_with_immediate_complete_receives(pair):
  a, b = pair
  qa, qb = connected(a, b)
  rk, rmem = b.region(100)
  b.post_recv(qb, rc.RecvWR(b.buffer(rk), ctx="r1"))
  b.post_recv(qb, rc.RecvWR(b.buffer(rk), ctx="r2"))
  write(a, qa, b, 3000, opcode=rc.WRITE_IMM, imm=0x1234)
  data, _ = write(a, qa, b, 77, opcode=rc.SEND_IMM, imm=0x5678, dst_key=rk)
  wait(lambda: len(b.recvs) == 2)
  assert b.recvs == [(20, "r1", rc.OK, 0, 0x1234, True), (20, "r2", rc.OK, 77, 0x5678, False)]
  assert bytes(rmem[:77]) == data


def test_rdma_read_multi_packet(pair):
  a, b = pair
  qa, qb = connected(a, b, mtu=512)
  rk, rmem = b.region(5000)
  rmem[:] = random.Random(1).randbytes(5000)
  lk, lmem = a.region(5000)
  frames = sniff(b)
  a.post_send(qa, rc.SendWR(rc.READ, a.buffer(lk), 0x10000, rk, ctx="rd"))
  done(a)
  assert a.sends == [(10, "rd", rc.OK)] and lmem == rmem
  assert [f.opcode for f in frames] == [roce.READ_RESPONSE_FIRST] + [roce.READ_RESPONSE_MIDDLE] * 8 + [roce.READ_RESPONSE_LAST]


@pytest.mark.parametrize("case, status", [("bad rkey", rc.REM_ACCESS_ERR), ("too small", rc.REM_ACCESS_ERR),
                                          ("no remote write", rc.REM_ACCESS_ERR)])
def test_a_bad_rkey_gives_a_nak_then_an_error_completion_and_writes_nothing(pair, case, status):
  a, b = pair
  qa, qb = connected(a, b)
  access = rc.LOCAL_WRITE | rc.REMOTE_READ if case == "no remote write" else None
  dk, dmem = b.region(100 if case == "too small" else 4096, **({"access": access} if access else {}))
  sk, _ = a.region(4096)
  frames = sniff(b)
  a.post_send(qa, rc.SendWR(rc.WRITE, a.buffer(sk), 0x10000, 99 if case == "bad rkey" else dk, ctx="bad"))
  a.post_send(qa, rc.SendWR(rc.WRITE, a.buffer(sk), 0x10000, dk, ctx="next"))
  done(a, 2)
  assert a.sends == [(10, "bad", status), (10, "next", rc.WR_FLUSH_ERR)]
  assert frames[0].opcode == roce.ACKNOWLEDGE and frames[0].syndrome == roce.AETH_NAK | roce.NAK_REMOTE_ACCESS_ERROR
  assert dmem == bytearray(len(dmem)) and qa.state == qb.state == "ERR"
  assert "R_Key" in b.fatals[0][1] and a.fatals


def test_rnr_nak_then_retry_after_the_receive_is_posted(pair):
  a, b = pair
  qa, qb = connected(a, b, min_rnr_timer=14)                        # 1.28 ms
  rk, rmem = b.region(64)
  write(a, qa, b, 64, opcode=rc.SEND, dst_key=rk)
  wait(lambda: qb.stats.rnr_naks_sent >= 1, "an RNR NAK")
  assert not a.sends
  b.post_recv(qb, rc.RecvWR(b.buffer(rk), ctx="late"))
  done(a)
  wait(lambda: b.recvs, "the receive completion (the responder tells its host after the ACK)")
  assert a.sends == [(10, "w", rc.OK)] and b.recvs[0][:3] == (20, "late", rc.OK)


def test_rnr_retries_exhausted(pair):
  a, b = pair
  qa, qb = connected(a, b, rnr_retry=2, min_rnr_timer=1)
  write(a, qa, b, 8, opcode=rc.SEND)
  done(a)
  assert a.sends == [(10, "w", rc.RNR_RETRY_EXC_ERR)] and qb.stats.rnr_naks_sent == 3


def test_a_peer_not_in_rtr_gives_a_retry_exceeded_error(pair):
  a, b = pair
  qa, qb = a.qp(10), b.qp(20)
  a.connect(qa, b, 20, timeout=8, retry_cnt=2)                      # 1 ms timeout; b's QP stays in RESET
  write(a, qa, b, 100)
  done(a)
  assert a.sends == [(10, "w", rc.RETRY_EXC_ERR)] and qa.stats.timeouts == 3 and qa.stats.retransmitted == 2
  wait(lambda: qb.stats.dropped == 3, "the three copies to reach b's QP in RESET")
  assert b.port.rx_dropped == {}


@pytest.mark.parametrize("fault", ["drop", "dup", "reorder", "corrupt"])
@pytest.mark.parametrize("side", ["requester", "responder"])
def test_each_injected_fault_is_recovered_without_corruption(pair, fault, side):
  a, b = pair
  qa, qb = connected(a, b, timeout=14)                              # 67 ms
  nth = 2 if side == "requester" else 1                             # the 2nd request packet, or the first ACK
  (a if side == "requester" else b).wire.faults.add(fault, nth)
  data, dk = write(a, qa, b, 6 * 1024 + 100)                        # 7 packets, AckReq on the last
  done(a)
  assert a.sends == [(10, "w", rc.OK)] and bytes(b.regions[dk][1]) == data
  assert (a if side == "requester" else b).wire.faults.applied == [(nth, fault)]
  if side == "requester":
    if fault in ("drop", "corrupt"): assert qb.stats.out_of_sequence >= 1 and qb.stats.naks_sent >= 1 and qa.stats.retransmitted >= 1
    if fault == "corrupt": assert sum(v for k, v in b.port.rx_dropped.items() if "ICRC" in k) == 1
    if fault == "dup": assert qb.stats.duplicates >= 1
    if fault == "reorder": assert qb.stats.out_of_sequence >= 1 and qa.stats.retransmitted >= 1
  elif fault in ("drop", "corrupt"):                                # the only ACK was lost: timeout, duplicates re-ACKed
    assert qa.stats.timeouts == 1 and qb.stats.duplicates >= 1


def test_read_response_lost_is_requested_again(pair):
  a, b = pair
  qa, qb = connected(a, b, timeout=14)
  rk, rmem = b.region(4 * 1024)
  rmem[:] = os.urandom(len(rmem))
  lk, lmem = a.region(4 * 1024)
  b.wire.faults.add("drop", 2)                                      # the second READ response
  frames = sniff(a)
  a.post_send(qa, rc.SendWR(rc.READ, a.buffer(lk), 0x10000, rk))
  done(a)
  assert a.sends[0][2] == rc.OK and lmem == rmem
  again = [f for f in frames if f.opcode == roce.READ_REQUEST][1]      # the re-request starts at the missing PSN
  assert (again.psn, again.va, again.dma_len) == (1, 0x10000 + 1024, 3 * 1024)


def test_many_writes_keep_order_and_window(pair):
  a, b = pair
  qa, qb = connected(a, b, mtu=4096)
  dk, dmem = b.region(1 << 20)
  sk, smem = a.region(1 << 20)
  smem[:] = os.urandom(len(smem))
  for i in range(16):
    a.post_send(qa, rc.SendWR(rc.WRITE, a.buffer(sk, i << 16, 1 << 16), 0x10000 + (i << 16), dk, ctx=i, signaled=True))
  done(a, 16)
  assert [s[1] for s in a.sends] == list(range(16)) and dmem == smem


def test_loopback_addresses_only():
  with pytest.raises(ValueError, match="not a loopback address"): WirePort("x", lambda f, s: None, host="10.0.0.1")
  with pytest.raises(ValueError, match="not a loopback address"): check_loopback("0.0.0.0")
  port = WirePort("y", lambda f, s: None, host="127.0.0.2")
  try:
    with pytest.raises(ValueError, match="not a loopback address"): port.send(("192.168.1.1", 4791), [b"x"])
    assert port.sent == 0
  finally: port.close()


def test_gid_conflict_and_stale_entries(pair):
  a, b = pair
  with pytest.raises(GIDConflict, match="already on the wire"): b.port.add_gid(1, a.gid)
  table = a.wire.table
  with open(os.path.join(table.path, ipv4_gid("10.9.9.9").hex()), "w") as f: f.write("127.0.0.1 9 999999999\n")
  assert table.resolve(ipv4_gid("10.9.9.9")) is None               # its process is gone
  with open(os.path.join(table.path, ipv4_gid("10.9.9.8").hex()), "w") as f: f.write(f"10.1.2.3 4791 {os.getpid()}\n")
  with pytest.raises(ValueError, match="not a loopback address"): table.resolve(ipv4_gid("10.9.9.8"))


def test_faults_from_the_environment(monkeypatch):
  monkeypatch.setenv("HCQ_WIRE_FAULTS", "drop:3, dup:5,reorder:7")
  port = WirePort("z", lambda f, s: None)
  try: assert port.faults.plan == {3: "drop", 5: "dup", 7: "reorder"}
  finally: port.close()
  monkeypatch.setenv("HCQ_WIRE_FAULTS", "lose:3")
  with pytest.raises(ValueError, match="unknown wire fault"): WirePort("z", lambda f, s: None)


RESPONDER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.emu.nic.memnic import MemNIC
b = MemNIC("child", "10.0.0.2", 2)
qb = b.qp(20)
key, mem = b.region(1 << 16)
print("up", flush=True)
peer_mac = bytes.fromhex(sys.stdin.readline().strip())
class Peer: mac, gid = peer_mac, bytes(10) + b"\\xff\\xff" + bytes([10, 0, 0, 1])
b.connect(qb, Peer, 10)
print("ready", flush=True)
sys.stdin.readline()
print(bytes(mem).hex(), flush=True)
"""


def test_rdma_write_between_two_processes():
  a = MemNIC("parent", "10.0.0.1", 1)
  child = subprocess.Popen([sys.executable, "-c", RESPONDER.format(root=os.getcwd())], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
  try:
    assert child.stdout.readline().strip() == "up"
    child.stdin.write(a.mac.hex() + "\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "ready"
    class Peer: mac, gid = bytes((2, 0, 0, 0, 0, 2)), ipv4_gid("10.0.0.2")
    qa = a.qp(10)
    a.connect(qa, Peer, 20)
    data = os.urandom(1 << 16)
    sk, smem = a.region(1 << 16)
    smem[:] = data
    a.post_send(qa, rc.SendWR(rc.WRITE, a.buffer(sk), 0x10000, 1))
    done(a)
    child.stdin.write("done\n")
    child.stdin.flush()
    assert a.sends[0][2] == rc.OK and bytes.fromhex(child.stdout.readline().strip()) == data
  finally:
    child.kill()
    child.wait()
    a.close()


def test_the_port_thread_stops_once_its_nic_is_gone():
  class Owner:
    def on_frame(self, frame, src): pass
  owner = Owner()
  port = WirePort("gc", owner.on_frame)
  del owner                                                         # no close(), no datagram: the idle wake notices
  port._thread.join(5)
  assert not port._thread.is_alive() and port.sock.fileno() == -1  # and its socket is released
  port.close()


@pytest.mark.parametrize("case", ["short middle", "middle without first", "last not the rest", "first after first"])
def test_the_responder_checks_the_opcode_sequence_and_lengths(pair, case):
  a, b = pair
  qa, qb = connected(a, b, mtu=256)
  dk, dmem = b.region(4096)
  sniffed = sniff(b)
  path = qa.a.path
  first = roce.Packet(roce.WRITE_FIRST, 0, 20, va=0x10000, rkey=dk, dma_len=600, payload=b"\1" * 256)
  frames = {"short middle": [first, roce.Packet(roce.WRITE_MIDDLE, 1, 20, payload=b"\2" * 255)],
            "middle without first": [roce.Packet(roce.WRITE_MIDDLE, 0, 20, payload=b"\2" * 256)],
            "last not the rest": [first, roce.Packet(roce.WRITE_LAST, 1, 20, ack_req=True, payload=b"\3" * 256)],
            "first after first": [first, roce.Packet(roce.WRITE_FIRST, 1, 20, va=0x10000, rkey=dk, dma_len=600, payload=b"\4" * 256)]}[case]
  for p in frames: a.wire.send(b.wire.endpoint, roce.encode(path, p))
  wait(lambda: qb.state == "ERR", "the responder to go to ERR")
  nak = [f for f in sniffed if f.opcode == roce.ACKNOWLEDGE][-1]
  assert nak.syndrome == roce.AETH_NAK | roce.NAK_INVALID_REQUEST and nak.psn == len(frames) - 1
  assert dmem[256:] == bytearray(4096 - 256)                        # nothing past what the accepted FIRST wrote


def test_a_read_response_from_before_a_re_request_is_taken_at_the_re_requested_psn(pair):
  """A READ of 4 packets whose second response is late: the third shows a gap, the requester asks again from PSN 1,
  and the late MIDDLE of PSN 1 (the first request's) arrives before the new FIRST. Same bytes at the same place: taken,
  then the rest completes the READ with the right data. The peer is QP 99 on b, which does not exist, so only the
  packets fed by hand reach the requester."""
  a, b = pair
  qa = a.qp(10)
  a.connect(qa, b, 99, timeout=18)
  lk, lmem = a.region(4 * 1024)
  data = os.urandom(4 * 1024)
  frames = sniff(a)
  a.post_send(qa, rc.SendWR(rc.READ, a.buffer(lk), 0x10000, 7, ctx="rd"))
  resp = lambda op, k: roce.Packet(op, k, 10, syndrome=roce.AETH_ACK | roce.AETH_CREDITS_INVALID, payload=data[k * 1024:(k + 1) * 1024])
  with a.lock:
    qa._response(resp(roce.READ_RESPONSE_FIRST, 0))
    qa._response(resp(roce.READ_RESPONSE_MIDDLE, 2))                  # PSN 1 missing: asked for again
  wait(lambda: len([f for f in frames if f.opcode == roce.READ_REQUEST]) == 2, "the re-request")
  with a.lock:
    for op, k in ((roce.READ_RESPONSE_MIDDLE, 1), (roce.READ_RESPONSE_FIRST, 1), (roce.READ_RESPONSE_MIDDLE, 2), (roce.READ_RESPONSE_LAST, 3)):
      qa._response(resp(op, k))                                     # the late one, then the new response (its FIRST a duplicate)
  done(a)
  assert a.sends[0][1:] == ("rd", rc.OK) and bytes(lmem) == data


def test_a_response_lost_deep_into_a_long_read_is_requested_again_past_the_window(pair):
  """A 600-packet READ whose 300th response is lost: the responses before it acknowledged their PSNs, so the
  re-request from PSN 299 is inside the requester's window (counted from the oldest unacknowledged PSN) and goes out at
  once; before, the window was counted from the READ's first PSN and the re-request waited for timeouts until the
  retries ran out."""
  a, b = pair
  qa, qb = connected(a, b, timeout=18)
  n = 600
  rk, rmem = b.region(n * 1024)
  rmem[:] = os.urandom(len(rmem))
  lk, lmem = a.region(n * 1024)
  b.wire.faults.add("drop", 300)
  frames = sniff(a)
  a.post_send(qa, rc.SendWR(rc.READ, a.buffer(lk), 0x10000, rk, ctx="rd"))
  done(a)
  assert a.sends[0][1:] == ("rd", rc.OK) and lmem == rmem
  again = [f for f in frames if f.opcode == roce.READ_REQUEST][1]
  assert (again.psn, again.va, again.dma_len) == (299, 0x10000 + 299 * 1024, (n - 299) * 1024)
