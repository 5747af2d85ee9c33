"""drivers/nv against the RM/UVM model (emu/nvgpu): the RM object tree, class selection, memory, channels, and the
errors for a driver branch without our layouts and for a machine without the NVIDIA kernel module."""
import errno
import pytest
from autogen.nv import classes as cl, compute, copy, ctrl, rm
from drivers.nv.gpu import NVGPU
from drivers.nv.rm import RMClient, RMError, UnsupportedDriver
from drivers.system.kernel import OSKernel, kernel_interface
from emu.nvgpu.chips import CHIPS
from emu.nvgpu.rm import Channel, Memory
from emu.pci import DMAFault


@pytest.fixture
def gpu():
  k = kernel_interface(mock="nv")
  g = NVGPU(k)
  yield g, k.model
  g.close()


def tree(model, client):
  """The model's object tree under a client as nested (class, [children]) tuples."""
  walk = lambda o: (o.cls, sorted(walk(c) for c in o.children))
  return walk(model.rm.clients[client])


def test_hopper_object_tree_and_classes(gpu):
  g, model = gpu
  assert (g.gpfifo_class, g.compute_class, g.copy_class) == (0xc86f, 0xcbc0, 0xc8b5)   # HOPPER_*: reference section 0
  assert (g.rmc.version, g.arch, g.card.device_id, g.uuid) == ("580.142", "sm_90", CHIPS["GH100"].device_id, model.rm.uuid)
  assert g.gr == {"sm_version": 0x900, "gpcs": 8, "tpc_per_gpc": 9, "sm_per_tpc": 2, "max_warps_per_sm": 64}
  ch = g.create_channel("compute")
  g.schedule()
  t = tree(model, g.rmc.client)
  device = t[1][0]
  assert t[0] == rm.NV01_ROOT_CLIENT and device[0] == cl.NV01_DEVICE_0
  kinds = {c[0]: c for c in device[1]}
  assert kinds[cl.NV20_SUBDEVICE_0] == (cl.NV20_SUBDEVICE_0, [(cl.HOPPER_USERMODE_A, [])])
  assert {cl.NV01_MEMORY_VIRTUAL, cl.FERMI_VASPACE_A, cl.KEPLER_CHANNEL_GROUP_A, cl.NV1_MEMORY_USER, cl.NV01_MEMORY_SYSTEM} <= set(kinds)
  assert kinds[cl.KEPLER_CHANNEL_GROUP_A][1] == sorted([(cl.FERMI_CONTEXT_SHARE_A, []),
                                                       (cl.HOPPER_CHANNEL_GPFIFO_A, [(compute.HOPPER_COMPUTE_A, [])])])
  mch = model.rm.channels[ch.token]
  assert isinstance(mch, Channel) and (mch.gpfifo_va, mch.entries, mch.userd[1]) == (ch.ring.va, ch.entries, ch.userd_offset)
  assert mch.userd[0].handle == ch.ring.handle and model.uvm.ranges and any(r.channel == (g.rmc.client, ch.handle) for r in model.uvm.ranges)


@pytest.mark.parametrize("chip,classes", [("GA100", (0xc56f, 0xc6c0, 0xc6b5, "sm_80")), ("GA102", (0xc56f, 0xc7c0, 0xc7b5, "sm_86"))])
def test_ampere_class_selection(chip, classes):
  g = NVGPU(kernel_interface(mock="nv", chip=chip))
  try:
    assert (g.gpfifo_class, g.compute_class, g.copy_class, g.arch) == classes
    ch = g.create_channel("copy")
    assert ch.engine_class == classes[2]
  finally: g.close()


