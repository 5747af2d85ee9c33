"""Device: one opened accelerator (or the CPU reference device), and opening devices from strings.

What every device gets from drivers/hcq, so a vendor writes only what is its own:
- memory: `alloc` -> Buffer; signals carved from pages of `_signal_chunk`; kernel arguments from a
  KernargArena over `_kernarg_chunk`; freeing a buffer waits for submitted work that may still use it.
- ordering: one timeline signal. `ordered_submit(queue, work)` is how work joins it: wait for the last value,
  the work's commands, signal the next value, submit, all under `submit_lock` (so values only grow).
- host copies: `copyin`/`copyout` go through a buffer's host view when it has one, else through Staging on the
  copy queue; device-to-device copies run on the copy queue; copies between devices go peer to peer where the source
  maps the destination's memory at its bus addresses (`import_peer`: the source's copy queue writes through the
  destination's BAR), else through host memory both map (`import_host`, PeerLink, kept until either closes), ordered
  by a signal there that one device's queue writes and the other's waits on.
- faults: `check_faults` (called by every wait) asks the vendor's `_poll_faults` at most every FAULT_POLL_S.
A vendor supplies: `_alloc`/`_free`, `_signal_chunk`, `_kernarg_chunk`, `compute_queue`/`copy_queue` (its packet
encoders, see Queue; hardware rings use drivers.hcq.ring.Ring), `program`, `ticks_to_us`, and optionally
`_import_host` (existing host memory mapped for the device), `_bus_pages` and `_import_peer` (peer to peer),
`_poll_faults`, `_refresh`, `_progress`, `_stop_queues` and `_shutdown`.
drivers/cpu/device.py is the smallest complete example.
"""
from __future__ import annotations
import atexit, os, sys, threading, weakref
from typing import Callable
from drivers.hcq import profile
from drivers.hcq.buffer import Buffer
from drivers.hcq.compiler import Compiler
from drivers.hcq.devspec import DeviceSpec, device_forms, openable_vendors, parse_device, valid_forms
from drivers.hcq.faults import DeviceFault, FaultPoll
from drivers.hcq.hostshare import PeerLink
from drivers.hcq.kernargs import KernargArena
from drivers.hcq.pool import SlotPool
from drivers.hcq.program import Program
from drivers.hcq.queue import Queue
from drivers.hcq.signal import Signal
from drivers.hcq.staging import Staging
from drivers.system.dma import dma_bytes, host_address
from drivers.system.registry import vendor

CLOSE_STALL_MS = 5000   # Device.close waits for outstanding work until it makes no progress for this long


