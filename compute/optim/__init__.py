"""Optimizers shaped like torch.optim: parameters or param groups (dicts with "params" and per-group hyperparameters in
param_groups), zero_grad(), step(); SGD (momentum, dampening, nesterov, weight decay), Adam (L2 weight decay) and AdamW
(decoupled weight decay), both with amsgrad. A parameter without a gradient is skipped, as in PyTorch. The lr and the
bias corrections reach the kernels as device scalars (uploaded when they change), so every step, at every lr a
scheduler sets, runs the same kernels; step() realizes every update in one schedule."""
from __future__ import annotations
from typing import Any
import numpy as np
from compute.tensor import Tensor, no_grad
from compute.optim import lr_scheduler


class Optimizer:
  def __init__(self, params, defaults: dict[str, Any]):
    groups = list(params)
    if not groups: raise ValueError("the optimizer got an empty parameter list")
    self.defaults = defaults
    self.param_groups: list[dict[str, Any]] = []
    self.state: dict[Tensor, dict[str, Any]] = {}
    for g in (groups if isinstance(groups[0], dict) else [{"params": groups}]): self.add_param_group(g)
    if not self.params: raise ValueError("the optimizer got no tensors with requires_grad=True")
    self._scalars: dict[tuple[str, float], Tensor] = {}

  @property
  def params(self) -> list[Tensor]: return [p for g in self.param_groups for p in g["params"]]

  def add_param_group(self, group: dict[str, Any]) -> None:
    """A dict with "params" (a tensor or an iterable of them) and any hyperparameters that differ from the defaults."""
    ps = [group["params"]] if isinstance(group["params"], Tensor) else list(group["params"])
    if any(not isinstance(p, Tensor) for p in ps): raise TypeError("optimizer params must be Tensors")
    ps = [p for p in ps if p.requires_grad]
    seen = {id(p) for p in self.params}
    if any(id(p) in seen for p in ps): raise ValueError("some parameters appear in more than one parameter group")
    self.param_groups.append({**self.defaults, **group, "params": ps})

  def zero_grad(self, set_to_none: bool = True) -> None:
    for p in self.params:
      if set_to_none: p.grad = None
      elif p.grad is not None: p.grad = p.grad.zeros_like()

  def state_dict(self) -> dict[str, Any]:
    """PyTorch's layout: {"state": {index: per-parameter state}, "param_groups": [hyperparameters with "params": the
    indices]}, parameters numbered in group order. State tensors are the optimizer's own (they change with each step,
    as in PyTorch: copy them to keep a snapshot)."""
    index = {id(p): i for i, p in enumerate(self.params)}
    return {"state": {index[id(p)]: dict(st) for p, st in self.state.items() if st},
            "param_groups": [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                             for g in self.param_groups]}

  def load_state_dict(self, state_dict: dict[str, Any]) -> None:
    """Take the hyperparameters and per-parameter state of a state_dict() whose groups have this optimizer's sizes;
    state tensors are copied onto each parameter's device (floats in its dtype), so the source stays untouched."""
    groups = state_dict["param_groups"]
    if len(groups) != len(self.param_groups):
      raise ValueError(f"loaded state dict has {len(groups)} parameter groups, this optimizer {len(self.param_groups)}")
    if (got := [len(g["params"]) for g in groups]) != (have := [len(g["params"]) for g in self.param_groups]):
      raise ValueError(f"loaded state dict has parameter groups of {got} parameters, this optimizer of {have}")
    params = {i: p for old, g in zip(groups, self.param_groups) for i, p in zip(old["params"], g["params"])}
    if (unknown := set(state_dict["state"]) - set(params)): raise ValueError(f"loaded state names parameters {sorted(unknown)} of no group")
    copy = lambda v, p: Tensor(v.numpy(), device=p.device, dtype=p.dtype if v.dtype.is_float else v.dtype) if isinstance(v, Tensor) else v
    self.state = {params[i]: {k: copy(v, params[i]) for k, v in st.items()} for i, st in state_dict["state"].items()}
    self.param_groups = [{**old, "params": g["params"]} for old, g in zip(groups, self.param_groups)]

  def schedule_step(self) -> list[Tensor]:
    """Build the update lazily and return every tensor it changes: realize them together with anything else
    (e.g. the loss) in one schedule, `Tensor.realize_all(loss, *opt.schedule_step())`."""
    self._prev, self._scalars = self._scalars, {}
    with no_grad():
      changed = []
      for g in self.param_groups:
        for p in g["params"]:
          if p.grad is None: continue
          grad = -p.grad.detach() if g.get("maximize") else p.grad.detach()
          changed += [p, *self._update(p, grad, g, self.state.setdefault(p, {}))]
    return changed

  def step(self) -> None: Tensor.realize_all(*self.schedule_step())

  def _scalar(self, value: float, device: str) -> Tensor:
    """A 0-d float32 device tensor holding a hyperparameter (the last step's when the value is the same)."""
    key = (device, float(value))
    t = self._scalars.get(key)
    if t is None: t = self._prev.get(key)
    if t is None: t = Tensor(np.float32(value), device=device)
    self._scalars[key] = t
    return t

  def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> list[Tensor]:
    """Assign p's new value; return the state tensors it changed."""
    raise NotImplementedError


