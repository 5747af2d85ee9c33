"""nn.Module with torch.nn's registration rules (assigning a Parameter or a Module to an attribute registers it; buffers
through register_buffer), traversal (parameters, named_parameters, buffers, children, modules), state_dict and
load_state_dict, train/eval, zero_grad and to(), forward and full backward hooks; nn.Parameter; the containers Sequential
and ModuleList."""
from __future__ import annotations
import math
from collections import OrderedDict
from typing import Any, Callable, Iterator, NamedTuple
import numpy as np
from compute import function
from compute.dtypes import DType, dtypes
from compute.runtime import Device
from compute.tensor import Tensor, no_grad


class Parameter(Tensor):
  """A tensor a Module registers as a parameter: it takes data's value (detached, realized) and requires grad by default."""
  __slots__ = ()

  def __new__(cls, data: Any = None, requires_grad: bool = True, **kw):
    # Tensor's own code makes tensors of its operand's class as type(t)(data, device=..., dtype=...) (index tensors
    # from host data, assign's value): for a Parameter operand those are plain tensors
    return Tensor(data, **kw) if kw else super().__new__(cls)

  def __init__(self, data: Any = None, requires_grad: bool = True):
    t = data if isinstance(data, Tensor) else Tensor(np.zeros(0, np.float32) if data is None else data)
    if requires_grad and not t.dtype.is_float:
      raise TypeError(f"only floating-point tensors can require gradients, got {t.dtype.name}; pass requires_grad=False")
    super().__init__(t.detach().contiguous().realize().lazydata)
    self.requires_grad = requires_grad

  @classmethod
  def _from_lazy(cls, lb, requires_grad: bool = False) -> Tensor:   # type: ignore[override]
    """What an op on a Parameter makes (compute.function's apply, the factories through type(t)): a plain tensor."""
    return Tensor._from_lazy(lb, requires_grad)

  def __repr__(self) -> str: return "Parameter containing:\n" + super().__repr__()


class IncompatibleKeys(NamedTuple):
  missing_keys: list[str]
  unexpected_keys: list[str]


def _check_name(module: Module, name: str, what: str) -> None:
  if not isinstance(name, str) or not name or "." in name:
    raise KeyError(f"{what} name must be a non-empty string without '.', got {name!r}")
  if hasattr(module, name) and name not in module._parameters and name not in module._buffers and name not in module._modules:
    raise KeyError(f"attribute {name!r} already exists")


class RemovableHandle:
  """What register_*_hook returns: remove() unregisters the hook (again: nothing); a context manager that removes it
  on exit, like torch.utils.hooks.RemovableHandle."""
  _next_id = 0

  def __init__(self, table: dict[int, Any]):
    self.table, self.id = table, RemovableHandle._next_id
    RemovableHandle._next_id += 1

  def remove(self) -> None: self.table.pop(self.id, None)
  def __enter__(self) -> RemovableHandle: return self
  def __exit__(self, *exc) -> None: self.remove()


