"""Compile CUDA C with NVRTC and run a kernel on the PTX engine with numpy arrays in emu.memory.Memory."""
from __future__ import annotations
from functools import cache
import numpy as np
import pytest
from emu.memory import Memory
from emu.nvgpu.ptx import Program, launch
from drivers.nv import nvrtc

try: nvrtc.lib(); HAVE_NVRTC = ""
except nvrtc.NvrtcMissing as e: HAVE_NVRTC = str(e)
needs_nvrtc = pytest.mark.skipif(bool(HAVE_NVRTC), reason=HAVE_NVRTC or "NVRTC present")

HEADERS = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
VADD = r'''
extern "C" __global__ void vadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}'''
# a 16x16-tiled f32 matmul through shared memory (also bench/ptx_throughput.py)
MATMUL = r'''#define T 16
extern "C" __global__ void mm(const float *A, const float *B, float *C, int n) {
  __shared__ float a[T][T], b[T][T];
  int r = blockIdx.y * T + threadIdx.y, c = blockIdx.x * T + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; k += T) {
    a[threadIdx.y][threadIdx.x] = A[r * n + k + threadIdx.x];
    b[threadIdx.y][threadIdx.x] = B[(k + threadIdx.y) * n + c];
    __syncthreads();
    for (int j = 0; j < T; j++) acc = __fmaf_rn(a[threadIdx.y][j], b[j][threadIdx.x], acc);
    __syncthreads();
  }
  C[r * n + c] = acc;
}'''


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
