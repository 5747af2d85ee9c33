"""A model of the KGSL kernel driver (/dev/kgsl-3d0) over one Adreno GPU, implementing
drivers.system.kernel.KernelInterface; its command processor is emu.kgsl.cp.

ioctls (msm_kgsl.h layouts, autogen.msm_kgsl): the request must be exactly one the model implements (the same
number, direction and argument size: anything else is ENOTTY, as for an ioctl KGSL does not know), its argument
that many bytes. Implemented: DEVICE_GETPROPERTY (DEVICE_INFO, GPU_RESET_STAT), SETPROPERTY (PWR_CONSTRAINT),
DRAWCTXT_CREATE/DESTROY, GPUOBJ_ALLOC/FREE/INFO, MAP_USER_MEM (KGSL_USER_MEM_TYPE_ADDR), SHAREDMEM_FREE,
GPU_COMMAND (IB lists), CMDSTREAM_READTIMESTAMP_CTXTID, DEVICE_WAITTIMESTAMP_CTXTID. Bad fields are EINVAL (an
unknown context, object or property, a property size that is not the structure's, flags outside what the model
implements, an IB outside GPU memory), process memory that is not mapped read-write EFAULT, a timestamp wait that
runs out ETIMEDOUT, and work on a context a GPU fault reset EDEADLK (what KGSL returns for an invalidated context).
GPU objects: mmap of offset id * 4096 maps one; with KGSL_MEMFLAGS_USE_CPU_MAP its GPU address is the mapping's
address (0 before it is mapped), without it one from the GPU VA window; a GPU write to a KGSL_MEMFLAGS_GPUREADONLY
object faults; cache modes, IOCOHERENT and the memory type are accepted and change nothing (memory is coherent). Timestamps are per context, from 1.
Contexts: each runs on the ringbuffer of its priority level (contexts of one level share it, in submission order), and
the CP runs the highest-priority ringbuffer with work, preempting lower ones (emu.kgsl.cp).
`chip_id` picks the GPU (an a630, 0x06030001, by default); any chip id is served, so tests see the driver refuse
other generations. Not modelled: sync points and object lists in GPU_COMMAND, FREE_ON_EVENT, secure and sparse
memory, dma-buf/ion import, the memstore page, perf counters, the dispatcher's hang timeout.
"""
from __future__ import annotations
import ctypes, errno, mmap, os, threading, time

from autogen import msm_kgsl
from emu.addrspace import ProcessAddressSpace
from emu.kgsl.cp import CommandProcessor, CPFault
from emu.kernel_model import Ioctl, Ioctls, KernelDriverModel
from common.plugin import KernelModel

DEV = "/dev/kgsl-3d0"
PAGE = 0x1000
VA_BASE, VA_END = 0x40_0000_0000, 0x80_0000_0000      # CPU mappings of GPU objects (model addresses)
GPU_VA_BASE, GPU_VA_END = 0x80_0000_0000, 0xC0_0000_0000   # GPU addresses of objects not at their CPU mapping
PRIORITY_MED = 8                                      # KGSL_CONTEXT_PRIORITY_MED (adreno_drawctxt.c)
RINGBUFFERS = 4          # KGSL_PRIORITY_MAX_RB_LEVELS (kgsl.h): a6xx/a7xx with preemption (adreno_a6xx_ringbuffer.c)
CONTEXT_FLAGS_KNOWN = (msm_kgsl.KGSL_CONTEXT_SAVE_GMEM | msm_kgsl.KGSL_CONTEXT_NO_GMEM_ALLOC | msm_kgsl.KGSL_CONTEXT_SUBMIT_IB_LIST |
                       msm_kgsl.KGSL_CONTEXT_CTX_SWITCH | msm_kgsl.KGSL_CONTEXT_PREAMBLE | msm_kgsl.KGSL_CONTEXT_TRASH_STATE |
                       msm_kgsl.KGSL_CONTEXT_PER_CONTEXT_TS | msm_kgsl.KGSL_CONTEXT_USER_GENERATED_TS | msm_kgsl.KGSL_CONTEXT_NO_FAULT_TOLERANCE |
                       msm_kgsl.KGSL_CONTEXT_SYNC | msm_kgsl.KGSL_CONTEXT_PWR_CONSTRAINT | msm_kgsl.KGSL_CONTEXT_PRIORITY_MASK |
                       msm_kgsl.KGSL_CONTEXT_IFH_NOP | msm_kgsl.KGSL_CONTEXT_NO_SNAPSHOT | msm_kgsl.KGSL_CONTEXT_TYPE_MASK |
                       msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE_MASK | msm_kgsl.KGSL_CONTEXT_INVALIDATE_ON_FAULT)
