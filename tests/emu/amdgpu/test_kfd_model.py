"""The KFD model answers ioctls as amdgpu.ko does (kfd_chardev.c, amdgpu_amdkfd_gpuvm.c): the errno of each refusal,
mapping rules, and memory faults reported with their type. Structures and numbers: kfd_ioctl.h (autogen.kfd)."""
import ctypes, errno, mmap
import numpy as np
import pytest

from autogen import kfd
from drivers.amd.device import AMDDevice
from drivers.amd.kfd import KFDIface, memory_fault
from drivers.hcq import DeviceFault
from drivers.system.kernel import kernel_interface
from emu.amdgpu.kfd import GPU_ID, RENDER_NODE, ENOTSUPP, memory_exception
from emu.amdgpu.mmu import FAULT_EXECUTE, FAULT_READ, FAULT_WRITE, Fault
from tests.drivers.amd.kernels import SRC

VRAM, W = kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM, kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
GTT = kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT


class Proc:
  """One process's /dev/kfd, with its VM acquired (unless `acquire=False`)."""
  def __init__(self, acquire: bool = True):
    self.k = kernel_interface("kfd")
    self.kfd, self.drm = self.k.open("/dev/kfd"), self.k.open(RENDER_NODE)
    if acquire: self.io(kfd.AMDKFD_IOC_ACQUIRE_VM, kfd.kfd_ioctl_acquire_vm_args(drm_fd=self.drm, gpu_id=GPU_ID))

  def io(self, request: int, arg):
    self.k.ioctl(self.kfd, request, arg)
    return arg

  def alloc(self, va: int, size: int = 0x4000, flags: int = VRAM | W) -> int:
    return self.io(kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, kfd.kfd_ioctl_alloc_memory_of_gpu_args(
      va_addr=va, size=size, gpu_id=GPU_ID, flags=flags)).handle

  def _devs(self, struct, handle: int, ids=(GPU_ID,), **kw):
    self._ids = (ctypes.c_uint32 * max(len(ids), 1))(*ids)
    return struct(handle=handle, device_ids_array_ptr=ctypes.addressof(self._ids), n_devices=len(ids), **kw)

  def map(self, handle: int, **kw) -> int:
    return self.io(kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU, self._devs(kfd.kfd_ioctl_map_memory_to_gpu_args, handle, **kw)).n_success

  def unmap(self, handle: int, **kw) -> int:
    return self.io(kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, self._devs(kfd.kfd_ioctl_unmap_memory_from_gpu_args, handle, **kw)).n_success

  def free(self, handle: int) -> None:
    self.io(kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU, kfd.kfd_ioctl_free_memory_of_gpu_args(handle=handle))

  def close(self) -> None:
    self.k.close(self.drm)
    self.k.close(self.kfd)


@pytest.fixture
def proc():
  p = Proc()
  yield p
  p.close()


def fails(code: int, fn, *args, **kw) -> str:
  with pytest.raises(OSError) as e: fn(*args, **kw)
  assert e.value.errno == code, e.value
  return str(e.value)


def test_freeing_a_mapped_bo_is_busy_until_it_is_unmapped(proc):
  h = proc.alloc(0x1000_0000_0000)
  assert proc.map(h) == 1
  assert "still mapped" in fails(errno.EBUSY, proc.free, h)
  assert h in proc.k.model.bos                                         # nothing was freed
  assert proc.unmap(h) == 1 and proc.unmap(h) == 1                     # unmapping an unmapped (attached) BO is a no-op
  proc.free(h)
  assert proc.k.model.bos == {}
  fails(errno.EINVAL, proc.free, h)                                    # the handle is gone


def test_unmapping_a_bo_never_mapped_is_einval(proc):
  h = proc.alloc(0x1000_0000_0000)
  assert "never mapped" in fails(errno.EINVAL, proc.unmap, h)
  proc.free(h)


