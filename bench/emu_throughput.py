"""AMD shader core (emu/amdgcn) throughput in wave-instructions per second, and the latency of a never-seen program.

Cases: (a) a one-wave 10,000-iteration ALU loop (hand-written assembly, for gfx1100 or the target's generation) on every
target of the core, (b) a vector add over 64k floats compiled by clang-22 (2048 wave32 waves), (c) a 256x256 f32
matmul compiled by clang-22; plus the time from dispatch to result for a program the emulator has not seen (its blocks
compiled in that call; LLVM's own kernel compile excluded), and the one-time build of the emulator's runtime library
with an empty cache. numpy on the same work is measured in the same run as the reference. Targets (issue 4): >= 10M
wave-instructions/s on (a) and (b), first result of a new program in < 2 s. Prints one JSON line per figure.
Usage: python bench/emu_throughput.py [repeats]"""
import json, os, struct, sys, tempfile, time
import numpy as np
from figures import best_with

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "emu", "amdgcn"))
from exec_helpers import assemble, compile_cl, CodeObject, buffer, read, VADD, MATMUL   # noqa: E402 (llvm-mc / clang-22)
from emu.amdgcn import Memory, run, runtime, targets                      # noqa: E402

ALU_LOOP = """
  s_mov_b32 s2, 10000
  v_mov_b32 v1, 0
  v_mov_b32 v2, 1.0
  v_mov_b32 v3, 0.5
loop:
  v_add_f32 v1, v1, v2
  v_mul_f32 v4, v1, v3
  v_fma_f32 v4, v4, v3, v2
  v_add_f32 v5, v4, v1
  v_mul_f32 v5, v5, v3
  v_max_f32 v6, v5, v1
  s_sub_u32 s2, s2, 1
  s_cmp_lg_u32 s2, 0
  s_cbranch_scc1 loop
  v_lshlrev_b32 v0, 2, v0
  global_store_b32 v0, v1, s[0:1]
  s_endpgm
"""
def emit(name: str, value: float, unit: str, **extra) -> None:
  print(json.dumps({"bench": f"emu_throughput/{name}", "value": round(value, 4), "unit": unit, **extra}), flush=True)


def alu_loop(repeats: int, target: str) -> None:
  mem = Memory()
  isa = targets.get(target).isa
  code = assemble(ALU_LOOP) if isa == "gfx11" else assemble(ALU_LOOP, cpu=target)   # gfx1100 code runs on every gfx11 target
  pc = mem.alloc(len(code)); mem.write(pc, code)
  out = mem.alloc(128)
  go = lambda: run(mem, pc=pc, block=(32, 1, 1), user_sgprs=[out & 0xFFFFFFFF, out >> 32], target=target)
  go()
  t, st = best_with(go, repeats)
  assert (read(mem, out, np.float32, 32) == 10000.0).all()
  emit("alu_loop_wave_inst_per_s", st.wave_instructions / t, "wave-inst/s", target=target, wave_instructions=st.wave_instructions,
       seconds=round(t, 5))


def vadd(repeats: int, cold: bool = False) -> None:
  n = 65536
  mem = Memory()
  co = CodeObject(mem, compile_cl(VADD))
  a, b = np.random.default_rng(0).standard_normal((2, n)).astype(np.float32)
  pa, pb, pc = buffer(mem, a), buffer(mem, b), mem.alloc(4 * n)
  args = struct.pack("<QQQi", pa, pb, pc, n)
  go = lambda: co.kernel("vadd", (n // 64, 1, 1), (64, 1, 1), args)
  if cold:   # the program is compiled inside this call
    t0 = time.perf_counter()
    go()
    emit("first_result_seconds", time.perf_counter() - t0, "s", case="vadd_64k")
    return
  go()
  t, st = best_with(go, repeats)
  assert np.array_equal(read(mem, pc, np.float32, n), a + b)
  t_np, _ = best_with(lambda: a + b, repeats)
  emit("vadd_64k_wave_inst_per_s", st.wave_instructions / t, "wave-inst/s", waves=st.waves,
       wave_instructions=st.wave_instructions, seconds=round(t, 5))
  emit("vadd_64k_time_vs_numpy", t / t_np, "x")


def matmul(repeats: int, n: int = 256) -> None:
  mem = Memory()
  co = CodeObject(mem, compile_cl(MATMUL))
  a, b = np.random.default_rng(1).standard_normal((2, n, n)).astype(np.float32)
  pa, pb, pc = buffer(mem, a), buffer(mem, b), mem.alloc(4 * n * n)
  args = struct.pack("<QQQi", pa, pb, pc, n)
  go = lambda: co.kernel("matmul", (n // 16, n // 16, 1), (16, 16, 1), args)
  go()
  t, st = best_with(go, max(1, repeats // 2))
  np.testing.assert_allclose(read(mem, pc, np.float32, n * n).reshape(n, n), a @ b, rtol=1e-4, atol=1e-3)
  t_np, _ = best_with(lambda: a @ b, repeats)
  emit(f"matmul_{n}_wave_inst_per_s", st.wave_instructions / t, "wave-inst/s", waves=st.waves,
       wave_instructions=st.wave_instructions, seconds=round(t, 4))
  emit(f"matmul_{n}_time_vs_numpy", t / t_np, "x")


def main() -> None:
  repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
  compile_cl(VADD); compile_cl(MATMUL)            # LLVM's compile is not what is measured
  saved = os.environ.get("XDG_CACHE_HOME")
  with tempfile.TemporaryDirectory() as empty:
    os.environ["XDG_CACHE_HOME"] = empty           # read by emu.cc at build time
    try:
      t0 = time.perf_counter()
      runtime.load(False)
      emit("runtime_build_seconds", time.perf_counter() - t0, "s", note="once per machine and wave size, then cached")
      vadd(1, cold=True)
    finally:
      if saved is None: del os.environ["XDG_CACHE_HOME"]
      else: os.environ["XDG_CACHE_HOME"] = saved
  alu_loop(repeats, targets.DEFAULT)
  vadd(repeats)
  matmul(repeats)
  for target in targets.TARGETS:   # the other targets last: the gfx1100 figures stay comparable run to run
    if target != targets.DEFAULT: alu_loop(repeats, target)


if __name__ == "__main__":
  main()