GPUOBJ_FLAGS_KNOWN = (msm_kgsl.KGSL_MEMFLAGS_GPUREADONLY | msm_kgsl.KGSL_CACHEMODE_MASK | msm_kgsl.KGSL_MEMFLAGS_USE_CPU_MAP |
                      msm_kgsl.KGSL_MEMTYPE_MASK | msm_kgsl.KGSL_MEMALIGN_MASK | msm_kgsl.KGSL_MEMFLAGS_IOCOHERENT)


def _mapped_rw(addr: int, size: int) -> bool:
  """Is [addr, addr+size) process memory mapped readable and writable (what get_user_pages would pin)?"""
  end, at = addr + size, addr
  with open("/proc/self/maps") as f:
    spans = sorted((int(a, 16), int(b, 16), perms) for a, b, perms in
                   ((r.split()[0].split("-") + [r.split()[1]]) for r in f))
  for lo, hi, perms in spans:
    if lo <= at < hi:
      if not perms.startswith("rw"): return False
      at = hi
      if at >= end: return True
  return False


class Obj:
  """A GPU object (gpuobj) or imported user memory."""
  def __init__(self, id: int, size: int, flags: int, mem: memoryview, gpuaddr: int, backing=None):
    self.id, self.size, self.flags, self.mem, self.gpuaddr, self.backing = id, size, flags, mem, gpuaddr, backing
    self.cpu_va: int | None = None


