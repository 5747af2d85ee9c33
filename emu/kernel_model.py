"""What every kernel-driver model shares (drivers.system.kernel.KernelInterface served by a model): the process's open
files, ioctl dispatch through the table each model declares, the argument size rule of each ioctl, errno failures that
name the model, the call log, the sysfs text files it serves and its process address space. A model declares its
device files and its ioctls (request, handler, argument structure, size rule) and keeps only its semantics.

Files: open() of a device file the model does not serve is ENOENT, and any call on an fd that is not open EBADF (as
fget fails in the kernel); `_closed(fd, path)` runs for every close, `_last_closed(path)` when the last file of a path
closes (a driver's release of its per-process state).

ioctl numbers are asm-generic/ioctl.h's: bits 0-7 _IOC_NR, 8-15 _IOC_TYPE, 16-29 _IOC_SIZE, 30-31 _IOC_DIR (_IOC_WRITE:
the kernel copies the argument in, _IOC_READ: out). A table matches the whole request, or only its number (`by_nr`, as
a driver that switches on _IOC_NR does), optionally only requests of one type and direction; a request it does not
match goes to the model's `_unknown_ioctl` for its errno. A request that encodes a size needs that many bytes of memory
behind the argument (EFAULT otherwise, copy_from_user's failure). Size rules, per ioctl:
  EXACT     the argument is the structure (or one of the structures): its size is that of the request (or, for tables
            whose requests encode no size, of the argument); anything else is EINVAL. The handler gets the structure in
            place.
  AT_LEAST  one structure or more: the handler gets the array of them in place.
  COPY_IN   the kernel's own definition of the command bounds the copies: the handler gets a kernel copy of the
            structure, zero past the min(_IOC_SIZE of the request, structure size) bytes copied in when the command
            is _IOC_WRITE, and as many bytes are copied back out (also on failure) when it is _IOC_READ
            (kfd_chardev.c kfd_ioctl).
  ARGSZ     the structure starts with `argsz`, which must cover the structure and lie within the buffer passed
            (vfio.h's convention, vfio_ioctl_check_extension et al.): the handler gets the structure in place.
  RAW       no structure: the handler gets the argument as passed (an integer, a pointer to an int, a string).
A handler is (fd, argument) -> the ioctl's return value (None: 0); an OSError it raises is the ioctl's errno and its
text becomes `last_error`. Every ioctl that passes the checks above is in `calls` (its name, plus the detail its
declaration adds), before its handler runs.
"""
from __future__ import annotations
import ctypes, errno
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from emu.addrspace import ProcessAddressSpace

Struct = type[ctypes.Structure]
IOC_NONE, IOC_WRITE, IOC_READ = 0, 1, 2
EXACT, AT_LEAST, COPY_IN, ARGSZ, RAW = "exact", "at least", "copy-in", "argsz", "raw"


def ioc(direction: int, type: int, nr: int, size: int) -> int:
  """_IOC(dir, type, nr, size)."""
  return direction << 30 | size << 16 | type << 8 | nr


def ioc_nr(request: int) -> int: return request & 0xFF
def ioc_type(request: int) -> int: return request >> 8 & 0xFF
def ioc_size(request: int) -> int: return request >> 16 & 0x3FFF
def ioc_dir(request: int) -> int: return request >> 30 & 3


def _memory(arg: Any) -> bool: return isinstance(arg, ctypes.Structure | ctypes.Array)


@dataclass(frozen=True)
class Ioctl:
  """One ioctl: `request` (the kernel's definition of the command, whose direction and size COPY_IN copies by; in a
  `by_nr` table its number is what selects it), `name` (the call log's and the messages'), the
  handler, the argument structure(s) and the size rule; `files`: the only device files that take it (on the others it
  is EINVAL), when not every file of its table does; `detail`: what the call log adds to the name (from the argument)."""
  request: int
  name: str
  handler: Callable[[int, Any], int | None]
  struct: Struct | tuple[Struct, ...] | None = None
  size: str = EXACT
  files: tuple[str, ...] = ()
  detail: Callable[[Any], str] | None = None

  @property
  def structs(self) -> tuple[Struct, ...]: return self.struct if isinstance(self.struct, tuple) else (self.struct,) if self.struct else ()


