"""A model of the NVIDIA kernel modules (nvidia.ko's /dev/nvidiactl and /dev/nvidia0, nvidia-uvm.ko's
/dev/nvidia-uvm) over one GPU, implementing drivers.system.kernel.KernelInterface.

RM escapes are decoded as nvidia.ko does: the request must be _IOWR('F', nr, size) with the size of the escape's 580
structure (EINVAL otherwise; RM_ALLOC takes NVOS21 or NVOS64, CARD_INFO one or more nv_ioctl_card_info_t) and on
the file it belongs to (the RM calls on /dev/nvidiactl, RM_ALLOC_MEMORY and REGISTER_FD on /dev/nvidia0); RM
failures are NV_STATUS codes in the argument's status field with the ioctl itself succeeding. The RM object tree is
emu.nvgpu.rm, UVM emu.nvgpu.uvm. `chip` picks the GPU (GH100, an H200, by default; GA100, GA102) and `version`
the driver version the model reports (a branch other than 580 lets tests see the driver refuse it).
A channel's first doorbell starts its host (emu.nvgpu.gpfifo) on its GPFIFO, reading and writing through the UVM VA
map, with the copy classes (emu.nvgpu.dmacopy) and the chip's compute class (emu.nvgpu.compute: QMD launches run by the
PTX engine) bindable; freeing the channel stops it.
Not modelled: more than one GPU.
"""
from __future__ import annotations
import ctypes, errno

from autogen.nv import rm
from emu.nvgpu.chips import CHIPS
from emu.nvgpu import compute, dmacopy
from emu.nvgpu.gpfifo import GPFIFOEngine
from emu.nvgpu.rm import Channel, Memory, RMModel, RMStatus, Usermode
from emu.nvgpu.uvm import UVMModel
from emu.addrspace import ProcessAddressSpace
from common.plugin import KernelModel

CTL, DEV, UVM = "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm"
# VA handed out by reserve(): inside FERMI_VASPACE_A's range and below 2^40, which a GPFIFO entry's address reaches
# (ENTRY0.GET 31:2, ENTRY1.GET_HI 7:0): the low range of reference section 5
VA_BASE, VA_END = 0x10_0000_0000, 0x80_0000_0000
PAGE = 0x1000
DEFAULT_CHIP = "GH100"                                   # an H200
PCI_BUS = (0, 0x41, 0, 0)                               # domain, bus, slot, function of the model GPU
# escape.c, nv.c (580.142): NV_CTL_DEVICE_ONLY / NV_ACTUAL_DEVICE_ONLY; on the other file an escape is EINVAL
CTL_ONLY = (rm.NV_ESC_RM_ALLOC, rm.NV_ESC_RM_FREE, rm.NV_ESC_RM_CONTROL, rm.NV_ESC_RM_MAP_MEMORY, rm.NV_ESC_RM_MAP_MEMORY_DMA,
            rm.NV_ESC_CARD_INFO)
DEVICE_ONLY = (rm.NV_ESC_RM_ALLOC_MEMORY, rm.NV_ESC_REGISTER_FD, rm.NV_ESC_WAIT_OPEN_COMPLETE)
ESCAPE_NAMES = {v: k.removeprefix("NV_ESC_") for k, v in vars(rm).items() if k.startswith("NV_ESC_") and isinstance(v, int)}


def _fail(code: int, what: str) -> OSError: return OSError(code, f"NVIDIA model: {what}")


class WriteOnly:
  """A register page mapped NVOS33_FLAGS_ACCESS_WRITE_ONLY: a load from it faults."""
  def __init__(self, region): self.region, self.size = region, region.size
  def read(self, offset: int, size: int) -> int: raise ValueError(f"read at {offset:#x} of a page mapped write-only")
  def write(self, offset: int, size: int, value: int) -> None: self.region.write(offset, size, value)


