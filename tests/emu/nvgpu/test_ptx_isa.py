"""Hand-written PTX for instructions NVRTC rarely emits in the CUDA C tests, each checked against a Python model of
the PTX ISA's definition. Thread t reads x = in[t] (u32) and y = in[t + 32], and stores u32 results to out[t*8 + k]."""
import struct
import numpy as np
import pytest
from emu.memory import Memory
from emu.nvgpu.ptx import Program, launch, PtxError

HEAD = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
  .reg .pred %p<8>;
  .reg .b16 %h<8>;
  .reg .b32 %r<40>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  mov.u32 %r30, %tid.x;
  mul.wide.u32 %rd3, %r30, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r1, [%rd4];
  ld.global.u32 %r2, [%rd4+128];
  mul.wide.u32 %rd5, %r30, 32;
  add.s64 %rd6, %rd2, %rd5;
"""
rng = np.random.default_rng(5)
U = 0xffffffff


def run_ptx(body: str, x: np.ndarray, y: np.ndarray, nthreads: int = 32) -> np.ndarray:
  prog = Program(HEAD + body + "\n  ret;\n}\n")
  mem = Memory()
  pin, pout = mem.alloc(256), mem.alloc(32 * 32)
  mem.write(pin, np.concatenate([x, y]).astype(np.uint32))
  launch(prog, mem, 1, nthreads, prog.pack(pin, pout))
  return np.frombuffer(mem.read(pout, 32 * 32), np.uint32).reshape(32, 8)


def stores(n: int) -> str: return "\n".join(f"  st.global.u32 [%rd6+{4 * k}], %r{10 + k};" for k in range(n))


def s32(v: int) -> int: v &= U; return v - (1 << 32) if v >> 31 else v


def bits_f(v: int) -> float: return struct.unpack("<f", struct.pack("<I", v & U))[0]


def test_bit_field_permute_and_logic_ops():
  body = """
  bfe.u32 %r10, %r1, %r2, 5;
  bfe.s32 %r11, %r1, 4, 9;
  bfi.b32 %r12, %r1, %r2, 8, 12;
  prmt.b32 %r13, %r1, %r2, 0x7531;
  lop3.b32 %r14, %r1, %r2, 0xff00ff00, 0xe8;
  shf.r.clamp.b32 %r15, %r1, %r2, %r30;
  bfind.u32 %r16, %r1;
  bfind.s32 %r17, %r2;
""" + stores(8)
  x = rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
  y = rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
  x[0], y[0] = 0, 0xffffffff
  o = run_ptx(body, x, y)
  for t in range(32):
    a, b = int(x[t]), int(y[t])
    pos = b & 0xff
    bfe_u = (a >> pos) & 31 if pos < 32 else 0
    f = (a >> 4) & 0x1ff
    bfe_s = f - (1 << 9) if f >> 8 else f
    bfi = (b & ~(0xfff << 8) | (a & 0xfff) << 8) & U
    v = b << 32 | a
    prmt = sum(((v >> (8 * ((0x7531 >> (4 * i)) & 7))) & 0xff) << (8 * i) for i in range(4))
    c = 0xff00ff00
    maj = (a & b) | (a & c) | (b & c)                     # 0xe8: the majority function
    n = min(t, 32)
    shf = ((b << 32 | a) >> n) & U
    bf_u = a.bit_length() - 1 if a else U
    bs = ~b & U if b >> 31 else b
    bf_s = bs.bit_length() - 1 if bs else U
    assert list(o[t]) == [bfe_u, bfe_s & U, bfi, prmt, maj, shf, bf_u, bf_s], t


def test_saturating_integer_ops_and_24_bit_multiply():
  body = """
  add.sat.s32 %r10, %r1, %r2;
  sub.sat.s32 %r11, %r1, %r2;
  mul24.lo.s32 %r12, %r1, %r2;
  mad24.lo.u32 %r13, %r1, %r2, 7;
  cvt.sat.s16.s32 %h1, %r1;
  cvt.s32.s16 %r14, %h1;
  cvt.sat.u8.s32 %h2, %r2;
  cvt.u32.u16 %r15, %h2;
  div.s32 %r16, %r1, %r2;
  rem.u32 %r17, %r1, %r2;