class Device:
  """Owns an allocator, a timeline signal, compute and copy queues, and the compiler for its target."""
  compiler: Compiler
  arch: str
  spec: DeviceSpec | None = None
  host_addressed = False   # its queues address host memory by host address (so reach other devices' host-visible memory)

  def __init__(self, name: str):
    self.name = name
    self._faults: list[str] = []
    self._fault_poll = FaultPoll(self._poll_faults)
    self._buffers: set[Buffer] = set()
    self._lock = threading.Lock()
    # held while a timeline value is reserved and its queue submitted, so the timeline only grows
    self.submit_lock = threading.RLock()
    self.closed = self.closing = False
    self._signals = SlotPool(self._signal_chunk, 16)
    self.kernargs = KernargArena(self._kernarg_chunk)
    self._staging: Staging | None = None
    self._staging_lock = threading.Lock()
    self._links: dict[Device, PeerLink] = {}                  # transfers from other devices into ours
    self._linked: weakref.WeakSet[Device] = weakref.WeakSet()  # devices that keep such links from us
    self.timeline = self.new_signal(0, "timeline")
    self.timeline_value = 1

  # --- vendor hooks
  def _alloc(self, size: int, host: bool) -> tuple[int, memoryview | None, object]:
    """-> (va, host view or None, opaque handle for _free)."""
    raise NotImplementedError
  def _free(self, opaque: object) -> None: raise NotImplementedError
  def _import_host(self, view: memoryview) -> tuple[int, object]:
    """Map existing host memory for the device's queues and kernels -> (its address, opaque handle for _free)."""
    raise NotImplementedError(f"{self.name} cannot map existing host memory")
  def _bus_pages(self, opaque: object) -> tuple[list[int], int]:
    """Where the device memory `opaque` (from _alloc) sits on the PCI bus, for peers' DMA into the device's BAR ->
    (the bus address of each page, the page size)."""
    raise NotImplementedError(f"{self.name} cannot give peers the bus address of its memory (peer-to-peer DMA)")
  def _import_peer(self, pages: list[int], page_size: int) -> tuple[int, object]:
    """Map another device's memory at bus addresses `pages` (its BAR) for this device's queues -> (the address of
    pages[0], opaque handle for _free)."""
    raise NotImplementedError(f"{self.name} cannot map another device's memory (peer-to-peer DMA)")
  def _signal_chunk(self) -> tuple[memoryview, int]:
    """A page of host-visible, device-writable memory (and its device address) to carve signals from."""
    raise NotImplementedError
  def _kernarg_chunk(self, size: int) -> tuple[memoryview, int]:
    """At least `size` bytes of host-writable memory kernels read their arguments from (and its device address)."""
    raise NotImplementedError
  def _poll_faults(self) -> str | None:
    """One non-blocking look for an error the device reported -> its description, or None."""
    return None
  def compute_queue(self) -> Queue: raise NotImplementedError
  def copy_queue(self) -> Queue: raise NotImplementedError
  def program(self, name: str, lib: bytes) -> Program: raise NotImplementedError
  def ticks_to_us(self, ticks: int) -> float: raise NotImplementedError
  def _refresh(self) -> None:
    """Bring the host's view of memory the device writes (signals, read pointers) up to date, where the host sees
    only a copy it reads back (a device behind a bus that maps none of its memory): `progress` does it first."""
  def _host_wrote(self) -> None:
    """Make what the host just wrote to device-visible memory (a signal's value) reach the device now, where the host
    writes a copy of that memory (a device behind a bus that maps none of it): the counterpart of `_refresh`."""
  def _progress(self) -> tuple:
    """Values that change while the device works besides the timeline (e.g. its rings' read pointers)."""
    return ()
  def _stop_queues(self) -> None:
    """Stop every queue (the command in flight may finish; the rest is dropped): nothing runs after this returns."""
  def _shutdown(self) -> None:
    """Release what is left after the queues stopped and every buffer was freed."""

  # --- memory
  def alloc(self, size: int, host: bool = False) -> Buffer:
    """Device memory (host=True: host memory the device can access, e.g. for staging)."""
    if size < 0: raise ValueError(f"cannot allocate {size} bytes")
    self._check_open()
    va, view, opaque = self._alloc(size, host)
    buf = Buffer(self, size, va, view, opaque, host)
    with self._lock: self._buffers.add(buf)
    return buf

  def import_host(self, memory) -> Buffer:
    """Existing host memory (a writable, C-contiguous buffer: bytearray, memoryview, numpy array, another device's
    host-visible Buffer's host_view) as a Buffer of this device, mapped for its DMA: the same bytes at this device's
    own address. Free it before the memory goes away; freeing it leaves the memory alone."""
    self._check_open()
    view = dma_bytes(memory)
    if self.host_addressed: va, opaque = host_address(view), None   # nothing to map: its queues use host addresses
    else: va, opaque = self._import_host(view)
    buf = Buffer(self, view.nbytes, va, view, opaque, True)
    if opaque is not None:
      with self._lock: self._buffers.add(buf)
    return buf

  def import_peer(self, buf: Buffer) -> Buffer:
    """Another device's memory `buf` (on the PCI bus behind its BAR: Buffer.bus_pages) as a Buffer of this device:
    this device's queues then reach it peer to peer, over PCIe, with no host memory in between. NotImplementedError
    where either device cannot. Free it before `buf` goes."""
    pages, page, first = buf.bus_pages()
    return self.import_bus(pages, page, first, buf.size)

  def import_bus(self, pages: list[int], page_size: int, first: int, size: int) -> Buffer:
    """`size` bytes from offset `first` of the pages at bus addresses `pages` (another device's BAR: its memory, or its
    registers, such as a NIC's doorbell) as a Buffer of this device, for its queues to reach peer to peer.
    NotImplementedError where this device cannot map bus addresses."""
    self._check_open()
    if not 0 <= first < page_size or first + size > len(pages) * page_size:
      raise ValueError(f"[{first}, +{size}) does not lie in {len(pages)} pages of {page_size} bytes")
    va, opaque = self._import_peer(pages, page_size)
    peer = Buffer(self, size, va + first, None, opaque)
    with self._lock: self._buffers.add(peer)
    return peer

  def _free_buffer(self, buf: Buffer) -> None:
    with self._lock:
      if buf not in self._buffers: return
      self._buffers.discard(buf)
    if not self._faults and not self.closing and self.timeline.value < self.timeline_value - 1:
      self.synchronize()   # submitted work may still use it: unmapping it under a running kernel would fault that kernel
    self._free(buf.opaque)

  @property
  def allocated_bytes(self) -> int: return sum(b.size for b in self._buffers)

  def new_signal(self, value: int = 0, name: str = "signal") -> Signal:
    mem, va = self._signals.get()
    sig = Signal(self, mem, va, value, name)
    weakref.finalize(sig, self._signals.put, mem, va)
    return sig

  # --- copies
  @property
  def staging(self) -> Staging:
    """The staging buffers for host copies of memory the CPU cannot reach (made on first use)."""
    with self._staging_lock:
      if self._staging is None: self._staging = Staging(self)
      return self._staging

  def _copyin(self, buf: Buffer, data: memoryview) -> None:
    if buf.host_view is None: self.staging.copyin(buf.va, data)
    else:
      self.synchronize()   # earlier work may still read the old contents
      buf.host_view[:data.nbytes] = data

  def _copyout(self, dest: memoryview, buf: Buffer) -> None:
    if buf.host_view is None: self.staging.copyout(dest, buf.va)   # ordered after earlier work by the copy queue itself
    else:
      self.synchronize()
      dest[:] = buf.host_view[:dest.nbytes]

  def _copy_sync(self, dest: Buffer, src: Buffer) -> None:
    """Device-to-device copy on the copy queue, ordered after all earlier work; blocks until done."""
    self.timeline.wait(self.ordered_submit(self.copy_queue(), lambda q: q.copy(dest, src, src.size)))

  def _transfer(self, dest: Buffer, src: Buffer) -> None:
    """Copy from another device's buffer into ours: peer to peer when `dest` has a bus address the other device can map
    (its copy queue writes through our BAR), else device to device through host memory both map (PeerLink); through
    the host (copyout, copyin) when either device cannot map host memory for the other. Blocks until done."""
    other = src.device
    if not dest.host:
      try: peer = other.import_peer(dest)
      except NotImplementedError: peer = None
      if peer is not None:
        try:
          self.synchronize()   # our earlier work on dest is done before the other device overwrites it
          other.timeline.wait(other.ordered_submit(other.copy_queue(), lambda q: q.copy(peer, src, src.size)))
        finally: peer.free()
        return
    with self._lock:
      if (link := self._links.get(other)) is None:
        link = self._links[other] = PeerLink(other, self)
        other._linked.add(self)
    try: link.transfer(dest, src)
    except NotImplementedError: dest.copyin(src.copyout()[:src.size])

  # --- ordering
  def next_timeline(self) -> int:
    with self._lock:
      self.timeline_value += 1
      return self.timeline_value - 1

  def ordered_submit(self, queue: Queue, work: Callable[[Queue], object] | None = None) -> int:
    """Submit `queue` after everything submitted before it: wait for the timeline's last value, add work(queue)'s
    commands, signal the next value; all under submit_lock. -> the value signalled when the work is done."""
    with self.submit_lock:
      queue.wait(self.timeline, self.timeline_value - 1)
      if work is not None: work(queue)
      queue.signal(self.timeline, value := self.next_timeline()).submit()
    return value

  def synchronize(self, timeout_ms: float | None = None, stall_ms: float | None = None) -> None:
    """Wait for everything submitted so far (timeouts as in Signal.wait)."""
    self.timeline.wait(self.timeline_value - 1, timeout_ms, stall_ms)

  def progress(self) -> tuple:
    """Changes whenever the device moves forward: a wait that sees it change is not stuck. It reads back what the device
    wrote first (`_refresh`), so what a wait looks at next is current."""
    self._refresh()
    return (self.timeline.value, *self._progress())

  def report_fault(self, message: str) -> None:
    """Called by engines/workers when the device reports an error."""
    self._faults.append(message)

  def check_faults(self) -> None:
    """Raise DeviceFault for the first error the device reported (the vendor is asked at most every FAULT_POLL_S)."""
    if not self._faults and (fault := self._fault_poll()) is not None: self.report_fault(fault)
    if self._faults: raise DeviceFault(f"{self.name}: {self._faults[0]}")

  def _check_open(self) -> None:
    if self.closed: raise RuntimeError(f"{self.name} is closed")

  def close(self, wait: bool = True) -> None:
    """Stop the queues, free every buffer, release the device. With `wait` (and a healthy device), outstanding work
    is waited for first, until it stops making progress for CLOSE_STALL_MS; without (at exit), it is dropped."""
    if self.closed: return
    if held := next((b for b in self._buffers if b.holders), None):
      raise RuntimeError(f"cannot close {self.name}: {held!r} is registered as {held.holders[0]!r}; deregister that first")
    if wait and not self._faults:
      try: self.synchronize(stall_ms=CLOSE_STALL_MS)
      except Exception: pass   # a hung or faulted device is torn down anyway
    self._stop()
    profile.collect(self.name)
    for link in [*self._links.values(), *(d._links.pop(self) for d in list(self._linked) if self in d._links)]: link.close()
    self._links.clear()
    for b in list(self._buffers): b.free()
    self._shutdown()
    self.closed = True
    if _open.get(self.name) is self: del _open[self.name]   # a device opened privately (not by open_device) is not there

  def _stop(self) -> None:
    """Stop the queues (the command in flight may finish, what is queued behind it is dropped): from here on nothing
    runs on the device, and buffers are freed without waiting for work."""
    if self.closing: return
    self.closing = True
    self._stop_queues()

  def __repr__(self) -> str: return f"<{type(self).__name__} {self.name} ({self.arch})>"


