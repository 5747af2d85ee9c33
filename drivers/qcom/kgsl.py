"""One Adreno GPU through the KGSL kernel driver (/dev/kgsl-3d0): draw contexts, GPU objects, imported host memory,
command submission and timestamps (reference hcq_compute.md §3.1; ABI: autogen.msm_kgsl).

Written against drivers.system.kernel.KernelInterface, so the same code runs on the kernel and on the KGSL model
(emu/kgsl). Every GPU object is allocated with KGSL_MEMFLAGS_USE_CPU_MAP and mmapped at offset id * 4096, so its
GPU address is its CPU address (checked with GPUOBJ_INFO). KGSL has no user ring: each submission is one
IOCTL_KGSL_GPU_COMMAND naming one indirect buffer, and returns the context timestamp it retires at.
"""
from __future__ import annotations
import ctypes
from dataclasses import dataclass

from autogen import msm_kgsl
from drivers.qcom.cp import GENERATIONS
from drivers.system.kernel import KernelInterface
from drivers.system.mmio import MMIO

DEV = "/dev/kgsl-3d0"
PAGE = 0x1000
# context priorities (1 the highest, 15 the lowest; 0 is unset, which KGSL makes 8): with preemption KGSL runs a context
# on ringbuffer priority // 4, and the CP runs the highest ringbuffer with work, preempting lower ones
# (adreno_dispatch.c dispatch_get_rb, adreno_a6xx_preempt.c a6xx_next_ringbuffer)
PRIORITY = 8                      # the compute context (tinygrad ops_qcom.py's QCOM_PRIORITY default), ringbuffer 2
COPY_PRIORITY = 4                 # the copy context, ringbuffer 1: it preempts compute work stalled in a wait
# the flags of a compute context (tinygrad ops_qcom.py QCOMDevice's context), less the priority
CONTEXT_FLAGS = (msm_kgsl.KGSL_CONTEXT_PREAMBLE | msm_kgsl.KGSL_CONTEXT_PWR_CONSTRAINT | msm_kgsl.KGSL_CONTEXT_NO_FAULT_TOLERANCE |
                 msm_kgsl.KGSL_CONTEXT_NO_GMEM_ALLOC | msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE(msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN))
WAIT_FOREVER = 0xFFFFFFFF


class UnsupportedChip(RuntimeError):
  """The GPU is not of a generation hcq drives (a6xx, a7xx)."""


def gpu_id(chip_id: int) -> tuple[int, int, int]:
  """KGSL's chip id (core 31:24, major 23:16, minor 15:8) -> (core, major, minor): 0x06030001 is (6, 3, 0), an a630."""
  return chip_id >> 24, chip_id >> 16 & 0xFF, chip_id >> 8 & 0xFF


@dataclass
class GPUObject:
  """A KGSL GPU object mapped at `va` (GPU address = CPU address), or imported host memory (`imported`)."""
  id: int
  va: int
  size: int
  view: MMIO | None
  imported: bool = False


