"""The RM model is as strict as RM: each wrong call gets RM's status code (nvstatuscodes.h), and layouts other than
the 580 ones fail (the escape size check, the control paramsSize check)."""
import ctypes, errno
import pytest
from autogen.nv import classes as cl, compute, ctrl, rm
from drivers.nv.rm import RMClient, RMError, nv_iowr
from drivers.system.kernel import kernel_interface


@pytest.fixture
def rmc():
  k = kernel_interface(mock="nv")
  r = RMClient(k)
  r.device = r.alloc(r.client, 0, cl.NV01_DEVICE_0, cl.NV0080_ALLOC_PARAMETERS())
  r.subdevice = r.alloc(r.device, 0, cl.NV20_SUBDEVICE_0, cl.NV2080_ALLOC_PARAMETERS())
  yield r
  r.close()
  assert k.model.rm.clients == {}   # closing the control fd freed the client


def status(call) -> int:
  with pytest.raises(RMError) as e: call()
  return e.value.status


def test_classes_the_gpu_does_not_list_are_invalid_class(rmc):
  assert status(lambda: rmc.alloc(rmc.subdevice, 0, cl.AMPERE_USERMODE_A)) == rm.NV_ERR_INVALID_CLASS     # GH100 lists HOPPER_USERMODE_A
  assert status(lambda: rmc.alloc(rmc.device, 0, 0xcdc0)) == rm.NV_ERR_INVALID_CLASS                    # BLACKWELL_COMPUTE_A
  assert status(lambda: rmc.alloc(rmc.device, 0, 0x1234)) == rm.NV_ERR_INVALID_CLASS
  assert rmc.alloc(rmc.subdevice, 0, cl.HOPPER_USERMODE_A)


def test_handles_parents_and_clients(rmc):
  assert status(lambda: rmc.alloc(0xbad, 0, cl.NV20_SUBDEVICE_0)) == rm.NV_ERR_INVALID_OBJECT_PARENT        # no such parent
  assert status(lambda: rmc.alloc(rmc.client, 0, cl.NV20_SUBDEVICE_0)) == rm.NV_ERR_INVALID_OBJECT_PARENT   # subdevice under a client
  assert status(lambda: rmc.alloc(rmc.device, rmc.subdevice, cl.NV20_SUBDEVICE_0)) == rm.NV_ERR_INSERT_DUPLICATE_NAME
  assert status(lambda: rmc.alloc(rmc.device, 0, cl.NV20_SUBDEVICE_0, root=0x1234)) == rm.NV_ERR_INVALID_CLIENT
  assert status(lambda: rmc.free(rmc.device, 0x5555)) == rm.NV_ERR_INVALID_OBJECT_HANDLE
  # required parameters: a VA space needs NV_VASPACE_ALLOCATION_PARAMETERS
  assert status(lambda: rmc.alloc(rmc.device, 0, cl.FERMI_VASPACE_A)) == rm.NV_ERR_INVALID_ARGUMENT
  assert status(lambda: rmc.alloc(rmc.client, 0, cl.NV01_DEVICE_0)) == rm.NV_ERR_INVALID_ARGUMENT     # alloc_free.c: a device needs them
  assert status(lambda: rmc.alloc(rmc.client, 0, cl.NV01_DEVICE_0, cl.NV0080_ALLOC_PARAMETERS(deviceId=1))) == rm.NV_ERR_INVALID_ARGUMENT
  # a client-chosen handle is taken as given
  assert rmc.alloc(rmc.device, 0xc0de0001, cl.NV01_MEMORY_VIRTUAL, cl.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS(limit=0xffffffff)) == 0xc0de0001


def test_free_takes_the_subtree(rmc):
  user = rmc.alloc(rmc.subdevice, 0, cl.HOPPER_USERMODE_A)
  rmc.free(rmc.client, rmc.device)
  for h in (rmc.device, rmc.subdevice, user):
    assert status(lambda: rmc.free(rmc.client, h)) == rm.NV_ERR_INVALID_OBJECT_HANDLE


