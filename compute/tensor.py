"""Tensor: the user-facing array, TensorCore (compute/core.py) with its mixins. Operations build a lazy graph;
realize()/numpy() schedule, compile and run it."""
from __future__ import annotations
from compute.core import TensorCore
from compute.movement import MovementOps
from compute.indexing import IndexingOps
from compute.reductions import ReduceOps
from compute.nnops import NNOps
from compute.sorting import SortingOps
from compute.torchops import TorchOps
from compute.inplace import InPlaceOps


class Tensor(InPlaceOps, TorchOps, SortingOps, NNOps, ReduceOps, IndexingOps, MovementOps):
  __slots__ = ()


class no_grad:
  """Context manager (and decorator) that builds no autograd graph, e.g. for evaluation."""
  def __enter__(self):
    self.prev, TensorCore.grad_enabled = TensorCore.grad_enabled, False
  def __exit__(self, *exc):
    TensorCore.grad_enabled = self.prev
  def __call__(self, fn):
    def wrapped(*a, **kw):
      with no_grad(): return fn(*a, **kw)
    return wrapped
