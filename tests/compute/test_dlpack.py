"""DLPack both ways against numpy's implementation of the protocol (torch.from_dlpack and torch tensors speak the same):
a tensor exports a host copy (kDLCPU), compute.from_dlpack copies any host producer onto a device. On the CPU device:
the protocol is host-side (device copies are the queue API's, tested in tests/compute/test_devices.py)."""
import numpy as np
import pytest
import compute
from compute import Tensor, dtypes


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "int8", "uint8", "bool"])
def test_tensor_to_numpy_through_dlpack(dtype):
  a = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
  t = Tensor(a)
  assert t.__dlpack_device__() == (1, 0)   # kDLCPU
  out = np.from_dlpack(t)
  assert out.dtype == a.dtype and out.shape == a.shape
  np.testing.assert_array_equal(out, a)


def test_view_exports_its_own_values():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  np.testing.assert_array_equal(np.from_dlpack(Tensor(a).T[1:]), a.T[1:])


def test_numpy_to_tensor_through_dlpack_and_back():
  a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)[:, ::2, 1:]   # strided: DLPack carries the strides
  t = compute.from_dlpack(a)
  assert t.dtype is dtypes.float64 and t.shape == (2, 2, 3) and t.device == compute.Device.DEFAULT
  np.testing.assert_array_equal(t.numpy(), a)
  a[...] = 0                                 # from_dlpack copied: the tensor keeps its values
  assert t.numpy().sum() > 0
  np.testing.assert_array_equal(np.from_dlpack(compute.from_dlpack(np.array([True, False]), device="CPU")), [True, False])


def test_dlpack_refusals_are_clear():
  t = Tensor([1.0, 2.0])
  with pytest.raises(BufferError, match="copy=None or True"): np.from_dlpack(t, copy=False)
  with pytest.raises(BufferError, match="bfloat16"): np.from_dlpack(t.cast(dtypes.bfloat16))
  with pytest.raises(BufferError, match="takes no stream"): t.__dlpack__(stream=1)
  class DeviceProducer:   # a producer whose memory is not the host's (a torch CUDA tensor refuses the same way)
    def __dlpack_device__(self): return (2, 0)   # kDLCUDA
    def __dlpack__(self, **kw): raise BufferError("the data is on a CUDA device")
  with pytest.raises(BufferError, match="from_dlpack reads host .* CUDA device; move the data to the CPU"): compute.from_dlpack(DeviceProducer())
  with pytest.raises(TypeError, match="complex128"): compute.from_dlpack(np.array([1 + 2j]))