def test_controls(rmc):
  p = rmc.control(rmc.device, ctrl.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, ctrl.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS())
  assert p.numClasses > 10
  v = rmc.control(rmc.client, ctrl.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, ctrl.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS())
  assert v.driverVersionBuffer == b"580.142"
  # unknown command, a command the object's class does not implement, an unknown object
  assert status(lambda: rmc.control(rmc.device, 0x0080ffff, ctrl.NV2080_CTRL_PERF_BOOST_PARAMS())) == rm.NV_ERR_NOT_SUPPORTED
  assert status(lambda: rmc.control(rmc.device, ctrl.NV2080_CTRL_CMD_PERF_BOOST, ctrl.NV2080_CTRL_PERF_BOOST_PARAMS())) == rm.NV_ERR_NOT_SUPPORTED
  assert status(lambda: rmc.control(0x4444, ctrl.NV2080_CTRL_CMD_PERF_BOOST, ctrl.NV2080_CTRL_PERF_BOOST_PARAMS())) == \
    rm.NV_ERR_INVALID_OBJECT_HANDLE
  # GR info: an index the model does not know is refused, not answered with 0
  infos = (ctrl.NV2080_CTRL_GR_INFO * 1)(ctrl.NV2080_CTRL_GR_INFO(index=ctrl.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS))
  rmc.control(rmc.subdevice, ctrl.NV2080_CTRL_CMD_GR_GET_INFO, ctrl.NV2080_CTRL_GR_GET_INFO_PARAMS(grInfoListSize=1,
              grInfoList=ctypes.addressof(infos)))
  assert infos[0].data == 8
  infos[0].index = 0x33
  assert status(lambda: rmc.control(rmc.subdevice, ctrl.NV2080_CTRL_CMD_GR_GET_INFO, ctrl.NV2080_CTRL_GR_GET_INFO_PARAMS(
    grInfoListSize=1, grInfoList=ctypes.addressof(infos)))) == rm.NV_ERR_INVALID_ARGUMENT


@pytest.mark.parametrize("cmd,size535", [(ctrl.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, 776), (ctrl.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, 2)])
def test_535_sized_controls_are_invalid_param_struct(rmc, cmd, size535):
  tsg = rmc.alloc(rmc.device, 0, cl.KEPLER_CHANNEL_GROUP_A, rm.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(engineType=1))
  obj = rmc.client if cmd == ctrl.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 else tsg
  assert status(lambda: rmc.control(obj, cmd, (ctypes.c_uint8 * size535)())) == rm.NV_ERR_INVALID_PARAM_STRUCT


def test_escape_sizes_are_checked(rmc):
  with pytest.raises(OSError) as e: rmc.k.ioctl(rmc.ctl, nv_iowr(rm.NV_ESC_RM_CONTROL, 24), (ctypes.c_uint8 * 24)())
  assert e.value.errno == errno.EINVAL
  with pytest.raises(OSError) as e: rmc.k.ioctl(rmc.ctl, nv_iowr(rm.NV_ESC_RM_ALLOC, 40), (ctypes.c_uint8 * 40)())
  assert e.value.errno == errno.EINVAL and "NVOS21" in str(e.value)
  # NVOS21 (32 bytes) is the other accepted RM_ALLOC layout
  a = rm.NVOS21_PARAMETERS(hRoot=rmc.client, hObjectParent=rmc.subdevice, hClass=cl.HOPPER_USERMODE_A)
  rmc.k.ioctl(rmc.ctl, nv_iowr(rm.NV_ESC_RM_ALLOC, 32), a)
  assert a.status == rm.NV_OK and a.hObjectNew
  with pytest.raises(OSError) as e: rmc.k.ioctl(rmc.ctl, 0xc0104600 | 0x99, (ctypes.c_uint8 * 16)())
  assert e.value.errno == errno.EINVAL


def test_alloc_params_size_must_be_the_580_one(rmc):
  small = (ctypes.c_uint8 * 48)()   # NV_VASPACE_ALLOCATION_PARAMETERS of the 535 headers
  assert status(lambda: rmc.alloc(rmc.device, 0, cl.FERMI_VASPACE_A, small)) == rm.NV_ERR_INVALID_PARAM_STRUCT


def test_version_check_strict_and_relaxed(rmc):
  for cmd, client, ok in ((rm.NV_RM_API_VERSION_CMD_STRICT, b"580.142", True), (rm.NV_RM_API_VERSION_CMD_STRICT, b"580.105.08", False),
                          (rm.NV_RM_API_VERSION_CMD_RELAXED, b"580.105.08", True), (rm.NV_RM_API_VERSION_CMD_RELAXED, b"535.1", False)):
    a = rm.nv_ioctl_rm_api_version_t(cmd=cmd, versionString=client)
    if ok: rmc.escape(rmc.ctl, rm.NV_ESC_CHECK_VERSION_STR, a)
    else:
      with pytest.raises(OSError): rmc.escape(rmc.ctl, rm.NV_ESC_CHECK_VERSION_STR, a)
    assert a.reply == (rm.NV_RM_API_VERSION_REPLY_RECOGNIZED if ok else rm.NV_RM_API_VERSION_REPLY_UNRECOGNIZED)


