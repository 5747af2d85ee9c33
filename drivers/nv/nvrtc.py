"""NVRTC, NVIDIA's runtime CUDA C compiler, through ctypes: CUDA C to PTX text and to sm_80 / sm_90 cubins, with no
GPU and no libcuda (nv_driver.md §9: the PyPI wheel `nvidia-cuda-nvrtc-cu12` 12.9.86 ships libnvrtc.so.12, which
needs only libc/libm/libdl/librt/libpthread; `#include <cuda_fp16.h>` / `<cuda_bf16.h>` need the headers of
`nvidia-cuda-runtime-cu12`, passed with -I).

The library is found in the installed wheel (site-packages/nvidia/cuda_nvrtc/lib), else through $NVRTC_PATH, else
the loader's search path. Every nvrtc call is checked; a failed compile raises CompileError carrying NVRTC's log.
A compile for a real arch (sm_XX) yields both the cubin and the PTX NVRTC generated on the way (`build`): the NV
compiler ships both (drivers.nv.image), since MOCK+NV runs the PTX.
"""
from __future__ import annotations
import ctypes, glob, os, sys
from functools import cache
from drivers.hcq.compiler import CompileError as HCQCompileError

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")   # what the NV backend builds for (Ampere, Ada, Hopper)


class NvrtcMissing(RuntimeError):
  """libnvrtc.so.12 is not installed."""


class CompileError(HCQCompileError):
  """NVRTC rejected the source; `log` is its compile log."""
  def __init__(self, msg: str, log: str):
    super().__init__(msg)
    self.log = log


def _wheel_dirs(sub: str) -> list[str]:
  return [d for p in sys.path for d in glob.glob(os.path.join(p, "nvidia", sub))]


@cache
def lib() -> ctypes.CDLL:
  cands = [os.environ["NVRTC_PATH"]] if os.environ.get("NVRTC_PATH") else []
  cands += [os.path.join(d, "lib", "libnvrtc.so.12") for d in _wheel_dirs("cuda_nvrtc")] + ["libnvrtc.so.12"]
  errs = []
  for c in cands:
    try: l = ctypes.CDLL(c)
    except OSError as e: errs.append(str(e)); continue
    l.nvrtcGetErrorString.restype = ctypes.c_char_p
    l.nvrtcGetErrorString.argtypes = [ctypes.c_int]
    return l
  raise NvrtcMissing("NVRTC (libnvrtc.so.12) is not installed: install the pinned `nvidia-cuda-nvrtc-cu12` wheel "
                     f"(scripts/setup.sh) or set NVRTC_PATH; tried: {'; '.join(errs)}")


@cache
def include_dir() -> str | None:
  """The CUDA headers of the cuda-runtime wheel (cuda_fp16.h, cuda_bf16.h), or None when it is not installed."""
  for d in _wheel_dirs("cuda_runtime"):
    if os.path.exists(os.path.join(d, "include", "cuda_fp16.h")): return os.path.join(d, "include")
  return None


def _check(rc: int, what: str) -> None:
  if rc != 0: raise RuntimeError(f"NVRTC {what} failed: {lib().nvrtcGetErrorString(rc).decode()} ({rc})")


def version() -> tuple[int, int]:
  major, minor = ctypes.c_int(), ctypes.c_int()
  _check(lib().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
  return major.value, minor.value


def _get(prog: ctypes.c_void_p, size_fn: str, get_fn: str) -> bytes:
  n = ctypes.c_size_t()
  _check(getattr(lib(), size_fn)(prog, ctypes.byref(n)), size_fn)
  buf = ctypes.create_string_buffer(n.value)
  _check(getattr(lib(), get_fn)(prog, buf), get_fn)
  return buf.raw


def _run(src: str, arch_flag: str, arch: str, name: str, options: tuple[str, ...], *getters: tuple[str, str]) -> list[bytes]:
  """Compile `src` with --gpu-architecture=`arch_flag`, then return each (size fn, get fn) output."""
  if arch not in ARCHS: raise ValueError(f"arch {arch!r} is not one the NV backend builds for ({', '.join(ARCHS)})")
  l, prog = lib(), ctypes.c_void_p()
  _check(l.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None), "nvrtcCreateProgram")
  try:
    opts = [f"--gpu-architecture={arch_flag}", "--std=c++17", *options]
    if (inc := include_dir()) is not None: opts.append(f"-I{inc}")
    argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = l.nvrtcCompileProgram(prog, len(opts), argv)
    log = _get(prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog").rstrip(b"\0").decode(errors="replace")
    if rc != 0:
      raise CompileError(f"NVRTC could not compile {name} for {arch} "
                         f"({l.nvrtcGetErrorString(rc).decode()}):\n{log}", log)
    return [_get(prog, size_fn, get_fn) for size_fn, get_fn in getters]
  finally:
    l.nvrtcDestroyProgram(ctypes.byref(prog))


_PTX, _CUBIN = ("nvrtcGetPTXSize", "nvrtcGetPTX"), ("nvrtcGetCUBINSize", "nvrtcGetCUBIN")


def ptx(src: str, arch: str = "sm_90", *, name: str = "kernel.cu", options: tuple[str, ...] = ()) -> str:
  """PTX text of CUDA C `src`, for the virtual arch compute_<arch> (no SASS generated)."""
  return _run(src, "compute_" + arch[3:], arch, name, options, _PTX)[0].rstrip(b"\0").decode()


def cubin(src: str, arch: str = "sm_90", *, name: str = "kernel.cu", options: tuple[str, ...] = ()) -> bytes:
  """An ELF cubin with SASS for the real `arch`."""
  return _run(src, arch, arch, name, options, _CUBIN)[0]


def build(src: str, arch: str = "sm_90", *, name: str = "kernel.cu", options: tuple[str, ...] = ()) -> tuple[bytes, str]:
  """(cubin, PTX) of one compile for the real `arch`: the SASS and the PTX it was generated from."""
  cub, text = _run(src, arch, arch, name, options, _CUBIN, _PTX)
  return cub, text.rstrip(b"\0").decode()
