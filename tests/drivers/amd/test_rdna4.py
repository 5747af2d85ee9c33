"""RDNA4 (gfx12) on the emulated Navi48 (RX 9070 XT, GC 12.0.1) and Navi44 (RX 9060 XT, GC 12.0.0): a cold boot through the
AM driver with the real firmware (Debian firmware-amd-graphics 20250410, whose gfx12 files scripts/setup.sh unpacks), the
queue-API contract on MOCKPCI+AMD:navi48 (synthetic firmware), and what the gfx12 blocks program differently from gfx11."""
import os
import numpy as np
import pytest
from autogen.amd import gc_11_0_0, gc_12_0_0, mmhub_4_1_0, hdp_7_0_0, smu14_driver_if_v14_0, amdgpu_vm as vm
from drivers.amd.am.firmware import BACKPORT_DIR
from drivers.amd.device import AMDDevice
from drivers.amd.kfd import KFDIface
from drivers.amd.pci import PCIIface
from drivers.hcq import parse_device, DeviceSpec, open_device
from drivers.system import open_model
from drivers.system.kernel import kernel_interface
from emu.amdgpu import spi
from emu.amdgpu.chips import NAVI44, NAVI48
from emu.amdgpu.fwbuild import write_firmware
from emu.amdgpu.mmu import GFX12, leaf_check, pde_error
from emu.pci import ModelError
from tests.hcq.contract import check_device

HAVE_FW = os.path.exists(os.path.join(BACKPORT_DIR, "gc_12_0_1_mec.bin")) and os.path.exists(os.path.join(BACKPORT_DIR, "gc_12_0_0_mec.bin"))
needs_fw = pytest.mark.skipif(not HAVE_FW, reason=f"the gfx12 firmware is not unpacked in {BACKPORT_DIR} (scripts/setup.sh does it)")
CHIPS = {"navi48": ((12, 0, 1), (14, 0, 2), (7, 0, 1), 0x7550, "gfx1201"), "navi44": ((12, 0, 0), (14, 0, 3), (7, 0, 0), 0x7590, "gfx1200")}


@needs_fw
@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_a_gfx12_chip_boots_cold_then_partially_with_the_real_firmware(chip, monkeypatch):
  monkeypatch.delenv("HCQ_FIRMWARE_DIR", raising=False)
  gc, mp, sdma, device_id, arch = CHIPS[chip]
  dev = AMDDevice("MOCKPCI+AMD", PCIIface(open_model(chip, 0, "am")))
  try:
    core = dev.iface.core
    assert dev.iface.pci.device_id == device_id and dev.arch == arch and not core.partial_boot
    assert dict(core.versions) == {"GC": gc, "SDMA0": sdma, "MMHUB": (4, 1, 0), "NBIO": (6, 3, 1), "MP0": mp, "MP1": mp,
                                   "HDP": (7, 0, 0), "OSSSYS": (7, 0, 0)}
    assert [type(b).__name__ for b in core.blocks] == ["SOC24", "GMCv12_0", "IHv7_0", "PSPv14_0", "SMUv14_0", "GFXv12_0", "SDMAv7_0"]
    assert core.fw.files["sos"] == os.path.join(BACKPORT_DIR, f"psp_{'_'.join(map(str, mp))}_sos.bin")
    model = dev.iface.pci.model
    assert not model.psp.failures and model.psp.loaded("SDMA_UCODE_TH0") and not model.psp.loaded("SDMA_UCODE_TH1")
    # the gfx12 register modules' fields, as the blocks left them (MMHUB 4.1 DAGB gating, HDP 7.0 SD mode, MCU unhalted)
    assert mmhub_4_1_0.regDAGB0_CNTL_MISC2.decode(model.gmc_mm.get(mmhub_4_1_0.regDAGB0_CNTL_MISC2))["DISABLE_RDRET_TAP_CHAIN_FGCG"] == 0
    power = hdp_7_0_0.regHDP_MEM_POWER_CTRL.decode(model.gpu.hdp.get(hdp_7_0_0.regHDP_MEM_POWER_CTRL))
    assert (power["ATOMIC_MEM_POWER_SD_EN"], power["RC_MEM_POWER_SD_EN"], power["ATOMIC_MEM_POWER_DS_EN"]) == (1, 1, 0)
    assert model.sdma.get(gc_12_0_0.regSDMA0_MCU_CNTL) & 1 == 0
    # SMU 14: the metrics table is PMFW table 5 (TABLE_SMU_METRICS of smu14_driver_if_v14_0.h), read back with its v14 layout
    reading = core.smu.reading()
    assert model.smu.messages[-1][1] == smu14_driver_if_v14_0.TABLE_SMU_METRICS == 5
    assert reading["voltages"]["soc"] == 850 and reading["voltages"]["mem"] == 1350 and 20 < reading["temps"]["edge"] < 120
  finally: dev.close()
  dev = AMDDevice("MOCKPCI+AMD", PCIIface(open_model(chip, 0, "am")))   # the firmware still runs and was left clean
  try: assert dev.iface.core.partial_boot
  finally: dev.close()