def test_device_file_needs_register_fd_and_mmap_needs_map_memory(rmc):
  fd = rmc.k.open("/dev/nvidia0")
  a = rm.NVOS00_PARAMETERS(hRoot=rmc.client, hObjectOld=rmc.subdevice)
  with pytest.raises(OSError, match="RM_FREE is for /dev/nvidiactl only"): rmc.escape(fd, rm.NV_ESC_RM_FREE, a)
  with pytest.raises(OSError, match="REGISTER_FD is for /dev/nvidia0 only"):
    rmc.escape(rmc.ctl, rm.NV_ESC_REGISTER_FD, rm.nv_ioctl_register_fd_t(ctl_fd=rmc.ctl))
  host = rm.nv_ioctl_nvos02_parameters_with_fd(fd=-1)
  with pytest.raises(OSError, match="before NV_ESC_REGISTER_FD"): rmc.escape(fd, rm.NV_ESC_RM_ALLOC_MEMORY, host)
  with pytest.raises(OSError, match="not an open /dev/nvidiactl"): rmc.escape(fd, rm.NV_ESC_REGISTER_FD, rm.nv_ioctl_register_fd_t(ctl_fd=fd))
  rmc.escape(fd, rm.NV_ESC_REGISTER_FD, rm.nv_ioctl_register_fd_t(ctl_fd=rmc.ctl))
  with pytest.raises(OSError, match="already registered"): rmc.escape(fd, rm.NV_ESC_REGISTER_FD, rm.nv_ioctl_register_fd_t(ctl_fd=rmc.ctl))
  with pytest.raises(OSError, match="no NV_ESC_RM_MAP_MEMORY bound it"): rmc.k.mmap(fd, None, 0x1000, 0)
  rmc.k.close(fd)


def _memory(rmc, size=0x4000, cls=cl.NV1_MEMORY_USER):
  return rmc.alloc(rmc.device, 0, cls, rm.NV_MEMORY_ALLOCATION_PARAMS(owner=rmc.client, size=size, alignment=0x1000))


def test_map_memory_dma_fixed_offsets(rmc):
  virt = rmc.alloc(rmc.device, 0, cl.NV01_MEMORY_VIRTUAL, cl.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS(limit=0xffffffffff))
  mem = _memory(rmc)
  fixed = rm.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE << rm.NVOS46_FLAGS_DMA_OFFSET_FIXED[1]
  def dma(offset, length=0x4000, memory=mem, dma_handle=virt):
    p = rm.NVOS46_PARAMETERS(hClient=rmc.client, hDevice=rmc.device, hDma=dma_handle, hMemory=memory, length=length, flags=fixed,
                             dmaOffset=offset)
    rmc.escape(rmc.ctl, rm.NV_ESC_RM_MAP_MEMORY_DMA, p)
    return p
  assert dma(0x100000).status == rm.NV_OK
  assert dma(0x102000).status == rm.NV_ERR_INVALID_ADDRESS          # overlaps the first mapping
  assert dma(0x200800).status == rm.NV_ERR_INVALID_OFFSET           # not page-aligned
  assert dma(0x300000, length=0x8000).status == rm.NV_ERR_INVALID_LIMIT   # longer than the memory
  assert dma(0x300000, memory=rmc.subdevice).status == rm.NV_ERR_INVALID_OBJECT_HANDLE
  assert dma(0x300000, dma_handle=rmc.device).status == rm.NV_ERR_INVALID_OBJECT_HANDLE
  rmc.free(rmc.device, mem)      # RM unmaps freed memory: the range is free again
  assert dma(0x100000, memory=_memory(rmc)).status == rm.NV_OK


