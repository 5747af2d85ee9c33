"""RDNA3.5 (gfx1150 / gfx1151) scalar float instructions, selected by the target, against numpy float32 / float16.
Facts: AMD "RDNA3.5" ISA guide 6.8 (scalar float ops give their VALU counterparts' results: MODE's denormal flush, the
first NaN operand quieted); f16 ops read bits 15:0 and zero bits 31:16 of the result)
and 16.1-16.3 (the pseudocode: S_FMAAK/S_FMAMK take the literal, S_FMAC accumulates, S_MIN/S_MAX in IEEE mode
return an sNaN quieted and ignore a qNaN, S_CVT_HI_F32_F16 converts bits 31:16)."""
import numpy as np
import pytest
from exec_helpers import run_wave, assemble
from emu.amdgcn import Memory, run, WaveTrap, disasm
from emu.amdgcn.decode import decode, DecodeError

F32 = lambda x: int(np.float32(x).view(np.uint32))
F16 = lambda x: int(np.float16(x).view(np.uint16))
SNAN, QNAN = 0x7F800005, 0x7FC00007
VALS = [1.5, -2.25, 3e38, -0.0, 0.0, 1e-3, 7.0, -1e30, 2.0 ** -126, 123456.789, np.inf, -np.inf]


def flush(x: np.float32) -> np.float32:   # the default mode flushes f32 denormals (MODE.FP_DENORM)
  return np.copysign(np.float32(0), x) if 0 < abs(x) < 2.0 ** -126 else x


def salu(lines: list[str], outs: list[int], target: str = "gfx1150"):
  return run_wave("\n".join(lines), sout=outs, target=target).s


def _binary_cases():
  rng = np.random.default_rng(11)
  pairs = [(a, b) for a in VALS for b in VALS[::3]] + [tuple(rng.standard_normal(2) * 10.0 ** rng.integers(-30, 30, 2)) for _ in range(24)]
  return [(np.float32(a), np.float32(b)) for a, b in pairs]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "min", "max"])
def test_f32_arithmetic_matches_numpy(op):
  ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[op]
  cases = _binary_cases()
  for k in range(0, len(cases), 24):
    chunk = cases[k:k + 24]
    lines = [l for i, (a, b) in enumerate(chunk)
             for l in (f"s_mov_b32 s0, {F32(a):#x}", f"s_mov_b32 s1, {F32(b):#x}", f"s_{op}_f32 s{10 + i}, s0, s1")]
    got = salu(lines, [10 + i for i in range(len(chunk))])
    for i, (a, b) in enumerate(chunk):
      with np.errstate(all="ignore"): want = flush(ref(a, b))
      w = F32(want)
      if op in ("min", "max") and a == 0 and b == 0:       # -0 < +0 (pseudocode LT_NEG_ZERO / GT_NEG_ZERO)
        neg = np.signbit(a) or np.signbit(b) if op == "min" else np.signbit(a) and np.signbit(b)
        w = F32(-0.0) if neg else 0
      if np.isnan(want): assert got[10 + i] == 0x7FC00000, (op, a, b, hex(got[10 + i]))            # inf - inf, 0 * inf
      else: assert got[10 + i] == w, f"s_{op}_f32 {a!r} {b!r}: {got[10 + i]:#x}, want {w:#x}"


def test_f32_nan_operands_and_ieee_min_max():
  # first NaN operand, quieted; IEEE mode (the compute default): min/max return an sNaN quieted, ignore a qNaN
  cases = [("s_add_f32", SNAN, F32(1.0), SNAN | 0x400000), ("s_mul_f32", F32(2.0), QNAN, QNAN), ("s_sub_f32", QNAN, SNAN, QNAN),
           ("s_min_f32", SNAN, F32(1.0), SNAN | 0x400000), ("s_max_f32", F32(1.0), SNAN, SNAN | 0x400000),
           ("s_min_f32", QNAN, F32(-3.0), F32(-3.0)), ("s_max_f32", F32(5.0), QNAN, F32(5.0)), ("s_min_f32", QNAN, SNAN, SNAN | 0x400000)]
  lines = [l for i, (op, a, b, _) in enumerate(cases) for l in (f"s_mov_b32 s0, {a:#x}", f"s_mov_b32 s1, {b:#x}", f"{op} s{10 + i}, s0, s1")]
  got = salu(lines, [10 + i for i in range(len(cases))])
  assert [got[10 + i] for i in range(len(cases))] == [w for *_, w in cases]


