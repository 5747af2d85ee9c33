"""Raw UDP between two processes on this machine: the physical limit of the NIC models' wire (emu/nic/wire.py puts one
Ethernet frame in each datagram on the loopback network). bench/rdma_bw.py and rdma_lat.py print these next to their
RDMA figures; run alone it prints them for the sizes given.

Usage: python bench/rdma_udp.py [SIZE ...]   (message sizes in bytes; default 8 4096 65536 4194304)
  udp/throughput_mbps  messages of SIZE bytes cut into datagrams the size of the model's frames (up to 4096 bytes of
                       payload, the largest path MTU, + 58 bytes of Ethernet/IPv4/UDP/BTH/ICRC headers), sent back to
                       back by one process and counted by another: bytes of payload that arrive per second (`loss`: the
                       share of datagrams that did not; the model recovers those by retransmission)
  udp/pingpong_us      one way, half the median round trip (p99 too): one process sends a message, the other sends each
                       datagram back as it arrives (at most WINDOW datagrams in flight, so none is lost to a full buffer)
  udp/relay_pingpong_us  the same for one datagram, each process receiving it in a second thread that hands it to the
                       first through an eventfd, which then sends: the hand-off every hop over the model's wire has (the
                       NIC model's wire thread receives, the CQ waiter sleeps on the MSI-X eventfd), with no work at all
"""
import json, os, select, socket, subprocess, sys, threading, time
from figures import emit
from emu.nic.rc import WINDOW           # datagrams in flight in the ping-pong, as the model's requester

MTU, HEADERS = 4096, 58           # a MIDDLE packet's frame: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4, then the payload
BUF = 4 << 20                     # both ends' socket buffers, as the model's ports set them
SIZES = (8, 4096, 65536, 4 << 20)

STALL_S = 10.0                    # a peer that makes no progress for this long has failed (never total time)
END_S = 0.02                      # the sender repeats its end marker this often until the sink reports

PEER = r"""
import json, socket, sys, time
mode, stall = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF): s.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
buf = bytearray(65536)
s.settimeout(stall)
got = count = 0
first = last = None
while True:
  try: k, addr = s.recvfrom_into(buf)
  except socket.timeout:
    print(json.dumps(dict(error=f"no datagram for {stall:g} s")), flush=True)
    break
  if k == 1: break                        # the end marker (every data datagram carries the 58 header bytes)
  if mode == "echo":
    s.sendto(buf[:k], addr)
    continue
  last = time.perf_counter()
  first = first or last
  got, count = got + k, count + 1
if mode == "sink": print(json.dumps(dict(bytes=got, datagrams=count, seconds=(last - first) if count > 1 else 0.0)), flush=True)
"""


def _peer(mode: str) -> tuple[subprocess.Popen, int]:
  p = subprocess.Popen([sys.executable, "-c", PEER, mode, str(STALL_S)], stdout=subprocess.PIPE, text=True)
  if not select.select([p.stdout], [], [], STALL_S)[0]:
    p.kill()
    p.wait()
    raise RuntimeError(f"the UDP {mode} process did not start within {STALL_S:g} s")
  return p, int(p.stdout.readline())


def _stop(peer: subprocess.Popen, s: socket.socket) -> None:
  if peer.poll() is None: peer.kill()
  peer.wait()
  s.close()


def _datagrams(size: int) -> list[bytes]:
  """A message of `size` bytes as the model frames it: path-MTU pieces, each with the frame headers."""
  pieces = [min(MTU, size - off) for off in range(0, max(size, 1), MTU)]
  return [os.urandom(n + HEADERS) for n in pieces]


def _socket() -> socket.socket:
  s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
  for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF): s.setsockopt(socket.SOL_SOCKET, opt, BUF)
  return s


def _report(peer: subprocess.Popen, s: socket.socket, port: int) -> dict:
  """Send the end marker until the sink prints what it counted (a marker can be lost like any datagram, to a full
  buffer while the sink is not scheduled): a RuntimeError if it says nothing for STALL_S."""
  deadline = time.monotonic() + STALL_S
  while not select.select([peer.stdout], [], [], END_S)[0]:
    if peer.poll() is not None: raise RuntimeError(f"the UDP sink exited with status {peer.returncode} before reporting")
    if time.monotonic() > deadline: raise RuntimeError(f"the UDP sink reported nothing for {STALL_S:g} s after the end marker")
    try: s.sendto(b"E", ("127.0.0.1", port))
    except BlockingIOError: pass
  r = json.loads(peer.stdout.readline() or "{}")
  if "bytes" not in r: raise RuntimeError(f"the UDP sink failed: {r.get('error', 'no report')}")
  return r


