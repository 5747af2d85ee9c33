"""Transmit flows: a requester QP's single-packet RDMA WRITEs (and WRITEs with immediate) posted and sent in C
(emu/nic/txflow.h, vendor-neutral, and each NIC model's decoder in a C file of its own: Decoder); the NIC model's
Python doorbell path (its WQE decoder, rc.py's post_send and _transmit, port.py, wire.py) stays the reference and
handles every other WQE.

- Arming (`again`, then `arm`): after the Python path posted two WQEs in a row of one shape (the NIC model's: type, flags but those
  that may vary, size, length, L_Key), the second of which went out as one RDMA WRITE ONLY (with immediate) packet: a
  WR of at most one path MTU, one SGE in a region with a mapping generation, no fence, no inline data, decoded without
  error, the QP in RTS with nothing else left to send (no retransmission, no RNR wait), PHY loopback off with the
  destination GID resolved to a peer's port, or on, and a wire with no taps, no planned faults and no datagram held
  back. (Two in a row: a QP whose WQEs keep changing shape is not armed for each.) The flow keeps that shape, the QP's
  path, P_Key, destination QPN and MTU, where the SQ's pages and the region's bytes are in host memory
  (fastpath.HostMap), the frame template (roce.request_template) and the endpoint with until when its resolution holds.
  A flow armed again with its memory unchanged is only reshaped.
- At each SQ doorbell (`usable`, then the NIC model's C decoder) C takes the WQEs from the consumer on while each has
  that shape and passes the checks the model's Python decoder makes (bnxt/txflow.c tx_bnxt, static WQE mode: wqe_type, flags,
  wqe_size, length = the SGE's size, the SGE inside the same MR, the MSN table entry; mlx5/txflow.c tx_mlx5: the doorbell record's
  producer and the doorbell naming the last WQE, opcode, wqe_index, qpn, opmod, ds, fm_ce_se, byte_count, the data
  segment inside the same MKey), with the DMA mappings unchanged, the window open and the resolution fresh: it builds
  the frame (PSN, AckReq, RETH, ImmDt, payload, ICRC) and sends it. Python then builds each rc.SendWR (the model's WQE
  context included) and does the transport's bookkeeping (rc.QP.posted_sent: PSNs, statistics, the ACK timer) and the
  wire's (its datagram count). The first WQE C may not take, and all after it in that doorbell, go to the Python path,
  which handles them as always (an error completion, a queued WR, ...).
- The flow is dropped at a doorbell once the QP left RTS, has something left to send or waits on an RNR NAK, its path,
  MTU, P_Key or destination QPN changed, PHY loopback changed, or taps or planned faults or a held datagram appeared on
  the wire (they must see every datagram), when the SGE's key names another MR, and after MISSES doorbells in a row
  whose first WQE C could not take.
HCQ_NIC_FASTPATH=0 (or no C compiler) turns it off with the rest of the C datapath.
"""
from __future__ import annotations
import struct
from typing import Any, Callable, Protocol

from emu.nic import fastpath, rc, roce
from emu.nic.fastpath import ffi
from emu.pci import DMAFault

ffi.cdef("""
typedef struct {
  const uint64_t *page; uint32_t page_size; uint32_t depth, stride; uint64_t msn_off; uint32_t msn_entries;
  uint64_t ring_off; const uint8_t *dbr; uint32_t qpn; const uint64_t *generation; uint64_t gen;
  uint32_t wqe_type, flags, vary, size, length, lkey; uint64_t mr_va, mr_len;
  const uint64_t *piece, *piece_start, *piece_len; int npieces; uint8_t head[72]; uint32_t head_len, head_crc, frame_len;
  int imm; uint8_t to[16]; int fd; int64_t until_ns; uint32_t window;
  uint32_t n; uint64_t pos; struct { uint64_t va, sge_va; uint32_t at, flags, imm, rkey; } sent[32]; uint8_t last[64];
  int all;
} txflow_t;
uint64_t txflow_size(void);
""")
MAX_PAYLOAD = 4096                       # the largest single packet C builds (txflow.h tx_only)
SENT = struct.Struct("<QQIIII")          # txflow_t.sent[i]: remote va, SGE va, ring index, flags, immediate, R_Key
MISSES = 2                               # doorbells in a row whose first WQE C cannot take before the flow is dropped
TEMPLATES = 64                           # frame templates a flow keeps (one per shape it had)


