"""The NIC models' bulk datapath in C (fastpath.c, built once with the host C compiler and cached: emu/cc.py):
the full-MTU MIDDLE packets of long messages, which are nearly all the packets of a large transfer, and the single-packet
RDMA WRITEs of a latency-bound stream (posted and sent, received, written and ACKed in C) and the ACKs they get. The Python transport
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
- Single-packet WRITEs (`Receiver.arm_only`): after the Python path executed an RDMA WRITE ONLY (or ONLY with
  immediate) at a responder QP between messages, a flow of kind 1 takes that QP's next ones: the same header bytes,
  source endpoint, opcode, BTH flags, P_Key, QPN, the expected PSN, the same R_Key and DMA length (so the same frame
  length) with the address anywhere the region's bounds allow, a correct ICRC, the memory's mappings unchanged; a WRITE
  with immediate also needs a receive WR the QP holds ahead of any that fails (rc.QP.usable_recvs: the Python path
  fails that one), and, where the NIC model reads receive WQEs only when a packet needs one (rc.QP.receive_watch), the
  doorbell record they were read at unchanged. C writes the payload, moves the PSN and MSN and sends the ACK (roce.ack_template filled in) to where
  the Python path sends them; the port then
  completes the receive WRs in order (Host.received, after the ACK as rc.py does).
  Where the NIC model gives a completion recipe (rc.Host.completion_recipe -> `Recipe`: the QP's receive CQ as a
  `CQRing`, its CQE with the wr_id and immediate positions), C writes that completion too, after the ACK: the CQE at the
  ring's producer, the body first and the byte with the pass's phase bit last, and the port then only moves the model's
  producer on (`CQRing.sync`) and takes the receive WRs off the QP. The port gives C the CQ's producer, consumer and
  arm state and the receive WRs' wr_ids before each call (`Receiver.refresh`) and syncs right after it, all under the
  NIC model's lock, so every CQE the model writes itself (requester completions, errors, flushes, the packets the Python
  path handles) comes after the ones C wrote, in the order the packets came. An armed CQ's CQE is followed by its
  notification (one per arm: the recipe's entry with the CQ's advanced arm toggle, into the NQ / EQ ring the recipe
  names, the CQ disarmed), and the model raises the interrupt it calls for when it syncs. C leaves the packet to the
  Python path when the CQ is full against the consumer (the model reports the overflow), an armed CQ's notification
  ring is full or missing, or a mapping changed, and stops (`batch.resync`) before writing a CQE after an ACK it took
  in the same call (the model writes the requester completions that ACK brings first). It is disarmed before a batch once
  the QP leaves RTR/RTS, starts a message, loses remote write access, its PSN/MSN, P_Key, MTU, path or key change, or
  the port's filters, GIDs or PHY loopback change, or taps or planned faults appear on the wire (which must see every
  datagram), and on any request packet the Python path handles for the QP.
- ACKs (`Receiver.arm_ack`): after the Python path handled a plain ACK (syndrome ACK, no credit count) at a requester
  QP in RTS, a flow of kind 2 takes that QP's next ones with the same header bytes, source, BTH flags, P_Key, QPN and
  syndrome and a correct ICRC, and the port hands their PSNs to the transport (rc.QP._acked, which ignores a stale one),
  so that the WRs they cover complete as before; a NAK, an RNR NAK or any other ACK goes to the Python path. The
  port follows the packets C took in their order (`batch.by`), whichever flows took them.
- Single-packet WRITEs sent (emu/nic/txflow.py, which says when): after the Python path posted and sent WRITE ONLY
  (with immediate) packets of one WQE shape from a requester QP, the NIC model arms a transmit flow, and C takes that
  QP's next SQ doorbells' WQEs of that shape: it reads them from the SQ's pages in host memory, makes the checks the model's WQE decoder makes,
  builds each frame from the flow's header template (PSN, AckReq, RETH, ImmDt, payload, ICRC) and sends it; Python then
  does the transport's bookkeeping (the SendWRs, PSNs, the ACK timer). The first WQE that is another shape or fails a
  check, and those after it, go to the Python path.
  SEND and READ responses, and WRITEs into regions over MAX_MAP bytes stay on the Python path.
  HCQ_NIC_FASTPATH=0 turns the C datapath off (the Python path then does everything, as without a C compiler).
"""
from __future__ import annotations
import ctypes.util, itertools, os, socket, struct, weakref
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable

