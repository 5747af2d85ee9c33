"""The provider interface: what a vendor NIC driver implements under the verbs layer (rdma-core's providers/<vendor>).

The verbs layer (context.py, queues.py) owns the rules: the QP state machine and the attributes each transition takes,
queue depths, which work request a completion belongs to, error completions as exceptions. A provider owns the
hardware: its command channel, queue and WQE formats, doorbells and completion records. It is opened by the `rdma`
opener its vendor declares (drivers/system/registry.py: `Vendor.rdma(pci, **options) -> Provider`).

Work requests carry a sequence number per queue (0, 1, 2, ... in posting order); a provider reports each completion
with the sequence number of the request it completes, and the verbs layer maps it back to the request.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import Protocol

from drivers.system.dma import DMAMemory
from drivers.rdma.verbs import Access, QPAttr, QPAttrMask, QPCap, QPState, RecvWR, SendWR, WCOpcode, WCStatus


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
  mr_page_sizes: int             # the page sizes an MR's translation takes, a bit each (ibv_device_attr.page_size_cap)
  def alloc(self, size: int) -> DMAMemory: ...
  def map_dma(self, memory: memoryview) -> DMAMemory: ...   # existing host memory mapped for the NIC (PCIDevice.map_dma)
  def free(self, mem: DMAMemory) -> None: ...           # what alloc or map_dma gave
  def add_gid(self, gid: bytes) -> int: ...        # -> the hardware GID table index
  def alloc_pd(self) -> int: ...
  def reg_mr(self, pd: int, pages: list[int], page_size: int, iova: int, length: int, access: Access) -> ProviderMR: ...
  def create_cq(self, depth: int) -> ProviderCQ: ...
  def create_qp(self, pd: int, send_cq: ProviderCQ, recv_cq: ProviderCQ, cap: QPCap) -> ProviderQP: ...
  def set_loopback(self, on: bool) -> None: ...    # the port's PHY loopback: what leaves comes back in
  def close(self) -> None: ...