def _check(**kw: float) -> None:
  for k, v in kw.items():
    if not v >= 0: raise ValueError(f"invalid {k}: {v} (must be >= 0)")


class SGD(Optimizer):
  """p -= lr * g, g the gradient plus weight_decay * p, through a momentum buffer b = momentum * b + (1 - dampening) * g
  (b = g at the first step); nesterov uses g + momentum * b."""
  def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
               nesterov: bool = False, *, maximize: bool = False):
    _check(lr=lr, momentum=momentum, weight_decay=weight_decay)
    if nesterov and (momentum <= 0 or dampening != 0): raise ValueError("nesterov momentum needs a momentum > 0 and zero dampening")
    super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov, maximize=maximize))

  def _update(self, p, grad, group, state):
    if group["weight_decay"]: grad = grad + group["weight_decay"] * p.detach()
    changed = []
    if (mom := group["momentum"]):
      buf = state.get("momentum_buffer")
      if buf is None: buf = state["momentum_buffer"] = grad.contiguous()
      else: buf.assign(mom * buf + (1 - group["dampening"]) * grad)
      grad = grad + mom * buf if group["nesterov"] else buf
      changed.append(buf)
    p.assign(p.detach() - self._scalar(group["lr"], p.device) * grad)
    return changed


class Adam(Optimizer):
  """m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), g the
  gradient plus weight_decay * p (L2); amsgrad uses the largest v so far."""
  decoupled = False

  def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
               amsgrad: bool = False, *, maximize: bool = False):
    _check(lr=lr, eps=eps, weight_decay=weight_decay)
    if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1): raise ValueError(f"invalid betas {betas}: each must be in [0, 1)")
    super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize))

  def _update(self, p, grad, group, state):
    (b1, b2), lr, wd = group["betas"], group["lr"], group["weight_decay"]
    if not state:
      state.update(step=0, exp_avg=p.zeros_like().contiguous().realize(), exp_avg_sq=p.zeros_like().contiguous().realize())
      if group["amsgrad"]: state["max_exp_avg_sq"] = p.zeros_like().contiguous().realize()
    state["step"] += 1
    t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
    x = p.detach()
    if wd and self.decoupled: x = x * self._scalar(1 - lr * wd, p.device)
    elif wd: grad = grad + wd * x
    m.assign(b1 * m + (1 - b1) * grad)
    v.assign(b2 * v + (1 - b2) * grad * grad)
    if group["amsgrad"]: v = state["max_exp_avg_sq"].assign(state["max_exp_avg_sq"].maximum(v))
    denom = v.sqrt() / self._scalar(np.sqrt(1 - b2 ** t), p.device) + group["eps"]
    p.assign(x - self._scalar(lr / (1 - b1 ** t), p.device) * m / denom)
    return [m, state["exp_avg_sq"], *([v] if group["amsgrad"] else [])]


class AdamW(Adam):
  """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step (weight_decay defaults to 0.01)."""
  decoupled = True

  def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
               amsgrad: bool = False, *, maximize: bool = False):
    super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