class _BackwardTaps:
  """One call's taps for the full backward hooks: the arguments needing gradients go through one Tap on their
  concatenation (its backward sees every input gradient at once and may replace them), each output through a Tap that
  notes its gradient (outputs are done before inputs in backward, the order of the graph)."""
  def __init__(self, module: Module, args: tuple):
    self.module, self.n_args, self.n_out = module, len(args), 0
    self.grad_output: dict[int, Tensor] = {}
    self.inputs = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    self.args = args
    if not self.inputs: return
    ts = [args[i] for i in self.inputs]
    if len({t.dtype for t in ts}) > 1: raise TypeError(f"full backward hooks need the tensor arguments needing gradients to share a dtype, got "
                                                       f"{[t.dtype.name for t in ts]}")
    self.shapes = [t.shape for t in ts]
    gate = function.Tap.apply(Tensor.cat([t.reshape(-1) for t in ts]), on_grad=self._inputs_done)
    new, off = list(args), 0
    for i, t in zip(self.inputs, ts):
      new[i], off = gate[off:off + t.numel()].reshape(t.shape), off + t.numel()
    self.args = tuple(new)

  def outputs(self, out):
    """`out` (a tensor or a tuple/list of them) with its tensors that need gradients tapped."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    tapped = []
    for k, o in enumerate(outs):
      if isinstance(o, Tensor) and o.requires_grad:
        self.n_out += 1
        o = function.Tap.apply(o, on_grad=lambda g, k=k: self._output_done(k, g))
      tapped.append(o)
    self.outs = len(outs)
    return type(out)(tapped) if isinstance(out, (tuple, list)) else tapped[0]

  def _output_done(self, k: int, g):
    self.grad_output[k] = Tensor._from_lazy(g)
    if not self.inputs and len(self.grad_output) == self.n_out: self._call((None,) * self.n_args)   # no input gradient: call now
    return g

  def _inputs_done(self, g):
    flat, off, grads = Tensor._from_lazy(g), 0, []
    for shape in self.shapes:
      n = math.prod(shape)
      grads.append(flat[off:off + n].reshape(shape))
      off += n
    grad_input = [None] * self.n_args
    for i, gi in zip(self.inputs, grads): grad_input[i] = gi
    new = self._call(tuple(grad_input))
    parts = []
    for i, shape in zip(self.inputs, self.shapes):
      gi = new[i]
      if not isinstance(gi, Tensor) or gi.shape != shape:
        raise RuntimeError(f"a full backward hook returned grad_input[{i}] of {getattr(gi, 'shape', type(gi).__name__)}; "
                           f"it needs a tensor of shape {shape}")
      parts.append(gi.cast(flat.dtype).reshape(-1))
    return Tensor.cat(parts).lazydata

  def _call(self, grad_input: tuple) -> tuple:
    grad_output = tuple(self.grad_output.get(k) for k in range(self.outs))
    for hook, _ in list(self.module._backward_hooks.values()):
      if (r := hook(self.module, grad_input, grad_output)) is not None:
        if not isinstance(r, tuple) or len(r) != self.n_args:
          raise RuntimeError(f"a full backward hook must return None or a tuple of {self.n_args} gradients, got {r!r}")
        grad_input = r
    return grad_input


class Module:
  """Base class of layers: subclasses call super().__init__() first, assign Parameters and Modules as attributes and
  define forward(); calling the module calls forward."""
  training: bool
  _parameters: dict[str, Parameter | None]
  _buffers: dict[str, Tensor | None]
  _modules: dict[str, Module | None]
  _forward_pre_hooks: dict[int, tuple[Callable, bool]]     # handle id -> (hook, with_kwargs), in run order
  _forward_hooks: dict[int, tuple[Callable, bool]]
  _backward_hooks: dict[int, tuple[Callable, bool]]

  def __init__(self) -> None:
    for k, v in (("training", True), ("_parameters", {}), ("_buffers", {}), ("_non_persistent", set()), ("_modules", {}),
                 ("_forward_pre_hooks", {}), ("_forward_hooks", {}), ("_backward_hooks", {})):
      object.__setattr__(self, k, v)

  def forward(self, *args, **kwargs) -> Any: raise NotImplementedError(f"{type(self).__name__} defines no forward()")
  def __call__(self, *args, **kwargs) -> Any:
    """forward, with the forward pre-hooks before it (each may replace the arguments) and the forward hooks after it
    (each may replace the output), in registration order, as PyTorch runs them; with full backward hooks, the tensor
    arguments and outputs pass through taps that call them during backward()."""
    for hook, with_kwargs in list(self._forward_pre_hooks.values()):
      if with_kwargs:
        if (r := hook(self, args, kwargs)) is not None:
          if not (isinstance(r, tuple) and len(r) == 2):
            raise RuntimeError(f"a forward pre-hook with kwargs must return None or (args, kwargs), got {r!r}")
          args, kwargs = r
      elif (r := hook(self, args)) is not None: args = r if isinstance(r, tuple) else (r,)
    tapped = _BackwardTaps(self, args) if self._backward_hooks and Tensor.grad_enabled else None
    if tapped is not None: args = tapped.args
    out = self.forward(*args, **kwargs)
    for hook, with_kwargs in list(self._forward_hooks.values()):
      if (r := hook(self, args, kwargs, out) if with_kwargs else hook(self, args, out)) is not None: out = r
    return out if tapped is None else tapped.outputs(out)

  # --- hooks
  def _hook(self, table: dict[int, Any], hook: Callable, prepend: bool, with_kwargs: bool) -> RemovableHandle:
    if not callable(hook): raise TypeError(f"a hook must be callable, got {type(hook).__name__}")
    handle = RemovableHandle(table)
    table[handle.id] = (hook, with_kwargs)
    if prepend: table.update({k: table.pop(k) for k in [k for k in table if k != handle.id]})
    return handle

  def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False) -> RemovableHandle:
    """hook(module, args) -> None or new args (a tuple, or one value) before each forward; with_kwargs: hook(module,
    args, kwargs) -> None or (args, kwargs). prepend: run it before the hooks already there."""
    return self._hook(self._forward_pre_hooks, hook, prepend, with_kwargs)

  def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
    """hook(module, grad_input, grad_output) -> None or a new grad_input, during backward() once the gradients of the
    module's positional tensor arguments are known: a tuple entry per argument (None where it is no tensor needing a
    gradient) and per output. The arguments needing gradients must share a dtype."""
    return self._hook(self._backward_hooks, hook, prepend, False)

  def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False) -> RemovableHandle:
    """hook(module, args, output) -> None or a new output after each forward; with_kwargs: hook(module, args, kwargs,
    output)."""
    return self._hook(self._forward_hooks, hook, prepend, with_kwargs)

  # --- registration
  def _forget(self, name: str) -> None:
    self.__dict__.pop(name, None)
    for d in (self._parameters, self._buffers, self._modules): d.pop(name, None)
    self._non_persistent.discard(name)

  def __setattr__(self, name: str, value: Any) -> None:
    d = self.__dict__
    if isinstance(value, (Parameter, Module)):
      if "_modules" not in d: raise AttributeError(f"cannot assign {type(value).__name__} {name!r} before Module.__init__() call")
      self._forget(name)
      if isinstance(value, Parameter): self._parameters[name] = value
      else: self._modules[name] = value
      return
    for table, want in (("_parameters", "nn.Parameter"), ("_modules", "Module"), ("_buffers", "Tensor")):
      if name in d.get(table, ()):
        if value is not None and (table != "_buffers" or not isinstance(value, Tensor)):
          raise TypeError(f"cannot assign {type(value).__name__} as {table[1:-1]} {name!r} ({want} or None expected)")
        d[table][name] = value
        return
    object.__setattr__(self, name, value)

  def __getattr__(self, name: str) -> Any:
    d = self.__dict__
    for table in ("_parameters", "_buffers", "_modules"):
      if name in d.get(table, ()): return d[table][name]
    raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

  def __delattr__(self, name: str) -> None:
    if any(name in self.__dict__.get(t, ()) for t in ("_parameters", "_buffers", "_modules")): self._forget(name)
    else: object.__delattr__(self, name)

  def register_parameter(self, name: str, param: Parameter | None) -> None:
    if param is not None and not isinstance(param, Parameter):
      raise TypeError(f"cannot assign {type(param).__name__} as parameter {name!r} (nn.Parameter or None expected)")
    _check_name(self, name, "parameter")
    self._forget(name)
    self._parameters[name] = param

  def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
    """A tensor that is state but not a parameter (running statistics, masks): moved by to(), in state_dict if persistent."""
    if tensor is not None and not isinstance(tensor, Tensor):
      raise TypeError(f"buffer {name!r} must be a Tensor or None, got {type(tensor).__name__}")
    _check_name(self, name, "buffer")
    self._forget(name)
    self._buffers[name] = tensor
    if not persistent: self._non_persistent.add(name)

  def add_module(self, name: str, module: Module | None) -> None:
    if module is not None and not isinstance(module, Module): raise TypeError(f"{type(module).__name__} is not a Module subclass")
    _check_name(self, name, "module")
    self._forget(name)
    self._modules[name] = module
  register_module = add_module

  # --- traversal
  def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
    """This module and every submodule, depth first, each once (by identity) unless remove_duplicate=False."""
    if memo is None: memo = set()
    if remove_duplicate:
      if id(self) in memo: return
      memo.add(id(self))
    yield prefix, self
    for name, m in self._modules.items():
      if m is not None: yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

  def modules(self) -> Iterator[Module]: return (m for _, m in self.named_modules())
  def named_children(self) -> Iterator[tuple[str, Module]]:
    seen: set[int] = set()
    for n, m in self._modules.items():
      if m is not None and id(m) not in seen: seen.add(id(m)); yield n, m
  def children(self) -> Iterator[Module]: return (m for _, m in self.named_children())

  def _named(self, table: str, prefix: str, recurse: bool, remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
    seen: set[int] = set()
    for mp, m in (self.named_modules(prefix=prefix) if recurse else [(prefix, self)]):
      for k, v in getattr(m, table).items():
        if v is None or (remove_duplicate and id(v) in seen): continue
        seen.add(id(v))
        yield (f"{mp}.{k}" if mp else k), v

  def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
    return self._named("_parameters", prefix, recurse, remove_duplicate)
  def parameters(self, recurse: bool = True) -> Iterator[Parameter]: return (p for _, p in self.named_parameters(recurse=recurse))
  def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
    return self._named("_buffers", prefix, recurse, remove_duplicate)
  def buffers(self, recurse: bool = True) -> Iterator[Tensor]: return (b for _, b in self.named_buffers(recurse=recurse))

  # --- state
  def state_dict(self, destination: dict | None = None, prefix: str = "", keep_vars: bool = False) -> dict[str, Tensor]:
    """Parameters and persistent buffers by dotted name (detached unless keep_vars), submodules after their parent's own."""
    out: dict[str, Tensor] = OrderedDict() if destination is None else destination
    for k, v in [*self._parameters.items(), *((k, b) for k, b in self._buffers.items() if k not in self._non_persistent)]:
      if v is not None: out[prefix + k] = v if keep_vars else v.detach()
    for name, m in self._modules.items():
      if m is not None: m.state_dict(out, f"{prefix}{name}.", keep_vars)
    return out

  def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
    """Copy the values (Tensors or arrays; cast to each tensor's dtype, moved to its device) into the parameters and
    buffers in place. A shape mismatch is an error; so are missing and unexpected keys when strict."""
    own = self.state_dict(keep_vars=True)
    keys = IncompatibleKeys([k for k in own if k not in state_dict], [k for k in state_dict if k not in own])
    errors = [f"size mismatch for {k}: copying a value of shape {tuple(np.shape(v))} from the state dict, the shape in the "
              f"current model is {own[k].shape}" for k, v in state_dict.items() if k in own and tuple(np.shape(v)) != own[k].shape]
    if strict:
      if keys.unexpected_keys: errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(map(repr, keys.unexpected_keys)))
      if keys.missing_keys: errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(map(repr, keys.missing_keys)))
    if errors: raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
    with no_grad():
      for k, t in own.items():
        if k in state_dict:
          v = state_dict[k]
          t.assign(v.to(t.device) if isinstance(v, Tensor) else v)
    Tensor.realize_all(*own.values())
    return keys

  def train(self, mode: bool = True) -> Module:
    if not isinstance(mode, bool): raise ValueError(f"training mode is expected to be a bool, got {type(mode).__name__}")
    for m in self.modules(): object.__setattr__(m, "training", mode)
    return self

  def eval(self) -> Module: return self.train(False)

  def zero_grad(self, set_to_none: bool = True) -> None:
    for p in self.parameters():
      if set_to_none: p.grad = None
      elif p.grad is not None: p.grad = p.grad.zeros_like()

  def to(self, *args, **kwargs) -> Module:
    """to(device), to(dtype), to(device, dtype), to(tensor) (its device and dtype) or the keywords device=, dtype=:
    parameters, their gradients and buffers move in place (same objects); a dtype applies to floating-point ones."""
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    if kwargs: raise TypeError(f"Module.to() got unexpected keywords {sorted(kwargs)}")
    for a in args:
      if isinstance(a, Tensor): device, dtype = a.device, a.dtype
      elif isinstance(a, DType) or (isinstance(a, str) and getattr(dtypes, a, None) in dtypes.all): dtype = dtypes.get(a)
      else: device = a
    dt = dtypes.get(dtype)
    if dt is not None and not dt.is_float: raise TypeError(f"Module.to() only takes floating-point dtypes, got {dt.name}")
    dev = None if device is None else Device.canonicalize(device)
    def move(t: Tensor) -> Tensor:
      if dev is not None: t = t.to(dev)
      return t.cast(dt) if dt is not None and t.dtype.is_float else t
    return self._apply(move)

  def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
    for m in self.modules():
      for t in [*m._parameters.values(), *m._buffers.values()]:
        if t is None: continue
        with no_grad(): new = fn(t.detach()).contiguous().realize()
        t.lazydata = new.lazydata
        if t.grad is not None: t.grad = fn(t.grad)
    return self

  def extra_repr(self) -> str: return ""

  def __repr__(self) -> str:
    lines = [f"({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
    if not lines: return f"{type(self).__name__}({self.extra_repr()})"
    body = ([self.extra_repr()] if self.extra_repr() else []) + lines
    return f"{type(self).__name__}(\n  " + "\n  ".join(body) + "\n)"


class Sequential(Module):
  """Modules applied in order: Sequential(a, b, c) (named "0", "1", ...) or Sequential(OrderedDict(name=module, ...))."""
  def __init__(self, *args: Module | dict[str, Module]):
    super().__init__()
    items = args[0].items() if len(args) == 1 and isinstance(args[0], dict) else ((str(i), m) for i, m in enumerate(args))
    for name, m in items: self.add_module(name, m)   # type: ignore[arg-type]

  def forward(self, input: Any) -> Any:
    for m in self: input = m(input)
    return input

  def __getitem__(self, idx: int | slice) -> Any:
    items = list(self._modules.items())
    return Sequential(OrderedDict(items[idx])) if isinstance(idx, slice) else items[idx][1]   # type: ignore[arg-type]
  def __len__(self) -> int: return len(self._modules)
  def __iter__(self) -> Iterator[Module]: return iter(self._modules.values())   # type: ignore[arg-type]
  def append(self, module: Module) -> Sequential:
    self.add_module(str(len(self)), module)
    return self


class ModuleList(Module):
  """A list of modules that registers them (named "0", "1", ...)."""
  def __init__(self, modules: list[Module] | None = None):
    super().__init__()
    self.extend(modules or [])

  def __getitem__(self, idx: int | slice) -> Any:
    mods = list(self._modules.values())
    return ModuleList(mods[idx]) if isinstance(idx, slice) else mods[idx]   # type: ignore[arg-type]
  def __setitem__(self, idx: int, module: Module) -> None: self.add_module(str(range(len(self))[idx]), module)
  def __len__(self) -> int: return len(self._modules)
  def __iter__(self) -> Iterator[Module]: return iter(self._modules.values())   # type: ignore[arg-type]
  def append(self, module: Module) -> ModuleList:
    self.add_module(str(len(self)), module)
    return self
  def extend(self, modules) -> ModuleList:
    for m in modules: self.append(m)
    return self
