"""A model of NVIDIA's resource manager (RM): the object tree of clients, memory and channels that NV_ESC_RM_ALLOC,
_CONTROL, _FREE, _MAP_MEMORY and _MAP_MEMORY_DMA act on (driver branch 580 layouts, autogen.nv).

Strict as RM: a class the GPU does not list is NV_ERR_INVALID_CLASS; an unknown client NV_ERR_INVALID_CLIENT; an
unknown or wrong-class parent NV_ERR_INVALID_OBJECT_PARENT; a handle in use NV_ERR_INSERT_DUPLICATE_NAME; a control
or free of an unknown object NV_ERR_INVALID_OBJECT_HANDLE; an unknown control, or one the object's class does not
implement, NV_ERR_NOT_SUPPORTED; a control whose paramsSize is not the 580 structure's NV_ERR_INVALID_PARAM_STRUCT
(resControlLookup); required allocation parameters missing NV_ERR_INVALID_ARGUMENT (a class that takes none ignores
them, RM copying 0 bytes: resource_desc.c). Allocation parameters are read
with the 580 size of the class (RM copies its own size, reference section 2); the model also rejects a non-zero
NVOS21/NVOS64 paramsSize that is not that size (RM ignores the field), so a driver built on other layouts fails here.
OS-descriptor memory (NV_ESC_RM_ALLOC_MEMORY) must be pages the process has (the kernel pins them).
Unverified without a GPU: which of NV_ERR_INVALID_OBJECT_HANDLE / _PARENT / NV_ERR_OBJECT_NOT_FOUND RM returns on each
path for an unknown handle (resserv's clientGetResourceRef says OBJECT_NOT_FOUND on some); the model uses the above.
Not modelled: the debugger and event classes, MIG/SMC partitions,
confidential compute, RM's own choice of GPU VAs without DMA_OFFSET_FIXED beyond a first-fit in the virtual range.
"""
from __future__ import annotations
import ctypes, mmap, time
from dataclasses import dataclass, field
from typing import Callable

from autogen.nv import classes as cl, compute, copy, ctrl, rm
from common.alloc import RangeAllocator
from emu.nvgpu.chips import Chip
from emu.pci import Access, Region

