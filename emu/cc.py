"""Host C compiler for the models' compiled parts (a GPU model's kernel translation and runtime, the NIC models'
datapath): finds one, builds shared objects, caches them on disk.

emu/ must not import drivers/, so the compiler lookup lives here: clang-22, then clang-19, then gcc.
Compiled objects live under $XDG_CACHE_HOME/hcq/<where> (default ~/.cache/hcq/<where>; each model names its own), keyed by the
source, the flags, the compiler's version and the host CPU (the code is built with -march=native).
Writes go to a temporary file renamed into place, so concurrent processes (pytest -n auto) never load
a half-written object, and a lock file next to it makes a second process wait for the first one's build.
A build that takes longer than NOTICE_S says so in one line on stderr (`timed`).
"""
from __future__ import annotations
import contextlib, fcntl, hashlib, os, platform, re, shutil, subprocess, sys, tempfile, time
from functools import cache

from common.dirs import cache_dir, make_cache_dir, temp_dir

COMPILERS = ("clang-22", "clang-19", "gcc")
# -ffp-contract=off: a*b+c is never fused behind our back (GPUs round their multiply and add instructions separately).
# -fno-math-errno lets sqrt/fma inline to single instructions; no -ffast-math (NaN/inf/-0 must be exact).
CFLAGS = ("-march=native", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno", "-fwrapv",
          "-fno-strict-aliasing", "-w")


NOTICE_S = float(os.environ.get("HCQ_COMPILE_NOTICE_S", 1.0))
built = 0   # shared objects compiled (not found in the cache) by this process


@contextlib.contextmanager
def timed(what: str, where: str = "emu"):
  """Print one line when the builds inside took longer than NOTICE_S: what was built, and that it is cached."""
  start, before = time.monotonic(), built
  yield
  if built > before and (took := time.monotonic() - start) > NOTICE_S:
    print(f"hcq: building {what} took {took:.1f} s; it is cached under {cache_dir(where)}, so the next run loads it", file=sys.stderr)


class CompilerMissing(RuntimeError):
  """No host C compiler: the models that compile C need clang-22, clang-19 or gcc."""


@cache
def compiler() -> tuple[str, str]:
  """(path, version line) of the host C compiler."""
  for name in COMPILERS:
    if path := shutil.which(name):
      ver = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
      return path, ver
  raise CompilerMissing("no C compiler for the device models: install clang-22 (scripts/setup.sh) or gcc")


@cache
def _host_id() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      info = [l for l in f if l.startswith(("model name", "flags"))][:2]
  except OSError: info = []
  return platform.machine() + "".join(info)


EMU_DIR = os.path.dirname(os.path.abspath(__file__))


def inline_includes(text: str, seen: set[str] | None = None) -> str:
  """`text` with each `#include "emu/<path>"` line replaced by that file, itself inlined the same way, each file once
  (a header included again is dropped): sources are compiled from stdin and cached by their text, so a shared
  header's text must be in the source itself."""
  seen = set() if seen is None else seen
  def read(m: re.Match) -> str:
    if m.group(1) in seen: return ""
    seen.add(m.group(1))
    with open(os.path.join(EMU_DIR, m.group(1))) as f: return inline_includes(f.read(), seen)
  return re.sub(r'^#include "emu/([\w/.]+)"$', read, text, flags=re.M)


def key(src: str, opt: str = "-O2") -> str:
  """Cache key of a shared object built from `src` on this host with this compiler."""
  return hashlib.sha256("\0".join((compiler()[1], _host_id(), opt, *CFLAGS, src)).encode()).hexdigest()[:32]


def build(src: str, tag: str = "prog", opt: str = "-O2", where: str = "emu") -> str:
  """Path of a shared object built from C `src` (from the disk cache under `where` when it was built before)."""
  cc, k = compiler()[0], key(src, opt)
  path = os.path.join(cache_dir(where), k[:2], f"{tag}-{k}.so")
  if os.path.exists(path): return path
  make_cache_dir(os.path.dirname(path))
  with open(path + ".lock", "w") as lock:     # one builder per object; the others wait for it
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not os.path.exists(path): _compile(cc, src, opt, path)
  return path


def _compile(cc: str, src: str, opt: str, path: str) -> None:
  global built
  temp_dir()                                  # the compiler's scratch files go there: a bad TMPDIR is named, not a failed build
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".so")
  os.close(fd)
  try:
    p = subprocess.run([cc, opt, *CFLAGS, "-x", "c", "-", "-o", tmp, "-lm"], input=src.encode(), capture_output=True)
    if p.returncode != 0:
      raise RuntimeError(f"compiling emulator C code failed ({os.path.basename(cc)} exit {p.returncode}); this is an "
                         f"emulator bug, please report it:\n{p.stderr.decode(errors='replace')[:4000]}")
    os.replace(tmp, path)
    built += 1
  finally:
    if os.path.exists(tmp): os.unlink(tmp)
