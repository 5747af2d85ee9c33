"""drivers/qcom/kgsl.py against the KGSL model (emu/kgsl): the ioctl sequence, context flags, chip ids, GPU objects,
user memory, submission and timestamps; the model's errnos for bad requests, and its CP's strictness."""
import ctypes, errno, mmap, os, time
import numpy as np
import pytest
from autogen import adreno
from drivers.hcq import open_device
from drivers.hcq.faults import DeviceFault
from autogen import msm_kgsl
from drivers.qcom import cp
from drivers.qcom.kgsl import KGSL, UnsupportedChip
from drivers.system.dma import host_address
from drivers.system.kernel import kernel_interface


@pytest.fixture
def kgsl():
  g = KGSL(kernel_interface(mock="kgsl"))
  yield g, g.k.model
  g.close()


def submit(g, words, ctx=None) -> int:
  """Submit `words` as one IB from a fresh GPU object on the context (default: the device's) -> its timestamp."""
  ib = g.alloc(len(words) * 4)
  ib.view.view[:len(words) * 4] = np.asarray(words, np.uint32).tobytes()
  return g.submit(ib.va, len(words) * 4, ctx)


def run(g, words, timeout_ms=10000) -> int:
  """Submit `words` as one IB from a fresh GPU object; wait for it to retire."""
  ts = submit(g, words)
  g.wait_timestamp(ts, timeout_ms)
  return ts


def test_open_sequence_and_the_compute_context_flags(kgsl):
  g, m = kgsl
  assert m.calls == ["DEVICE_GETPROPERTY", "DRAWCTXT_CREATE", "SETPROPERTY"]
  # PREAMBLE 0x10 | NO_GMEM_ALLOC 0x2 | NO_FAULT_TOLERANCE 0x200 | PWR_CONSTRAINT 0x800 | priority 8 << 12 | FINEGRAIN 2 << 25
  assert m.contexts[g.ctx].flags == 0x04008A12 and m.pwrlevel == msm_kgsl.KGSL_CONSTRAINT_PWR_MAX
  assert (g.chip_id, g.gpu_id, g.arch, g.generation) == (0x06030001, (6, 3, 0), "a630", 6)


@pytest.mark.parametrize("chip,arch", [(0x06030001, "a630"), (0x06040001, "a640"), (0x07030001, "a730")])
def test_a6xx_and_a7xx_chips_open(chip, arch):
  g = KGSL(kernel_interface(mock="kgsl", chip_id=chip))
  try: assert g.arch == arch
  finally: g.close()


@pytest.mark.parametrize("chip,name", [(0x05040001, "a540"), (0x08000000, "a800")])
def test_other_generations_are_refused_naming_the_chip(chip, name):
  k = kernel_interface(mock="kgsl", chip_id=chip)
  with pytest.raises(UnsupportedChip, match=f"{name}.*a6xx and a7xx only"): KGSL(k)
  assert k.model.fds == {} and k.model.contexts == {}     # nothing left open


def test_gpu_objects_are_mapped_at_their_gpu_address_and_free_unmaps_them(kgsl):
  g, m = kgsl
  a = g.alloc(5000)
  assert a.size == 0x2000 and a.va % 0x1000 == 0
  a.view.write32(0x1004, 0xCAFEF00D)
  assert bytes(m.translate(a.va + 0x1004, 4)) == (0xCAFEF00D).to_bytes(4, "little")   # the GPU sees it at the same address
  info = g.call(msm_kgsl.IOCTL_KGSL_GPUOBJ_INFO, msm_kgsl.kgsl_gpuobj_info(id=a.id))
  assert (info.gpuaddr, info.va_addr, info.size) == (a.va, a.va, 0x2000) and info.flags & msm_kgsl.KGSL_MEMFLAGS_USE_CPU_MAP
  g.free(a)
  assert a.id not in m.objects
  with pytest.raises(Exception, match="page fault"): m.translate(a.va, 4)
  with pytest.raises(OSError) as e: g.call(msm_kgsl.IOCTL_KGSL_GPUOBJ_FREE, msm_kgsl.kgsl_gpuobj_free(id=a.id))
  assert e.value.errno == errno.EINVAL


