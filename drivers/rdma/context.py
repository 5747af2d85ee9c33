"""Context (an opened NIC), PD and MR: rdma-core's ibv_open_device, ibv_alloc_pd and ibv_reg_mr.

  ctx = open_context("<nic>", "mock-0", ip="10.0.0.1")   # a registered NIC vendor, a PCI bus (or emulated index)
  pd = ctx.alloc_pd()
  mr = pd.reg_mr(ctx.alloc(4096), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
  mr = pd.reg_mr(np.zeros(1 << 20, np.uint8), Access.LOCAL_WRITE)      # or existing host memory, or an hcq host Buffer
"""
from __future__ import annotations
import ipaddress
from typing import Any

import numpy as np

from common.alloc import RangeAllocator
from drivers.hcq.buffer import Buffer
from drivers.system.dma import DMAMemory
from drivers.system.registry import vendor, vendors
from drivers.rdma.provider import Provider, ProviderMR, page_sizes
from drivers.rdma.queues import CQ, QP
from drivers.rdma.verbs import Access, QPCap, SGE, VerbsError

PORT = 1           # every provider here drives one port per function (verbs port numbers start at 1)
IOVA_BASE, IOVA_SPAN = 1 << 44, 1 << 46     # where MRs get their I/O virtual addresses


def ipv4_to_gid(ip: str) -> bytes:
  """The RoCEv2 GID of an IPv4 address: the IPv4-mapped IPv6 address ::ffff:a.b.c.d (RFC 4291, 2.5.5.2)."""
  return ipaddress.IPv6Address(f"::ffff:{ipaddress.IPv4Address(ip)}").packed


def gid_text(gid: bytes) -> str:
  addr = ipaddress.IPv6Address(gid)
  return str(addr.ipv4_mapped) if addr.ipv4_mapped else str(addr)


def rdma_vendors() -> dict[str, Any]:
  """The registered vendors with an RDMA provider, by lower-case name (what `--nic` takes)."""
  return {v.smi_name: v for v in vendors() if v.rdma is not None}


def open_context(nic: str, pci: str, ip: str | None = None, **options: Any) -> Context:
  """Open NIC `pci` (a PCI bus id, or mock-<n> for emulated NIC n) with vendor `nic`'s provider; with `ip`, its
  IPv4 address becomes GID 0."""
  v = vendor(nic.upper())
  if v is None or v.rdma is None:
    raise ValueError(f"no RDMA provider for NIC {nic!r}; available: {', '.join(rdma_vendors()) or 'none'}")
  ctx = Context(v.rdma(pci, **options))
  if ip is not None:
    try: ctx.add_gid(ipv4_to_gid(ip))
    except BaseException:
      ctx.close()
      raise
  return ctx


class Context:
  """An opened NIC (ibv_context): its port, GID table and MAC, and the DMA memory it can reach."""
  def __init__(self, provider: Provider):
    self.provider, self.name = provider, provider.name
    self.port_num, self.mac = PORT, provider.mac
    self.gid_table: dict[int, bytes] = {}
    self.qps: dict[int, QP] = {}             # qp_num -> QP: completions find their queue pair here
    self.mrs: set[MR] = set()                # registered: deregistered when the context closes
    self.iova = RangeAllocator(IOVA_BASE, IOVA_SPAN, f"{self.name} MR address space")
    self.closed = False

  def gone(self, what: str) -> VerbsError:
    """The error of `what` (a verbs call) on this context once it is closed: the NIC is given back."""
    return VerbsError(f"{self.name}: {what} on a closed context (the NIC was given back); open it again with open_context")

  def add_gid(self, gid: bytes) -> int:
    """Add a GID to the port's table; returns its index (the sgid_index QPs name)."""
    if self.closed: raise self.gone("add_gid")
    if len(gid) != 16: raise ValueError(f"a GID is 16 bytes, not {len(gid)}")
    index = self.provider.add_gid(bytes(gid))
    self.gid_table[index] = bytes(gid)
    return index

  def query_gid(self, index: int = 0, port_num: int = PORT) -> bytes:
    self._check_port(port_num)
    if index not in self.gid_table:
      raise VerbsError(f"{self.name}: GID index {index} is empty (table: {self._gids()}); open the context with ip=... "
                       "or add_gid()")
    return self.gid_table[index]

  def _gids(self) -> str:
    return ", ".join(f"{i}: {gid_text(g)}" for i, g in sorted(self.gid_table.items())) or "empty"

  def _check_port(self, port_num: int) -> None:
    if port_num != PORT: raise VerbsError(f"{self.name} has one port, {PORT}; not {port_num}")

  def alloc(self, size: int) -> DMAMemory:
    """Zeroed host memory the NIC can DMA to (pinned pages with their bus addresses), for MRs."""
    if self.closed: raise self.gone("alloc")
    if size <= 0: raise ValueError(f"cannot allocate {size} bytes")
    return self.provider.alloc(size)

  def free(self, mem: DMAMemory) -> None: self.provider.free(mem)

  def alloc_pd(self) -> PD:
    if self.closed: raise self.gone("alloc_pd")
    return PD(self, self.provider.alloc_pd())

  def create_cq(self, cqe: int = 256) -> CQ:
    """A completion queue with room for at least `cqe` completions."""
    if self.closed: raise self.gone("create_cq")
    return CQ(self, cqe)

  def set_loopback(self, on: bool) -> None:
    """Port PHY loopback: packets the port sends come back in at the same port (single-NIC tests)."""
    if self.closed: raise self.gone("set_loopback")
    self.provider.set_loopback(on)

  def close(self) -> None:
    if self.closed: return
    self.closed = True
    for qp in list(self.qps.values()): qp.unmap_devices()   # (a GPU that posts on a QP maps its queues' memory)
    for mr in list(self.mrs):
      try: mr.dereg()
      except Exception: pass   # a NIC that cannot take the command is closed anyway; the MR's memory is let go
    self.provider.close()

  def __enter__(self) -> Context: return self
  def __exit__(self, *exc) -> None: self.close()
  def __repr__(self) -> str: return f"<Context {self.name} port {self.port_num} GIDs {self._gids()}>"


