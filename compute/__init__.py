"""compute: a lazy tensor library that compiles fused kernels and runs them through the queue API (drivers.hcq).

  from compute import Tensor, dtypes, Device
  x = Tensor([[1.0, 2.0], [3.0, 4.0]], device="CPU", requires_grad=True)
  y = (x @ x.T).relu().sum()
  y.backward(); print(y.item(), x.grad.numpy())
"""
from compute.dtypes import dtypes, DType
from compute.runtime import Device
from compute.tensor import Tensor, no_grad
from compute import nn, optim

__all__ = ["Tensor", "dtypes", "DType", "Device", "no_grad", "nn", "optim"]