PAGE = 0x1000
USERD_SIZE = 0x200                       # one channel's USERD (Nvc86fControl_struct, 512-byte aligned)
GPFIFO_ENTRY = 8
CLIENT_BASE, OBJECT_BASE = 0xC1D00000, 0xCAF00000   # handles RM chooses when the caller passes 0
GPFIFO_CLASSES = (cl.HOPPER_CHANNEL_GPFIFO_A, cl.AMPERE_CHANNEL_GPFIFO_A)
COMPUTE_CLASSES = (compute.HOPPER_COMPUTE_A, compute.AMPERE_COMPUTE_A, compute.AMPERE_COMPUTE_B)
COPY_CLASSES = (copy.HOPPER_DMA_COPY_A, copy.AMPERE_DMA_COPY_A, copy.AMPERE_DMA_COPY_B)
USERMODE_CLASSES = (cl.HOPPER_USERMODE_A, cl.AMPERE_USERMODE_A, cl.TURING_USERMODE_A)
MEMORY_CLASSES = (cl.NV1_MEMORY_USER, cl.NV01_MEMORY_SYSTEM, cl.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
TSG_ENGINES = (cl.NV2080_ENGINE_TYPE_GRAPHICS, *range(cl.NV2080_ENGINE_TYPE_COPY0, cl.NV2080_ENGINE_TYPE_COPY0 + 10))


class RMStatus(Exception):
  """An RM call's failure: the NV_STATUS that lands in the caller's `status` field, with why."""
  def __init__(self, status: int, why: str):
    super().__init__(why)
    self.status = status


@dataclass(eq=False)
class Obj:
  handle: int
  cls: int
  parent: Obj | None
  children: list[Obj] = field(default_factory=list)
  params: ctypes.Structure | None = None


@dataclass(eq=False)
class Memory(Obj):
  size: int = 0
  vram: bool = True
  paddr: int | None = None               # VRAM offset
  view: memoryview | None = None
  host: mmap.mmap | None = None          # sysmem backing
  uvm_refs: int = 0                      # UVM mappings keep the memory (UVM holds its own duplicate of the handle)
  freed: bool = False


@dataclass(eq=False)
class Virtual(Obj):
  """NV01_MEMORY_VIRTUAL: a range of GPU VA that MAP_MEMORY_DMA maps memory into."""
  va: RangeAllocator | None = None
  maps: dict[int, tuple[Memory, int, int]] = field(default_factory=dict)   # dmaOffset -> (memory, offset, length)


@dataclass(eq=False)
class Channel(Obj):
  chid: int = 0
  gpfifo_va: int = 0
  entries: int = 0
  userd: tuple[Memory, int] | None = None
  error_notifier: Memory | None = None
  engines: dict[int, Obj] = field(default_factory=dict)   # engine class -> object
  pending: int = 0                        # doorbell rings so far

  @property
  def token(self) -> int: return self.chid   # NVC36F work-submit token: this model's channel id


@dataclass(eq=False)
class Group(Obj):
  """KEPLER_CHANNEL_GROUP_A: a TSG; its channels run once GPFIFO_SCHEDULE enabled it."""
  scheduled: bool = False


@dataclass(eq=False)
class Client(Obj):
  objects: dict[int, Obj] = field(default_factory=dict)
  fd: int = -1                            # the file it was allocated on: closing it frees the client


class Usermode(Region):
  """The usermode page (clc361.h): PTIMER at TIME_0/TIME_1, NOTIFY_CHANNEL_PENDING takes a work-submit token."""
  name, size, valid = "usermode page", cl.NVC361_NV_USERMODE__SIZE, (Access("registers", 4, 8),)

  def __init__(self, model: RMModel): self.model = model

  def _read(self, offset: int, size: int) -> int:
    ns = time.monotonic_ns()
    if (offset, size) == (cl.NVC361_TIME_0, 4): return ns & 0xFFFFFFFF
    if (offset, size) == (cl.NVC361_TIME_1, 4): return ns >> 32
    if (offset, size) == (cl.NVC361_TIME_0, 8): return ns
    raise ValueError(f"usermode read of {size} bytes at {offset:#x}: only TIME_0/TIME_1 (0x80, 0x84) are readable")

  def _write(self, offset: int, size: int, value: int) -> None:
    if (offset, size) != (cl.NVC361_NOTIFY_CHANNEL_PENDING, 4):
      raise ValueError(f"usermode write of {size} bytes at {offset:#x}: the doorbell is a 32-bit store to 0x90")
    self.model.notify(value)


class RMModel:
  def __init__(self, chip: Chip, vram_size: int, version: str):
    self.chip, self.version = chip, version
    self.vram = memoryview(mmap.mmap(-1, vram_size))
    self.vram_alloc = RangeAllocator(0, vram_size, "VRAM")
    self.clients: dict[int, Client] = {}
    self.channels: dict[int, Channel] = {}
    self.usermode = Usermode(self)
    self.on_doorbell: list[Callable[[Channel], None]] = []   # the GPFIFO processor hooks in here
    self.on_channel_free: list[Callable[[Channel], None]] = []
    self.gpu_id, self.uuid = 0x100, bytes(range(0xA0, 0xB0))
    self._next = {"client": CLIENT_BASE, "object": OBJECT_BASE, "chid": 1}
    # class -> (parent classes, allocation parameters (None: takes none), required, constructor)
    self.alloc_rules: dict[int, tuple[tuple[int, ...], type | None, bool, Callable]] = {
      # a device's parameters are RS_OPTIONAL, but allocating one without them is NV_ERR_INVALID_ARGUMENT (alloc_free.c)
      cl.NV01_DEVICE_0: ((rm.NV01_ROOT_CLIENT,), cl.NV0080_ALLOC_PARAMETERS, True, self._device),
      cl.NV20_SUBDEVICE_0: ((cl.NV01_DEVICE_0,), cl.NV2080_ALLOC_PARAMETERS, False, self._subdevice),
      cl.NV01_MEMORY_VIRTUAL: ((cl.NV01_DEVICE_0,), cl.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS, True, self._virtual),
      cl.NV1_MEMORY_USER: ((cl.NV01_DEVICE_0,), rm.NV_MEMORY_ALLOCATION_PARAMS, True, self._memory),
      cl.NV01_MEMORY_SYSTEM: ((cl.NV01_DEVICE_0,), rm.NV_MEMORY_ALLOCATION_PARAMS, True, self._memory),
      cl.FERMI_VASPACE_A: ((cl.NV01_DEVICE_0,), rm.NV_VASPACE_ALLOCATION_PARAMETERS, True, self._vaspace),
      cl.KEPLER_CHANNEL_GROUP_A: ((cl.NV01_DEVICE_0,), rm.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS, True, self._tsg),
      cl.FERMI_CONTEXT_SHARE_A: ((cl.KEPLER_CHANNEL_GROUP_A,), rm.NV_CTXSHARE_ALLOCATION_PARAMETERS, True, self._ctxshare),
      **{c: ((cl.NV20_SUBDEVICE_0,), None, False, self._plain) for c in USERMODE_CLASSES},
      **{c: ((cl.KEPLER_CHANNEL_GROUP_A,), cl.NV_CHANNEL_ALLOC_PARAMS, True, self._channel) for c in GPFIFO_CLASSES},
      **{c: (GPFIFO_CLASSES, rm.NV_GR_ALLOCATION_PARAMETERS, False, self._engine) for c in COMPUTE_CLASSES},
      **{c: (GPFIFO_CLASSES, cl.NVB0B5_ALLOCATION_PARAMETERS, False, self._engine) for c in COPY_CLASSES},
    }
    # control command -> (classes implementing it, parameters, handler)
    self.controls: dict[int, tuple[tuple[int, ...], type, Callable]] = {
      ctrl.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2: ((rm.NV01_ROOT_CLIENT,), ctrl.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS,
                                                         self._build_version),
      ctrl.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: ((rm.NV01_ROOT_CLIENT,), ctrl.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS, self._id_info),
      ctrl.NV0080_CTRL_CMD_GPU_GET_CLASSLIST: ((cl.NV01_DEVICE_0,), ctrl.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS, self._classlist),
      ctrl.NV2080_CTRL_CMD_GPU_GET_GID_INFO: ((cl.NV20_SUBDEVICE_0,), ctrl.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS, self._gid_info),
      ctrl.NV2080_CTRL_CMD_GR_GET_INFO: ((cl.NV20_SUBDEVICE_0,), ctrl.NV2080_CTRL_GR_GET_INFO_PARAMS, self._gr_info),
      ctrl.NV2080_CTRL_CMD_PERF_BOOST: ((cl.NV20_SUBDEVICE_0,), ctrl.NV2080_CTRL_PERF_BOOST_PARAMS, lambda o, p: None),
      ctrl.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: (GPFIFO_CLASSES, ctrl.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS,
                                                          self._work_submit_token),
      ctrl.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: ((cl.KEPLER_CHANNEL_GROUP_A,), ctrl.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS, self._schedule),
    }

  def _new(self, what: str) -> int:
    self._next[what] += 1
    return self._next[what] - 1

  # --- lookups
  def client(self, h: int) -> Client:
    if (c := self.clients.get(h)) is None: raise RMStatus(rm.NV_ERR_INVALID_CLIENT, f"no client {h:#x}")
    return c

  def obj(self, client: int, h: int, classes: tuple[int, ...] | None = None, status: int = rm.NV_ERR_INVALID_OBJECT_HANDLE,
          what: str = "object") -> Obj:
    c = self.client(client)
    o = c if h == client else c.objects.get(h)
    if o is None: raise RMStatus(status, f"client {client:#x} has no {what} {h:#x}")
    if classes is not None and o.cls not in classes:
      raise RMStatus(status, f"{what} {h:#x} is of class {o.cls:#x}, not {' or '.join(f'{k:#x}' for k in classes)}")
    return o

  def memory(self, client: int, h: int) -> Memory:
    return self.obj(client, h, MEMORY_CLASSES, what="memory")

  # --- RM_ALLOC / RM_FREE
  def alloc(self, root: int, parent: int, new: int, cls: int, params_ptr: int, params_size: int, fd: int = -1) -> int:
    if cls == rm.NV01_ROOT_CLIENT:
      if new in self.clients: raise RMStatus(rm.NV_ERR_INSERT_DUPLICATE_NAME, f"client handle {new:#x} is in use")
      h = new or self._new("client")
      self.clients[h] = Client(h, cls, None, fd=fd)
      return h
    if cls not in self.chip.classes:
      raise RMStatus(rm.NV_ERR_INVALID_CLASS, f"class {cls:#x} is not in {self.chip.name}'s class list")
    if cls not in self.alloc_rules: raise RMStatus(rm.NV_ERR_NOT_SUPPORTED, f"RM_ALLOC of class {cls:#x} is not modelled")
    parents, struct, required, make = self.alloc_rules[cls]
    client, p = self._place(root, parent, new, parents)
    params = None
    if struct is not None and params_ptr:
      if params_size and params_size != ctypes.sizeof(struct):
        raise RMStatus(rm.NV_ERR_INVALID_PARAM_STRUCT, f"class {cls:#x} takes {struct.__name__} of {ctypes.sizeof(struct)} bytes, "
                                                       f"paramsSize says {params_size}")
      params = struct.from_address(params_ptr)
    elif required and struct is not None: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"class {cls:#x} needs {struct.__name__}, got NULL")
    o = make(client, p, new or self._new("object"), cls, params)
    o.params = params and type(params).from_buffer_copy(params)
    return self._insert(client, p, o)

  def alloc_os_memory(self, root: int, parent: int, new: int, cls: int, addr: int, size: int, pages: memoryview | None) -> int:
    """NV_ESC_RM_ALLOC_MEMORY of NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: the caller's pages, pinned, become RM memory.
    `pages`: what the kernel could pin at [addr, addr+size) (None: not process memory)."""
    if cls != cl.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
      raise RMStatus(rm.NV_ERR_INVALID_CLASS, f"RM_ALLOC_MEMORY of class {cls:#x}: this model takes OS descriptors (0x71) only")
    client, p = self._place(root, parent, new, (cl.NV01_DEVICE_0,))
    if not size or addr % PAGE or size % PAGE:
      raise RMStatus(rm.NV_ERR_INVALID_ADDRESS, f"OS descriptor [{addr:#x}, +{size:#x}) is not page-aligned and non-empty")
    if pages is None: raise RMStatus(rm.NV_ERR_INVALID_ADDRESS, f"[{addr:#x}, +{size:#x}) is not process memory RM can pin")
    return self._insert(client, p, Memory(new or self._new("object"), cls, p, size=size, vram=False, view=pages))

  def _place(self, root: int, parent: int, new: int, parents: tuple[int, ...]) -> tuple[Client, Obj]:
    """The client and parent of a new object, and its handle free."""
    client = self.client(root)
    p = self.obj(root, parent, parents, rm.NV_ERR_INVALID_OBJECT_PARENT, "parent")
    if new and (new == root or new in client.objects): raise RMStatus(rm.NV_ERR_INSERT_DUPLICATE_NAME, f"handle {new:#x} is in use")
    return client, p

  def _insert(self, client: Client, parent: Obj, o: Obj) -> int:
    client.objects[o.handle] = o
    parent.children.append(o)
    return o.handle

  def free(self, root: int, h: int) -> None:
    client = self.client(root)
    if h == root:
      for o in list(client.children): self._free_tree(client, o)
      del self.clients[root]
      return
    if (o := client.objects.get(h)) is None: raise RMStatus(rm.NV_ERR_INVALID_OBJECT_HANDLE, f"RM_FREE of unknown handle {h:#x}")
    o.parent.children.remove(o)
    self._free_tree(client, o)

  def close_fd(self, fd: int) -> None:
    """The file a client was allocated on is closed: RM frees the client and its tree."""
    for h in [h for h, c in self.clients.items() if c.fd == fd]: self.free(h, h)

  def _free_tree(self, client: Client, o: Obj) -> None:
    """RM frees an object's descendants with it, children first."""
    for c in list(o.children): self._free_tree(client, c)
    del client.objects[o.handle]
    if isinstance(o, Memory):
      o.freed = True
      self.release_memory(o)
    if isinstance(o, Channel):
      del self.channels[o.chid]
      for hook in self.on_channel_free: hook(o)
    for v in (x for x in client.objects.values() if isinstance(x, Virtual)):   # RM unmaps what it DMA-mapped
      for off in [off for off, (m, _, _) in v.maps.items() if m is o]: v.va.free(off); del v.maps[off]

  def release_memory(self, m: Memory) -> None:
    """Backing goes when RM freed the handle and UVM unmapped it."""
    if m.freed and m.uvm_refs == 0 and m.view is not None:
      if m.vram: self.vram_alloc.free(m.paddr)    # sysmem is unmapped; an OS descriptor's pages are unpinned
      m.view = m.host = None

  # --- constructors
  def _plain(self, client, parent, h, cls, p) -> Obj: return Obj(h, cls, parent)

  def _device(self, client, parent, h, cls, p) -> Obj:
    if p.deviceId != 0: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"device instance {p.deviceId}: there is only 0")
    return Obj(h, cls, parent)

  def _subdevice(self, client, parent, h, cls, p) -> Obj:
    if p is not None and p.subDeviceId != 0: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"subdevice {p.subDeviceId}: there is only 0")
    return Obj(h, cls, parent)

  def _virtual(self, client, parent, h, cls, p) -> Virtual:
    if p.limit <= p.offset: raise RMStatus(rm.NV_ERR_INVALID_LIMIT, f"virtual memory limit {p.limit:#x} <= offset {p.offset:#x}")
    return Virtual(h, cls, parent, va=RangeAllocator(max(p.offset, PAGE), p.limit + 1 - max(p.offset, PAGE), "GPU VA"))

  def _memory(self, client, parent, h, cls, p) -> Memory:
    vram = cls == cl.NV1_MEMORY_USER
    if p.size == 0: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, "memory of size 0")
    if p.alignment & (p.alignment - 1): raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"alignment {p.alignment:#x} is not a power of two")
    size = -(-p.size // PAGE) * PAGE
    m = Memory(h, cls, parent, size=size, vram=vram)
    if vram:
      try: m.paddr = self.vram_alloc.alloc(size, max(p.alignment, PAGE))
      except MemoryError as e: raise RMStatus(rm.NV_ERR_NO_MEMORY, str(e)) from None
      m.view = self.vram[m.paddr:m.paddr + size]
      m.view[:] = bytes(size)
    else:
      m.host = mmap.mmap(-1, size)
      m.view = memoryview(m.host)
    p.size, p.limit, p.offset = size, size - 1, m.paddr or 0   # RM returns what it allocated
    return m

  def _vaspace(self, client, parent, h, cls, p) -> Obj:
    if p.vaBase % PAGE or p.vaSize % PAGE or not p.vaSize:
      raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"VA space [{p.vaBase:#x}, +{p.vaSize:#x}) is not page-aligned and non-empty")
    return Obj(h, cls, parent)

  def _tsg(self, client, parent, h, cls, p) -> Obj:
    if p.engineType not in TSG_ENGINES: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"channel group engine type {p.engineType}")
    return Group(h, cls, parent)

  def _ctxshare(self, client, parent, h, cls, p) -> Obj:
    self.obj(client.handle, p.hVASpace, (cl.FERMI_VASPACE_A,), what="VA space")
    return Obj(h, cls, parent)

  def _channel(self, client, parent, h, cls, p) -> Channel:
    c = client.handle
    if p.gpFifoEntries < 2 or p.gpFifoEntries & (p.gpFifoEntries - 1):
      raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"gpFifoEntries {p.gpFifoEntries} is not a power of two >= 2")
    ctx = self.obj(c, p.hContextShare, (cl.FERMI_CONTEXT_SHARE_A,), what="context share")
    if ctx.parent is not parent: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"context share {p.hContextShare:#x} is in another channel group")
    notifier, ring, userd = (self.memory(c, x) for x in (p.hObjectError, p.hObjectBuffer, p.hUserdMemory[0]))
    if p.userdOffset[0] % USERD_SIZE or p.userdOffset[0] + USERD_SIZE > userd.size:
      raise RMStatus(rm.NV_ERR_INVALID_OFFSET, f"USERD at {p.userdOffset[0]:#x} of a {userd.size:#x}-byte memory: "
                                               f"it is {USERD_SIZE:#x} bytes, {USERD_SIZE:#x}-aligned")
    size = p.gpFifoEntries * GPFIFO_ENTRY
    if p.gpFifoOffset % GPFIFO_ENTRY or not self.dma_mapped(c, ring, p.gpFifoOffset, size):
      raise RMStatus(rm.NV_ERR_INVALID_ADDRESS, f"GPFIFO [{p.gpFifoOffset:#x}, +{size:#x}) is not inside a GPU mapping of "
                                                f"hObjectBuffer {p.hObjectBuffer:#x}")
    ch = Channel(h, cls, parent, chid=self._new("chid"), gpfifo_va=p.gpFifoOffset, entries=p.gpFifoEntries,
                 userd=(userd, p.userdOffset[0]), error_notifier=notifier)
    self.channels[ch.chid] = ch
    return ch

  def _engine(self, client, parent, h, cls, p) -> Obj:
    if cls in parent.engines: raise RMStatus(rm.NV_ERR_INVALID_STATE, f"channel {parent.handle:#x} already has a {cls:#x} object")
    o = parent.engines[cls] = Obj(h, cls, parent)
    return o

  def dma_mapped(self, client: int, mem: Memory, va: int, size: int) -> bool:
    for v in (x for x in self.client(client).objects.values() if isinstance(x, Virtual)):
      for off, (m, moff, length) in v.maps.items():
        if m is mem and off <= va and va + size <= off + length: return True
    return False

  # --- RM_CONTROL
  def control(self, client: int, h: int, cmd: int, params_ptr: int, params_size: int) -> None:
    o = self.obj(client, h)
    if cmd not in self.controls: raise RMStatus(rm.NV_ERR_NOT_SUPPORTED, f"control {cmd:#x} is not implemented")
    classes, struct, handler = self.controls[cmd]
    if o.cls not in classes: raise RMStatus(rm.NV_ERR_NOT_SUPPORTED, f"control {cmd:#x} on an object of class {o.cls:#x}")
    if params_size != ctypes.sizeof(struct):
      raise RMStatus(rm.NV_ERR_INVALID_PARAM_STRUCT, f"control {cmd:#x} takes {struct.__name__} of {ctypes.sizeof(struct)} bytes, "
                                                     f"paramsSize is {params_size}")
    if not params_ptr: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"control {cmd:#x} with params NULL")
    handler(o, struct.from_address(params_ptr))

  def _build_version(self, o, p) -> None:
    p.driverVersionBuffer = p.versionBuffer = self.version.encode()
    p.driverBranch, p.titleBuffer = f"r{self.version.split('.')[0]}_00".encode(), b"hcq NVIDIA model"

  def _id_info(self, o, p) -> None:
    if p.gpuId != self.gpu_id: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"GET_ID_INFO_V2 of gpuId {p.gpuId:#x}: no such GPU")
    p.gpuFlags, p.deviceInstance, p.subDeviceInstance, p.numaId = 0, 0, 0, -1

  def _classlist(self, o, p) -> None:
    classes = self.chip.classes
    if p.classList:
      if p.numClasses < len(classes):
        raise RMStatus(rm.NV_ERR_INVALID_PARAM_STRUCT, f"classList of {p.numClasses} entries for {len(classes)} classes")
      (ctypes.c_uint32 * len(classes)).from_address(p.classList)[:] = classes
    p.numClasses = len(classes)

  def _gid_info(self, o, p) -> None:
    fmt = p.flags & 3
    if fmt == ctrl.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY: gid = self.uuid
    elif fmt == ctrl.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_ASCII:
      u = self.uuid.hex()
      gid = f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}".encode() + b"\0"
    else: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"GET_GID_INFO format {fmt}")
    if p.length and p.length < len(gid): raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"GET_GID_INFO length {p.length} < {len(gid)}")
    p.data[:len(gid)], p.length = gid, len(gid)

  def _gr_info(self, o, p) -> None:
    if not 0 < p.grInfoListSize <= ctrl.NV2080_CTRL_GR_INFO_MAX_SIZE or not p.grInfoList:
      raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"GR_GET_INFO of {p.grInfoListSize} entries at {p.grInfoList or 0:#x}")
    values = self.chip.gr_info()
    for info in (ctrl.NV2080_CTRL_GR_INFO * p.grInfoListSize).from_address(p.grInfoList):
      if info.index not in values: raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"GR info index {info.index} is not modelled")
      info.data = values[info.index]

  def _work_submit_token(self, o, p) -> None: p.workSubmitToken = o.token

  def _schedule(self, o, p) -> None:
    if not any(isinstance(c, Channel) for c in o.children):
      raise RMStatus(rm.NV_ERR_INVALID_STATE, f"GPFIFO_SCHEDULE of channel group {o.handle:#x}, which has no channel")
    o.scheduled = bool(p.bEnable)

  # --- MAP_MEMORY / MAP_MEMORY_DMA
  def map_cpu(self, client: int, device: int, h: int, offset: int, length: int) -> Obj:
    """What a /dev/nvidia<N> fd is bound to by NV_ESC_RM_MAP_MEMORY: memory, or the usermode page."""
    self.obj(client, device, (cl.NV01_DEVICE_0,), what="device")
    o = self.obj(client, h, MEMORY_CLASSES + USERMODE_CLASSES, what="memory")
    size = o.size if isinstance(o, Memory) else Usermode.size
    if not length or offset % PAGE or offset + length > size:
      raise RMStatus(rm.NV_ERR_INVALID_LIMIT, f"MAP_MEMORY of [{offset:#x}, +{length:#x}) of a {size:#x}-byte object")
    return o

  def map_dma(self, p: rm.NVOS46_PARAMETERS) -> None:
    self.obj(p.hClient, p.hDevice, (cl.NV01_DEVICE_0,), what="device")
    v = self.obj(p.hClient, p.hDma, (cl.NV01_MEMORY_VIRTUAL,), what="virtual memory")
    m = self.memory(p.hClient, p.hMemory)
    length = p.length or m.size
    if p.offset % PAGE or length % PAGE or p.offset + length > m.size:
      raise RMStatus(rm.NV_ERR_INVALID_LIMIT, f"MAP_MEMORY_DMA of [{p.offset:#x}, +{length:#x}) of a {m.size:#x}-byte memory")
    if p.flags >> rm.NVOS46_FLAGS_DMA_OFFSET_FIXED[1] & 1:
      if p.dmaOffset % PAGE: raise RMStatus(rm.NV_ERR_INVALID_OFFSET, f"fixed dmaOffset {p.dmaOffset:#x} is not page-aligned")
      if any(off < p.dmaOffset + length and p.dmaOffset < off + ln for off, (_, _, ln) in v.maps.items()):
        raise RMStatus(rm.NV_ERR_INVALID_ADDRESS, f"[{p.dmaOffset:#x}, +{length:#x}) overlaps a mapping of virtual memory {p.hDma:#x}")
      if not v.va.start <= p.dmaOffset or p.dmaOffset + length > v.va.start + v.va.size:
        raise RMStatus(rm.NV_ERR_INVALID_OFFSET, f"fixed dmaOffset {p.dmaOffset:#x} is outside virtual memory {p.hDma:#x}")
      v.va.take(p.dmaOffset, length)
    else:
      try: p.dmaOffset = v.va.alloc(length, PAGE)
      except MemoryError as e: raise RMStatus(rm.NV_ERR_NO_MEMORY, str(e)) from None
    v.maps[p.dmaOffset] = (m, p.offset, length)

  def notify(self, token: int) -> None:
    ch = self.channels.get(token)
    if ch is None: raise ValueError(f"doorbell with work-submit token {token:#x}: no channel has it")
    if not ch.parent.scheduled: raise ValueError(f"doorbell of channel {ch.handle:#x}: its channel group is not scheduled (GPFIFO_SCHEDULE)")
    ch.pending += 1
    for hook in self.on_doorbell: hook(ch)
