"""Device ownership: one flock'd file per device, `$TMPDIR/<prefix>_<bus>.lock`.

The holder writes its pid into the file, so a second process (and `hcq_smi ... pids`) can name it.
flock locks belong to the open file description and vanish when the process dies, so a killed
driver never leaves a stale lock behind.
"""
from __future__ import annotations
import fcntl, os, tempfile
from dataclasses import dataclass

from drivers.system.registry import Vendor, vendors


class DeviceBusyError(RuntimeError):
  """Another process owns the device."""


def lock_dir() -> str:
  return os.environ.get("TMPDIR") or tempfile.gettempdir()


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


class DeviceLock:
  """Exclusive ownership of one device for the life of this object (or until release())."""
  def __init__(self, prefix: str, bus: str):
    self.fd: int | None = None
    self.prefix, self.bus, self.path = prefix, bus, lock_path(prefix, bus)
    try: fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError as e:
      raise PermissionError(f"cannot open lock file {self.path}: {e.strerror}; another user created it — remove it as root "
                            "or set TMPDIR to a directory you own") from None
    try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      pid = _read_pid(fd)
      os.close(fd)
      who = f"pid {pid} ({process_name(pid)})" if pid else "another process"
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
  pid: int | None          # None: the lock file exists but nobody holds it

  @property
  def process(self) -> str: return process_name(self.pid) if self.pid else ""


def holder(path: str) -> int | None:
  """pid holding the lock file at `path`, or None if it is free (probes with a non-blocking flock)."""
  try: fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
  except FileNotFoundError: return None
  try:
    try: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError: return _read_pid(fd) or -1
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
