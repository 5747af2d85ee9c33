"""One NVIDIA GPU opened through RM: the object tree, memory and channels (reference nv_driver.md sections 3 and 5).

  root client (0x41) ── device (0x80) ─┬─ subdevice (0x2080) ── usermode (HOPPER/AMPERE/TURING_USERMODE_A)
                                       ├─ virtual memory (0x70): the hDma of MAP_MEMORY_DMA
                                       ├─ VA space (0x90f1), owned by UVM
                                       ├─ memory: vidmem (0x40), sysmem (0x3e)
                                       └─ channel group (0xa06c) ─┬─ context share (0x9067) on the VA space
                                                                  └─ GPFIFO channel (0xc86f/0xc56f) ── compute / copy object

Every buffer's GPU VA is its CPU VA (reserved in this process), mapped by UVM into the VA space; CPU-visible
buffers are also mapped to the CPU there. The classes come from the GPU's class list, newest first.
"""
from __future__ import annotations
import ctypes
from dataclasses import dataclass

from autogen.nv import classes as cl, compute, copy, ctrl, rm, uvm
from drivers.nv.rm import RMClient, RMError, field
from drivers.system.kernel import KernelInterface
from drivers.system.mmio import MMIO

PAGE, HUGE = 0x1000, 0x200000
USERMODE_SIZE = 0x10000                  # the usermode doorbell page mapped to the CPU (clc361.h: NOTIFY_CHANNEL_PENDING)
CHANNEL_VA_SIZE = 0x4000000              # UVM_REGISTER_CHANNEL: VA UVM may use for the channel's RM buffers
VA_BASE, VA_SIZE = 0x1000, 0x1fffffb000000   # FERMI_VASPACE_A range (reference section 3, step 14)
VIRTUAL_LIMIT = 0x1ffffffffffff          # NV01_MEMORY_VIRTUAL: the whole range, for MAP_MEMORY_DMA
HOST_HANDLES = 0xC0FE0000                # where the handles this driver picks for OS descriptors start
# the classes hcq drives, newest first (a GPU lists one of each: g_gpu_class_list.c, reference section 0)
GPFIFO_CLASSES = (cl.HOPPER_CHANNEL_GPFIFO_A, cl.AMPERE_CHANNEL_GPFIFO_A)
COMPUTE_CLASSES = (compute.HOPPER_COMPUTE_A, compute.AMPERE_COMPUTE_B, compute.AMPERE_COMPUTE_A)
COPY_CLASSES = (copy.HOPPER_DMA_COPY_A, copy.AMPERE_DMA_COPY_B, copy.AMPERE_DMA_COPY_A)
USERMODE_CLASSES = (cl.HOPPER_USERMODE_A, cl.AMPERE_USERMODE_A, cl.TURING_USERMODE_A)
GR_INFO = {"sm_version": ctrl.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION, "gpcs": ctrl.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS,
           "tpc_per_gpc": ctrl.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
           "sm_per_tpc": ctrl.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC,
           "max_warps_per_sm": ctrl.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM}


def pick(offered: list[int], wanted: tuple[int, ...], what: str) -> int:
  if (c := next((c for c in wanted if c in offered), None)) is None:
    raise RuntimeError(f"the GPU offers no {what} class hcq drives (it lists {', '.join(f'{c:#x}' for c in offered)}; "
                       f"hcq knows {', '.join(f'{c:#x}' for c in wanted)})")
  return c


@dataclass
class NVMemory:
  """A buffer: RM memory object `handle`, GPU VA = CPU VA `va`; `view` is its CPU mapping (None if not CPU-visible)."""
  va: int
  size: int
  handle: int
  view: MMIO | None
  vram: bool
  fd: int | None = None                  # the /dev/nvidia<N> fd its CPU mapping lives on
  uvm_range: bool = False                # UVM holds an external range over it (UVM_FREE undoes it and its mapping)


