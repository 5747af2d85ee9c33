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
from emu.kernel_model import AT_LEAST, IOC_READ, IOC_WRITE, Ioctl, Ioctls, KernelDriverModel, ioc_dir, ioc_nr, ioc_type
from common.plugin import KernelModel

CTL, DEV, UVM = "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm"
# VA handed out by reserve(): inside FERMI_VASPACE_A's range and below 2^40, which a GPFIFO entry's address reaches
# (ENTRY0.GET 31:2, ENTRY1.GET_HI 7:0): the low range of reference section 5
VA_BASE, VA_END = 0x10_0000_0000, 0x80_0000_0000
PAGE = 0x1000
DEFAULT_CHIP = "GH100"                                   # an H200
PCI_BUS = (0, 0x41, 0, 0)                               # domain, bus, slot, function of the model GPU
# escape.c, nv.c (580.142): NV_CTL_DEVICE_ONLY / NV_ACTUAL_DEVICE_ONLY; on the other file an escape is EINVAL
CTL_ONLY, DEVICE_ONLY = (CTL,), (DEV,)
ESCAPE_NAMES = {v: k.removeprefix("NV_ESC_") for k, v in vars(rm).items() if k.startswith("NV_ESC_") and isinstance(v, int)}


class WriteOnly:
  """A register page mapped NVOS33_FLAGS_ACCESS_WRITE_ONLY: a load from it faults."""
  def __init__(self, region): self.region, self.size = region, region.size
  def read(self, offset: int, size: int) -> int: raise ValueError(f"read at {offset:#x} of a page mapped write-only")
  def write(self, offset: int, size: int, value: int) -> None: self.region.write(offset, size, value)