def test_submissions_retire_in_order_and_write_memory(kgsl):
  g, m = kgsl
  out = g.alloc(0x1000)
  t1 = run(g, cp.mem_write(out.va, 1, 2) + cp.always_on_to_mem(out.va + 8))
  t2 = run(g, cp.memcpy(out.va + 16, out.va, 2) + cp.wait_for_idle())
  assert (t1, t2, g.retired()) == (1, 2, 2)
  assert [out.view.read32(i) for i in (0, 4, 16, 20)] == [1, 2, 1, 2] and out.view.read64(8) > 0


def test_a_gpu_write_to_a_read_only_object_faults_the_context(kgsl):
  g, m = kgsl
  a = g.call(msm_kgsl.IOCTL_KGSL_GPUOBJ_ALLOC, msm_kgsl.kgsl_gpuobj_alloc(size=0x1000, flags=msm_kgsl.KGSL_MEMFLAGS_GPUREADONLY))
  ro = m.objects[a.id].gpuaddr
  with pytest.raises(OSError) as e: run(g, cp.mem_write(ro, 1))
  assert e.value.errno == errno.EDEADLK and "GPUREADONLY" in m.last_error and g.reset_status() == msm_kgsl.KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT


def test_user_memory_import_is_what_the_gpu_writes(kgsl):
  g, m = kgsl
  host = mmap.mmap(-1, 0x2000)
  va = host_address(host)
  obj = g.import_host(va, 0x2000)
  assert obj.va != va and m.calls[-1] == "MAP_USER_MEM"
  run(g, cp.mem_write(obj.va + 0x1000, 0x12345678))
  assert host[0x1000:0x1004] == (0x12345678).to_bytes(4, "little")
  g.free(obj)
  assert m.calls[-1] == "SHAREDMEM_FREE" and obj.va not in m.mapped
  with pytest.raises(ValueError, match="whole pages"): g.import_host(va + 8, 0x1000)


def test_bad_requests_get_the_kernels_errno(kgsl):
  g, m = kgsl
  def errno_of(request, arg):
    with pytest.raises(OSError) as e: m.ioctl(g.fd, request, arg)
    return e.value.errno
  assert errno_of(0xC0080999, msm_kgsl.kgsl_drawctxt_create()) == errno.ENOTTY          # no such ioctl
  wrong_size = msm_kgsl.IOCTL_KGSL_DRAWCTXT_CREATE & ~(0x3FFF << 16) | 12 << 16
  assert errno_of(wrong_size, (ctypes.c_uint8 * 12)()) == errno.ENOTTY           # the size is part of the number
  assert errno_of(msm_kgsl.IOCTL_KGSL_DRAWCTXT_CREATE, msm_kgsl.kgsl_drawctxt_create(flags=1 << 31)) == errno.EINVAL
  assert errno_of(msm_kgsl.IOCTL_KGSL_DRAWCTXT_DESTROY, msm_kgsl.kgsl_drawctxt_destroy(drawctxt_id=99)) == errno.EINVAL
  assert errno_of(msm_kgsl.IOCTL_KGSL_GPUOBJ_ALLOC, msm_kgsl.kgsl_gpuobj_alloc(size=4096, flags=msm_kgsl.KGSL_MEMFLAGS_SECURE)) == errno.EINVAL
  info = msm_kgsl.kgsl_devinfo()
  assert errno_of(msm_kgsl.IOCTL_KGSL_DEVICE_GETPROPERTY, msm_kgsl.kgsl_device_getproperty(
    type=msm_kgsl.KGSL_PROP_DEVICE_INFO, value=ctypes.addressof(info), sizebytes=32)) == errno.EINVAL
  assert errno_of(msm_kgsl.IOCTL_KGSL_DEVICE_GETPROPERTY, msm_kgsl.kgsl_device_getproperty(
    type=msm_kgsl.KGSL_PROP_DEVICE_INFO, value=0x10, sizebytes=40)) == errno.EFAULT     # not process memory
  assert errno_of(msm_kgsl.IOCTL_KGSL_MAP_USER_MEM, msm_kgsl.kgsl_map_user_mem(
    len=0x1000, hostptr=0x1000, memtype=msm_kgsl.KGSL_USER_MEM_TYPE_ADDR)) == errno.EFAULT
  cmd = msm_kgsl.kgsl_command_object(gpuaddr=0x1000, size=8, flags=msm_kgsl.KGSL_CMDLIST_IB)  # an IB outside GPU memory
  assert errno_of(msm_kgsl.IOCTL_KGSL_GPU_COMMAND, msm_kgsl.kgsl_gpu_command(
    cmdlist=ctypes.addressof(cmd), cmdsize=32, numcmds=1, context_id=g.ctx)) == errno.EINVAL
  assert errno_of(msm_kgsl.IOCTL_KGSL_GPU_COMMAND, msm_kgsl.kgsl_gpu_command(
    cmdlist=ctypes.addressof(cmd), cmdsize=24, numcmds=1, context_id=g.ctx)) == errno.EINVAL