import numpy as np

from cffi import FFI

from emu.pci import DMAFault

BATCH, SLOT, FLOWS = 32, 65536, 16       # as fastpath.c; flows a port can have armed at once
MAX_MAP = 256 << 20                      # the largest region a HostMap covers
ENV = "HCQ_NIC_FASTPATH"                 # "0": no C datapath (to compare with the Python path)
CDEF = """
typedef struct { uint8_t head[64]; uint32_t head_len, lower_crc; uint8_t bth[12]; uint32_t mtu; } tx_t;
typedef struct { uint8_t *buf; uint32_t len[32]; uint8_t addr[32][16]; uint32_t flags[32]; uint8_t by[32]; int resync; } batch_t;
typedef struct cq_s {
  const uint64_t *entry; uint32_t depth, size; uint32_t phase_at, phase_bit, phase_even; uint64_t index_mask;
  const uint8_t *cons_be; const uint64_t *generation; uint64_t gen; struct cq_s *note; uint8_t note_entry[64];
  uint32_t toggle_at, toggle_shift, toggle_mask; uint64_t prod, cons; uint32_t armed, toggle, wrote, notified;
} cq_t;
typedef struct {
  uint8_t head[64]; uint32_t head_len, lower_crc, frame_len; uint32_t src_ip, src_port; int64_t until_ns;
  uint32_t qpn, pkey, mtu; uint32_t epsn; uint64_t left; uint64_t off; const uint64_t *piece, *piece_len; int npieces;
  const uint64_t *generation; uint64_t gen; int armed; uint32_t done; int ack; uint32_t ack_psn;
  int kind; uint32_t op, bth1; uint32_t rkey, dma_len; uint64_t region_va, region_len; uint32_t recvs; uint32_t msn;
  uint32_t got[32]; uint8_t ack_frame[80]; uint32_t ack_head_len, ack_len, ack_lower_crc; uint8_t ack_to[16]; int fd;
  uint32_t acks; int ack_err; const uint8_t *watch; uint32_t watch_len; uint8_t watch_seen[8]; uint32_t syndrome;
  cq_t *cq; uint8_t cqe[64]; uint32_t wr_id_at, wr_id_len, imm_at, big_endian; uint32_t wr_ids[32]; uint32_t used;
} flow_t;
void crc_init(void);
void crc_use(void *zlib_crc32);
unsigned long crc32(unsigned long crc, const unsigned char *buf, unsigned int len);
uint32_t crc32_update(uint32_t crc, const uint8_t *p, uint64_t n);
int tx_run(int fd, const void *dst, const tx_t *t, uint32_t psn0, int n, int k0, int ack_every, const uint64_t *piece,
           const uint64_t *piece_len, int npieces);
int rx_batch(int fd, batch_t *b);
int rx_take(batch_t *b, int i, int n, flow_t *flows, int nflows);
uint64_t flow_size(void);
uint64_t cq_size(void);
"""
ffi = FFI()
ffi.cdef(CDEF)


@cache
def lib():
  """The compiled datapath, or None without a host C compiler or with HCQ_NIC_FASTPATH=0 (the Python path then does
  everything)."""
  if (lib := load("nic/fastpath.c", "fastpath")) is not None and \
     (lib.flow_size() != ffi.sizeof("flow_t") or lib.cq_size() != ffi.sizeof("cq_t")):
    raise RuntimeError("emu/nic/fastpath.py's CDEF flow_t or cq_t is not fastpath.c's")
  return lib


def load(source: str, tag: str) -> Any:
  """The C file `source` (a path under emu/; it includes emu/nic/frame.h) built and loaded with its CRC-32 set up, or
  None without a host C compiler or with HCQ_NIC_FASTPATH=0."""
  if os.environ.get(ENV) == "0": return None
  from emu import cc
  with open(os.path.join(cc.EMU_DIR, source)) as f: text = cc.inline_includes(f.read())
  try: path = cc.build(text, tag, "-O3", where="nic")
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


_STATE = struct.Struct("=QQIIII")