class PD:
  """A protection domain: MRs and QPs of one PD work together."""
  def __init__(self, ctx: Context, handle: int):
    self.ctx, self.handle = ctx, handle

  def reg_mr(self, mem: DMAMemory | Buffer | Any, access: Access = Access.LOCAL_WRITE, length: int | None = None) -> MR:
    """Register memory (its first `length` bytes, default all of it) with `access`: DMA memory from ctx.alloc, existing
    host memory (a writable, C-contiguous buffer: bytearray, memoryview, numpy array), or an hcq Buffer in host memory
    (host-visible system memory, an imported one, or a CPU-device buffer) or in GPU memory (the NIC then DMAs peer to
    peer into the GPU's BAR, with no host memory in between). The NIC maps the pages that hold it; it stays mapped
    (and an hcq Buffer cannot be freed) until dereg."""
    if self.ctx.closed: raise self.ctx.gone("reg_mr")
    return MR(self, mem, Access(access), length)

  def create_qp(self, send_cq: CQ, recv_cq: CQ | None = None, cap: QPCap | None = None) -> QP:
    """An RC queue pair in RESET; `recv_cq` defaults to `send_cq`."""
    if self.ctx.closed: raise self.ctx.gone("create_qp")
    return QP(self, send_cq, recv_cq or send_cq, cap or QPCap())


def _buffer(obj: Any) -> bool:
  try: memoryview(obj)
  except TypeError: return False
  return True


def _device_memory(mem: Any) -> bool:
  """Whether `mem` is an hcq Buffer the CPU cannot reach (GPU memory): the NIC reaches it peer to peer."""
  if not isinstance(mem, Buffer): return False
  mem._live()
  return not (mem.host or mem.device.host_addressed) or mem.host_view is None


def _bus_pages(mem: Buffer, nic: str) -> tuple[list[int], int, int]:
  """Where GPU memory `mem` sits on the bus (its device's BAR), for the NIC's DMA: no host memory in between."""
  try: return mem.bus_pages()
  except NotImplementedError as e:
    raise ValueError(f"{mem!r} is GPU memory (VRAM), which {nic} reaches only by peer-to-peer DMA into the GPU's BAR, "
                     f"but {e}; or register a host-visible buffer (device.alloc(size, host=True))") from None