def test_channel_allocation_checks(rmc):
  tsg = rmc.alloc(rmc.device, 0, cl.KEPLER_CHANNEL_GROUP_A, rm.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(engineType=1))
  assert status(lambda: rmc.alloc(rmc.device, 0, cl.KEPLER_CHANNEL_GROUP_A, rm.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(engineType=77))) \
    == rm.NV_ERR_INVALID_ARGUMENT
  vas = rmc.alloc(rmc.device, 0, cl.FERMI_VASPACE_A, rm.NV_VASPACE_ALLOCATION_PARAMETERS(vaBase=0x1000, vaSize=1 << 40))
  assert status(lambda: rmc.alloc(tsg, 0, cl.FERMI_CONTEXT_SHARE_A, rm.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=tsg))) == \
    rm.NV_ERR_INVALID_OBJECT_HANDLE
  ctx = rmc.alloc(tsg, 0, cl.FERMI_CONTEXT_SHARE_A, rm.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=vas))
  ring, notifier = _memory(rmc, 0x2000), _memory(rmc, 0x1000, cl.NV01_MEMORY_SYSTEM)
  def channel(**kw):
    p = cl.NV_CHANNEL_ALLOC_PARAMS(hObjectError=notifier, hObjectBuffer=ring, gpFifoOffset=0x100000, gpFifoEntries=0x100,
                                   hContextShare=ctx)
    p.hUserdMemory[0], p.userdOffset[0] = ring, 0x1000
    for k, v in kw.items(): setattr(p, k, v)
    return lambda: rmc.alloc(tsg, 0, cl.HOPPER_CHANNEL_GPFIFO_A, p)
  assert status(channel(gpFifoEntries=0x180)) == rm.NV_ERR_INVALID_ARGUMENT     # not a power of two
  assert status(channel(hObjectError=ctx)) == rm.NV_ERR_INVALID_OBJECT_HANDLE  # not memory
  assert status(channel()) == rm.NV_ERR_INVALID_ADDRESS                         # the GPFIFO VA maps nothing
  assert status(lambda: rmc.alloc(tsg, 0, compute.AMPERE_COMPUTE_B)) == rm.NV_ERR_INVALID_CLASS
  assert status(lambda: rmc.alloc(tsg, 0, compute.HOPPER_COMPUTE_A)) == rm.NV_ERR_INVALID_OBJECT_PARENT   # engines go on a channel
  assert status(lambda: rmc.control(tsg, ctrl.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, ctrl.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1))) \
    == rm.NV_ERR_INVALID_STATE    # no channel to schedule


def test_os_descriptor_needs_process_pages(rmc):
  def alloc_memory(addr, size, cls=cl.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, handle=0xc0fe0001):
    fd = rmc.open_gpu_file(0)
    a = rm.nv_ioctl_nvos02_parameters_with_fd(fd=-1, params=rm.NVOS02_PARAMETERS(
      hRoot=rmc.client, hObjectParent=rmc.device, hObjectNew=handle, hClass=cls, pMemory=addr, limit=size - 1))
    rmc.escape(fd, rm.NV_ESC_RM_ALLOC_MEMORY, a)
    rmc.close_file(fd)
    return a.params.status
  not_ours = (ctypes.c_uint8 * 0x3000)()   # memory the model did not hand out: it cannot pin it
  assert alloc_memory(ctypes.addressof(not_ours) + 0xfff & ~0xfff, 0x1000) == rm.NV_ERR_INVALID_ADDRESS
  va, _ = rmc.k.anon(0x2000)
  assert alloc_memory(va + 0x10, 0x1000) == rm.NV_ERR_INVALID_ADDRESS        # not page-aligned
  assert alloc_memory(va, 0x1000, cls=cl.NV01_MEMORY_SYSTEM) == rm.NV_ERR_INVALID_CLASS
  assert alloc_memory(va, 0x2000) == rm.NV_OK
  assert alloc_memory(va, 0x2000) == rm.NV_ERR_INSERT_DUPLICATE_NAME
  # RM_ALLOC of a listed class the model does not build is refused as such, not crashed on
  assert status(lambda: rmc.alloc(rmc.device, 0, cl.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)) == rm.NV_ERR_NOT_SUPPORTED


def test_cpu_mapping_access_flags(rmc):
  mem = _memory(rmc, 0x2000)
  fd, _, ro = rmc.map_cpu(0, rmc.device, mem, 0x2000, None, rm.NVOS33_FLAGS_ACCESS_READ_ONLY)
  assert ro.read32(0) == 0
  with pytest.raises(TypeError): ro.write32(0, 1)
  rmc.close_file(fd)
  with pytest.raises(RMError) as e: rmc.map_cpu(0, rmc.device, mem, 0x3000, None)   # longer than the memory
  assert e.value.status == rm.NV_ERR_INVALID_LIMIT
  with pytest.raises(RMError) as e: rmc.map_cpu(0, rmc.device, mem, 0x1000, None, 3)
  assert e.value.status == rm.NV_ERR_INVALID_FLAGS
  assert rmc.fds == [rmc.ctl, rmc.uvm]     # a failed mapping closes the file it opened for it
