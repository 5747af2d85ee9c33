"""Everything under the IP table is picked by the discovered IP versions (drivers/amd/ip.py, drivers/amd/am/ip_table.py):
register modules, the PM4 and SDMA packet formats, the PTE layout. Another version of a block is its module and a table
row: the tests below add made-up versions (HDP 6.0.99, SDMA 6.0.99) with nothing but a class defined here and rows added
through the tables' public API, boot the emulated GPU with its discovery table rewritten to report them, and see the new
code run. The PTE layouts are checked bit by bit against amdgpu_vm.h / gmc_v11_0.c / gmc_v12_0.c; the compiler target
follows LLVM's AMDGPUUsage processor names."""
import ast, pathlib, re, shutil, types
import numpy as np
import pytest
import drivers.amd
from autogen.amd import gc_11_0_0, nbio_4_3_0, soc15_hw_ip as hw_ip
from drivers.amd import ip, pm4_nv, sdma_v6_0_pkt
from drivers.amd.ip import UnsupportedIPError
from drivers.amd.am import firmware_gc11, ip_table
from drivers.amd.am.hdp_v6_0 import HDPv6_0
from drivers.amd.am.sdma_v6_0 import SDMAv6_0
from drivers.amd.am.mm import MemoryManager, PAGE, VA_BASE
from drivers.amd.am.pte import SHIFTS, ADDR_MASK
from drivers.amd.am.pte_gfx11 import PTEgfx11
from drivers.amd.am.pte_gfx12 import PTEgfx12
from drivers.amd.device import AMDDevice
from drivers.amd.kfd import KFDIface, gfx_arch
from drivers.amd.pci import PCIIface
from drivers.system import open_model
from drivers.system.kernel import kernel_interface
from emu.amdgpu.fwbuild import write_firmware
from tests.drivers.amd.discovery_edit import set_ip_version


def bits(*positions: int) -> int: return sum(1 << b for b in positions)


# --- PTE layouts: the bit positions amdgpu_vm.h defines: VALID 0, SYSTEM 1, SNOOPED 2, EXECUTABLE 4, READABLE 5,
# WRITEABLE 6; MTYPE at 48-50 (AMDGPU_PTE_MTYPE_NV10, gfx10/11) or 54-55 (AMDGPU_PTE_MTYPE_GFX12); the huge-leaf marker
# AMDGPU_PDE_PTE at 54 (gfx10/11) or AMDGPU_PDE_PTE_GFX12 at 63; MTYPE_UC = 3 (soc21_enum.h, soc24_enum.h)
@pytest.mark.parametrize("layout, mtype_bits, huge_bit", [(PTEgfx11, (48, 49, 50), 54), (PTEgfx12, (54, 55), 63)], ids=["gfx11", "gfx12"])
def test_a_pte_layout_puts_each_field_where_its_generation_has_it(layout, mtype_bits, huge_bit):
  leaf = bits(0, 4, 5, 6)
  assert layout.pte_flags(system=False, uncached=False) == leaf
  assert layout.pte_flags(system=True, uncached=False) == leaf | bits(1, 2)
  assert layout.pte_flags(system=True, uncached=True) == leaf | bits(1, 2) | 3 << mtype_bits[0]
  assert layout.MTYPE_MASK == bits(*mtype_bits) and layout.PDE_PTE == 1 << huge_bit
  assert layout.pde(0x1234_5000) == 0x1234_5000 | 1                     # VALID and the address, nothing else
  with pytest.raises(ValueError, match="does not fit"): layout.mtype(1 << len(mtype_bits))


def test_the_same_uncached_leaf_differs_between_gfx11_and_gfx12():
  """gfx12's MTYPE_UC sets bit 54, which is gfx11's huge-leaf marker; gfx11's MTYPE bits mean nothing to gfx12."""
  g11, g12 = PTEgfx11.pte_flags(False, True), PTEgfx12.pte_flags(False, True)
  assert g12 & PTEgfx11.PDE_PTE and not g12 & PTEgfx11.MTYPE_MASK
  assert not g11 & PTEgfx12.MTYPE_MASK and not g11 & PTEgfx12.PDE_PTE


