"""CUDA C -> NV kernel image (drivers.nv.image: the cubin and the PTX it came from) with NVRTC, for one SM arch.

NVRTC builds SASS for a real arch with no GPU and no libcuda (nv_driver.md section 9); the PTX of the same compile
goes with it so MOCK+NV's PTX engine runs what the cubin was built from. Floating point is compiled like the CPU
device's (the numerical reference): no contraction of a*b+c into an fma unless the kernel asks (--fmad=false), IEEE
division and square root (--prec-div, --prec-sqrt), denormals kept (--ftz=false).
"""
from __future__ import annotations
from drivers.hcq.compiler import Compiler
from drivers.nv import image, nvrtc

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")   # GA100, GA102, AD102, GH100
OPTIONS = ("--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false")


class NVCompiler(Compiler):
  """Compiles CUDA C (kernels `extern "C" __global__`) for one SM arch (the GPU's, from RM's GR info SM_VERSION)."""
  language = "cuda"

  def __init__(self, arch: str = "sm_90"):
    if arch not in ARCHS:
      raise ValueError(f"NV compiler: arch {arch!r} is not one this backend builds for ({', '.join(ARCHS)})")
    super().__init__(arch)
    self.arch = arch

  def version(self) -> str:
    major, minor = nvrtc.version()
    return f"NVRTC {major}.{minor} {' '.join(OPTIONS)} headers {nvrtc.include_dir()}"

  def _compile(self, src: str) -> bytes:
    return image.pack(*nvrtc.build(src, self.arch, options=OPTIONS))