def best_pages(pages: list[int], page_size: int, first: int, sizes: int) -> tuple[list[int], int, int]:
  """(pages, page size, offset of byte 0 in the first) in the page size of `sizes` (a bit each) that names the memory in
  the fewest pages, the smallest of those: each larger page a bus-contiguous run of the given pages, aligned to its size
  (the first and last may reach past the memory: the MR's bounds keep the NIC inside it), as ib_umem_find_best_pgsz
  picks (drivers/infiniband/core/umem.c). A size that fails the memory fails every larger one."""
  best = (pages, page_size, first)
  a = np.asarray(pages, np.uint64)
  step = np.diff(a)
  for log in range(page_size.bit_length(), sizes.bit_length()):
    big = 1 << log
    if not sizes & big: continue
    at: Any = (np.arange(len(a)) + int(a[0]) % big // page_size) % (big // page_size)   # each page's place in its big page
    starts = at == 0
    if (a[starts] % big).any() or (step[~starts[1:]] != page_size).any(): break
    if 1 + np.count_nonzero(starts[1:]) < len(best[0]):
      best = ([int(a[0]) - int(at[0]) * page_size] + [int(p) for p in a[1:][starts[1:]]], big, int(a[0]) % big + first)
  if best[1] == page_size and not sizes & page_size:
    raise ValueError(f"the NIC's MRs take pages of {page_sizes(sizes)} bytes; this memory's {page_size}-byte pages do not "
                     "make any of them")
  return best


class MR:
  """A memory region (ibv_mr): `length` bytes at I/O virtual address `addr`, reachable locally by `lkey` and remotely by
  `rkey` with `access`. The context gives each MR its own page-aligned address range (the NIC translates it through
  the MR's page table), so no process or physical address reaches a peer."""
  def __init__(self, pd: PD, mem: Any, access: Access, length: int | None = None):   # DMAMemory, a Buffer, host memory
    size = mem.size if isinstance(mem, (DMAMemory, Buffer)) else memoryview(mem).nbytes if _buffer(mem) else None
    if size is None:
      raise TypeError(f"reg_mr takes DMA memory from Context.alloc, host memory (a writable buffer: bytearray, memoryview, "
                      f"numpy array) or an hcq Buffer, not {type(mem).__name__}")
    length = size if length is None else length
    if not 0 < length <= size: raise ValueError(f"MR length {length} is outside the {size}-byte buffer")
    if access & (Access.REMOTE_WRITE | Access.REMOTE_ATOMIC) and not access & Access.LOCAL_WRITE:
      raise VerbsError("an MR with REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE too (IBTA 10.6.3.1)")
    self.pd, self.access, self.length, self.buffer = pd, access, length, mem if isinstance(mem, Buffer) else None
    ctx = pd.ctx
    self.mem: DMAMemory | None
    if _device_memory(mem):                                  # GPU memory: its pages through the GPU's BAR
      self.mapped, self.mem = None, None
      pages, page_size, self.first = _bus_pages(mem, ctx.name)
    else:
      # memory the context did not allocate is mapped for the NIC here, and unmapped at dereg
      host = mem.host_view if isinstance(mem, Buffer) else mem
      assert host is not None   # a Buffer that is not device memory has a host view
      self.mapped = None if isinstance(mem, DMAMemory) else ctx.provider.map_dma(memoryview(host))
      self.mem = dma = mem if self.mapped is None else self.mapped
      pages, page_size, self.first = dma.bus_addrs, dma.page_size, dma.first
    pages = pages[:-(-(self.first + length) // page_size)]
    pages, page_size, self.first = best_pages(pages, page_size, self.first, ctx.provider.mr_page_sizes)
    # the MR's address keeps the memory's offset in its first page: the NIC's translation starts there
    base = ctx.iova.alloc(len(pages) * page_size, page_size)
    self.addr = base + self.first
    try: self._hw: ProviderMR | None = ctx.provider.reg_mr(pd.handle, pages, page_size, self.addr, length, access)
    except BaseException:
      ctx.iova.free(base)
      if self.mapped is not None: ctx.provider.free(self.mapped)
      raise
    self.lkey, self.rkey = self._hw.lkey, self._hw.rkey
    if self.buffer is not None: (self.buffer.base or self.buffer).holders.append(self)
    ctx.mrs.add(self)

  @property
  def view(self) -> memoryview:
    """The registered host memory (GPU memory has none: read it with the Buffer's copyout)."""
    if self.mem is None: raise ValueError(f"{self!r} is GPU memory, which the CPU cannot reach: use its Buffer's copyout")
    return self.mem.view[:self.length]

  def contains(self, addr: int, length: int) -> bool:
    return self.addr <= addr and addr + length <= self.addr + self.length

  def sge(self, offset: int = 0, length: int | None = None) -> SGE:
    """The scatter/gather entry for `length` bytes (default: the rest) at `offset` into the region."""
    length = self.length - offset if length is None else length
    if offset < 0 or length < 0 or offset + length > self.length:
      raise ValueError(f"[{offset}, +{length}) is outside the {self.length}-byte MR (lkey {self.lkey:#x})")
    return SGE(self.addr + offset, length, self.lkey)

  def dereg(self) -> None:
    if self._hw is not None:
      ctx = self.pd.ctx
      try: self._hw.deregister()
      finally:
        ctx.iova.free(self.addr - self.first)
        if self.mapped is not None: ctx.provider.free(self.mapped)
        if self.buffer is not None: (self.buffer.base or self.buffer).holders.remove(self)
        ctx.mrs.discard(self)
    self._hw = None

  def __repr__(self) -> str:
    return f"<MR {self.length} B at {self.addr:#x} lkey {self.lkey:#x} rkey {self.rkey:#x} {self.access!r}>"
