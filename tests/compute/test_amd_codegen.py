"""Rendered kernels compile for gfx1100 with clang-22/ld.lld-22 into HSA code objects (v5) whose metadata
has the kernel symbol, its descriptor, and the kernarg layout the hcq Program fills (buffers, 8 bytes each)."""
import re, subprocess
import numpy as np
import pytest
from compute import Tensor
from compute.codegen import OpenCL, Renderer
from compute.schedule import create_schedule, Kernel
from drivers.amd.compiler import AMDGPUCompiler
from drivers.hcq.compiler import llvm_tool


def rnd(*shape, seed=0): return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


CASES = {
  "matmul_bias_relu": lambda: rnd(8, 6).linear(rnd(5, 6), rnd(5)).relu(),
  "conv2d": lambda: rnd(2, 3, 6, 6).conv2d(rnd(4, 3, 3, 3), padding=1, stride=2),
  "softmax": lambda: rnd(4, 10).softmax(),
  "reduce_axis0_max": lambda: rnd(5, 7).amax(0),
  "reduce_axis1_mean": lambda: rnd(5, 7).mean(1),
  "strided_flipped_slice": lambda: rnd(6, 9)[::-2, 1::3] * 2,
  "transcendentals": lambda: (rnd(16).exp() + rnd(16).abs().log() + rnd(16).sin() + rnd(16).cos() + rnd(16).abs().sqrt()).sigmoid(),
  "int_floor_div_mod": lambda: (Tensor(np.arange(-6, 6, dtype=np.int32)) // 4) + (Tensor(np.arange(12, dtype=np.int32)) % 5),
  "half_and_bfloat16": lambda: rnd(8).half() * 3 + rnd(8).cast("bfloat16").cast("float16"),
  "argmax_uint8": lambda: Tensor(np.arange(12, dtype=np.uint8).reshape(3, 4)).argmax(1),
}


def _kernels(t: Tensor) -> list[Kernel]:
  return [k for k in create_schedule([t.lazydata.base]) if isinstance(k, Kernel)]


def _readelf(lib: bytes, tmp_path, *flags) -> str:
  path = tmp_path / "k.hsaco"
  path.write_bytes(lib)
  return subprocess.run([llvm_tool("llvm-readelf"), *flags, str(path)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("case", list(CASES))
def test_kernels_compile_to_gfx1100_code_objects(case, tmp_path):
  comp = AMDGPUCompiler("gfx1100")
  for k in _kernels(CASES[case]()):
    spec = Renderer(OpenCL).render(k)
    lib = comp.compile(spec.src)
    h = _readelf(lib, tmp_path, "-h")
    assert "AMDGPU - HSA" in h and re.search(r"ABI Version:\s+3", h), h   # ELFABIVERSION_AMDGPU_HSA_V5 = 3
    syms = _readelf(lib, tmp_path, "--dyn-syms")
    assert re.search(rf"FUNC\s+GLOBAL\s+PROTECTED\s+\d+\s+{spec.name}$", syms, re.M), syms
    assert re.search(rf"\s64\s+OBJECT\s+GLOBAL\s+PROTECTED\s+\d+\s+{spec.name}\.kd$", syms, re.M), syms   # 64-byte kernel descriptor
    assert " UND " not in syms.split("UND", 1)[1], f"undefined symbols in {spec.name}:\n{syms}"
    notes = _readelf(lib, tmp_path, "--notes")
    assert "amdhsa.target:   amdgcn-amd-amdhsa--gfx1100" in notes
    assert ".wavefront_size: 32" in notes and f".name:           {spec.name}" in notes
    offsets = [int(x) for x in re.findall(r"\.offset:\s+(\d+)", notes)]
    kinds = re.findall(r"\.value_kind:\s+(\w+)", notes)
    explicit = [o for o, kd in zip(offsets, kinds) if kd == "global_buffer"]
    assert explicit == [8 * i for i in range(len(k.bufs))]   # buffer pointers first, in order, like the CPU ABI
    assert all(o >= 8 * len(k.bufs) for o, kd in zip(offsets, kinds) if kd.startswith("hidden"))
    assert f".reqd_workgroup_size:\n      - {spec.local_size[0]}\n      - 1\n      - 1" in notes


def test_compiler_reports_clang_errors():
  from drivers.hcq import CompileError
  with pytest.raises(CompileError, match="error"): AMDGPUCompiler("gfx1100").compile("__kernel void k(__global float *a) { a[0] = undefined_thing; }")


def test_compile_cache_is_keyed_by_target(tmp_path):
  src = "__kernel void k(__global float *a) { a[__builtin_amdgcn_workitem_id_x()] = 1.0f; }"
  a, b = AMDGPUCompiler("gfx1100"), AMDGPUCompiler("gfx1200")
  la, lb = a.compile(src), b.compile(src)
  assert la != lb and "gfx1200" in _readelf(lb, tmp_path, "--notes")
  a.compile(src)
  assert a.cache_hits >= 1
