"""Adreno kernels: ir3 compile time per kernel (compute.nir text -> NIR through tinymesa -> ir3 variant, no disk cache)
and the KGSL model's ir3 core (emu/kgsl/ir3.py) in instructions per second, against the same run's limit for a core
that issues each instruction as numpy operations over its lanes: one numpy add over as many lanes.

Usage: python bench/qcom_ir3.py [lanes]   (default 4096)
  ir3/compile_s          seconds to build and compile one kernel (best of 3), per kernel
  ir3/core_insts_per_s   instructions the core issues per second for a kernel over `lanes` invocations
  ir3/core_vs_numpy_add  that rate over the rate of single numpy adds over `lanes` uint32s (the limit of this design)
"""
import sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
from figures import best, emit, skipped


def main(lanes: int) -> None:
  try: import tinymesa  # noqa: F401
  except ImportError: return skipped("ir3", "the tinymesa wheel is not installed (scripts/setup.sh)")
  from compute import Tensor
  from compute.nir import NIRRenderer
  from compute.schedule import Kernel, create_schedule
  from drivers.qcom.compiler import compile_nir
  from emu.kgsl.ir3 import Core
  x = np.random.default_rng(0).standard_normal(lanes).astype(np.float32)
  cases = {"elementwise": Tensor(x, device="CPU").exp() * 3 + 1, "sum_rows": Tensor(x.reshape(-1, 64), device="CPU").sum(1),
           "int_divmod": Tensor(np.arange(lanes, dtype=np.int32), device="CPU") // 7 % 5}
  for name, t in cases.items():
    [k] = [k for k in create_schedule([t.lazydata.base]) if isinstance(k, Kernel)]
    spec = NIRRenderer().render(k)
    emit("ir3/compile_s", best(lambda: compile_nir(spec.src, 630, spec.name), 3), "s", kernel=name)
    v = compile_nir(spec.src, 630, spec.name)
    code = [int.from_bytes(v.code[i:i + 8], "little") for i in range(0, len(v.code), 8)]
    n = spec.global_size[0] * spec.local_size[0]
    mem = bytearray(64 << 20)
    base = 1 << 32
    consts = np.zeros(v.constlen * 4, np.uint32)
    addrs = np.array([base + i * (16 << 20) for i in range(len(k.bufs))], np.uint64).view(np.uint32)
    for _, start, end, off in v.ubo_ranges:      # the pushed argument range: the buffers' addresses
      pushed = addrs[start // 4:end // 4][:len(consts) - off // 4]
      consts[off // 4:off // 4 + len(pushed)] = pushed
    imms = np.array(v.imms, np.uint32)[:max(0, len(consts) - 4 * v.imm_offset)]
    consts[4 * v.imm_offset:4 * v.imm_offset + len(imms)] = imms
    def run() -> int:
      core = Core(6, n, consts.copy(), lambda va, size, write: memoryview(mem)[va - base:va - base + size])
      every, i = np.ones(n, bool), np.arange(n)
      for r, val in ((v.local_id_reg, i % spec.local_size[0]), (v.workgroup_id_reg, i // spec.local_size[0])):
        core.write(r, False, val.astype(np.uint32), every)
        for c in (1, 2): core.write(r + c, False, np.zeros(n, np.uint32), every)
      return core.run(code, v.max_reg + 1)
    t0 = time.perf_counter()
    steps = run()
    rate = steps / (time.perf_counter() - t0)
    a = np.arange(n, dtype=np.uint32)
    limit = 1 / best(lambda: a + a, 20)
    emit("ir3/core_insts_per_s", rate, "insts/s", kernel=name, lanes=n)
    emit("ir3/core_vs_numpy_add", rate / limit, "ratio", kernel=name, lanes=n)


if __name__ == "__main__":
  main(int(sys.argv[1]) if len(sys.argv) > 1 else 4096)
