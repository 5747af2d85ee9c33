"""The NIC models' bulk datapath in C (fastpath.c, built once with the host C compiler and cached: emu/cc.py):
the full-MTU MIDDLE packets of long messages, which are nearly all the packets of a large transfer. The Python transport
(rc.py, port.py, roce.py) stays the reference and handles every other packet; without a C compiler it handles all.

- Transmit (`send_run`, used by WirePort.send_many): a roce.FrameRun, n consecutive MIDDLE packets of one message, is
  built (the flow's lower headers, the BTH with each PSN and AckReq, the ICRC) and sent with sendmmsg. WirePort sends
  frame by frame instead while taps are installed or faults are planned, so both see every datagram.
- Receive (`Receiver`): datagrams come in batches (recvmmsg). The port (RoCEPort) arms a `Flow` for a responder QP
  whose RDMA WRITE the Python transport is in the middle of, from a MIDDLE packet it has just executed: the flow keeps
  that frame's Ethernet/IP/UDP bytes, the source endpoint, the QP's P_Key, QPN, path MTU and expected PSN, and the host
  memory the rest of the WRITE goes to. C takes a datagram for a flow only if it is a MIDDLE packet with exactly those
  header bytes (so the same MACs, GIDs, UDP port and lengths, and a valid IPv4 checksum) from that endpoint (while the
  GID table's answer is fresh), BTH flags 0 but SE/MigReq, that P_Key, QPN and PSN, a correct ICRC, more than one MTU of
  the WRITE left, and the memory's DMA mappings unchanged (Region.generation); it then copies the payload, advances the
  PSN, and stops after a packet with AckReq so that Python sends the ACK after the write. Anything else stops it: the
  port hands that datagram to the Python path, which checks, executes or drops it as always. Before each batch the port
  disarms flows whose QP, key, MAC filter or GIDs changed; C runs under the NIC model's lock, like the Python path.
  SEND and READ responses, and WRITEs into regions over MAX_MAP bytes, stay on the Python path.
"""
from __future__ import annotations
import ctypes.util, os, socket, weakref
from functools import cache

import numpy as np

from cffi import FFI

from emu.pci import DMAFault

BATCH, SLOT, FLOWS = 32, 65536, 16       # as fastpath.c; flows a port can have armed at once
MAX_MAP = 256 << 20                      # the largest region a HostMap covers
CDEF = """
typedef struct { uint8_t head[64]; uint32_t head_len, lower_crc; uint8_t bth[12]; uint32_t mtu; } tx_t;
typedef struct { uint8_t *buf; uint32_t len[32]; uint8_t addr[32][16]; uint32_t flags[32]; } batch_t;
typedef struct {
  uint8_t head[64]; uint32_t head_len, lower_crc, frame_len; uint32_t src_ip, src_port; int64_t until_ns;
  uint32_t qpn, pkey, mtu; uint32_t epsn; uint64_t left; uint64_t off; const uint64_t *piece, *piece_len; int npieces;
  const uint64_t *generation; uint64_t gen; int armed; uint32_t done; int ack; uint32_t ack_psn;
} flow_t;
void crc_init(void);
void crc_use(void *zlib_crc32);
unsigned long crc32(unsigned long crc, const unsigned char *buf, unsigned int len);
uint32_t crc32_update(uint32_t crc, const uint8_t *p, uint64_t n);
int tx_run(int fd, const void *dst, const tx_t *t, uint32_t psn0, int n, int k0, int ack_every, const uint64_t *piece,
           const uint64_t *piece_len, int npieces);
int rx_batch(int fd, batch_t *b);
int rx_take(const batch_t *b, int i, int n, flow_t *flows, int nflows);
"""
ffi = FFI()
ffi.cdef(CDEF)


@cache
def lib():
  """The compiled datapath, or None without a host C compiler (the Python path then does everything)."""
  from emu import cc
  try: path = cc.build(open(os.path.join(os.path.dirname(__file__), "fastpath.c")).read(), "fastpath", "-O3", where="nic")
  except cc.CompilerMissing: return None
  lib = ffi.dlopen(path)
  lib.crc_init()
  try: lib.crc_use(ffi.cast("void *", ffi.addressof(ffi.dlopen(ctypes.util.find_library("z") or "libz.so.1"), "crc32")))
  except OSError: pass                                   # no zlib to load: the table
  return lib


