"""Kernel-driver interfaces (a GPU's or NIC's kernel driver, /dev/vfio) as one small boundary.

A driver written against `KernelInterface` opens device files, issues ioctls with ctypes structures
(or an integer argument), reads and writes device files at an offset (VFIO regions), maps device memory
and reads sysfs; `OSKernel` does it with the real system calls and a model (a registered emu/ KernelModel, handed
out by `kernel_interface`) implements the same methods, so the driver code path is identical with and without
hardware. No monkeypatching of open/ioctl/mmap.
"""
from __future__ import annotations
import ctypes, errno, fcntl, mmap, os
from typing import Any, Callable, Protocol

from drivers.system.mmio import MMIO, MemMMIO, CallbackMMIO
from drivers.system.registry import KernelModel, model, models

PROT_NONE, PROT_RW = 0, mmap.PROT_READ | mmap.PROT_WRITE
MAP_FIXED, MAP_NORESERVE = 0x10, 0x4000     # linux/mman.h (x86, arm64)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FAILED = ctypes.c_void_p(-1).value


class KernelInterface(Protocol):
  def open(self, path: str) -> int: ...
  def close(self, fd: int) -> None: ...
  def ioctl(self, fd: int, request: int, arg: Any = None) -> int: ...
  def pread(self, fd: int, n: int, offset: int) -> bytes: ...
  def pwrite(self, fd: int, data: bytes, offset: int) -> int: ...
  def reserve(self, size: int, align: int) -> int: ...
  def anon(self, size: int) -> tuple[int, MemMMIO]: ...
  def mmap(self, fd: int, va: int | None, size: int, offset: int) -> tuple[int, MMIO]: ...
  def release(self, va: int, size: int) -> None: ...
  def read_text(self, path: str) -> str: ...
  def listdir(self, path: str) -> list[str]: ...
  def exists(self, path: str) -> bool: ...
  def readlink(self, path: str) -> str: ...


def _check(ret: int | None, what: str) -> int:
  if ret is None or ret == MAP_FAILED or ret == -1:
    e = ctypes.get_errno()
    raise OSError(e, f"{what} failed: {os.strerror(e)}")
  return ret


class OSKernel:
  """The real thing: system calls on this machine."""
  def open(self, path: str) -> int:
    try: return os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except PermissionError:
      raise PermissionError(f"no permission to open {path}: add your user to the group that owns it "
                            "(usually `render` or `video`) or run as root") from None

  def close(self, fd: int) -> None: os.close(fd)

  def ioctl(self, fd: int, request: int, arg: Any = None) -> int:
    """`arg`: a ctypes object (passed by pointer, filled in place), an int (passed by value) or None.
    Returns the ioctl's return value; raises OSError with the kernel's errno."""
    return fcntl.ioctl(fd, request, 0 if arg is None else arg)

  def pread(self, fd: int, n: int, offset: int) -> bytes: return os.pread(fd, n, offset)
  def pwrite(self, fd: int, data: bytes, offset: int) -> int: return os.pwrite(fd, data, offset)

  def reserve(self, size: int, align: int) -> int:
    """Reserve (not back) an address range: later maps land inside it with MAP_FIXED."""
    raw = _check(_libc.mmap(None, size + align, PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
                 "reserving address space")
    va = (raw + align - 1) & ~(align - 1)
    if va > raw: _libc.munmap(raw, va - raw)
    if (end := raw + size + align) > va + size: _libc.munmap(va + size, end - va - size)
    return va

  def anon(self, size: int) -> tuple[int, MemMMIO]:
    """Private read-write memory of this process (USERPTR buffers)."""
    addr = _check(_libc.mmap(None, size, PROT_RW, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0), f"allocating {size} bytes")
    return addr, MemMMIO(memoryview((ctypes.c_uint8 * size).from_address(addr)).cast("B"), "host memory")

  def mmap(self, fd: int, va: int | None, size: int, offset: int) -> tuple[int, MMIO]:
    """Map `size` bytes of a device file at `offset` (at `va`, inside a reservation, when given)."""
    flags = mmap.MAP_SHARED | (MAP_FIXED if va is not None else 0)
    addr = _check(_libc.mmap(va, size, PROT_RW, flags, fd, offset), f"mmap of {size:#x} bytes at offset {offset:#x}")
    return addr, MemMMIO(memoryview((ctypes.c_uint8 * size).from_address(addr)).cast("B"), f"fd {fd} @ {offset:#x}")

  def release(self, va: int, size: int) -> None:
    """Unmap whatever is at [va, va+size): a reservation, a device mapping or anonymous memory."""
    _libc.munmap(va, size)

  def read_text(self, path: str) -> str:
    with open(path) as f: return f.read()

  def listdir(self, path: str) -> list[str]: return sorted(os.listdir(path))
  def exists(self, path: str) -> bool: return os.path.exists(path)
  def readlink(self, path: str) -> str: return os.readlink(path)


class ModelKernel:
  """A kernel-driver model from emu/ behind KernelInterface: its mmaps come back as MMIO like real ones
  (memory as MemMMIO, register pages such as doorbells as CallbackMMIO)."""
  # the model's own calls, bound in __init__
  open: Callable[[str], int]
  close: Callable[[int], None]
  ioctl: Callable[..., int]
  reserve: Callable[[int, int], int]
  release: Callable[[int, int], None]
  read_text: Callable[[str], str]
  listdir: Callable[[str], list[str]]
  exists: Callable[[str], bool]
  pread: Callable[[int, int, int], bytes]
  pwrite: Callable[[int, bytes, int], int]
  readlink: Callable[[str], str]

  def __init__(self, model: Any):
    self.model = model
    for name in ("open", "close", "ioctl", "reserve", "release", "read_text", "listdir", "exists"):
      setattr(self, name, getattr(model, name))
    for name in ("pread", "pwrite", "readlink"):   # only some kernel drivers have files read this way
      setattr(self, name, getattr(model, name, None) or self._unsupported(name))

  def _unsupported(self, name: str):
    def fail(*args):
      raise OSError(errno.EINVAL, f"{type(self.model).__name__}: {name} is not supported on the files it models")
    return fail

  def anon(self, size: int) -> tuple[int, MemMMIO]:
    addr, view = self.model.anon(size)
    return addr, MemMMIO(view, "host memory")

  def mmap(self, fd: int, va: int | None, size: int, offset: int) -> tuple[int, MMIO]:
    addr, region = self.model.mmap(fd, va, size, offset)
    return addr, (MemMMIO(region, f"fd {fd} @ {offset:#x}") if isinstance(region, memoryview) else CallbackMMIO(region, f"fd {fd} @ {offset:#x}"))


def kernel_interface(mock: str | None = None, **model_args: Any) -> KernelInterface:
  """The real kernel, or the registered kernel-driver model named `mock` (entry point group hcq.models) built with
  `model_args`: e.g. mock='vfio', vfio-pci serving `function=`, an emu PCIFunction (see emu.vfio.VFIOModel)."""
  if mock is None: return OSKernel()
  if not isinstance(m := model(mock), KernelModel):
    names = ", ".join(k.name for k in models(KernelModel)) or "none registered"
    raise ValueError(f"no kernel-driver model named {mock!r} (available: {names})")
  return ModelKernel(m.create(**model_args))