class NVKernelModel(KernelDriverModel):
  name, first_fd, layout = "NVIDIA model", 2000, "the 580 layout"

  def __init__(self, chip: str = DEFAULT_CHIP, vram_size: int = 256 << 20, version: str = "580.142"):
    if chip not in CHIPS: raise ValueError(f"no NVIDIA chip model {chip!r} (available: {', '.join(CHIPS)})")
    super().__init__(VA_BASE, VA_END)
    self.rm = RMModel(CHIPS[chip], vram_size, version)
    self.engine_classes = {**dmacopy.ENGINE_CLASSES, **compute.engine_classes(CHIPS[chip])}
    self.uvm = UVMModel(self.rm, lambda fd: self.fds.get(fd) == CTL, self._rm_failed)
    self.hosts: dict[int, GPFIFOEngine] = {}   # channel id -> its running host
    self.rm.on_doorbell.append(self._doorbell)
    self.rm.on_channel_free.append(self._channel_freed)
    self.devices = (CTL, DEV, UVM)
    self.registered: dict[int, int] = {}     # /dev/nvidia0 fd -> the control fd it was registered with
    self.bound: dict[int, tuple[object, int, int, int]] = {}   # /dev/nvidia0 fd -> (what MAP_MEMORY bound, offset, length, access)
    # the calls log "RM_ALLOC 0x80", "RM_CONTROL 0x800201", "UVM_REGISTER_GPU"; last_error: why the last RM/UVM call failed
    # (the status alone is what RM returns). RM escapes: _IOWR('F', nr, size), only the number selects the escape, the
    # size must be the escape's 580 structure's (RM_ALLOC: NVOS21 or NVOS64; CARD_INFO: one or more entries)
    escape = lambda nr, handler, struct, files=CTL_ONLY, **kw: Ioctl(nr, ESCAPE_NAMES[nr], handler, struct, files=files, **kw)
    escapes = Ioctls((escape(rm.NV_ESC_CHECK_VERSION_STR, self._check_version, rm.nv_ioctl_rm_api_version_t, ()),
                      escape(rm.NV_ESC_RM_ALLOC, self._alloc, (rm.NVOS21_PARAMETERS, rm.NVOS64_PARAMETERS), detail=lambda p: f"{p.hClass:#x}"),
                      escape(rm.NV_ESC_RM_CONTROL, self._control, rm.NVOS54_PARAMETERS, detail=lambda p: f"{p.cmd:#x}"),
                      escape(rm.NV_ESC_RM_FREE, self._free, rm.NVOS00_PARAMETERS),
                      escape(rm.NV_ESC_RM_ALLOC_MEMORY, self._alloc_memory, rm.nv_ioctl_nvos02_parameters_with_fd, DEVICE_ONLY,
                             detail=lambda a: f"{a.params.hClass:#x}"),
                      escape(rm.NV_ESC_RM_MAP_MEMORY, self._map_memory, rm.nv_ioctl_nvos33_parameters_with_fd),
                      escape(rm.NV_ESC_RM_MAP_MEMORY_DMA, self._map_memory_dma, rm.NVOS46_PARAMETERS),
                      escape(rm.NV_ESC_CARD_INFO, self._card_info, rm.nv_ioctl_card_info_t, size=AT_LEAST),   # nv.c fills size // 72 entries
                      escape(rm.NV_ESC_REGISTER_FD, self._register_fd, rm.nv_ioctl_register_fd_t, DEVICE_ONLY),
                      escape(rm.NV_ESC_WAIT_OPEN_COMPLETE, self._wait_open_complete, rm.nv_ioctl_wait_open_complete_t, DEVICE_ONLY)),
                     by_nr=True, type=rm.NV_IOCTL_MAGIC, direction=IOC_READ | IOC_WRITE)
    self.ioctls = {CTL: escapes, DEV: escapes, UVM: self.uvm.ioctls}

  def _rm_failed(self, why: str) -> None: self.last_error = why

  def _doorbell(self, ch: Channel) -> None:
    if (host := self.hosts.get(ch.chid)) is None:
      host = self.hosts[ch.chid] = GPFIFOEngine(ch, self.uvm, self.engine_classes)
      host.start()
    host.ring_doorbell(ch.pending)

  def _channel_freed(self, ch: Channel) -> None:
    if (host := self.hosts.pop(ch.chid, None)) is not None: host.stop()

  # --- files
  def _closed(self, fd: int, path: str) -> None:
    self.registered.pop(fd, None)
    self.bound.pop(fd, None)
    if path == UVM: self.uvm.close(fd)
    else: self.rm.close_fd(fd)

  def mmap(self, fd: int, va: int | None, size: int, offset: int) -> tuple[int, memoryview | Usermode]:
    """mmap of a /dev/nvidia0 fd that NV_ESC_RM_MAP_MEMORY bound: the memory (a view of it) or the usermode page."""
    self._file(fd, "mmap of")
    if fd not in self.bound: raise self._fail(errno.EINVAL, f"mmap of fd {fd}: no NV_ESC_RM_MAP_MEMORY bound it to memory")
    obj, off, length, access = self.bound[fd]
    if offset or size > length: raise self._fail(errno.EINVAL, f"mmap of [{offset:#x}, +{size:#x}) of a {length:#x}-byte RM mapping")
    va = va if va is not None else self.reserve(size, PAGE)
    if isinstance(obj, Memory):
      if obj.view is None: raise self._fail(errno.EINVAL, f"mmap of fd {fd}: its memory was freed")
      view = obj.view[off:off + size]
      return va, view.toreadonly() if access == rm.NVOS33_FLAGS_ACCESS_READ_ONLY else view   # write-only: not enforced on memory
    return va, WriteOnly(self.rm.usermode) if access == rm.NVOS33_FLAGS_ACCESS_WRITE_ONLY else self.rm.usermode

  # --- ioctls
  def _unknown_ioctl(self, fd: int, path: str, request: int) -> OSError:
    if path == UVM: return self._fail(errno.EINVAL, f"ioctl {request:#x} is not a UVM command this model implements")
    if ioc_type(request) != rm.NV_IOCTL_MAGIC or ioc_dir(request) != IOC_READ | IOC_WRITE:
      return self._fail(errno.ENOTTY, f"ioctl {request:#x} on {path} is not an _IOWR('F', ...) RM escape")
    return self._fail(errno.EINVAL, f"RM escape {ioc_nr(request):#x} is not one this model implements")

  def _status(self, p, call) -> None:
    try:
      call()
      p.status = rm.NV_OK
    except RMStatus as e:
      p.status, self.last_error = e.status, str(e)

  def _check_version(self, fd: int, a) -> None:
    ours = self.rm.version.encode()
    if a.cmd == rm.NV_RM_API_VERSION_CMD_QUERY:
      a.versionString, a.reply = ours, rm.NV_RM_API_VERSION_REPLY_RECOGNIZED
      return
    theirs = a.versionString
    same = theirs == ours if a.cmd == rm.NV_RM_API_VERSION_CMD_STRICT else theirs.split(b".")[0] == ours.split(b".")[0]
    if a.cmd not in (rm.NV_RM_API_VERSION_CMD_STRICT, rm.NV_RM_API_VERSION_CMD_RELAXED) or not same:
      a.reply, a.versionString = rm.NV_RM_API_VERSION_REPLY_UNRECOGNIZED, ours
      raise self._fail(errno.EINVAL, f"CHECK_VERSION_STR: client version {theirs!r} does not match the driver's {ours!r}")
    a.reply = rm.NV_RM_API_VERSION_REPLY_RECOGNIZED

  def _alloc(self, fd: int, p) -> None:
    def call(): p.hObjectNew = self.rm.alloc(p.hRoot, p.hObjectParent, p.hObjectNew, p.hClass, p.pAllocParms or 0, p.paramsSize, fd)
    self._status(p, call)

  def _alloc_memory(self, fd: int, a) -> None:
    if fd not in self.registered: raise self._fail(errno.EINVAL, f"RM_ALLOC_MEMORY on /dev/nvidia0 fd {fd} before NV_ESC_REGISTER_FD")
    p, size = a.params, a.params.limit + 1
    pages = memoryview((ctypes.c_uint8 * size).from_address(p.pMemory)).cast("B") \
      if p.pMemory and self.space.holds(p.pMemory, size) else None
    def call(): p.hObjectNew = self.rm.alloc_os_memory(p.hRoot, p.hObjectParent, p.hObjectNew, p.hClass, p.pMemory or 0, size, pages)
    self._status(p, call)

  def _control(self, fd: int, p) -> None:
    self._status(p, lambda: self.rm.control(p.hClient, p.hObject, p.cmd, p.params or 0, p.paramsSize))

  def _free(self, fd: int, p) -> None:
    self._status(p, lambda: self.rm.free(p.hRoot, p.hObjectOld))

  def _map_memory(self, fd: int, a) -> None:
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

  def _map_memory_dma(self, fd: int, p) -> None:
    self._status(p, lambda: self.rm.map_dma(p))

  def _card_info(self, fd: int, cards) -> None:
    for c in cards: ctypes.memset(ctypes.addressof(c), 0, ctypes.sizeof(c))
    c = cards[0]
    c.valid, c.gpu_id, c.minor_number, c.fb_size = 1, self.rm.gpu_id, 0, len(self.rm.vram)
    c.pci_info.domain, c.pci_info.bus, c.pci_info.slot, c.pci_info.function = PCI_BUS
    c.pci_info.vendor_id, c.pci_info.device_id = 0x10DE, self.rm.chip.device_id

  def _register_fd(self, fd: int, a) -> None:
    if self.fds.get(a.ctl_fd) != CTL: raise self._fail(errno.EINVAL, f"REGISTER_FD with ctl_fd {a.ctl_fd}: not an open /dev/nvidiactl")
    if fd in self.registered: raise self._fail(errno.EINVAL, f"fd {fd} is already registered (NV_ERR_INVALID_STATE)")
    self.registered[fd] = a.ctl_fd

  def _wait_open_complete(self, fd: int, a) -> None:
    a.rc, a.adapterStatus = 0, rm.NV_OK


# registered under hcq.models (pyproject.toml): kernel_interface(mock="nv", chip=...) is this model
MODEL = KernelModel("nv", NVKernelModel, f"emulated {CHIPS[DEFAULT_CHIP].marketing} (RM/UVM model)")