def sockaddr(endpoint: tuple[str, int]):
  """A struct sockaddr_in for (host, port)."""
  a = ffi.new("uint8_t[16]")
  a[0:8] = socket.AF_INET.to_bytes(2, "little") + endpoint[1].to_bytes(2, "big") + socket.inet_aton(endpoint[0])
  return a


class HostMap:
  """Where a region's bytes are in host memory: each view `chunks` gives for the whole region, its offset, host address
  and length. The views keep that memory where it is (what they view cannot be resized or freed while they live); the
  map is used only while the region's mapping generation is the one it was built at. No buffer export is held
  (memoryviews with exports in reference cycles cannot be collected)."""
  def __init__(self, region):
    self.gen = int(region.generation[0])
    self.views = region.chunks(region.va, region.length)       # DMAFault if some of it is not mapped
    addrs = []
    for v in self.views:
      b = ffi.from_buffer("uint8_t[]", v, require_writable=True)
      addrs.append(int(ffi.cast("uintptr_t", b)))
      ffi.release(b)
    self.lens = np.array([len(v) for v in self.views], np.uint64)
    self.starts = np.concatenate(([0], np.cumsum(self.lens)[:-1])).astype(np.uint64)
    self.addrs = np.array(addrs, np.uint64)

  def spans(self, off: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(addresses, lengths) of the pieces of [off, off + n) of the region."""
    i, j = int(np.searchsorted(self.starts, off, "right")) - 1, int(np.searchsorted(self.starts, off + n, "left"))
    addrs, lens = self.addrs[i:j].copy(), self.lens[i:j].copy()
    cut = off - int(self.starts[i])
    addrs[0] += np.uint64(cut)
    lens[0] -= np.uint64(cut)
    lens[-1] -= np.uint64(int(self.starts[j - 1]) + int(self.lens[j - 1]) - (off + n))
    return addrs, lens


_maps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def host_map(region) -> HostMap | None:
  """The region's HostMap for its current mappings (None for a region without a mapping generation, or one so large
  that mapping all of it would cost more than it saves: its views are then taken for each run)."""
  if region.generation is None or region.length > MAX_MAP: return None
  m = _maps.get(region)
  if m is None or m.gen != int(region.generation[0]): m = _maps[region] = HostMap(region)
  return m


def spans(source, off: int, n: int) -> tuple[np.ndarray, np.ndarray, list]:
  """(addresses, lengths, what keeps them) of [off, off + n) of `source`, an rc.Buffer; DMAFault if it is not mapped."""
  addrs, lens, keep = [], [], []
  for region, va, k in source.pieces(off, n):
    if (m := host_map(region)) is not None:
      a, l = m.spans(va - region.va, k)
      keep.append(m)
    else:                                                      # (inline WQE data, a model without generations)
      views = region.chunks(va, k)
      a, l = np.array([_address(v) for v in views], np.uint64), np.array([len(v) for v in views], np.uint64)
      keep.append(views)
    addrs.append(a)
    lens.append(l)
  return np.concatenate(addrs), np.concatenate(lens), keep


def _address(view: memoryview) -> int:
  b = ffi.from_buffer("uint8_t[]", view)
  try: return int(ffi.cast("uintptr_t", b))
  finally: ffi.release(b)


def send_run(fd: int, endpoint: tuple[str, int], head: bytes, lower_crc: int, bth: bytes, mtu: int, psn: int, n: int, k0: int,
             ack_every: int, payload: tuple) -> int:
  """Send n MIDDLE packets (PSNs from `psn`; AckReq where (k0 + j + 1) % ack_every == 0) whose payload `payload` (from
  `spans`) holds back to back: -> how many went out (fewer when it is too scattered for one datagram's buffers, or on a
  send error after the first), or -errno."""
  t = ffi.new("tx_t *")
  t.head[0:len(head)] = head
  t.head_len, t.lower_crc, t.mtu = len(head), lower_crc, mtu
  t.bth[0:8] = bth
  addrs, lens, _ = payload
  return lib().tx_run(fd, sockaddr(endpoint), t, psn, n, k0, ack_every, ffi.cast("uint64_t *", addrs.ctypes.data),
                      ffi.cast("uint64_t *", lens.ctypes.data), len(addrs))


class Flow:
  """A responder QP's RDMA WRITE handed to C: the QP, what the port checked for it, the memory, and the C state (`c`)."""
  def __init__(self, c, qp, p, region, va: int, keep: tuple):
    self.c, self.qp, self.path, self.dst_mac, self.dgid = c, qp, qp.a.path, p.dst_mac, p.dgid
    self.region, self.va, self.keep = region, va, keep


