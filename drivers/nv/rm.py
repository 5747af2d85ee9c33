"""The NVIDIA resource manager (RM) and UVM through the kernel driver: /dev/nvidiactl, /dev/nvidia<N>, /dev/nvidia-uvm.

Written against drivers.system.kernel.KernelInterface, so the same code runs on nvidia.ko and on the RM/UVM model
(emu/nvgpu). Layouts and numbers: autogen.nv (open-gpu-kernel-modules 580.142); sequence: reference nv_driver.md
sections 2, 3 and 5. RM escapes on nvidiactl/nvidia<N> are `_IOWR('F', nr, sizeof(arg))` and the kernel checks the
size; an RM call that fails returns its NV_STATUS in the argument's `status`. UVM ioctls are the raw command number,
the status in the argument's `rmStatus`.
"""
from __future__ import annotations
import ctypes
from dataclasses import dataclass

from autogen.nv import rm, uvm
from drivers.system.kernel import KernelInterface
from drivers.system.mmio import MMIO

CTL, UVM_PATH = "/dev/nvidiactl", "/dev/nvidia-uvm"
SUPPORTED_BRANCH = "580"          # autogen.nv's layouts: driver branch 580 (open-gpu-kernel-modules 580.142)
IOC_READ_WRITE = 3                 # _IOC_READ | _IOC_WRITE (asm-generic/ioctl.h)
MAX_CARDS = 64                     # NV_ESC_CARD_INFO: the kernel fills as many nv_ioctl_card_info_t as the argument holds
_STATUS_NAMES = {v: k for k, v in vars(rm).items() if k.startswith(("NV_ERR_", "NV_WARN_")) and isinstance(v, int)}


def status_name(status: int) -> str:
  """An NV_STATUS as its nvstatuscodes.h name (NV_ERR_INVALID_CLASS), or its number if it has none."""
  return "NV_OK" if status == rm.NV_OK else _STATUS_NAMES.get(status, f"NV_STATUS {status:#x}")


def nv_iowr(nr: int, size: int) -> int:
  """_IOWR(NV_IOCTL_MAGIC, nr, size): the request of an RM escape (nv-ioctl-numbers.h; asm-generic/ioctl.h)."""
  return IOC_READ_WRITE << 30 | size << 16 | rm.NV_IOCTL_MAGIC << 8 | nr


def field(rng: tuple[int, int], value: int) -> int:
  """`value` placed in the (hi, lo) bit range of an RM flags word (nvos.h DRF fields)."""
  hi, lo = rng
  if value >> (hi - lo + 1): raise ValueError(f"{value:#x} does not fit bits {hi}:{lo}")
  return value << lo


class RMError(RuntimeError):
  """An RM or UVM call that returned a status other than NV_OK."""
  def __init__(self, what: str, status: int):
    super().__init__(f"{what} failed: {status_name(status)} ({status:#x})")
    self.status = status


class UnsupportedDriver(RuntimeError):
  """The loaded nvidia.ko is of a branch whose struct layouts hcq does not carry."""


def parse_version(text: str) -> tuple[str, str]:
  """The driver's version string (NV_ESC_CHECK_VERSION_STR query) -> (version, branch), e.g. ('580.142', '580')."""
  version = text.strip()
  branch = version.split(".")[0]
  if not branch.isdigit(): raise UnsupportedDriver(f"the NVIDIA driver reports version {version!r}, which is not <branch>.<minor>")
  return version, branch


@dataclass
class Card:
  """One GPU as NV_ESC_CARD_INFO lists it."""
  gpu_id: int
  minor: int
  pci: tuple[int, int, int, int]    # domain, bus, slot, function
  vendor_id: int
  device_id: int
  fb_size: int