class NVKernelModel:
  def __init__(self, chip: str = DEFAULT_CHIP, vram_size: int = 256 << 20, version: str = "580.142"):
    if chip not in CHIPS: raise ValueError(f"no NVIDIA chip model {chip!r} (available: {', '.join(CHIPS)})")
    self.rm = RMModel(CHIPS[chip], vram_size, version)
    self.engine_classes = {**dmacopy.ENGINE_CLASSES, **compute.engine_classes(CHIPS[chip])}
    self.uvm = UVMModel(self.rm, lambda fd: self.fds.get(fd) == CTL)
    self.hosts: dict[int, GPFIFOEngine] = {}   # channel id -> its running host
    self.rm.on_doorbell.append(self._doorbell)
    self.rm.on_channel_free.append(self._channel_freed)
    self.fds: dict[int, str] = {}
    self.registered: dict[int, int] = {}     # /dev/nvidia0 fd -> the control fd it was registered with
    self.bound: dict[int, tuple[object, int, int, int]] = {}   # /dev/nvidia0 fd -> (what MAP_MEMORY bound, offset, length, access)
    self.space = ProcessAddressSpace(VA_BASE, VA_END, "NVIDIA model")
    self.reserve, self.anon, self.release = self.space.reserve, self.space.anon, self.space.release
    self.last_error = ""                      # why the last RM/UVM call failed (the status alone is what RM returns)
    self.calls: list[str] = []                # every ioctl, as "RM_ALLOC 0x80", "RM_CONTROL 0x800201", "UVM_REGISTER_GPU"
    self._next = {"fd": 2000}
    self.escapes = {rm.NV_ESC_CHECK_VERSION_STR: (rm.nv_ioctl_rm_api_version_t, self._check_version),
                    rm.NV_ESC_RM_ALLOC: (None, self._alloc), rm.NV_ESC_RM_CONTROL: (rm.NVOS54_PARAMETERS, self._control),
                    rm.NV_ESC_RM_FREE: (rm.NVOS00_PARAMETERS, self._free),
                    rm.NV_ESC_RM_ALLOC_MEMORY: (rm.nv_ioctl_nvos02_parameters_with_fd, self._alloc_memory),
                    rm.NV_ESC_RM_MAP_MEMORY: (rm.nv_ioctl_nvos33_parameters_with_fd, self._map_memory),
                    rm.NV_ESC_RM_MAP_MEMORY_DMA: (rm.NVOS46_PARAMETERS, self._map_memory_dma),
                    rm.NV_ESC_CARD_INFO: (rm.nv_ioctl_card_info_t, self._card_info),
                    rm.NV_ESC_REGISTER_FD: (rm.nv_ioctl_register_fd_t, self._register_fd),
                    rm.NV_ESC_WAIT_OPEN_COMPLETE: (rm.nv_ioctl_wait_open_complete_t, self._wait_open_complete)}

  def _doorbell(self, ch: Channel) -> None:
    if (host := self.hosts.get(ch.chid)) is None:
      host = self.hosts[ch.chid] = GPFIFOEngine(ch, self.uvm, self.engine_classes)
      host.start()
    host.ring_doorbell(ch.pending)

  def _channel_freed(self, ch: Channel) -> None:
    if (host := self.hosts.pop(ch.chid, None)) is not None: host.stop()

  # --- files
  def exists(self, path: str) -> bool: return path in (CTL, DEV, UVM)

  def open(self, path: str) -> int:
    if not self.exists(path): raise FileNotFoundError(errno.ENOENT, f"NVIDIA model: no device file {path}")
    self._next["fd"] += 1
    self.fds[fd := self._next["fd"] - 1] = path
    return fd

  def close(self, fd: int) -> None:
    if (path := self.fds.pop(fd, None)) is None: raise _fail(errno.EBADF, f"close of fd {fd}, which is not open")
    self.registered.pop(fd, None)
    self.bound.pop(fd, None)
    if path == UVM: self.uvm.close(fd)
    else: self.rm.close_fd(fd)

  def read_text(self, path: str) -> str: raise FileNotFoundError(errno.ENOENT, f"NVIDIA model: no file {path}")
  def listdir(self, path: str) -> list[str]: raise FileNotFoundError(errno.ENOENT, f"NVIDIA model: no directory {path}")

  def mmap(self, fd: int, va: int | None, size: int, offset: int) -> tuple[int, memoryview | Usermode]:
    """mmap of a /dev/nvidia0 fd that NV_ESC_RM_MAP_MEMORY bound: the memory (a view of it) or the usermode page."""
    if fd not in self.bound: raise _fail(errno.EINVAL, f"mmap of fd {fd}: no NV_ESC_RM_MAP_MEMORY bound it to memory")
    obj, off, length, access = self.bound[fd]
    if offset or size > length: raise _fail(errno.EINVAL, f"mmap of [{offset:#x}, +{size:#x}) of a {length:#x}-byte RM mapping")
    va = va if va is not None else self.reserve(size, PAGE)
    if isinstance(obj, Memory):
      if obj.view is None: raise _fail(errno.EINVAL, f"mmap of fd {fd}: its memory was freed")
      view = obj.view[off:off + size]
      return va, view.toreadonly() if access == rm.NVOS33_FLAGS_ACCESS_READ_ONLY else view   # write-only: not enforced on memory
    return va, WriteOnly(self.rm.usermode) if access == rm.NVOS33_FLAGS_ACCESS_WRITE_ONLY else self.rm.usermode

  # --- ioctls
  def ioctl(self, fd: int, request: int, arg) -> int:
    path = self.fds.get(fd)
    if path is None: raise _fail(errno.EBADF, f"ioctl on fd {fd}, which is not open")
    if path == UVM:
      self.calls.append(self.uvm.names.get(request, f"UVM {request:#x}"))
      self.uvm.ioctl(fd, request, arg)
      self.last_error = getattr(self.uvm, "last_error", "")
      return 0
    nr, size = request & 0xFF, request >> 16 & 0x3FFF
    if request >> 8 & 0xFF != rm.NV_IOCTL_MAGIC or request >> 30 != 3:
      raise _fail(errno.ENOTTY, f"ioctl {request:#x} on {path} is not an _IOWR('F', ...) RM escape")
    if nr not in self.escapes: raise _fail(errno.EINVAL, f"RM escape {nr:#x} is not one this model implements")
    struct, handler = self.escapes[nr]
    if not isinstance(arg, ctypes.Structure | ctypes.Array) or ctypes.sizeof(arg) < size:
      raise _fail(errno.EFAULT, f"escape {nr:#x}: the argument is not {size} bytes of memory, as the request says")
    if nr == rm.NV_ESC_RM_ALLOC: ok = size in (ctypes.sizeof(rm.NVOS21_PARAMETERS), ctypes.sizeof(rm.NVOS64_PARAMETERS))
    elif nr == rm.NV_ESC_CARD_INFO: ok = size >= ctypes.sizeof(struct)     # nv.c fills size // 72 entries
    else: ok = size == ctypes.sizeof(struct)
    if not ok:
      raise _fail(errno.EINVAL, f"escape {nr:#x} with a {size}-byte argument: the 580 layout is "
                                f"{ctypes.sizeof(struct) if struct else '32 (NVOS21) or 48 (NVOS64)'} bytes")
    if nr in CTL_ONLY and path != CTL: raise _fail(errno.EINVAL, f"{ESCAPE_NAMES[nr]} is for /dev/nvidiactl only, not {path}")
    if nr in DEVICE_ONLY and path != DEV: raise _fail(errno.EINVAL, f"{ESCAPE_NAMES[nr]} is for /dev/nvidia0 only, not {path}")
    if nr == rm.NV_ESC_RM_ALLOC_MEMORY and fd not in self.registered:
      raise _fail(errno.EINVAL, f"RM_ALLOC_MEMORY on /dev/nvidia0 fd {fd} before NV_ESC_REGISTER_FD")
    buf = (ctypes.c_uint8 * size).from_address(ctypes.addressof(arg))
    name = ESCAPE_NAMES[nr]
    if nr in (rm.NV_ESC_RM_ALLOC, rm.NV_ESC_RM_ALLOC_MEMORY): name += f" {ctypes.c_uint32.from_buffer(buf, 12).value:#x}"   # hClass
    elif nr == rm.NV_ESC_RM_CONTROL: name += f" {rm.NVOS54_PARAMETERS.from_buffer(buf).cmd:#x}"
    self.calls.append(name)
    handler(fd, buf)
    return 0

  def _status(self, p, call) -> None:
    try:
      call()
      p.status = rm.NV_OK
    except RMStatus as e:
      p.status, self.last_error = e.status, str(e)

  def _check_version(self, fd, buf) -> None:
    a = rm.nv_ioctl_rm_api_version_t.from_buffer(buf)
    ours = self.rm.version.encode()
    if a.cmd == rm.NV_RM_API_VERSION_CMD_QUERY:
      a.versionString, a.reply = ours, rm.NV_RM_API_VERSION_REPLY_RECOGNIZED
      return
    theirs = a.versionString
    same = theirs == ours if a.cmd == rm.NV_RM_API_VERSION_CMD_STRICT else theirs.split(b".")[0] == ours.split(b".")[0]
    if a.cmd not in (rm.NV_RM_API_VERSION_CMD_STRICT, rm.NV_RM_API_VERSION_CMD_RELAXED) or not same:
      a.reply, a.versionString = rm.NV_RM_API_VERSION_REPLY_UNRECOGNIZED, ours
      raise _fail(errno.EINVAL, f"CHECK_VERSION_STR: client version {theirs!r} does not match the driver's {ours!r}")
    a.reply = rm.NV_RM_API_VERSION_REPLY_RECOGNIZED

  def _alloc(self, fd, buf) -> None:
    p = (rm.NVOS64_PARAMETERS if len(buf) == ctypes.sizeof(rm.NVOS64_PARAMETERS) else rm.NVOS21_PARAMETERS).from_buffer(buf)
    def call(): p.hObjectNew = self.rm.alloc(p.hRoot, p.hObjectParent, p.hObjectNew, p.hClass, p.pAllocParms or 0, p.paramsSize, fd)
    self._status(p, call)

  def _alloc_memory(self, fd, buf) -> None:
    a = rm.nv_ioctl_nvos02_parameters_with_fd.from_buffer(buf)
    p, size = a.params, a.params.limit + 1
    pages = memoryview((ctypes.c_uint8 * size).from_address(p.pMemory)).cast("B") \
      if p.pMemory and self.space.holds(p.pMemory, size) else None
    def call(): p.hObjectNew = self.rm.alloc_os_memory(p.hRoot, p.hObjectParent, p.hObjectNew, p.hClass, p.pMemory or 0, size, pages)
    self._status(p, call)

  def _control(self, fd, buf) -> None:
    p = rm.NVOS54_PARAMETERS.from_buffer(buf)
    self._status(p, lambda: self.rm.control(p.hClient, p.hObject, p.cmd, p.params or 0, p.paramsSize))

  def _free(self, fd, buf) -> None:
    p = rm.NVOS00_PARAMETERS.from_buffer(buf)
    self._status(p, lambda: self.rm.free(p.hRoot, p.hObjectOld))

  def _map_memory(self, fd, buf) -> None:
    a = rm.nv_ioctl_nvos33_parameters_with_fd.from_buffer(buf)
    p = a.params
    def call():
      if self.fds.get(a.fd) != DEV or a.fd not in self.registered:
        raise RMStatus(rm.NV_ERR_INVALID_ARGUMENT, f"MAP_MEMORY with fd {a.fd}: not a registered /dev/nvidia0 fd")
      if a.fd in self.bound: raise RMStatus(rm.NV_ERR_STATE_IN_USE, f"fd {a.fd} already holds a mapping: use one fd per mapping")
      access = p.flags >> rm.NVOS33_FLAGS_ACCESS[1] & 3
      if access > rm.NVOS33_FLAGS_ACCESS_WRITE_ONLY: raise RMStatus(rm.NV_ERR_INVALID_FLAGS, f"MAP_MEMORY access {access}")
      self.bound[a.fd] = (self.rm.map_cpu(p.hClient, p.hDevice, p.hMemory, p.offset, p.length), p.offset, p.length, access)
      p.pLinearAddress = p.offset    # the mmap offset on that fd: 0 for a mapping of the object's start
    self._status(p, call)

  def _map_memory_dma(self, fd, buf) -> None:
    p = rm.NVOS46_PARAMETERS.from_buffer(buf)
    self._status(p, lambda: self.rm.map_dma(p))

  def _card_info(self, fd, buf) -> None:
    cards = (rm.nv_ioctl_card_info_t * (len(buf) // ctypes.sizeof(rm.nv_ioctl_card_info_t))).from_buffer(buf)
    for c in cards: ctypes.memset(ctypes.addressof(c), 0, ctypes.sizeof(c))
    c = cards[0]
    c.valid, c.gpu_id, c.minor_number, c.fb_size = 1, self.rm.gpu_id, 0, len(self.rm.vram)
    c.pci_info.domain, c.pci_info.bus, c.pci_info.slot, c.pci_info.function = PCI_BUS
    c.pci_info.vendor_id, c.pci_info.device_id = 0x10DE, self.rm.chip.device_id

  def _register_fd(self, fd, buf) -> None:
    a = rm.nv_ioctl_register_fd_t.from_buffer(buf)
    if self.fds.get(a.ctl_fd) != CTL: raise _fail(errno.EINVAL, f"REGISTER_FD with ctl_fd {a.ctl_fd}: not an open /dev/nvidiactl")
    if fd in self.registered: raise _fail(errno.EINVAL, f"fd {fd} is already registered (NV_ERR_INVALID_STATE)")
    self.registered[fd] = a.ctl_fd

  def _wait_open_complete(self, fd, buf) -> None:
    a = rm.nv_ioctl_wait_open_complete_t.from_buffer(buf)
    a.rc, a.adapterStatus = 0, rm.NV_OK


# registered under hcq.models (pyproject.toml): kernel_interface(mock="nv", chip=...) is this model
MODEL = KernelModel("nv", NVKernelModel, f"emulated {CHIPS[DEFAULT_CHIP].marketing} (RM/UVM model)")
