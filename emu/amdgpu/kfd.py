"""A model of the amdgpu KFD kernel driver (/dev/kfd, its sysfs topology, the render node) over one
emulated Navi31, implementing drivers.system.kernel.KernelInterface.

It plays the kernel's part: it owns the process's GPU VM (real page tables in VRAM), allocates VRAM,
GTT and user-pointer memory, creates PM4/SDMA queues with doorbells, and delivers events (queue
interrupts, memory faults). The ioctl structures are kfd_ioctl.h's (autogen.kfd). ioctls it does not
model fail with ENOTTY and a message naming them.
"""
from __future__ import annotations
import ctypes, errno, mmap, threading
from dataclasses import dataclass

import numpy as np

from autogen import kfd
from autogen.amd import gc_11_0_0 as gc, soc21_enum
from emu.plugin import KernelModel
from emu.amdgpu.gpu import GPUModel, IP_BASES, DeviceError
from emu.amdgpu.mmu import PTE_VALID, PTE_SYSTEM, PTE_SNOOPED, PTE_READABLE, PTE_WRITEABLE, PTE_EXECUTABLE, MTYPE_SHIFT
from emu.amdgpu.pagetable import PageTables, VRAMAllocator, PAGE
from emu.amdgpu.pm4 import PM4Engine
from emu.amdgpu.sdma import SDMAEngine

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"
GPU_ID, RENDER_MINOR = 0x5A1E, 128
RENDER_NODE = f"/dev/dri/renderD{RENDER_MINOR}"
IP_DISCOVERY = f"/sys/class/drm/renderD{RENDER_MINOR}/device/ip_discovery/die/0"
# hw ids of the IP discovery table (discovery.h) the driver reads through sysfs
HW_IDS = {"GC": 11, "SDMA0": 42, "NBIO": 108, "MMHUB": 34, "MP0": 255, "MP1": 1, "HDP": 41, "OSSSYS": 40}
IP_VERSIONS = {"GC": (11, 0, 0), "SDMA0": (6, 0, 0), "NBIO": (4, 3, 0), "MMHUB": (3, 0, 0), "MP0": (13, 0, 0),
               "MP1": (13, 0, 0), "HDP": (6, 0, 0), "OSSSYS": (6, 0, 0)}
# KFD topology node properties of a Navi31 (RX 7900 XTX): 96 CUs in 6 SEs x 2 SAs x 8 CUs
GPU_PROPERTIES = {"cpu_cores_count": 0, "simd_count": 192, "mem_banks_count": 1, "gfx_target_version": 110000,
                  "simd_per_cu": 2, "array_count": 12, "simd_arrays_per_engine": 2, "cu_per_simd_array": 8,
                  "max_waves_per_simd": 16, "max_slots_scratch_cu": 32, "lds_size_in_kb": 64, "wave_front_size": 32,
                  "num_xcc": 1, "vendor_id": 0x1002, "device_id": 0x744C, "drm_render_minor": RENDER_MINOR,
                  "num_sdma_engines": 2, "num_sdma_queues_per_engine": 6, "local_mem_size": 0, "gpu_id": GPU_ID}
VA_BASE, VA_END = 0x1000_0000_0000, 0x2000_0000_0000    # VA handed out by reserve(), clear of where host mmaps land
DOORBELL_MMAP = 0x3 << 60                                # mmap offset of the doorbell page on /dev/kfd
DOORBELL_PAGE = 0x2000
LDS_APERTURE, SCRATCH_APERTURE = 1 << 48, 2 << 48        # kfd_flat_memory.c, gfx9 and later


def _ioc_fail(code: int, what: str) -> OSError:
  return OSError(code, f"KFD model: {what}")


@dataclass
class BO:
  handle: int
  va: int
  size: int
  kind: str                    # "vram", "gtt", "userptr"
  flags: int
  paddr: int | None = None     # VRAM offset
  host: object = None          # host backing (gtt: mmap; userptr: the user's memory)
  view: memoryview | None = None
  bus: list[int] | None = None
  mapped: bool = False

  @property
  def mmap_offset(self) -> int: return self.handle << 32


@dataclass
class Event:
  id: int
  type: int
  auto_reset: bool
  signaled: bool = False
  fault: DeviceError | None = None