def test_mapping_over_another_mapping_is_refused(proc):
  """amdgpu_vm_bo_map refuses a VA range that overlaps a mapping (EINVAL); allocations themselves are checked only
  against SVM ranges, so overlapping BOs can coexist while at most one of them is mapped."""
  a, b = proc.alloc(0x1000_0000_0000, 0x4000), proc.alloc(0x1000_0000_3000, 0x1000)
  c = proc.alloc(0x1000_0000_4000, 0x1000)                             # adjacent: no overlap
  assert proc.map(a) == 1 and proc.map(c) == 1
  assert "conflicts with the mapping [0x100000000000, 0x100000004000)" in fails(errno.EINVAL, proc.map, b)
  assert not proc.k.model.bos[b].mapped
  assert proc.unmap(a) == 1 and proc.map(b) == 1                       # once the first is unmapped, the range is free
  assert proc.map(b) == 1                                              # mapping a mapped BO again succeeds (nothing to do)


@pytest.mark.parametrize("nr", [0, kfd.AMDKFD_COMMAND_END, 0x80, 0xFF])
def test_ioctl_numbers_outside_the_kfd_range_are_enotty(proc, nr):
  assert "is not a KFD command" in fails(errno.ENOTTY, proc.io, 0xC0084B00 | nr, kfd.kfd_ioctl_get_version_args())


def test_known_but_unmodelled_ioctl_says_so(proc):
  assert "AMDKFD_IOC_SET_MEMORY_POLICY is not modelled" in fails(errno.EOPNOTSUPP, proc.io, kfd.AMDKFD_IOC_SET_MEMORY_POLICY,
                                                                  kfd.kfd_ioctl_set_memory_policy_args())


def test_only_the_ioctl_number_selects_the_command_and_the_caller_size_bounds_the_copy(proc):
  """kfd_ioctl uses _IOC_NR and its own command definition: a GET_VERSION with a 4-byte argument gets major_version
  only; an argument buffer smaller than the request's size is EFAULT."""
  short = ctypes.c_uint32 * 2
  buf = short(0xAAAA, 0xBBBB)
  proc.io((kfd.AMDKFD_IOC_GET_VERSION & ~(0x3FFF << 16)) | 4 << 16, buf)
  assert list(buf) == [kfd.KFD_IOCTL_MAJOR_VERSION, 0xBBBB]
  fails(errno.EFAULT, proc.io, kfd.AMDKFD_IOC_CREATE_QUEUE, kfd.kfd_ioctl_get_version_args())


def test_memory_ioctls_before_acquire_vm_are_enodev():
  p = Proc(acquire=False)
  try:
    assert "ACQUIRE_VM first" in fails(errno.ENODEV, p.alloc, 0x1000_0000_0000)
    fails(errno.EINVAL, p.io, kfd.AMDKFD_IOC_ACQUIRE_VM, kfd.kfd_ioctl_acquire_vm_args(drm_fd=p.kfd, gpu_id=GPU_ID))
  finally: p.close()


def test_acquire_vm_through_a_second_render_node_file_is_busy(proc):
  other = proc.k.open(RENDER_NODE)
  fails(errno.EBUSY, proc.io, kfd.AMDKFD_IOC_ACQUIRE_VM, kfd.kfd_ioctl_acquire_vm_args(drm_fd=other, gpu_id=GPU_ID))
  proc.io(kfd.AMDKFD_IOC_ACQUIRE_VM, kfd.kfd_ioctl_acquire_vm_args(drm_fd=proc.drm, gpu_id=GPU_ID))   # the same file again: fine


@pytest.mark.parametrize("fields, code", [
  (dict(gpu_id=GPU_ID + 1), errno.EINVAL), (dict(size=0), errno.EINVAL), (dict(flags=W), errno.EINVAL),
  (dict(flags=kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | W), errno.EINVAL),       # USERPTR without the user address
  (dict(size=1 << 40), errno.ENOMEM),
  (dict(flags=kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | W, mmap_offset=0x7000_0000_0000), errno.EFAULT),   # nothing mapped there
])
def test_bad_allocation_fields_get_the_kernels_errno(proc, fields, code):
  args = {**dict(va_addr=0x1000_0000_0000, size=0x1000, gpu_id=GPU_ID, flags=VRAM | W), **fields}
  fails(code, proc.io, kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, kfd.kfd_ioctl_alloc_memory_of_gpu_args(**args))
  assert proc.k.model.bos == {}


