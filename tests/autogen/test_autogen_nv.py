"""NVIDIA bindings (autogen/nv): the 580 layouts and numbers the driver relies on, against the facts measured by
compiling the real headers (reference nv_driver.md sections 2, 4, 6, 10, 11); regeneration from the pinned trees."""
import ctypes, difflib, importlib.util, pathlib
from dataclasses import replace
import pytest
import autogen
from autogen.__main__ import GENERATORS
from autogen.gen import headers, nvheaders
from autogen.gen.nvmodule import NVModule
from autogen.nv import classes, compute, copy, ctrl, qmd, rm, uvm

NV_GENERATORS = sorted(n for n, g in GENERATORS.items() if isinstance(g, NVModule))
AUTOGEN = pathlib.Path(autogen.__file__).parent
OLD_TAG = "535.261.03"

# section 10/11: struct -> (535 size, 580 size); the 7 that changed between the branches, then some that did not
SIZES = {
  (rm, "NVOS46_PARAMETERS"): (56, 64), (ctrl, "NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS"): (776, 1032),
  (ctrl, "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS"): (2, 3), (uvm, "UVM_MAP_EXTERNAL_ALLOCATION_PARAMS"): (1200, 9264),
  (rm, "NV_MEMORY_ALLOCATION_PARAMS"): (120, 128), (rm, "NV_VASPACE_ALLOCATION_PARAMETERS"): (48, 56),
  (classes, "NV_CHANNEL_ALLOC_PARAMS"): (360, 368),
  (rm, "nv_ioctl_card_info_t"): (72, 72), (rm, "nv_ioctl_register_fd_t"): (4, 4), (rm, "nv_ioctl_rm_api_version_t"): (72, 72),
  (rm, "NVOS00_PARAMETERS"): (16, 16), (rm, "NVOS02_PARAMETERS"): (48, 48), (rm, "nv_ioctl_nvos02_parameters_with_fd"): (56, 56),
  (rm, "NVOS21_PARAMETERS"): (32, 32), (rm, "NVOS64_PARAMETERS"): (48, 48), (rm, "NVOS33_PARAMETERS"): (48, 48),
  (rm, "nv_ioctl_nvos33_parameters_with_fd"): (56, 56), (rm, "NVOS54_PARAMETERS"): (32, 32),
  (classes, "NV0080_ALLOC_PARAMETERS"): (56, 56), (classes, "NV2080_ALLOC_PARAMETERS"): (4, 4),
  (classes, "NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS"): (24, 24), (rm, "NV_CTXSHARE_ALLOCATION_PARAMETERS"): (12, 12),
  (rm, "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS"): (20, 20), (ctrl, "NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS"): (32, 32),
  (ctrl, "NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS"): (16, 16), (ctrl, "NV2080_CTRL_GR_GET_INFO_PARAMS"): (32, 32),
  (ctrl, "NV2080_CTRL_GR_INFO"): (8, 8), (ctrl, "NV2080_CTRL_GPU_GET_GID_INFO_PARAMS"): (268, 268),
  (ctrl, "NV2080_CTRL_PERF_BOOST_PARAMS"): (8, 8), (ctrl, "NV2080_CTRL_FB_FLUSH_GPU_CACHE_PARAMS"): (4024, 4024),
  (ctrl, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS"): (4, 4),
  (uvm, "UVM_INITIALIZE_PARAMS"): (16, 16), (uvm, "UVM_MM_INITIALIZE_PARAMS"): (8, 8), (uvm, "UVM_REGISTER_GPU_PARAMS"): (40, 40),
  (uvm, "UVM_REGISTER_GPU_VASPACE_PARAMS"): (32, 32), (uvm, "UVM_REGISTER_CHANNEL_PARAMS"): (56, 56),
  (uvm, "UVM_CREATE_EXTERNAL_RANGE_PARAMS"): (24, 24), (uvm, "UvmGpuMappingAttributes"): (36, 36), (uvm, "UVM_FREE_PARAMS"): (24, 24),
}


@pytest.mark.parametrize("mod,name", list(SIZES), ids=[n for _, n in SIZES])
def test_580_struct_size(mod, name):
  assert ctypes.sizeof(getattr(mod, name)) == SIZES[mod, name][1]


def test_580_moved_fields():
  # NVOS46: flags2 and kindOverride were added in 580, moving dmaOffset 40 -> 48 and status 48 -> 56
  assert (rm.NVOS46_PARAMETERS.dmaOffset.offset, rm.NVOS46_PARAMETERS.status.offset) == (48, 56)
  # UVM_MAP_EXTERNAL_ALLOCATION: perGpuAttributes[UVM_MAX_GPUS = 256] puts gpuAttributesCount at 9240
  assert uvm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS.gpuAttributesCount.offset == 9240
  assert uvm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS.rmCtrlFd.offset > 9240


def test_ioctl_numbers():
  assert [rm.NV_ESC_RM_ALLOC, rm.NV_ESC_RM_CONTROL, rm.NV_ESC_RM_FREE, rm.NV_ESC_RM_ALLOC_MEMORY, rm.NV_ESC_RM_MAP_MEMORY,
          rm.NV_ESC_RM_MAP_MEMORY_DMA, rm.NV_ESC_CARD_INFO, rm.NV_ESC_REGISTER_FD, rm.NV_ESC_CHECK_VERSION_STR,
          rm.NV_ESC_WAIT_OPEN_COMPLETE] == [0x2b, 0x2a, 0x29, 0x27, 0x4e, 0x57, 0xc8, 0xc9, 0xd2, 0xda]
  assert rm.NV_IOCTL_MAGIC == ord("F")
  assert [uvm.UVM_INITIALIZE, uvm.UVM_MM_INITIALIZE, uvm.UVM_REGISTER_GPU, uvm.UVM_REGISTER_GPU_VASPACE, uvm.UVM_REGISTER_CHANNEL,
          uvm.UVM_CREATE_EXTERNAL_RANGE, uvm.UVM_MAP_EXTERNAL_ALLOCATION, uvm.UVM_FREE] == \
    [0x30000001, 0x4b, 0x25, 0x19, 0x1b, 0x49, 0x21, 0x22]


def test_class_and_control_numbers():
  assert [rm.NV01_ROOT_CLIENT, classes.NV01_DEVICE_0, classes.NV20_SUBDEVICE_0, classes.NV01_MEMORY_VIRTUAL, classes.NV1_MEMORY_USER,
          classes.NV01_MEMORY_SYSTEM, classes.FERMI_VASPACE_A, classes.KEPLER_CHANNEL_GROUP_A, classes.FERMI_CONTEXT_SHARE_A,
          classes.HOPPER_CHANNEL_GPFIFO_A, classes.AMPERE_CHANNEL_GPFIFO_A, compute.HOPPER_COMPUTE_A, compute.AMPERE_COMPUTE_A,
          compute.AMPERE_COMPUTE_B, copy.HOPPER_DMA_COPY_A, copy.AMPERE_DMA_COPY_A, copy.AMPERE_DMA_COPY_B,
          classes.HOPPER_USERMODE_A, classes.AMPERE_USERMODE_A, classes.TURING_USERMODE_A, classes.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR] == \
    [0x41, 0x80, 0x2080, 0x70, 0x40, 0x3e, 0x90f1, 0xa06c, 0x9067, 0xc86f, 0xc56f, 0xcbc0, 0xc6c0, 0xc7c0, 0xc8b5, 0xc6b5, 0xc7b5,
     0xc661, 0xc561, 0xc461, 0x71]
  assert [ctrl.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, ctrl.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, ctrl.NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
          ctrl.NV2080_CTRL_CMD_PERF_BOOST, ctrl.NV2080_CTRL_CMD_GPU_GET_GID_INFO, ctrl.NV2080_CTRL_CMD_GR_GET_INFO,
          ctrl.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, ctrl.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE] == \
    [0x13e, 0x205, 0x800201, 0x2080200a, 0x2080014a, 0x20801201, 0xc36f0108, 0xa06c0101]
  assert (rm.NV_ERR_INVALID_CLASS, rm.NV_ERR_INVALID_OBJECT_HANDLE, rm.NV_ERR_NOT_SUPPORTED, rm.NV_ERR_INVALID_PARAM_STRUCT) == \
    (0x22, 0x33, 0x56, 0x3a)


def test_host_compute_copy_methods():
  # section 4: host semaphore methods, identical in c56f and c86f (whose SDK header does not name NON_STALL_INTERRUPT);
  # USERD GPPut at 0x8c; the doorbell at 0x90
  assert classes.NVC56F_NON_STALL_INTERRUPT == 0x20
  for p in ("NVC56F", "NVC86F"):
    assert [getattr(classes, f"{p}_{m}") for m in ("SEM_ADDR_LO", "SEM_ADDR_HI", "SEM_PAYLOAD_LO", "SEM_PAYLOAD_HI",
                                                  "SEM_EXECUTE")] == [0x5c, 0x60, 0x64, 0x68, 0x6c]
    assert getattr(classes, f"{p}_SEM_EXECUTE_OPERATION") == (2, 0) and getattr(classes, f"{p}_SEM_EXECUTE_PAYLOAD_SIZE") == (24, 24)
  assert classes.HopperAControlGPFifo.GPGet.offset == 0x88 and classes.HopperAControlGPFifo.GPPut.offset == 0x8c
  assert classes.NVC361_NOTIFY_CHANNEL_PENDING == 0x90
  for p in ("NVC6C0", "NVC7C0", "NVCBC0"):
    assert [getattr(compute, f"{p}_{m}") for m in ("SET_OBJECT", "SET_SHADER_SHARED_MEMORY_WINDOW_A", "SEND_PCAS_A",
            "SEND_SIGNALING_PCAS2_B", "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A", "SET_INLINE_QMD_ADDRESS_A", "SET_SHADER_LOCAL_MEMORY_A",
            "SET_SHADER_LOCAL_MEMORY_WINDOW_A", "INVALIDATE_SHADER_CACHES_NO_WFI")] == \
      [0x0, 0x2a0, 0x2b4, 0x2c0, 0x2e4, 0x318, 0x790, 0x7b0, 0x1698]
  for p in ("NVC6B5", "NVC7B5", "NVC8B5"):
    assert [getattr(copy, f"{p}_{m}") for m in ("SET_SEMAPHORE_A", "SET_SEMAPHORE_PAYLOAD", "LAUNCH_DMA", "OFFSET_IN_UPPER",
                                                "LINE_LENGTH_IN")] == [0x240, 0x248, 0x300, 0x400, 0x418]
    assert getattr(copy, f"{p}_LAUNCH_DMA_DATA_TRANSFER_TYPE") == (1, 0) and getattr(copy, f"{p}_LAUNCH_DMA_SEMAPHORE_TYPE") == (4, 3)


def test_qmd_field_ranges():
  # section 6's table, V03 (Ampere) and V04 (Hopper)
  v3, v4 = "NVC6C0_QMDV03_00_", "NVCBC0_QMDV04_00_"
  f = lambda p, n, *i: getattr(qmd, p + n)(*i) if i else getattr(qmd, p + n)
  assert f(v3, "QMD_MAJOR_VERSION") == f(v4, "QMD_MAJOR_VERSION") == (583, 580)
  assert f(v3, "CTA_RASTER_WIDTH") == (415, 384) and f(v4, "GRID_WIDTH") == (1055, 1024)
  assert f(v3, "REGISTER_COUNT_V") == (656, 648) and f(v4, "REGISTER_COUNT") == (1208, 1200)
  assert f(v3, "CONSTANT_BUFFER_VALID", 1) == (641, 641) and f(v4, "CONSTANT_BUFFER_VALID", 1) == (420, 420)
  assert f(v4, "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", 1) == (1631, 1600)
  assert f(v3, "RELEASE0_ENABLE") == (823, 823) and f(v4, "RELEASE_ENABLE", 0) == (320, 320)
  assert f(v4, "QMD_TYPE") == (25, 23) and f(v4, "SASS_VERSION") == (543, 536)


def test_qmd_layouts_expand_the_indexed_fields_and_pack_little_endian():
  from autogen.qmdlayout import V03_AMPERE_A, V03_AMPERE_B, V04_HOPPER
  assert V04_HOPPER.fields["CONSTANT_BUFFER_VALID_7"] == (444, 444) and "CONSTANT_BUFFER_VALID_8" not in V04_HOPPER.fields
  assert V04_HOPPER.fields["RELEASE_PAYLOAD64B_2"] == (364, 364) and V03_AMPERE_A.fields["CONSTANT_BUFFER_SIZE_SHIFTED4_7"] == (1535, 1523)
  raw = V04_HOPPER.build(GRID_WIDTH=0x12345678, QMD_MAJOR_VERSION=4)
  assert len(raw) == 384 and raw[128:132] == (0x12345678).to_bytes(4, "little") and raw[72] == 0x40   # bits 1055:1024, 583:580
  with pytest.raises(ValueError, match="GRID_HEIGHT: 0x10000 does not fit its 16 bits"): V04_HOPPER.build(GRID_HEIGHT=1 << 16)
  for L in (V03_AMPERE_A, V03_AMPERE_B, V04_HOPPER):
    spans = sorted(L.fields.values(), key=lambda f: f[1])
    assert all(a[0] < b[1] for a, b in zip(spans, spans[1:])) and spans[-1][0] < L.bits   # no two fields overlap


def _regenerate(name, tmp_path, tag=nvheaders.TAG):
  gen = replace(GENERATORS[name], tag=tag)
  if tag == OLD_TAG and name == "nv.uvm": gen = replace(gen, headers=gen.headers[1:])   # 535 has no nv_uvm_user_types.h
  try: return gen(tmp_path)
  except headers.HeadersMissing as e: pytest.skip(f"NVIDIA header trees not available: {e}")


@pytest.mark.parametrize("name", NV_GENERATORS)
def test_regeneration_is_byte_identical(name, tmp_path):
  for new in _regenerate(name, tmp_path):
    rel = new.relative_to(tmp_path)
    a, b = (AUTOGEN / rel).read_text(), new.read_text()
    diff = "".join(list(difflib.unified_diff(a.splitlines(True), b.splitlines(True), f"committed/{rel}", f"regenerated/{rel}"))[:40])
    assert a == b, f"autogen/{rel} differs from a fresh `python -m autogen {name}`:\n{diff}"


def test_535_layouts_differ_as_measured(tmp_path):
  """Generated from tag 535.261.03 (when its tree is extracted): the 535 sizes of section 10."""
  mods = {}
  for name in ("nv.rm", "nv.classes", "nv.ctrl", "nv.uvm"):
    (path,) = _regenerate(name, tmp_path, OLD_TAG)
    spec = importlib.util.spec_from_file_location(f"nv535_{name[3:]}", path)
    spec.loader.exec_module(mods.setdefault(name[3:], importlib.util.module_from_spec(spec)))
  for (mod, name), (old, _) in SIZES.items():
    assert ctypes.sizeof(getattr(mods[mod.__name__.rsplit(".", 1)[1]], name)) == old, name
