"""The KFD interface: an AMD GPU through the amdgpu kernel driver (/dev/kfd + its render node).

Written against drivers.system.kernel.KernelInterface, so the same code runs on the real kernel and on
the KFD model (MOCKKFD+AMD). Sequence and structures: kfd_ioctl.h; ROCT-Thunk-Interface (libhsakmt) hsaKmtOpenKFD, hsaKmtCreateQueue.
"""
from __future__ import annotations
import ctypes, errno

from autogen import kfd
from autogen.amd import soc15_hw_ip as hw_ip
from drivers.system.kernel import KernelInterface
from drivers.system.dma import host_pages
from drivers.system.mmio import MMIO, MemMMIO
from drivers.amd.iface import AMDIface, AMDMemory, QueueDesc, PAGE
from drivers.amd import ip

KFD_DEV = "/dev/kfd"
TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"
# the IP blocks whose register bases the driver needs, by their IP discovery hardware id (sysfs ip_discovery/die/0/<hw id>)
HWIDS = {"GC": hw_ip.GC_HWID, "SDMA0": hw_ip.SDMA0_HWID, "NBIO": hw_ip.NBIF_HWID}


def gfx_arch(target_version: int) -> str:
  """KFD's gfx_target_version (major * 10000 + minor * 100 + stepping, e.g. 110000) -> LLVM processor name (gfx1100)."""
  return ip.target((target_version // 10000, target_version // 100 % 100, target_version % 100))


def parse_properties(text: str) -> dict[str, int]:
  return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line.strip())}


def memory_fault(mem: kfd.kfd_hsa_memory_exception_data) -> str:
  """A KFD memory exception (kfd_hsa_memory_exception_data) in words: the page and what the access violated."""
  f = mem.failure
  why = [w for w, bit in (("no valid page is mapped there", f.NotPresent), ("a write to a read-only page", f.ReadOnly),
                          ("an instruction fetch from a page that is not executable", f.NoExecute)) if bit]
  if not why and not f.imprecise: why = ["an access the page's permissions do not allow (it is not readable)"]
  if f.imprecise: why.append("imprecise: the GPU did not latch the fault's type, the page may be approximate")
  if mem.ErrorType != kfd.KFD_MEM_ERR_NO_RAS: why.append(f"RAS error type {mem.ErrorType}")
  return f"MMU fault at {mem.va:#x} ({'; '.join(why)})"


