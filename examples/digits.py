"""Train a small MLP on scikit-learn's bundled 8x8 digits (no network) on the default device.

Usage: python examples/digits.py [epochs]   (DEV=CPU, DEV=MOCKPCI+AMD, ... pick the device)
Prints the device, a progress bar, the test accuracy (>= 90% expected) and the wall time."""
import sys, time
import numpy as np
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from sklearn.datasets import load_digits
from compute import Tensor, Device, nn, optim, no_grad
from tools.cli import run


class MLP(nn.Module):
  def __init__(self, device: str, hidden: int = 64):
    super().__init__()
    self.l1, self.l2 = nn.Linear(64, hidden, device=device), nn.Linear(hidden, 10, device=device)

  def forward(self, x: Tensor) -> Tensor: return self.l2(self.l1(x).relu())


def load(seed: int = 0):
  x, y = load_digits(return_X_y=True)
  order = np.random.default_rng(seed).permutation(len(x))
  x, y = (x[order] / 16.0).astype(np.float32), y[order].astype(np.int32)
  n_train = int(len(x) * 0.8)
  return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def train(epochs: int = 6, batch: int = 64, lr: float = 0.01, device: str | None = None, quiet: bool = False) -> tuple[float, float]:
  """Returns (test accuracy, wall seconds)."""
  device = Device.canonicalize(device)
  xtr, ytr, xte, yte = load()
  Tensor.manual_seed(0)
  model = MLP(device)
  opt = optim.Adam(model.parameters(), lr=lr)
  steps = len(xtr) // batch
  rng = np.random.default_rng(1)
  t0 = time.perf_counter()
  with Progress(TextColumn("[bold]epoch {task.fields[epoch]}"), BarColumn(), TextColumn("loss {task.fields[loss]:.3f}"),
                TimeElapsedColumn(), disable=quiet) as bar:
    task = bar.add_task("train", total=epochs * steps, epoch=1, loss=float("nan"))
    for epoch in range(epochs):
      perm = rng.permutation(len(xtr))
      X, Y = Tensor(xtr[perm], device=device), Tensor(ytr[perm], device=device)   # one upload per epoch
      for i in range(steps):
        xb, yb = X[i * batch:(i + 1) * batch], Y[i * batch:(i + 1) * batch]
        opt.zero_grad()
        loss = model(xb).cross_entropy(yb)
        loss.backward()
        Tensor.realize_all(loss, *opt.schedule_step())
        bar.update(task, advance=1, epoch=epoch + 1, loss=loss.item())
  with no_grad():
    pred = model(Tensor(xte, device=device)).argmax(1).numpy()
  return float((pred == yte).mean()), time.perf_counter() - t0


def main() -> None:
  epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 6
  device = Device.DEFAULT
  print(f"training a 64-64-10 MLP on the 8x8 digits on {device}")
  acc, wall = train(epochs, device=device)
  print(f"device {device}: test accuracy {acc * 100:.1f}% after {epochs} epochs, wall time {wall:.1f} s")
  sys.exit(0 if acc >= 0.9 else 1)


if __name__ == "__main__":
  sys.exit(run("digits", main))   # a bad DEV, missing firmware, a busy device: one line
