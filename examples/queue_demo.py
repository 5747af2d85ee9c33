"""Queue-API example: allocate, copy in, compile and run a kernel, copy out, check against numpy (CPU or AMD).

Runs on DEV (default: the default device). Usage: python examples/queue_demo.py [N]"""
import sys, time
import numpy as np
from drivers.hcq import open_device
from tools.cli import run

SRC = {"c": r"""
#include <stdint.h>
/* out[i] = a[i] * b[i] + 1, one workgroup of lsize[0] elements per call (CPU kernel ABI) */
void saxpy(const uint8_t *args, const uint32_t *gid, const uint32_t *lsize) {
  float *out = *(float **)(args + 0), *a = *(float **)(args + 8), *b = *(float **)(args + 16);
  int32_t n = *(int32_t *)(args + 24);
  for (uint32_t l = 0; l < lsize[0]; l++) {
    int64_t i = (int64_t)gid[0] * lsize[0] + l;
    if (i < n) out[i] = a[i] * b[i] + 1.0f;
  }
}
""", "opencl": r"""
/* the same kernel for a GPU: one work-item per element */
__kernel void saxpy(__global float *out, __global const float *a, __global const float *b, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = a[i] * b[i] + 1.0f;
}
"""}


def main(n: int = 1 << 20) -> None:
  dev = open_device()
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
  t0 = time.perf_counter()
  bufs = [dev.alloc(n * 4) for _ in range(3)]
  bufs[1].copyin(a.data); bufs[2].copyin(b.data)
  t1 = time.perf_counter()
  prg = dev.program("saxpy", dev.compiler.compile(SRC[dev.compiler.language]))
  t2 = time.perf_counter()
  local = 256
  kernel_s = prg(*bufs, global_size=((n + local - 1) // local,), local_size=(local,), vals=(n,), wait=True)
  out = np.frombuffer(bufs[0].copyout(), dtype=np.float32)
  t3 = time.perf_counter()
  ok = np.array_equal(out, a * b + np.float32(1))
  print(f"device {dev.name} ({dev.arch}): out = a*b+1 over {n} floats: {'verified against numpy' if ok else 'MISMATCH'}")
  print(f"  copy-in {1e3 * (t1 - t0):.1f} ms, compile {1e3 * (t2 - t1):.1f} ms, kernel {1e3 * kernel_s:.2f} ms, "
        f"launch+copy-out {1e3 * (t3 - t2):.1f} ms")
  for buf in bufs: buf.free()
  sys.exit(0 if ok else 1)


if __name__ == "__main__":
  sys.exit(run("queue_demo", lambda: main(*(int(x) for x in sys.argv[1:]))))   # a bad DEV, missing firmware, a busy device: one line