U64P = ffi.typeof("uint64_t *")


class Decoder:
  """A NIC model's transmit-flow decoder: its C file (`source`, a path under emu/ that includes emu/nic/txflow.h) and
  the declaration of its entry point (`cdef`), which walks the model's send ring and hands each WQE to tx_wqe. Built
  and loaded when a flow is first armed; None while the C datapath is off (fastpath.lib)."""
  def __init__(self, source: str, cdef: str):
    self.source, self._lib, self._loaded = source, None, False
    ffi.cdef(cdef)

  def lib(self) -> Any:
    if fastpath.lib() is None: return None
    if not self._loaded:
      lib = fastpath.load(self.source, self.source.removesuffix(".c").replace("/", "-"))
      if lib is not None and lib.txflow_size() != ffi.sizeof("txflow_t"):
        raise RuntimeError(f"emu/nic/txflow.py's txflow_t is not emu/nic/txflow.h's (built with {self.source})")
      self._lib, self._loaded = lib, True
    return self._lib


def _between(q: rc.QP) -> bool:
  """q is in RTS with everything posted to it sent and no RNR wait: between messages."""
  return q.a.state == "RTS" and q.tx_psn == q.next_psn and not q.rnr_wait


class TxFlow:
  """One requester QP's single-packet WRITEs in C: what was checked when it was armed, the C state (`c`) and what keeps
  the memory it reads where it is (the SQ's pages, the region's HostMap)."""
  def __init__(self, lib: Any, port, region: rc.Region, pages: list[int], keep: tuple):
    self.lib, self.port, self.wire, self.region, self.pages, self.keep = lib, port, port.wire, region, pages, keep
    self.c = ffi.new("txflow_t *")
    self.out = memoryview(ffi.buffer(self.c.sent))
    self.templates: dict[tuple, tuple[bytes, int, int]] = {}   # the frame templates of the shapes it had
    self.key = self.endpoint = None

  def shape(self, q: rc.QP, wr: rc.SendWR, endpoint: tuple[str, int], until: float) -> None:
    """Take q's WRs like `wr` (one SGE in the flow's region) to `endpoint` (resolved until `until`)."""
    a, c, self.misses = q.a, self.c, 0
    self.path, self.mtu, self.pkey, self.dest_qpn, self.loopback = a.path, a.mtu, a.pkey, a.dest_qpn, self.port.loopback
    self.opcode, self.imm, self.solicited, self.length = wr.opcode, wr.opcode == rc.WRITE_IMM, wr.solicited, wr.length
    if (key := (a.path, a.pkey, a.dest_qpn, wr.opcode, wr.solicited, wr.length)) != self.key:
      if (t := self.templates.get(key)) is None:
        if len(self.templates) >= TEMPLATES: self.templates.clear()
        p = roce.Packet(roce.WRITE_ONLY_IMM if self.imm else roce.WRITE_ONLY, 0, a.dest_qpn, pkey=a.pkey, solicited=wr.solicited,
                        imm=0 if self.imm else None)
        t = self.templates[key] = roce.request_template(a.path, p, wr.length)
      head, c.head_crc, c.frame_len = t
      c.head[0:len(head)], c.head_len, c.imm, c.length, self.key = head, len(head), self.imm, wr.length, key
    if endpoint != self.endpoint:
      c.to[0:16], c.window, self.endpoint = bytes(fastpath.sockaddr(endpoint)), rc.WINDOW, endpoint
    c.fd = self.fd = self.wire.sock.fileno()
    c.until_ns = int(min(until, 1e9) * 1e9)

  def pin(self, view: memoryview) -> int:
    """The host address of `view`, whose memory stays where it is while the flow lives."""
    self.keep = (*self.keep, view)
    return fastpath._address(view)

  def usable(self, q: rc.QP) -> bool:
    """Whether C may post q's next WQEs (the checks C does not make itself)."""
    a, w = q.a, self.wire
    return _between(q) and a.path is self.path and a.mtu == self.mtu and \
      a.pkey == self.pkey and a.dest_qpn == self.dest_qpn and self.port.loopback == self.loopback and \
      (self.loopback or a.path.dgid not in self.port.own) and w.unwatched and \
      w.sock.fileno() == self.fd                         # (a port that closed its socket: the Python path raises)

  def worth(self, n: int) -> bool:
    """Whether the flow is worth keeping after C took n WQEs of a doorbell: not after MISSES doorbells in a row whose
    first WQE it could not take (the Python path then skips its attempts)."""
    self.misses = 0 if n else self.misses + 1
    return self.misses < MISSES

  def book(self, q: rc.QP, ctx: Callable[[int, int, int], tuple[Any, bool]]) -> None:
    """The bookkeeping of the WQEs C sent: their SendWRs (the NIC model's context and signaled flag of the j-th WQE are
    `ctx(its ring index, j, its flags)`) posted and sent as far as the transport (rc.QP.posted_sent) and the wire know."""
    psn, region, length, op, se, imm = q.next_psn, self.region, self.length, self.opcode, self.solicited, self.imm
    wrs = []
    for j, (va, sva, at, flags, i, rkey) in enumerate(SENT.iter_unpack(self.out[:SENT.size * self.c.n])):
      wctx, signaled = ctx(at, j, flags)
      wrs.append(rc.SendWR(op, rc.Buffer([(region, sva, length)]), va, rkey, i if imm else None, signaled, False, se, wctx,
                           (psn + j) & 0xFFFFFF))
    q.posted_sent(wrs)
    self.port.tx_taken += len(wrs)
    with self.wire._txlock: self.wire.sent += len(wrs)


