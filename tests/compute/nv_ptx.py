"""compute's kernels as CUDA C on the PTX engine, with no NV device: Renderer(CUDA) -> NVCompiler (NVRTC: the sm_XX
cubin and its PTX) -> emu.nvgpu.ptx over emu.memory.Memory, the grid and block the renderer gave.

- `PtxSchedule` runs a whole schedule there (its inputs the realized buffers' bytes), for tests/compute/test_cuda_render.py;
- `Mirror` follows the numeric suites (pytest --nv-ptx): every kernel the CPU device runs is run again on the PTX
  engine from the same input bytes, and its output must match the CPU's (tests/compute/conftest.py).
"""
from __future__ import annotations
import numpy as np
from compute.codegen import CUDA, Renderer
from compute.dtypes import DType, dtypes
from compute.lazy import LazyBuffer
from compute.runtime import _storage
from compute.schedule import Kernel
from drivers.nv import image
from drivers.nv.compiler import NVCompiler
from emu.memory import Memory
from emu.nvgpu.ptx import Program, launch

_programs: dict[tuple[str, str], Program] = {}
_render = Renderer.render      # the renderer itself, not a test's wrapper that counts renders (tests/compute/test_jit.py)


def program(k: Kernel, arch: str) -> tuple[Program, object]:
  """(PTX engine program, rendered kernel) of `k` for `arch`, NVRTC's compile cached on disk, the translation here."""
  spec = _render(Renderer(CUDA), k)
  _, ptx = image.unpack(NVCompiler(arch).compile(spec.src))
  if (p := _programs.get((ptx, spec.name))) is None: p = _programs[(ptx, spec.name)] = Program(ptx, spec.name)
  return p, spec


def as_numpy(raw: bytes, dtype: DType, shape: tuple[int, ...] = (-1,)) -> np.ndarray:
  """Device bytes of `dtype` as numpy, like compute's buffer_to_numpy (bfloat16 widened to float32, bool as bool)."""
  a = np.frombuffer(raw, _storage(dtype)).reshape(shape)
  if dtype is dtypes.bfloat16: return (a.astype(np.uint32) << 16).view(np.float32)
  return a.astype(np.bool_) if dtype is dtypes.bool else a


def run_kernel(k: Kernel, arch: str, mem: Memory, inputs: list[int]) -> tuple[int, object]:
  """Launch `k` over `mem`, its input buffers at `inputs` (their starts; the kernel's byte offsets are added); returns
  the address of the output it wrote and the rendered kernel."""
  prog, spec = program(k, arch)
  out = mem.alloc(max(1, k.bufs[0].size * k.bufs[0].dtype.itemsize))
  args = [out] + [a + o for a, o in zip(inputs, k.offsets[1:])]
  launch(prog, mem, spec.global_size, spec.local_size, prog.pack(*args))
  return out, spec


class PtxSchedule:
  """Runs the kernels of a schedule on the PTX engine: realized inputs are uploaded from their device buffers, outputs
  of earlier kernels stay in the engine's memory."""
  def __init__(self, arch: str):
    self.arch, self.mem = arch, Memory()
    self.at: dict[int, int] = {}              # id(LazyBuffer) -> address in self.mem
    self.kernels = 0

  def address(self, lb: LazyBuffer) -> int:
    if id(lb) not in self.at:
      if not lb.realized: raise AssertionError(f"{lb} is neither realized nor the output of an earlier kernel")
      raw = bytes(lb.buffer.hcq.copyout())
      self.at[id(lb)] = self.mem.alloc(max(1, len(raw)))
      self.mem.write(self.at[id(lb)], raw)
    return self.at[id(lb)]

  def run(self, items: list) -> None:
    for k in items:
      if not isinstance(k, Kernel): raise AssertionError(f"PtxSchedule runs kernels only, got {k}")
      if k.bufs[0].size == 0: continue
      self.at[id(k.bufs[0])], _ = run_kernel(k, self.arch, self.mem, [self.address(b) for b in k.bufs[1:]])
      self.kernels += 1

  def read(self, lb: LazyBuffer) -> np.ndarray:
    return as_numpy(self.mem.read(self.at[id(lb)], lb.size * lb.dtype.itemsize), lb.dtype, lb.shape)


def assert_close(got: np.ndarray, want: np.ndarray, dtype: DType, what: str) -> None:
  """PTX engine vs the CPU device: integers and bools exactly; floats within what differs between the two (CUDA's
  expf/sinf/... are within 2 ulp, glibc's within 1; sums run in another order): a few ulp of the dtype, relative to
  the output's magnitude (one term of a sum may cancel to near zero)."""
  if not dtype.is_float:
    np.testing.assert_array_equal(got, want, err_msg=what)
    return
  eps = {dtypes.float16: 2.0 ** -10, dtypes.bfloat16: 2.0 ** -7, dtypes.float64: 2.0 ** -45}.get(dtype, 2.0 ** -20)
  g, w = got.astype(np.float64), want.astype(np.float64)
  scale = max(1.0, float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)))
  np.testing.assert_allclose(g, w, rtol=16 * eps, atol=16 * eps * scale, equal_nan=True, err_msg=what)


class Mirror:
  """Checks each CPU kernel against its CUDA rendering on the PTX engine, from the same input bytes."""
  def __init__(self, arch: str = "sm_90"):
    self.arch = arch
    self.kernels: dict[str, list] = {}        # CUDA source -> [kernel name, times checked]
    self.suites: dict[str, set[str]] = {}     # test module -> the CUDA sources it checked
    self.suite = ""                           # the test module running now

  def check(self, k: Kernel) -> None:
    out = k.bufs[0]
    if out.size == 0: return
    run = PtxSchedule(self.arch)
    addr, spec = run_kernel(k, self.arch, run.mem, [run.address(b) for b in k.bufs[1:]])
    nbytes = out.size * out.dtype.itemsize
    got = as_numpy(run.mem.read(addr, nbytes), out.dtype)
    want = as_numpy(bytes(out.buffer.hcq.copyout())[:nbytes], out.dtype)
    assert_close(got, want, out.dtype, f"kernel {spec.name} on the PTX engine ({self.arch}) vs the CPU device")
    self.kernels.setdefault(spec.src, [spec.name, 0])[1] += 1
    self.suites.setdefault(self.suite, set()).add(spec.src)
