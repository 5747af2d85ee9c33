"""Device ownership: one flock'd file per device, `$TMPDIR/<prefix>_<bus>.lock`.

The holder writes its pid into the file, so a second process (and `hcq_smi ... pids`) can name it; a holder that
wrote none (another tool flock'ing the file) is found in /proc: the `lock:` lines of /proc/<pid>/fdinfo/<fd> name the
open files that hold a lock, /proc/locks the locked device:inode pairs. flock locks belong to the open file description
and vanish when the last process holding it dies, so a killed driver never leaves a stale lock behind. The file is
created 0644: other users only read it.
"""
from __future__ import annotations
import fcntl, os
from dataclasses import dataclass

from common.dirs import temp_dir
from drivers.system.registry import Vendor, vendors


class DeviceBusyError(RuntimeError):
  """Another process owns the device."""


def lock_dir() -> str:
  """$TMPDIR (checked: a missing one is named; a listing needs only to read it), else the system's temporary directory."""
  return temp_dir(write=False)


def lock_owners() -> dict[str, Vendor]:
  """Lock prefix -> the registered vendor whose devices take it (and whose hcq_smi backend frees them)."""
  return {v.lock_prefix: v for v in vendors() if v.lock_prefix}


def lock_path(prefix: str, bus: str) -> str:
  if prefix not in (owners := lock_owners()):
    raise ValueError(f"unknown lock prefix {prefix!r}; expected one of {', '.join(owners)}")
  return os.path.join(lock_dir(), f"{prefix}_{bus.replace('/', '_')}.lock")


def process_name(pid: int) -> str:
  try:
    with open(f"/proc/{pid}/comm") as f: return f.read().strip()
  except OSError: return "?"


def _read_pid(fd: int) -> int | None:
  try: return int(os.pread(fd, 32, 0).decode().strip() or "x")
  except (ValueError, OSError): return None


def _holds(pid: int, file: tuple[int, int]) -> bool | None:
  """Does process `pid` hold a flock on the file (st_dev, st_ino) through one of its fds? None: its fds are not
  readable to this user (or it is gone)."""
  fds = f"/proc/{pid}/fd"
  try: names = os.listdir(fds)
  except OSError: return None
  for n in names:
    try:
      st = os.stat(os.path.join(fds, n))
      if (st.st_dev, st.st_ino) != file: continue
      with open(f"/proc/{pid}/fdinfo/{n}") as f:   # "lock:\t1: FLOCK  ADVISORY  WRITE <pid> <maj:min:ino> 0 EOF"
        if any(line.startswith("lock:") and " FLOCK " in line for line in f): return True
    except OSError: continue                       # that fd closed meanwhile
  return False


def _locks_pid(file: tuple[int, int]) -> int | None:
  """The pid /proc/locks gives for a flock on the file: the process that took it, in this pid namespace."""
  dev, ino = file
  want = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
  try:
    with open("/proc/locks") as f: lines = f.read().splitlines()
  except OSError: return None
  for line in lines:   # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:2146358 0 EOF"; "1: -> FLOCK ..." is a waiter
    w = line.split()
    if len(w) >= 6 and w[1] == "FLOCK" and w[5] == want and w[4].isdigit() and int(w[4]) > 0: return int(w[4])
  return None


def _find_holder(fd: int) -> int:
  """pid of a process holding the flock on the open lock file `fd`: the pid it wrote if that process holds it, else
  one found in /proc; -1 if none is visible (a process of another user or pid namespace)."""
  st = os.fstat(fd)
  file = (st.st_dev, st.st_ino)
  if (pid := _read_pid(fd)) is not None and _holds(pid, file) is not False and alive(pid): return pid
  for name in os.listdir("/proc"):
    if name.isdigit() and _holds(int(name), file): return int(name)
  pid = _locks_pid(file)
  return pid if pid is not None and alive(pid) else -1


def alive(pid: int) -> bool:
  """Does process `pid` exist (perhaps another user's)?"""
  try: os.kill(pid, 0)
  except ProcessLookupError: return False
  except PermissionError: return True
  return True


class DeviceLock:
  """Exclusive ownership of one device for the life of this object (or until release())."""
  def __init__(self, prefix: str, bus: str):
    self.fd: int | None = None
    self.prefix, self.bus, self.path = prefix, bus, lock_path(prefix, bus)
    temp_dir()                                     # the lock file is made there: an unwritable TMPDIR is named as such
    try: fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except PermissionError as e:
      raise PermissionError(f"cannot open lock file {self.path}: {e.strerror}; another user created it — remove it as root "
                            "or set TMPDIR to a directory you own") from None
    try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      pid = _find_holder(fd)
      os.close(fd)
      who = f"pid {pid} ({process_name(pid)})" if pid > 0 else "a process not visible to this user (another user's, or another pid namespace's)"
      raise DeviceBusyError(f"device {bus} is in use by {who} (lock {self.path}); stop that process or run "
                            f"`hcq_smi {lock_owners()[prefix].smi_name} kill_pids --pci_bus {bus}`") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    self.fd = fd

  def release(self) -> None:
    if self.fd is None: return
    os.ftruncate(self.fd, 0)
    fcntl.flock(self.fd, fcntl.LOCK_UN)
    os.close(self.fd)
    self.fd = None

  def __del__(self): self.release()


@dataclass(frozen=True)
class LockInfo:
  prefix: str
  bus: str
  path: str
  pid: int | None          # None: the lock file exists but nobody holds it; -1: held by a process not visible here

  @property
  def process(self) -> str: return process_name(self.pid) if self.pid else ""


def holder(path: str) -> int | None:
  """pid holding the lock file at `path` (whether it wrote its pid or not), -1 if held by a process this user cannot
  see, None if it is free (probes with a non-blocking flock)."""
  try: fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
  except FileNotFoundError: return None
  try:
    try: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError: return _find_holder(fd)
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None
  finally: os.close(fd)


def list_locks(prefix: str | None = None) -> list[LockInfo]:
  """Every device lock file in the lock directory (held or not), optionally only one prefix."""
  out, owners = [], lock_owners()
  for name in sorted(os.listdir(lock_dir())):
    if not name.endswith(".lock") or "_" not in name: continue
    pfx, bus = name[:-5].split("_", 1)
    if pfx not in owners or (prefix is not None and pfx != prefix): continue
    path = os.path.join(lock_dir(), name)
    out.append(LockInfo(pfx, bus, path, holder(path)))
  return out