class Ioctls:
  """The ioctls one kind of file takes. `by_nr`: only _IOC_NR selects the command; `type`/`direction`: requests of
  another _IOC_TYPE or _IOC_DIR match nothing; `sized=False`: the requests are plain numbers that encode no size."""
  def __init__(self, ioctls: Iterable[Ioctl], by_nr: bool = False, type: int | None = None, direction: int | None = None,
               sized: bool = True):
    self.by_nr, self.type, self.direction, self.sized = by_nr, type, direction, sized
    self.table = {ioc_nr(i.request) if by_nr else i.request: i for i in ioctls}

  def find(self, request: int) -> Ioctl | None:
    if self.type is not None and ioc_type(request) != self.type: return None
    if self.direction is not None and ioc_dir(request) != self.direction: return None
    return self.table.get(ioc_nr(request) if self.by_nr else request)


class KernelDriverModel:
  """The base of a kernel-driver model. A model sets `name` (its messages' prefix), `first_fd`, `devices` (the device
  files open() takes), `ioctls` (device file -> its Ioctls), `files` (sysfs text files: path -> content) and, where
  a size rule fails, `layout` (what the expected structure is called in the message)."""
  name = "kernel model"
  first_fd = 3
  layout = "the argument structure"

  def __init__(self, va_base: int, va_end: int):
    self.fds: dict[int, str] = {}            # open files: fd -> the device file's path
    self.devices: set[str] | tuple[str, ...] = ()
    self.ioctls: dict[str, Ioctls] = {}
    self.files: dict[str, str] = {}
    self.calls: list[str] = []               # every ioctl that reached its handler, in order
    self.last_error = ""                     # why the last call failed
    self.space = ProcessAddressSpace(va_base, va_end, self.name)
    self._next_fd = self.first_fd

  def _fail(self, code: int, what: str) -> OSError: return OSError(code, f"{self.name}: {what}")

  # --- files
  def open(self, path: str) -> int:
    if path not in self.devices: raise FileNotFoundError(errno.ENOENT, f"{self.name}: no device file {path}")
    return self._new_fd(path)

  def _new_fd(self, path: str) -> int:
    fd, self._next_fd = self._next_fd, self._next_fd + 1
    self.fds[fd] = path
    return fd

  def _file(self, fd: int, what: str) -> str:
    """The path of open file `fd`; EBADF naming `what` ("ioctl on", "mmap of") when it is not open."""
    if (path := self.fds.get(fd)) is None: raise self._fail(errno.EBADF, f"{what} fd {fd}, which is not open")
    return path

  def _open_fds(self, path: str) -> list[int]: return [fd for fd, p in self.fds.items() if p == path]

  def close(self, fd: int) -> None:
    path = self._file(fd, "close of")
    del self.fds[fd]
    self._closed(fd, path)
    if path not in self.fds.values(): self._last_closed(path)

  def _closed(self, fd: int, path: str) -> None:
    """`fd` (a file of `path`) was closed."""

  def _last_closed(self, path: str) -> None:
    """The last open file of `path` was closed."""

  def read_text(self, path: str) -> str:
    if (text := self.files.get(path)) is None: raise FileNotFoundError(errno.ENOENT, f"{self.name}: no such file {path}")
    return text

  def listdir(self, path: str) -> list[str]:
    path = path.rstrip("/") + "/"
    names = sorted({p[len(path):].split("/")[0] for p in self.files if p.startswith(path)})
    if not names: raise FileNotFoundError(errno.ENOENT, f"{self.name}: no such directory {path}")
    return names

  def exists(self, path: str) -> bool:
    return path in self.devices or path in self.files or any(p.startswith(path.rstrip("/") + "/") for p in self.files)

  # --- the process's address space
  def reserve(self, size: int, align: int) -> int: return self.space.reserve(size, align)

  def anon(self, size: int) -> tuple[int, memoryview]:
    """Process memory (what mmap(MAP_ANONYMOUS) gives); the model finds it again by its address."""
    return self.space.anon(size)

  def release(self, va: int, size: int) -> None: self.space.release(va, size)

  # --- ioctls
  def _unknown_ioctl(self, fd: int, path: str, request: int) -> OSError:
    """The error of a request no table of `path` matches: ENOTTY, as for a command the driver does not know."""
    return self._fail(errno.ENOTTY, f"ioctl {request:#x} (type {ioc_type(request):#x}, nr {ioc_nr(request):#x}, "
                                    f"{ioc_size(request)} bytes) on {path} is not one this model implements")

  def ioctl(self, fd: int, request: int, arg: Any = None) -> int:
    path = self._file(fd, "ioctl on")
    table = self.ioctls.get(path)
    if table is None or (io := table.find(request)) is None: raise self._unknown_ioctl(fd, path, request)
    size = ioc_size(request) if table.sized else None
    if size and (not _memory(arg) or ctypes.sizeof(arg) < size):
      raise self._fail(errno.EFAULT, f"{io.name}: the argument is not {size} bytes of memory, as the request says")
    view, copy_out = self._argument(io, arg, size)
    if io.files and path not in io.files: raise self._fail(errno.EINVAL, f"{io.name} is for {' or '.join(io.files)} only, not {path}")
    self.calls.append(f"{io.name} {io.detail(view)}" if io.detail else io.name)
    try: return io.handler(fd, view) or 0
    except OSError as e:
      self.last_error = e.strerror or str(e)
      raise
    finally:
      if copy_out is not None: copy_out()

  def _argument(self, io: Ioctl, arg: Any, size: int | None) -> tuple[Any, Callable[[], Any] | None]:
    """What `io`'s handler gets for `arg` under its size rule (see the module docstring), and the copy out to run after
    it (COPY_IN)."""
    if io.size == RAW: return arg, None
    if not _memory(arg): raise self._fail(errno.EFAULT, f"{io.name}: the argument is a {type(arg).__name__}, not memory")
    structs = io.structs
    if io.size == COPY_IN:
      karg = structs[0]()
      n = min(ioc_size(io.request) if size is None else size, ctypes.sizeof(karg))
      if ioc_dir(io.request) & IOC_WRITE: ctypes.memmove(ctypes.addressof(karg), ctypes.addressof(arg), n)
      copy = (lambda: ctypes.memmove(ctypes.addressof(arg), ctypes.addressof(karg), n)) if ioc_dir(io.request) & IOC_READ else None
      return karg, copy
    if io.size == ARGSZ:
      s = structs[0]
      if ctypes.sizeof(arg) < ctypes.sizeof(s):
        raise self._fail(errno.EFAULT, f"{io.name}: a {s.__name__} argument expected, got a {type(arg).__name__} of {ctypes.sizeof(arg)} bytes")
      view = s.from_buffer(arg)
      if not ctypes.sizeof(s) <= view.argsz <= ctypes.sizeof(arg):
        raise self._fail(errno.EINVAL, f"{s.__name__}.argsz = {view.argsz}: must cover the structure ({ctypes.sizeof(s)} bytes) "
                                       f"and lie within the buffer passed ({ctypes.sizeof(arg)} bytes)")
      return view, None
    n = ctypes.sizeof(arg) if size is None else size
    if io.size == AT_LEAST:
      if n >= ctypes.sizeof(structs[0]): return (structs[0] * (n // ctypes.sizeof(structs[0]))).from_buffer(arg), None   # type: ignore[operator]
      expected = f"at least {ctypes.sizeof(structs[0])} bytes ({structs[0].__name__})"
    else:
      if (match := next((s for s in structs if ctypes.sizeof(s) == n), None)) is not None: return match.from_buffer(arg), None
      expected = " or ".join(f"{ctypes.sizeof(s)} bytes ({s.__name__})" for s in structs)
    raise self._fail(errno.EINVAL, f"{io.name} with a {n}-byte argument: {self.layout} is {expected}")
