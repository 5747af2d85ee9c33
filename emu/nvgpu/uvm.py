"""A model of nvidia-uvm (/dev/nvidia-uvm): GPU and VA-space registration, channel registration, external ranges and
the GPU mappings of RM memory in them. The GPU's view of memory (`translate`) is this VA map: what the channel's
engines will read through (the VA space is created IS_EXTERNALLY_OWNED: UVM owns its page tables).

UVM copies its own struct size with no check (reference section 2), so a wrong layout corrupts silently on the real
driver; the model instead rejects an argument that is not the 580 structure's size (EINVAL, naming both), so a
driver on other layouts fails a test. `read`/`write` are the GPU's accesses through this VA map (what emu.ring engines
take as their memory); an access to an unmapped address is an MMU fault (emu.pci.DMAFault). Status codes land in `rmStatus`: before UVM_INITIALIZE
NV_ERR_ILLEGAL_ACTION;
an unknown GPU UUID NV_ERR_GPU_UUID_NOT_FOUND; a GPU or VA space not registered NV_ERR_INVALID_DEVICE; ranges
that overlap NV_ERR_UVM_ADDRESS_IN_USE; addresses not 4 KiB-aligned or outside a range NV_ERR_INVALID_ADDRESS.
Not modelled: managed memory, faults and migration, peer access, tools; a mapping over an existing one is refused
(UVM would unmap the old one first).
"""
from __future__ import annotations
import bisect, ctypes
from dataclasses import dataclass, field
from typing import Callable

from autogen.nv import classes as cl, rm, uvm
from emu.nvgpu.rm import GPFIFO_CLASSES, Memory, RMModel, RMStatus
from emu.kernel_model import Ioctl, Ioctls
from emu.pci import DMAFault

PAGE = 0x1000


@dataclass
class Mapping:
  va: int
  length: int
  memory: Memory
  offset: int
  host: int | None = None                          # host address of its first byte, once a shader core asked


@dataclass
class Range:
  """An external range (UVM_CREATE_EXTERNAL_RANGE) or a channel's range (UVM_REGISTER_CHANNEL)."""
  base: int
  length: int
  channel: tuple[int, int] | None = None           # (client, channel handle) of a channel range
  mappings: list[Mapping] = field(default_factory=list)