class Shaped(Protocol):
  """A NIC model's QP as `again` sees it: the shape of the last WQE its Python path sent as one RDMA WRITE packet."""
  tx_shape: tuple


def again(qp: Shaped, shape: tuple) -> bool:
  """Whether `shape` (the NIC model's: type, flags but those that may vary, size, length, L_Key) of the WQE the QP's
  Python path has just sent as one RDMA WRITE packet is that of the one before it, which it becomes: a flow is armed
  only after two in a row (a QP whose WQEs keep changing shape is not armed for each)."""
  if shape == qp.tx_shape: return True
  qp.tx_shape = shape
  return False


def arm(decoder: Decoder, port, q: rc.QP, wr: rc.SendWR, dma, pages: list[int], page_size: int, ring_bytes: int,
        old: TxFlow | None = None) -> TxFlow | None:
  """A flow for q's next single-packet WRITEs like `wr`, which the Python path has just posted and sent (see the module
  docstring), reading the SQ from the first `ring_bytes` of `pages` (bus addresses of `page_size` bytes in `dma`); None
  where C may not take them. `old`, the QP's flow before, is reshaped if its memory is still the one to read. The NIC
  model fills in the WQE shape and its ring's layout."""
  if (lib := decoder.lib()) is None or wr.opcode not in (rc.WRITE, rc.WRITE_IMM) or wr.local_error is not None or wr.npkts != 1 or \
     wr.fence or len(wr.local.sges) != 1 or wr.length > MAX_PAYLOAD or not _between(q):
    return None
  w = port.wire
  if not w.unwatched: return None
  if port.loopback: endpoint, until = w.endpoint, float("inf")
  elif q.a.path.dgid in port.own: return None
  else: endpoint, until = w.table.resolved(q.a.path.dgid)
  region = wr.local.sges[0][0]
  if endpoint is None or region.generation is not dma.generation: return None
  if old is not None and old.region is region and old.pages is pages and old.c.gen == int(region.generation[0]):
    old.shape(q, wr, endpoint, until)
    return old
  try:
    if (m := fastpath.host_map(region)) is None: return None
    views = [dma.view(page, page_size) for page in pages[:-(-ring_bytes // page_size)]]
  except DMAFault: return None
  addrs = ffi.new("uint64_t[]", [fastpath._address(v) for v in views])
  f = TxFlow(lib, port, region, pages, (m, views, addrs, region.generation))
  c = f.c
  c.page, c.page_size = addrs, page_size
  c.generation, c.gen = ffi.cast(U64P, region.generation.ctypes.data), int(region.generation[0])
  c.mr_va, c.mr_len, c.npieces = region.va, region.length, len(m.addrs)
  c.piece, c.piece_start, c.piece_len = (ffi.cast(U64P, a.ctypes.data) for a in (m.addrs, m.starts, m.lens))
  f.shape(q, wr, endpoint, until)
  return f