def test_the_page_tables_are_written_in_the_layout_picked_by_the_gc_version():
  vram = np.zeros(128 << 20, np.uint8)
  mm = MemoryManager(vram, len(vram), ip_table.PTE.pick((12, 0, 1)))
  mm.map(VA_BASE, np.array([0x40_0000], np.uint64), system=False)
  mm.map(VA_BASE + PAGE, np.array([0x7_0000_0000], np.uint64), system=True, uncached=True)
  table = mm.root
  for shift in SHIFTS[:3]:                                   # VA_BASE indexes entry (VA - VA_BASE) >> shift = 0 at each level
    entry = int(mm.u64[table >> 3])
    assert entry & ~ADDR_MASK == bits(0)                    # a table entry: VALID only
    table = entry & ADDR_MASK
  assert [int(e) for e in mm.u64[(table >> 3):(table >> 3) + 2]] == [0x40_0000 | bits(0, 4, 5, 6),
                                                                      0x7_0000_0000 | bits(0, 1, 2, 4, 5, 6, 54, 55)]
  assert mm.mapped_vram() == PAGE
  mm.u64[(mm.root >> 3) + 1] = 0x8000_0000 | bits(0, 63)   # a huge leaf in the PDB2: bit 63 marks it on gfx12 (512 GiB)
  assert mm.mapped_vram() == PAGE + (1 << SHIFTS[0])


# --- the tables
def test_a_version_is_served_by_the_greatest_row_of_its_major_not_above_it():
  t = ip.VersionTable("thing", "GC", {(11, 0, 0): "a", (11, 5, 0): "b", (12, 0, 0): "c"})
  assert [t.row(v) for v in ((11, 0, 0), (11, 0, 3), (11, 5, 1), (12, 0, 1))] == [(11, 0, 0), (11, 0, 0), (11, 5, 0), (12, 0, 0)]
  for v in ((10, 3, 0), (9, 4, 2)):
    supported = r"\(supported: 11\.0\.0, 11\.5\.0, 12\.0\.0\)$"
    with pytest.raises(UnsupportedIPError, match=rf"^this driver has no thing for GC {v[0]}\.{v[1]}\.{v[2]} " + supported):
      t.row(v)
  with pytest.raises(UnsupportedIPError): ip.VersionTable("thing", "GC", {(11, 5, 0): "b"}).row((11, 0, 0))


def test_the_tables_pick_the_gfx11_modules_for_navi31_and_a_layout_per_generation():
  assert ip.PM4.pick((11, 0, 0)) is pm4_nv and ip.SDMA.pick((6, 0, 0)) is sdma_v6_0_pkt
  assert ip_table.PTE.pick((11, 0, 0)) is ip_table.PTE.pick((11, 5, 1)) is PTEgfx11
  assert ip_table.PTE.pick((12, 0, 0)) is ip_table.PTE.pick((12, 0, 1)) is PTEgfx12
  with pytest.raises(UnsupportedIPError, match=r"no PTE layout for GC 9\.4\.3 \(supported: 11\.0\.0, 12\.0\.0\)"): ip_table.PTE.pick((9, 4, 3))
  regs = ip.Registers({"GC": (11, 0, 0), "SDMA0": (6, 0, 0), "NBIO": (4, 3, 0)})     # what KFD reports
  assert regs.gc is gc_11_0_0 and regs.nbio is nbio_4_3_0
  with pytest.raises(AttributeError, match=r"the device layer has no register module for IP HDP \(it has: gc, nbio\)"): regs.hdp


def test_the_compiler_target_and_firmware_list_follow_the_gc_version():
  # LLVM AMDGPUUsage processor names: gfx<major><minor><stepping>, minor and stepping in hex
  assert [ip.target(v) for v in ((11, 0, 0), (11, 5, 1), (12, 0, 1), (9, 4, 2), (9, 0, 10))] == \
    ["gfx1100", "gfx1151", "gfx1201", "gfx942", "gfx90a"]
  assert [gfx_arch(v) for v in (110000, 120001, 90402, 90010)] == ["gfx1100", "gfx1201", "gfx942", "gfx90a"]   # KFD's encoding
  assert ip_table.FIRMWARE.pick((11, 0, 0)) is firmware_gc11
  assert ip_table.FIRMWARE.pick((12, 0, 1)).__name__ == "drivers.amd.am.firmware_gc12"
  with pytest.raises(UnsupportedIPError, match=r"no firmware list for GC 10\.3\.0 \(supported: 11\.0\.0, 12\.0\.0\)"):
    ip_table.FIRMWARE.pick((10, 3, 0))