""" + stores(8)
  x = rng.integers(-(1 << 31), 1 << 31, 32).astype(np.int64).astype(np.uint32)
  y = rng.integers(-(1 << 31), 1 << 31, 32).astype(np.int64).astype(np.uint32)
  x[:3], y[:3] = [0x7fffffff, 0x80000000, 5], [1, 1, 0]
  o = run_ptx(body, x, y)
  for t in range(32):
    a, b = s32(int(x[t])), s32(int(y[t]))
    sat = lambda v: max(-(1 << 31), min((1 << 31) - 1, v))
    def sx24(v): v &= 0xffffff; return v - (1 << 24) if v >> 23 else v
    div = 0xffffffff if b == 0 else int(abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)
    rem = int(x[t]) if int(y[t]) == 0 else int(x[t]) % int(y[t])
    want = [sat(a + b) & U, sat(a - b) & U, (sx24(a) * sx24(b)) & U, ((int(x[t]) & 0xffffff) * (int(y[t]) & 0xffffff) + 7) & U,
            max(-32768, min(32767, a)) & U, max(0, min(255, b)), div & U, rem]
    assert list(o[t]) == want, t


def test_float_compare_set_selp_testp_copysign():
  body = """
  mov.b32 %f1, %r1;
  mov.b32 %f2, %r2;
  setp.ltu.f32 %p1, %f1, %f2;
  setp.ne.f32 %p2, %f1, %f2;
  selp.u32 %r10, 1, 0, %p1;
  selp.u32 %r11, 1, 0, %p2;
  set.ge.and.u32.f32 %r12, %f1, %f2, %p1;
  testp.notanumber.f32 %p3, %f1;
  testp.subnormal.f32 %p4, %f2;
  selp.u32 %r13, 1, 0, %p3;
  selp.u32 %r14, 1, 0, %p4;
  copysign.f32 %f3, %f1, %f2;
  mov.b32 %r15, %f3;
  setp.num.f32 %p5, %f1, %f2;
  not.pred %p6, %p5;
  selp.u32 %r16, 1, 0, %p6;
  set.gtu.f32.f32 %f4, %f1, %f2;
  mov.b32 %r17, %f4;
""" + stores(8)
  vals = np.array([1.0, -2.0, np.nan, 0.0, -0.0, 1e-40, np.inf, 3.5], np.float32)
  x = rng.choice(vals, 32).view(np.uint32)
  y = rng.choice(vals, 32).view(np.uint32)
  o = run_ptx(body, x, y)
  for t in range(32):
    a, b = bits_f(int(x[t])), bits_f(int(y[t]))
    nan = a != a or b != b
    ltu = nan or a < b
    ne = not nan and a != b
    ge_and = (not nan and a >= b) and ltu
    sub = 0 < abs(b) < 2.0 ** -126
    cs = (int(y[t]) & 0x7fffffff) | (int(x[t]) & 0x80000000)   # copysign d, a, b: b with the sign of a
    gtu = nan or a > b
    want = [int(ltu), int(ne), U if ge_and else 0, int(a != a), int(sub), cs, int(nan), 0x3f800000 if gtu else 0]
    assert list(o[t]) == want, t


def test_predicated_exit_vote_and_warp_collectives():
  body = """
  and.b32 %r20, %r30, 3;
  setp.eq.u32 %p1, %r20, 3;
  @%p1 exit;
  setp.ne.u32 %p2, %r1, 0;
  vote.sync.ballot.b32 %r10, !%p2, 0x77777777;
  vote.sync.all.pred %p3, %p2, 0x77777777;
  selp.u32 %r11, 1, 0, %p3;
  activemask.b32 %r12;
  redux.sync.add.u32 %r13, %r1, 0x77777777;
  redux.sync.max.s32 %r14, %r2, 0x77777777;
  match.any.sync.b32 %r15, %r1, 0x77777777;
  mov.u32 %r16, %laneid;
  mov.u32 %r17, %lanemask_lt;
""" + stores(8)
  x = rng.integers(0, 3, 32).astype(np.uint32)
  y = rng.integers(-100, 100, 32).astype(np.int64).astype(np.uint32)
  o = run_ptx(body, x, y)
  live = [t for t in range(32) if t & 3 != 3]
  ballot = sum(1 << t for t in live if x[t] == 0)
  for t in range(32):
    if t & 3 == 3: assert list(o[t]) == [0] * 8; continue   # exited before storing
    same = sum(1 << j for j in live if x[j] == x[t])
    want = [ballot, int(all(x[j] != 0 for j in live)), 0x77777777, int(sum(int(x[j]) for j in live)) & U,
            max(s32(int(y[j])) for j in live) & U, same, t, (1 << t) - 1]
    assert list(o[t]) == want, t


def test_f16x2_and_bf16x2_packed_arithmetic():
  body = """
  add.rn.f16x2 %r10, %r1, %r2;
  mul.rn.bf16x2 %r11, %r1, %r2;
  fma.rn.f16x2 %r12, %r1, %r2, %r1;
  max.NaN.f16x2 %r13, %r1, %r2;
  neg.bf16x2 %r14, %r1;
  cvt.rn.f16x2.f32 %r15, %f1, %f2;
  mov.b32 {%h1, %h2}, %r1;
  mov.b32 %r16, {%h2, %h1};
  mov.b32 %f1, %r1;
  cvt.rn.satfinite.bf16.f32 %h3, %f1;
  cvt.u32.u16 %r17, %h3;