def test_memory_alloc_cpu_and_gpu_mapping_and_free(gpu):
  g, model = gpu
  vram, host, hidden = g.alloc(0x3000, cpu_access=True), g.alloc(0x2000, vram=False), g.alloc(0x1000)
  assert hidden.view is None and {vram.va % 0x1000, host.va % 0x1000} == {0}
  vram.view.write32(0x1004, 0x12345678)
  host.view.write_bytes(0x10, b"host")
  # the GPU sees what the CPU wrote, at the same address (GPU VA = CPU VA), through UVM's mappings
  assert bytes(model.uvm.translate(vram.va + 0x1004, 4)) == (0x12345678).to_bytes(4, "little")
  assert bytes(model.uvm.translate(host.va + 0x10, 4)) == b"host"
  model.uvm.translate(hidden.va, 0x1000)[:4] = b"gpu!"
  m = model.rm.clients[g.rmc.client].objects[vram.handle]
  assert isinstance(m, Memory) and m.vram and m.size == 0x3000
  used = dict(model.rm.vram_alloc.used)
  g.free(vram)
  with pytest.raises(DMAFault, match="not mapped"): model.uvm.translate(vram.va, 4)
  assert vram.handle not in model.rm.clients[g.rmc.client].objects and len(model.rm.vram_alloc.used) == len(used) - 1


def test_huge_allocation_uses_2mb_pages_and_failure_leaves_nothing(gpu):
  g, model = gpu
  before = (dict(model.rm.clients[g.rmc.client].objects), list(model.uvm.ranges), set(model.fds))
  with pytest.raises(RMError, match="NV_ERR_NO_MEMORY"): g.alloc(1 << 30)
  assert (dict(model.rm.clients[g.rmc.client].objects), list(model.uvm.ranges), set(model.fds)) == before
  big = g.alloc(16 << 20)
  assert big.va % (2 << 20) == 0 and big.size == 16 << 20


def test_doorbell_carries_the_work_submit_token(gpu):
  g, model = gpu
  a, b = g.create_channel("compute"), g.create_channel("copy")
  assert a.token != b.token
  with pytest.raises(ValueError, match="not scheduled"): g.ring_doorbell(a)
  g.schedule()
  g.ring_doorbell(b)
  g.ring_doorbell(b)
  assert (model.rm.channels[a.token].pending, model.rm.channels[b.token].pending) == (0, 2)
  with pytest.raises(ValueError, match="no channel has it"): g.doorbell.write32(cl.NVC361_NOTIFY_CHANNEL_PENDING, 0x7777)


def test_close_frees_everything():
  k = kernel_interface(mock="nv")
  g = NVGPU(k)
  g.alloc(0x1000, cpu_access=True)
  g.create_channel("compute")
  g.close()
  m = k.model
  assert (m.rm.clients, m.fds, m.uvm.ranges, m.rm.vram_alloc.used, m.rm.channels) == ({}, {}, [], {}, {})


def test_unknown_driver_branch_is_refused_by_name():
  k = kernel_interface(mock="nv", version="535.261.03")
  with pytest.raises(UnsupportedDriver, match=r"NVIDIA driver 535\.261\.03 is loaded.*branch 580 only"): RMClient(k)
  assert k.model.fds == {}     # nothing left open


def test_missing_nvidiactl_says_to_load_the_module():
  k = kernel_interface(mock="nv")
  k.exists = lambda path: path != "/dev/nvidiactl"
  with pytest.raises(FileNotFoundError, match=r"/dev/nvidiactl does not exist: the nvidia kernel module is not loaded.*modprobe nvidia"):
    NVGPU(k)
  k.exists = lambda path: path != "/dev/nvidia-uvm"
  with pytest.raises(FileNotFoundError, match=r"/dev/nvidia-uvm does not exist.*nvidia_uvm"): NVGPU(k)


def test_a_535_sized_escape_fails_the_size_check(gpu):
  g, _ = gpu
  import ctypes
  from drivers.nv.rm import nv_iowr
  buf = (ctypes.c_uint8 * 56)()    # NVOS46 of the 535 headers
  with pytest.raises(OSError) as e: g.k.ioctl(g.rmc.ctl, nv_iowr(rm.NV_ESC_RM_MAP_MEMORY_DMA, 56), buf)
  assert e.value.errno == errno.EINVAL and "the 580 layout is 64 bytes" in str(e.value)