def test_userptr_pins_any_writable_memory_of_the_process(proc):
  """Not only what anon() handed out: an mmap of the process's own (numpy's, Python's) is pinned like get_user_pages
  would; read-only memory is EFAULT."""
  own = mmap.mmap(-1, 0x2000)
  addr = ctypes.addressof(ctypes.c_char.from_buffer(own))
  args = kfd.kfd_ioctl_alloc_memory_of_gpu_args(va_addr=0x1000_0000_0000, size=0x2000, gpu_id=GPU_ID,
                                                flags=kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | W, mmap_offset=addr)
  proc.io(kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
  bo = proc.k.model.bos[args.handle]
  own[5] = 42
  assert bo.kind == "userptr" and bo.view[5] == 42       # the BO is the process's pages
  proc.free(args.handle)
  ro = mmap.mmap(-1, 0x1000, prot=mmap.PROT_READ)
  ro_addr = int(np.frombuffer(ro, np.uint8).ctypes.data)
  fails(errno.EFAULT, proc.io, kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, kfd.kfd_ioctl_alloc_memory_of_gpu_args(
    va_addr=0x1000_0001_0000, size=0x1000, gpu_id=GPU_ID, flags=kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | W, mmap_offset=ro_addr))


@pytest.mark.parametrize("call, kw, code", [
  ("map", dict(ids=()), errno.EINVAL), ("map", dict(n_success=2), errno.EINVAL), ("map", dict(ids=(GPU_ID + 1,)), errno.EINVAL),
  ("map", dict(handle=GPU_ID << 32 | 999), errno.ENOMEM),              # an unknown handle: ENOMEM in MAP, as the kernel
  ("unmap", dict(handle=GPU_ID << 32 | 999), errno.EINVAL),
  ("map", dict(handle=(GPU_ID + 1) << 32 | 1), errno.EINVAL),          # a handle naming another GPU
  ("free", dict(handle=GPU_ID << 32 | 999), errno.EINVAL),
])
def test_bad_map_and_free_fields_get_the_kernels_errno(proc, call, kw, code):
  h = proc.alloc(0x1000_0000_0000)
  handle = kw.pop("handle", h)
  fails(code, getattr(proc, call), handle, **kw)
  assert not proc.k.model.bos[h].mapped


def create_queue(proc, **fields):
  ring, ctl = proc.alloc(0x1000_0000_0000, 0x1000, GTT | W), proc.alloc(0x1000_0001_0000, 0x1000, GTT | W)
  for h in (ring, ctl): proc.map(h)
  args = dict(ring_base_address=0x1000_0000_0000, ring_size=0x1000, gpu_id=GPU_ID, queue_type=kfd.KFD_IOC_QUEUE_TYPE_SDMA,
              queue_percentage=100, queue_priority=7, read_pointer_address=0x1000_0001_0000,
              write_pointer_address=0x1000_0001_0008)
  return proc.io(kfd.AMDKFD_IOC_CREATE_QUEUE, kfd.kfd_ioctl_create_queue_args(**{**args, **fields}))


@pytest.mark.parametrize("fields, code", [
  (dict(queue_percentage=101), errno.EINVAL), (dict(queue_priority=16), errno.EINVAL), (dict(ring_size=3000), errno.EINVAL),
  (dict(queue_type=9), ENOTSUPP), (dict(write_pointer_address=0), errno.EFAULT), (dict(gpu_id=7), errno.EINVAL),
])
def test_bad_queue_fields_get_the_kernels_errno(proc, fields, code):
  fails(code, create_queue, proc, **fields)
  assert proc.k.model.queues == {}


def test_a_small_ring_is_raised_to_the_kernels_minimum(proc):
  q = create_queue(proc, ring_size=256)
  assert q.ring_size == 1024 and proc.k.model.queues[q.queue_id].ring_size == 1024
  proc.io(kfd.AMDKFD_IOC_DESTROY_QUEUE, kfd.kfd_ioctl_destroy_queue_args(queue_id=q.queue_id))
  fails(errno.EINVAL, proc.io, kfd.AMDKFD_IOC_DESTROY_QUEUE, kfd.kfd_ioctl_destroy_queue_args(queue_id=q.queue_id))


def test_only_signal_events_can_be_set_by_the_cpu(proc):
  ev = lambda t: proc.io(kfd.AMDKFD_IOC_CREATE_EVENT, kfd.kfd_ioctl_create_event_args(event_type=t, auto_reset=1)).event_id
  sig, mem = ev(kfd.KFD_IOC_EVENT_SIGNAL), ev(kfd.KFD_IOC_EVENT_MEMORY)
  proc.io(kfd.AMDKFD_IOC_SET_EVENT, kfd.kfd_ioctl_set_event_args(event_id=sig))
  assert proc.k.model.events[sig].signaled
  fails(errno.EINVAL, proc.io, kfd.AMDKFD_IOC_SET_EVENT, kfd.kfd_ioctl_set_event_args(event_id=mem))
  fails(errno.EINVAL, proc.io, kfd.AMDKFD_IOC_SET_EVENT, kfd.kfd_ioctl_set_event_args(event_id=9999))
  assert not proc.k.model.events[mem].signaled


@pytest.mark.parametrize("fault, bits, words", [
  (Fault(0x1234_5678, False, "shader", "no valid entry"), (1, 0, 0, 0), "no valid page is mapped there"),
  (Fault(0x1234_5678, True, "shader", "not writeable", kind=FAULT_WRITE), (0, 1, 0, 0), "a write to a read-only page"),
  (Fault(0x1234_5678, False, "shader", "not executable", kind=FAULT_EXECUTE, execute=True), (0, 0, 1, 0), "instruction fetch"),
  (Fault(0x1234_5678, False, "shader", "not readable", kind=FAULT_READ), (0, 0, 0, 0), "it is not readable"),
  (None, (0, 0, 0, 1), "imprecise"),
])
def test_memory_exception_data_carries_the_fault_type(fault, bits, words):
  d = memory_exception(fault, 0x1234_5678)
  f = d.failure
  assert (d.gpu_id, d.va, (f.NotPresent, f.ReadOnly, f.NoExecute, f.imprecise)) == (GPU_ID, 0x1234_5000, bits)
  assert memory_fault(d).startswith("MMU fault at 0x12345000 (") and words in memory_fault(d)


@pytest.mark.parametrize("case", ["unmapped", "read-only"])
def test_shader_fault_reaches_the_driver_with_its_type(case):
  """A kernel that writes an unmapped page / a page mapped without WRITABLE: WAIT_EVENTS on the memory event says
  NotPresent / ReadOnly and the driver's DeviceFault says so in words."""
  d = AMDDevice("MOCKKFD+AMD", KFDIface(kernel_interface("kfd")))
  try:
    va = 0x1FFF_0000_0000
    if case == "read-only":
      a = kfd.kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va, size=0x1000, gpu_id=GPU_ID, flags=VRAM)
      d.iface._ioctl(kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, a)
      d.iface._map(a.handle)
    target = type("Raw", (), {"va": va, "device": d})()
    prg = d.program("add1", d.compiler.compile(SRC))
    args = prg.fill_kernargs([target])
    d.compute_queue().exec(prg, args, (1,), (64,)).signal(d.timeline, v := d.next_timeline()).submit()
    want = "no valid page is mapped there" if case == "unmapped" else "a write to a read-only page"
    with pytest.raises(DeviceFault, match=rf"MMU fault at {va:#x} \({want}\).*kernel add1"): d.timeline.wait(v, timeout_ms=10_000)
  finally: d.close()


def test_wait_events_on_a_null_array_is_efault(proc):
  fails(errno.EFAULT, proc.io, kfd.AMDKFD_IOC_WAIT_EVENTS, kfd.kfd_ioctl_wait_events_args(events_ptr=0, num_events=2))
