"""The mutation table on the emulated Navi48 (gfx12): every PTE/PDE bit and hub register field the AM driver encodes for
it matters. Each row changes one in the driver's encoder output (gfxhub_v12_0 / mmhub_v4_1_0 registers, pte_gfx12's PDE and
PTE flags) and the driver's ordinary gfx12 work must then fail: a boot, SDMA copies, a compute-queue signal, the SMU
metrics (gfx12 kernels are not dispatched yet: the rows only a kernel shows, EXECUTABLE, SH_MEM_*, are
test_navi31_mutations.py's).
Not in the table, besides what test_navi31_mutations.py leaves out: MC_VM_MX_L1_TLB_CNTL.MTYPE, two bits on gfx12, every
value of which is a defined MTYPE."""
import pytest

from autogen.amd import amdgpu_vm as vm
from drivers.amd.am.core import AMCore
from drivers.amd.am.gfxhub_v12_0 import GFXHUBv12_0
from drivers.amd.am.mmhub_v4_1_0 import MMHUBv4_1_0
from drivers.amd.am.pte_gfx12 import PTEgfx12
from drivers.hcq import open_device
from emu.amdgpu.chips import NAVI48
from emu.amdgpu.fwbuild import write_firmware
from tests.emu.amdgpu.test_navi31_mutations import BROKEN, field
from tests.hcq.contract import check_copy, check_signal_reaches_host


def hub(name: str, hub_index: int): return vars((GFXHUBv12_0.R, MMHUBv4_1_0.R)[hub_index])[name]


REGISTERS = [
  *[(f"{h}-{n}", hub(r, i), field(hub(r, i), f, v)) for i, h in enumerate(("GC", "MM")) for n, r, f, v in (
    ("L1_TLB-off", "MX_L1_TLB_CNTL", "ENABLE_L1_TLB", 0),
    ("L1_TLB-SYSTEM_ACCESS_MODE", "MX_L1_TLB_CNTL", "SYSTEM_ACCESS_MODE", 1),
    ("L1_TLB-no-ADVANCED_DRIVER_MODEL", "MX_L1_TLB_CNTL", "ENABLE_ADVANCED_DRIVER_MODEL", 0),
    ("L2-off", "L2_CNTL", "ENABLE_L2_CACHE", 0),
    ("CONTEXT0-off", "CONTEXT0_CNTL", "ENABLE_CONTEXT", 0),
    ("CONTEXT0-depth", "CONTEXT0_CNTL", "PAGE_TABLE_DEPTH", 2)) if h == "GC" or n != "CONTEXT0-off"],
  *[(f"{h}-{n}", hub(r, i), f) for i, h in enumerate(("GC", "MM")) for n, r, f in (
    ("aperture-low", "SYSTEM_APERTURE_LOW_ADDR", lambda v: v + 1),
    ("aperture-high", "SYSTEM_APERTURE_HIGH_ADDR", lambda v: 0),
    ("root-invalid", "CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", lambda v: v & ~1),
    ("root-moved", "CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", lambda v: v + 0x1000),
    ("window-start", "CONTEXT0_PAGE_TABLE_START_ADDR_HI32", lambda v: v + 1),
    ("window-end", "CONTEXT0_PAGE_TABLE_END_ADDR_HI32", lambda v: 1)) if h == "GC" or not n.startswith(("root", "window"))],
]
# (row id, change of a leaf's flags given (flags, system)): gfx11's MTYPE position (48-50) holds nothing on gfx12
PTES = [
  ("VALID", lambda f, s: f & ~vm.AMDGPU_PTE_VALID),
  ("READABLE", lambda f, s: f & ~vm.AMDGPU_PTE_READABLE),
  ("WRITEABLE", lambda f, s: f & ~vm.AMDGPU_PTE_WRITEABLE),
  ("SYSTEM", lambda f, s: f & ~vm.AMDGPU_PTE_SYSTEM),
  ("SNOOPED", lambda f, s: f & ~vm.AMDGPU_PTE_SNOOPED),
  ("MTYPE-at-gfx11-bits", lambda f, s: f | 1 << 48),
  ("PRT", lambda f, s: f | vm.AMDGPU_PTE_PRT_GFX12),
  ("FRAG", lambda f, s: f | 9 << 7),
]
PDES = [
  ("VALID", lambda e: e & ~vm.AMDGPU_PTE_VALID),
  ("SYSTEM", lambda e: e | vm.AMDGPU_PTE_SYSTEM | vm.AMDGPU_PTE_SNOOPED),
  ("PDE_PTE", lambda e: e | vm.AMDGPU_PDE_PTE_GFX12),
  ("BFS", lambda e: e | 9 << 58),
]


@pytest.fixture(autouse=True)
def firmware(tmp_path, monkeypatch):
  write_firmware(str(tmp_path / "fw"), chip=NAVI48)
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path / "fw"))


def driver_work() -> None:
  """A Navi48 boot, copies on the SDMA queue, a signal from the compute queue and the SMU's metrics (written through the MM
  hub, whose other clients, the IH, write only on faults); an error the emulated GPU logs is handed
  to the device as a fault at once (test_navi31_mutations.driver_work)."""
  d = open_device("MOCKPCI+AMD:navi48")
  model = d.iface.pci.model
  model.log = lambda line, log=model.log: (log(line), d.report_fault(f"the emulated GPU logged: {line}"))
  try:
    check_copy(d, 4099, 2, 2)
    check_signal_reaches_host(d, "compute")
    assert d.iface.core.smu.reading()["power_limit_w"] > 0   # the SMU writes its metrics through the MM hub
  except BaseException as e:
    d.report_fault(f"the work failed: {e}")
    raise
  finally: d.close()


def test_the_unmutated_driver_works():
  driver_work()


@pytest.mark.parametrize("reg, change", [pytest.param(r, c, id=i) for i, r, c in REGISTERS])
def test_a_wrong_register_field_fails(monkeypatch, reg, change):
  real = AMCore.wreg
  def wreg(self, ip, r, value=None, **fields):
    if r is reg: value, fields = change(r.encode(**fields) if value is None else value) & 0xFFFFFFFF, {}
    real(self, ip, r, value, **fields)
  monkeypatch.setattr(AMCore, "wreg", wreg)
  with pytest.raises(BROKEN): driver_work()


@pytest.mark.parametrize("change", [pytest.param(c, id=i) for i, c in PTES])
def test_a_wrong_pte_bit_fails(monkeypatch, change):
  real = PTEgfx12.pte_flags
  monkeypatch.setattr(PTEgfx12, "pte_flags", classmethod(lambda cls, system, uncached: change(real(system, uncached), system)))
  with pytest.raises(BROKEN): driver_work()


@pytest.mark.parametrize("change", [pytest.param(c, id=i) for i, c in PDES])
def test_a_wrong_pde_bit_fails(monkeypatch, change):
  real = PTEgfx12.pde
  monkeypatch.setattr(PTEgfx12, "pde", classmethod(lambda cls, table: change(real(table))))
  with pytest.raises(BROKEN): driver_work()