class KGSL:
  def __init__(self, kernel: KernelInterface):
    self.k = kernel
    if not kernel.exists(DEV):
      raise FileNotFoundError(f"{DEV} does not exist: this machine has no Adreno GPU under the KGSL driver (QCOM needs a "
                              "Qualcomm SoC running a kernel with msm_kgsl; MOCK+QCOM runs on the KGSL model)")
    self.fd = kernel.open(DEV)
    self.ctx: int | None = None                      # the context opened with the device (compute), the default below
    self.contexts: list[int] = []
    self.objects: dict[int, GPUObject] = {}          # by GPU address
    try:
      info = self.getproperty(msm_kgsl.KGSL_PROP_DEVICE_INFO, msm_kgsl.kgsl_devinfo())
      self.chip_id, self.gpu_id = info.chip_id, gpu_id(info.chip_id)
      if self.gpu_id[0] not in GENERATIONS:
        raise UnsupportedChip(f"the Adreno GPU has chip id {info.chip_id:#010x} (a{''.join(map(str, self.gpu_id))}): hcq drives "
                              f"a6xx and a7xx only ({', '.join(f'a{g}xx' for g in GENERATIONS)}); its packets differ")
      self.ctx = self.create_context(PRIORITY)
    except BaseException:
      self.close()
      raise

  @property
  def arch(self) -> str: return "a%d%d%d" % self.gpu_id   # a630

  @property
  def generation(self) -> int: return self.gpu_id[0]

  def call(self, request: int, arg: ctypes.Structure) -> ctypes.Structure:
    try: self.k.ioctl(self.fd, request, arg)
    except OSError as e:
      raise OSError(e.errno, f"KGSL {msm_kgsl.IOCTL_NAMES.get(request, hex(request))} ({arg!r}) failed: {e.strerror}") from None
    return arg

  def getproperty(self, prop: int, value: ctypes.Structure) -> ctypes.Structure:
    self.call(msm_kgsl.IOCTL_KGSL_DEVICE_GETPROPERTY, msm_kgsl.kgsl_device_getproperty(
      type=prop, value=ctypes.addressof(value), sizebytes=ctypes.sizeof(value)))
    return value

  def setproperty(self, prop: int, value: ctypes.Structure) -> None:
    self.call(msm_kgsl.IOCTL_KGSL_SETPROPERTY, msm_kgsl.kgsl_device_getproperty(
      type=prop, value=ctypes.addressof(value), sizebytes=ctypes.sizeof(value)))

  def create_context(self, priority: int) -> int:
    """A draw context with the compute flags at `priority`, held at the highest power level -> its id."""
    if not 1 <= priority <= 15:
      raise ValueError(f"KGSL context priority {priority}: 1 (the highest) to 15; 0 is KGSL_CONTEXT_PRIORITY_UNDEF, which KGSL "
                       "makes KGSL_CONTEXT_PRIORITY_MED (8)")
    ctx = self.call(msm_kgsl.IOCTL_KGSL_DRAWCTXT_CREATE, msm_kgsl.kgsl_drawctxt_create(
      flags=CONTEXT_FLAGS | msm_kgsl.KGSL_CONTEXT_PRIORITY(priority))).drawctxt_id
    self.contexts.append(ctx)
    level = msm_kgsl.kgsl_device_constraint_pwrlevel(level=msm_kgsl.KGSL_CONSTRAINT_PWR_MAX)
    self.setproperty(msm_kgsl.KGSL_PROP_PWR_CONSTRAINT, msm_kgsl.kgsl_device_constraint(
      type=msm_kgsl.KGSL_CONSTRAINT_PWRLEVEL, context_id=ctx, data=ctypes.addressof(level), size=ctypes.sizeof(level)))
    return ctx

  # --- memory
  def alloc(self, size: int, uncached: bool = False) -> GPUObject:
    """A GPU object of at least `size` bytes (page-aligned), mapped to the CPU at its GPU address."""
    flags = msm_kgsl.KGSL_MEMALIGN(12) | msm_kgsl.KGSL_MEMFLAGS_USE_CPU_MAP | \
      (msm_kgsl.KGSL_CACHEMODE(msm_kgsl.KGSL_CACHEMODE_UNCACHED) if uncached else 0)
    a = self.call(msm_kgsl.IOCTL_KGSL_GPUOBJ_ALLOC, msm_kgsl.kgsl_gpuobj_alloc(size=-(-max(size, 1) // PAGE) * PAGE, flags=flags))
    try:
      va, view = self.k.mmap(self.fd, None, a.mmapsize, a.id * PAGE)
    except BaseException:
      self.call(msm_kgsl.IOCTL_KGSL_GPUOBJ_FREE, msm_kgsl.kgsl_gpuobj_free(id=a.id))
      raise
    obj = GPUObject(a.id, va, a.mmapsize, view)
    try:
      info = self.call(msm_kgsl.IOCTL_KGSL_GPUOBJ_INFO, msm_kgsl.kgsl_gpuobj_info(id=a.id))
      if info.gpuaddr != va:
        raise RuntimeError(f"KGSL put GPU object {a.id} at GPU address {info.gpuaddr:#x}, not at its CPU mapping {va:#x} "
                           "(KGSL_MEMFLAGS_USE_CPU_MAP)")
    except BaseException:
      self._release(obj)
      raise
    self.objects[va] = obj
    return obj

  def import_host(self, addr: int, size: int) -> GPUObject:
    """Host pages [addr, addr+size) (page-aligned) mapped for the GPU (MAP_USER_MEM, KGSL_USER_MEM_TYPE_ADDR)."""
    if addr % PAGE or size % PAGE: raise ValueError(f"MAP_USER_MEM of [{addr:#x}, +{size:#x}): pass whole pages")
    m = self.call(msm_kgsl.IOCTL_KGSL_MAP_USER_MEM, msm_kgsl.kgsl_map_user_mem(fd=-1, len=size, hostptr=addr,
                                                                               memtype=msm_kgsl.KGSL_USER_MEM_TYPE_ADDR))
    self.objects[m.gpuaddr] = obj = GPUObject(0, m.gpuaddr, size, None, imported=True)
    return obj

  def _release(self, obj: GPUObject) -> None:
    if obj.imported: self.call(msm_kgsl.IOCTL_KGSL_SHAREDMEM_FREE, msm_kgsl.kgsl_sharedmem_free(gpuaddr=obj.va))
    else:
      self.k.release(obj.va, obj.size)
      self.call(msm_kgsl.IOCTL_KGSL_GPUOBJ_FREE, msm_kgsl.kgsl_gpuobj_free(id=obj.id))

  def free(self, obj: GPUObject) -> None:
    del self.objects[obj.va]
    self._release(obj)

  # --- submission and timestamps
  # (`ctx`: the context, default the one opened with the device)
  def submit(self, ib_va: int, nbytes: int, ctx: int | None = None) -> int:
    """One GPU_COMMAND of one indirect buffer on the context -> the timestamp it retires at."""
    cmd = msm_kgsl.kgsl_command_object(gpuaddr=ib_va, size=nbytes, flags=msm_kgsl.KGSL_CMDLIST_IB)
    req = msm_kgsl.kgsl_gpu_command(cmdlist=ctypes.addressof(cmd), cmdsize=ctypes.sizeof(cmd), numcmds=1, context_id=ctx or self.ctx)
    return self.call(msm_kgsl.IOCTL_KGSL_GPU_COMMAND, req).timestamp

  def retired(self, ctx: int | None = None) -> int:
    """The context's last retired timestamp."""
    return self.call(msm_kgsl.IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID, msm_kgsl.kgsl_cmdstream_readtimestamp_ctxtid(
      context_id=ctx or self.ctx, type=msm_kgsl.KGSL_TIMESTAMP_RETIRED)).timestamp

  def wait_timestamp(self, timestamp: int, timeout_ms: int = WAIT_FOREVER, ctx: int | None = None) -> None:
    """Block until the context retired `timestamp`; OSError ETIMEDOUT after `timeout_ms`."""
    self.call(msm_kgsl.IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, msm_kgsl.kgsl_device_waittimestamp_ctxtid(
      context_id=ctx or self.ctx, timestamp=timestamp, timeout=timeout_ms))

  def reset_status(self, ctx: int | None = None) -> int:
    """KGSL_PROP_GPU_RESET_STAT of the context: KGSL_CTX_STAT_NO_ERROR unless a GPU fault reset it."""
    stat = ctypes.c_uint32(ctx or self.ctx)
    self.call(msm_kgsl.IOCTL_KGSL_DEVICE_GETPROPERTY, msm_kgsl.kgsl_device_getproperty(
      type=msm_kgsl.KGSL_PROP_GPU_RESET_STAT, value=ctypes.addressof(stat), sizebytes=4))
    return stat.value

  def destroy_contexts(self) -> None:
    """DRAWCTXT_DESTROY of every context: KGSL drops what they have queued and not yet run."""
    while self.contexts:
      self.call(msm_kgsl.IOCTL_KGSL_DRAWCTXT_DESTROY, msm_kgsl.kgsl_drawctxt_destroy(drawctxt_id=self.contexts[-1]))
      self.contexts.pop()
    self.ctx = None

  def close(self) -> None:
    self.destroy_contexts()
    for obj in list(self.objects.values()): self.free(obj)
    if self.fd is not None:
      self.k.close(self.fd)
      self.fd = None