""" + stores(8)
  h = (rng.standard_normal(64) * 3).astype(np.float16)
  x, y = h[:32].view(np.uint16).astype(np.uint32) | h[::-1][:32].view(np.uint16).astype(np.uint32) << 16, \
         h[32:].view(np.uint16).astype(np.uint32) | h[:32].view(np.uint16).astype(np.uint32) << 16
  o = run_ptx(body, x, y)
  def halves(v): return [np.array([v & 0xffff], np.uint16).view(np.float16)[0], np.array([v >> 16], np.uint16).view(np.float16)[0]]
  def pack(lo, hi): return int(np.array([lo], np.float16).view(np.uint16)[0]) | int(np.array([hi], np.float16).view(np.uint16)[0]) << 16
  from test_ptx_float import round_to
  from fractions import Fraction
  for t in range(32):
    a, b = int(x[t]), int(y[t])
    (al, ah), (bl, bh) = halves(a), halves(b)
    assert o[t, 0] == pack(al + bl, ah + bh)
    bfm = [round_to(Fraction(bits_f((a >> s & 0xffff) << 16)) * Fraction(bits_f((b >> s & 0xffff) << 16)), "bf16", "rn")
           if (a >> s & 0x7fff) and (b >> s & 0x7fff) else None for s in (0, 16)]
    if None not in bfm: assert o[t, 1] == bfm[0] | bfm[1] << 16, t
    fm = [round_to(Fraction(float(p)) * Fraction(float(q)) + Fraction(float(p)), "f16", "rn") if float(p) * float(q) + float(p) else None
          for p, q in ((al, bl), (ah, bh))]
    if None not in fm: assert o[t, 2] == fm[0] | fm[1] << 16, t
    assert o[t, 3] == pack(max(al, bl), max(ah, bh))
    assert o[t, 4] == a ^ 0x80008000
    assert o[t, 6] == (a >> 16 | (a & 0xffff) << 16)
    assert o[t, 7] == round_to(Fraction(bits_f(a)), "bf16", "rn") if bits_f(a) == bits_f(a) and bits_f(a) != 0 and abs(bits_f(a)) < 3e38 else True


def test_bar_arrive_is_a_clear_error():
  with pytest.raises(PtxError, match=r"kernel k, line 20: \.arrive is not supported .*bar\.arrive 1, 64"):
    Program(HEAD + "  bar.arrive 1, 64;\n  ret;\n}\n")


def test_packed_half_compares_are_a_clear_error():
  with pytest.raises(PtxError, match=r"line 20: comparing packed \.f16x2 values is not supported"):
    Program(HEAD + "  setp.lt.f16x2 %p1|%p2, %r1, %r2;\n  ret;\n}\n")


def test_extended_precision_mad_and_sub_carry_chains():
  body = """
  mad.lo.cc.u32 %r10, %r1, %r2, %r1;
  madc.hi.u32 %r11, %r1, %r2, 0;
  sub.cc.u32 %r12, %r1, %r2;
  subc.u32 %r13, %r2, %r1;
  add.cc.u32 %r14, %r1, %r2;
  addc.cc.u32 %r15, 0, 0;
  addc.u32 %r16, %r1, 5;
""" + stores(7)
  x = rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
  y = rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
  o = run_ptx(body, x, y)
  for t in range(32):
    a, b = int(x[t]), int(y[t])
    m = a * b + a
    sub = ((b << 32) | a) - ((a << 32) | b)                 # {hi, lo} pairs: (b:a) - (a:b)
    c = (a + b) >> 32
    assert list(o[t][:7]) == [m & U, (m >> 32) & U, sub & U, (sub >> 32) & U, (a + b) & U, c, (a + 5) & U], t


def test_integer_dot_products_dp4a_and_dp2a():
  body = """
  dp4a.u32.u32 %r10, %r1, %r2, %r30;
  dp4a.s32.s32 %r11, %r1, %r2, %r30;
  dp4a.s32.u32 %r12, %r1, %r2, 0xfffffff0;
  dp2a.lo.u32.u32 %r13, %r1, %r2, %r30;
  dp2a.hi.s32.s32 %r14, %r1, %r2, %r30;
  dp2a.lo.u32.s32 %r15, %r1, %r2, 5;
""" + stores(6)
  x = rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
  y = rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
  x[0], y[0] = U, U
  o = run_ptx(body, x, y)
  def parts(v: int, w: int, sgn: bool) -> list[int]:
    ps = [(v >> (w * i)) & ((1 << w) - 1) for i in range(32 // w)]
    return [p - (1 << w) if sgn and p >> (w - 1) else p for p in ps]
  for t in range(32):
    a, b = int(x[t]), int(y[t])
    dp4 = lambda sa, sb, c: (c + sum(p * q for p, q in zip(parts(a, 8, sa), parts(b, 8, sb)))) & U
    dp2 = lambda hi, sa, sb, c: (c + sum(p * q for p, q in zip(parts(a, 16, sa), parts(b, 8, sb)[2 * hi:]))) & U
    assert list(o[t][:6]) == [dp4(0, 0, t), dp4(1, 1, t), dp4(1, 0, 0xfffffff0), dp2(0, 0, 0, t), dp2(1, 1, 1, t), dp2(0, 0, 1, 5)], t