class RMClient:
  """A root client of RM and the process's UVM file, plus the raw calls on them."""
  def __init__(self, kernel: KernelInterface):
    self.k = kernel
    for path, module in ((CTL, "nvidia"), (UVM_PATH, "nvidia_uvm")):
      if not self.k.exists(path):
        raise FileNotFoundError(f"{path} does not exist: the {module} kernel module is not loaded "
                                f"(load it with `modprobe {module}` or `hcq_smi nv insmod`)")
    self.fds: list[int] = []
    self.ctl = self._open(CTL)
    try:
      self.version, self.branch = self.check_version()
      self.uvm = self._open(UVM_PATH)
      self.client = self.alloc(0, 0, rm.NV01_ROOT_CLIENT, root=0)   # a root client is its own root: hRoot 0
      self.uvm_call(uvm.UVM_INITIALIZE, uvm.UVM_INITIALIZE_PARAMS(flags=0))
    except BaseException:
      self.close()
      raise

  def _open(self, path: str) -> int:
    fd = self.k.open(path)
    self.fds.append(fd)
    return fd

  def escape(self, fd: int, nr: int, arg: ctypes.Structure | ctypes.Array) -> None:
    """One RM escape; the kernel's size check makes a wrong layout fail here (EINVAL), not silently."""
    try: self.k.ioctl(fd, nv_iowr(nr, ctypes.sizeof(arg)), arg)
    except OSError as e:
      raise OSError(e.errno, f"RM escape {nr:#x} ({type(arg).__name__}, {ctypes.sizeof(arg)} bytes) failed: {e.strerror}") from None

  def check_version(self) -> tuple[str, str]:
    """NV_ESC_CHECK_VERSION_STR, cmd '2' (query): its layout is the same in every branch (reference section 10)."""
    arg = rm.nv_ioctl_rm_api_version_t(cmd=rm.NV_RM_API_VERSION_CMD_QUERY)
    self.escape(self.ctl, rm.NV_ESC_CHECK_VERSION_STR, arg)
    version, branch = parse_version(arg.versionString.decode(errors="replace"))
    if branch != SUPPORTED_BRANCH:
      raise UnsupportedDriver(f"NVIDIA driver {version} is loaded, but hcq carries the RM/UVM struct layouts of driver branch "
                              f"{SUPPORTED_BRANCH} only (autogen.nv, from open-gpu-kernel-modules 580.142): install a "
                              f"{SUPPORTED_BRANCH}.x driver, or generate autogen.nv from the matching tag")
    return version, branch

  def alloc(self, parent: int, handle: int, cls: int, params: ctypes.Structure | None = None, root: int | None = None) -> int:
    """NV_ESC_RM_ALLOC (NVOS64): a new object of class `cls` under `parent`; handle 0 lets RM choose. -> its handle."""
    arg = rm.NVOS64_PARAMETERS(hRoot=self.client if root is None else root, hObjectParent=parent, hObjectNew=handle, hClass=cls,
                               pAllocParms=ctypes.addressof(params) if params is not None else None,
                               paramsSize=ctypes.sizeof(params) if params is not None else 0)
    self.escape(self.ctl, rm.NV_ESC_RM_ALLOC, arg)
    if arg.status != rm.NV_OK: raise RMError(f"RM_ALLOC of class {cls:#x} under {parent:#x}", arg.status)
    return arg.hObjectNew

  def control(self, obj: int, cmd: int, params: ctypes.Structure) -> ctypes.Structure:
    """NV_ESC_RM_CONTROL (NVOS54): RM checks paramsSize against the command's structure exactly."""
    arg = rm.NVOS54_PARAMETERS(hClient=self.client, hObject=obj, cmd=cmd, params=ctypes.addressof(params),
                               paramsSize=ctypes.sizeof(params))
    self.escape(self.ctl, rm.NV_ESC_RM_CONTROL, arg)
    if arg.status != rm.NV_OK: raise RMError(f"RM_CONTROL {cmd:#x} on {obj:#x}", arg.status)
    return params

  def free(self, parent: int, obj: int) -> None:
    """NV_ESC_RM_FREE (NVOS00): the object and everything allocated under it."""
    arg = rm.NVOS00_PARAMETERS(hRoot=self.client, hObjectParent=parent, hObjectOld=obj)
    self.escape(self.ctl, rm.NV_ESC_RM_FREE, arg)
    if arg.status != rm.NV_OK: raise RMError(f"RM_FREE of {obj:#x}", arg.status)

  def uvm_call(self, cmd: int, params: ctypes.Structure) -> ctypes.Structure:
    """A UVM ioctl: the raw command number; UVM copies its own struct size, so only the 580 layout is right."""
    self.k.ioctl(self.uvm, cmd, params)
    if params.rmStatus != rm.NV_OK: raise RMError(f"UVM ioctl {cmd:#x} ({type(params).__name__})", params.rmStatus)
    return params

  def cards(self) -> list[Card]:
    infos = (rm.nv_ioctl_card_info_t * MAX_CARDS)()
    self.escape(self.ctl, rm.NV_ESC_CARD_INFO, infos)
    return [Card(c.gpu_id, c.minor_number, (c.pci_info.domain, c.pci_info.bus, c.pci_info.slot, c.pci_info.function),
                 c.pci_info.vendor_id, c.pci_info.device_id, c.fb_size) for c in infos if c.valid]

  def open_gpu_file(self, minor: int) -> int:
    """A /dev/nvidia<minor> fd registered with the control fd (NV_ESC_REGISTER_FD), as RM wants before it is used."""
    fd = self._open(f"/dev/nvidia{minor}")
    self.escape(fd, rm.NV_ESC_REGISTER_FD, rm.nv_ioctl_register_fd_t(ctl_fd=self.ctl))
    return fd

  def close_file(self, fd: int) -> None:
    self.fds.remove(fd)
    self.k.close(fd)

  def map_cpu(self, minor: int, device: int, memory: int, size: int, va: int | None, flags: int = 0) -> tuple[int, int, MMIO]:
    """NV_ESC_RM_MAP_MEMORY binds a fresh /dev/nvidia<minor> fd to the memory; mmap of that fd is the mapping
    (one fd per mapping, kept open while it lives: reference section 5). -> (fd, address, mapping)"""
    fd = self.open_gpu_file(minor)
    try:
      arg = rm.nv_ioctl_nvos33_parameters_with_fd(fd=fd, params=rm.NVOS33_PARAMETERS(
        hClient=self.client, hDevice=device, hMemory=memory, offset=0, length=size, flags=flags))
      self.escape(self.ctl, rm.NV_ESC_RM_MAP_MEMORY, arg)
      if arg.params.status != rm.NV_OK: raise RMError(f"RM_MAP_MEMORY of {memory:#x}", arg.params.status)
      return (fd, *self.k.mmap(fd, va, size, 0))
    except BaseException:
      self.close_file(fd)
      raise

  def close(self) -> None:
    for fd in reversed(self.fds): self.k.close(fd)
    self.fds.clear()
