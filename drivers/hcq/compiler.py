"""Compilers a device describes to the compute layer, with an on-disk cache, and LLVM tool lookup."""
from __future__ import annotations
import hashlib, os, shutil, subprocess, tempfile

from common.dirs import cache_dir, make_cache_dir, temp_dir

LLVM_VERSIONS = (22, 19)   # LLVM 22 from Debian bookworm-security; 19 is the accepted fallback


class CompileError(RuntimeError):
  """The compiler rejected a kernel; the message carries its diagnostics."""


def llvm_tool(name: str) -> str:
  """Path of a versioned LLVM tool (`clang`, `ld.lld`, `llvm-mc`, ...): never an unversioned one from PATH."""
  for v in LLVM_VERSIONS:
    if path := shutil.which(f"{name}-{v}"): return path
  raise FileNotFoundError(f"{name}-{LLVM_VERSIONS[0]} not found (nor {name}-{LLVM_VERSIONS[1]}); install it with "
                          f"`scripts/setup.sh` (Debian packages clang-22 lld-22 llvm-22)")


def run_tool(cmd: list[str], what: str, stdin: bytes | None = None) -> bytes:
  temp_dir()                 # the tools write scratch files there: a bad TMPDIR is named, not a failed run
  p = subprocess.run(cmd, input=stdin, capture_output=True)
  if p.returncode != 0:
    raise CompileError(f"{what} failed ({os.path.basename(cmd[0])} exit {p.returncode}):\n{p.stderr.decode(errors='replace')}")
  return p.stdout


class Compiler:
  """Turns kernel source into a loadable binary for one target. Results are cached on disk, keyed by
  source + target + compiler version, so a second run of the same program compiles nothing."""
  language = ""    # the compute layer's kernel dialect this compiles (compute/codegen.py Dialect.name: "c", "opencl", "cuda")

  def __init__(self, target: str):
    self.target, self.compiled, self.cache_hits = target, 0, 0

  def version(self) -> str: raise NotImplementedError
  def _compile(self, src: str) -> bytes: raise NotImplementedError

  def compile(self, src: str) -> bytes:
    key = hashlib.sha256(f"{type(self).__name__}\0{self.target}\0{self.version()}\0{src}".encode()).hexdigest()
    path = os.path.join(cache_dir(), type(self).__name__.lower(), key[:2], key)
    try:
      with open(path, "rb") as f: lib = f.read()
      self.cache_hits += 1
      return lib
    except (FileNotFoundError, NotADirectoryError): pass
    lib = self._compile(src)
    self.compiled += 1
    make_cache_dir(os.path.dirname(path))
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))   # write then rename: concurrent runs never see half a file
    with os.fdopen(fd, "wb") as f: f.write(lib)
    os.replace(tmp, path)
    return lib