def test_a_timestamp_wait_that_runs_out_is_etimedout_naming_the_stall(kgsl):
  g, m = kgsl
  flag = g.alloc(0x1000)
  ib = cp.wait_reg_mem(flag.va, 3)
  with pytest.raises(OSError) as e: run(g, ib, timeout_ms=200)
  assert e.value.errno == errno.ETIMEDOUT and "CP_WAIT_REG_MEM" in str(e.value)
  flag.view.write32(0, 3)                            # the CP goes on once the condition holds
  g.wait_timestamp(1, 10000)


def times_out(g, ts, ctx) -> bool:
  """Does the context still not retire `ts` after a short wait (what a stalled ringbuffer keeps from running)?"""
  with pytest.raises(OSError) as e: g.wait_timestamp(ts, 200, ctx)
  return e.value.errno == errno.ETIMEDOUT


def stalled(m, rb: int) -> None:
  """Wait until the model's CP stalls in a CP_WAIT_REG_MEM on ringbuffer `rb`."""
  deadline = time.monotonic() + 30
  while rb not in m.cp.stalls:
    assert time.monotonic() < deadline, f"ringbuffer {rb} never stalled: {m.cp.stalled_on}"
    time.sleep(1e-4)


def test_contexts_run_on_the_ringbuffer_of_their_priority_level(kgsl):
  g, m = kgsl
  ctxs = [g.create_context(p) for p in (1, 3, 4, 8, 15)]
  unset = g.call(msm_kgsl.IOCTL_KGSL_DRAWCTXT_CREATE, msm_kgsl.kgsl_drawctxt_create(flags=msm_kgsl.KGSL_CONTEXT_PREAMBLE)).drawctxt_id
  assert [m.contexts[c].rb for c in ctxs] == [0, 0, 1, 2, 3]      # priority // 4 (dispatch_get_rb)
  assert (m.contexts[unset].priority, m.contexts[unset].rb) == (8, 2)   # unset: KGSL_CONTEXT_PRIORITY_MED
  with pytest.raises(ValueError, match="1 .the highest. to 15"): g.create_context(0)
  g.call(msm_kgsl.IOCTL_KGSL_DRAWCTXT_DESTROY, msm_kgsl.kgsl_drawctxt_destroy(drawctxt_id=unset))


def test_a_higher_priority_context_preempts_a_lower_one_stalled_in_a_wait(kgsl):
  g, m = kgsl
  hi, out = g.create_context(4), g.alloc(0x1000)
  lo_ts = submit(g, cp.wait_reg_mem(out.va, 1) + cp.mem_write(out.va + 4, 7))          # ringbuffer 2 stalls
  g.wait_timestamp(submit(g, cp.mem_write(out.va + 8, 9), hi), 10000, hi)            # ringbuffer 1 runs meanwhile
  assert g.retired() == 0 and out.view.read32(8) == 9 and out.view.read32(4) == 0
  out.view.write32(0, 1)
  g.wait_timestamp(lo_ts, 10000)
  assert out.view.read32(4) == 7


def test_a_stalled_higher_ringbuffer_keeps_the_cp_from_lower_ones(kgsl):
  g, m = kgsl
  hi, out = g.create_context(1), g.alloc(0x1000)
  hi_ts = submit(g, cp.wait_reg_mem(out.va, 1), hi)
  stalled(m, 0)
  lo_ts = submit(g, cp.mem_write(out.va + 4, 7))
  assert times_out(g, lo_ts, None) and "ringbuffer 0: CP_WAIT_REG_MEM" in m.last_error and out.view.read32(4) == 0
  out.view.write32(0, 1)
  g.wait_timestamp(lo_ts, 10000)
  assert g.retired(hi) == hi_ts and out.view.read32(4) == 7