def test_f32_fma_forms_literal_and_accumulator():
  got = salu(["s_mov_b32 s0, 3.0", "s_mov_b32 s1, 0.5", "s_mov_b32 s12, 10.0",
              "s_fmaak_f32 s10, s0, s1, 0x41200000",        # 3 * 0.5 + 10
              "s_fmamk_f32 s11, s0, 0x40800000, s1",        # 3 * 4 + 0.5
              "s_fmac_f32 s12, s0, s1",                     # 3 * 0.5 + 10
              "s_mov_b32 s2, 0x3f800001", "s_mov_b32 s3, 0xbf800002", "s_mov_b32 s13, 1.0",
              "s_fmac_f32 s13, s2, s2", "s_fmaak_f32 s14, s2, s2, 0xbf800002"], [10, 11, 12, 13, 14])
  assert (got[10], got[11], got[12]) == (F32(11.5), F32(12.5), F32(11.5))
  # fused: (1 + 2^-23)^2 - (1 + 2^-22) = 2^-46 exactly (rounding the product first would give 0)
  assert got[13] == F32(np.float32(2.0) + np.float32(2.0 ** -22)) and got[14] == F32(2.0 ** -46)


def test_conversions_and_rounding():
  vals = [2.5, -2.5, 3.7, -0.2, 1e10, -1e10, np.nan, 65520.0, 1e-5]
  lines, outs = [], []
  for i, x in enumerate(vals):
    lines += [f"s_mov_b32 s0, {F32(x):#x}"] + [f"{op} s{10 + 8 * i + k}, s0" for k, op in enumerate(
      ("s_ceil_f32", "s_floor_f32", "s_trunc_f32", "s_rndne_f32", "s_cvt_i32_f32", "s_cvt_u32_f32", "s_cvt_f16_f32"))]
    outs += [10 + 8 * i + k for k in range(7)]
  got = salu(lines, outs)
  for i, x in enumerate(vals):
    x32 = np.float32(x)
    g = [got[10 + 8 * i + k] for k in range(7)]
    if np.isnan(x32):
      assert g[4] == 0 and g[5] == 0 and g[6] & 0x7E00 == 0x7E00   # fact 25: NaN -> 0; f16 NaN quiet
      continue
    assert g[:4] == [F32(np.ceil(x32)), F32(np.floor(x32)), F32(np.trunc(x32)), F32(np.rint(x32))], x
    t = int(np.trunc(float(x32)))                                           # fact 25: truncate, saturate
    assert g[4] == min(max(t, -2 ** 31), 2 ** 31 - 1) & 0xFFFFFFFF and g[5] == min(max(t, 0), 2 ** 32 - 1)
    with np.errstate(over="ignore"): assert g[6] == F16(x32), x        # RNE to f16, bits 31:16 zero
  got = salu(["s_mov_b32 s0, 0xc1c80000", "s_cvt_f32_i32 s10, s0", "s_cvt_f32_u32 s11, s0", "s_mov_b32 s1, 0x3c00c500",
              "s_cvt_f32_f16 s12, s1", "s_cvt_hi_f32_f16 s13, s1", "s_mov_b32 s2, 0x3f8c0000", "s_mov_b32 s3, 0xc7800000",
              "s_cvt_pk_rtz_f16_f32 s14, s2, s3"], [10, 11, 12, 13, 14])
  assert got[10] == F32(np.float32(np.int32(np.uint32(0xC1C80000).view(np.int32)))) and got[11] == F32(np.float32(0xC1C80000))
  assert got[12] == F32(-5.0) and got[13] == F32(1.0)
  assert got[14] == 0xFBFF << 16 | 0x3C60     # round toward zero: 1.09375 stays, -65536 -> -65504 (not -inf)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "min", "max"])
def test_f16_arithmetic_low_half_in_high_half_zero(op):
  ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[op]
  pairs = [(np.float16(a), np.float16(b)) for a in (1.5, -2.0, 60000.0, 0.001, 3.14) for b in (0.5, -7.0, 1000.0, 6e-5)]
  lines = [l for i, (a, b) in enumerate(pairs) for l in (f"s_mov_b32 s0, {0xAAAA0000 | F16(a):#x}", f"s_mov_b32 s1, {0x55550000 | F16(b):#x}",
                                                          f"s_mov_b32 s{10 + i}, -1", f"s_{op}_f16 s{10 + i}, s0, s1")]
  got = salu(lines, [10 + i for i in range(len(pairs))])
  with np.errstate(all="ignore"):
    assert [got[10 + i] for i in range(len(pairs))] == [F16(ref(a, b)) for a, b in pairs]