class Context:
  def __init__(self, id: int, flags: int):
    self.id, self.flags = id, flags
    self.queued = self.retired = 0
    self.fault: str | None = None
    # an unset priority is KGSL_CONTEXT_PRIORITY_MED (adreno_drawctxt.c adreno_drawctxt_create); the ringbuffer is the
    # priority's level, priority // 4 (adreno_dispatch.c dispatch_get_rb, with preemption on)
    self.priority = (flags & msm_kgsl.KGSL_CONTEXT_PRIORITY_MASK) >> msm_kgsl.KGSL_CONTEXT_PRIORITY_SHIFT or PRIORITY_MED
    self.rb = min(self.priority // RINGBUFFERS, RINGBUFFERS - 1)
    self.finegrain = (flags & msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE_MASK) >> msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE_SHIFT == \
      msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN


class KGSLModel(KernelDriverModel):
  name, first_fd = "KGSL model", 3000

  def __init__(self, chip_id: int = 0x06030001, gmem_size: int = 1 << 20):
    super().__init__(VA_BASE, VA_END)
    self.chip_id, self.gmem_size = chip_id, gmem_size
    self.devices = (DEV,)
    self.contexts: dict[int, Context] = {}
    self.objects: dict[int, Obj] = {}                     # gpuobj id -> object
    self.mapped: dict[int, Obj] = {}                      # GPU address -> object (gpuobjs and user memory)
    self.gpu_space = ProcessAddressSpace(GPU_VA_BASE, GPU_VA_END, "KGSL model GPU VA")
    self.pwrlevel: int | None = None
    self.cv = threading.Condition()
    self.lock = threading.Lock()                          # guards `mapped`
    self.mem_fd = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)   # to check ioctl argument pointers
    self._next = {"ctx": 1, "obj": 1}
    self.cp = CommandProcessor(chip_id >> 24, RINGBUFFERS, self.translate, self._retire, self._fault)
    # the request must be one of these exactly (number, direction and size), its argument the structure in place
    handlers = {msm_kgsl.IOCTL_KGSL_DEVICE_GETPROPERTY: (msm_kgsl.kgsl_device_getproperty, self._getproperty),
                msm_kgsl.IOCTL_KGSL_SETPROPERTY: (msm_kgsl.kgsl_device_getproperty, self._setproperty),
                msm_kgsl.IOCTL_KGSL_DRAWCTXT_CREATE: (msm_kgsl.kgsl_drawctxt_create, self._ctx_create),
                msm_kgsl.IOCTL_KGSL_DRAWCTXT_DESTROY: (msm_kgsl.kgsl_drawctxt_destroy, self._ctx_destroy),
                msm_kgsl.IOCTL_KGSL_GPUOBJ_ALLOC: (msm_kgsl.kgsl_gpuobj_alloc, self._alloc),
                msm_kgsl.IOCTL_KGSL_GPUOBJ_FREE: (msm_kgsl.kgsl_gpuobj_free, self._free),
                msm_kgsl.IOCTL_KGSL_GPUOBJ_INFO: (msm_kgsl.kgsl_gpuobj_info, self._info),
                msm_kgsl.IOCTL_KGSL_MAP_USER_MEM: (msm_kgsl.kgsl_map_user_mem, self._map_user_mem),
                msm_kgsl.IOCTL_KGSL_SHAREDMEM_FREE: (msm_kgsl.kgsl_sharedmem_free, self._sharedmem_free),
                msm_kgsl.IOCTL_KGSL_GPU_COMMAND: (msm_kgsl.kgsl_gpu_command, self._gpu_command),
                msm_kgsl.IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID: (msm_kgsl.kgsl_cmdstream_readtimestamp_ctxtid, self._read_ts),
                msm_kgsl.IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID: (msm_kgsl.kgsl_device_waittimestamp_ctxtid, self._wait_ts)}
    self.ioctls = {DEV: Ioctls(Ioctl(request, msm_kgsl.IOCTL_NAMES[request], handler, struct) for request, (struct, handler) in handlers.items())}

  # --- files
  def _last_closed(self, path: str) -> None: self.shutdown()

  def shutdown(self) -> None:
    """The last file closed: contexts and memory go, the CP stops."""
    self.cp.stop()
    os.close(self.mem_fd)
    self.contexts.clear()
    self.objects.clear()
    with self.lock: self.mapped.clear()

  def release(self, va: int, size: int) -> None:
    """munmap: a GPU object's CPU mapping (the object stays until GPUOBJ_FREE) or anonymous memory."""
    for o in self.objects.values():
      if o.cpu_va == va: o.cpu_va = None
    self.space.release(va, size)

  def mmap(self, fd: int, va: int | None, size: int, offset: int) -> tuple[int, memoryview]:
    self._file(fd, "mmap of")
    if offset % PAGE or (o := self.objects.get(offset // PAGE)) is None:
      raise self._fail(errno.EINVAL, f"mmap at offset {offset:#x}: no GPU object with id {offset // PAGE}")
    if size != o.size: raise self._fail(errno.EINVAL, f"mmap of {size:#x} bytes of GPU object {o.id}, which has {o.size:#x}")
    if o.cpu_va is not None: raise self._fail(errno.EBUSY, f"GPU object {o.id} is already mapped at {o.cpu_va:#x}")
    o.cpu_va = va if va is not None else self.reserve(size, PAGE)
    if o.flags & msm_kgsl.KGSL_MEMFLAGS_USE_CPU_MAP and not o.gpuaddr:
      o.gpuaddr = o.cpu_va
      with self.lock: self.mapped[o.gpuaddr] = o
    return o.cpu_va, o.mem

  # --- the GPU's view of memory
  def translate(self, va: int, n: int, write: bool = False) -> memoryview:
    with self.lock: mapped = tuple(self.mapped.items())    # the CP thread reads it while ioctls change it
    for base, o in mapped:
      if base <= va < base + o.size:
        if va + n > base + o.size: raise CPFault(f"GPU access [{va:#x}, +{n:#x}) runs past the end of the object at {base:#x}")
        if write and o.flags & msm_kgsl.KGSL_MEMFLAGS_GPUREADONLY:
          raise CPFault(f"GPU write to {va:#x}: object {o.id} is KGSL_MEMFLAGS_GPUREADONLY (page fault)")
        return o.mem[va - base:va - base + n]
    raise CPFault(f"GPU access at {va:#x}: no GPU object or user memory is mapped there (page fault)")

  def _retire(self, ctx: int, ts: int) -> None:
    with self.cv:
      if (c := self.contexts.get(ctx)) is not None: c.retired = ts
      self.cv.notify_all()

  def _fault(self, ctx: int, message: str) -> None:
    with self.cv:
      if (c := self.contexts.get(ctx)) is not None: c.fault = message
      self.last_error = f"context {ctx}: {message}"
      self.cv.notify_all()

  # --- ioctls
  def _user(self, addr: int, size: int, what: str, pin: bool = False) -> memoryview:
    """The process memory an ioctl argument points at: copy_from_user's check (readable: one pread of /proc/self/mem,
    which fails where nothing is mapped) or, for pages to pin, mapped read-write (/proc/self/maps)."""
    if addr and not pin:
      try: ok = len(os.pread(self.mem_fd, size, addr)) == size
      except OSError: ok = False
    else: ok = bool(addr) and _mapped_rw(addr, size)
    if not ok: raise self._fail(errno.EFAULT, f"{what}: [{addr:#x}, +{size}) is not process memory{' mapped read-write' if pin else ''}")
    return memoryview((ctypes.c_uint8 * size).from_address(addr)).cast("B")

  def _context(self, cid: int, what: str) -> Context:
    if (c := self.contexts.get(cid)) is None: raise self._fail(errno.EINVAL, f"{what}: no context {cid}")
    return c

  def _getproperty(self, fd: int, p) -> None:
    if p.type == msm_kgsl.KGSL_PROP_DEVICE_INFO:
      if p.sizebytes != ctypes.sizeof(msm_kgsl.kgsl_devinfo):
        raise self._fail(errno.EINVAL, f"DEVICE_INFO with sizebytes {p.sizebytes}: struct kgsl_devinfo is {ctypes.sizeof(msm_kgsl.kgsl_devinfo)}")
      info = msm_kgsl.kgsl_devinfo(device_id=0, chip_id=self.chip_id, mmu_enabled=1,                 # KGSL_DEVICE_3D0
                                   gpu_id=(self.chip_id >> 24) * 100 + (self.chip_id >> 16 & 0xFF) * 10 + (self.chip_id >> 8 & 0xFF),
                                   gmem_sizebytes=self.gmem_size)
      self._user(p.value, p.sizebytes, "DEVICE_INFO")[:] = bytes(info)
    elif p.type == msm_kgsl.KGSL_PROP_GPU_RESET_STAT:
      if p.sizebytes != 4: raise self._fail(errno.EINVAL, f"GPU_RESET_STAT with sizebytes {p.sizebytes}: it is one unsigned int")
      word = self._user(p.value, 4, "GPU_RESET_STAT").cast("I")
      c = self._context(word[0], "GPU_RESET_STAT")
      word[0] = msm_kgsl.KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT if c.fault else msm_kgsl.KGSL_CTX_STAT_NO_ERROR
    else: raise self._fail(errno.EINVAL, f"GETPROPERTY of property {p.type:#x}, which the model does not implement")

  def _setproperty(self, fd: int, p) -> None:
    if p.type != msm_kgsl.KGSL_PROP_PWR_CONSTRAINT: raise self._fail(errno.EINVAL, f"SETPROPERTY of property {p.type:#x}: not modelled")
    if p.sizebytes != ctypes.sizeof(msm_kgsl.kgsl_device_constraint):
      raise self._fail(errno.EINVAL, f"PWR_CONSTRAINT with sizebytes {p.sizebytes}: struct kgsl_device_constraint is 24")
    c = msm_kgsl.kgsl_device_constraint.from_buffer_copy(self._user(p.value, p.sizebytes, "PWR_CONSTRAINT"))
    self._context(c.context_id, "PWR_CONSTRAINT")
    if c.type != msm_kgsl.KGSL_CONSTRAINT_PWRLEVEL or c.size != ctypes.sizeof(msm_kgsl.kgsl_device_constraint_pwrlevel):
      raise self._fail(errno.EINVAL, f"PWR_CONSTRAINT of type {c.type} with {c.size} bytes: the model takes KGSL_CONSTRAINT_PWRLEVEL "
                                "with a kgsl_device_constraint_pwrlevel")
    level = msm_kgsl.kgsl_device_constraint_pwrlevel.from_buffer_copy(self._user(c.data, c.size, "PWR_CONSTRAINT level"))
    if level.level not in (msm_kgsl.KGSL_CONSTRAINT_PWR_MIN, msm_kgsl.KGSL_CONSTRAINT_PWR_MAX):
      raise self._fail(errno.EINVAL, f"PWR_CONSTRAINT level {level.level}: KGSL_CONSTRAINT_PWR_MIN (0) or _MAX (1)")
    self.pwrlevel = level.level

  def _ctx_create(self, fd: int, p) -> None:
    if p.flags & ~CONTEXT_FLAGS_KNOWN:
      raise self._fail(errno.EINVAL, f"DRAWCTXT_CREATE flags {p.flags:#x}: bits {p.flags & ~CONTEXT_FLAGS_KNOWN:#x} are not modelled")
    style = (p.flags & msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE_MASK) >> msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE_SHIFT
    ctype = (p.flags & msm_kgsl.KGSL_CONTEXT_TYPE_MASK) >> msm_kgsl.KGSL_CONTEXT_TYPE_SHIFT
    if style > msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN or ctype not in (*range(6), msm_kgsl.KGSL_CONTEXT_TYPE_UNKNOWN):
      raise self._fail(errno.EINVAL, f"DRAWCTXT_CREATE flags {p.flags:#x}: preempt style {style} / context type {ctype} do not exist")
    p.drawctxt_id = cid = self._next["ctx"]
    self._next["ctx"] += 1
    self.contexts[cid] = Context(cid, p.flags)

  def _ctx_destroy(self, fd: int, p) -> None:
    self._context(p.drawctxt_id, "DRAWCTXT_DESTROY")
    self.cp.drop(p.drawctxt_id)
    with self.cv:
      del self.contexts[p.drawctxt_id]
      self.cv.notify_all()

  def _alloc(self, fd: int, p) -> None:
    if p.flags & ~GPUOBJ_FLAGS_KNOWN:
      raise self._fail(errno.EINVAL, f"GPUOBJ_ALLOC flags {p.flags:#x}: bits {p.flags & ~GPUOBJ_FLAGS_KNOWN:#x} are not modelled")
    if p.metadata_len or p.metadata: raise self._fail(errno.EINVAL, "GPUOBJ_ALLOC with metadata: not modelled")
    align = max(PAGE, 1 << ((p.flags & msm_kgsl.KGSL_MEMALIGN_MASK) >> msm_kgsl.KGSL_MEMALIGN_SHIFT))
    if p.size == 0 or p.size > 1 << 32: raise self._fail(errno.EINVAL, f"GPUOBJ_ALLOC of {p.size} bytes")
    size = -(-p.size // align) * align
    backing = mmap.mmap(-1, size)
    oid = self._next["obj"]
    self._next["obj"] += 1
    gpuaddr = 0 if p.flags & msm_kgsl.KGSL_MEMFLAGS_USE_CPU_MAP else self.gpu_space.reserve(size, align)
    self.objects[oid] = o = Obj(oid, size, p.flags, memoryview(backing), gpuaddr, backing)
    if gpuaddr:
      with self.lock: self.mapped[gpuaddr] = o
    p.id, p.mmapsize, p.va_len = oid, size, size

  def _object(self, oid: int, what: str) -> Obj:
    if (o := self.objects.get(oid)) is None: raise self._fail(errno.EINVAL, f"{what}: no GPU object with id {oid}")
    return o

  def _free(self, fd: int, p) -> None:
    o = self._object(p.id, "GPUOBJ_FREE")
    if p.flags: raise self._fail(errno.EINVAL, f"GPUOBJ_FREE flags {p.flags:#x}: KGSL_GPUOBJ_FREE_ON_EVENT is not modelled")
    del self.objects[p.id]
    with self.lock: self.mapped.pop(o.gpuaddr, None)

  def _info(self, fd: int, p) -> None:
    o = self._object(p.id, "GPUOBJ_INFO")
    p.gpuaddr, p.flags, p.size, p.va_len, p.va_addr = o.gpuaddr, o.flags, o.size, o.size, o.cpu_va or 0

  def _map_user_mem(self, fd: int, p) -> None:
    if p.memtype != msm_kgsl.KGSL_USER_MEM_TYPE_ADDR:
      raise self._fail(errno.EINVAL, f"MAP_USER_MEM memtype {p.memtype}: the model imports KGSL_USER_MEM_TYPE_ADDR memory only")
    if p.flags or p.offset: raise self._fail(errno.EINVAL, f"MAP_USER_MEM with flags {p.flags:#x} / offset {p.offset}: not modelled")
    if not p.len or p.hostptr % PAGE or p.len % PAGE:
      raise self._fail(errno.EINVAL, f"MAP_USER_MEM of [{p.hostptr:#x}, +{p.len:#x}): the range must be whole pages")
    mem = self._user(p.hostptr, p.len, "MAP_USER_MEM", pin=True)
    p.gpuaddr = self.gpu_space.reserve(p.len, PAGE)
    with self.lock: self.mapped[p.gpuaddr] = Obj(0, p.len, 0, mem, p.gpuaddr)

  def _sharedmem_free(self, fd: int, p) -> None:
    if (o := self.mapped.get(p.gpuaddr)) is None or o.id:
      raise self._fail(errno.EINVAL, f"SHAREDMEM_FREE of {p.gpuaddr:#x}: no user memory is mapped there")
    with self.lock: del self.mapped[p.gpuaddr]

  def _gpu_command(self, fd: int, p) -> None:
    c = self._context(p.context_id, "GPU_COMMAND")
    if c.fault: raise self._fail(errno.EDEADLK, f"GPU_COMMAND on context {c.id}, which a GPU fault reset ({c.fault})")
    if p.flags or p.numsyncs or p.numobjs:
      raise self._fail(errno.EINVAL, f"GPU_COMMAND flags {p.flags:#x} / {p.numsyncs} sync points / {p.numobjs} objects: not modelled")
    if p.cmdsize != ctypes.sizeof(msm_kgsl.kgsl_command_object) or not 1 <= p.numcmds <= 128:
      raise self._fail(errno.EINVAL, f"GPU_COMMAND with cmdsize {p.cmdsize}, numcmds {p.numcmds}: kgsl_command_object is 32 bytes")
    raw = self._user(p.cmdlist, p.cmdsize * p.numcmds, "GPU_COMMAND cmdlist")
    ibs = []
    for k in range(p.numcmds):
      cmd = msm_kgsl.kgsl_command_object.from_buffer_copy(raw[k * p.cmdsize:(k + 1) * p.cmdsize])
      if cmd.flags != msm_kgsl.KGSL_CMDLIST_IB or cmd.offset or not cmd.size or cmd.size % 4 or cmd.gpuaddr % 4:
        raise self._fail(errno.EINVAL, f"GPU_COMMAND entry {k} {cmd!r}: an IB (KGSL_CMDLIST_IB) of whole dwords is what the model runs")
      try: self.translate(cmd.gpuaddr, cmd.size)
      except CPFault as e: raise self._fail(errno.EINVAL, f"GPU_COMMAND entry {k}: {e}") from None
      ibs.append((cmd.gpuaddr, cmd.size))
    c.queued += 1
    p.timestamp = c.queued
    self.cp.submit(c.rb, c.id, c.queued, ibs, c.finegrain)

  def _read_ts(self, fd: int, p) -> None:
    c = self._context(p.context_id, "READTIMESTAMP")
    if p.type not in (msm_kgsl.KGSL_TIMESTAMP_CONSUMED, msm_kgsl.KGSL_TIMESTAMP_RETIRED, msm_kgsl.KGSL_TIMESTAMP_QUEUED):
      raise self._fail(errno.EINVAL, f"READTIMESTAMP type {p.type}")
    p.timestamp = c.queued if p.type == msm_kgsl.KGSL_TIMESTAMP_QUEUED else c.retired

  def _wait_ts(self, fd: int, p) -> None:
    c = self._context(p.context_id, "WAITTIMESTAMP")
    deadline = time.monotonic() + p.timeout / 1000
    with self.cv:
      while c.retired < p.timestamp and not c.fault and p.context_id in self.contexts:
        if (left := deadline - time.monotonic()) <= 0:
          raise self._fail(errno.ETIMEDOUT, f"context {c.id} did not retire timestamp {p.timestamp} within {p.timeout} ms "
                                       f"(retired {c.retired}){'; the CP stalls on ' + self.cp.stalled_on if self.cp.stalled_on else ''}")
        self.cv.wait(min(left, 0.05))
    if c.fault: raise self._fail(errno.EDEADLK, f"context {c.id} was reset by a GPU fault ({c.fault})")
    if p.context_id not in self.contexts: raise self._fail(errno.EINVAL, f"context {c.id} was destroyed while waited on")


# registered under hcq.models (pyproject.toml): kernel_interface(mock="kgsl", chip_id=...) is this model
MODEL = KernelModel("kgsl", KGSLModel, "emulated Adreno 630 (KGSL model)")
