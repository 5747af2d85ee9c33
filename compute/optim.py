"""Optimizers: SGD (momentum, nesterov, weight decay) and Adam. step() realizes every update in one schedule."""
from __future__ import annotations
from compute.tensor import Tensor, no_grad


class Optimizer:
  def __init__(self, params: list[Tensor], lr: float):
    self.params = [p for p in params if p.requires_grad]
    if not self.params: raise ValueError("the optimizer got no tensors with requires_grad=True")
    self.lr = lr

  def zero_grad(self) -> None:
    for p in self.params: p.grad = None

  def schedule_step(self) -> list[Tensor]:
    """Build the update lazily and return every tensor it changes: realize them together with anything else
    (e.g. the loss) in one schedule, `Tensor.realize_all(loss, *opt.schedule_step())`."""
    with no_grad(): state = self._update()
    return [*self.params, *state]

  def step(self) -> None: Tensor.realize_all(*self.schedule_step())

  def _grad(self, p: Tensor) -> Tensor:
    if p.grad is None: return p.zeros_like()
    return p.grad.detach()

  def _update(self) -> list[Tensor]: raise NotImplementedError


class SGD(Optimizer):
  def __init__(self, params, lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False):
    super().__init__(params, lr)
    self.momentum, self.wd, self.nesterov = momentum, weight_decay, nesterov
    self.buf = [p.zeros_like().contiguous().realize() for p in self.params] if momentum else []

  def _update(self) -> list[Tensor]:
    for i, p in enumerate(self.params):
      g = self._grad(p)
      if self.wd: g = g + self.wd * p.detach()
      if self.momentum:
        self.buf[i].assign(self.momentum * self.buf[i] + g)
        g = g + self.momentum * self.buf[i] if self.nesterov else self.buf[i]
      p.assign(p.detach() - self.lr * g)
    return self.buf


class Adam(Optimizer):
  def __init__(self, params, lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd = b1, b2, eps, weight_decay
    dev = self.params[0].device
    # b1^t and b2^t live on the device, so every step runs the same kernels (no step-dependent constants)
    self.b1_t, self.b2_t = Tensor(1.0, device=dev), Tensor(1.0, device=dev)
    self.m = [p.zeros_like().contiguous().realize() for p in self.params]
    self.v = [p.zeros_like().contiguous().realize() for p in self.params]

  def _update(self) -> list[Tensor]:
    self.b1_t.assign(self.b1_t * self.b1)
    self.b2_t.assign(self.b2_t * self.b2)
    c1, c2 = 1 - self.b1_t, 1 - self.b2_t
    for p, m, v in zip(self.params, self.m, self.v):
      g = self._grad(p)
      if self.wd: g = g + self.wd * p.detach()
      m.assign(self.b1 * m + (1 - self.b1) * g)
      v.assign(self.b2 * v + (1 - self.b2) * g * g)
      p.assign(p.detach() - self.lr * (m / c1) / ((v / c2).sqrt() + self.eps))
    return self.m + self.v + [self.b1_t, self.b2_t]
