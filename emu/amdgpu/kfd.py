"""A model of the amdgpu KFD kernel driver (/dev/kfd, its sysfs topology, the render nodes) over two
emulated GPUs of one chip (chips.py: Navi31 by default; `kernel_interface(mock="kfd", chip="navi48")` serves two
Navi48s, `chip="navi44"` two Navi44s), implementing drivers.system.kernel.KernelInterface.

It plays the kernel's part for one process: per GPU it owns the process's GPU VM (real page tables in that GPU's VRAM),
allocates VRAM, GTT and user-pointer memory (USERPTR: pages of the process, mapped for that GPU's DMA, so two GPUs can
map the same host pages), creates PM4/SDMA queues; per process it hands out doorbells and delivers events (queue
interrupts, memory faults, with the faulting GPU's id). A GPU is built when the process first acquires its VM, and the
process's state goes when its last /dev/kfd file closes. The ioctl structures are kfd_ioctl.h's (autogen.kfd).

ioctls are decoded as kfd_chardev.c does: only the number (_IOC_NR) selects the command, and a number outside
[AMDKFD_COMMAND_START, AMDKFD_COMMAND_END) is ENOTTY; the argument is copied in and out with the kernel's own
definition of the command (its direction and size), the caller's size bounding both copies. Commands of that range
this model does not implement fail with EOPNOTSUPP and a message naming them (the real kernel implements them).
Errors follow amdgpu.ko: a freed BO must be unmapped first (EBUSY), a mapping whose VA range overlaps another
mapping is EINVAL (amdgpu_vm_bo_map), a bad handle is EINVAL (ENOMEM in MAP_MEMORY_TO_GPU, as the kernel), calls
before ACQUIRE_VM are ENODEV, an unknown queue type is ENOTSUPP (524). Not modelled: SVM ranges (so allocations,
which the kernel checks against SVM ranges only, never overlap-fail), CWSR/EOP buffers, AQL queues, queue priority
and percentage beyond their range checks, mapping a buffer object into another GPU's VM (peer access: MAP_MEMORY_TO_GPU
takes the GPU the BO belongs to only).
"""
from __future__ import annotations
import ctypes, errno, mmap, threading
from dataclasses import dataclass

import numpy as np

from autogen import kfd
from autogen.amd import soc21_enum
from common.alloc import RangeAllocator
from common.plugin import KernelModel
from emu.amdgpu.chips import Chip, NAVI31, NAVI44, NAVI48
from emu.amdgpu.gpu import GPUModel, DeviceError
from emu.amdgcn import targets
from emu.amdgpu.mmu import FAULT_EXECUTE, FAULT_WRITE, Fault, PTE_VALID, PTE_SYSTEM, PTE_SNOOPED, PTE_READABLE, PTE_WRITEABLE, PTE_EXECUTABLE
from emu.amdgpu.pagetable import PageTables, PAGE
from emu.amdgpu.pm4 import PM4Engine
from emu.amdgpu.registers import Block
from emu.amdgpu.sdma import SDMAEngine
from emu.kernel_model import COPY_IN, Ioctl, Ioctls, KernelDriverModel, ioc_nr
from emu.pci import Access, Region

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"
GPU_IDS, RENDER_MINORS = (0x5A1E, 0x7C3B), (128, 129)   # topology nodes 1 and 2 (node 0 is the CPU)
GPU_ID = GPU_IDS[0]
# hw ids of the IP discovery table (discovery.h) the driver reads through sysfs
HW_IDS = {"GC": 11, "SDMA0": 42, "NBIO": 108, "MMHUB": 34, "MP0": 255, "MP1": 1, "HDP": 41, "OSSSYS": 40}
CHIPS = {c.name: c for c in (NAVI31, NAVI48, NAVI44)}   # the chips a KFD model can serve


