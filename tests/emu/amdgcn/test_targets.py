"""The target registry (emu/amdgcn/targets.py) against the generated tables: every target has its generation's sweep,
every swept LLVM processor is a target, targets share a generation's rows where LLVM printed the same ones, and a
decoded instruction is formatted with its own target's tables."""
import types
import pytest
from autogen.amdgcn import ISAS, llvm
from emu.amdgcn import targets
from emu.amdgcn.decode import DecodeError, decode
from emu.amdgcn.disasm import disasm

S_ADD_F32 = bytes.fromhex("020300a0")   # s_add_f32 s0, s2, s3 (llvm-mc-22 -mcpu=gfx1150 --show-encoding: [0x02,0x03,0x00,0xa0])


def test_every_swept_processor_is_a_target_and_every_target_is_swept():
  assert set(targets.TARGETS) == set(llvm.TARGETS)
  for t in targets.TARGETS.values():
    assert t.isa in ISAS and llvm.ISA_OF[t.name] == t.isa and t.name in t.tables.TARGETS


def test_rdna35_rows_are_gfx1100s_plus_the_scalar_float_set():
  base, r35 = targets.get("gfx1100").ops, targets.get("gfx1150").ops
  assert targets.get("gfx1151").ops == r35
  assert all(r35[fam][op] == e for fam in base for op, e in base[fam].items())   # nothing of gfx1100's changes
  added = {fam: set(r35[fam]) - set(base[fam]) for fam in r35}
  assert {fam for fam, ops in added.items() if ops} == {"SOP1", "SOP2", "SOPC"} and sum(map(len, added.values())) == 58


def test_an_instruction_decodes_and_prints_with_its_targets_table():
  assert decode(S_ADD_F32, 0, "gfx1151").target == "gfx1151"
  assert disasm(S_ADD_F32, "gfx1150") == ["s_add_f32 s0, s2, s3"]
  with pytest.raises(DecodeError, match="not a gfx1100 instruction"): decode(S_ADD_F32, 0, "gfx1100")


def test_unknown_targets_and_gc_versions_say_what_exists():
  with pytest.raises(ValueError, match="unknown target 'gfx942': one of gfx1100, gfx1150, gfx1151, gfx1200, gfx1201"):
    decode(S_ADD_F32, 0, "gfx942")
  assert targets.for_gc((11, 5, 1)).name == "gfx1151"
  assert targets.for_gc((12, 0, 0)).name == "gfx1200" and targets.for_gc((12, 0, 1)).name == "gfx1201"
  with pytest.raises(ValueError, match=r"GC 9\.4\.3"): targets.for_gc((9, 4, 3))


def test_a_target_whose_operand_codes_differ_from_rdnas_is_refused(monkeypatch):
  """gfx9 (CDNA) numbers M0 124 and has no NULL: the code generators implement RDNA's codes, so such a table is refused."""
  fake = targets.Target("gfx9test", "gfx11", (9, 4, 2), (64,))
  fake.__dict__["encodings"] = types.SimpleNamespace(**{**vars(targets.get("gfx1100").encodings), "M0": 124, "NULL": None})
  monkeypatch.setitem(targets.TARGETS, fake.name, fake)
  with pytest.raises(ValueError, match="gfx9test: its operand codes NULL, M0 differ from the RDNA ones"): decode(S_ADD_F32, 0, fake.name)


def test_kfd_gfx_target_version_follows_the_target():
  """KFD's gfx_target_version encoding (kfd_device.c: 110000 for GC 11.0.0, 120001 for GC 12.0.1); the KFD model's topology
  reports its GPU's target's."""
  from emu.amdgpu import kfd
  assert [targets.get(n).gfx_target_version for n in ("gfx1100", "gfx1151", "gfx1200", "gfx1201")] == [110000, 110501, 120000, 120001]
  assert kfd.GPU_PROPERTIES["gfx_target_version"] == targets.for_gc(kfd.IP_VERSIONS["GC"]).gfx_target_version == 110000
