"""Differentiable primitives: each has a forward on lazy buffers and a backward that maps the output's
gradient to its inputs' gradients (also lazy). Everything else in Tensor is composed from these."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, TypeVar
from compute.lazy import LazyBuffer, Ops
if TYPE_CHECKING: from compute.core import TensorCore
T = TypeVar("T", bound="TensorCore")


class Function:
  freed = False

  def __init__(self, *inputs: TensorCore):
    self.needs_grad = [t.requires_grad for t in inputs]
    self.parents = inputs
    # the inputs' own nodes now: an input updated in place later gets a new node, and this graph keeps the old one
    self.parent_ctxs = tuple(t._ctx for t in inputs)

  def free(self) -> None:
    """After backward(), like PyTorch: a node that saved values drops them (and its inputs), and another backward()
    through it is an error; one that saved none (movement ops, add, sum, ...) stays usable."""
    if any(isinstance(v, LazyBuffer) for v in self.__dict__.values()):
      self.__dict__.clear()
      self.freed, self.parents, self.parent_ctxs, self.needs_grad = True, (), (), []

  def forward(self, *args, **kwargs) -> LazyBuffer: raise NotImplementedError
  def backward(self, g: LazyBuffer): raise NotImplementedError

  @classmethod
  def apply(cls, *inputs: T, **kwargs) -> T:
    """Forward on the inputs' lazy buffers. The result has the first input's tensor class (this layer sits below
    the tensor layer and names no Tensor), and records this function for backward while gradients are on."""
    tensor_type = type(inputs[0])
    fn = cls(*inputs)
    out = tensor_type._from_lazy(fn.forward(*(t.lazydata for t in inputs), **kwargs))
    if tensor_type.grad_enabled and any(fn.needs_grad):
      out.requires_grad, out._ctx = True, fn
    return out


def _c(like: LazyBuffer, v) -> LazyBuffer: return LazyBuffer.const(v, like.dtype, like.shape, like.device)


# --- unary
class Neg(Function):
  def forward(self, x): return x.alu(Ops.NEG)
  def backward(self, g): return g.alu(Ops.NEG)

class Recip(Function):
  def forward(self, x):
    self.y = x.alu(Ops.RECIP)
    return self.y
  def backward(self, g): return g.alu(Ops.NEG).alu(Ops.MUL, self.y.alu(Ops.MUL, self.y))

class Sqrt(Function):
  def forward(self, x):
    self.y = x.alu(Ops.SQRT)
    return self.y
  def backward(self, g): return g.alu(Ops.DIV, self.y.alu(Ops.MUL, _c(self.y, 2)))

class Exp(Function):
  def forward(self, x):
    self.y = x.alu(Ops.EXP)
    return self.y
  def backward(self, g): return g.alu(Ops.MUL, self.y)

class Exp2(Function):
  def forward(self, x):
    self.y = x.alu(Ops.EXP2)
    return self.y
  def backward(self, g): return g.alu(Ops.MUL, self.y.alu(Ops.MUL, _c(self.y, math.log(2))))

class Log(Function):
  def forward(self, x):
    self.x = x
    return x.alu(Ops.LOG)
  def backward(self, g): return g.alu(Ops.DIV, self.x)

class Log2(Function):
  def forward(self, x):
    self.x = x
    return x.alu(Ops.LOG2)
  def backward(self, g): return g.alu(Ops.DIV, self.x.alu(Ops.MUL, _c(self.x, math.log(2))))

class Sin(Function):
  def forward(self, x):
    self.x = x
    return x.alu(Ops.SIN)
  def backward(self, g): return g.alu(Ops.MUL, self.x.alu(Ops.COS))

class Cos(Function):
  def forward(self, x):
    self.x = x
    return x.alu(Ops.COS)
  def backward(self, g): return g.alu(Ops.MUL, self.x.alu(Ops.SIN).alu(Ops.NEG))

class Relu(Function):
  def forward(self, x):
    self.pos = _c(x, 0).alu(Ops.CMPLT, x)
    return self.pos.alu(Ops.WHERE, x, _c(x, 0))
  def backward(self, g): return self.pos.alu(Ops.WHERE, g, _c(g, 0))

class Sigmoid(Function):
  def forward(self, x):
    self.y = _c(x, 1).alu(Ops.DIV, _c(x, 1).alu(Ops.ADD, x.alu(Ops.NEG).alu(Ops.EXP)))
    return self.y
  def backward(self, g): return g.alu(Ops.MUL, self.y.alu(Ops.MUL, _c(self.y, 1).alu(Ops.SUB, self.y)))

class Cast(Function):
  def forward(self, x, dtype):
    self.in_dtype = x.dtype
    return x.cast(dtype)
  def backward(self, g): return g.cast(self.in_dtype)


# --- binary (inputs already broadcast and promoted)
class Add(Function):
  def forward(self, x, y): return x.alu(Ops.ADD, y)
  def backward(self, g): return g, g

class Sub(Function):
  def forward(self, x, y): return x.alu(Ops.SUB, y)
  def backward(self, g): return g, g.alu(Ops.NEG)

class Mul(Function):
  def forward(self, x, y):
    self.x, self.y = x, y
    return x.alu(Ops.MUL, y)
  def backward(self, g):
    return (g.alu(Ops.MUL, self.y) if self.needs_grad[0] else None), (g.alu(Ops.MUL, self.x) if self.needs_grad[1] else None)

class Div(Function):
  def forward(self, x, y):
    self.x, self.y = x, y
    return x.alu(Ops.DIV, y)
  def backward(self, g):
    gx = g.alu(Ops.DIV, self.y) if self.needs_grad[0] else None
    gy = g.alu(Ops.MUL, self.x).alu(Ops.DIV, self.y.alu(Ops.MUL, self.y)).alu(Ops.NEG) if self.needs_grad[1] else None
    return gx, gy

class Maximum(Function):
  """Ties split the gradient evenly between the two inputs."""
  def forward(self, x, y, op=Ops.MAX):
    self.x, self.y, self.op = x, y, op
    return x.alu(op, y)
  def backward(self, g):
    win = self.y.alu(Ops.CMPLT, self.x) if self.op is Ops.MAX else self.x.alu(Ops.CMPLT, self.y)
    tie = self.x.alu(Ops.CMPEQ, self.y)
    half = g.alu(Ops.MUL, _c(g, 0.5))
    gx = win.alu(Ops.WHERE, g, tie.alu(Ops.WHERE, half, _c(g, 0)))
    return gx, g.alu(Ops.SUB, gx)

class Where(Function):
  def forward(self, c, x, y):
    self.c = c
    return c.alu(Ops.WHERE, x, y)
  def backward(self, g):
    z = _c(g, 0)
    return None, self.c.alu(Ops.WHERE, g, z) if self.needs_grad[1] else None, self.c.alu(Ops.WHERE, z, g) if self.needs_grad[2] else None


# --- reductions
class Sum(Function):
  def forward(self, x, axes):
    self.shape = x.shape
    return x.reduce(Ops.ADD, axes)
  def backward(self, g): return g.expand(self.shape)

class Max(Function):
  """Gradient goes to the positions equal to the result, shared evenly among ties."""
  def forward(self, x, axes, op=Ops.MAX):
    self.x, self.axes = x, axes
    self.y = x.reduce(op, axes)
    return self.y
  def backward(self, g):
    hit = self.x.alu(Ops.CMPEQ, self.y.expand(self.x.shape)).cast(g.dtype)
    count = hit.reduce(Ops.ADD, self.axes)
    return hit.alu(Ops.MUL, g.alu(Ops.DIV, count).expand(self.x.shape))


# --- movement
class Reshape(Function):
  def forward(self, x, shape):
    self.shape = x.shape
    return x.reshape(shape)
  def backward(self, g): return g.reshape(self.shape)

class Permute(Function):
  def forward(self, x, order):
    self.inv = tuple(sorted(range(len(order)), key=lambda i: order[i]))
    return x.permute(order)
  def backward(self, g): return g.permute(self.inv)

class Expand(Function):
  def forward(self, x, shape):
    self.axes = tuple(i for i, (a, b) in enumerate(zip(x.shape, shape)) if a != b)
    return x.expand(shape)
  def backward(self, g): return g.reduce(Ops.ADD, self.axes)

class Pad(Function):
  def forward(self, x, pads):
    self.bounds = tuple((b, b + n) for n, (b, _) in zip(x.shape, pads))
    return x.pad(pads)
  def backward(self, g): return g.shrink(self.bounds)

class Shrink(Function):
  def forward(self, x, bounds):
    self.pads = tuple((s, n - e) for n, (s, e) in zip(x.shape, bounds))
    return x.shrink(bounds)
  def backward(self, g): return g.pad(self.pads)

class Flip(Function):
  def forward(self, x, axes):
    self.axes = axes
    return x.flip(axes)
  def backward(self, g): return g.flip(self.axes)

class Window(Function):
  """Sliding windows along one axis: dim n -> (o, k), element [o, j] = x[o*stride + j*dilation]."""
  def forward(self, x, axis, k, stride, dilation):
    self.n, self.args = x.shape[axis], (axis, k, stride, dilation)
    return x.window(axis, k, stride, dilation)

  def backward(self, g):
    """Each window position j sends its gradient back to x[o*stride + j*dilation]: a sum of k shifted copies."""
    axis, k, s, d = self.args
    o, n = g.shape[axis], self.n
    rest = g.shape[:axis] + g.shape[axis + 2:]
    span = (o - 1) * s + 1
    total = None
    for j in range(k):
      gj = g.shrink(tuple((j, j + 1) if i == axis + 1 else (0, m) for i, m in enumerate(g.shape))).reshape(rest[:axis] + (o,) + rest[axis:])
      if s > 1:   # put stride-1 zeros between consecutive windows
        gj = gj.reshape(rest[:axis] + (o, 1) + rest[axis:])
        gj = gj.pad(tuple((0, s - 1) if i == axis + 1 else (0, 0) for i in range(len(rest) + 2)))
        gj = gj.reshape(rest[:axis] + (o * s,) + rest[axis:])
        gj = gj.shrink(tuple((0, span) if i == axis else (0, m) for i, m in enumerate(gj.shape)))
      gj = gj.pad(tuple((j * d, n - j * d - span) if i == axis else (0, 0) for i in range(len(rest) + 1)))
      total = gj if total is None else total.alu(Ops.ADD, gj)
    return total


# --- realization / devices
class Contiguous(Function):
  def forward(self, x): return x.contiguous()
  def backward(self, g): return g

class Tap(Function):
  """The identity; its backward hands the gradient to `on_grad`, which returns the gradient to pass on (nn.Module's
  full backward hooks see and replace gradients through it)."""
  def forward(self, x, on_grad=None):
    self.on_grad = on_grad
    return x
  def backward(self, g): return self.on_grad(g)

class Copy(Function):
  def forward(self, x, device):
    self.device = x.device
    return x.copy_to(device)
  def backward(self, g): return g.copy_to(self.device)