class KFDIface(AMDIface):
  def __init__(self, kernel: KernelInterface, index: int = 0):
    self.k = kernel
    if missing := [p for p in (KFD_DEV, TOPOLOGY) if not kernel.exists(p)]:
      raise RuntimeError(f"KFD+AMD: the amdgpu kernel driver's compute interface (KFD) is not present on this machine (no "
                         f"{' and no '.join(missing)}): load amdgpu (`sudo modprobe amdgpu`) where an AMD GPU is installed, "
                         "or choose another interface: DEV=PCI+AMD (the userspace driver, for a GPU not bound to amdgpu), "
                         "DEV=MOCKKFD+AMD or DEV=MOCKPCI+AMD (the emulated GPU)")
    nodes = []
    for n in self.k.listdir(TOPOLOGY):
      gpu_id = int(self.k.read_text(f"{TOPOLOGY}/{n}/gpu_id"))
      if gpu_id: nodes.append((gpu_id, parse_properties(self.k.read_text(f"{TOPOLOGY}/{n}/properties"))))
    if index >= len(nodes):
      raise RuntimeError(f"AMD:{index} does not exist: KFD lists {len(nodes)} GPU(s)")
    self.gpu_id, self.props = nodes[index]
    self.arch = gfx_arch(self.props["gfx_target_version"])
    minor = self.props["drm_render_minor"]
    ipd = f"/sys/class/drm/renderD{minor}/device/ip_discovery/die/0"
    self.ip_bases = {ip: tuple(int(x, 16) for x in self.k.read_text(f"{ipd}/{hw}/0/base_addr").split()) for ip, hw in HWIDS.items()}
    self.ip_versions = {ip: tuple(int(self.k.read_text(f"{ipd}/{hw}/0/{f}")) for f in ("major", "minor", "revision"))
                        for ip, hw in HWIDS.items()}
    self.kfd = self.k.open(KFD_DEV)
    self.drm: int | None = None
    try:
      self.drm = self.k.open(f"/dev/dri/renderD{minor}")
      ver = self._ioctl(kfd.AMDKFD_IOC_GET_VERSION, kfd.kfd_ioctl_get_version_args())
      if ver.major_version != 1: raise RuntimeError(f"KFD ioctl version {ver.major_version}.{ver.minor_version} is not 1.x")
      self._ioctl(kfd.AMDKFD_IOC_ACQUIRE_VM, kfd.kfd_ioctl_acquire_vm_args(drm_fd=self.drm, gpu_id=self.gpu_id))
      self.doorbells: MMIO | None = None
      self.fault_events = [self._event(kfd.KFD_IOC_EVENT_MEMORY), self._event(kfd.KFD_IOC_EVENT_HW_EXCEPTION)]
    except BaseException:
      self.close()
      raise

  def _ioctl(self, request: int, arg):
    self.k.ioctl(self.kfd, request, arg)
    return arg

  def _event(self, kind: int) -> int:
    return self._ioctl(kfd.AMDKFD_IOC_CREATE_EVENT, kfd.kfd_ioctl_create_event_args(event_type=kind, auto_reset=1)).event_id

  # --- memory
  def alloc(self, size: int, host: bool = False, uncached: bool = False, cpu_access: bool = False) -> AMDMemory:
    """host: pinned host memory (USERPTR); uncached: coherent GTT (rings, signals); else VRAM (PUBLIC if cpu_access)."""
    size = (max(size, 1) + PAGE - 1) & ~(PAGE - 1)
    flags = kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | kfd.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE | kfd.KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE
    if uncached: flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | kfd.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED | kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT
    elif host: flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR
    else: flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM
    if cpu_access or host or uncached: flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
    # USERPTR: the memory is ours; the kernel pins it and maps it for the GPU at its CPU address.
    # Otherwise reserve the VA, the kernel backs it, and CPU-visible memory is mapped at the same address.
    va, user = self.k.anon(size) if host else (self.k.reserve(size, 1 << 21 if size >= 1 << 21 else PAGE), None)
    args = kfd.kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags & 0xFFFFFFFF,
                                                  mmap_offset=va if host else 0)
    try: self._ioctl(kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
    except OSError as e:
      self.k.release(va, size)
      if e.errno == errno.EINVAL and cpu_access and not host and not uncached:
        raise MemoryError("cannot allocate host-visible VRAM: enable Resizable BAR (Above 4G decoding) in the BIOS") from None
      if e.errno == errno.ENOMEM: raise MemoryError(f"out of {'host' if host or uncached else 'device'} memory allocating {size} bytes") from None
      raise
    mmio = user
    if not host and (cpu_access or uncached): _, mmio = self.k.mmap(self.drm, va, size, args.mmap_offset)
    self._map(args.handle)
    return AMDMemory(va, size, mmio, args.handle, host)

  def import_host(self, view: memoryview) -> tuple[AMDMemory, int]:
    """Existing host memory as a USERPTR buffer object (the kernel pins its pages), uncached, at a reserved GPU VA."""
    start, size, first = host_pages(view)
    flags = kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | kfd.KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE | kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | \
            kfd.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | kfd.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED
    va = self.k.reserve(size, PAGE)
    args = kfd.kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags & 0xFFFFFFFF, mmap_offset=start)
    try:
      self._ioctl(kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
      try: self._map(args.handle)
      except BaseException:
        self._ioctl(kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU, kfd.kfd_ioctl_free_memory_of_gpu_args(handle=args.handle))
        raise
    except BaseException:
      self.k.release(va, size)
      raise
    return AMDMemory(va, size, MemMMIO(view, "host memory"), args.handle, True), first

  def _map(self, handle: int) -> None:
    ids = (ctypes.c_uint32 * 1)(self.gpu_id)
    args = kfd.kfd_ioctl_map_memory_to_gpu_args(handle=handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
    if self._ioctl(kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU, args).n_success != 1: raise RuntimeError("KFD could not map the buffer to the GPU")

  def free(self, mem: AMDMemory) -> None:
    ids = (ctypes.c_uint32 * 1)(self.gpu_id)
    self._ioctl(kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, kfd.kfd_ioctl_unmap_memory_from_gpu_args(
      handle=mem.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1))
    self._ioctl(kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU, kfd.kfd_ioctl_free_memory_of_gpu_args(handle=mem.handle))
    self.k.release(mem.va, mem.size)

  # --- queues
  def create_queue(self, kind: str, ring_size: int, eop: AMDMemory | None = None) -> QueueDesc:
    ring = self.alloc(ring_size, uncached=True)
    gart = self.alloc(PAGE, uncached=True)       # rptr at +0, wptr at +8 of a coherent control page
    qtype = {"compute": kfd.KFD_IOC_QUEUE_TYPE_COMPUTE, "sdma": kfd.KFD_IOC_QUEUE_TYPE_SDMA}[kind]
    args = kfd.kfd_ioctl_create_queue_args(ring_base_address=ring.va, ring_size=ring_size, gpu_id=self.gpu_id, queue_type=qtype,
                                           queue_percentage=100, queue_priority=7, read_pointer_address=gart.va,
                                           write_pointer_address=gart.va + 8,
                                           eop_buffer_address=eop.va if eop else 0, eop_buffer_size=eop.size if eop else 0)
    self._ioctl(kfd.AMDKFD_IOC_CREATE_QUEUE, args)
    base = args.doorbell_offset & ~(0x2000 - 1)
    if self.doorbells is None: _, self.doorbells = self.k.mmap(self.kfd, None, 0x2000, base)
    ctl = gart.view.cast("Q")
    return QueueDesc(ring, ctl[0:1], ctl[1:2], self.doorbells, args.doorbell_offset - base, (args.queue_id, ring, gart))

  def destroy_queue(self, q: QueueDesc) -> None:
    qid, ring, gart = q.handle
    self._ioctl(kfd.AMDKFD_IOC_DESTROY_QUEUE, kfd.kfd_ioctl_destroy_queue_args(queue_id=qid))
    self.free(ring)
    self.free(gart)

  # --- faults
  def poll_faults(self) -> str | None:
    """Ask the kernel whether the GPU reported a memory fault or hang; -> a description or None."""
    data = (kfd.kfd_event_data * len(self.fault_events))()
    for d, ev in zip(data, self.fault_events): d.event_id = ev
    args = kfd.kfd_ioctl_wait_events_args(events_ptr=ctypes.addressof(data), num_events=len(data), wait_for_all=0, timeout=0)
    self._ioctl(kfd.AMDKFD_IOC_WAIT_EVENTS, args)
    if args.wait_result != kfd.KFD_IOC_WAIT_RESULT_COMPLETE: return None
    mem, hw = data[0].memory_exception_data, data[1].hw_exception_data
    if mem.gpu_id == self.gpu_id: return memory_fault(mem)   # the process's events report every GPU's faults: ours name our gpu_id
    if hw.gpu_id == self.gpu_id: return f"GPU hang (reset cause {hw.reset_cause}, memory lost: {bool(hw.memory_lost)})"
    return None

  def close(self) -> None:
    if self.drm is not None: self.k.close(self.drm)
    self.k.close(self.kfd)
