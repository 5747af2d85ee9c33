"""Host cost of a kernel launch on MOCK+NV (drivers/nv against the RM/UVM model, its compute channel and the PTX engine).

Usage: python bench/nv_launch.py [DEV ...]   (default: MOCK+NV)
Figures (best of 5 rounds of N launches; one JSON line each):
  driver_submit_us   host CPU time (this thread's) to encode and submit one launch (cb0 + QMD, pushbuffer, GPFIFO, doorbell)
  end_to_end_us      submit + the model running it (QMD decode, the PTX grid, the release) + waiting, per launch in a stream
  wait_us            one launch with wait=True (timestamps around it), submit to return
  engine_us          the same empty kernel launched straight on the PTX engine (no driver, no channel)
  compute_kernel_us  per kernel of one compute-layer schedule of 50 adds of 256 floats (Tensor.realize_all), end to end
  pushbuffer_dwords  compute-channel pushbuffer dwords per launch"""
import sys
import numpy as np
from figures import best, emit, host_cpu, skipped
from compute import Tensor
from drivers.hcq import open_device
from drivers.nv import image, nvrtc
from emu.memory import Memory
from emu.nvgpu import ptx

SRC = 'extern "C" __global__ void empty(int *x) { }'
N = 200
N_COMPUTE = 50


def compute_layer(dev) -> float:
  """Seconds per kernel of a compute-layer schedule of N_COMPUTE kernels in one submission."""
  x = Tensor(np.zeros(256, np.float32), device=dev.name).realize()
  ys = [Tensor(np.full(256, i, np.float32), device=dev.name).realize() for i in range(N_COMPUTE)]
  (x + ys[0]).numpy()                                     # warm: the kernel compiled, loaded and translated
  def kernels():
    Tensor.realize_all(*(x + y for y in ys))
    dev.synchronize()
  return best(kernels) / N_COMPUTE


def main() -> None:
  for name in sys.argv[1:] or ["MOCK+NV"]:
    try:
      dev = open_device(name)
      lib = image.pack(nvrtc.cubin(SRC, dev.arch), nvrtc.ptx(SRC, dev.arch))
    except Exception as e:
      skipped("nv/launch", str(e), device=name)
      continue
    prg, buf = dev.program("empty", lib), dev.alloc(64)
    prg(buf, global_size=(1,), local_size=(32,), wait=True)   # warm: the PTX translated and compiled
    def submit_only():
      for _ in range(N): prg(buf, global_size=(1,), local_size=(32,))
    t_stream = best(lambda: (submit_only(), dev.synchronize())) / N
    t_driver = min(host_cpu(submit_only, dev) for _ in range(5)) / N
    t_wait = best(lambda: [prg(buf, global_size=(1,), local_size=(32,), wait=True) for _ in range(20)]) / 20
    put = dev.compute_ring.put
    prg(buf, global_size=(1,), local_size=(32,))
    dwords = dev.compute_ring.put - put
    engine = ptx.Program(image.unpack(lib)[1], "empty")
    mem = Memory()
    x = mem.alloc(64)
    t_engine = best(lambda: [ptx.launch(engine, mem, 1, 32, engine.pack(x)) for _ in range(N)]) / N
    t_compute = compute_layer(dev)
    for fig, value in [("driver_submit_us", t_driver), ("end_to_end_us", t_stream), ("wait_us", t_wait), ("engine_us", t_engine),
                       ("compute_kernel_us", t_compute)]:
      emit(f"nv/launch_{fig}", value * 1e6, "us", device=name)
    emit("nv/launch_pushbuffer_dwords", dwords, "dwords per launch (with the timeline wait and signal)", device=name)
    dev.close()


if __name__ == "__main__":
  main()
