"""The prepared script for a lent H200 machine: our driver (drivers/nv through nvidia.ko) and, side by side in the same
run, torch's figures for the same work.

Usage: python bench/nv_h200.py [--mock] [--small] [--budget S]
  --mock   run against MOCK+NV (the RM/UVM model and its PTX engine) instead of the GPU (RM+NV)
  --small  small sizes (the CI test; the emulator runs kernels slowly)
  --budget seconds for the whole run (default 480: a device command may run 10 minutes); a section that would start
           with too little left is skipped with a line saying so, and a run that outlasts the budget by 60 s dumps its
           threads' stacks and exits (faulthandler), so it cannot hang the machine's command
The first line names the driver version, the GPU and what ran; then one JSON line per figure (bench/figures.py emit):
  nv_h200/vector_add, matmul_f32_check, matmul_bf16_check   results of compute-layer kernels checked against numpy (max error)
  nv_h200/launch_us         empty kernel, submit to done (wait=True, host clock), median of N
  nv_h200/launch_gpu_us     the same, between the compute queue's two timestamps (device clock)
  nv_h200/h2d_gbps, d2h_gbps  copy-queue copies between pinned host memory (sysmem) and vidmem, device clock
  nv_h200/matmul_f32_tflops, matmul_bf16_tflops  compute-layer matmul (its generated CUDA C), host clock, best of rounds
and the torch_* counterparts (CUDA events; torch.cuda._sleep(0) as the empty kernel), or a line saying
"torch: not available (...)" where torch with CUDA is not importable. Every section runs in its own try: its error is
printed as a `skipped` line and the next section runs."""
import argparse, faulthandler, os, statistics, sys, time, traceback
import numpy as np
from figures import emit, skipped

EMPTY = 'extern "C" __global__ void empty(int *x) { }'


class Run:
  """The time budget and the per-section error handling."""
  def __init__(self, budget: float):
    self.t0, self.budget = time.monotonic(), budget
    faulthandler.dump_traceback_later(budget + 60, exit=True)

  def left(self) -> float: return self.budget - (time.monotonic() - self.t0)

  def section(self, bench: str, fn, need: float = 5.0, **extra) -> None:
    if self.left() < need:
      skipped(bench, f"time budget: {self.left():.0f} s left, this section needs about {need:.0f} s", **extra)
      return
    try: fn()
    except Exception as e:
      traceback.print_exc(file=sys.stderr)
      skipped(bench, f"{type(e).__name__}: {e}", **extra)


