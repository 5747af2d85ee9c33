"""The NV compiler (drivers/nv/compiler.py): CUDA C -> one image holding the sm_XX cubin and the PTX of the same NVRTC
compile, cached on disk, for the arch of the GPU's chip; the PTX runs on the PTX engine and matches numpy."""
import io
import numpy as np
import pytest
from elftools.elf.elffile import ELFFile
from drivers.hcq import open_device
from drivers.hcq.compiler import CompileError
from drivers.nv import image
from drivers.nv.compiler import NVCompiler
from drivers.nv.device import NVDevice
from drivers.nv.gpu import NVGPU
from drivers.system.kernel import kernel_interface
from emu.memory import Memory
from emu.nvgpu.ptx import Program, launch
from tests.emu.nvgpu.ptx_helpers import needs_nvrtc

pytestmark = needs_nvrtc
AXPY = r'''extern "C" __global__ void __launch_bounds__(64) axpy(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}'''


@pytest.fixture
def cache(tmp_path, monkeypatch):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))


@pytest.mark.parametrize("chip,arch", [("GH100", "sm_90"), ("GA100", "sm_80"), ("GA102", "sm_86")])
def test_the_device_compiles_for_the_sm_of_its_chip(chip, arch):
  dev = NVDevice("MOCK+NV", NVGPU(kernel_interface(mock="nv", chip=chip)))
  try:
    assert isinstance(dev.compiler, NVCompiler) and dev.compiler.language == "cuda"
    assert dev.compiler.arch == arch and dev.compiler is dev.compiler
  finally: dev.close()


def test_mock_nv_is_an_h200_so_sm_90():
  dev = open_device("MOCK+NV")
  try: assert dev.compiler.arch == "sm_90"
  finally: dev.close()


@pytest.mark.parametrize("arch,flag", [("sm_80", 80), ("sm_86", 86), ("sm_89", 89), ("sm_90", 90)])
def test_an_image_holds_the_cubin_for_the_arch_and_the_ptx_it_came_from(cache, arch, flag):
  cub, ptx = image.unpack(NVCompiler(arch).compile(AXPY))
  elf = ELFFile(io.BytesIO(cub))
  assert elf["e_machine"] == "EM_CUDA" and flag in (elf["e_flags"] & 0xff, (elf["e_flags"] >> 8) & 0xff)
  assert any(s.name == ".text.axpy" for s in elf.iter_sections())
  assert f".target {arch}" in ptx and ".entry axpy(" in ptx and ".maxntid 64, 1, 1" in ptx


def test_the_ptx_runs_on_the_ptx_engine_and_axpy_is_not_contracted_into_an_fma(cache):
  _, ptx = image.unpack(NVCompiler("sm_90").compile(AXPY))
  assert "fma" not in ptx and "mul.rn.f32" in ptx and "add.rn.f32" in ptx    # --fmad=false: rounded like the CPU device
  rng = np.random.default_rng(0)
  x, y = rng.standard_normal(100, np.float32), rng.standard_normal(100, np.float32)
  mem = Memory()
  px, py = mem.alloc(400), mem.alloc(400)
  mem.write(px, x.tobytes()); mem.write(py, y.tobytes())
  p = Program(ptx, "axpy")
  launch(p, mem, 2, 64, p.pack(py, px, 1.5, 100))
  np.testing.assert_array_equal(np.frombuffer(mem.read(py, 400), np.float32), np.float32(1.5) * x + y)


def test_a_second_compile_of_the_same_source_is_a_cache_hit(cache):
  c = NVCompiler("sm_80")
  first = c.compile(AXPY)
  assert c.compile(AXPY) == first and (c.compiled, c.cache_hits) == (1, 1)
  other = NVCompiler("sm_90")
  assert other.compile(AXPY) != first and other.compiled == 1          # the arch is part of the key


def test_a_compile_error_carries_nvrtcs_log(cache):
  with pytest.raises(CompileError, match=r"NVRTC could not compile kernel.cu for sm_90") as e:
    NVCompiler("sm_90").compile('extern "C" __global__ void k(int *a) { a[0] = undeclared; }')
  assert '"undeclared" is undefined' in e.value.log


def test_an_arch_the_backend_does_not_build_for_is_refused():
  with pytest.raises(ValueError, match=r"arch 'sm_75' is not one this backend builds for \(sm_80, sm_86, sm_89, sm_90\)"):
    NVCompiler("sm_75")