@pytest.mark.hardware("nv")
def test_real_gpu_opens_and_maps_memory():
  g = NVGPU(OSKernel())
  try:
    assert g.rmc.branch == "580" and g.compute_class in (0xcbc0, 0xc7c0, 0xc6c0)
    m = g.alloc(0x2000, cpu_access=True)
    m.view.write32(0, 0xC0FFEE)
    assert m.view.read32(0) == 0xC0FFEE
    h = g.alloc_host(0x1000)
    h.view.write32(0, 7)
    g.free(h)
    g.create_channel("compute")
    g.schedule()
  finally: g.close()


def test_host_memory_is_pinned_as_an_os_descriptor(gpu):
  g, model = gpu
  host = g.alloc_host(0x1800)
  assert host.size == 0x2000 and model.space.holds(host.va, host.size)
  o = model.rm.clients[g.rmc.client].objects[host.handle]
  assert o.cls == cl.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR and o.parent.handle == g.device
  host.view.write64(0x1ff8, 0x0123456789abcdef)     # the CPU writes its own memory; the GPU reads it at the same address
  assert bytes(model.uvm.translate(host.va + 0x1ff8, 8)) == (0x0123456789abcdef).to_bytes(8, "little")
  g.free(host)
  assert host.handle not in model.rm.clients[g.rmc.client].objects and not model.space.holds(host.va, host.size)


def test_doorbell_page_is_mapped_write_only(gpu):
  g, _ = gpu
  with pytest.raises(ValueError, match="mapped write-only"): g.doorbell.read32(cl.NVC361_TIME_0)


def test_ioctl_sequence_is_the_reference_one():
  """reference nv_driver.md section 3, steps 1-20 (A: process init, B: per device, per channel), as the model saw it."""
  k = kernel_interface(mock="nv")
  g = NVGPU(k)
  opened = len(k.model.calls)
  g.create_channel("compute")
  g.schedule()
  alloc, control = (lambda c: f"RM_ALLOC {c:#x}"), (lambda c: f"RM_CONTROL {c:#x}")
  assert k.model.calls[:opened] == [
    "CHECK_VERSION_STR", alloc(rm.NV01_ROOT_CLIENT), "UVM_INITIALIZE", "CARD_INFO", "REGISTER_FD",
    control(ctrl.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2), alloc(cl.NV01_DEVICE_0), alloc(cl.NV20_SUBDEVICE_0),
    alloc(cl.NV01_MEMORY_VIRTUAL), control(ctrl.NV0080_CTRL_CMD_GPU_GET_CLASSLIST), control(ctrl.NV0080_CTRL_CMD_GPU_GET_CLASSLIST),
    alloc(cl.HOPPER_USERMODE_A), "REGISTER_FD", "RM_MAP_MEMORY", control(ctrl.NV2080_CTRL_CMD_GR_GET_INFO), alloc(cl.FERMI_VASPACE_A),
    control(ctrl.NV2080_CTRL_CMD_GPU_GET_GID_INFO), "UVM_REGISTER_GPU", "UVM_REGISTER_GPU_VASPACE",
    alloc(cl.KEPLER_CHANNEL_GROUP_A), alloc(cl.FERMI_CONTEXT_SHARE_A)]
  mapped = lambda cls: [alloc(cls), "REGISTER_FD", "RM_MAP_MEMORY", "UVM_CREATE_EXTERNAL_RANGE", "RM_MAP_MEMORY_DMA",
                        "UVM_MAP_EXTERNAL_ALLOCATION"]
  assert k.model.calls[opened:] == [
    *mapped(cl.NV1_MEMORY_USER), *mapped(cl.NV01_MEMORY_SYSTEM), alloc(cl.HOPPER_CHANNEL_GPFIFO_A), alloc(compute.HOPPER_COMPUTE_A),
    control(ctrl.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN), "UVM_REGISTER_CHANNEL", control(ctrl.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE)]
  assert copy.HOPPER_DMA_COPY_A == g.copy_class
  g.close()
