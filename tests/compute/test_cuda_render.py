"""compute's kernels rendered as CUDA C (codegen's "cuda" language), compiled by NVRTC for sm_80 and sm_90 (the NV
compiler: cubin + PTX), their PTX run on the PTX engine (tests/compute/nv_ptx.py) with no NV device: the whole schedule
of each graph, against numpy and against the CPU device's result on the same graph."""
import re
import numpy as np
import pytest
from compute import Tensor, dtypes
from compute.codegen import CUDA, Renderer
from compute.schedule import create_schedule, Kernel
from drivers.nv import image
from drivers.nv.compiler import NVCompiler
from tests.compute.nv_ptx import PtxSchedule, assert_close
from tests.emu.nvgpu.ptx_helpers import needs_nvrtc

pytestmark = needs_nvrtc
rng = np.random.default_rng(0)
A, B = rng.standard_normal((6, 10)).astype(np.float32), rng.standard_normal((6, 10)).astype(np.float32)
M, N = rng.standard_normal((13, 37)).astype(np.float32), rng.standard_normal((37, 70)).astype(np.float32)
I, J = rng.integers(-50, 50, 24).astype(np.int32), rng.integers(-7, 8, 24).astype(np.int32)
P = np.abs(A) + 0.5
T = lambda x: Tensor(x)


def _sm(x, ax=-1):
  e = np.exp(x - x.max(ax, keepdims=True))
  return e / e.sum(ax, keepdims=True)