class Receiver:
  """A port's receive batches and armed flows."""
  def __init__(self):
    self.lib = lib()
    self.batch = ffi.new("batch_t *")
    self.buf = bytearray(BATCH * SLOT)                    # (a bytearray holds no references: its export is harmless)
    self._buf = self.batch.buf = ffi.from_buffer("uint8_t[]", self.buf)
    self.mem = memoryview(self.buf)
    self.cflows = ffi.new(f"flow_t[{FLOWS}]")
    self.flows: list[Flow | None] = [None] * FLOWS
    self.count = 0                                       # flows armed
    self.taken = 0                                       # packets C has written (statistics, tests)

  def recv(self, fd: int) -> int:
    """Up to BATCH datagrams: how many (0: none waiting; -errno on an error)."""
    return self.lib.rx_batch(fd, self.batch)

  def datagram(self, i: int) -> tuple[memoryview, tuple[str, int]]:
    a = bytes(self.batch.addr[i][0:8])
    return self.mem[i * SLOT:i * SLOT + self.batch.len[i]], (socket.inet_ntoa(a[4:8]), int.from_bytes(a[2:4], "big"))

  def truncated(self, i: int) -> bool: return bool(self.batch.flags[i] & socket.MSG_TRUNC)

  def take(self, i: int, n: int) -> int:
    return self.lib.rx_take(self.batch, i, n, self.cflows, FLOWS)

  def arm(self, qp, p, frame: memoryview, head_len: int, lower_crc: int, src: tuple[str, int], until: float) -> None:
    """Hand the rest of qp's WRITE (qp.wctx) to C: its next MIDDLE packets look like `frame` (packet `p`, which the
    Python path has just executed: its first `head_len` bytes, their ICRC part `lower_crc`), from `src` until `until`."""
    slot = next((i for i, f in enumerate(self.flows) if f is None), None)
    if slot is None: return                              # every slot busy: this WRITE stays on the Python path
    region, va, left = qp.wctx
    try: m = host_map(region)
    except DMAFault: return                              # (the Python path faults where it must)
    if m is None: return                                 # too large a region to map: the Python path writes it
    addrs, lens = m.spans(va - region.va, left)
    c = self.cflows[slot]
    c.head[0:head_len] = bytes(frame[:head_len])
    c.head_len, c.lower_crc, c.frame_len = head_len, lower_crc, len(frame)
    c.src_ip = int.from_bytes(socket.inet_aton(src[0]), "little")
    c.src_port = int.from_bytes(src[1].to_bytes(2, "big"), "little")
    c.until_ns = int(until * 1e9)
    c.qpn, c.pkey, c.mtu, c.epsn = qp.qpn, qp.a.pkey, qp.a.mtu, qp.epsn
    c.left, c.off, c.npieces = left, 0, len(addrs)
    c.piece, c.piece_len = ffi.cast("uint64_t *", addrs.ctypes.data), ffi.cast("uint64_t *", lens.ctypes.data)
    c.generation, c.gen = ffi.cast("uint64_t *", region.generation.ctypes.data), int(region.generation[0])
    c.done, c.ack, c.armed = 0, 0, 1
    self.flows[slot] = Flow(c, qp, p, region, va, (addrs, lens, _maps[region], region.generation))
    self.count += 1

  def disarm(self, qp) -> None:
    for i, f in enumerate(self.flows):
      if f is not None and f.qp is qp: self._free(i)

  def _free(self, i: int) -> None:
    self.cflows[i].armed = 0
    self.flows[i] = None
    self.count -= 1

  def armed(self) -> list[tuple[int, Flow]]: return [(i, f) for i, f in enumerate(self.flows) if f is not None]