def udp_throughput(size: int, datagrams: int = 40000) -> tuple[float, float]:
  """(MB/s of payload arriving, loss) for messages of `size` bytes sent back to back."""
  msg = _datagrams(size)
  iters = max(2, datagrams // len(msg))
  peer, port = _peer("sink")
  s = _socket()
  try:
    for _ in range(iters):
      for d in msg: s.sendto(d, ("127.0.0.1", port))
    r = _report(peer, s, port)
  finally: _stop(peer, s)
  sent = iters * len(msg)
  payload = r["bytes"] - r["datagrams"] * HEADERS
  return (payload / r["seconds"] / 1e6 if r["seconds"] else 0.0), 1 - r["datagrams"] / sent


def udp_pingpong(size: int, iters: int = 2000) -> tuple[float, float]:
  """(p50, p99) one-way latency in microseconds: half the round trip of a `size`-byte message."""
  msg = _datagrams(size)
  iters = max(20, min(iters, 4000 // len(msg)))
  peer, port = _peer("echo")
  s = _socket()
  s.settimeout(STALL_S)
  rtts = []
  try:
    for _ in range(iters):
      t0 = time.perf_counter()
      sent = 0
      for got in range(len(msg)):
        while sent < len(msg) and sent - got < WINDOW:
          s.sendto(msg[sent], ("127.0.0.1", port))
          sent += 1
        try: s.recv(65536)
        except socket.timeout: raise RuntimeError(f"the UDP echo process sent nothing back for {STALL_S:g} s") from None
      rtts.append(time.perf_counter() - t0)
    s.sendto(b"E", ("127.0.0.1", port))
  finally: _stop(peer, s)
  rtts.sort()
  return rtts[len(rtts) // 2] / 2 * 1e6, rtts[len(rtts) * 99 // 100] / 2 * 1e6


class Relay:
  """A socket's datagrams received by a thread of their own and handed to the caller of get() through an eventfd."""
  def __init__(self, s: socket.socket):
    self.s, self.ev, self.got = s, os.eventfd(0, os.EFD_NONBLOCK), []
    threading.Thread(target=self._receive, daemon=True).start()

  def _receive(self) -> None:
    while True:
      try: d = self.s.recv(65536)
      except OSError: return                     # (closed, or nothing for STALL_S: get() reports it)
      self.got.append(d)
      os.eventfd_write(self.ev, 1)
      if d == b"E": return

  def get(self) -> bytes:
    while not self.got:
      if not select.select([self.ev], [], [], STALL_S)[0]: raise RuntimeError(f"no datagram for {STALL_S:g} s")
      try: os.eventfd_read(self.ev)
      except BlockingIOError: pass
    return self.got.pop(0)


def _relay_peer() -> None:
  s = _socket()
  s.bind(("127.0.0.1", 0))
  s.settimeout(STALL_S)
  print(s.getsockname()[1], flush=True)
  back, r = int(sys.stdin.readline()), Relay(s)
  while (d := r.get()) != b"E": s.sendto(d, ("127.0.0.1", back))


def udp_relay_pingpong(size: int, iters: int = 2000) -> tuple[float, float]:
  """(p50, p99) one-way latency in microseconds of one datagram of `size` bytes (at most MTU) relayed at both ends."""
  if size > MTU: raise ValueError(f"the relay ping-pong sends one datagram: {size} bytes is over {MTU}")
  p = subprocess.Popen([sys.executable, __file__, "--relay-peer"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  s = _socket()
  try:
    if not select.select([p.stdout], [], [], STALL_S)[0]: raise RuntimeError(f"the UDP relay process did not start within {STALL_S:g} s")
    port = int(p.stdout.readline())
    s.bind(("127.0.0.1", 0))
    s.settimeout(STALL_S)
    p.stdin.write(f"{s.getsockname()[1]}\n")
    p.stdin.flush()
    r, msg, rtts = Relay(s), os.urandom(size + HEADERS), []
    for _ in range(iters):
      t0 = time.perf_counter()
      s.sendto(msg, ("127.0.0.1", port))
      r.get()
      rtts.append(time.perf_counter() - t0)
    s.sendto(b"E", ("127.0.0.1", port))
  finally: _stop(p, s)
  rtts.sort()
  return rtts[len(rtts) // 2] / 2 * 1e6, rtts[len(rtts) * 99 // 100] / 2 * 1e6


def main() -> None:
  for size in [int(a) for a in sys.argv[1:]] or SIZES:
    mbps, loss = udp_throughput(size)
    emit("udp/throughput_mbps", mbps, "MB/s", size=size, loss=round(loss, 4))
    p50, p99 = udp_pingpong(size)
    emit("udp/pingpong_us", p50, "us", size=size, p99=round(p99, 1))
    if size <= MTU:
      p50, p99 = udp_relay_pingpong(size)
      emit("udp/relay_pingpong_us", p50, "us", size=size, p99=round(p99, 1))


if __name__ == "__main__":
  _relay_peer() if sys.argv[1:] == ["--relay-peer"] else main()