@pytest.mark.parametrize("iface", ["MOCKPCI", "MOCKKFD"])
def test_both_interfaces_give_the_device_what_their_versions_pick(iface):
  dev = AMDDevice(f"{iface}+AMD", PCIIface(open_model("navi31", 0, "am")) if iface == "MOCKPCI" else KFDIface(kernel_interface("kfd")))
  try:
    assert dev.iface.ip_versions["GC"] == (11, 0, 0) and dev.arch == "gfx1100"
    assert (dev.regs.gc, dev.regs.nbio, dev.pm4, dev.sdma_pkt) == (gc_11_0_0, nbio_4_3_0, pm4_nv, sdma_v6_0_pkt)
  finally: dev.close()


# --- only the module owning a version imports it: versioned register/enum/packet headers (autogen.amd), the packet
# formats and PTE layouts (drivers.amd); the IP table's rows import the block classes they name
VERSIONED = {"autogen.amd": re.compile(r"\d+_\d+_\d+|soc\d+_enum|v\d+_structs|^nvd$|_v\d+"),
             "drivers.amd": re.compile(r"^pm4_|_pkt$"), "drivers.amd.am": re.compile(r"^pte_gfx")}
OWNER = re.compile(r"_v\d+_\d+|_gfx\d+|^soc\d+$|^pm4_nv$|_pkt$")


def versioned_imports(source: str) -> set[str]:
  out = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.ImportFrom) and node.module in VERSIONED:
      out |= {a.name for a in node.names if VERSIONED[node.module].search(a.name)}
    elif isinstance(node, (ast.ImportFrom, ast.Import)):
      for name in [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]:
        package, _, module = (name or "").rpartition(".")
        if package in VERSIONED and VERSIONED[package].search(module): out.add(name)
  return out


def test_the_check_finds_versioned_imports():
  assert versioned_imports("from autogen.amd import nvd, gc_11_0_0 as gc, discovery\nimport drivers.amd.am.pte_gfx12\n"
                           "from drivers.amd.sdma_v6_0_pkt import pkt\nfrom autogen.amd import soc15_hw_ip\n") == \
    {"nvd", "gc_11_0_0", "drivers.amd.am.pte_gfx12", "drivers.amd.sdma_v6_0_pkt"}


def test_versioned_register_and_packet_modules_are_imported_only_by_a_module_of_a_version():
  root = pathlib.Path(drivers.amd.__file__).parent
  found = {str(p.relative_to(root)): names for p in sorted(root.rglob("*.py")) if (names := versioned_imports(p.read_text()))}
  assert "am/gfx_v11_0.py" in found and "pm4_nv.py" in found                  # the check sees them
  assert {f: n for f, n in found.items() if not OWNER.search(pathlib.Path(f).stem)} == {}


def test_nothing_in_the_driver_names_a_model():
  """Model names come from the registered models (hcq.models), never from the driver or the tools."""
  top = pathlib.Path(drivers.amd.__file__).parents[2]
  named = [str(p.relative_to(top)) for d in ("drivers", "tools", "compute") for p in sorted((top / d).rglob("*.py")) if "navi31" in p.read_text()]
  assert named == []


