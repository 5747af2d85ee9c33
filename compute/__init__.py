"""compute: a lazy tensor library that compiles fused kernels and runs them through the queue API (drivers.hcq).

  from compute import Tensor, dtypes, Device
  x = Tensor([[1.0, 2.0], [3.0, 4.0]], device="CPU", requires_grad=True)
  y = (x @ x.T).relu().sum()
  y.backward(); print(y.item(), x.grad.numpy())

Modules import only modules of lower layers (tests/compute/test_imports.py checks that the imports form a DAG):
  dtypes, shape      element types; views (index -> memory offset and validity)
  lazy               the lazy graph of LazyBuffers and its Ops
  schedule           lazy graph -> kernels (fusion) and copies
  codegen            kernel -> C / OpenCL C / CUDA C source and launch size
  runtime            devices, buffers, compiling and running a schedule through drivers.hcq
  function           differentiable primitives on lazy buffers (apply() returns its first input's tensor class)
  movement, indexing, nnops, sorting, inplace  Tensor's mixins, each on the one before: views, indexing, ops, sort, in-place
  tensor             Tensor (on all of the above), no_grad
  nn.functional, nn.module, optim.lr_scheduler  torch.nn.functional's functions; Module, Parameter, containers; lr schedules
  nn.layers          the layers (Linear, Conv2d, Embedding, LayerNorm, ...)
  nn, optim, jit     layers and optimizers; capture and replay (on tensor and the queue API's Graph)
  distributed.launch, distributed.ring  mpirun for ranks on this host (run: never outliving them); the collectives' data plane (drivers.rdma)
  distributed.group  a rank's devices, its links to the other ranks and their bootstrap
  distributed        collectives between mpirun's ranks, shaped like torch.distributed (import it: it needs mpi4py)
"""
from compute.dtypes import dtypes, DType
from compute.runtime import Device
from compute.tensor import Tensor, no_grad
from compute import nn, optim
from compute.jit import jit, JitFunction
from compute.runtime import CaptureError

einsum = Tensor.einsum
from_dlpack = Tensor.from_dlpack
__all__ = ["Tensor", "dtypes", "DType", "Device", "no_grad", "nn", "optim", "einsum", "from_dlpack", "jit", "JitFunction", "CaptureError"]
