"""The ir3 decoding tables (autogen/ir3, swept from tinymesa's disassembler) and the executor skeleton (emu/kgsl/ir3.py):
hand-encoded instructions whose decode mesa's disassembler confirms, run on 64 lanes against numpy; every unmodelled
instruction or field is an error naming it."""
import os, subprocess, sys
import numpy as np
import pytest
from autogen.ir3 import disasm, tables
from emu.kgsl.ir3 import IR3Error, Lanes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
needs_disasm = pytest.mark.skipif(not disasm.available(), reason="the tinymesa wheel is not installed (scripts/setup.sh)")
OPC = {cat: {e[0]: opc for opc, e in ops.items()} for cat, ops in tables.OPS.items()}
END = 6 << 55                                         # cat0 end (opcode 6 in the tables)


def reg(name: str) -> int:
  """r<n>.<c> -> the 8-bit register field (GPR << 2 | SWIZ)."""
  n, c = name[1:].split(".")
  return int(n) << 2 | "xyzw".index(c)


def cat2(name: str, dst: str, src1: int | str, src2: int | str = 0, absneg1: int = 0) -> int:
  """A full-precision cat2 instruction; a str source is a register, an int an immediate (13:11 = 0b100)."""
  enc = lambda s: reg(s) if isinstance(s, str) else 0b100 << 11 | s & 0x7FF
  return 2 << 61 | OPC[2][name] << 53 | 1 << 52 | reg(dst) << 32 | enc(src2) << 16 | absneg1 << 14 | enc(src1)


@needs_disasm
def test_committed_tables_match_regeneration(tmp_path):
  if disasm.tinymesa_version() != tables.TINYMESA_VERSION:
    pytest.skip(f"tables were swept from tinymesa {tables.TINYMESA_VERSION}, this machine has {disasm.tinymesa_version()}")
  out = tmp_path / "tables.py"
  subprocess.run([sys.executable, "-m", "autogen.ir3", str(out)], cwd=ROOT, check=True, capture_output=True, timeout=300)
  with open(os.path.join(ROOT, "autogen", "ir3", "tables.py")) as f: assert out.read_text() == f.read()


def test_tables_cover_the_alu_categories():
  assert set(tables.OPS) == set(range(8)) and tables.OPC_FIELDS[2] == (58, 53)
  assert tables.OPS[6][0][0] == "ldg.u32" and tables.OPS[6][3][0] == "stg.u32" and tables.OPS[1][0][0] == "mov.f16f16"
  assert tables.OPS[2][0] == ("add.f", 3, False) and tables.OPS[2][0x14] == ("cmps.u", 3, True)
  assert tables.OPS[3][7][0] == "mad.f32" and tables.OPS[4][0][0] == "rcp" and tables.OPS[0][6][0] == "end"
  assert sum(len(v) for v in tables.OPS.values()) > 130


CASES = [  # (instruction, what mesa's disassembler prints, numpy reference of (a, b))
  (cat2("add.f", "r0.w", "r1.x", "r1.y"), "add.f r0.w, r1.x, r1.y", lambda a, b: (a.view(np.float32) + b.view(np.float32)).view(np.uint32)),
  (cat2("mul.f", "r0.w", "r1.x", "r1.y"), "mul.f r0.w, r1.x, r1.y", lambda a, b: (a.view(np.float32) * b.view(np.float32)).view(np.uint32)),
  (cat2("add.f", "r0.w", "r1.x", "r1.y", absneg1=1), "add.f r0.w, (neg)r1.x, r1.y",
   lambda a, b: (b.view(np.float32) - a.view(np.float32)).view(np.uint32)),
  (cat2("add.f", "r0.w", "r1.x", "r1.y", absneg1=2), "add.f r0.w, (abs)r1.x, r1.y",
   lambda a, b: (np.abs(a.view(np.float32)) + b.view(np.float32)).view(np.uint32)),
  (cat2("add.u", "r0.w", "r1.x", "r1.y"), "add.u r0.w, r1.x, r1.y", lambda a, b: a + b),
  (cat2("sub.s", "r0.w", "r1.x", "r1.y"), "sub.s r0.w, r1.x, r1.y", lambda a, b: a - b),
  (cat2("add.s", "r0.w", "r1.x", -5), "add.s r0.w, r1.x, -5", lambda a, b: a + np.uint32(2**32 - 5)),
  (cat2("min.s", "r0.w", "r1.x", "r1.y"), "min.s r0.w, r1.x, r1.y", lambda a, b: np.minimum(a.view(np.int32), b.view(np.int32)).view(np.uint32)),
  (cat2("max.u", "r0.w", "r1.x", "r1.y"), "max.u r0.w, r1.x, r1.y", np.maximum),
  (cat2("and.b", "r0.w", "r1.x", "r1.y"), "and.b r0.w, r1.x, r1.y", np.bitwise_and),
  (cat2("xor.b", "r0.w", "r1.x", "r1.y"), "xor.b r0.w, r1.x, r1.y", np.bitwise_xor),
  (cat2("not.b", "r0.w", "r1.x"), "not.b r0.w, r1.x", lambda a, b: ~a),
  (cat2("shl.b", "r0.w", "r1.x", 7), "shl.b r0.w, r1.x, 7", lambda a, b: a << np.uint32(7)),
  (cat2("ashr.b", "r0.w", "r1.x", 31), "ashr.b r0.w, r1.x, 31", lambda a, b: (a.view(np.int32) >> 31).view(np.uint32)),
  (cat2("mull.u", "r0.w", "r1.x", "r1.y"), "mull.u r0.w, r1.x, r1.y",
   lambda a, b: (a.astype(np.uint64) * b.astype(np.uint64) & 0xFFFFFFFF).astype(np.uint32)),
]