def gpu_properties(chip: Chip) -> dict[str, int]:
  """The KFD topology node properties of `chip` (kfd_topology.c): its CUs in SEs x SAs of 2 CUs per WGP, 2 SIMDs per CU."""
  g = chip.gc_info
  arrays, cus = g["gc_num_se"] * g["gc_num_sa_per_se"], 2 * (g["gc_num_wgp0_per_sa"] + g["gc_num_wgp1_per_sa"])
  return {"cpu_cores_count": 0, "simd_count": 2 * arrays * cus, "mem_banks_count": 1,
          "gfx_target_version": targets.for_gc(chip.versions["GC"]).gfx_target_version,
          "simd_per_cu": 2, "array_count": arrays, "simd_arrays_per_engine": g["gc_num_sa_per_se"], "cu_per_simd_array": cus,
          "max_waves_per_simd": 16, "max_slots_scratch_cu": 32, "lds_size_in_kb": 64, "wave_front_size": 32,
          "num_xcc": 1, "vendor_id": 0x1002, "device_id": chip.device_id,
          "num_sdma_engines": 2, "num_sdma_queues_per_engine": 6, "local_mem_size": 0}


IP_VERSIONS = NAVI31.versions
# the default model's (a Navi31, RX 7900 XTX): 96 CUs in 6 SEs x 2 SAs x 8 CUs
GPU_PROPERTIES = gpu_properties(NAVI31)
VA_BASE, VA_END = 0x1000_0000_0000, 0x2000_0000_0000    # VA handed out by reserve(), clear of where host mmaps land
DOORBELL_MMAP = 0x3 << 60                                # mmap offset of the doorbell page on /dev/kfd
DOORBELL_PAGE = 0x2000
LDS_APERTURE, SCRATCH_APERTURE = 1 << 48, 2 << 48        # kfd_flat_memory.c, gfx9 and later


ENOTSUPP = 524                                           # the kernel-internal errno CREATE_QUEUE returns for a bad type
MAX_QUEUE_PERCENTAGE, MAX_QUEUE_PRIORITY, MIN_RING_SIZE = 100, 15, 1024   # kfd_priv.h


def render_node(minor: int) -> str: return f"/dev/dri/renderD{minor}"
def ip_discovery(minor: int) -> str: return f"/sys/class/drm/renderD{minor}/device/ip_discovery/die/0"


RENDER_NODE = render_node(RENDER_MINORS[0])


def memory_exception(fault: Fault | None, va: int, gpu_id: int = GPU_ID) -> kfd.kfd_hsa_memory_exception_data:
  """The memory exception data of a GPU VM fault (kfd_signal_vm_fault_event): the faulting page and what the
  protection fault status says: NotPresent (no valid PTE), ReadOnly (a write to a page without WRITEABLE),
  NoExecute (an instruction fetch from a page without EXECUTABLE); `imprecise` when no fault was latched for `va`."""
  d = kfd.kfd_hsa_memory_exception_data(gpu_id=gpu_id, ErrorType=kfd.KFD_MEM_ERR_NO_RAS)
  d.va = va & ~(PAGE - 1)
  if fault is None: d.failure.imprecise = 1
  else:
    d.failure.NotPresent, d.failure.ReadOnly = int(not fault.permission), int(fault.kind == FAULT_WRITE)
    d.failure.NoExecute = int(fault.kind == FAULT_EXECUTE)
  return d


def process_memory(addr: int, size: int) -> bool:
  """Whether [addr, addr+size) lies in one writable mapping of this process (/proc/self/maps): what get_user_pages
  can pin."""
  with open("/proc/self/maps") as f:
    for line in f:
      lo, hi = (int(x, 16) for x in line.split(None, 1)[0].split("-"))
      if lo <= addr and addr + size <= hi: return line.split()[1].startswith("rw")
  return False


class ShaderEngineIndex(Block):
  """GRBM_GFX_INDEX, which a queue sets (SET_UCONFIG_REG) to program the SQ_THREAD_TRACE_* copy of one shader engine
  (emu/amdgpu/sqtt.py); the PCI model's GFX block owns it there."""
  name = ip = "GC"

  def __init__(self, dev):
    super().__init__(dev)
    self.STORAGE = (dev.gc.regGRBM_GFX_INDEX,)


