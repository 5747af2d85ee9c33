"""The provider interface: what a vendor NIC driver implements under the verbs layer (rdma-core's providers/<vendor>).

The verbs layer (context.py, queues.py) owns the rules: the QP state machine and the attributes each transition takes,
queue depths, which work request a completion belongs to, error completions as exceptions. A provider owns the
hardware: its command channel, queue and WQE formats, doorbells and completion records. It is opened by the `rdma`
opener its vendor declares (drivers/system/registry.py: `Vendor.rdma(pci, **options) -> Provider`).

Work requests carry a sequence number per queue (0, 1, 2, ... in posting order); a provider reports each completion
with the sequence number of the request it completes, and the verbs layer maps it back to the request.

What every provider does alike is here too: WorkRequests (a completion record -> the request it completes; the NIC's
flush CQEs after the verbs layer flushed the QP dropped), PCIProvider (DMA memory through the PCI function),
mr_page_shift (an MR's page size against mr_page_sizes) and ipv4_gid (RoCEv2 over IPv4 or IPv6).
"""
from __future__ import annotations
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from drivers.system.dma import DMAMemory
from drivers.system.pci import PCIDevice
from drivers.rdma.verbs import Access, QPAttr, QPAttrMask, QPCap, QPState, RecvWR, SendWR, VerbsError, WCOpcode, WCStatus

IPV4_MAPPED = bytes(10) + b"\xff\xff"     # the first 12 bytes of an IPv4-mapped GID, ::ffff:a.b.c.d (RFC 4291, 2.5.5.2)
ERR, RESET, SUCCESS = QPState.ERR, QPState.RESET, WCStatus.SUCCESS   # (enum members, looked up once)


def ipv4_gid(gid: bytes) -> bool:
  """Whether `gid` is an IPv4 address (RoCEv2 over IPv4) rather than an IPv6 one."""
  return gid[:12] == IPV4_MAPPED


def page_sizes(bits: int) -> str: return ", ".join(f"{1 << i:#x}" for i in range(bits.bit_length()) if bits >> i & 1)


def mr_page_shift(name: str, page_size: int, sizes: int) -> int:
  """log2 of an MR's page size, which must be one of `sizes` (the provider's mr_page_sizes, a bit each)."""
  if page_size & (page_size - 1) or not sizes & page_size:
    raise ValueError(f"{name}: MR page size {page_size:#x} is not one the NIC's MRs take ({page_sizes(sizes)} bytes)")
  return page_size.bit_length() - 1


@dataclass
class Completion:
  """One completion record as the provider decoded it."""
  qp_num: int
  recv: bool                     # from the receive queue (else the send queue)
  seq: int                       # the completed request's sequence number on that queue
  status: WCStatus
  vendor_err: int = 0            # the hardware's status code
  vendor_status: str = ""        # its name in the hardware's headers
  byte_len: int = 0
  imm_data: int | None = None
  opcode: WCOpcode | None = None # receive completions: RECV or RECV_RDMA_WITH_IMM


@dataclass
class DevicePost:
  """A send request laid out for another device to post (GPU-initiated RDMA: hcq's Queue.rdma_write): that device
  writes `writes` in order (each: the host memory of a NIC queue, the offset in it, the bytes), then makes one store of
  `doorbell` (the bus address of the NIC's doorbell register, the bytes stored), and the request has completed (in
  success or error) once the 32-bit little-endian word at `done` (the CQ's host memory, the offset of the word) has
  (word & mask) == value. The memory is given as the same memoryview objects device_targets named. The provider wrote
  what the host may write at once (bookkeeping the NIC reads only later)."""
  writes: list[tuple[memoryview, int, bytes]]
  doorbell: tuple[int, bytes]
  done: tuple[memoryview, int, int, int]


class PCIProvider:
  """A provider that is one PCI function (`pci`): the memory it gives and maps is that function's DMA memory."""
  pci: PCIDevice
  def alloc(self, size: int) -> DMAMemory: return self.pci.alloc_dma(size)
  def map_dma(self, memory: memoryview) -> DMAMemory: return self.pci.map_dma(memory)
  def free(self, mem: DMAMemory) -> None: self.pci.free_dma(mem)