@pytest.mark.parametrize("word,text,ref", CASES, ids=[c[1] for c in CASES])
def test_hand_encoded_cat2_matches_the_disassembler_and_numpy(word, text, ref):
  if disasm.available(): assert disasm.disasm([word]) == [text]
  rng = np.random.default_rng(len(text))
  a, b = rng.integers(0, 2**32, 64, dtype=np.uint32), rng.integers(0, 2**32, 64, dtype=np.uint32)
  if ".f" in text: a, b = (rng.standard_normal(64).astype(np.float32).view(np.uint32) for _ in range(2))
  lanes = Lanes(64)
  lanes.regs[:, reg("r1.x")], lanes.regs[:, reg("r1.y")] = a, b
  assert lanes.run([word, END]) == 2
  np.testing.assert_array_equal(lanes.regs[:, reg("r0.w")], ref(a, b))


def mov(src_t: int, dst_t: int, dst: str, src: int | str) -> int:
  """cat1 mov: a str source is a GPR (form 00), an int a 32-bit immediate (form 10)."""
  form, val = (0, reg(src)) if isinstance(src, str) else (2, src & 0xFFFFFFFF)
  return 1 << 61 | form << 53 | src_t << 50 | dst_t << 46 | reg(dst) << 32 | val


@pytest.mark.parametrize("word,text,value", [
  (mov(3, 3, "r2.z", 0xDEADBEEF), "mov.u32u32 r2.z, 0xdeadbeef", lambda a: np.full_like(a, 0xDEADBEEF)),
  (mov(1, 1, "r2.z", "r1.x"), "mov.f32f32 r2.z, r1.x", lambda a: a),
  (mov(5, 5, "r2.z", "r1.x"), "mov.s32s32 r2.z, r1.x", lambda a: a),
])
def test_hand_encoded_movs_match_the_disassembler(word, text, value):
  if disasm.available(): assert disasm.disasm([word]) == [text]
  lanes = Lanes(8)
  lanes.regs[:, reg("r1.x")] = a = np.arange(8, dtype=np.uint32) * 977
  lanes.run([word, END])
  np.testing.assert_array_equal(lanes.regs[:, reg("r2.z")], value(a))


@pytest.mark.parametrize("word,why", [
  (mov(1, 3, "r0.x", "r1.x"), "mov.f32u32 .*only same-type 32-bit"),
  (mov(0, 0, "r0.x", "r1.x"), "mov.f16f16 .*only same-type 32-bit"),
  (mov(3, 3, "r0.x", "r1.x") | 1 << 55, "ROUND"),
  (mov(3, 3, "r0.x", "r1.x") | 1 << 53, "const, relative"),
  (1 << 61 | 2 << 57, "ir3 instruction swz"),
])
def test_unmodelled_movs_are_named(word, why):
  with pytest.raises(IR3Error, match=why): Lanes(2).run([word, END])


@needs_disasm
def test_end_and_nop_decode_as_the_disassembler_says():
  assert disasm.disasm([0, END]) == ["nop", "end"]


@pytest.mark.parametrize("word,why", [
  (3 << 61 | 7 << 55 | 1 << 52, "ir3 instruction mad.f32 .* is not modelled"),
  (4 << 61, "ir3 instruction rcp .* is not modelled"),
  (cat2("cmps.u", "r0.x", "r1.x", "r1.y"), "ir3 instruction cmps.u .* is not modelled"),
  (2 << 61 | 8 << 53 | 1 << 52, "opcode 0x8 is no ir3 instruction"),
  (6 << 61 | 1 | 1 << 23 | 1 << 24 | 3 << 49, "ir3 instruction ldg.u32 .* is not modelled"),
  (6 << 61 | 4 << 54, "opcode 0x4 is no ir3 instruction"),
  (cat2("add.u", "r0.x", "r1.x", "r1.y") & ~(1 << 52), "half precision"),
  (cat2("add.u", "r0.x", "r1.x", "r1.y") | 1 << 40, "REPEAT"),
  (cat2("add.f", "r0.x", "r1.x", 3), "immediate source of a float"),
  (cat2("add.u", "r0.x", "r1.x", "r1.y", absneg1=1), "ABSNEG on an integer"),
  (cat2("add.u", "r0.x", "r1.x", "r1.y") | 0b010 << 11, "const, relative or float-table"),
  (cat2("add.u", "r0.x", "r1.x", "r1.y") | 0xF8 << 32, "a0/p0 or past r47"),
])
def test_unmodelled_instructions_and_fields_are_named(word, why):
  with pytest.raises(IR3Error, match=why): Lanes(4).run([word, END])


def test_code_without_end_is_an_error():
  with pytest.raises(IR3Error, match="without an `end`"): Lanes(1).run([0, 0])


def test_shifts_past_31_are_refused():
  lanes = Lanes(2)
  lanes.regs[:, reg("r1.y")] = 40
  with pytest.raises(IR3Error, match="shift by 40"): lanes.run([cat2("shr.b", "r0.x", "r1.x", "r1.y"), END])