class Node:
  """One GPU as this process sees it: the emulated chip, its VRAM allocators and the process's VM on it."""
  def __init__(self, gpu_id: int, minor: int, vram_size: int, chip: Chip, on_error, on_interrupt):
    self.gpu_id, self.render = gpu_id, render_node(minor)
    self.gpu = GPUModel(vram_size, chip=chip)
    self.gpu.regs.map(ShaderEngineIndex(self.gpu))   # what a user queue's thread-trace programming selects SEs with
    self.gpu.on_error.append(lambda err: on_error(self, err))
    self.gpu.on_interrupt.append(on_interrupt)
    # the top 64 MiB of VRAM are the kernel's (page tables); the rest is for buffers
    self.vram_alloc = RangeAllocator(0, vram_size - (64 << 20), "VRAM")
    self.pt_alloc = RangeAllocator(vram_size - (64 << 20), 64 << 20, "page-table VRAM")
    self.vm: PageTables | None = None
    self.vm_fd: int | None = None


@dataclass
class BO:
  handle: int
  va: int
  size: int
  kind: str                    # "vram", "gtt", "userptr"
  flags: int
  node: Node | None = None     # the GPU it was allocated for
  paddr: int | None = None     # VRAM offset
  host: object = None          # host backing (gtt: mmap; userptr: the user's memory)
  view: memoryview | None = None
  bus: list[int] | None = None
  attached: bool = False       # mapped to the GPU at least once (the kernel's attachment stays until the free)
  mapped: bool = False

  @property
  def mmap_offset(self) -> int: return (self.handle & 0xFFFFFFFF) << 32


@dataclass
class Event:
  id: int
  type: int
  auto_reset: bool
  signaled: bool = False
  fault: DeviceError | None = None
  memory: kfd.kfd_hsa_memory_exception_data | None = None   # what a MEMORY event reports
  fault_gpu: int = 0           # the gpu_id of the GPU that reported `fault`


