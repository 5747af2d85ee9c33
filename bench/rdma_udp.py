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
"""
import json, os, socket, subprocess, sys, time
from common import emit

MTU, HEADERS = 4096, 58           # a MIDDLE packet's frame: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4, then the payload
BUF = 4 << 20                     # both ends' socket buffers, as the model's ports set them
WINDOW = 64                       # datagrams in flight in the ping-pong (the model's requester window is 64 packets)
SIZES = (8, 4096, 65536, 4 << 20)

PEER = r"""
import json, socket, sys, time
mode, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF): s.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
buf = bytearray(65536)
if mode == "sink":
  got = count = 0
  first = last = None
  s.settimeout(10)
  while True:
    k, addr = s.recvfrom_into(buf)
    if k == 1: break
    last = time.perf_counter()
    first = first or last
    got, count = got + k, count + 1
  print(json.dumps(dict(bytes=got, datagrams=count, seconds=(last - first) if count > 1 else 0.0)), flush=True)
else:
  s.settimeout(10)
  while True:
    k, addr = s.recvfrom_into(buf)
    if k == 1: break
    s.sendto(buf[:k], addr)
"""


def _peer(mode: str, n: int) -> tuple[subprocess.Popen, int]:
  p = subprocess.Popen([sys.executable, "-c", PEER, mode, str(n)], stdout=subprocess.PIPE, text=True)
  return p, int(p.stdout.readline())


def _datagrams(size: int) -> list[bytes]:
  """A message of `size` bytes as the model frames it: path-MTU pieces, each with the frame headers."""
  pieces = [min(MTU, size - off) for off in range(0, max(size, 1), MTU)]
  return [os.urandom(n + HEADERS) for n in pieces]


def _socket() -> socket.socket:
  s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
  for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF): s.setsockopt(socket.SOL_SOCKET, opt, BUF)
  return s


def udp_throughput(size: int, datagrams: int = 40000) -> tuple[float, float]:
  """(MB/s of payload arriving, loss) for messages of `size` bytes sent back to back."""
  msg = _datagrams(size)
  iters = max(2, datagrams // len(msg))
  peer, port = _peer("sink", 0)
  s = _socket()
  try:
    for _ in range(iters):
      for d in msg: s.sendto(d, ("127.0.0.1", port))
    for _ in range(10):
      time.sleep(0.01)
      s.sendto(b"E", ("127.0.0.1", port))
    r = json.loads(peer.stdout.readline())
  finally:
    peer.kill()
    peer.wait()
    s.close()
  sent = iters * len(msg)
  payload = r["bytes"] - r["datagrams"] * HEADERS
  return (payload / r["seconds"] / 1e6 if r["seconds"] else 0.0), 1 - r["datagrams"] / sent


def udp_pingpong(size: int, iters: int = 2000) -> tuple[float, float]:
  """(p50, p99) one-way latency in microseconds: half the round trip of a `size`-byte message."""
  msg = _datagrams(size)
  iters = max(20, min(iters, 4000 // len(msg)))
  peer, port = _peer("echo", len(msg))
  s = _socket()
  s.settimeout(10)
  rtts = []
  try:
    for _ in range(iters):
      t0 = time.perf_counter()
      sent = 0
      for got in range(len(msg)):
        while sent < len(msg) and sent - got < WINDOW:
          s.sendto(msg[sent], ("127.0.0.1", port))
          sent += 1
        s.recv(65536)
      rtts.append(time.perf_counter() - t0)
    s.sendto(b"E", ("127.0.0.1", port))
  finally:
    peer.kill()
    peer.wait()
    s.close()
  rtts.sort()
  return rtts[len(rtts) // 2] / 2 * 1e6, rtts[len(rtts) * 99 // 100] / 2 * 1e6


def main() -> None:
  for size in [int(a) for a in sys.argv[1:]] or SIZES:
    mbps, loss = udp_throughput(size)
    emit("udp/throughput_mbps", mbps, "MB/s", size=size, loss=round(loss, 4))
    p50, p99 = udp_pingpong(size)
    emit("udp/pingpong_us", p50, "us", size=size, p99=round(p99, 1))


if __name__ == "__main__":
  main()