def test_contexts_of_one_priority_level_share_its_ringbuffer_in_submission_order(kgsl):
  g, m = kgsl
  other, out = g.create_context(9), g.alloc(0x1000)                   # 9 // 4: ringbuffer 2, as the device's 8
  submit(g, cp.wait_reg_mem(out.va, 1))
  ts = submit(g, cp.mem_write(out.va + 4, 7), other)
  assert times_out(g, ts, other) and out.view.read32(4) == 0
  out.view.write32(0, 1)
  g.wait_timestamp(ts, 10000, other)


def test_a_ringbuffer_style_context_is_preempted_only_between_its_submissions(kgsl):
  g, m = kgsl
  flags = msm_kgsl.KGSL_CONTEXT_PREAMBLE | msm_kgsl.KGSL_CONTEXT_NO_GMEM_ALLOC | msm_kgsl.KGSL_CONTEXT_PRIORITY(8) | \
    msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE(msm_kgsl.KGSL_CONTEXT_PREEMPT_STYLE_RINGBUFFER)
  lo = g.call(msm_kgsl.IOCTL_KGSL_DRAWCTXT_CREATE, msm_kgsl.kgsl_drawctxt_create(flags=flags)).drawctxt_id
  g.contexts.append(lo)
  hi, out = g.create_context(4), g.alloc(0x1000)
  submit(g, cp.wait_reg_mem(out.va, 1), lo)
  lo_after = submit(g, cp.mem_write(out.va + 4, 7), lo)
  stalled(m, 2)                                                       # lo's first IB runs (and stalls) before hi's work
  hi_ts = submit(g, cp.mem_write(out.va + 8, 9), hi)
  assert times_out(g, hi_ts, hi) and out.view.read32(8) == 0          # no preemption inside lo's IB
  out.view.write32(0, 1)
  g.wait_timestamp(hi_ts, 10000, hi)                                  # lo's next submission is preempted for it
  g.wait_timestamp(lo_after, 10000, lo)
  assert out.view.read32(8) == 9 and out.view.read32(4) == 7


@pytest.mark.parametrize("words,why", [
  ([0x70268000 ^ 1 << 15], "parity"),
  ([cp.pkt7(0x7E)[0]], "opcode 0x7e"),
  ([0x10000000], "type 1"),
  (cp.pkt4(0x1, 0), "not in the A6XX register domain"),
  (cp.pkt7(adreno.CP_EVENT_WRITE, adreno.CACHE_FLUSH_TS | 1 << 31), "not modelled"),
  (cp.reg_to_mem(adreno.REG_A6XX_CP_ALWAYS_ON_COUNTER_LO, 0x1000), "CP_ALWAYS_ON_COUNTER (CNT 2"),
  (cp.exec_cs(1, 1, 1), "CP_EXEC_CS before any CP_LOAD_STATE6 of the compute shader"),
  (cp.mem_write(0x10000, 1), "page fault"),
])
def test_the_cp_faults_the_context_on_what_it_does_not_execute(words, why):
  d = open_device("MOCK+QCOM")
  m = d.gpu.k.model
  try:
    ib = d.gpu.alloc(len(words) * 4)
    ib.view.view[:len(words) * 4] = np.asarray(words, np.uint32).tobytes()
    ts = d.gpu.submit(ib.va, len(words) * 4)
    with pytest.raises(OSError) as e: d.gpu.wait_timestamp(ts, 10000)
    assert e.value.errno == errno.EDEADLK and why in m.last_error
    with pytest.raises(DeviceFault, match="reset the compute queue.s context"): d.synchronize(timeout_ms=10000)
    with pytest.raises(OSError) as e: d.gpu.submit(ib.va, 4)
    assert e.value.errno == errno.EDEADLK
  finally: d.close()


def test_qcom_without_kgsl_says_what_it_needs():
  if os.path.exists("/dev/kgsl-3d0"): pytest.skip("this machine has KGSL")
  with pytest.raises(FileNotFoundError, match="no Adreno GPU under the KGSL driver"): open_device("QCOM")


@pytest.mark.hardware("qcom")
def test_real_adreno_signal_and_timestamp():
  d = open_device("QCOM")
  try:
    s = d.new_signal(0)
    d.compute_queue().timestamp(s).signal(s, 7).submit()
    s.wait(7, timeout_ms=10000)
    assert d.arch.startswith(("a6", "a7")) and s.timestamp > 0
  finally: d.close()