class DoorbellPage(Region):
  """The process's doorbell page: a 64-bit store to slot i wakes queue i."""
  name, size, valid = "doorbell page", DOORBELL_PAGE, (Access("doorbells", 4, 8),)

  def __init__(self, model: KFDModel):
    self.model, self.values = model, [0] * (DOORBELL_PAGE // 8)

  def _read(self, offset: int, size: int) -> int:
    return self.values[offset // 8] >> (8 * (offset % 8)) & ((1 << (8 * size)) - 1)

  def _write(self, offset: int, size: int, value: int) -> None:
    slot = offset // 8
    self.values[slot] = value
    q = self.model.queues.get(slot)
    if q is None: raise ValueError(f"doorbell slot {slot} belongs to no queue of this process")
    q.ring_doorbell(value)


class KFDModel(KernelDriverModel):
  name, first_fd = "KFD model", 1000

  def __init__(self, vram_size: int = 512 << 20, chip: Chip | str = NAVI31):
    super().__init__(VA_BASE, VA_END)
    if isinstance(chip, str) and chip not in CHIPS: raise ValueError(f"the KFD model serves no chip {chip!r}; chips: {', '.join(CHIPS)}")
    self.vram_size, self.chip = vram_size, CHIPS[chip] if isinstance(chip, str) else chip
    self.nodes: dict[int, Node] = {}   # gpu_id -> the GPUs whose VM this process acquired
    self.bos: dict[int, BO] = {}
    self.queues: dict[int, PM4Engine | SDMAEngine] = {}
    self.events: dict[int, Event] = {}
    self.cond = threading.Condition()
    self.doorbells = DoorbellPage(self)
    self.files, self.devices = self._files(), {"/dev/kfd", *map(render_node, RENDER_MINORS)}
    self._next = {"handle": 1, "event": 1}
    self.version = (kfd.KFD_IOCTL_MAJOR_VERSION, kfd.KFD_IOCTL_MINOR_VERSION)
    # kfd_ioctl: only _IOC_NR selects the command; the argument is copied with the kernel's definition of it
    handlers = {"GET_VERSION": self._get_version, "ACQUIRE_VM": self._acquire_vm, "RUNTIME_ENABLE": self._runtime_enable,
                "ALLOC_MEMORY_OF_GPU": self._alloc, "FREE_MEMORY_OF_GPU": self._free, "MAP_MEMORY_TO_GPU": self._map,
                "UNMAP_MEMORY_FROM_GPU": self._unmap, "CREATE_QUEUE": self._create_queue, "DESTROY_QUEUE": self._destroy_queue,
                "CREATE_EVENT": self._create_event, "DESTROY_EVENT": self._destroy_event, "SET_EVENT": self._set_event,
                "WAIT_EVENTS": self._wait_events}
    self.ioctls = {"/dev/kfd": Ioctls((Ioctl(getattr(kfd, f"AMDKFD_IOC_{name}"), f"AMDKFD_IOC_{name}", handler,
                                             getattr(kfd, f"kfd_ioctl_{name.lower()}_args"), COPY_IN)
                                       for name, handler in handlers.items()), by_nr=True)}
    self.ioctl_names = {ioc_nr(v): k for k, v in vars(kfd).items() if k.startswith("AMDKFD_IOC_")}

  def _new(self, what: str) -> int:
    self._next[what] += 1
    return self._next[what] - 1

  # --- files
  def _files(self) -> dict[str, str]:
    out = {f"{TOPOLOGY}/0/gpu_id": "0", f"{TOPOLOGY}/0/properties": "cpu_cores_count 2\nsimd_count 0\n"}
    for n, (gpu_id, minor) in enumerate(zip(GPU_IDS, RENDER_MINORS), 1):
      props = {**gpu_properties(self.chip), "drm_render_minor": minor, "gpu_id": gpu_id}
      out[f"{TOPOLOGY}/{n}/gpu_id"] = str(gpu_id)
      out[f"{TOPOLOGY}/{n}/properties"] = "".join(f"{k} {v}\n" for k, v in props.items())
      for ip, hwid in HW_IDS.items():
        d = f"{ip_discovery(minor)}/{hwid}/0"
        for k, v in zip(("major", "minor", "revision"), self.chip.versions[ip]): out[f"{d}/{k}"] = str(v)
        out[f"{d}/base_addr"] = "".join(f"0x{b:08X}\n" for b in self.chip.ip_bases[ip])
    return out

  def _last_closed(self, path: str) -> None:
    if path == "/dev/kfd": self.shutdown()      # the process's KFD state goes with its last /dev/kfd file

  def mmap(self, fd: int, va: int | None, size: int, offset: int) -> tuple[int, memoryview | DoorbellPage]:
    """-> (address, memory): a memoryview for buffer objects, the doorbell page's register callbacks for doorbells."""
    path = self._file(fd, "mmap of")
    if path == "/dev/kfd" and offset == DOORBELL_MMAP:
      return va or self.reserve(DOORBELL_PAGE, PAGE), self.doorbells
    bo = next((b for b in self.bos.values() if b.mmap_offset == offset), None)
    if bo is None or bo.view is None or bo.node.render != path:
      raise self._fail(errno.EINVAL, f"mmap of offset {offset:#x} on {path}: no such buffer object of that GPU")
    if size > bo.size: raise self._fail(errno.EINVAL, f"mmap of {size:#x} bytes of a {bo.size:#x}-byte buffer object")
    return va if va is not None else bo.va, bo.view[:size]

  # --- ioctls
  def _unknown_ioctl(self, fd: int, path: str, request: int) -> OSError:
    nr = ioc_nr(request)
    if path != "/dev/kfd": return self._fail(errno.ENOTTY, f"ioctl {request:#x} on fd {fd}, which is not /dev/kfd")
    if not kfd.AMDKFD_COMMAND_START <= nr < kfd.AMDKFD_COMMAND_END:
      return self._fail(errno.ENOTTY, f"ioctl {request:#x}: number {nr:#x} is not a KFD command "
                                      f"({kfd.AMDKFD_COMMAND_START:#x}..{kfd.AMDKFD_COMMAND_END - 1:#x})")
    return self._fail(errno.EOPNOTSUPP, f"{self.ioctl_names[nr]} is not modelled")

  def _get_version(self, fd: int, a) -> None: a.major_version, a.minor_version = self.version

  def _acquire_vm(self, fd: int, a) -> None:
    if a.gpu_id not in GPU_IDS: raise self._fail(errno.EINVAL, f"ACQUIRE_VM for unknown gpu_id {a.gpu_id:#x}")
    minor = RENDER_MINORS[GPU_IDS.index(a.gpu_id)]
    if self.fds.get(a.drm_fd) != render_node(minor):
      raise self._fail(errno.EINVAL, f"ACQUIRE_VM of gpu_id {a.gpu_id:#x} with drm_fd {a.drm_fd}, not an open {render_node(minor)}")
    if (node := self.nodes.get(a.gpu_id)) is None:
      node = self.nodes[a.gpu_id] = Node(a.gpu_id, minor, self.vram_size, self.chip, self._on_error, self._on_interrupt)
    if node.vm_fd not in (None, a.drm_fd):   # kfd_process_device_init_vm: one render node file per process and GPU
      raise self._fail(errno.EBUSY, f"ACQUIRE_VM with drm_fd {a.drm_fd}: the VM was acquired through drm_fd {node.vm_fd}")
    node.vm_fd = a.drm_fd
    if node.vm is None:
      node.vm = PageTables(node.gpu.vram, node.pt_alloc)
      self._program_vm(node)

  def _program_vm(self, node: Node) -> None:
    """What amdgpu.ko has programmed by the time a process owns a VM: the hub translating (its gmc hw_init) with the
    process's page tables as the context, and the VMID's flat apertures as KFD sets them for gfx11 and gfx12 (update_qpd_v11, _v12:
    SH_MEM_CONFIG unaligned, 64-bit, instruction prefetch 3; SH_MEM_BASES from kfd_flat_memory.c's gfx9+ apertures,
    LDS at 1 << 48 and scratch at 2 << 48). The model's queues all run in VMID 0."""
    gpu, gc = node.gpu, node.gpu.gc
    gpu.mmu.set_enabled(None)
    gpu.mmu.set_context(node.vm.root, 0, (1 << 48) - 1)
    gpu.regs[gpu.sh_mem_slot(0, False)] = gc.regSH_MEM_CONFIG.encode(
      ADDRESS_MODE=soc21_enum.SH_MEM_ADDRESS_MODE_64, ALIGNMENT_MODE=soc21_enum.SH_MEM_ALIGNMENT_MODE_UNALIGNED, INITIAL_INST_PREFETCH=3)
    gpu.regs[gpu.sh_mem_slot(0, True)] = gc.regSH_MEM_BASES.encode(SHARED_BASE=LDS_APERTURE >> 48, PRIVATE_BASE=SCRATCH_APERTURE >> 48)

  def _runtime_enable(self, fd: int, a) -> None: a.capabilities_mask = 0

  def _bind(self, gpu_id: int, what: str) -> Node:
    """kfd_process_device_data_by_id + kfd_bind_process_to_device: the GPU must exist and its VM be acquired."""
    if gpu_id not in GPU_IDS: raise self._fail(errno.EINVAL, f"{what} for unknown gpu_id {gpu_id:#x}")
    if (node := self.nodes.get(gpu_id)) is None or node.vm is None:
      raise self._fail(errno.ENODEV, f"{what}: no VM on GPU {gpu_id:#x}: call AMDKFD_IOC_ACQUIRE_VM first")
    return node

  def _alloc(self, fd: int, a) -> None:
    node = self._bind(a.gpu_id, "ALLOC_MEMORY_OF_GPU")
    size, flags = a.size, a.flags & 0xFFFFFFFF
    if size == 0 or size % PAGE or a.va_addr % PAGE:
      raise self._fail(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU of {size:#x} bytes at {a.va_addr:#x}: both must be page aligned and non-zero")
    bo = BO(node.gpu_id << 32 | self._new("handle"), a.va_addr, size, "", flags, node)   # MAKE_HANDLE(gpu_id, idr handle)
    if flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM:
      bo.kind = "vram"
      try: bo.paddr = node.vram_alloc.alloc(size, PAGE)
      except MemoryError as e: raise self._fail(errno.ENOMEM, str(e)) from None
      bo.view = node.gpu.vram.view[bo.paddr:bo.paddr + size]
      node.gpu.vram.u8[bo.paddr:bo.paddr + size] = 0
    elif flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT:
      bo.kind, bo.host = "gtt", mmap.mmap(-1, size)
      bo.view = memoryview(bo.host)
    elif flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR:
      if not a.mmap_offset: raise self._fail(errno.EINVAL, "USERPTR allocation without the user address in mmap_offset")
      if a.mmap_offset % PAGE:   # the kernel pins whole pages, so the BO would start before the address: the model refuses
        raise self._fail(errno.EINVAL, f"USERPTR address {a.mmap_offset:#x} is not page aligned (the model maps whole pages only)")
      # the kernel pins the user pages (EFAULT where nothing writable is mapped): what anon() handed out, or any
      # writable mapping of this process
      if not self.space.holds(a.mmap_offset, size) and not process_memory(a.mmap_offset, size):
        raise self._fail(errno.EFAULT, f"USERPTR allocation of {size:#x} bytes at {a.mmap_offset:#x}: not writable memory "
                                      "of this process")
      bo.kind, bo.host = "userptr", (ctypes.c_uint8 * size).from_address(a.mmap_offset)
      bo.view = memoryview(bo.host).cast("B")
    else: raise self._fail(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU flags {flags:#x} name no domain (VRAM, GTT or USERPTR)")
    if bo.kind != "vram": bo.bus = node.gpu.dma.map(bo.view, contiguous=True)   # an IOMMU mapping: one IOVA range
    self.bos[bo.handle] = bo
    a.handle, a.mmap_offset = bo.handle, bo.mmap_offset

  def _bo(self, handle: int, what: str, missing: int = errno.EINVAL) -> BO:
    self._bind(handle >> 32, what)        # GET_GPU_ID(handle): the BO's GPU
    if (bo := self.bos.get(handle)) is None: raise self._fail(missing, f"{what}: no buffer object with handle {handle:#x}")
    return bo

  def _free(self, fd: int, a) -> None:
    bo = self._bo(a.handle, "FREE_MEMORY_OF_GPU")
    if bo.mapped:   # amdgpu_amdkfd_gpuvm_free_memory_of_gpu: still mapped
      raise self._fail(errno.EBUSY, f"FREE_MEMORY_OF_GPU of the BO at {bo.va:#x}: it is still mapped (UNMAP_MEMORY_FROM_GPU first)")
    if bo.kind == "vram": bo.node.vram_alloc.free(bo.paddr)
    else: bo.node.gpu.dma.unmap(bo.bus)
    del self.bos[a.handle]

  def _devices(self, a, what: str) -> list[int]:
    """The GPUs still to do: device_ids_array_ptr[n_success:n_devices], each a GPU of this process."""
    if not a.n_devices: raise self._fail(errno.EINVAL, f"{what} with n_devices = 0")
    if a.n_success > a.n_devices: raise self._fail(errno.EINVAL, f"{what}: n_success {a.n_success} exceeds n_devices {a.n_devices}")
    if not a.device_ids_array_ptr: raise self._fail(errno.EFAULT, f"{what}: device_ids_array_ptr is NULL")
    return list((ctypes.c_uint32 * a.n_devices).from_address(a.device_ids_array_ptr))[a.n_success:]

  def _map(self, fd: int, a) -> None:
    ids = self._devices(a, "MAP_MEMORY_TO_GPU")
    bo = self._bo(a.handle, "MAP_MEMORY_TO_GPU", errno.ENOMEM)   # kfd_ioctl_map_memory_to_gpu: an unknown handle is ENOMEM
    for gpu in ids:
      if self._bind(gpu, "MAP_MEMORY_TO_GPU") is not bo.node:
        raise self._fail(errno.EINVAL, f"MAP_MEMORY_TO_GPU of a BO of GPU {bo.node.gpu_id:#x} to GPU {gpu:#x}: mapping a buffer "
                                      "object to another GPU than the one it belongs to is not modelled")
      if not bo.mapped:
        end = bo.va + bo.size
        if other := next((b for b in self.bos.values() if b.mapped and b.node is bo.node and b.va < end and bo.va < b.va + b.size), None):
          raise self._fail(errno.EINVAL, f"MAP_MEMORY_TO_GPU of [{bo.va:#x}, {end:#x}): conflicts with the mapping "
                                        f"[{other.va:#x}, {other.va + other.size:#x}) of BO {other.handle:#x}")
        self._set_mapping(bo, True)
      a.n_success += 1

  def _unmap(self, fd: int, a) -> None:
    ids = self._devices(a, "UNMAP_MEMORY_FROM_GPU")
    bo = self._bo(a.handle, "UNMAP_MEMORY_FROM_GPU")
    for gpu in ids:
      if self._bind(gpu, "UNMAP_MEMORY_FROM_GPU") is not bo.node:
        raise self._fail(errno.EINVAL, f"UNMAP_MEMORY_FROM_GPU of a BO of GPU {bo.node.gpu_id:#x} from GPU {gpu:#x}: it is not mapped there")
      if not bo.attached: raise self._fail(errno.EINVAL, f"UNMAP_MEMORY_FROM_GPU of the BO at {bo.va:#x}: it was never mapped")
      if bo.mapped: self._set_mapping(bo, False)
      a.n_success += 1

  def _set_mapping(self, bo: BO, on: bool) -> None:
    pages, node = bo.size // PAGE, bo.node
    if not on:
      node.vm.unmap(bo.va, pages)
    else:
      perm = PTE_VALID | PTE_READABLE | PTE_WRITEABLE * bool(bo.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE) | \
             PTE_EXECUTABLE * bool(bo.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE)
      if bo.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED:   # gmc_v11/v12 mtype for UC (at the chip PTE format MTYPE bits)
        perm |= soc21_enum.MTYPE_UC << bo.node.gpu.pte_format.mtype_shift
      if bo.kind == "vram": addrs = bo.paddr + np.arange(pages, dtype=np.uint64) * PAGE
      else:
        addrs = np.array(bo.bus, dtype=np.uint64)
        perm |= PTE_SYSTEM | PTE_SNOOPED
      node.vm.map(bo.va, addrs | np.uint64(perm))
    bo.mapped, bo.attached = on, True
    node.gpu.mmu.invalidate()

  def _create_queue(self, fd: int, a) -> None:
    # set_queue_properties_from_user's checks, then the process's device
    if a.queue_percentage & 0xFF > MAX_QUEUE_PERCENTAGE:
      raise self._fail(errno.EINVAL, f"CREATE_QUEUE queue_percentage {a.queue_percentage & 0xFF} is above {MAX_QUEUE_PERCENTAGE}")
    if a.queue_priority > MAX_QUEUE_PRIORITY:
      raise self._fail(errno.EINVAL, f"CREATE_QUEUE queue_priority {a.queue_priority} is above {MAX_QUEUE_PRIORITY}")
    if a.ring_size & (a.ring_size - 1): raise self._fail(errno.EINVAL, f"CREATE_QUEUE ring size {a.ring_size} is not a power of two or 0")
    a.ring_size = max(a.ring_size, MIN_RING_SIZE)   # the kernel raises a smaller ring to its minimum, and says so in ring_size
    for field in ("ring_base_address", "read_pointer_address", "write_pointer_address"):
      if not getattr(a, field): raise self._fail(errno.EFAULT, f"CREATE_QUEUE with {field} = 0")
    if a.queue_type not in (kfd.KFD_IOC_QUEUE_TYPE_COMPUTE, kfd.KFD_IOC_QUEUE_TYPE_SDMA, kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
                            kfd.KFD_IOC_QUEUE_TYPE_SDMA_XGMI, kfd.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID):
      raise self._fail(ENOTSUPP, f"CREATE_QUEUE queue_type {a.queue_type} is no KFD queue type")
    node = self._bind(a.gpu_id, "CREATE_QUEUE")
    qid = min(set(range(len(self.queues) + 1)) - set(self.queues))
    name = f"queue {qid}"
    if a.queue_type == kfd.KFD_IOC_QUEUE_TYPE_COMPUTE:
      q = PM4Engine(node.gpu, f"compute {name}", a.ring_base_address, a.ring_size, a.read_pointer_address, a.write_pointer_address)
    elif a.queue_type == kfd.KFD_IOC_QUEUE_TYPE_SDMA:
      q = SDMAEngine(node.gpu, f"SDMA {name}", a.ring_base_address, a.ring_size, a.read_pointer_address, a.write_pointer_address)
    else: raise self._fail(errno.EOPNOTSUPP, f"queue type {a.queue_type} is not modelled (COMPUTE and SDMA are)")
    self.queues[qid] = q
    node.gpu.add_engine(q)
    a.queue_id, a.doorbell_offset = qid, DOORBELL_MMAP + qid * 8

  def _destroy_queue(self, fd: int, a) -> None:
    if (q := self.queues.pop(a.queue_id, None)) is None: raise self._fail(errno.EINVAL, f"no queue {a.queue_id}")
    q.gpu.remove_engine(q)

  # --- events
  def _create_event(self, fd: int, a) -> None:
    ev = Event(self._new("event"), a.event_type, bool(a.auto_reset))
    with self.cond: self.events[ev.id] = ev
    a.event_id, a.event_slot_index, a.event_trigger_data = ev.id, ev.id, ev.id

  def _destroy_event(self, fd: int, a) -> None:
    with self.cond:
      if self.events.pop(a.event_id, None) is None: raise self._fail(errno.EINVAL, f"no event {a.event_id}")

  def _set_event(self, fd: int, a) -> None:
    with self.cond:
      if (ev := self.events.get(a.event_id)) is None: raise self._fail(errno.EINVAL, f"SET_EVENT on unknown event {a.event_id}")
      if ev.type != kfd.KFD_IOC_EVENT_SIGNAL:   # event_can_be_cpu_signaled: signal events only
        raise self._fail(errno.EINVAL, f"SET_EVENT on event {a.event_id} of type {ev.type}: only signal events can be set by the CPU")
    self._signal(lambda e: e.id == a.event_id)

  def _signal(self, match, fault: DeviceError | None = None, memory: kfd.kfd_hsa_memory_exception_data | None = None,
              gpu_id: int = 0) -> None:
    with self.cond:
      for e in self.events.values():
        if match(e):
          e.signaled = True
          if fault is not None: e.fault, e.memory, e.fault_gpu = fault, memory or e.memory, gpu_id
      self.cond.notify_all()

  def _on_interrupt(self, source: str, ctx: int, engine: str = "") -> None:
    self._signal(lambda e: e.type == kfd.KFD_IOC_EVENT_SIGNAL and e.id == ctx)

  def _on_error(self, node: Node, err: DeviceError) -> None:
    if err.va is None: return self._signal(lambda e: e.type == kfd.KFD_IOC_EVENT_HW_EXCEPTION, err, gpu_id=node.gpu_id)
    f = node.gpu.mmu.last_fault     # what the VM fault status latched, if it is this address's
    self._signal(lambda e: e.type == kfd.KFD_IOC_EVENT_MEMORY, err,
                 memory_exception(f if f is not None and f.va >> 12 == err.va >> 12 else None, err.va, node.gpu_id), node.gpu_id)

  def _wait_events(self, fd: int, a) -> None:
    if a.num_events and not a.events_ptr: raise self._fail(errno.EFAULT, f"WAIT_EVENTS of {a.num_events} events at events_ptr NULL")
    data = (kfd.kfd_event_data * a.num_events).from_address(a.events_ptr)
    ids = [d.event_id for d in data]
    with self.cond:
      for i in ids:
        if i not in self.events: raise self._fail(errno.EINVAL, f"WAIT_EVENTS on unknown event {i}")
      ready = lambda: [self.events[i] for i in ids if self.events[i].signaled]
      done = self.cond.wait_for(lambda: (len(ready()) == len(ids)) if a.wait_for_all else bool(ready()), a.timeout / 1000)
      for d in data:
        e = self.events[d.event_id]
        if e.signaled and e.fault is not None:
          if e.type == kfd.KFD_IOC_EVENT_MEMORY: d.memory_exception_data = e.memory
          elif e.type == kfd.KFD_IOC_EVENT_HW_EXCEPTION:
            d.hw_exception_data.gpu_id, d.hw_exception_data.reset_cause = e.fault_gpu, kfd.KFD_HW_EXCEPTION_GPU_HANG
        if e.signaled and e.auto_reset and e.fault is None: e.signaled = False
      a.wait_result = kfd.KFD_IOC_WAIT_RESULT_COMPLETE if done else kfd.KFD_IOC_WAIT_RESULT_TIMEOUT

  def shutdown(self) -> None:
    for node in self.nodes.values(): node.gpu.shutdown()
    self.queues.clear()


# registered under hcq.models (pyproject.toml): kernel_interface(mock="kfd") is this model
MODEL = KernelModel("kfd", KFDModel, "two emulated Navi31s (KFD model)")