def test_f16_fmac_rounding_and_rounding_ops():
  got = salu(["s_mov_b32 s0, 0x3c01", "s_mov_b32 s1, 0x3c01", "s_mov_b32 s10, 0xbc02", "s_fmac_f16 s10, s0, s1",
              "s_mov_b32 s2, 0xffff3e00", "s_ceil_f16 s11, s2", "s_floor_f16 s12, s2", "s_rndne_f16 s13, s2", "s_trunc_f16 s14, s2",
              "s_add_f16 s15, s2, 1.0"], [10, 11, 12, 13, 14, 15])
  assert got[10] == F16(2.0 ** -20)                                       # (1 + 2^-10)^2 - (1 + 2^-9), fused
  assert [got[k] for k in (11, 12, 13, 14)] == [F16(2.0), F16(1.0), F16(2.0), F16(1.0)]    # 1.5, round half even -> 2
  assert got[15] == F16(2.5)                                              # the inline constant 1.0 is the f16 0x3c00


CMPS = {"lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "lg": lambda a, b: (a < b) | (a > b), "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
        "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)), "ngt": lambda a, b: ~(a > b),
        "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b)}


@pytest.mark.parametrize("t", ["f32", "f16"])
def test_float_compares_set_scc(t):
  pairs = [(1.0, 2.0), (2.0, 1.0), (3.0, 3.0), (-0.0, 0.0), (np.nan, 1.0), (1.0, np.nan)]
  dt, enc = (np.float32, F32) if t == "f32" else (np.float16, F16)
  lines, outs, want = [], [], []
  for c, ref in CMPS.items():
    for a, b in pairs:
      k = len(outs)
      lines += [f"s_mov_b32 s0, {enc(a):#x}", f"s_mov_b32 s1, {enc(b):#x}", f"s_cmp_{c}_{t} s0, s1", f"s_cselect_b32 s{10 + k % 80}, 1, 0"]
      outs.append(10 + k % 80)
      with np.errstate(invalid="ignore"): want.append(int(bool(ref(np.array(a, dt), np.array(b, dt)))))
      if len(outs) == 80 or (c == "nlt" and (a, b) == pairs[-1]):
        got = salu(lines, outs)
        assert [got[o] for o in outs] == want[-len(outs):], t
        lines, outs = [], []


def test_gfx1100_has_no_scalar_float_instructions():
  code = assemble("s_add_f32 s0, s1, s2\ns_endpgm", cpu="gfx1150")
  assert disasm(code, target="gfx1150") == ["s_add_f32 s0, s1, s2", "s_endpgm"]
  assert disasm(code, target="gfx1151") == ["s_add_f32 s0, s1, s2", "s_endpgm"]
  with pytest.raises(DecodeError, match="SOP2 opcode 0x40 is not a gfx1100 instruction"): decode(code)
  assert disasm(code, target="gfx1200") == ["s_add_f32 s0, s1, s2", "s_endpgm"]   # RDNA4 keeps them
  with pytest.raises(ValueError, match="unknown target"): decode(code, target="gfx942")
  mem = Memory()
  pc = mem.alloc(len(code))
  mem.write(pc, code)
  with pytest.raises(WaveTrap, match="cannot decode"): run(mem, pc)
  run(mem, pc, target="gfx1150")


def test_rdna35_words_disassemble_as_llvm_mc_encodes_them():
  """llvm-mc-22 -mcpu=gfx1150's encoding of every RDNA3.5 scalar float op, printed back identically."""
  from autogen.amdgcn.gfx11.tables import TARGET_OPS
  ops = [e[0] for fam in TARGET_OPS["gfx1150"].values() for e in fam.values()]
  text = []
  for op in ops:
    if op.startswith("s_cmp_"): text.append(f"{op} s1, s2")
    elif op in ("s_fmaak_f32",): text.append(f"{op} s0, s1, s2, 0x41200000")
    elif op in ("s_fmamk_f32",): text.append(f"{op} s0, s1, 0x41200000, s2")
    elif op.startswith(("s_cvt_f", "s_cvt_i", "s_cvt_u", "s_cvt_hi", "s_ceil", "s_floor", "s_trunc", "s_rndne")): text.append(f"{op} s0, s1")
    else: text.append(f"{op} s0, s1, s2")
  assert disasm(assemble("\n".join(text), cpu="gfx1150"), target="gfx1150") == text
