"""Train examples/digits.py's MLP data-parallel on N ranks (compute.distributed): every rank starts from rank 0's
parameters (broadcast), takes its share of each batch of 64, and the gradients are averaged over the ranks (one
all_reduce per step, over all of them flattened), so each step is the one-rank step on the whole batch and the
accuracy is one rank's (>= 90%).

Usage: mpirun -np N python examples/ddp_digits.py [epochs]   (as root: mpirun --allow-run-as-root; on a small
machine --oversubscribe). Each rank uses DEV (with its local rank as the index), by default the emulated GPU
MOCKPCI+AMD:<local rank>, and HCQ_NIC (by default the emulated NIC mock-<local rank>). Rank 0 prints the accuracy."""
import sys, time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from digits import MLP, load
from compute import Tensor, nn, optim, no_grad
from compute import distributed as dist


def train(epochs: int = 6, batch: int = 64, lr: float = 0.01) -> tuple[float, float]:
  """-> (test accuracy, wall seconds); the same data order and initial parameters as digits.train."""
  r, n, device = dist.rank(), dist.world_size(), dist.device()
  if batch % n: raise SystemExit(f"ddp_digits: the batch of {batch} does not split evenly over {n} ranks")
  xtr, ytr, xte, yte = load()
  Tensor.manual_seed(0)
  model = MLP(device)
  params = nn.parameters(model)
  for p in params: dist.broadcast(p.detach(), src=0)   # one starting point (the seed gives it already; DDP makes sure)
  opt = optim.Adam(params, lr=lr)
  steps, share = len(xtr) // batch, batch // n
  rng = np.random.default_rng(1)
  t0 = time.perf_counter()
  for epoch in range(epochs):
    perm = rng.permutation(len(xtr))
    for i in range(steps):
      mine = perm[i * batch + r * share:i * batch + (r + 1) * share]   # this rank's share of the batch
      opt.zero_grad()
      loss = model(Tensor(xtr[mine], device=device)).cross_entropy(Tensor(ytr[mine], device=device))
      loss.backward()
      grads = dist.all_reduce(Tensor.cat(*[p.grad.flatten() for p in params]), op="avg")
      at = 0
      for p in params:
        p.grad.assign(grads[at:at + p.numel()].reshape(p.shape))
        at += p.numel()
      Tensor.realize_all(loss, *opt.schedule_step())
    if r == 0: print(f"epoch {epoch + 1}: loss {loss.item():.3f} (rank 0's share)", flush=True)
  with no_grad():
    pred = model(Tensor(xte, device=device)).argmax(1).numpy()
  return float((pred == yte).mean()), time.perf_counter() - t0


def main() -> None:
  epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 6
  dist.init()
  if dist.rank() == 0:
    print(f"training a 64-64-10 MLP on the 8x8 digits on {dist.world_size()} ranks (rank 0 on {dist.device()})", flush=True)
  acc, wall = train(epochs)
  if dist.rank() == 0:
    print(f"{dist.world_size()} ranks: test accuracy {acc * 100:.1f}% after {epochs} epochs, wall time {wall:.1f} s", flush=True)
  dist.destroy_process_group()
  sys.exit(0 if acc >= 0.9 else 1)


if __name__ == "__main__":
  main()
