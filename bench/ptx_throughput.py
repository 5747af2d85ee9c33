"""PTX engine throughput in thread-instructions per second: a vector add over 1M floats (4096 blocks of 256) and a
256x256 f32 matmul tiled in shared memory (16x16 blocks, __syncthreads), both compiled by NVRTC for sm_80, checked
against numpy; plus the first-launch time of a kernel the engine has not seen (PTX translation and C compile).
Prints one JSON line per figure. Usage: python bench/ptx_throughput.py [repeats]"""
import os, sys, time
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "emu", "nvgpu"))
from figures import best, emit                                 # noqa: E402
from ptx_helpers import VADD, MATMUL                          # noqa: E402 (the kernels the tests check)
from emu.memory import Memory                                 # noqa: E402
from emu.nvgpu.ptx import Program, launch                     # noqa: E402
from drivers.nv import nvrtc                                  # noqa: E402


def main() -> None:
  repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
  rng = np.random.default_rng(0)
  mem = Memory()
  n = 1 << 20
  a, b = rng.random(n, np.float32), rng.random(n, np.float32)
  pa, pb, pc = mem.alloc(4 * n), mem.alloc(4 * n), mem.alloc(4 * n)
  mem.write(pa, a); mem.write(pb, b)
  src = nvrtc.ptx(VADD, "sm_80")
  fresh = src.replace("vadd", f"vadd_{time.time_ns()}")        # a kernel no cache has seen
  t0 = time.perf_counter()
  p = Program(fresh)
  launch(p, mem, n // 256, 256, p.pack(pa, pb, pc, n))
  emit("ptx_throughput/first_launch_of_a_new_kernel", time.perf_counter() - t0, "s", note="translation + C compile + run")
  p = Program(src)
  st = launch(p, mem, n // 256, 256, p.pack(pa, pb, pc, n))
  assert np.array_equal(np.frombuffer(mem.read(pc, 4 * n), np.float32), a + b)
  t = best(lambda: launch(p, mem, n // 256, 256, p.pack(pa, pb, pc, n)), repeats)
  emit("ptx_throughput/vadd_1m", st.thread_instructions / t, "thread-inst/s", seconds=round(t, 4))
  t_np = best(lambda: np.add(a, b), repeats)
  emit("ptx_throughput/vadd_1m_time_vs_numpy", t / t_np, "x")

  m = 256
  A, B = rng.standard_normal((m, m), np.float32), rng.standard_normal((m, m), np.float32)
  pA, pB, pC = mem.alloc(4 * m * m), mem.alloc(4 * m * m), mem.alloc(4 * m * m)
  mem.write(pA, A); mem.write(pB, B)
  p = Program(nvrtc.ptx(MATMUL, "sm_80"))
  args = p.pack(pA, pB, pC, m)
  st = launch(p, mem, (m // 16, m // 16), (16, 16), args)
  C = np.frombuffer(mem.read(pC, 4 * m * m), np.float32).reshape(m, m)
  assert np.allclose(C, A @ B, rtol=1e-4, atol=1e-3)
  t = best(lambda: launch(p, mem, (m // 16, m // 16), (16, 16), args), repeats)
  emit("ptx_throughput/matmul_256", st.thread_instructions / t, "thread-inst/s", seconds=round(t, 4))
  t_np = best(lambda: A @ B, repeats)
  emit("ptx_throughput/matmul_256_time_vs_numpy", t / t_np, "x")


if __name__ == "__main__":
  main()
