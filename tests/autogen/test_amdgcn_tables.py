"""autogen/amdgcn/<isa>/tables.py is exactly what `python -m autogen.amdgcn <isa>` generates from the installed LLVM 22."""
import importlib, os, subprocess, sys
import pytest
from autogen.amdgcn import ISAS, llvm
from autogen.amdgcn.gfx11 import tables

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(not llvm.available(), reason="libLLVM 22 not installed (scripts/setup.sh)")
@pytest.mark.parametrize("isa", ISAS)
def test_committed_tables_match_regeneration(tmp_path, isa):
  version = importlib.import_module(f"autogen.amdgcn.{isa}.tables").LLVM_VERSION
  if llvm.Disassembler().version() != version:
    pytest.skip(f"tables were generated with LLVM {version}, this machine has {llvm.Disassembler().version()}")
  out = tmp_path / isa / "tables.py"
  subprocess.run([sys.executable, "-m", "autogen.amdgcn", isa, "--out", str(tmp_path)], cwd=ROOT, check=True, capture_output=True, timeout=300)
  with open(os.path.join(ROOT, "autogen", "amdgcn", isa, "tables.py")) as f: committed = f.read()
  assert out.read_text() == committed, f"autogen/amdgcn/{isa}/tables.py is stale: run `python -m autogen.amdgcn {isa}`"


def test_tables_cover_every_family():
  assert set(tables.OPS) >= {"SOP1", "SOP2", "SOPK", "SOPC", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3P", "VOPDX",
                             "VOPDY", "VINTERP", "LDSDIR", "DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF", "MTBUF", "EXP"}
  assert tables.OPS["VOP2"][3][0] == "v_add_f32_e32" and tables.OPS["SOPP"][0x30][0] == "s_endpgm"
  assert sum(len(v) for v in tables.OPS.values()) > 1300


def test_rdna35_targets_add_the_scalar_float_instructions():
  """gfx1150 and gfx1151 sweep alike (one overlay); what they add to gfx1100 is the SALU float set (RDNA3.5 ISA 6.8)."""
  assert tables.TARGETS == {"gfx1100": None, "gfx1150": "gfx1150", "gfx1151": "gfx1150"}
  ov = tables.TARGET_OPS["gfx1150"]
  names = {e[0] for fam in ov.values() for e in fam.values()}
  assert set(ov) == {"SOP2", "SOP1", "SOPC"} and not set(names) & {e[0] for fam in tables.OPS.values() for e in fam.values()}
  assert {"s_fmamk_f32", "s_fmaak_f32", "s_add_f32", "s_fmac_f16", "s_cvt_f32_i32", "s_cvt_hi_f32_f16", "s_cmp_nlt_f16"} <= names
  assert len(names) == 58


def test_gfx12_tables_have_rdna4s_instructions():
  """RDNA4 (RDNA4 ISA guide): split wait counters, named barriers' signal/wait, 96-bit VFLAT/VGLOBAL/VSCRATCH and VBUFFER
  opcodes; gfx1201 sweeps exactly as gfx1200 (an empty overlay)."""
  from autogen.amdgcn.gfx12 import tables as t12
  names = {e[0] for fam in t12.OPS.values() for e in fam.values()}
  assert {"s_wait_loadcnt", "s_wait_storecnt", "s_wait_kmcnt", "s_wait_samplecnt", "s_wait_bvhcnt", "s_wait_expcnt", "s_wait_dscnt",
          "s_wait_loadcnt_dscnt", "s_wait_storecnt_dscnt", "s_barrier_signal", "s_barrier_wait", "s_wait_alu", "global_load_b32",
          "scratch_store_b128", "flat_atomic_add_u32", "buffer_load_b32", "tbuffer_store_format_xyzw", "v_wmma_f32_16x16x16_f16"} <= names
  assert t12.OPS["SOPP"][0x40][0] == "s_wait_loadcnt" and t12.OPS["GLOBAL"][0x14][0] == "global_load_b32"
  assert t12.TARGETS == {"gfx1200": None, "gfx1201": "gfx1201"} and t12.TARGET_OPS["gfx1201"] == {}
