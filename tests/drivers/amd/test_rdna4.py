"""RDNA4 (gfx12) on the emulated Navi48 (RX 9070 XT, GC 12.0.1) and Navi44 (RX 9060 XT, GC 12.0.0): a cold boot through the
AM driver with the real firmware (Debian firmware-amd-graphics 20250410, whose gfx12 files scripts/setup.sh unpacks), the
queue-API contract on MOCKPCI+AMD:navi48 (synthetic firmware), and what the gfx12 blocks program differently from gfx11."""
import os
import pytest
from autogen.amd import gc_12_0_0, mmhub_4_1_0, hdp_7_0_0, smu14_driver_if_v14_0, amdgpu_vm as vm
from drivers.amd.am.firmware import BACKPORT_DIR
from drivers.amd.device import AMDDevice
from drivers.amd.pci import PCIIface
from drivers.hcq import parse_device, DeviceSpec, open_device
from drivers.system import open_model
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


def test_a_gfx12_dispatch_is_refused_until_the_core_models_it(tmp_path, monkeypatch):
  from emu.amdgpu.engine import KernelError
  write_firmware(str(tmp_path), chip=NAVI44)
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  dev = open_device("MOCKPCI+AMD:navi44:1")
  try:
    with pytest.raises(KernelError, match=r"DISPATCH_DIRECT on GC 12\.0\.0: the dispatch of this generation is not modelled yet"):
      dev.iface.pci.model.gpu.dispatch(None, (1, 1, 1), 1, "compute0")    # refused before the registers are read
  finally: dev.close()


def test_device_strings_name_the_emulated_chip():
  assert parse_device("MOCKPCI+AMD:navi48") == DeviceSpec("AMD", "MOCKPCI", 0, "navi48")
  assert parse_device("mockusb+amd:NAVI44:2") == DeviceSpec("AMD", "MOCKUSB", 2, "navi44")
  for s in ("MOCKPCI+AMD:navi48", "MOCKPCI+AMD:navi44:3", "MOCKPCI+AMD:1"): assert str(parse_device(s)) == s
  with pytest.raises(ValueError, match=r"MOCKKFD runs on no PCI model to choose: name a model after MOCKPCI\+AMD or MOCKUSB\+AMD"):
    parse_device("MOCKKFD+AMD:navi48")
  with pytest.raises(ValueError, match=r"MOCKPCI\+AMD:navi99: no emulated AMD device model 'navi99'; models: navi31, navi44, navi48"):
    open_device("MOCKPCI+AMD:navi99")


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
