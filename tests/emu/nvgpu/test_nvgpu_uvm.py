"""The UVM model: registration order, external ranges and mappings, with UVM's status codes; an argument that is not
the 580 layout (UVM_MAP_EXTERNAL_ALLOCATION of the 535 headers, 1200 bytes) is refused instead of read past."""
import ctypes, errno
import pytest
from autogen.nv import classes as cl, rm, uvm
from drivers.nv.gpu import NVGPU
from drivers.nv.rm import RMClient, RMError
from drivers.system.kernel import kernel_interface
from emu.pci import DMAFault


@pytest.fixture
def gpu():
  g = NVGPU(kernel_interface(mock="nv"))
  yield g, g.k.model
  g.close()


def status(call) -> int:
  with pytest.raises(RMError) as e: call()
  return e.value.status


def test_calls_before_initialize_are_illegal():
  k = kernel_interface(mock="nv")
  fd = k.open("/dev/nvidia-uvm")
  p = uvm.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=0x100000, length=0x1000)
  k.ioctl(fd, uvm.UVM_CREATE_EXTERNAL_RANGE, p)
  assert p.rmStatus == rm.NV_ERR_ILLEGAL_ACTION
  k.close(fd)


def test_a_535_layout_is_refused():
  k = kernel_interface(mock="nv")
  r = RMClient(k)
  with pytest.raises(OSError) as e: k.ioctl(r.uvm, uvm.UVM_MAP_EXTERNAL_ALLOCATION, (ctypes.c_uint8 * 1200)())
  assert e.value.errno == errno.EINVAL and "9264 bytes" in str(e.value)
  r.close()


def test_registration_and_ranges(gpu):
  g, model = gpu
  r = g.rmc
  u = g._uuid()
  assert status(lambda: r.uvm_call(uvm.UVM_REGISTER_GPU, uvm.UVM_REGISTER_GPU_PARAMS(gpu_uuid=u, rmCtrlFd=-1))) == rm.NV_ERR_INVALID_DEVICE
  other = uvm.nv_uuid((ctypes.c_uint8 * 16)(*range(16)))
  assert status(lambda: r.uvm_call(uvm.UVM_REGISTER_GPU, uvm.UVM_REGISTER_GPU_PARAMS(gpu_uuid=other))) == rm.NV_ERR_GPU_UUID_NOT_FOUND
  base = g.k.reserve(0x10000, 0x1000)
  ext = lambda b, n: r.uvm_call(uvm.UVM_CREATE_EXTERNAL_RANGE, uvm.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=b, length=n))
  ext(base, 0x8000)
  assert status(lambda: ext(base + 0x4000, 0x8000)) == rm.NV_ERR_UVM_ADDRESS_IN_USE
  assert status(lambda: ext(base + 0x8800, 0x1000)) == rm.NV_ERR_INVALID_ADDRESS
  mem = r.alloc(g.device, 0, cl.NV1_MEMORY_USER, rm.NV_MEMORY_ALLOCATION_PARAMS(owner=r.client, size=0x4000))
  def map_ext(b, n, offset=0, handle=mem, uuid=u):
    p = uvm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS(base=b, length=n, offset=offset, rmCtrlFd=r.ctl, hClient=r.client, hMemory=handle,
                                               gpuAttributesCount=1)
    p.perGpuAttributes[0] = uvm.UvmGpuMappingAttributes(gpuUuid=uuid, gpuMappingType=uvm.UvmGpuMappingTypeReadWriteAtomic)
    return lambda: r.uvm_call(uvm.UVM_MAP_EXTERNAL_ALLOCATION, p)
  assert status(map_ext(base + 0x6000, 0x4000)) == rm.NV_ERR_INVALID_ADDRESS     # runs past the range
  assert status(map_ext(base, 0x4000, offset=0x1000)) == rm.NV_ERR_INVALID_LIMIT  # past the memory's end
  assert status(map_ext(base, 0x4000, handle=g.subdevice)) == rm.NV_ERR_INVALID_OBJECT_HANDLE
  assert status(map_ext(base, 0x4000, uuid=other)) == rm.NV_ERR_GPU_UUID_NOT_FOUND
  map_ext(base, 0x4000)()
  assert status(map_ext(base + 0x2000, 0x2000)) == rm.NV_ERR_UVM_ADDRESS_IN_USE
  model.uvm.translate(base + 0x3ffc, 4)[:] = b"\x01\x02\x03\x04"
  m = model.rm.clients[r.client].objects[mem]
  assert bytes(m.view[0x3ffc:0x4000]) == b"\x01\x02\x03\x04"
  # RM_FREE while UVM maps it: the memory stays until UVM_FREE (UVM holds its own reference)
  r.free(g.device, mem)
  assert bytes(model.uvm.translate(base + 0x3ffc, 4)) == b"\x01\x02\x03\x04"
  assert status(lambda: r.uvm_call(uvm.UVM_FREE, uvm.UVM_FREE_PARAMS(base=base, length=0x4000))) == rm.NV_ERR_INVALID_ADDRESS
  used = len(model.rm.vram_alloc.used)
  r.uvm_call(uvm.UVM_FREE, uvm.UVM_FREE_PARAMS(base=base, length=0x8000))
  assert len(model.rm.vram_alloc.used) == used - 1 and m.view is None
  with pytest.raises(DMAFault, match="not mapped"): model.uvm.translate(base, 4)