class CQRing:
  """A NIC model's completion queue as C writes receive completions into it, or the ring (NQ, EQ) its notifications go
  to (the model builds one for each and keeps it while `current()`: the DMA mappings are the ones it was built at).
  `depth` entries of `size` bytes lie back to back in `pages` (bus addresses of `page_size`-byte pages of `dma`); the
  phase bit (valid / owner) is `phase` = (byte, bit mask, its value during even passes over the ring); the ring is full
  when (producer - consumer) & index_mask >= depth. `state()` gives (producer, consumer, armed, arm toggle) as the model
  holds them; `consumer`, if given, is the bus address of the big-endian word the consumer is read from at each entry
  instead (the driver's doorbell record). A CQ's `produced(n, notes)`: C wrote n more CQEs and `notes` notifications
  (each disarms the CQ and advances its toggle; the model raises the interrupt they call for). `notify` = (the ring,
  the notification entry, (byte, shift, mask) of the toggle field in it) where an armed CQ's notification goes (None:
  the model writes those). DMAFault if some of it is not host memory."""
  def __init__(self, dma, pages: list[int], page_size: int, depth: int, size: int, phase: tuple[int, int, int],
               index_mask: int, state: Callable[[], tuple[int, int, bool, int]], produced: Callable[[int, int], None] | None,
               consumer: int | None = None, notify: tuple[CQRing, bytes, tuple[int, int, int]] | None = None):
    self.generation, self.gen, self.state, self.produced = dma.generation, int(dma.generation[0]), state, produced
    nbytes = depth * size
    self.views = [dma.view(a, min(page_size, nbytes - k * page_size)) for k, a in enumerate(pages) if k * page_size < nbytes]
    self.entry = np.concatenate([np.uint64(_address(v)) + np.arange(0, len(v), size, dtype=np.uint64) for v in self.views])
    c = self.c = ffi.new("cq_t *")
    c.entry, c.depth, c.size = ffi.cast("uint64_t *", self.entry.ctypes.data), depth, size
    (c.phase_at, c.phase_bit, c.phase_even), c.index_mask = phase, index_mask
    if consumer is not None:                             # (the view keeps that memory where it is)
      self.views.append(view := dma.view(consumer, 4))
      c.cons_be = ffi.cast("uint8_t *", _address(view))
    c.generation, c.gen = ffi.cast("uint64_t *", self.generation.ctypes.data), self.gen
    self._state = ffi.buffer(ffi.addressof(c, "prod"), _STATE.size)     # (prod, cons, armed, toggle, wrote, notified)
    self.notify = None if notify is None else notify[0]
    if notify is not None:
      ring, entry, (c.toggle_at, c.toggle_shift, c.toggle_mask) = notify
      c.note, c.note_entry[0:len(entry)] = ring.c, entry

  def current(self) -> bool: return int(self.generation[0]) == self.gen and (self.notify is None or self.notify.current())

  def refresh(self) -> None:
    """Before C takes: the producer, consumer, arm state and toggle the model holds now (an armed CQ's notification
    ring's too)."""
    state = self.state()
    _STATE.pack_into(self._state, 0, *state, 0, 0)
    if self.notify is not None and state[2]: self.notify.refresh()   # (C writes there only for an armed CQ)

  def sync(self) -> int:
    """After C took: the CQEs and notifications it wrote to the model; -> how many CQEs."""
    c = self.c
    if (n := c.wrote) or c.notified:
      notes, c.wrote, c.notified = c.notified, 0, 0
      self.produced(n, notes)
    return n


@dataclass
class Recipe:
  """How C writes a QP's receive completion of a WRITE with immediate (rc.Host.completion_recipe): into `ring`, the
  QP's receive CQ, `cqe` (a successful one with wr_id and imm 0) with the receive WR's wr_id field (`wr_id(wr)`,
  `wr_id_len` bytes) at `wr_id_at` and the immediate (4 bytes) at `imm_at`, big- or little-endian."""
  ring: CQRing
  cqe: bytes
  wr_id_at: int
  wr_id_len: int
  imm_at: int
  big_endian: bool
  wr_id: Callable[[Any], int]