# --- opening devices by string (the vendors are the registered ones: drivers/system/registry.py)
_open: dict[str, Device] = {}


def default_device_name() -> str:
  """DEV from the environment, else the first vendor (by priority) whose probe finds its hardware, else the first
  emulated default, announced in one line on stderr."""
  if dev := os.environ.get("DEV"): return dev
  vendors = openable_vendors()
  if real := next((v for v in vendors if v.probe()), None): return real.name
  if (fallback := next((v.emulated for v in vendors if v.emulated), None)) is None:
    raise RuntimeError(f"no DEV set, no hardware found and no emulated device registered; valid forms: {valid_forms()}")
  others = ", ".join(f"DEV={f}" for f in device_forms(kernels_only=True) if f != fallback)
  print(f"hcq: no DEV set and no hardware found; using {fallback}, which is emulated (choose another with {others})",
        file=sys.stderr)
  return fallback


def open_device(name: str | None = None) -> Device:
  """Open (or return the already-open) device for a device string; None means the default device."""
  spec = parse_device(name if name is not None else default_device_name())
  for dev in _open.values():
    if (s := dev.spec) == spec or (s is not None and spec.iface is None and s.vendor == spec.vendor and s.index == spec.index):
      return dev
  v = vendor(spec.vendor)
  assert v is not None and v.open is not None   # parse_device accepts only vendors that open devices
  dev = v.open(spec)
  dev.spec = spec
  _open[dev.name] = dev
  # exit handlers run last-registered first: (re)registering after the device made its weakref finalizers (which
  # register theirs on first use) stops its queues before any finalizer frees memory that queued work uses
  atexit.unregister(_close_all)
  atexit.register(_close_all)
  return dev


def _close_all() -> None:
  """At exit (normal, or after Ctrl-C): stop every open device's queues without waiting for the work queued on them
  (all of them first: closing one frees memory it shares with others), then release the devices, so the process ends
  at once and the next open finds them stopped."""
  devs = list(_open.values())
  for dev in devs:
    try: dev._stop()
    except Exception as e: print(f"hcq: stopping {dev.name} at exit: {type(e).__name__}: {e}", file=sys.stderr)
  for dev in devs:
    try: dev.close(wait=False)
    except RuntimeError: pass   # memory still registered elsewhere (an RDMA MR), or a fault: the process's end lets it go
    except Exception as e: print(f"hcq: closing {dev.name} at exit: {type(e).__name__}: {e}", file=sys.stderr)
