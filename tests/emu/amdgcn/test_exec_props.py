"""Property tests: integer VALU and SALU ops on random operands (one example per lane) against Python references
written from the RDNA3 ISA guide's definitions."""
from hypothesis import given, settings, strategies as st
from exec_helpers import run_wave

M32, M64 = (1 << 32) - 1, (1 << 64) - 1
u32s = st.lists(st.integers(0, M32), min_size=32, max_size=32)


def s32(x: int) -> int: return x - (1 << 32) if x >> 31 else x
def s24(x: int) -> int: x &= 0xFFFFFF; return x - (1 << 24) if x >> 23 else x
def bfe(x: int, off: int, w: int, signed: bool) -> int:
  off, w = off & 31, w & 31
  if not w: return 0
  f = (x >> off) & ((1 << w) - 1)
  return (f - (1 << w) if signed and f >> (w - 1) else f) & M32


# op -> reference(a, b, c) -> u32 for `op vN, v0, v1[, v2]`
VALU = {
  "v_add_nc_u32": (lambda a, b, c: (a + b) & M32),
  "v_sub_nc_u32": (lambda a, b, c: (a - b) & M32),
  "v_mul_lo_u32": (lambda a, b, c: (a * b) & M32),
  "v_mul_hi_u32": (lambda a, b, c: (a * b) >> 32),
  "v_mul_hi_i32": (lambda a, b, c: ((s32(a) * s32(b)) >> 32) & M32),
  "v_mul_u32_u24": (lambda a, b, c: ((a & 0xFFFFFF) * (b & 0xFFFFFF)) & M32),
  "v_mul_i32_i24": (lambda a, b, c: (s24(a) * s24(b)) & M32),
  "v_lshlrev_b32": (lambda a, b, c: (b << (a & 31)) & M32),
  "v_lshrrev_b32": (lambda a, b, c: b >> (a & 31)),
  "v_ashrrev_i32": (lambda a, b, c: (s32(b) >> (a & 31)) & M32),
  "v_min_i32": (lambda a, b, c: a if s32(a) < s32(b) else b),
  "v_max_u32": (lambda a, b, c: max(a, b)),
  "v_xnor_b32": (lambda a, b, c: ~(a ^ b) & M32),
  "v_bfe_u32": (lambda a, b, c: bfe(a, b, c, False)),
  "v_bfe_i32": (lambda a, b, c: bfe(a, b, c, True)),
  "v_alignbit_b32": (lambda a, b, c: ((a << 32 | b) >> (c & 31)) & M32),
  "v_alignbyte_b32": (lambda a, b, c: ((a << 32 | b) >> (8 * (c & 3))) & M32),
  "v_add3_u32": (lambda a, b, c: (a + b + c) & M32),
  "v_lshl_add_u32": (lambda a, b, c: ((a << (b & 31)) + c) & M32),
  "v_med3_i32": (lambda a, b, c: sorted([a, b, c], key=s32)[1]),
  "v_med3_u32": (lambda a, b, c: sorted([a, b, c])[1]),
  "v_bfi_b32": (lambda a, b, c: (a & b) | (~a & c) & M32),
  "v_bcnt_u32_b32": (lambda a, b, c: (bin(a).count("1") + b) & M32),
  "v_mad_u32_u24": (lambda a, b, c: ((a & 0xFFFFFF) * (b & 0xFFFFFF) + c) & M32),
  "v_xad_u32": (lambda a, b, c: ((a ^ b) + c) & M32),
}
UNARY = {
  "v_bfrev_b32": lambda a: int(f"{a:032b}"[::-1], 2),
  "v_clz_i32_u32": lambda a: 32 - a.bit_length() if a else M32,
  "v_ctz_i32_b32": lambda a: (a & -a).bit_length() - 1 if a else M32,
  "v_not_b32": lambda a: ~a & M32,
}


def _run(ops: list[str], a, b, c):
  body, out = [], []
  for i, op in enumerate(ops):
    three = op in ("v_bfe_u32", "v_bfe_i32", "v_alignbit_b32", "v_alignbyte_b32", "v_add3_u32", "v_lshl_add_u32", "v_med3_i32",
                   "v_med3_u32", "v_bfi_b32", "v_mad_u32_u24", "v_xad_u32")
    body.append(f"{op} v{10 + i}, v0, v1" + (", v2" if three else ""))
    out.append(10 + i)
  return run_wave("\n".join(body), v={0: a, 1: b, 2: c}, vout=out)