class Flow:
  """A QP's packets handed to C (a WRITE's MIDDLE packets, its single-packet WRITEs, the ACKs it gets as requester): the
  QP, what the port checked for it, the memory, the receive completions C writes (`recipe`), and the C state (`c`)."""
  def __init__(self, c, qp, p, region, va: int, keep: tuple, recipe: Recipe | None = None):
    self.c, self.qp, self.path, self.dst_mac, self.dgid = c, qp, qp.a.path, p.dst_mac, p.dgid
    self.region, self.va, self.keep, self.recipe = region, va, keep, recipe
    self.kind, self.op, self.pkey, self.mtu, self.rkey = c.kind, c.op, c.pkey, c.mtu, c.rkey   # (what C never changes)
    self.wrs: list = []                  # the receive WRs whose wr_id fields c.wr_ids holds (the QP's first ones)


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
    self._armed: list[tuple[int, Flow]] = []            # (slot, flow) of those armed, in slot order
    self.count = 0                                       # flows armed
    self.taken = 0                                       # packets C has written (statistics, tests)
    self.cqes = 0                                        # receive completions C has written (statistics, tests)

  def recv(self, fd: int) -> int:
    """Up to BATCH datagrams: how many (0: none waiting; -errno on an error)."""
    return self.lib.rx_batch(fd, self.batch)

  def datagram(self, i: int) -> tuple[memoryview, tuple[str, int]]:
    a = bytes(self.batch.addr[i][0:8])
    return self.mem[i * SLOT:i * SLOT + self.batch.len[i]], (socket.inet_ntoa(a[4:8]), int.from_bytes(a[2:4], "big"))

  def truncated(self, i: int) -> bool: return bool(self.batch.flags[i] & socket.MSG_TRUNC)

  def take(self, i: int, n: int) -> int:
    """Let C take datagrams i, i + 1, ... (`batch.by` says which flow took each): -> the first it did not take (with
    `batch.resync` set: one it takes once the port has synced the others)."""
    return self.lib.rx_take(self.batch, i, n, self.cflows, FLOWS)

  def refresh(self, f: Flow, usable: int) -> None:
    """Before C takes for single-packet flow `f`: the receive WRs its WRITEs with immediate may consume (`usable`, the
    first of the QP's), and where C writes their completions, the CQ's state and those WRs' wr_ids."""
    c, r = f.c, f.recipe
    if r is None:
      c.recvs = usable
      return
    recvs, wrs, n = f.qp.recvs, f.wrs, min(usable, BATCH)
    if u := c.used:                                      # (the port has taken them from the QP since)
      del wrs[:u]
      ffi.memmove(c.wr_ids, c.wr_ids + u, 4 * len(wrs))
      c.used = 0
    if wrs and (not recvs or wrs[0] is not recvs[0]): del wrs[:]   # (not the QP's first receive WRs: read them again)
    if n > len(wrs):
      new = list(itertools.islice(recvs, len(wrs), n))
      c.wr_ids[len(wrs):n] = [r.wr_id(wr) for wr in new]
      wrs += new
    else: del wrs[n:]
    c.recvs = n
    r.ring.refresh()

  def arm(self, qp, p, frame: memoryview, head_len: int, lower_crc: int, src: tuple[str, int], until: float) -> None:
    """Hand the rest of qp's WRITE (qp.wctx) to C: its next MIDDLE packets look like `frame` (packet `p`, which the
    Python path has just executed: its first `head_len` bytes, their ICRC part `lower_crc`), from `src` until `until`."""
    region, va, left = qp.wctx
    if (got := self._flow(qp, region, va - region.va, left, frame, head_len, lower_crc, src, until)) is None: return
    slot, c, keep = got
    c.left, c.kind = left, 0
    self._set(slot, Flow(c, qp, p, region, va, keep))

  def arm_only(self, qp, p, frame: memoryview, head_len: int, lower_crc: int, src: tuple[str, int], until: float, region,
               ack: tuple[bytes, int, int], ack_to: tuple[str, int], fd: int, watch: tuple[memoryview, bytes] | None,
               recipe: Recipe | None = None) -> None:
    """Hand qp's next single-packet WRITEs to C: they look like `frame` (packet `p`, a WRITE ONLY or ONLY with immediate
    the Python path has just executed into `region`), from `src` until `until`; C sends their ACKs (`ack`:
    roce.ack_template) to `ack_to` on socket `fd`. A WRITE with immediate consumes one of the receive WRs the QP holds
    before any that fails, and only while the bytes `watch` names still read as they did (the receive queue's doorbell
    record of a NIC that reads its receive WQEs when a packet needs one); C writes its completion as `recipe` says (else
    the port has the model write it)."""
    if (got := self._flow(qp, region, 0, region.length, frame, head_len, lower_crc, src, until)) is None: return
    slot, c, keep = got
    c.kind, c.op, c.bth1, c.rkey, c.dma_len = 1, p.opcode, frame[head_len + 1], p.rkey, p.dma_len
    c.region_va, c.region_len, c.recvs, c.msn = region.va, region.length, qp.usable_recvs(), qp.msn
    body, c.ack_head_len, c.ack_lower_crc = ack
    c.ack_frame[0:len(body)], c.ack_len = body, len(body)
    c.ack_to[0:16] = bytes(sockaddr(ack_to))
    c.fd, c.acks, c.ack_err = fd, 0, 0
    if watch is not None:
      view, seen = watch                                 # (the view keeps the memory where it is; no export is held)
      c.watch, c.watch_len = ffi.cast("uint8_t *", _address(view)), len(seen)
      c.watch_seen[0:len(seen)] = seen
      keep = (*keep, view)
    else: c.watch_len = 0
    if recipe is not None:
      c.cq, c.cqe[0:len(recipe.cqe)] = recipe.ring.c, recipe.cqe
      c.wr_id_at, c.wr_id_len, c.imm_at, c.big_endian = recipe.wr_id_at, recipe.wr_id_len, recipe.imm_at, recipe.big_endian
    self._set(slot, Flow(c, qp, p, region, region.va, keep, recipe))

  def arm_ack(self, qp, p, frame: memoryview, head_len: int, lower_crc: int, src: tuple[str, int], until: float) -> None:
    """Hand the ACKs requester qp gets to C: they look like `frame` (packet `p`, an ACK the Python path has just
    handled: the same headers, BTH flags and AETH syndrome), from `src` until `until`; the port acknowledges their PSNs."""
    if (got := self._flow(qp, None, 0, 0, frame, head_len, lower_crc, src, until)) is None: return
    slot, c, keep = got
    c.kind, c.op, c.bth1, c.syndrome = 2, p.opcode, frame[head_len + 1], p.syndrome
    self._set(slot, Flow(c, qp, p, None, 0, keep))

  def _flow(self, qp, region, off: int, n: int, frame: memoryview, head_len: int, lower_crc: int, src: tuple[str, int],
            until: float):
    """A free slot's C flow with what every kind shares filled in, writing to [off, off + n) of `region` (None: no
    memory): (slot, the C flow, what keeps its memory), or None (every slot busy, or a region C cannot write: the Python
    path does it)."""
    slot = next((i for i, f in enumerate(self.flows) if f is None), None)
    if slot is None: return None
    if region is None: addrs, lens, m, generation = np.zeros(0, np.uint64), np.zeros(0, np.uint64), None, np.zeros(1, np.uint64)
    else:
      try: m = host_map(region)
      except DMAFault: return None                       # (the Python path faults where it must)
      if m is None: return None                          # too large a region to map: the Python path writes it
      (addrs, lens), generation = m.spans(off, n), region.generation
    c = self.cflows[slot]
    c.head[0:head_len] = bytes(frame[:head_len])
    c.head_len, c.lower_crc, c.frame_len = head_len, lower_crc, len(frame)
    c.src_ip = int.from_bytes(socket.inet_aton(src[0]), "little")
    c.src_port = int.from_bytes(src[1].to_bytes(2, "big"), "little")
    c.until_ns = int(until * 1e9)
    c.qpn, c.pkey, c.mtu, c.epsn = qp.qpn, qp.a.pkey, qp.a.mtu, qp.epsn
    c.off, c.npieces = 0, len(addrs)
    c.piece, c.piece_len = ffi.cast("uint64_t *", addrs.ctypes.data), ffi.cast("uint64_t *", lens.ctypes.data)
    c.generation, c.gen = ffi.cast("uint64_t *", generation.ctypes.data), int(generation[0])
    c.done, c.ack, c.armed, c.cq, c.used = 0, 0, 1, ffi.NULL, 0
    self.count += 1
    return slot, c, (addrs, lens, m, generation)

  def disarm(self, qp, keep: int | None = None) -> None:
    """Disarm qp's flows (but one of kind `keep`)."""
    for i, f in enumerate(self.flows):
      if f is not None and f.qp is qp and f.c.kind != keep: self.free(i)

  def free(self, i: int) -> None:
    self.cflows[i].armed = 0
    self._set(i, None)
    self.count -= 1

  def _set(self, i: int, f: Flow | None) -> None:
    self.flows[i] = f
    self._armed = [(k, g) for k, g in enumerate(self.flows) if g is not None]   # (a new list: callers may free meanwhile)

  def armed(self) -> list[tuple[int, Flow]]: return self._armed