# --- made-up versions of existing blocks: a class and a row each
def roundtrip(dev: AMDDevice) -> bool:
  data = np.random.default_rng(0).integers(0, 1 << 32, 3 * 4096 // 4, dtype=np.uint32)
  buf = dev.alloc(data.nbytes)
  buf.copyin(data.data)
  return np.array_equal(np.frombuffer(buf.copyout(), np.uint32), data)


class HDPv6_0_99(HDPv6_0):
  """A made-up HDP 6.0.99: HDP 6.0's behaviour, and a record of what of it ran."""
  ran: list[str] = []
  def flush_hdp(self) -> None:
    self.ran.append("flush_hdp")
    super().flush_hdp()
  def update_clock_gating(self) -> None:
    self.ran.append("update_clock_gating")
    super().update_clock_gating()


def test_a_new_hdp_version_is_its_class_and_one_row(monkeypatch):
  pci = open_model("navi31", 0, "am")
  set_ip_version(pci, hw_ip.HDP_HWID, (6, 0, 99))
  with pytest.raises(UnsupportedIPError, match=r"^mock-0: this driver has no HDP block for HDP 6\.0\.99 \(supported: 6\.0\.0, 7\.0\.0\)$"):
    PCIIface(pci)
  monkeypatch.setitem(ip_table.row("HDP"), (6, 0, 99), HDPv6_0_99)
  monkeypatch.setattr(HDPv6_0_99, "ran", [])
  dev = AMDDevice("MOCKPCI+AMD", PCIIface(open_model("navi31", 0, "am")))
  try:
    assert dev.iface.ip_versions["HDP"] == (6, 0, 99) and type(dev.iface.core.hdp) is HDPv6_0_99
    assert {"flush_hdp", "update_clock_gating"} <= set(HDPv6_0_99.ran) and roundtrip(dev)
  finally: dev.close()


def test_a_new_sdma_version_is_its_block_row_and_its_packet_format_row(monkeypatch, tmp_path):
  """SDMA 6.0.99: the SDMA 6.0 block serves it (one row) and a packet format of its own (one row), here SDMA 6.0's
  with its COPY_LINEAR recorded; its firmware is the file named for its version (sdma_6_0_99.bin)."""
  write_firmware(str(tmp_path))
  shutil.copy(tmp_path / "sdma_6_0_0.bin", tmp_path / "sdma_6_0_99.bin")
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  copies: list[int] = []
  fmt = types.SimpleNamespace(**{k: v for k, v in vars(sdma_v6_0_pkt).items() if not k.startswith("__")})
  fmt.copy_linear = lambda dst, src, size: copies.append(size) or sdma_v6_0_pkt.copy_linear(dst, src, size)
  monkeypatch.setitem(ip_table.row("SDMA"), (6, 0, 99), SDMAv6_0)
  monkeypatch.setitem(ip.SDMA, (6, 0, 99), fmt)
  pci = open_model("navi31", 0, "am")
  set_ip_version(pci, hw_ip.SDMA0_HWID, (6, 0, 99))
  dev = AMDDevice("MOCKPCI+AMD", PCIIface(pci))
  try:
    assert dev.sdma_pkt is fmt and roundtrip(dev) and copies
    assert dev.iface.core.fw.files["sdma"] == str(tmp_path / "sdma_6_0_99.bin")
  finally: dev.close()


@pytest.mark.parametrize("gc,mp,sdma", [((12, 0, 1), (14, 0, 2), (7, 0, 1)), ((12, 0, 0), (14, 0, 3), (7, 0, 0))], ids=["navi48", "navi44"])
def test_gfx12_versions_pick_the_gfx12_blocks(gc, mp, sdma):
  from autogen.amd import gc_12_0_0, nbif_6_3_1
  versions = {"GC": gc, "OSSSYS": (7, 0, 0), "MP0": mp, "MP1": mp, "SDMA0": sdma, "NBIO": (6, 3, 1), "HDP": (7, 0, 0), "MMHUB": (4, 1, 0)}
  found = {b: c.__name__ for b, c in ip_table.classes(ip_table.BLOCKS + ip_table.HELPERS, versions).items()}
  assert found == {"SOC": "SOC24", "GMC": "GMCv12_0", "IH": "IHv7_0", "PSP": "PSPv14_0", "SMU": "SMUv14_0", "GFX": "GFXv12_0",
                   "SDMA": "SDMAv7_0", "NBIO": "NBIFv6_3_1", "HDP": "HDPv7_0", "MMHUB": "MMHUBv4_1_0", "GFXHUB": "GFXHUBv12_0"}
  assert (ip.REGISTERS["GC"].pick(gc), ip.REGISTERS["NBIO"].pick((6, 3, 1))) == (gc_12_0_0, nbif_6_3_1)
  assert (ip.PM4.pick(gc), ip.SDMA.pick(sdma), ip_table.PTE.pick(gc).__name__) == (pm4_nv, sdma_v6_0_pkt, "PTEgfx12")
