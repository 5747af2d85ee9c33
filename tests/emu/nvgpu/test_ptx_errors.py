"""What the PTX engine and the NVRTC binding reject, and how: each error names the kernel, the line and the cause."""
import numpy as np
import pytest
from emu.memory import Memory
from emu.nvgpu.ptx import Program, PtxError, PtxFault, PtxTrap, WarpError, InstructionLimit, launch
from drivers.nv import nvrtc
from ptx_helpers import needs_nvrtc, program, run

PTX = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %tid.x;
  BODY
  ret;
}
"""


def prog(body: str) -> Program: return Program(PTX.replace("BODY", body))


def test_an_unknown_instruction_is_named_with_its_line():
  with pytest.raises(PtxError, match=r"kernel k, line 11: the instruction 'frobnicate' is not supported .*frobnicate.b32 %r2, %r1"):
    prog("frobnicate.b32 %r2, %r1;")


def test_an_unknown_modifier_is_named():
  with pytest.raises(PtxError, match=r"line 11: \.weird is not supported"):
    prog("add.weird.s32 %r2, %r1, 1;")
  with pytest.raises(PtxError, match=r"line 11: .*f32 without a rounding|\.rq"):
    prog("cvt.rq.f32.f64 %r2, %rd1;")


def test_an_undeclared_register_and_unknown_label_are_errors():
  with pytest.raises(PtxError, match=r"register %r9 is not declared"): prog("add.s32 %r2, %r9, 1;")
  with pytest.raises(PtxError, match=r"branch target \$nowhere"): prog("bra $nowhere;")


def test_unparseable_ptx_names_the_line():
  with pytest.raises(PtxError, match=r"line 11: cannot parse the address"): prog("ld.global.u32 %r2, [%rd1+*];")


def _st(body_addr: str, mem: Memory, p: int, block: int = 64):
  pr = prog(f"cvta.to.global.u64 %rd2, %rd1;\n  {body_addr}")
  return launch(pr, mem, 2, block, pr.pack(p))


def test_out_of_bounds_global_store_faults_naming_thread_address_and_instruction():
  mem = Memory()
  p = mem.alloc(64 * 4)                      # room for one block of 64 u32; block 1 runs past the end
  src = ("mov.u32 %r3, %ctaid.x;\n  mad.lo.s32 %r2, %r3, 64, %r1;\n  mul.wide.u32 %rd2, %r2, 4;\n  add.s64 %rd2, %rd2, %rd1;\n"
         "  st.global.u32 [%rd2], %r1;")
  pr = prog(src)
  with pytest.raises(PtxFault) as e: launch(pr, mem, 2, 64, pr.pack(p))
  msg = str(e.value)
  assert "kernel k, block (1, 0, 0), thread (0, 0, 0)" in msg and f"{p + 256:#x}" in msg
  assert "write of global address" in msg and "is not mapped" in msg and "st.global.u32 [%rd2], %r1" in msg
  assert e.value.address == p + 256 and e.value.line == 15
  assert mem.read(p, 256) == np.arange(64, dtype=np.uint32).tobytes()   # block 0 completed before the fault


def test_misaligned_and_shared_out_of_range_accesses_fault():
  mem = Memory()
  p = mem.alloc(4096)
  with pytest.raises(PtxFault, match=r"read of global address .* is misaligned .*ld.global.u32 %r2, \[%rd1\+2\]"):
    pr = prog("ld.global.u32 %r2, [%rd1+2];"); launch(pr, mem, 1, 1, pr.pack(p))
  with pytest.raises(PtxFault, match=r"write of shared address 0x40 is outside the space"):
    pr = prog("st.shared.u32 [64], %r1;"); launch(pr, mem, 1, 1, pr.pack(p), shared_bytes=64)


def test_trap_and_instruction_limit():
  mem = Memory()
  pr = prog("trap;")
  with pytest.raises(PtxTrap, match=r"kernel k, block \(0, 0, 0\), warp 0: trap \(line 11"): launch(pr, mem, 1, 32, pr.pack(0))
  pr = prog("$loop:\n  add.s32 %r1, %r1, 1;\n  bra $loop;")
  with pytest.raises(InstructionLimit, match=r"past the limit of 10000"): launch(pr, mem, 1, 32, pr.pack(0), max_instructions=10000)


def test_launch_limits_and_parameter_checks():
  pr, mem = prog(""), Memory()
  with pytest.raises(ValueError, match=r"2048 threads; at most 1024"): launch(pr, mem, 1, (64, 32), pr.pack(0))
  with pytest.raises(ValueError, match=r"shared memory per block"): launch(pr, mem, 1, 1, pr.pack(0), shared_bytes=1 << 20)
  with pytest.raises(ValueError, match=r"needs 8 bytes of parameters"): launch(pr, mem, 1, 1, b"")
  with pytest.raises(TypeError, match=r"takes 1 parameters, got 2"): pr.pack(1, 2)
  with pytest.raises(ValueError, match=r"grid \(0,\)"): launch(pr, mem, (0,), 1, pr.pack(0))


@needs_nvrtc
def test_shfl_under_divergence_with_a_full_membermask_is_an_error():
  src = r'''
  extern "C" __global__ void bad(int *a) {
    int t = threadIdx.x, v = a[t];
    if (t < 16) v = __shfl_down_sync(0xffffffff, v, 1);   // lanes 16-31 never execute this
    a[t] = v;
  }'''
  with pytest.raises(WarpError, match=r"kernel bad, block \(0, 0, 0\), warp 0: lanes 0xffff0000 of its membermask are not executing it"):
    run(src, "bad", 1, 32, np.zeros(32, np.int32))


@needs_nvrtc
def test_nvrtc_compile_error_carries_the_log():
  with pytest.raises(nvrtc.CompileError, match=r"NVRTC could not compile kernel.cu for sm_90") as e:
    nvrtc.ptx('extern "C" __global__ void k(int *a) { a[0] = undeclared; }', "sm_90")
  assert "undeclared" in e.value.log and "identifier" in e.value.log
  with pytest.raises(ValueError, match=r"arch 'sm_35' is not one"): nvrtc.ptx("", "sm_35")


@needs_nvrtc
@pytest.mark.parametrize("arch,flag", [("sm_80", 80), ("sm_90", 90)])
def test_nvrtc_builds_cubins_for_ampere_and_hopper(arch, flag):
  from elftools.elf.elffile import ELFFile
  import io
  src = 'extern "C" __global__ void k(float *a) { a[threadIdx.x] *= 2.0f; }'
  cub, text = nvrtc.build(src, arch)                  # one compile: the SASS and the PTX it came from
  assert f".target {arch}" in text and ".entry k(" in text and cub == nvrtc.cubin(src, arch)
  elf = ELFFile(io.BytesIO(cub))
  assert cub[:4] == b"\x7fELF" and elf["e_machine"] == "EM_CUDA"
  assert elf["e_flags"] & 0xff == flag or (elf["e_flags"] >> 8) & 0xff == flag     # the SM in the ELF flags
  assert any(s.name.startswith(".text.k") for s in elf.iter_sections())
  assert nvrtc.version() >= (12, 9)


@needs_nvrtc
def test_the_module_program_cache_and_kernel_choice():
  src = 'extern "C" __global__ void a(int *p) { p[0] = 1; }\nextern "C" __global__ void b(int *p) { p[0] = 2; }'
  assert program(src, "b").name == "b"
  from ptx_helpers import ptx
  with pytest.raises(PtxError, match=r"has kernels \['a', 'b'\]: name the one"): Program(ptx(src))
  with pytest.raises(PtxError, match=r"kernel 'c' is not in the PTX module"): Program(ptx(src), "c")


def test_a_memory_object_that_raises_stops_the_launch_with_its_error():
  class Broken(Memory):
    def lookup(self, addr, write): raise KeyError(f"page table walk failed at {addr:#x}")
  pr = prog("ld.global.u32 %r2, [%rd1];")
  with pytest.raises(KeyError, match=r"page table walk failed at 0x1000"):
    launch(pr, Broken(), 1, 1, pr.pack(0x1000))


def test_module_level_const_variables_and_bad_initialisers_are_errors():
  head = PTX.replace(".visible", ".const .align 4 .b32 tab[2] = {1, 2};\n.visible")
  with pytest.raises(PtxError, match=r"kernel k, line 12: the module-level \.const variable tab is not supported .*mov.u64 %rd2, tab"):
    Program(head.replace("BODY", "mov.u64 %rd2, tab;"))
  with pytest.raises(PtxError, match=r"line 5: t has 3 initial values for 2 elements"):
    Program(PTX.replace(".visible", ".global .b32 t[2] = {1, 2, 3};\n.visible").replace("BODY", ""))
  with pytest.raises(PtxError, match=r"cannot parse the initial value '1.5' of t \(\.b32\)"):
    Program(PTX.replace(".visible", ".global .b32 t[2] = {1.5, 2};\n.visible").replace("BODY", ""))
