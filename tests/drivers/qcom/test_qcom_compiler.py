"""compute's kernels as NIR (compute.nir) compiled by mesa's ir3 (drivers.qcom.compiler, tinymesa) for each Adreno hcq targets:
the variant's instructions, disassembled by tinymesa's own disassembler, are the ops the kernel asks for."""
import collections, re
import numpy as np
import pytest
pytest.importorskip("tinymesa", reason="the tinymesa wheel is not installed (scripts/setup.sh)")
from autogen.ir3.disasm import disasm
from compute import Tensor
from compute.nir import NIRRenderer, Unsupported
from compute.schedule import Kernel, create_schedule
from drivers.hcq.compiler import CompileError
from drivers.qcom.compiler import CHIPS, IR3Compiler, Variant, compile_nir


def kernels(t: Tensor) -> list[Kernel]: return [k for k in create_schedule([t.lazydata.base]) if isinstance(k, Kernel)]


def ops(v: Variant) -> collections.Counter:
  """Mnemonics of the variant's instructions, without (ss)/(sy)/(nopN)/(rptN) flags."""
  words = [int.from_bytes(v.code[i:i + 8], "little") for i in range(0, len(v.code), 8)]
  lines = disasm(words, v.gpu_id)
  assert not any(ln.startswith("no match") for ln in lines), lines
  out = collections.Counter(re.sub(r"^(\([a-z0-9]+\))*", "", ln).split()[0] for ln in lines)
  assert out["end"] == 1, lines     # (the zero padding after it is not listed)
  return out


def compiled(t: Tensor, gpu_id: int) -> list[Variant]:
  return [compile_nir(spec.src, gpu_id, spec.name) for spec in (NIRRenderer().render(k) for k in kernels(t))]


def f32(*shape, seed=0): return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("gpu_id", list(CHIPS))
def test_elementwise_f32_is_a_global_load_a_multiply_an_add_and_a_global_store(gpu_id):
  [v] = compiled(f32(100) * 3 + 1, gpu_id)
  o = ops(v)   # the NIR is exact: the multiply and the add stay two roundings, as numpy's (no mad.f32)
  assert o["ldg.u32"] == 1 and o["stg.u32"] == 1 and o["mul.f"] == 1 and o["add.f"] == 1 and o["mad.f32"] == 0 and o["end"] == 1
  assert v.instrlen * 16 * 8 == len(v.code) and v.local_size == [64, 1, 1]
  assert [r[:3] for r in v.ubo_ranges] == [[0, 0, 64]]             # the two buffer addresses (UBO 0) pushed to consts
  assert v.imms == [] or all(isinstance(x, int) for x in v.imms)
  assert v.workgroup_id_reg != v.local_id_reg
  if gpu_id // 100 == 7: assert o["lock"] == 1 and o["unlock"] == 1    # a7xx ends with (sy)(ss)(jp)lock; unlock; end


@pytest.mark.parametrize("gpu_id", [630, 730])
def test_elementwise_i32_adds_integers_and_half_floats_use_half_instructions(gpu_id):
  a, b = Tensor(np.arange(50, dtype=np.int32)), Tensor(np.arange(50, dtype=np.int32) * 3)
  [v] = compiled(a + b, gpu_id)
  assert ops(v)["ldg.u32"] == 2 and not any(op.endswith(".f") or ".f32" in op for op in ops(v))
  [h] = compiled(f32(64).half() * 2, gpu_id)
  assert ops(h)["cov.f32f16"] == 1 and ops(h)["mul.f"] == 1 and ops(h)["stg.u16"] == 1   # .half() in the kernel, a half multiply


@pytest.mark.parametrize("gpu_id", [630, 740])
def test_a_long_sum_is_a_loop_of_loads_and_float_adds(gpu_id):
  [v] = compiled(f32(4, 1000).sum(1), gpu_id)
  o = ops(v)
  assert o["add.f"] >= 1 and o["ldg.u32"] >= 1 and (o["br"] + o["jump"] + o["brax"] + o["bany"] + o["ball"]) >= 1, o


def test_float64_and_bfloat16_are_refused_naming_the_type_and_int64_is_lowered_by_ir3():
  with pytest.raises(Unsupported, match="float64 values in a NIR kernel: the GPUs ir3 compiles for have no double"):
    NIRRenderer().render(kernels(Tensor(np.ones(4)) * 2)[0])
  with pytest.raises(Unsupported, match="bfloat16 values in a NIR kernel: it is not a NIR type"):
    NIRRenderer().render(kernels(Tensor(np.ones(4, np.float32)).cast("bfloat16") * 2)[0])
  [v] = compiled(Tensor(np.arange(8, dtype=np.int64)) * 3, 630)   # nir_lower_int64: 32-bit halves and their carries
  assert ops(v)["ldg.u32"] == 1 and ops(v)["stg.u32"] == 1 and ops(v)["madsh.m16"] >= 1   # (two components each)


def test_bad_text_and_unknown_chips_are_compile_errors():
  with pytest.raises(CompileError, match="starts with 'nir 1'"): compile_nir("nope", 630)
  with pytest.raises(CompileError, match="fmulx.*is no NIR ALU op"): compile_nir("nir 1\nbufs 1\nlocal 1\n%1 = gid\n%2 = fmulx %1 %1\n", 630)
  with pytest.raises(CompileError, match="no ir3 target for Adreno 540"): compile_nir("nir 1\nbufs 1\nlocal 1\n", 540)


def test_variants_round_trip_and_are_cached_per_chip(tmp_path, monkeypatch):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  spec = NIRRenderer().render(kernels(f32(10) + 1)[0])
  a, b = IR3Compiler("630"), IR3Compiler("730")
  la, lb = a.compile(spec.src), b.compile(spec.src)
  assert Variant.unpack(la).gpu_id == 630 and Variant.unpack(lb).gpu_id == 730 and la != lb
  assert Variant.unpack(la) == compile_nir(spec.src, 630, spec.name)
  a.compile(spec.src)
  assert (a.compiled, a.cache_hits) == (1, 1)
