"""Compile CUDA C with NVRTC and run a kernel on the PTX engine with numpy arrays in emu.memory.Memory."""
from __future__ import annotations
from functools import cache
import numpy as np
import pytest
from emu.memory import Memory
from emu.nvgpu.ptx import Program, launch, nvrtc

try: nvrtc.lib(); HAVE_NVRTC = ""
except nvrtc.NvrtcMissing as e: HAVE_NVRTC = str(e)
needs_nvrtc = pytest.mark.skipif(bool(HAVE_NVRTC), reason=HAVE_NVRTC or "NVRTC present")

HEADERS = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"


@cache
def ptx(src: str, arch: str = "sm_80", options: tuple[str, ...] = ()) -> str:
  return nvrtc.ptx(HEADERS + src, arch, options=options)


@cache
def program(src: str, name: str, arch: str = "sm_80", options: tuple[str, ...] = ()) -> Program:
  return Program(ptx(src, arch, options), name)


def run(src: str, name: str, grid, block, *args, shared_bytes: int = 0, arch: str = "sm_80", mem: Memory | None = None,
        options: tuple[str, ...] = ()):
  """Run kernel `name` of CUDA C `src`; numpy-array arguments are copied to device buffers (passed as pointers)
  and copied back after the launch. Returns (the arrays after the launch, Stats)."""
  prog = program(src, name, arch, options)
  mem = mem or Memory()
  ptrs, vals = [], []
  for a in args:
    if isinstance(a, np.ndarray):
      p = mem.alloc(max(1, a.nbytes)); mem.write(p, a.tobytes()); ptrs.append((p, a)); vals.append(p)
    else: vals.append(a)
  st = launch(prog, mem, grid, block, prog.pack(*vals), shared_bytes=shared_bytes)
  outs = [np.frombuffer(mem.read(p, a.nbytes), a.dtype).reshape(a.shape).copy() for p, a in ptrs]
  return outs, st