# name: (graph, numpy reference, tolerance vs numpy)
CASES = {
  "elementwise_chain": (lambda: ((T(A) * T(B) + 1.5) / (T(P) + 2)).relu() - T(A).neg(), lambda: np.maximum((A * B + 1.5) / (P + 2), 0) + A, 1e-6),
  "transcendentals": (lambda: T(A).exp() + T(P).log() + T(A).sin() * T(B).cos() + T(P).sqrt() + T(A).exp2() + T(P).log2(),
                      lambda: np.exp(A) + np.log(P) + np.sin(A) * np.cos(B) + np.sqrt(P) + np.exp2(A) + np.log2(P), 1e-5),
  "sigmoid_tanh_gelu": (lambda: T(A).sigmoid() + T(B).tanh() + T(A).gelu(),
                        lambda: 1 / (1 + np.exp(-A)) + np.tanh(B) + 0.5 * A * (1 + np.tanh(np.sqrt(2 / np.pi) * (A + 0.044715 * A ** 3))), 1e-5),
  "where_max_min_clip": (lambda: T(A).maximum(T(B)).where(T(A) > T(B), T(A).minimum(0.25)).clip(-0.5, 1.0),
                         lambda: np.clip(np.where(A > B, np.maximum(A, B), np.minimum(A, 0.25)), -0.5, 1.0), 0),
  "compares_to_bool": (lambda: (T(A) < T(B)) | (T(A) == T(A)) & (T(B) != 0), lambda: (A < B) | (A == A) & (B != 0), 0),
  "sum_axis0_axis1_all": (lambda: T(A).sum(0).reshape(1, 10) + T(A).sum(1).reshape(6, 1) + T(A).sum(),
                          lambda: A.sum(0)[None] + A.sum(1)[:, None] + A.sum(), 1e-5),
  "max_min_mean": (lambda: T(A).amax(1) - T(A).amin(1) + T(A).mean(1), lambda: A.max(1) - A.min(1) + A.mean(1), 1e-6),
  "softmax": (lambda: T(A).softmax(), lambda: _sm(A), 1e-6),
  "argmax": (lambda: T(A).argmax(1), lambda: A.argmax(1), 0),
  "matmul": (lambda: T(M) @ T(N), lambda: M @ N, 1e-5),
  "matmul_bias_relu": (lambda: (T(M) @ T(N) + T(N[0])).relu(), lambda: np.maximum(M @ N + N[0], 0), 1e-5),
  "conv2d": (lambda: T(A[:2].reshape(1, 2, 2, 5)).conv2d(T(B[:4].reshape(2, 2, 2, 5)[:, :, :2, :3]), padding=1),
             None, 0),
  "strided_flipped_slice": (lambda: T(M)[::-2, 1::3] * 2, lambda: M[::-2, 1::3] * 2, 0),
  "int32_floor_div_mod": (lambda: T(I) // T(J) + T(I) % T(J) * 3 - (T(I) & 7) + (T(I) | T(J)) - (T(I) ^ T(J)),
                          lambda: np.where(J == 0, 0, I // np.where(J == 0, 1, J)) + np.where(J == 0, 0, I % np.where(J == 0, 1, J)) * 3
                          - (I & 7) + (I | J) - (I ^ J), 0),
  "int64_uint8_int8": (lambda: T(I).cast(dtypes.int64) * 100000000 + T(I.astype(np.uint8)).cast(dtypes.int64)
                       + T(J.astype(np.int8)).cast(dtypes.int64) // 2,
                       lambda: I.astype(np.int64) * 100000000 + I.astype(np.uint8) + J.astype(np.int8) // 2, 0),
  "uint32_wraps": (lambda: T(I.astype(np.uint32)) * 3000000000 + 7, lambda: I.astype(np.uint32) * np.uint32(3000000000) + np.uint32(7), 0),
  "half_elementwise": (lambda: (T(A).half() * 3 + T(B).half()).exp() / 2,
                       lambda: (np.exp(A.astype(np.float16) * np.float16(3) + B.astype(np.float16)) / np.float16(2)), 2e-3),
  "half_sum_max": (lambda: T(M).half().sum(1) + T(M).half().amax(1), lambda: M.astype(np.float16).sum(1, dtype=np.float32) + M.max(1), 2e-2),
  "half_matmul": (lambda: T(M).half() @ T(N).half(), lambda: M.astype(np.float16).astype(np.float32) @ N.astype(np.float16), 2e-2),
  "bfloat16_elementwise": (lambda: (T(A).cast(dtypes.bfloat16) * 3 + T(B).cast(dtypes.bfloat16)).sqrt(),
                           lambda: np.sqrt(A * 3 + B), 2e-2),
  "bfloat16_matmul": (lambda: T(M).cast(dtypes.bfloat16) @ T(N).cast(dtypes.bfloat16), lambda: M @ N, 5e-2),
  "casts_between_dtypes": (lambda: T(A * 40).cast(dtypes.int32).cast(dtypes.float16).cast(dtypes.bfloat16).cast(dtypes.float64)
                           + T(A).cast(dtypes.bool).cast(dtypes.float64) + T(P * 60).cast(dtypes.uint8).cast(dtypes.float64),
                           lambda: (A * 40).astype(np.int32).astype(np.float64) + (A != 0) + (P * 60).astype(np.uint8), 0),
  "float64_transcendentals": (lambda: T(A.astype(np.float64)).exp() + T(P.astype(np.float64)).log() + T(A.astype(np.float64)).sin(),
                              lambda: np.exp(A.astype(np.float64)) + np.log(P.astype(np.float64)) + np.sin(A.astype(np.float64)), 1e-12),
  "arange_half_and_int": (lambda: Tensor.arange(40).cast(dtypes.float16) * 0.5 + Tensor.arange(40, dtype=dtypes.float16),
                          lambda: np.arange(40) * 0.5 + np.arange(40), 0),
}


def _target(case: str) -> Tensor:
  t = CASES[case][0]()
  return t if t.lazydata is t.lazydata.base else t.contiguous()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", list(CASES))
def test_cuda_kernels_on_the_ptx_engine_match_numpy_and_the_cpu_device(case, arch):
  t = _target(case)
  items = create_schedule([t.lazydata.base])
  run = PtxSchedule(arch)
  run.run(items)
  got = run.read(t.lazydata.base).reshape(t.shape)
  cpu = t.numpy()                                     # the same graph realized on the CPU device
  assert_close(got, cpu, t.dtype, f"{case}: PTX engine ({arch}) vs the CPU device")
  if (ref := CASES[case][1]) is None: return
  with np.errstate(invalid="ignore"):
    want = np.asarray(ref())
    if not t.dtype.is_float or CASES[case][2] == 0: np.testing.assert_array_equal(got.astype(want.dtype), want)
    else: np.testing.assert_allclose(got, want, rtol=CASES[case][2], atol=CASES[case][2], equal_nan=True)
  assert run.kernels == sum(isinstance(k, Kernel) and k.bufs[0].size > 0 for k in items) >= 1


def test_the_source_is_a_cuda_kernel_with_the_launch_bounds_of_its_local_size():
  t = (Tensor(A).half() * 2).sum(1) + Tensor(B).cast(dtypes.bfloat16).amax(1)
  ks = [k for k in create_schedule([t.lazydata.base]) if isinstance(k, Kernel)]
  for k in ks:
    spec = Renderer(CUDA).render(k)
    assert spec.src.startswith("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n")
    assert f'extern "C" __global__ void __launch_bounds__({spec.local_size[0]}) {spec.name}(' in spec.src
    assert "blockIdx.x" in spec.src and "threadIdx.x" in spec.src and "__builtin_amdgcn" not in spec.src
    assert re.search(r"\b(half|__nv_bfloat16) \*__restrict__ d0\b", spec.src)
    _, ptx = image.unpack(NVCompiler("sm_90").compile(spec.src))
    assert f".maxntid {spec.local_size[0]}, 1, 1" in ptx and f".entry {spec.name}(" in ptx