def bf16_round(a: np.ndarray) -> np.ndarray:
  """float32 values rounded to bfloat16 (nearest, ties to even), as float32."""
  b = a.astype(np.float32).view(np.uint32)
  return ((b + 0x7FFF + (b >> 16 & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def timed(fn, rounds: int, run: Run) -> float:
  """Best of `rounds` host-clock runs of fn() (fewer when the budget runs short), seconds."""
  out = []
  for _ in range(rounds):
    t = time.perf_counter()
    fn()
    out.append(time.perf_counter() - t)
    if run.left() < 10: break
  return min(out)


def ours(run: Run, name: str, sizes: dict, header: str) -> None:
  from compute import Device, Tensor
  from drivers.nv import image, nvrtc
  try: dev = Device[name]
  except Exception as e:
    print(f"nv_h200: {header}; our driver could not open {name}: {type(e).__name__}: {e}", flush=True)
    skipped("nv_h200/open", f"{type(e).__name__}: {e}", device=name)
    return
  gpu, tag = dev.gpu, dict(device=name, driver="ours")
  print(f"nv_h200: {header}; ours opened {name}: NVIDIA driver {gpu.rmc.version}, GPU pci {gpu.card.vendor_id:04x}:{gpu.card.device_id:04x} "
        f"{gpu.arch} compute class {gpu.compute_class:#x} copy class {gpu.copy_class:#x} GPFIFO {gpu.gpfifo_class:#x}, "
        f"{gpu.card.fb_size >> 20} MiB; sizes {sizes}", flush=True)
  rng = np.random.default_rng(0)

  def vector_add():
    n = sizes["vec"]
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    got = (Tensor(a, device=name) + Tensor(b, device=name)).numpy()
    err = float(np.max(np.abs(got - (a + b))))
    if err: raise AssertionError(f"vector add of {n} floats differs from numpy by up to {err}")
    emit("nv_h200/vector_add", err, "max abs error vs numpy", n=n, **tag)
  run.section("nv_h200/vector_add", vector_add, **tag)

  def matmul(dtype: str):
    n, fig = sizes["mm"], "bf16" if dtype == "bfloat16" else "f32"
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    if dtype == "bfloat16": a, b = bf16_round(a), bf16_round(b)
    ta, tb = Tensor(a, device=name).cast(dtype).realize(), Tensor(b, device=name).cast(dtype).realize()
    got = (ta @ tb).cast("float32").numpy()                                    # the check, and the kernel compiled
    want = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    if err > (2e-2 if dtype == "bfloat16" else 1e-4): raise AssertionError(f"{dtype} matmul {n}^3: relative error {err} vs numpy")
    emit(f"nv_h200/matmul_{fig}_check", err, "max error / max |numpy|", n=n, **tag)
    t = timed(lambda: ((ta @ tb).realize(), dev.synchronize()), sizes["rounds"], run)
    emit(f"nv_h200/matmul_{fig}_tflops", 2 * n ** 3 / t / 1e12, "TFLOP/s", n=n, **tag)
  run.section("nv_h200/matmul_f32", lambda: matmul("float32"), **tag)
  run.section("nv_h200/matmul_bf16", lambda: matmul("bfloat16"), **tag)

  def launch():
    prg, buf = dev.program("empty", image.pack(nvrtc.cubin(EMPTY, dev.arch), nvrtc.ptx(EMPTY, dev.arch))), dev.alloc(64)
    prg(buf, global_size=(1,), local_size=(32,), wait=True)                   # warm
    host, gpu_t = [], []
    for _ in range(sizes["launches"]):
      t = time.perf_counter()
      gpu_t.append(prg(buf, global_size=(1,), local_size=(32,), wait=True))
      host.append(time.perf_counter() - t)
      if run.left() < 10: break
    emit("nv_h200/launch_us", statistics.median(host) * 1e6, "us", n=len(host), **tag)
    emit("nv_h200/launch_gpu_us", statistics.median(gpu_t) * 1e6, "us", n=len(gpu_t), **tag)
  run.section("nv_h200/launch", launch, **tag)

  def copies():
    size = sizes["copy"]
    host, vram = dev.alloc(size, host=True), dev.alloc(size)
    data = rng.integers(0, 256, size, dtype=np.uint8)
    host.host_view[:] = data.data
    st, en = dev.new_signal(name="copy begin"), dev.new_signal(name="copy end")
    for fig, dst, src in (("h2d", vram, host), ("d2h", host, vram)):
      if fig == "d2h": host.host_view[:] = bytes(size)
      best = None
      for _ in range(sizes["rounds"]):
        dev.timeline.wait(dev.ordered_submit(dev.copy_queue(), lambda q: q.timestamp(st).copy(dst, src).timestamp(en)))
        t = (en.timestamp - st.timestamp) / 1e6
        best = t if best is None else min(best, t)
        if run.left() < 10: break
      emit(f"nv_h200/{fig}_gbps", size / best / 1e9, "GB/s (pinned sysmem <-> vidmem, device clock)", bytes=size, **tag)
    if not np.array_equal(np.frombuffer(host.host_view, np.uint8), data): raise AssertionError("H2D then D2H did not give the data back")
    host.free(), vram.free()
  run.section("nv_h200/copy", copies, **tag)


def find_torch():
  """-> (torch or None, what it is: its version and GPU, or why not)."""
  try:
    import torch
    if not torch.cuda.is_available(): raise RuntimeError("torch.cuda.is_available() is False")
    return torch, f"torch {torch.__version__} CUDA {torch.version.cuda} on {torch.cuda.get_device_name(0)}"
  except Exception as e:
    return None, f"torch: not available ({type(e).__name__}: {e})"


def theirs(run: Run, sizes: dict, torch, what: str) -> None:
  if torch is None:
    for fig in ("launch_us", "h2d_gbps", "d2h_gbps", "matmul_f32_tflops", "matmul_bf16_tflops"):
      skipped(f"nv_h200/torch_{fig}", what, driver="torch")
    return
  tag = dict(device="cuda:0", driver="torch")

  def events(fn, rounds: int) -> float:
    """Best of `rounds` CUDA-event timings of fn(), seconds."""
    fn()
    out = []
    for _ in range(rounds):
      a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
      a.record(); fn(); b.record(); b.synchronize()
      out.append(a.elapsed_time(b) / 1e3)
      if run.left() < 10: break
    return min(out)

  def launch():
    torch.cuda._sleep(0); torch.cuda.synchronize()
    host = []
    for _ in range(sizes["launches"]):
      t = time.perf_counter()
      torch.cuda._sleep(0); torch.cuda.synchronize()
      host.append(time.perf_counter() - t)
    emit("nv_h200/torch_launch_us", statistics.median(host) * 1e6, "us", n=len(host), **tag)
    emit("nv_h200/torch_launch_gpu_us", events(lambda: torch.cuda._sleep(0), sizes["launches"]) * 1e6, "us", **tag)
  run.section("nv_h200/torch_launch", launch, **tag)

  def copies():
    size = sizes["copy"]
    host, dev = torch.empty(size, dtype=torch.uint8, pin_memory=True), torch.empty(size, dtype=torch.uint8, device="cuda")
    emit("nv_h200/torch_h2d_gbps", size / events(lambda: dev.copy_(host, non_blocking=True), sizes["rounds"]) / 1e9, "GB/s (pinned)",
         bytes=size, **tag)
    emit("nv_h200/torch_d2h_gbps", size / events(lambda: host.copy_(dev, non_blocking=True), sizes["rounds"]) / 1e9, "GB/s (pinned)",
         bytes=size, **tag)
  run.section("nv_h200/torch_copy", copies, **tag)

  def matmul(dtype, n: int, fig: str):
    torch.backends.cuda.matmul.allow_tf32 = False                             # f32 is f32, not TF32
    a, b = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
    emit(f"nv_h200/torch_matmul_{fig}_tflops", 2 * n ** 3 / events(lambda: a @ b, sizes["rounds"]) / 1e12, "TFLOP/s", n=n, **tag)
  run.section("nv_h200/torch_matmul_f32", lambda: matmul(torch.float32, sizes["mm"], "f32"), **tag)
  run.section("nv_h200/torch_matmul_bf16", lambda: matmul(torch.bfloat16, sizes["mm"], "bf16"), **tag)
  if sizes["mm"] < sizes["mm_torch_big"]:                                    # the size where cuBLAS reaches its peak
    run.section("nv_h200/torch_matmul_bf16_big", lambda: matmul(torch.bfloat16, sizes["mm_torch_big"], "bf16"), **tag)


SIZES = {"small": dict(vec=1000, mm=16, copy=1 << 16, launches=5, rounds=2, mm_torch_big=16),
         "full": dict(vec=1 << 24, mm=1024, copy=256 << 20, launches=200, rounds=5, mm_torch_big=8192)}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--mock", action="store_true", help="MOCK+NV instead of the GPU")
  p.add_argument("--small", action="store_true", help="small sizes (CI)")
  p.add_argument("--budget", type=float, default=480.0, help="seconds for the whole run")
  args = p.parse_args()
  run, sizes = Run(args.budget), SIZES["small" if args.small else "full"]
  name = "MOCK+NV" if args.mock else "RM+NV"
  torch, what = find_torch()
  header = (f"{name} ({'the RM/UVM model, PTX engine' if args.mock else 'nvidia.ko'}) and {what}; "
            f"{'small' if args.small else 'full'} sizes, budget {args.budget:.0f} s, python {sys.version.split()[0]}, "
            f"NVRTC_PATH={os.environ.get('NVRTC_PATH', '-')}")
  ours(run, name, sizes, header)
  theirs(run, sizes, torch, what)
  print(f"nv_h200: done in {time.monotonic() - run.t0:.1f} s", flush=True)


if __name__ == "__main__":
  main()