class WorkRequests:
  """What a provider's QP keeps to turn its NIC's completion records into Completions: each work queue's outstanding
  requests in posting order, as (the key the NIC's completion names the request's WQE by, the request's sequence
  number, anything the provider keeps besides), and whether the verbs layer has flushed the QP's requests itself (after
  an error completion, or a move to ERR). The NIC's completions that follow (its flush CQEs, one per outstanding WQE:
  IBTA vol. 1, 10.8.3.3) retire their WQEs and are dropped, until the QP is reset."""
  def __init__(self, name: str, qp: ProviderQP):
    self.name, self.qp = name, qp
    self.sq: deque[tuple[int, ...]] = deque()
    self.rq: deque[tuple[int, ...]] = deque()
    self.flushed = False

  def modified(self, new: QPState) -> None:
    """The QP went to `new`: in ERR the verbs layer has flushed its requests; RESET empties its work queues."""
    if new == ERR: self.flushed = True
    elif new == RESET:
      self.sq.clear()
      self.rq.clear()
      self.flushed = False

  def take(self, recv: bool, key: int, what: str = "WQE") -> tuple[int, ...]:
    """The outstanding request a completion names by `key` (its entry, taken off its queue). The sends before it that
    asked for no completion completed without one (IBTA 10.8.3.1); every receive completes with one."""
    q = self.rq if recv else self.sq
    if not recv:
      while q and q[0][0] != key: q.popleft()
    if not q or q[0][0] != key:
      raise VerbsError(f"{self.name}: QP {self.qp.qp_num:#x} {'receive' if recv else 'send'} completion names {what} "
                       f"{key:#x}, " + (f"but the next outstanding request's is {q[0][0]:#x}" if q else "which no outstanding request is at"))
    return q.popleft()

  def completion(self, recv: bool, seq: int, status: WCStatus, vendor_err: int = 0, vendor_status: str = "", byte_len: int = 0,
                 imm_data: int | None = None, opcode: WCOpcode | None = None) -> Completion | None:
    """The completion of request `seq` (taken), None where the verbs layer has flushed it; an error completion means
    the verbs layer flushes the QP's other requests (IBTA 10.8.3.3)."""
    if self.flushed: return None
    if status != SUCCESS: self.flushed = True
    return Completion(self.qp.qp_num, recv, seq, status, vendor_err, vendor_status, byte_len, imm_data, opcode)


class ProviderCQ(Protocol):
  depth: int
  def poll(self, max_entries: int) -> list[Completion]: ...
  # optional: arm the CQ's notification and sleep until its next completion is notified (an interrupt) or `timeout_s`
  # passes, returning True (then the caller polls); False at once where the CQ cannot notify (the caller sleep-polls)
  def wait_event(self, timeout_s: float) -> bool: ...
  def destroy(self) -> None: ...


class ProviderQP(Protocol):
  qp_num: int                    # 24-bit
  def modify(self, cur: QPState, new: QPState, attr: QPAttr, mask: QPAttrMask) -> None: ...
  def post_send(self, wrs: list[tuple[int, SendWR]]) -> None: ...   # (seq, wr); one doorbell for the batch
  def post_recv(self, wrs: list[tuple[int, RecvWR]]) -> None: ...
  # optional, both or neither (GPU-initiated RDMA): the host memory a device-posted request is written into or waited on
  # (with `cq` as the QP's send CQ) and the bus address of the page its doorbell is in, which the device maps once; the layout of
  # request `seq` for another device to post (DevicePost), its completion the one after `cq_ahead` more on `cq`. The
  # request is then outstanding as if posted (its SQ slot and PSNs are taken).
  def device_targets(self, cq: ProviderCQ) -> tuple[list[memoryview], int]: ...
  def device_post(self, seq: int, wr: SendWR, cq: ProviderCQ, cq_ahead: int) -> DevicePost: ...
  def destroy(self) -> None: ...


class ProviderMR(Protocol):
  lkey: int
  rkey: int
  def deregister(self) -> None: ...


class Provider(Protocol):
  """An opened NIC port."""
  name: str                      # for messages: the vendor and the bus, e.g. "<vendor> 0000:41:00.0"
  mac: bytes                     # the port's Ethernet address (6 bytes)
  max_mtu: int                   # the largest path MTU the port takes (bytes)
  max_rd_atomic: int             # outstanding RDMA READs per QP, as requester and as responder
  max_sge: int                   # scatter/gather entries per work request
  max_qp_wr: int                 # work requests a send or receive queue holds (ibv_device_attr.max_qp_wr)
  max_cqe: int                   # completions a CQ holds (ibv_device_attr.max_cqe)
  mr_page_sizes: int             # the page sizes an MR's translation takes, a bit each (ibv_device_attr.page_size_cap)
  def alloc(self, size: int) -> DMAMemory: ...
  def map_dma(self, memory: memoryview) -> DMAMemory: ...   # existing host memory mapped for the NIC (PCIDevice.map_dma)
  def free(self, mem: DMAMemory) -> None: ...           # what alloc or map_dma gave
  def add_gid(self, gid: bytes) -> int: ...        # -> the hardware GID table index
  def alloc_pd(self) -> int: ...
  # page_size is one of mr_page_sizes (mr_page_shift checks)
  def reg_mr(self, pd: int, pages: list[int], page_size: int, iova: int, length: int, access: Access) -> ProviderMR: ...
  def create_cq(self, depth: int) -> ProviderCQ: ...
  def create_qp(self, pd: int, send_cq: ProviderCQ, recv_cq: ProviderCQ, cap: QPCap) -> ProviderQP: ...
  def set_loopback(self, on: bool) -> None: ...    # the port's PHY loopback: what leaves comes back in
  def close(self) -> None: ...
