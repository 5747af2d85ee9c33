"""autogen/amdgcn/gfx11/tables.py is exactly what `python -m autogen.amdgcn gfx11` generates from the installed LLVM 22."""
import os, subprocess, sys
import pytest
from autogen.amdgcn import llvm
from autogen.amdgcn.gfx11 import tables

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(not llvm.available(), reason="libLLVM 22 not installed (scripts/setup.sh)")
def test_committed_tables_match_regeneration(tmp_path):
  if llvm.Disassembler().version() != tables.LLVM_VERSION:
    pytest.skip(f"tables were generated with LLVM {tables.LLVM_VERSION}, this machine has {llvm.Disassembler().version()}")
  out = tmp_path / "gfx11" / "tables.py"
  subprocess.run([sys.executable, "-m", "autogen.amdgcn", "gfx11", "--out", str(tmp_path)], cwd=ROOT, check=True, capture_output=True, timeout=300)
  with open(os.path.join(ROOT, "autogen", "amdgcn", "gfx11", "tables.py")) as f: committed = f.read()
  assert out.read_text() == committed, "autogen/amdgcn/gfx11/tables.py is stale: run `python -m autogen.amdgcn gfx11`"


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
