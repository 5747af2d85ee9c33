"""Host cost of a kernel launch on the emulated AMD GPU, and how it splits between driver and emulator.

Usage: python bench/amd_launch.py [DEV ...]   (default: MOCKKFD+AMD MOCKPCI+AMD)
Figures (best of 5 rounds of N launches; one JSON line each):
  driver_submit_us   host CPU time (this thread's) to encode and submit one launch (PM4 packets, kernargs, doorbell)
  end_to_end_us      submit + the emulated GPU running it + waiting for its signal, per launch (in a stream)
  emulator_us        the same empty kernel dispatched straight into emu.amdgcn (no driver, no queue)
  compute_kernel_us  per kernel of one compute-layer schedule of 50 adds (Tensor.realize_all), end to end
  compute_numpy_us   copying a realized 1 KiB tensor back to numpy (Tensor.numpy)
  compute_ring_dwords  compute-ring dwords per kernel of that schedule (the commands the GPU front end processes)"""
import sys
from figures import best, emit, host_cpu, skipped
from drivers.hcq import open_device
from drivers.amd.elf import load_code_object
import emu.amdgcn as amdgcn
import numpy as np
from compute import Tensor

SRC = "__kernel void empty(__global int *x) { }"
N = 200
N_COMPUTE = 50


def emulator_only(lib: bytes) -> float:
  co = load_code_object(lib)
  k = co.kernels["empty"]
  mem = amdgcn.Memory()
  base = mem.alloc(len(co.image) + 4096)
  mem.write(base, co.relocated(base))
  args = mem.alloc(4096)
  def run():
    for _ in range(N): amdgcn.dispatch(mem, base + k.descriptor_offset, (1, 1, 1), (32, 1, 1), kernarg_ptr=args)
  return best(run) / N


def compute_layer(dev) -> tuple[float, float, float]:
  """(seconds per kernel of a compute-layer schedule of N_COMPUTE kernels, compute-ring dwords per kernel of it,
  seconds per copy-back of a 1 KiB tensor)."""
  x = Tensor(np.zeros(256, np.float32), device=dev.name).realize()
  ys = [Tensor(np.full(256, i, np.float32), device=dev.name).realize() for i in range(N_COMPUTE)]
  (x + ys[0]).numpy()                                     # warm: the kernel compiled and loaded
  def kernels():                                          # one schedule: N_COMPUTE launches in one submission
    Tensor.realize_all(*(x + y for y in ys))
    dev.synchronize()
  def copyback():
    for _ in range(N_COMPUTE): x.numpy()
  put = dev.compute_ring.put
  kernels()
  dwords = (dev.compute_ring.put - put) / N_COMPUTE
  return best(kernels) / N_COMPUTE, dwords, best(copyback) / N_COMPUTE


def main() -> None:
  for name in sys.argv[1:] or ["MOCKKFD+AMD", "MOCKPCI+AMD"]:
    try: dev = open_device(name)
    except Exception as e:
      skipped("amd/launch", str(e), device=name)
      continue
    lib = dev.compiler.compile(SRC)
    prg, buf = dev.program("empty", lib), dev.alloc(64)
    prg(buf, global_size=(1,), local_size=(32,), wait=True)   # warm: code compiled into the emulator's cache
    def submit_only():
      for _ in range(N): prg(buf, global_size=(1,), local_size=(32,))
    t_submit = best(lambda: (submit_only(), dev.synchronize())) / N
    t_driver = min(host_cpu(submit_only, dev) for _ in range(5)) / N
    t_kernel, dwords, t_numpy = compute_layer(dev)
    for fig, value in [("driver_submit_us", t_driver * 1e6), ("end_to_end_us", t_submit * 1e6), ("emulator_us", emulator_only(lib) * 1e6),
                       ("compute_kernel_us", t_kernel * 1e6), ("compute_numpy_us", t_numpy * 1e6)]:
      emit(f"amd/launch_{fig}", value, "us", device=name)
    emit("amd/launch_compute_ring_dwords", dwords, "dwords per kernel", device=name)
    dev.close()


if __name__ == "__main__":
  main()
