"""The directories hcq writes: $TMPDIR (device locks, the emulated devices' state, the compilers' scratch files) and the
compile cache under $XDG_CACHE_HOME/hcq (default ~/.cache/hcq). One that is missing or not writable is an error naming
it and saying what to do, where it would otherwise surface as a failed compiler run or a lock file that cannot be made.
"""
from __future__ import annotations
import os, stat, tempfile

TEMP_USES = "device locks, emulated devices' state and compiler scratch files"


def temp_dir(write: bool = True) -> str:
  """$TMPDIR, which must be a directory (one this user can write, with `write`: clang and the lock files use it as it
  is set), else the system's temporary directory."""
  if not (path := os.environ.get("TMPDIR")): return tempfile.gettempdir()
  fix = f"hcq keeps {TEMP_USES} there: create it (mkdir -p {path}) or set TMPDIR to a directory you can write"
  try: st = os.stat(path)
  except FileNotFoundError: raise FileNotFoundError(f"TMPDIR={path} does not exist; {fix}") from None
  except PermissionError: raise PermissionError(f"TMPDIR={path} cannot be reached by this user; {fix}") from None
  if not stat.S_ISDIR(st.st_mode): raise NotADirectoryError(f"TMPDIR={path} is not a directory; {fix}")
  if write and not os.access(path, os.W_OK | os.X_OK): raise PermissionError(f"TMPDIR={path} is not writable by this user; {fix}")
  return path


def cache_dir(*parts: str) -> str:
  """$XDG_CACHE_HOME/hcq/<parts> (default ~/.cache/hcq/<parts>); not made here (make_cache_dir)."""
  return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hcq", *parts)


def make_cache_dir(path: str) -> str:
  """`path`, a directory of the compile cache, made with its parents if missing; one that cannot be made or written
  raises an OSError naming it and XDG_CACHE_HOME."""
  fix = "set XDG_CACHE_HOME to a directory you can write (the compile cache goes to $XDG_CACHE_HOME/hcq)"
  try: os.makedirs(path, exist_ok=True)
  except OSError as e: raise type(e)(f"cannot make the compile cache directory {path}: {e.strerror}; {fix}") from None
  if not os.access(path, os.W_OK | os.X_OK): raise PermissionError(f"the compile cache directory {path} is not writable by this user; {fix}")
  return path
