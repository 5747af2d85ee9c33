"""Compile time per kernel (render + clang, cold cache) for the kernels of one digits training step, and how
many kernels that step launches.

Usage: DEV=CPU python bench/compute_compile.py   (prints one JSON line per figure)"""
import json, os, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="hcq-bench-cache-")   # cold compile cache
import numpy as np
from compute import Tensor, Device, nn, optim
from compute.codegen import Dialect
from compute.schedule import create_schedule, Kernel
from digits import MLP, load


def main() -> None:
  dev = os.environ.get("DEV", "CPU")
  xtr, ytr, _, _ = load()
  model = MLP(dev)
  opt = optim.Adam(nn.parameters(model), lr=0.01)
  loss = model(Tensor(xtr[:64], device=dev)).cross_entropy(Tensor(ytr[:64], device=dev))
  loss.backward()
  targets = [loss, *opt.schedule_step()]
  items = create_schedule(list({id(t.lazydata.base): t.lazydata.base for t in targets}.values()))
  kernels = [k for k in items if isinstance(k, Kernel)]
  comp = Device[dev].compiler
  times = []
  for k in kernels:
    t0 = time.perf_counter()
    comp.compile(Dialect.of(comp.language, dev).render(k).src)
    times.append(time.perf_counter() - t0)
  for name, value, unit in [("digits_train_step_kernels", len(kernels), "kernels"),
                            ("compile_ms_per_kernel_mean", 1e3 * float(np.mean(times)), "ms"),
                            ("compile_ms_per_kernel_max", 1e3 * float(np.max(times)), "ms")]:
    print(json.dumps({"bench": f"compute/{name}", "device": dev, "value": round(value, 3), "unit": unit}))


if __name__ == "__main__":
  main()
