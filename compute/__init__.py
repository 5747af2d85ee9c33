"""compute: a lazy tensor library that compiles fused kernels and runs them through the queue API (drivers.hcq).

  from compute import Tensor, dtypes, Device
  x = Tensor([[1.0, 2.0], [3.0, 4.0]], device="CPU", requires_grad=True)
  y = (x @ x.T).relu().sum()
  y.backward(); print(y.item(), x.grad.numpy())

Modules import only modules of lower layers (tests/compute/test_imports.py checks that the imports form a DAG):
  dtypes, shape, args  element types; views (index -> memory offset and validity); PyTorch's argument spellings
  lazy               the lazy graph of LazyBuffers and its Ops
  schedule           lazy graph -> kernels (fusion) and copies
  codegen            kernel -> source in a Dialect (C, OpenCL C, CUDA C: one class each) and launch size
  nir                the NIR Dialect: kernel -> NIR that the device's compiler builds through mesa's builders (ir3)
  runtime            devices, buffers, compiling and running a schedule through drivers.hcq
  function           differentiable primitives on lazy buffers (apply() returns its first input's tensor class)
  core               TensorCore: a tensor's state, autograd, elementwise ops, views; it declares what the mixins share
  movement, indexing, reductions, nnops, sorting, torchops, inplace  Tensor's mixins, siblings on TensorCore (none imports another)
  tensor             Tensor (on all of the above), no_grad
  nn.functional, nn.module, optim.lr_scheduler  torch.nn.functional's functions; Module, Parameter, containers; lr schedules
  nn.layers          the layers (Linear, Conv2d, Embedding, LayerNorm, ...)
  nn, optim, jit     layers and optimizers; capture and replay (on tensor and the queue API's Graph)
  distributed.launch, distributed.ring, distributed.fold  mpirun for ranks on this host; the data plane (drivers.rdma); landed chunks' device work
  distributed.group  a rank's devices, its links to the other ranks and their bootstrap
  distributed        collectives between mpirun's ranks, shaped like torch.distributed (import it: it needs mpi4py)
"""
from compute.dtypes import dtypes, DType
from compute.runtime import Device
from compute.tensor import Tensor, no_grad
from compute.core import where
from compute import nn, optim
from compute.jit import jit, JitFunction
from compute.runtime import CaptureError

# torch.<name>(tensor, ...): the Tensor factories and methods of the same name (compute.max(t, 1), ...); compute.where is
# torch.where(cond, x, y), Tensor.where(cond, y) PyTorch's x.where(cond, y)
FUNCTIONS = tuple("""zeros ones full arange eye rand randn linspace logspace manual_seed zeros_like ones_like full_like rand_like
  randn_like cat stack maximum minimum chunk split unbind tensor_split narrow movedim moveaxis flip roll tril triu diag
  diagonal trace outer matmul bmm baddbmm addmm cdist einsum lerp abs sign floor ceil round trunc frac exp log sqrt sin cos tanh
  sigmoid isnan isinf isfinite nan_to_num clamp clip clamp_min clamp_max log1p expm1 erf atan atan2 arctan2 hypot sum prod mean
  var std var_mean std_mean amax amin max min argmax argmin any all norm count_nonzero logsumexp softmax log_softmax cumsum
  cumprod sort argsort topk kthvalue median mode unique allclose isclose nonzero bincount histc searchsorted repeat_interleave
  gather scatter index_select masked_fill reshape flatten permute transpose squeeze unsqueeze numel""".split())
for _name in FUNCTIONS: globals()[_name] = getattr(Tensor, _name)
from_dlpack = Tensor.from_dlpack
__all__ = ["Tensor", "dtypes", "DType", "Device", "no_grad", "nn", "optim", "jit", "JitFunction", "CaptureError", "from_dlpack", "where", *FUNCTIONS]
