"""Kernel languages as codegen Dialects: each device's compiler names one (Compiler.language), a new language is one
class (defining it registers it), and a language with no dialect is refused naming the ones there are."""
import numpy as np
import pytest
from compute import Device, Tensor, runtime
from compute.codegen import C, CUDA, Dialect, OpenCL, Renderer
from compute.lazy import Ops
from compute.nir import NIR
from compute.schedule import Kernel, create_schedule
from drivers.amd.compiler import AMDGPUCompiler
from drivers.cpu.compiler import ClangCompiler
from drivers.hcq.compiler import Compiler
from drivers.nv.compiler import NVCompiler
from drivers.qcom.compiler import IR3Compiler


def test_every_compiler_names_a_registered_dialect():
  assert {c.language: Dialect.of(c.language, c.__name__) for c in (ClangCompiler, AMDGPUCompiler, NVCompiler, IR3Compiler)} == \
         {"c": C, "opencl": OpenCL, "cuda": CUDA, "nir": NIR}
  assert sorted(c.__name__ for c in Compiler.__subclasses__()) == ["AMDGPUCompiler", "ClangCompiler", "IR3Compiler", "NVCompiler"]


def test_a_language_without_a_dialect_is_refused_naming_the_dialects():
  with pytest.raises(NotImplementedError, match=r"TOY: .*no renderer for kernel language 'spirv' \(its dialects: c, cuda, nir, opencl"):
    Dialect.of("spirv", "TOY")


def test_a_dialect_names_its_own_language():
  """A subclass without a name would take its parent's and replace it; one reusing a name would hide the other."""
  with pytest.raises(TypeError, match="must set `name`"):
    class Unnamed(C): pass
  with pytest.raises(TypeError, match="the name 'opencl' is OpenCL's"):
    class Other(C): name = "opencl"
  assert Dialect.named["c"] is C and Dialect.named["opencl"] is OpenCL


@pytest.fixture
def toy_dialect():
  """C with its own name and exp: defining the class is the whole registration."""
  class ToyC(C):
    name = "toy-c"
    fn = {**C.fn, Ops.EXP: "toy_expf"}
    prelude = C.prelude + "static inline float toy_expf(float x) { return expf(x) + 1.0f; }\n"
  yield ToyC
  del Dialect.named["toy-c"]


def test_a_new_dialect_is_one_class(toy_dialect, monkeypatch):
  """A compiler naming the toy gets kernels in it: the CPU device, its compiler's language set to the toy's name,
  computes exp(x) + 1 where the graph says exp(x)."""
  assert Dialect.of("toy-c", "TOY") is toy_dialect
  monkeypatch.setattr(Device["CPU"].compiler, "language", "toy-c")
  monkeypatch.setattr(runtime, "_programs", {})                 # render again, in the toy
  x = np.linspace(-2, 2, 37, dtype=np.float32)
  t = Tensor(x, device="CPU").exp()
  (k,) = [k for k in create_schedule([t.lazydata.base]) if isinstance(k, Kernel)]
  assert "toy_expf(" in Renderer(toy_dialect).render(k).src and "toy_expf" not in Renderer(C).render(k).src
  np.testing.assert_allclose(t.numpy(), np.exp(x) + 1, rtol=1e-6)


def test_a_dialect_may_render_its_own_way(monkeypatch):
  """A language that is not rendered as C-family text (an IR built through an API) overrides render(); runtime calls
  it. The toy counts its kernels and renders them as C."""
  rendered = []
  class ToyIR(C):
    name = "toy-ir"
    @classmethod
    def render(cls, k, vector_registers=None):
      rendered.append(k)
      return C.render(k, vector_registers)
  try:
    monkeypatch.setattr(Device["CPU"].compiler, "language", "toy-ir")
    monkeypatch.setattr(runtime, "_programs", {})
    x = np.arange(11, dtype=np.float32)
    np.testing.assert_array_equal((Tensor(x, device="CPU") * 3 + 1).numpy(), x * 3 + 1)
    assert len(rendered) == 1
  finally: del Dialect.named["toy-ir"]