class DoorbellPage:
  """The process's doorbell page: a 64-bit store to slot i wakes queue i."""
  size = DOORBELL_PAGE

  def __init__(self, model: KFDModel):
    self.model, self.values = model, [0] * (DOORBELL_PAGE // 8)

  def read(self, offset: int, size: int) -> int:
    return self.values[offset // 8] >> (8 * (offset % 8)) & ((1 << (8 * size)) - 1)

  def write(self, offset: int, size: int, value: int) -> None:
    if size not in (4, 8) or offset % size: raise ValueError(f"doorbell write of {size} bytes at {offset:#x}: use aligned 32/64-bit stores")
    slot = offset // 8
    self.values[slot] = value
    q = self.model.queues.get(slot)
    if q is None: raise ValueError(f"doorbell slot {slot} belongs to no queue of this process")
    q.ring_doorbell(value)


class KFDModel:
  def __init__(self, vram_size: int = 512 << 20):
    self.gpu = GPUModel(vram_size)
    self.gpu.on_error.append(self._on_error)
    self.gpu.on_interrupt.append(self._on_interrupt)
    # the top 64 MiB of VRAM are the kernel's (page tables); the rest is for buffers
    self.vram_alloc = VRAMAllocator(0, vram_size - (64 << 20))
    self.pt_alloc = VRAMAllocator(vram_size - (64 << 20), vram_size)
    self.fds: dict[int, str] = {}
    self.bos: dict[int, BO] = {}
    self.queues: dict[int, PM4Engine | SDMAEngine] = {}
    self.events: dict[int, Event] = {}
    self.cond = threading.Condition()
    self.vm: PageTables | None = None
    self.doorbells = DoorbellPage(self)
    self.files = self._files()
    self.anon_maps: dict[int, mmap.mmap] = {}
    self._next = {"fd": 1000, "handle": 1, "event": 1, "va": VA_BASE}
    self.version = (kfd.KFD_IOCTL_MAJOR_VERSION, kfd.KFD_IOCTL_MINOR_VERSION)
    self.handlers = {kfd.AMDKFD_IOC_GET_VERSION: self._get_version, kfd.AMDKFD_IOC_ACQUIRE_VM: self._acquire_vm,
                     kfd.AMDKFD_IOC_RUNTIME_ENABLE: self._runtime_enable,
                     kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: self._alloc, kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU: self._free,
                     kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU: self._map, kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: self._unmap,
                     kfd.AMDKFD_IOC_CREATE_QUEUE: self._create_queue, kfd.AMDKFD_IOC_DESTROY_QUEUE: self._destroy_queue,
                     kfd.AMDKFD_IOC_CREATE_EVENT: self._create_event, kfd.AMDKFD_IOC_DESTROY_EVENT: self._destroy_event,
                     kfd.AMDKFD_IOC_SET_EVENT: self._set_event, kfd.AMDKFD_IOC_WAIT_EVENTS: self._wait_events}
    self.ioctl_names = {v: k for k, v in vars(kfd).items() if k.startswith("AMDKFD_IOC_")}

  def _new(self, what: str) -> int:
    self._next[what] += 1
    return self._next[what] - 1

  # --- files
  def _files(self) -> dict[str, str]:
    out = {f"{TOPOLOGY}/0/gpu_id": "0", f"{TOPOLOGY}/0/properties": "cpu_cores_count 2\nsimd_count 0\n",
           f"{TOPOLOGY}/1/gpu_id": str(GPU_ID),
           f"{TOPOLOGY}/1/properties": "".join(f"{k} {v}\n" for k, v in GPU_PROPERTIES.items())}
    for ip, hwid in HW_IDS.items():
      d = f"{IP_DISCOVERY}/{hwid}/0"
      for k, v in zip(("major", "minor", "revision"), IP_VERSIONS[ip]): out[f"{d}/{k}"] = str(v)
      out[f"{d}/base_addr"] = "".join(f"0x{b:08X}\n" for b in IP_BASES[ip])
    return out

  def read_text(self, path: str) -> str:
    if (text := self.files.get(path)) is None: raise FileNotFoundError(errno.ENOENT, f"KFD model: no such file {path}")
    return text

  def listdir(self, path: str) -> list[str]:
    path = path.rstrip("/") + "/"
    names = sorted({p[len(path):].split("/")[0] for p in self.files if p.startswith(path)})
    if not names: raise FileNotFoundError(errno.ENOENT, f"KFD model: no such directory {path}")
    return names

  def exists(self, path: str) -> bool:
    return path in ("/dev/kfd", RENDER_NODE) or path in self.files or any(p.startswith(path.rstrip("/") + "/") for p in self.files)

  def open(self, path: str) -> int:
    if path not in ("/dev/kfd", RENDER_NODE): raise FileNotFoundError(errno.ENOENT, f"KFD model: no device file {path}")
    fd = self._new("fd")
    self.fds[fd] = path
    return fd

  def close(self, fd: int) -> None:
    if self.fds.pop(fd, None) == "/dev/kfd": self.shutdown()

  # --- address space
  def reserve(self, size: int, align: int) -> int:
    va = (self._next["va"] + align - 1) & ~(align - 1)
    if va + size > VA_END: raise _ioc_fail(errno.ENOMEM, "out of virtual address space")
    self._next["va"] = va + size
    return va

  def anon(self, size: int) -> tuple[int, memoryview]:
    """Process memory (what mmap(MAP_ANONYMOUS) gives): its address is also its GPU VA once USERPTR-mapped."""
    m = mmap.mmap(-1, size)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    self.anon_maps[addr] = m
    return addr, memoryview(m)

  def release(self, va: int, size: int) -> None:
    self.anon_maps.pop(va, None)   # reserved VA is not handed out again (like fresh mmap hints)

  def mmap(self, fd: int, va: int | None, size: int, offset: int) -> tuple[int, memoryview | DoorbellPage]:
    """-> (address, memory): a memoryview for buffer objects, the doorbell page's register callbacks for doorbells."""
    path = self.fds.get(fd)
    if path == "/dev/kfd" and offset == DOORBELL_MMAP:
      return va or self.reserve(DOORBELL_PAGE, PAGE), self.doorbells
    bo = next((b for b in self.bos.values() if b.mmap_offset == offset), None) if path == RENDER_NODE else None
    if bo is None or bo.view is None: raise _ioc_fail(errno.EINVAL, f"mmap of offset {offset:#x} on {path}: no such buffer object")
    if size > bo.size: raise _ioc_fail(errno.EINVAL, f"mmap of {size:#x} bytes of a {bo.size:#x}-byte buffer object")
    return va if va is not None else bo.va, bo.view[:size]

  # --- ioctls
  def ioctl(self, fd: int, request: int, arg: ctypes.Structure) -> None:
    if self.fds.get(fd) != "/dev/kfd": raise _ioc_fail(errno.ENOTTY, f"ioctl {request:#x} on fd {fd}, which is not /dev/kfd")
    handler = self.handlers.get(request)
    if handler is None:
      raise _ioc_fail(errno.ENOTTY, f"{self.ioctl_names.get(request, hex(request))} is not modelled")
    handler(arg)

  def _get_version(self, a) -> None: a.major_version, a.minor_version = self.version

  def _acquire_vm(self, a) -> None:
    if a.gpu_id != GPU_ID: raise _ioc_fail(errno.EINVAL, f"ACQUIRE_VM for unknown gpu_id {a.gpu_id:#x}")
    if self.fds.get(a.drm_fd) != RENDER_NODE: raise _ioc_fail(errno.EINVAL, f"ACQUIRE_VM with drm_fd {a.drm_fd}, not an open render node")
    if self.vm is None:
      self.vm = PageTables(self.gpu.vram, self.pt_alloc)
      self._program_vm()

  def _program_vm(self) -> None:
    """What amdgpu.ko has programmed by the time a process owns a VM: the hub translating (its gmc hw_init) with the
    process's page tables as the context, and the VMID's flat apertures as KFD sets them for gfx11 (update_qpd_v11:
    SH_MEM_CONFIG unaligned, 64-bit, instruction prefetch 3; SH_MEM_BASES from kfd_flat_memory.c's gfx9+ apertures,
    LDS at 1 << 48 and scratch at 2 << 48). The model's queues all run in VMID 0."""
    self.gpu.mmu.set_enabled(None)
    self.gpu.mmu.set_context(self.vm.root, 0, (1 << 48) - 1)
    self.gpu.regs[self.gpu.sh_mem_slot(0, False)] = gc.regSH_MEM_CONFIG.encode(
      ADDRESS_MODE=soc21_enum.SH_MEM_ADDRESS_MODE_64, ALIGNMENT_MODE=soc21_enum.SH_MEM_ALIGNMENT_MODE_UNALIGNED, INITIAL_INST_PREFETCH=3)
    self.gpu.regs[self.gpu.sh_mem_slot(0, True)] = gc.regSH_MEM_BASES.encode(SHARED_BASE=LDS_APERTURE >> 48, PRIVATE_BASE=SCRATCH_APERTURE >> 48)

  def _runtime_enable(self, a) -> None: a.capabilities_mask = 0

  def _need_vm(self) -> None:
    if self.vm is None: raise _ioc_fail(errno.EINVAL, "no VM: call AMDKFD_IOC_ACQUIRE_VM first")

  def _alloc(self, a) -> None:
    self._need_vm()
    if a.gpu_id != GPU_ID: raise _ioc_fail(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU for unknown gpu_id {a.gpu_id:#x}")
    size, flags = a.size, a.flags & 0xFFFFFFFF
    if size == 0 or size % PAGE or a.va_addr % PAGE: raise _ioc_fail(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU of {size:#x} bytes at {a.va_addr:#x}: both must be page aligned and non-zero")
    bo = BO(self._new("handle"), a.va_addr, size, "", flags)
    if flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM:
      bo.kind = "vram"
      try: bo.paddr = self.vram_alloc.alloc(size)
      except MemoryError as e: raise _ioc_fail(errno.ENOMEM, str(e)) from None
      bo.view = self.gpu.vram.view[bo.paddr:bo.paddr + size]
      self.gpu.vram.u8[bo.paddr:bo.paddr + size] = 0
    elif flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT:
      bo.kind, bo.host = "gtt", mmap.mmap(-1, size)
      bo.view = memoryview(bo.host)
    elif flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR:
      if not a.mmap_offset: raise _ioc_fail(errno.EINVAL, "USERPTR allocation without the user address in mmap_offset")
      bo.kind, bo.host = "userptr", (ctypes.c_uint8 * size).from_address(a.mmap_offset)
      bo.view = memoryview(bo.host).cast("B")
    else: raise _ioc_fail(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU flags {flags:#x} name no domain (VRAM, GTT or USERPTR)")
    if bo.kind != "vram": bo.bus = self.gpu.dma.map(bo.view, contiguous=True)   # an IOMMU mapping: one IOVA range
    self.bos[bo.handle] = bo
    a.handle, a.mmap_offset = bo.handle, bo.mmap_offset

  def _bo(self, handle: int) -> BO:
    if (bo := self.bos.get(handle)) is None: raise _ioc_fail(errno.EINVAL, f"no buffer object with handle {handle}")
    return bo

  def _free(self, a) -> None:
    bo = self._bo(a.handle)
    if bo.mapped: self._set_mapping(bo, False)
    if bo.kind == "vram": self.vram_alloc.free(bo.paddr)
    else: self.gpu.dma.unmap(bo.bus)
    del self.bos[a.handle]

  def _device_ids(self, a) -> None:
    ids = (ctypes.c_uint32 * a.n_devices).from_address(a.device_ids_array_ptr) if a.n_devices else []
    if list(ids) != [GPU_ID]: raise _ioc_fail(errno.EINVAL, f"device list {list(ids)} is not [{GPU_ID:#x}]")

  def _map(self, a) -> None:
    self._device_ids(a)
    self._set_mapping(self._bo(a.handle), True)
    a.n_success = 1

  def _unmap(self, a) -> None:
    self._device_ids(a)
    self._set_mapping(self._bo(a.handle), False)
    a.n_success = 1

  def _set_mapping(self, bo: BO, on: bool) -> None:
    pages = bo.size // PAGE
    if not on:
      self.vm.unmap(bo.va, pages)
    else:
      perm = PTE_VALID | PTE_READABLE | PTE_WRITEABLE * bool(bo.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE) | \
             PTE_EXECUTABLE * bool(bo.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE)
      if bo.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED: perm |= soc21_enum.MTYPE_UC << MTYPE_SHIFT   # gmc_v11's mtype for UC
      if bo.kind == "vram": addrs = bo.paddr + np.arange(pages, dtype=np.uint64) * PAGE
      else:
        addrs = np.array(bo.bus, dtype=np.uint64)
        perm |= PTE_SYSTEM | PTE_SNOOPED
      self.vm.map(bo.va, addrs | np.uint64(perm))
    bo.mapped = on
    self.gpu.mmu.invalidate()

  def _create_queue(self, a) -> None:
    self._need_vm()
    qid = min(set(range(len(self.queues) + 1)) - set(self.queues))
    name = f"queue {qid}"
    if a.ring_size & (a.ring_size - 1) or a.ring_size < 256: raise _ioc_fail(errno.EINVAL, f"ring size {a.ring_size} is not a power of two >= 256")
    if a.queue_type == kfd.KFD_IOC_QUEUE_TYPE_COMPUTE:
      q = PM4Engine(self.gpu, f"compute {name}", a.ring_base_address, a.ring_size, a.read_pointer_address, a.write_pointer_address)
    elif a.queue_type == kfd.KFD_IOC_QUEUE_TYPE_SDMA:
      q = SDMAEngine(self.gpu, f"SDMA {name}", a.ring_base_address, a.ring_size, a.read_pointer_address, a.write_pointer_address)
    else: raise _ioc_fail(errno.EINVAL, f"queue type {a.queue_type} is not modelled (COMPUTE and SDMA are)")
    self.queues[qid] = q
    self.gpu.add_engine(q)
    a.queue_id, a.doorbell_offset = qid, DOORBELL_MMAP + qid * 8

  def _destroy_queue(self, a) -> None:
    if (q := self.queues.pop(a.queue_id, None)) is None: raise _ioc_fail(errno.EINVAL, f"no queue {a.queue_id}")
    self.gpu.remove_engine(q)

  # --- events
  def _create_event(self, a) -> None:
    ev = Event(self._new("event"), a.event_type, bool(a.auto_reset))
    with self.cond: self.events[ev.id] = ev
    a.event_id, a.event_slot_index, a.event_trigger_data = ev.id, ev.id, ev.id

  def _destroy_event(self, a) -> None:
    with self.cond:
      if self.events.pop(a.event_id, None) is None: raise _ioc_fail(errno.EINVAL, f"no event {a.event_id}")

  def _set_event(self, a) -> None:
    self._signal(lambda e: e.id == a.event_id)

  def _signal(self, match, fault: DeviceError | None = None) -> None:
    with self.cond:
      for e in self.events.values():
        if match(e):
          e.signaled = True
          e.fault = fault or e.fault
      self.cond.notify_all()

  def _on_interrupt(self, source: str, ctx: int, engine: str = "") -> None:
    self._signal(lambda e: e.type == kfd.KFD_IOC_EVENT_SIGNAL and e.id == ctx)

  def _on_error(self, err: DeviceError) -> None:
    kind = kfd.KFD_IOC_EVENT_MEMORY if err.va is not None else kfd.KFD_IOC_EVENT_HW_EXCEPTION
    self._signal(lambda e: e.type == kind, err)

  def _wait_events(self, a) -> None:
    data = (kfd.kfd_event_data * a.num_events).from_address(a.events_ptr)
    ids = [d.event_id for d in data]
    with self.cond:
      for i in ids:
        if i not in self.events: raise _ioc_fail(errno.EINVAL, f"WAIT_EVENTS on unknown event {i}")
      ready = lambda: [self.events[i] for i in ids if self.events[i].signaled]
      done = self.cond.wait_for(lambda: (len(ready()) == len(ids)) if a.wait_for_all else bool(ready()), a.timeout / 1000)
      for d in data:
        e = self.events[d.event_id]
        if e.signaled and e.fault is not None:
          if e.type == kfd.KFD_IOC_EVENT_MEMORY:
            d.memory_exception_data.gpu_id, d.memory_exception_data.va = GPU_ID, e.fault.va
            d.memory_exception_data.failure.NotPresent = 1
          elif e.type == kfd.KFD_IOC_EVENT_HW_EXCEPTION:
            d.hw_exception_data.gpu_id, d.hw_exception_data.reset_cause = GPU_ID, kfd.KFD_HW_EXCEPTION_GPU_HANG
        if e.signaled and e.auto_reset and e.fault is None: e.signaled = False
      a.wait_result = kfd.KFD_IOC_WAIT_RESULT_COMPLETE if done else kfd.KFD_IOC_WAIT_RESULT_TIMEOUT

  def shutdown(self) -> None:
    self.gpu.shutdown()
    self.queues.clear()


# registered under hcq.models (pyproject.toml): kernel_interface(mock="kfd") is this model
MODEL = KernelModel("kfd", KFDModel)