@dataclass
class NVChannel:
  """A GPFIFO channel: its ring (entries of 8 bytes) then USERD (GPGet/GPPut) in one buffer, its engine object, and
  the work-submit token written to the usermode doorbell (NOTIFY_CHANNEL_PENDING) to make it fetch."""
  handle: int
  cls: int
  ring: NVMemory
  entries: int
  userd_offset: int
  engine: int                            # compute or copy object handle
  engine_class: int
  token: int
  notifier: NVMemory
  uvm_va: int | None = None              # the VA range registered for it with UVM_REGISTER_CHANNEL


class NVGPU:
  def __init__(self, kernel: KernelInterface, index: int = 0):
    self.rmc = RMClient(kernel)
    self.k = kernel
    self.channels: list[NVChannel] = []
    self._next_handle = HOST_HANDLES       # OS-descriptor handles are the client's to choose
    self.memory: list[NVMemory] = []
    try: self._open(index)
    except BaseException:
      self.rmc.close()
      raise

  def _open(self, index: int) -> None:
    r = self.rmc
    cards = r.cards()
    if index >= len(cards): raise RuntimeError(f"NV:{index} does not exist: the NVIDIA driver lists {len(cards)} GPU(s)")
    self.card = cards[index]
    self.dev_fd = r.open_gpu_file(self.card.minor)
    info = r.control(r.client, ctrl.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, ctrl.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(gpuId=self.card.gpu_id))
    self.device = r.alloc(r.client, 0, cl.NV01_DEVICE_0, cl.NV0080_ALLOC_PARAMETERS(
      deviceId=info.deviceInstance, hClientShare=r.client, vaMode=rm.NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES))
    self.subdevice = r.alloc(self.device, 0, cl.NV20_SUBDEVICE_0, cl.NV2080_ALLOC_PARAMETERS(subDeviceId=0))
    self.virtmem = r.alloc(self.device, 0, cl.NV01_MEMORY_VIRTUAL, cl.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS(limit=VIRTUAL_LIMIT))
    self.classes = self._class_list()
    self.gpfifo_class = pick(self.classes, GPFIFO_CLASSES, "GPFIFO channel")
    self.compute_class = pick(self.classes, COMPUTE_CLASSES, "compute")
    self.copy_class = pick(self.classes, COPY_CLASSES, "copy engine")
    self.usermode = r.alloc(self.subdevice, 0, pick(self.classes, USERMODE_CLASSES, "usermode"))
    # the doorbell page (reference section 3, step 12) is only ever stored to: mapped NVOS33 ACCESS_WRITE_ONLY
    _, _, self.doorbell = r.map_cpu(self.card.minor, self.device, self.usermode, USERMODE_SIZE, None,
                                    field(rm.NVOS33_FLAGS_ACCESS, rm.NVOS33_FLAGS_ACCESS_WRITE_ONLY))
    self.gr = self._gr_info()
    self.vaspace = r.alloc(self.device, 0, cl.FERMI_VASPACE_A, rm.NV_VASPACE_ALLOCATION_PARAMETERS(
      vaBase=VA_BASE, vaSize=VA_SIZE,
      flags=rm.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | rm.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED))
    gid = r.control(self.subdevice, ctrl.NV2080_CTRL_CMD_GPU_GET_GID_INFO, ctrl.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(
      flags=ctrl.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY, length=16))
    self.uuid = bytes(gid.data[:gid.length])
    r.uvm_call(uvm.UVM_REGISTER_GPU, uvm.UVM_REGISTER_GPU_PARAMS(gpu_uuid=self._uuid(), rmCtrlFd=-1))
    r.uvm_call(uvm.UVM_REGISTER_GPU_VASPACE, uvm.UVM_REGISTER_GPU_VASPACE_PARAMS(
      gpuUuid=self._uuid(), rmCtrlFd=r.ctl, hClient=r.client, hVaSpace=self.vaspace))
    self.tsg = r.alloc(self.device, 0, cl.KEPLER_CHANNEL_GROUP_A, rm.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
      engineType=cl.NV2080_ENGINE_TYPE_GRAPHICS))
    self.ctxshare = r.alloc(self.tsg, 0, cl.FERMI_CONTEXT_SHARE_A, rm.NV_CTXSHARE_ALLOCATION_PARAMETERS(
      hVASpace=self.vaspace, flags=rm.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))

  def _uuid(self) -> uvm.nv_uuid: return uvm.nv_uuid((ctypes.c_uint8 * 16)(*self.uuid))

  def _class_list(self) -> list[int]:
    """NV0080_CTRL_CMD_GPU_GET_CLASSLIST twice: the count (classList NULL), then the list."""
    p = self.rmc.control(self.device, ctrl.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, ctrl.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS())
    buf = (ctypes.c_uint32 * p.numClasses)()
    p = self.rmc.control(self.device, ctrl.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, ctrl.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS(
      numClasses=len(buf), classList=ctypes.addressof(buf)))
    return list(buf[:p.numClasses])

  def _gr_info(self) -> dict[str, int]:
    infos = (ctrl.NV2080_CTRL_GR_INFO * len(GR_INFO))(*(ctrl.NV2080_CTRL_GR_INFO(index=i) for i in GR_INFO.values()))
    self.rmc.control(self.subdevice, ctrl.NV2080_CTRL_CMD_GR_GET_INFO, ctrl.NV2080_CTRL_GR_GET_INFO_PARAMS(
      grInfoListSize=len(infos), grInfoList=ctypes.addressof(infos)))
    return {name: info.data for name, info in zip(GR_INFO, infos)}

  @property
  def arch(self) -> str:
    """sm_<major><minor> from GR_INFO SM_VERSION (0x900 on Hopper: sm_90)."""
    v = self.gr["sm_version"]
    return f"sm_{v >> 8}{v & 0xff}"

  # --- memory
  def alloc(self, size: int, vram: bool = True, cpu_access: bool = False, contiguous: bool = False) -> NVMemory:
    """vidmem (NV1_MEMORY_USER) or uncached sysmem (NV01_MEMORY_SYSTEM), mapped for the GPU at a VA reserved in this
    process, and for the CPU at the same address when `cpu_access` (sysmem always is)."""
    align = HUGE if size >= 8 * HUGE else PAGE
    size = -(-max(size, 1) // align) * align
    attr = field(rm.NVOS32_ATTR_PHYSICALITY, rm.NVOS32_ATTR_PHYSICALITY_CONTIGUOUS if contiguous or not vram
                 else rm.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS)
    if vram:
      if align == HUGE: attr |= field(rm.NVOS32_ATTR_PAGE_SIZE, rm.NVOS32_ATTR_PAGE_SIZE_HUGE)
      attr2 = field(rm.NVOS32_ATTR2_GPU_CACHEABLE, rm.NVOS32_ATTR2_GPU_CACHEABLE_YES) | \
        field(rm.NVOS32_ATTR2_ZBC, rm.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC)
      if align == HUGE: attr2 |= field(rm.NVOS32_ATTR2_PAGE_SIZE_HUGE, rm.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB)
      cls, kind = cl.NV1_MEMORY_USER, rm.NVOS32_TYPE_IMAGE
    else:
      attr |= field(rm.NVOS32_ATTR_LOCATION, rm.NVOS32_ATTR_LOCATION_PCI) | field(rm.NVOS32_ATTR_COHERENCY, rm.NVOS32_ATTR_COHERENCY_UNCACHED)
      attr2 = field(rm.NVOS32_ATTR2_GPU_CACHEABLE, rm.NVOS32_ATTR2_GPU_CACHEABLE_NO)
      cls, kind = cl.NV01_MEMORY_SYSTEM, rm.NVOS32_TYPE_NOTIFIER
    flags = rm.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED | rm.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE | rm.NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT
    if vram: flags |= rm.NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM
    handle = self.rmc.alloc(self.device, 0, cls, rm.NV_MEMORY_ALLOCATION_PARAMS(
      owner=self.rmc.client, type=kind, flags=flags, attr=attr, attr2=attr2, format=6, size=size, alignment=align, limit=size - 1))
    va = self.k.reserve(size, align)
    mem = NVMemory(va, size, handle, None, vram)
    try:
      if cpu_access or not vram:
        mem.fd, _, mem.view = self.rmc.map_cpu(self.card.minor, self.device, handle, size, va,
                                               field(rm.NVOS33_FLAGS_CACHING_TYPE, rm.NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED))
      self._map_gpu(mem)
    except BaseException:
      self._release(mem)
      raise
    self.memory.append(mem)
    return mem

  def alloc_host(self, size: int) -> NVMemory:
    """Host memory of this process (signals, staging), pinned by RM as an OS descriptor (NV_ESC_RM_ALLOC_MEMORY on the
    GPU file, NV01_MEMORY_SYSTEM_OS_DESCRIPTOR) and mapped for the GPU at its own address (reference section 5)."""
    size = -(-max(size, 1) // PAGE) * PAGE
    va, view = self.k.anon(size)
    self._next_handle += 1
    arg = rm.nv_ioctl_nvos02_parameters_with_fd(fd=-1, params=rm.NVOS02_PARAMETERS(
      hRoot=self.rmc.client, hObjectParent=self.device, hObjectNew=self._next_handle, hClass=cl.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
      flags=field(rm.NVOS02_FLAGS_PHYSICALITY, rm.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS) |
      field(rm.NVOS02_FLAGS_COHERENCY, rm.NVOS02_FLAGS_COHERENCY_CACHED) | field(rm.NVOS02_FLAGS_MAPPING, rm.NVOS02_FLAGS_MAPPING_NO_MAP),
      pMemory=va, limit=size - 1))
    try:
      self.rmc.escape(self.dev_fd, rm.NV_ESC_RM_ALLOC_MEMORY, arg)
      if arg.params.status != rm.NV_OK: raise RMError(f"RM_ALLOC_MEMORY of {size:#x} bytes of host memory", arg.params.status)
    except BaseException:
      self.k.release(va, size)
      raise
    mem = NVMemory(va, size, arg.params.hObjectNew, view, False)
    try: self._map_gpu(mem)
    except BaseException:
      self._release(mem)
      raise
    self.memory.append(mem)
    return mem

  def _map_gpu(self, mem: NVMemory) -> None:
    """UVM external range over the buffer's VA, RM_MAP_MEMORY_DMA at that fixed offset, then UVM maps it for this GPU."""
    r = self.rmc
    r.uvm_call(uvm.UVM_CREATE_EXTERNAL_RANGE, uvm.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=mem.va, length=mem.size))
    mem.uvm_range = True
    dma = rm.NVOS46_PARAMETERS(hClient=r.client, hDevice=self.device, hDma=self.virtmem, hMemory=mem.handle, length=mem.size,
                               flags=field(rm.NVOS46_FLAGS_PAGE_SIZE, rm.NVOS46_FLAGS_PAGE_SIZE_4KB) |
                               field(rm.NVOS46_FLAGS_CACHE_SNOOP, rm.NVOS46_FLAGS_CACHE_SNOOP_ENABLE) |
                               field(rm.NVOS46_FLAGS_DMA_OFFSET_FIXED, rm.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE), dmaOffset=mem.va)
    r.escape(r.ctl, rm.NV_ESC_RM_MAP_MEMORY_DMA, dma)
    if dma.status != rm.NV_OK: raise RMError(f"RM_MAP_MEMORY_DMA of {mem.handle:#x} at {mem.va:#x}", dma.status)
    if dma.dmaOffset != mem.va: raise RuntimeError(f"RM mapped {mem.handle:#x} at {dma.dmaOffset:#x}, not at the fixed {mem.va:#x}")
    p = uvm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS(base=mem.va, length=mem.size, rmCtrlFd=r.ctl, hClient=r.client, hMemory=mem.handle,
                                               gpuAttributesCount=1)
    p.perGpuAttributes[0] = uvm.UvmGpuMappingAttributes(gpuUuid=self._uuid(), gpuMappingType=uvm.UvmGpuMappingTypeReadWriteAtomic)
    r.uvm_call(uvm.UVM_MAP_EXTERNAL_ALLOCATION, p)

  def _release(self, mem: NVMemory) -> None:
    """free(), also for a buffer whose setup failed part way: what was set up is undone, in reverse."""
    if mem.uvm_range: self.rmc.uvm_call(uvm.UVM_FREE, uvm.UVM_FREE_PARAMS(base=mem.va, length=mem.size))
    if mem.fd is not None: self.rmc.close_file(mem.fd)
    self.rmc.free(self.device, mem.handle)
    self.k.release(mem.va, mem.size)

  def free(self, mem: NVMemory) -> None:
    self.memory.remove(mem)
    self._release(mem)

  # --- channels
  def create_channel(self, engine: str, entries: int = 0x400) -> NVChannel:
    """A GPFIFO channel in the channel group with its engine object ("compute" or "copy"), its doorbell token, and
    UVM told about it. The ring and USERD share one CPU-visible vidmem buffer (ring at 0, USERD after it).
    Channels run once the group is scheduled (schedule())."""
    if entries & (entries - 1) or entries < 2: raise ValueError(f"GPFIFO entries {entries}: use a power of two")
    engine_class = {"compute": self.compute_class, "copy": self.copy_class}[engine]
    userd = -(-entries * 8 // PAGE) * PAGE
    ring = self.alloc(userd + PAGE, cpu_access=True, contiguous=True)
    notifier = self.alloc(PAGE, vram=False)
    r = self.rmc
    p = cl.NV_CHANNEL_ALLOC_PARAMS(hObjectError=notifier.handle, hObjectBuffer=ring.handle, gpFifoOffset=ring.va,
                                   gpFifoEntries=entries, hContextShare=self.ctxshare)
    p.hUserdMemory[0], p.userdOffset[0] = ring.handle, userd
    handle = r.alloc(self.tsg, 0, self.gpfifo_class, p)
    ch = NVChannel(handle, self.gpfifo_class, ring, entries, userd, 0, engine_class, 0, notifier)
    self.channels.append(ch)
    ch.engine = r.alloc(handle, 0, engine_class)
    ch.token = r.control(handle, ctrl.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                         ctrl.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS(workSubmitToken=0xffffffff)).workSubmitToken
    ch.uvm_va = self.k.reserve(CHANNEL_VA_SIZE, HUGE)
    r.uvm_call(uvm.UVM_REGISTER_CHANNEL, uvm.UVM_REGISTER_CHANNEL_PARAMS(
      gpuUuid=self._uuid(), rmCtrlFd=r.ctl, hClient=r.client, hChannel=handle, base=ch.uvm_va, length=CHANNEL_VA_SIZE))
    return ch

  def schedule(self) -> None:
    """NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: the channel group's channels become runnable."""
    self.rmc.control(self.tsg, ctrl.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, ctrl.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1))

  def ring_doorbell(self, ch: NVChannel) -> None:
    """NOTIFY_CHANNEL_PENDING (clc361.h) with the channel's work-submit token: the GPU fetches its new GPFIFO entries."""
    self.doorbell.write32(cl.NVC361_NOTIFY_CHANNEL_PENDING, ch.token)

  def destroy_channel(self, ch: NVChannel) -> None:
    self.channels.remove(ch)
    if ch.uvm_va is not None:
      self.rmc.uvm_call(uvm.UVM_UNREGISTER_CHANNEL, uvm.UVM_UNREGISTER_CHANNEL_PARAMS(
        gpuUuid=self._uuid(), hClient=self.rmc.client, hChannel=ch.handle))
      self.k.release(ch.uvm_va, CHANNEL_VA_SIZE)
    self.rmc.free(self.tsg, ch.handle)   # and its engine object
    self.free(ch.ring)
    self.free(ch.notifier)

  def close(self) -> None:
    for ch in list(self.channels): self.destroy_channel(ch)
    for mem in list(self.memory): self.free(mem)
    self.rmc.free(0, self.rmc.client)   # freeing the root client frees its whole tree
    self.rmc.close()
