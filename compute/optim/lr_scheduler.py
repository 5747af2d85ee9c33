"""Learning-rate schedules shaped like torch.optim.lr_scheduler: a scheduler sets its optimizer's param_groups' "lr" when
made (epoch 0) and at each step() (the next epoch), from the lr each group has, so schedules compose as PyTorch's
recursive forms do; step(epoch) jumps to an epoch through the closed form. get_last_lr() is what it set last."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any, Callable
if TYPE_CHECKING: from compute.optim import Optimizer


class LRScheduler:
  def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
    self.optimizer = optimizer
    for i, g in enumerate(optimizer.param_groups):
      if last_epoch == -1: g.setdefault("initial_lr", g["lr"])
      elif "initial_lr" not in g: raise KeyError(f"param_groups[{i}] has no 'initial_lr': resuming (last_epoch={last_epoch}) needs it")
    self.base_lrs: list[float] = [g["initial_lr"] for g in optimizer.param_groups]
    self.last_epoch = last_epoch
    self.step()

  def get_lr(self) -> list[float]:
    """The lrs for self.last_epoch from the groups' current lrs (the recursive form)."""
    raise NotImplementedError

  def _closed_form(self) -> list[float]: return self.get_lr()

  def step(self, epoch: int | None = None) -> None:
    self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
    lrs = self.get_lr() if epoch is None else self._closed_form()
    for g, lr in zip(self.optimizer.param_groups, lrs): g["lr"] = lr
    self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

  def get_last_lr(self) -> list[float]: return self._last_lr

  def state_dict(self) -> dict[str, Any]: return {k: v for k, v in self.__dict__.items() if k != "optimizer"}
  def load_state_dict(self, state_dict: dict[str, Any]) -> None: self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
  """lr = initial lr * lr_lambda(epoch) (one function, or one per group)."""
  def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list[Callable[[int], float]], last_epoch: int = -1):
    n = len(optimizer.param_groups)
    self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
    if len(self.lr_lambdas) != n: raise ValueError(f"expected {n} lr_lambdas (one per param group), got {len(self.lr_lambdas)}")
    super().__init__(optimizer, last_epoch)

  def get_lr(self) -> list[float]: return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]
  def state_dict(self) -> dict[str, Any]: return {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}


class StepLR(LRScheduler):
  """lr *= gamma every step_size epochs: initial lr * gamma ** (epoch // step_size)."""
  def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
    if not isinstance(step_size, int) or step_size < 1: raise ValueError(f"step_size must be a positive int, got {step_size!r}")
    self.step_size, self.gamma = step_size, gamma
    super().__init__(optimizer, last_epoch)

  def get_lr(self) -> list[float]:
    decay = self.last_epoch > 0 and self.last_epoch % self.step_size == 0
    return [g["lr"] * self.gamma if decay else g["lr"] for g in self.optimizer.param_groups]

  def _closed_form(self) -> list[float]: return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
  """eta_min + (initial lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, reached recursively from the current lr as
  PyTorch's documentation gives it (past T_max it rises again: the cosine's period is 2 * T_max)."""
  def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
    if T_max <= 0: raise ValueError(f"T_max must be positive, got {T_max}")
    self.T_max, self.eta_min = T_max, eta_min
    super().__init__(optimizer, last_epoch)

  def get_lr(self) -> list[float]:
    e, tm, lo = self.last_epoch, self.T_max, self.eta_min
    lrs = [g["lr"] for g in self.optimizer.param_groups]
    if e == 0: return lrs
    if (e - 1 - tm) % (2 * tm) == 0:   # leaving the minimum, where the ratio below would divide by zero
      return [lr + (base - lo) * (1 - math.cos(math.pi / tm)) / 2 for lr, base in zip(lrs, self.base_lrs)]
    ratio = (1 + math.cos(math.pi * e / tm)) / (1 + math.cos(math.pi * (e - 1) / tm))
    return [lo + (lr - lo) * ratio for lr in lrs]

  def _closed_form(self) -> list[float]:
    return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2 for base in self.base_lrs]