def test_va_space_must_be_externally_owned():
  k = kernel_interface(mock="nv")
  r = RMClient(k)
  dev = r.alloc(r.client, 0, cl.NV01_DEVICE_0, cl.NV0080_ALLOC_PARAMETERS())
  sub = r.alloc(dev, 0, cl.NV20_SUBDEVICE_0, cl.NV2080_ALLOC_PARAMETERS())
  vas = r.alloc(dev, 0, cl.FERMI_VASPACE_A, rm.NV_VASPACE_ALLOCATION_PARAMETERS(vaBase=0x1000, vaSize=1 << 40))
  u = uvm.nv_uuid((ctypes.c_uint8 * 16)(*k.model.rm.uuid))
  reg = lambda: r.uvm_call(uvm.UVM_REGISTER_GPU_VASPACE, uvm.UVM_REGISTER_GPU_VASPACE_PARAMS(gpuUuid=u, rmCtrlFd=r.ctl,
                                                                                               hClient=r.client, hVaSpace=vas))
  assert status(reg) == rm.NV_ERR_INVALID_DEVICE          # the GPU is not registered yet
  r.uvm_call(uvm.UVM_REGISTER_GPU, uvm.UVM_REGISTER_GPU_PARAMS(gpu_uuid=u, rmCtrlFd=-1))
  assert status(reg) == rm.NV_ERR_INVALID_ARGUMENT        # not IS_EXTERNALLY_OWNED
  bad_fd = lambda: r.uvm_call(uvm.UVM_REGISTER_GPU_VASPACE, uvm.UVM_REGISTER_GPU_VASPACE_PARAMS(gpuUuid=u, rmCtrlFd=r.uvm,
                                                                                                  hClient=r.client, hVaSpace=vas))
  assert status(bad_fd) == rm.NV_ERR_INVALID_ARGUMENT
  assert sub
  r.close()
  assert (k.model.uvm.gpus, k.model.rm.clients) == (set(), {})


def test_gpu_accesses_span_adjacent_mappings_and_holes_fault(gpu):
  g, model = gpu
  a, b = g.alloc(0x1000, cpu_access=True), g.alloc(0x1000, cpu_access=True)
  assert b.va == a.va + 0x1000
  model.uvm.write(a.va + 0xffc, b"01234567")        # an engine's store across the two buffers
  assert (a.view.read_bytes(0xffc, 4), b.view.read_bytes(0, 4)) == (b"0123", b"4567")
  assert model.uvm.read(a.va + 0xffe, 4) == b"2345"
  with pytest.raises(DMAFault): model.uvm.translate(a.va + 0xffe, 4)   # one view cannot span two mappings
  g.free(b)
  with pytest.raises(DMAFault, match="GPU MMU fault"): model.uvm.read(a.va + 0xffe, 4)
