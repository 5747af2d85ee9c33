"""OpenCL C -> HSA code object (v5) for an AMD GPU, with Debian's clang-22 and ld.lld-22.

No ROCm device libraries are linked (-nogpulib): kernels use clang builtins (__builtin_amdgcn_workgroup_id_x,
__builtin_expf, ...) that lower to LLVM intrinsics the AMDGPU backend handles itself (toolchain.md A.1:
get_global_id would be an undefined symbol). Explicit kernel arguments sit at the start of the kernarg
segment in declaration order (pointers 8 bytes, ints 4), the code object v5 hidden arguments after them.
"""
from __future__ import annotations
import os, subprocess, tempfile
from functools import cache
from drivers.hcq.compiler import Compiler, llvm_tool, run_tool

# -cl-fp32-correctly-rounded-divide-sqrt: IEEE division and sqrt, like numpy and the CPU device (OpenCL allows 2.5 ulp otherwise)
CLFLAGS = ["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-O2", "-ffp-contract=off",
           "-cl-fp32-correctly-rounded-divide-sqrt", "-mcode-object-version=5"]


@cache
def _clang_version() -> str:
  return subprocess.run([llvm_tool("clang"), "--version"], capture_output=True, text=True).stdout.splitlines()[0]


class AMDGPUCompiler(Compiler):
  """Compiles OpenCL C for one gfx target (the device's arch: drivers/amd/ip.py target of its GC version)."""
  language = "opencl"

  def __init__(self, arch: str):
    super().__init__(arch)
    self.arch = arch

  def version(self) -> str: return _clang_version()

  def _compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
      obj, lib = os.path.join(d, "kernel.o"), os.path.join(d, "kernel.hsaco")
      run_tool([llvm_tool("clang"), *CLFLAGS, f"-mcpu={self.arch}", "-c", "-", "-o", obj], f"compiling OpenCL C for {self.arch}",
               src.encode())
      run_tool([llvm_tool("ld.lld"), "-shared", obj, "-o", lib], f"linking the {self.arch} code object")
      with open(lib, "rb") as f: return f.read()