@settings(max_examples=8, deadline=None)
@given(u32s, u32s, u32s)
def test_valu_integer_ops_match_reference(a, b, c):
  ops = list(VALU)
  r = _run(ops, a, b, c)
  for i, op in enumerate(ops):
    want = [VALU[op](x, y, z) for x, y, z in zip(a, b, c)]
    assert [int(v) for v in r.v[10 + i]] == want, op


@settings(max_examples=8, deadline=None)
@given(u32s)
def test_valu_unary_ops_match_reference(a):
  ops = list(UNARY)
  r = run_wave("\n".join(f"{op} v{10 + i}, v0" for i, op in enumerate(ops)), v={0: a}, vout=[10 + i for i in range(len(ops))])
  for i, op in enumerate(ops): assert [int(v) for v in r.v[10 + i]] == [UNARY[op](x) for x in a], op


@settings(max_examples=8, deadline=None)
@given(u32s, u32s)
def test_carry_ops_and_mad_u64(a, b):
  r = run_wave("v_add_co_u32 v3, vcc_lo, v0, v1\ns_mov_b32 s10, vcc_lo\nv_sub_co_u32 v4, s11, v0, v1\n"
               "v_add_co_ci_u32 v5, vcc_lo, v0, v1, vcc_lo\nv_mad_u64_u32 v[6:7], s12, v0, v1, v[0:1]",
               v={0: a, 1: b}, vout=(3, 4, 5, 6, 7), sout=[10, 11, 12])
  carry = sum(1 << l for l, (x, y) in enumerate(zip(a, b)) if x + y > M32)
  assert [int(v) for v in r.v[3]] == [(x + y) & M32 for x, y in zip(a, b)] and r.s[10] == carry
  assert [int(v) for v in r.v[4]] == [(x - y) & M32 for x, y in zip(a, b)]
  assert r.s[11] == sum(1 << l for l, (x, y) in enumerate(zip(a, b)) if y > x)
  assert [int(v) for v in r.v[5]] == [(x + y + (carry >> l & 1)) & M32 for l, (x, y) in enumerate(zip(a, b))]
  # v[0:1] per lane is the 64-bit value a[l] | b[l] << 32
  full = [x * y + (x | y << 32) for x, y in zip(a, b)]
  assert [int(lo) | int(hi) << 32 for lo, hi in zip(r.v[6], r.v[7])] == [f & M64 for f in full]
  assert r.s[12] == sum(1 << l for l, f in enumerate(full) if f >> 64)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, M32), st.integers(0, M32), st.integers(0, M64))
def test_salu_ops_match_reference(x, y, z):
  r = run_wave(f"s_mov_b32 s0, {x:#x}\ns_mov_b32 s1, {y:#x}\ns_mov_b32 s2, {z & M32:#x}\ns_mov_b32 s3, {z >> 32:#x}\n"
               "s_add_u32 s4, s0, s1\ns_cselect_b32 s5, 1, 0\ns_sub_i32 s6, s0, s1\ns_cselect_b32 s7, 1, 0\n"
               "s_mul_hi_i32 s8, s0, s1\ns_lshl_b64 s[10:11], s[2:3], s1\ns_bfe_u32 s12, s0, s1\ns_absdiff_i32 s13, s0, s1\n"
               "s_ashr_i64 s[14:15], s[2:3], s0\ns_bcnt1_i32_b64 s16, s[2:3]\ns_max_i32 s17, s0, s1\ns_cselect_b32 s18, 1, 0",
               sout=[4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18])
  s = r.s
  assert s[4] == (x + y) & M32 and s[5] == int(x + y > M32)
  assert s[6] == (x - y) & M32 and s[7] == int(not -(1 << 31) <= s32(x) - s32(y) < 1 << 31)
  assert s[8] == ((s32(x) * s32(y)) >> 32) & M32
  assert s[10] | s[11] << 32 == (z << (y & 63)) & M64
  w = (y >> 16) & 0x7F
  assert s[12] == ((x >> (y & 31)) & ((1 << w) - 1) if w < 32 else x >> (y & 31))
  assert s[13] == abs(s32((x - y) & M32)) & M32
  sz = z - (1 << 64) if z >> 63 else z
  assert s[14] | s[15] << 32 == (sz >> (x & 63)) & M64
  assert s[16] == bin(z).count("1")
  assert s[17] == (x if s32(x) > s32(y) else y) and s[18] == int(s32(x) > s32(y))
