"""C for the CPU device: clang-22 (or gcc) to a shared object, and the kernel ABI it must follow.

Kernel ABI: `void name(const uint8_t *args, const uint32_t gid[3], const uint32_t lsize[3])`, called
once per workgroup; `args` holds the buffer addresses (u64 each) then the values (i32 each); the
kernel loops over its own `lsize` threads.
"""
from __future__ import annotations
import os, platform, shutil, subprocess, tempfile
from functools import cache
from drivers.hcq.compiler import Compiler, llvm_tool, run_tool

# -ffp-contract=off: no fused multiply-add unless the kernel asks for it, so results match numpy's
# separately rounded operations; the CPU device is the numerical reference for every other backend.
# -fwrapv: signed integer overflow wraps, like numpy's int32. -mprefer-vector-width=512: use all of
# AVX-512 where the CPU has it (clang-22 -march=native on Emerald Rapids otherwise picks 256-bit vectors,
# and crashed in x86 instruction selection on a vectorized expf kernel that way).
CFLAGS = ["-O2", "-march=native", "-mprefer-vector-width=512", "-ffp-contract=off", "-fno-math-errno", "-fwrapv", "-fPIC", "-shared"]


@cache
def c_compiler() -> str:
  try: return llvm_tool("clang")
  except FileNotFoundError:
    if cc := shutil.which("gcc"): return cc
    raise


@cache
def _host_cpu() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), platform.machine())
  except OSError: return platform.machine()


class ClangCompiler(Compiler):
  language = "c"

  def __init__(self):
    super().__init__(f"{platform.machine()}-native ({_host_cpu()})")

  @cache
  def version(self) -> str:
    return subprocess.run([c_compiler(), "--version"], capture_output=True, text=True).stdout.splitlines()[0]

  def _compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
      out = os.path.join(d, "kernel.so")
      run_tool([c_compiler(), *CFLAGS, "-x", "c", "-", "-o", out, "-lm"], "compiling C kernel", src.encode())
      with open(out, "rb") as f: return f.read()