class UVMModel:
  """`is_ctl_fd(fd)`: whether fd is an open /dev/nvidiactl; `on_error(why)`: a call failed with an RM status."""
  def __init__(self, rmm: RMModel, is_ctl_fd: Callable[[int], bool], on_error: Callable[[str], None]):
    self.rm, self.is_ctl_fd, self.on_error = rmm, is_ctl_fd, on_error
    self.initialized: set[int] = set()               # UVM fds that called UVM_INITIALIZE
    self.gpus: set[bytes] = set()
    self.vaspaces: dict[bytes, tuple[int, int]] = {}  # uuid -> (client, VA space)
    self.ranges: list[Range] = []                     # sorted by base
    handlers = {uvm.UVM_INITIALIZE: (uvm.UVM_INITIALIZE_PARAMS, self._initialize),
                uvm.UVM_MM_INITIALIZE: (uvm.UVM_MM_INITIALIZE_PARAMS, self._mm_initialize),
                uvm.UVM_REGISTER_GPU: (uvm.UVM_REGISTER_GPU_PARAMS, self._register_gpu),
                uvm.UVM_REGISTER_GPU_VASPACE: (uvm.UVM_REGISTER_GPU_VASPACE_PARAMS, self._register_vaspace),
                uvm.UVM_REGISTER_CHANNEL: (uvm.UVM_REGISTER_CHANNEL_PARAMS, self._register_channel),
                uvm.UVM_UNREGISTER_CHANNEL: (uvm.UVM_UNREGISTER_CHANNEL_PARAMS, self._unregister_channel),
                uvm.UVM_CREATE_EXTERNAL_RANGE: (uvm.UVM_CREATE_EXTERNAL_RANGE_PARAMS, self._create_range),
                uvm.UVM_MAP_EXTERNAL_ALLOCATION: (uvm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, self._map_external),
                uvm.UVM_FREE: (uvm.UVM_FREE_PARAMS, self._free)}
    names = {v: k for k, v in vars(uvm).items() if k.startswith("UVM_") and isinstance(v, int) and v in handlers}
    # UVM's commands are plain numbers (no _IOC size): the argument must be the structure exactly
    self.ioctls = Ioctls((Ioctl(cmd, names[cmd], self._status(names[cmd], handler), struct) for cmd, (struct, handler) in handlers.items()),
                         sized=False)

  def _status(self, name: str, handler: Callable) -> Callable:
    """The handler as the ioctl runs it: an RM status lands in rmStatus; every call but UVM_INITIALIZE and
    UVM_MM_INITIALIZE needs an initialized fd."""
    def call(fd: int, p) -> None:
      try:
        if fd not in self.initialized and handler not in (self._initialize, self._mm_initialize):
          raise RMStatus(rm.NV_ERR_ILLEGAL_ACTION, f"{name} before UVM_INITIALIZE on this fd")
        handler(fd, p)
        p.rmStatus = rm.NV_OK
      except RMStatus as e:
        p.rmStatus = e.status
        self.on_error(str(e))
    return call

  def close(self, fd: int) -> None:
    """Closing the UVM file that was initialized ends the process's UVM state: registrations, ranges, mappings."""
    if fd not in self.initialized: return
    self.initialized.discard(fd)
    for r in self.ranges:
      for x in r.mappings:
        x.memory.uvm_refs -= 1
        self.rm.release_memory(x.memory)
    self.ranges.clear(); self.gpus.clear(); self.vaspaces.clear()

  def _uuid(self, u: uvm.nv_uuid, registered: bool = True) -> bytes:
    b = bytes(u.uuid)
    if b != self.rm.uuid: raise RMStatus(rm.NV_ERR_GPU_UUID_NOT_FOUND, f"no GPU has UUID {b.hex()}")
    if registered and b not in self.gpus: raise RMStatus(rm.NV_ERR_INVALID_DEVICE, f"GPU {b.hex()} is not registered (UVM_REGISTER_GPU)")
    return b

  def _ctl(self, fd: int) -> None:
    if not self.is_ctl_fd(fd): raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"rmCtrlFd {fd} is not an open /dev/nvidiactl")

  def _initialize(self, fd, p) -> None:
    if p.flags: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"UVM_INITIALIZE flags {p.flags:#x}: this model knows none")
    if fd in self.initialized: raise RMStatus(rm.NV_ERR_INVALID_STATE, "UVM_INITIALIZE twice on one fd")
    self.initialized.add(fd)

  def _mm_initialize(self, fd, p) -> None:
    if p.uvmFd not in self.initialized: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"uvmFd {p.uvmFd} is not an initialized UVM fd")

  def _register_gpu(self, fd, p) -> None:
    b = self._uuid(p.gpu_uuid, registered=False)
    if b in self.gpus: raise RMStatus(rm.NV_ERR_INVALID_DEVICE, f"GPU {b.hex()} is already registered")
    self.gpus.add(b)

  def _register_vaspace(self, fd, p) -> None:
    b = self._uuid(p.gpuUuid)
    self._ctl(p.rmCtrlFd)
    vas = self.rm.obj(p.hClient, p.hVaSpace, (cl.FERMI_VASPACE_A,), what="VA space")
    if not vas.params.flags & rm.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED:
      raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"VA space {p.hVaSpace:#x} was not created IS_EXTERNALLY_OWNED: UVM cannot own it")
    if b in self.vaspaces: raise RMStatus(rm.NV_ERR_INVALID_DEVICE, f"GPU {b.hex()} already has a VA space registered")
    self.vaspaces[b] = (p.hClient, p.hVaSpace)

  def _add_range(self, r: Range) -> None:
    if not r.length or r.base % PAGE or r.length % PAGE:
      raise RMStatus(rm.NV_ERR_INVALID_ADDRESS, f"range [{r.base:#x}, +{r.length:#x}) is not 4 KiB-aligned and non-empty")
    if any(o.base < r.base + r.length and r.base < o.base + o.length for o in self.ranges):
      raise RMStatus(rm.NV_ERR_UVM_ADDRESS_IN_USE, f"[{r.base:#x}, +{r.length:#x}) overlaps a UVM range")
    bisect.insort(self.ranges, r, key=lambda x: x.base)

  def _register_channel(self, fd, p) -> None:
    b = self._uuid(p.gpuUuid)
    self._ctl(p.rmCtrlFd)
    if b not in self.vaspaces: raise RMStatus(rm.NV_ERR_INVALID_DEVICE, "UVM_REGISTER_CHANNEL before UVM_REGISTER_GPU_VASPACE")
    self.rm.obj(p.hClient, p.hChannel, GPFIFO_CLASSES, what="channel")
    if any(r.channel == (p.hClient, p.hChannel) for r in self.ranges):
      raise RMStatus(rm.NV_ERR_INVALID_STATE, f"channel {p.hChannel:#x} is already registered")
    self._add_range(Range(p.base, p.length, channel=(p.hClient, p.hChannel)))

  def _unregister_channel(self, fd, p) -> None:
    self._uuid(p.gpuUuid)
    r = next((r for r in self.ranges if r.channel == (p.hClient, p.hChannel)), None)
    if r is None: raise RMStatus(rm.NV_ERR_INVALID_CHANNEL, f"channel {p.hChannel:#x} is not registered")
    self.ranges.remove(r)

  def _create_range(self, fd, p) -> None: self._add_range(Range(p.base, p.length))

  def _range(self, base: int, length: int) -> Range:
    r = next((r for r in self.ranges if r.channel is None and r.base <= base and base + length <= r.base + r.length), None)
    if r is None: raise RMStatus(rm.NV_ERR_INVALID_ADDRESS, f"[{base:#x}, +{length:#x}) is not inside one external range")
    return r

  def _map_external(self, fd, p) -> None:
    if not p.length or p.base % PAGE or p.length % PAGE or p.offset % PAGE:
      raise RMStatus(rm.NV_ERR_INVALID_ADDRESS, f"mapping [{p.base:#x}, +{p.length:#x}) at offset {p.offset:#x} is not 4 KiB-aligned")
    r = self._range(p.base, p.length)
    if not 1 <= p.gpuAttributesCount <= uvm.UVM_MAX_GPUS:
      raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"gpuAttributesCount {p.gpuAttributesCount} is not 1..{uvm.UVM_MAX_GPUS}")
    for a in p.perGpuAttributes[:p.gpuAttributesCount]:
      if self._uuid(a.gpuUuid) not in self.vaspaces: raise RMStatus(rm.NV_ERR_INVALID_DEVICE, "the GPU has no registered VA space")
      if a.gpuMappingType > uvm.UvmGpuMappingTypeReadWriteAtomic:
        raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"gpuMappingType {a.gpuMappingType}")
    self._ctl(p.rmCtrlFd)
    m = self.rm.memory(p.hClient, p.hMemory)
    if p.offset + p.length > m.size:
      raise RMStatus(rm.NV_ERR_INVALID_LIMIT, f"mapping {p.length:#x} bytes at offset {p.offset:#x} of a {m.size:#x}-byte memory")
    if any(x.va < p.base + p.length and p.base < x.va + x.length for x in r.mappings):
      raise RMStatus(rm.NV_ERR_UVM_ADDRESS_IN_USE, f"[{p.base:#x}, +{p.length:#x}) is already mapped")
    r.mappings.append(Mapping(p.base, p.length, m, p.offset))
    m.uvm_refs += 1

  def _free(self, fd, p) -> None:
    r = next((r for r in self.ranges if r.base == p.base and r.channel is None), None)
    if r is None or p.length != r.length:
      raise RMStatus(rm.NV_ERR_INVALID_ADDRESS, f"UVM_FREE of [{p.base:#x}, +{p.length:#x}): no external range is exactly that")
    self.ranges.remove(r)
    for x in r.mappings:
      x.memory.uvm_refs -= 1
      self.rm.release_memory(x.memory)

  def translate(self, va: int, size: int) -> memoryview:
    """The GPU's view of [va, va+size) inside one mapping: the memory UVM mapped there."""
    (view,) = self._pieces(va, size, single=True)
    return view

  def read(self, addr: int, n: int) -> bytes:
    """What a GPU engine reads at `addr` (emu.ring's memory interface); a hole is an MMU fault."""
    return b"".join(bytes(v) for v in self._pieces(addr, n))

  def write(self, addr: int, data: bytes | memoryview) -> None:
    pos = 0
    for v in self._pieces(addr, len(data)):
      v[:] = data[pos:pos + len(v)]
      pos += len(v)

  def _pieces(self, va: int, size: int, single: bool = False) -> list[memoryview]:
    out, end = [], va + size
    while va < end or not out:
      m = self._mapping(va)
      if m is None or (single and va + size > m.va + m.length):
        raise DMAFault(f"GPU MMU fault: [{va:#x}, {end:#x}) is not mapped in the GPU's VA space")
      n = min(end, m.va + m.length) - va
      out.append(m.memory.view[m.offset + va - m.va:m.offset + va - m.va + n])
      va += n
      if not size: break
    return out

  def lookup(self, addr: int, write: bool) -> tuple[int, int, int] | None:
    """The shader cores' view (emu.memory.GpuMemory): the mapped run holding `addr`, or None (an MMU fault)."""
    if (m := self._mapping(addr)) is None: return None
    if m.host is None: m.host = ctypes.addressof(ctypes.c_char.from_buffer(m.memory.view)) + m.offset
    return m.va, m.length, m.host

  def fetch(self, addr: int) -> tuple[int, int, int] | None: return self.lookup(addr, False)

  def mapping(self, va: int) -> Mapping | None:
    """The mapping that holds `va` (None where nothing is mapped)."""
    return self._mapping(va)

  def _mapping(self, va: int) -> Mapping | None:
    i = bisect.bisect_right(self.ranges, va, key=lambda x: x.base) - 1
    return next((x for x in self.ranges[i].mappings if x.va <= va < x.va + x.length), None) if i >= 0 else None