def test_the_queue_contract_on_mock_pci_navi48(tmp_path, monkeypatch):
  """Copies, signals, waits and timestamps on the SDMA and compute queues (no kernels), with synthetic gfx12 firmware
  (fwbuild: PSP 14 image ids, SDMA v3.0, RLC v2.2)."""
  assert sorted(write_firmware(str(tmp_path), chip=NAVI48)) == ["gc_12_0_1_imu.bin", "gc_12_0_1_mec.bin", "gc_12_0_1_rlc.bin",
                                                                 "psp_14_0_2_sos.bin", "sdma_7_0_1.bin", "smu_14_0_2.bin"]
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  check_device("MOCKPCI+AMD:navi48")


@pytest.fixture(scope="module", params=[("MOCKPCI", "navi48"), ("MOCKPCI", "navi44"), ("MOCKKFD", "navi48")], ids="-".join)
def gfx12_dev(request, tmp_path_factory):
  """A booted Navi48 / Navi44 on synthetic firmware (MOCKPCI+AMD:<chip>:4, an index no other test opens), or the KFD
  model serving Navi48s (kernel_interface(mock="kfd", chip="navi48"))."""
  iface, chip = request.param
  if iface == "MOCKKFD": dev = AMDDevice("MOCKKFD+AMD", KFDIface(kernel_interface(mock="kfd", chip=chip)))
  else:
    fw = tmp_path_factory.mktemp(f"fw-{chip}")
    write_firmware(str(fw), chip={"navi48": NAVI48, "navi44": NAVI44}[chip])
    with pytest.MonkeyPatch.context() as mp:
      mp.setenv("HCQ_FIRMWARE_DIR", str(fw))
      dev = open_device(f"MOCKPCI+AMD:{chip}:4")
  yield chip, dev
  dev.close()


