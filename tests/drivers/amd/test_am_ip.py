"""The AM driver's IP blocks: the version table picks them and drives the lifecycle (init in table order, fini in
reverse, resume on a partial boot); an IP version with no block is an error naming the block, the version found and
the supported ones; every register access names its generated register (none is built from a string at run time)."""
import ast, pathlib
import pytest
import drivers.amd
from autogen.amd import soc15_hw_ip as hw_ip
from drivers.amd.am import ip_table
from drivers.amd.ip import UnsupportedIPError
from drivers.amd.am.soc21 import SOC21
from drivers.amd.am.gfx_v11_0 import GFXv11_0
from drivers.amd.am.sdma_v6_0 import SDMAv6_0
from drivers.amd.device import AMDDevice
from drivers.amd.pci import PCIIface
from drivers.system import open_model
from tests.drivers.amd.discovery_edit import set_ip_version

NAVI31 = {"GC": (11, 0, 0), "SDMA0": (6, 0, 0), "MMHUB": (3, 0, 0), "NBIO": (4, 3, 0), "MP0": (13, 0, 0), "MP1": (13, 0, 0),
          "HDP": (6, 0, 0), "OSSSYS": (6, 0, 0)}
PHASES = ("sw_init", "hw_init", "resume", "late_init", "set_clockgating", "hw_fini")
ORDER = [block for block, _, _ in ip_table.BLOCKS]


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, str]]:
  """(block, phase) for every lifecycle call the core makes on the blocks of the table."""
  log = []
  for block, _, table in ip_table.BLOCKS:
    for cls in table.values():
      for phase in PHASES:
        def record(self, _real=getattr(cls, phase), _block=block, _phase=phase):
          log.append((_block, _phase))
          return _real(self)
        monkeypatch.setattr(cls, phase, record)
  return log


def boot() -> AMDDevice:
  return AMDDevice("MOCKPCI+AMD", PCIIface(open_model("navi31", 0, "am")))


def test_blocks_init_in_table_order_and_fini_in_reverse(calls):
  dev = boot()
  dev.close()
  assert calls == ([(b, "sw_init") for b in ORDER] + [(b, "hw_init") for b in ORDER] + [(b, "late_init") for b in ORDER] +
                   [(b, "set_clockgating") for b in ORDER] + [(b, "hw_fini") for b in ORDER[::-1]])


def test_a_partial_boot_resumes_every_block_in_table_order(calls):
  boot().close()
  calls.clear()
  dev = boot()                                   # the GPU was left clean with our firmware running
  assert dev.iface.core.partial_boot
  dev.close()
  assert calls == ([(b, "sw_init") for b in ORDER] + [(b, "resume") for b in ORDER] + [(b, "late_init") for b in ORDER] +
                   [(b, "set_clockgating") for b in ORDER] + [(b, "hw_fini") for b in ORDER[::-1]])


def test_navi31_versions_pick_the_gc11_blocks():
  found = ip_table.classes(ip_table.BLOCKS + ip_table.HELPERS, NAVI31)
  assert list(found) == ORDER + [h for h, _, _ in ip_table.HELPERS]
  assert found["SOC"] is SOC21 and found["GFX"] is GFXv11_0 and found["SDMA"] is SDMAv6_0


def test_versions_without_a_block_are_named_with_the_supported_ones():
  rdna2 = dict(NAVI31, GC=(10, 3, 0), SDMA0=(5, 2, 0))
  with pytest.raises(UnsupportedIPError) as e: ip_table.classes(ip_table.BLOCKS + ip_table.HELPERS, rdna2)
  msg = str(e.value)
  for block in ("SOC", "GMC", "GFX", "GFXHUB"): assert f"no {block} block for GC 10.3.0 (supported: 11.0.0, 12.0.0, 12.0.1)" in msg
  assert "no SDMA block for SDMA0 5.2.0 (supported: 6.0.0, 7.0.0, 7.0.1)" in msg
  assert "PSP" not in msg and "IH " not in msg                   # the blocks that have a class are not listed


def test_a_gpu_reporting_an_unsupported_sdma_version_fails_to_open_naming_it():
  pci = open_model("navi31", 0, "am")
  set_ip_version(pci, hw_ip.SDMA0_HWID, (5, 2, 0))
  with pytest.raises(UnsupportedIPError, match=r"^mock-0: this driver has no SDMA block for SDMA0 5\.2\.0 \(supported: 6\.0\.0, 7\.0\.0, 7\.0\.1\)$"):
    PCIIface(pci)
  open_model("navi31", 0, "am").close()          # the failed open released the device


# --- greppability: register names are written out, never built
def computed_names(source: str) -> dict[int, str]:
  """{line: what} for places that build an attribute name at run time (getattr(gc, f"reg...")) or a register name in an
  f-string."""
  out = {}
  for node in ast.walk(ast.parse(source)):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr")
        and len(node.args) > 1 and isinstance(node.args[1], (ast.JoinedStr, ast.BinOp))):
      out[node.lineno] = f"{node.func.id} with a computed name"
    elif (isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant)
          and str(node.values[0].value).startswith(("reg", "mm", "ix"))):
      out.setdefault(node.lineno, f"f-string {ast.unparse(node)}")
  return out


def test_the_check_finds_built_register_names():
  assert sorted(computed_names('r = getattr(gc, f"regGCVM_L2_CNTL{n}")\nw = getattr(mp, "regMP1_SMN_C2PMSG_" + str(n))\n'
                               'x = f"regIH_RB_BASE{sfx}"\nok = getattr(d, "regSCRATCH_REG7")\n')) == [1, 2, 3]


def test_every_register_access_in_drivers_amd_names_its_generated_register():
  root = pathlib.Path(drivers.amd.__file__).parent
  found = {str(p.relative_to(root)): names for p in sorted(root.rglob("*.py")) if (names := computed_names(p.read_text()))}
  assert found == {}
  source = "\n".join(p.read_text() for p in root.rglob("*.py"))
  for reg in ("gc.regGCVM_L2_CNTL3", "mmhub.regMMVM_L2_CNTL3", "mp.regMP1_SMN_C2PMSG_90", "mp.regMP0_SMN_C2PMSG_81",
              "oss.regIH_RB_BASE_RING1", "gc.regGCVM_INVALIDATE_ENG17_REQ"):
    assert reg in source, f"{reg} is not named anywhere in drivers/amd"