def test_rdna4_kernels_compiled_for_the_chips_target_match_numpy(gfx12_dev):
  """The vadd, LDS reduction, scratch and 3-D grid kernels of the gfx11 end-to-end suite, compiled by clang for gfx1201 /
  gfx1200 and launched through the GC 12 COMPUTE_* registers (emu/amdgpu/spi.py)."""
  from tests.drivers.amd.kernels import SRC
  chip, dev = gfx12_dev
  assert dev.arch == CHIPS[chip][4] and dev.iface.ip_versions["GC"] == CHIPS[chip][0]
  lib = dev.compiler.compile(SRC)
  def put(x):
    b = dev.alloc(x.nbytes); b.copyin(x.data); return b
  def get(buf, dtype): return np.frombuffer(buf.copyout(), dtype)
  rng = np.random.default_rng(0)
  n = 10_000
  a, b = rng.standard_normal((2, n), dtype=np.float32)
  out = dev.alloc(n * 4)
  dev.program("vadd", lib)(out, put(a), put(b), global_size=(-(-n // 64),), local_size=(64,), vals=(n,), wait=True)
  np.testing.assert_array_equal(get(out, np.float32), a + b)
  x = rng.integers(-1000, 1000, 256 * 40).astype(np.float32)
  out = dev.alloc(40 * 4)
  dev.program("lds_sum", lib)(out, put(x), global_size=(40,), local_size=(256,), wait=True)
  np.testing.assert_array_equal(get(out, np.float32), x.reshape(40, 256).sum(1))
  prg = dev.program("scratch", lib)
  assert prg.kernel.descriptor.private_segment_fixed_size >= 256
  idx = rng.integers(0, 64, 256).astype(np.int32)
  out = dev.alloc(256 * 4)
  prg(out, put(idx), global_size=(4,), local_size=(64,), wait=True)
  np.testing.assert_array_equal(get(out, np.int32), idx * np.arange(256))
  nx, ny, nz = 64, 24, 6
  out = dev.alloc(nx * ny * nz * 4)
  dev.program("grid3d", lib)(out, global_size=(nx // 16, ny // 4, nz // 2), local_size=(16, 4, 2), vals=(nx, ny), wait=True)
  z, y, xx = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
  np.testing.assert_array_equal(get(out, np.int32).reshape(nz, ny, nx), xx + 100 * y + 10000 * z)


def test_the_kfd_model_serving_navi48_lists_its_topology():
  """An RX 9070 XT's KFD node: 64 CUs (4 SEs x 2 SAs x 8 CUs, 2 SIMDs each), gfx_target_version 12.0.1, device 1002:7550."""
  dev = AMDDevice("MOCKKFD+AMD", KFDIface(kernel_interface(mock="kfd", chip="navi48")))
  try:
    p = dev.iface.props
    assert (p["simd_count"], p["array_count"], p["cu_per_simd_array"], p["gfx_target_version"], p["device_id"]) == (128, 8, 8, 120001, 0x7550)
    assert dev.arch == "gfx1201" and dev.iface.ip_versions["SDMA0"] == (7, 0, 1)
  finally: dev.close()
  with pytest.raises(ValueError, match=r"the KFD model serves no chip 'navi99'; chips: navi31, navi48, navi44"):
    kernel_interface(mock="kfd", chip="navi99")


def test_compute_runs_on_mock_kfd_navi48():
  """The device string alone picks the KFD model's chip: compute's kernels, compiled for gfx1201, run on MOCKKFD+AMD:navi48
  (a matmul plus an elementwise op and a row reduction, against numpy)."""
  from compute import Tensor, Device
  rng = np.random.default_rng(7)
  a, b = rng.uniform(-2, 2, (19, 45)).astype(np.float32), rng.uniform(-2, 2, (45, 23)).astype(np.float32)
  out = ((Tensor(a, device="MOCKKFD+AMD:navi48") @ Tensor(b, device="MOCKKFD+AMD:navi48")).relu() * 2).sum(1)
  assert Device["MOCKKFD+AMD:navi48"].arch == "gfx1201"
  np.testing.assert_allclose(out.numpy(), (np.maximum(a.astype(np.float64) @ b, 0) * 2).sum(1), rtol=1e-5, atol=1e-4)


def spi_decode(gc, engines: int = 4, initiator: int | None = None, **regs):
  """emu/amdgpu/spi.py's decode of one wave32 workgroup of 64 lanes plus `regs` (COMPUTE_* names without the prefix)."""
  regs = {"NUM_THREAD_X": 64, "NUM_THREAD_Y": 1, "NUM_THREAD_Z": 1, **regs}
  if initiator is None: initiator = gc.regCOMPUTE_DISPATCH_INITIATOR.encode(COMPUTE_SHADER_EN=1, CS_W32_EN=1)
  return spi.decode(gc.__name__.rpartition(".")[2], engines, initiator, tuple(regs.get(n, 0) for n in spi.STATE))


def test_gc12_compute_registers_are_decoded_with_gc12_fields():
  """The bits gc_12_0_0 renamed: RSRC1 21/23 are WG_RR_EN / DISABLE_PERF (gfx11's DX10_CLAMP / IEEE_MODE, which start the
  MODE of a gfx11 wave only), RSRC2 6 DYNAMIC_VGPR (gfx11 TRAP_PRESENT), RSRC3 10-11 part of the 8-bit INST_PREF_SIZE
  (gfx11 TRAP_ON_START / END), TMPRING_SIZE.WAVESIZE 18 bits; every field the model does not act on is refused."""
  g11, g12 = gc_11_0_0, gc_12_0_0
  bits = g12.regCOMPUTE_PGM_RSRC1.encode(FLOAT_MODE=0xC0, WG_RR_EN=1, DISABLE_PERF=1)
  assert bits == g11.regCOMPUTE_PGM_RSRC1.encode(FLOAT_MODE=0xC0, DX10_CLAMP=1, IEEE_MODE=1)
  assert spi_decode(g12, PGM_RSRC1=bits)[0]["mode"] == 0xC0 and spi_decode(g11, PGM_RSRC1=bits)[0]["mode"] == 0xC0 | 1 << 8 | 1 << 9
  for gc, field in ((g12, "DYNAMIC_VGPR"), (g11, "TRAP_PRESENT")):
    assert gc.regCOMPUTE_PGM_RSRC2.mask(field) == 1 << 6
    with pytest.raises(spi.Refused, match=f"COMPUTE_PGM_RSRC2 {field}=1 is not modelled"): spi_decode(gc, PGM_RSRC2=1 << 6)
  with pytest.raises(spi.Refused, match="COMPUTE_PGM_RSRC2 WGP_TAKEOVER=1 is not modelled"): spi_decode(g12, PGM_RSRC2=1 << 31)
  assert spi_decode(g12, PGM_RSRC3=g12.regCOMPUTE_PGM_RSRC3.encode(INST_PREF_SIZE=0xFF))[2] == 0   # bits 4-11: a hint
  with pytest.raises(spi.Refused, match="COMPUTE_PGM_RSRC3 TRAP_ON_START=1"): spi_decode(g11, PGM_RSRC3=1 << 10)
  with pytest.raises(spi.Refused, match="COMPUTE_PGM_RSRC3 GLG_EN=1"): spi_decode(g12, PGM_RSRC3=1 << 13)
  with pytest.raises(spi.Refused, match=r"COMPUTE_PGM_RSRC3 0x4000 sets reserved bits"): spi_decode(g12, PGM_RSRC3=1 << 14)
  with pytest.raises(spi.Refused, match="COMPUTE_NUM_THREAD_X INTERLEAVE_BITS_X=1"): spi_decode(g12, NUM_THREAD_X=64 | 1 << 13)
  assert spi_decode(g11, NUM_THREAD_X=64 | 1 << 13)[1] == (64 | 1 << 13, 1, 1)   # gfx11: NUM_THREAD_FULL is 16 bits
  ini = g12.regCOMPUTE_DISPATCH_INITIATOR
  with pytest.raises(spi.Refused, match="initiator INTERLEAVE_2D_EN is not modelled"):
    spi_decode(g12, initiator=ini.encode(COMPUTE_SHADER_EN=1, CS_W32_EN=1, INTERLEAVE_2D_EN=1))
  assert spi_decode(g12, initiator=ini.encode(COMPUTE_SHADER_EN=1, CS_W32_EN=1, PING_PONG_EN=1))[0]["wave64"] is False
  # scratch: an 18-bit WAVESIZE (256-byte units), WAVES slots on each of the chip's engines
  tmpring = g12.regCOMPUTE_TMPRING_SIZE.encode(WAVES=2, WAVESIZE=1 << 16)
  ring = spi_decode(g12, PGM_RSRC2=1, TMPRING_SIZE=tmpring, DISPATCH_SCRATCH_BASE_LO=0x10)[0]["scratch"]
  assert (ring.base, ring.wave_bytes, ring.se_bytes, ring.ses) == (0x1000, 256 << 16, 2 * 256 << 16, 4)


def test_device_strings_name_the_emulated_chip():
  assert parse_device("MOCKPCI+AMD:navi48") == DeviceSpec("AMD", "MOCKPCI", 0, "navi48")
  assert parse_device("mockusb+amd:NAVI44:2") == DeviceSpec("AMD", "MOCKUSB", 2, "navi44")
  for s in ("MOCKPCI+AMD:navi48", "MOCKPCI+AMD:navi44:3", "MOCKPCI+AMD:1"): assert str(parse_device(s)) == s
  # MOCKKFD: the KFD model built serving the chip named (Mock("kfd", "kernel", chooses="chip")); :1 its second GPU
  assert parse_device("MOCKKFD+AMD:navi48:1") == DeviceSpec("AMD", "MOCKKFD", 1, "navi48")
  dev = open_device("MOCKKFD+AMD:navi48:1")
  try:
    assert isinstance(dev.iface, KFDIface) and dev.arch == "gfx1201" and dev.name == "MOCKKFD+AMD:navi48:1"
    assert (dev.iface.ip_versions["GC"], dev.iface.props["device_id"]) == ((12, 0, 1), 0x7550)
  finally: dev.close()
  for s in ("MOCKPCI+AMD:navi99", "MOCKKFD+AMD:navi99"):
    with pytest.raises(ValueError, match=rf"{s.replace('+', '[+]')}: no emulated AMD device model 'navi99'; models: navi31, navi44, navi48"):
      open_device(s)
  with pytest.raises(ValueError, match=r"\(KFD runs on no PCI model to choose: name a model after MOCKKFD\+AMD, MOCKPCI\+AMD or MOCKUSB"):
    parse_device("KFD+AMD:navi48")
  # a kernel-driver model that serves one kind of device (the RM model, Mock("nv", "kernel")) has no chip to choose
  with pytest.raises(ValueError, match=r"NV has no emulated interface whose model a device string may name"): parse_device("MOCK+NV:h200")
  from drivers.nv import VENDOR as NV
  with pytest.raises(ValueError, match=r"MOCK\+NV runs on the kernel-driver model nv, which serves no PCI model to choose"):
    NV.open_mock("MOCK", model="h200")


def test_the_gfx12_page_table_format():
  """gmc_v12_0.c's layout: MTYPE at 54-55, PDE_PTE at 63; gfx11's MTYPE bits (48-50) and PDE_PTE (54) are not gfx12 fields."""
  leaf = vm.AMDGPU_PTE_VALID | vm.AMDGPU_PTE_READABLE | 0x1000
  leaf_check(leaf | 3 << 54, 0x1000, GFX12)                                  # MTYPE_UC
  with pytest.raises(ModelError, match=r"bits 0x3000000000000 \(TMZ, PRT or reserved\)"): leaf_check(leaf | 3 << 48, 0x1000, GFX12)
  with pytest.raises(ModelError, match=r"bits 0x100000000000000"): leaf_check(leaf | vm.AMDGPU_PTE_PRT_GFX12, 0x1000, GFX12)
  assert pde_error(vm.AMDGPU_PTE_VALID | 0x2000 | 1 << 58, 1, GFX12) == \
    "block fragment size 1 is set, but context 0 runs 4-level tables with block size 0"
  assert GFX12.pde_pte == 1 << 63


def test_the_default_emulated_chip_is_found_without_loading_every_models_declaration():
  """MOCKPCI+AMD (Mock(None)) runs on the first registered AMD PCI model, looked up among emu.amdgpu's declarations first:
  no other vendor's model is imported for it (a fresh process, as a program's first open)."""
  import subprocess, sys
  code = ("from drivers.system import registry; from drivers.amd import VENDOR; "
          "print(VENDOR.default_pci_model(), sorted(n for g, n, _ in registry._loaded if g == registry.MODEL_GROUP))")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ)
  assert r.returncode == 0, r.stderr
  assert r.stdout.split() == ["navi31", "['kfd',", "'navi31']"]


def test_mock_usb_runs_on_the_chip_the_device_string_names(tmp_path, monkeypatch):
  """MOCKUSB+AMD:navi48: the AM driver on Navi48 behind the ASM24xx bridge model (everything in VRAM, copies through the
  bridge's SRAM windows)."""
  from tests.hcq.contract import check_copy
  write_firmware(str(tmp_path), chip=NAVI48)
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  dev = open_device("MOCKUSB+AMD:navi48")
  try:
    assert dev.arch == "gfx1201" and dev.iface.ip_versions["GC"] == (12, 0, 1)
    for n, d, s in ((4099, 2, 2), (1 << 20, 0, 0)): check_copy(dev, n, d, s)
  finally: dev.close()
