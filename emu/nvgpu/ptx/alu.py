"""C for PTX's per-lane arithmetic: one lane loop per instruction over the warp's 32 lanes (a select keeps inactive
lanes' registers, so the loop vectorises).

Implemented semantics, by ISA section:
- "Integer Arithmetic Instructions": add, sub, mul (.lo/.hi/.wide), mad (.lo/.hi/.wide), mul24/mad24 (.lo), div,
  rem, abs, neg, min, max, popc, clz, bfind, brev, bfe, bfi, and (.sat for s32 add/sub); "Extended-Precision
  Integer Arithmetic Instructions": add.cc, addc, sub.cc, subc, mad.cc, madc (.lo/.hi), with a carry flag per lane. Division by zero (PTX:
  unspecified) gives all ones for div.u / -1 for div.s and the dividend for rem; INT_MIN / -1 wraps.
- "Logic and Shift Instructions": and, or, xor, not, cnot, lop3, shl, shr (shift amounts past the width give 0, or
  the sign fill for shr.s), shf (.l/.r, .wrap/.clamp), prmt (default mode).
- "Comparison and Selection Instructions": setp (with .and/.or/.xor and two destinations), set, selp; float
  compares are ordered except the u-suffixed ones (equ, neu, ...), num, nan.
- "Floating-Point Instructions" (f32, f64): add, sub, mul, fma, mad (.rn/.rz/.rm/.rp: the rounding is the host's,
  set with fesetround, so it is IEEE-exact), div (.rn etc., .full and .approx computed correctly rounded), rcp,
  sqrt (correctly rounded also for .approx), rsqrt, sin, cos, ex2, lg2, tanh (.approx: host libm, within PTX's error
  bounds but not bit-equal to the hardware), abs, neg, min, max (NaN operand ignored, both NaN -> canonical NaN;
  .NaN propagates; -0 < +0), copysign, testp; .ftz flushes f32 subnormal inputs and results to signed zero, .sat
  clamps to [0, 1] with NaN -> +0. A mul/add with no rounding modifier is rounded separately (ptxas may fuse such
  pairs on hardware; NVRTC writes fma.rn itself where C contracts).
- "Half Precision Floating-Point Instructions" (f16, f16x2, bf16, bf16x2): add, sub, mul, fma (.rn, correctly
  rounded from the exact result), neg, abs, min, max (.NaN), with .ftz and .sat; ex2.approx and tanh.approx
  (host libm in f32, rounded to nearest).
- "cvt": int<->int (truncation, extension, .sat), float<->float (.rn/.rz/.rm/.rp for narrowing, .rni/.rzi/.rmi/.rpi to
  integral values, .ftz, .sat, .relu, .satfinite), float->int (saturating, NaN -> 0), int->float (rounding mode),
  f16x2/bf16x2 packing from two f32.
"""
from __future__ import annotations
from emu.nvgpu.ptx.parse import Inst, TYPES

CT = {"f32": "float", "f64": "double", "f16": "u16", "bf16": "u16", "f16x2": "u32", "bf16x2": "u32", "u8": "u8",
      "s8": "i8", "b8": "u8", "u16": "u16", "s16": "i16", "b16": "u16", "u32": "u32", "s32": "i32", "b32": "u32",
      "u64": "u64", "s64": "i64", "b64": "u64", "pred": "u8"}
FLOAT, HALF = ("f32", "f64"), ("f16", "f16x2", "bf16", "bf16x2")
INT = ("u8", "s8", "b8", "u16", "s16", "b16", "u32", "s32", "b32", "u64", "s64", "b64")
RND = {"rn": "RN", "rz": "RZ", "rm": "RM", "rp": "RP", "rna": "RNA"}
IRND = {"rni": "RN", "rzi": "RZ", "rmi": "RM", "rpi": "RP"}
FENV = {"RZ": "FE_TOWARDZERO", "RM": "FE_DOWNWARD", "RP": "FE_UPWARD"}
BITOP, BOOLOP = {"and": "&", "or": "|", "xor": "^"}, {"and": "&&", "or": "||", "xor": "!="}
CMP_INT = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
CMP_F = {"eq": "a == b", "ne": "(a != b && a == a && b == b)", "lt": "a < b", "le": "a <= b", "gt": "a > b",
         "ge": "a >= b", "equ": "!(a != b)", "neu": "a != b", "ltu": "!(a >= b)", "leu": "!(a > b)",
         "gtu": "!(a <= b)", "geu": "!(a < b)", "num": "(a == a && b == b)", "nan": "(a != a || b != b)"}


def bits(t: str) -> int: return TYPES[t] * 8
def signed(t: str) -> bool: return t[0] == "s"
def uns(t: str) -> str: return {1: "u8", 2: "u16", 4: "u32", 8: "u64"}[TYPES[t]]
def sgn(t: str) -> str: return {1: "i8", 2: "i16", 4: "i32", 8: "i64"}[TYPES[t]]


def split(inst: Inst, allowed: set[str], ctx) -> tuple[list[str], set[str]]:
  """(types in order, the other modifiers); any modifier not in `allowed` is an error naming it."""
  types = [m for m in inst.mods if m in TYPES]
  other = {m for m in inst.mods if m not in TYPES}
  if bad := sorted(other - allowed): ctx.unknown(inst, f".{bad[0]}")
  return types, other


def rmode(mods: set[str], table=RND, default: str = "RN") -> str:
  r = [table[m] for m in mods if m in table]
  return r[0] if r else default


def fenv_wrap(code: str, mode: str) -> str:
  """Run `code` with the host rounding mode of a directed PTX rounding modifier."""
  if mode not in FENV: return code
  return "{\n#pragma STDC FENV_ACCESS ON\n  fesetround(%s);\n%s\n  fesetround(FE_TONEAREST);\n}" % (FENV[mode], code)


def _ftz(t: str, e: str, ftz: bool) -> str: return f"ftz32({e})" if ftz and t == "f32" else e


def float_op(ctx, inst: Inst) -> str:
  op = inst.op
  allowed = {"rn", "rz", "rm", "rp", "ftz", "sat", "approx", "full", "NaN"}
  types, mods = split(inst, allowed, ctx)
  t = types[-1]
  if t in HALF: return half_op(ctx, inst, t, mods)
  ftz, sat, mode = "ftz" in mods, "sat" in mods, rmode(mods)
  if t not in FLOAT: ctx.unknown(inst, f".{t} for {op}")
  if op in ("mad", "fma") and not (mods & set(RND)) and t == "f64": ctx.unknown(inst, f"{op}.f64 without a rounding modifier")
  n = len(inst.args) - 1
  a, b, c = [_ftz(t, ctx.rd(inst.args[i + 1], t), ftz) if i < n else None for i in range(3)]
  f = "f" if t == "f32" else ""
  one = "1.0f" if t == "f32" else "1.0"
  ex = {"add": f"{a} + {b}", "sub": f"{a} - {b}", "mul": f"{a} * {b}", "fma": f"__builtin_fma{f}({a}, {b}, {c})",
        "mad": f"__builtin_fma{f}({a}, {b}, {c})", "div": f"{a} / {b}", "rcp": f"{one} / {a}",
        "sqrt": f"__builtin_sqrt{f}({a})", "abs": f"__builtin_fabs{f}({a})", "neg": f"-{a}",
        "min": f"min{bits(t)}({a}, {b}, {int('NaN' in mods)})", "max": f"max{bits(t)}({a}, {b}, {int('NaN' in mods)})",
        "rsqrt": f"(float)(1.0 / sqrt((double){a}))" if t == "f32" else f"1.0 / sqrt({a})",
        "sin": f"sin{f}({a})", "cos": f"cos{f}({a})", "ex2": f"exp2{f}({a})", "lg2": f"log2{f}({a})",
        "tanh": f"tanh{f}({a})", "copysign": f"copysign{f}({b}, {a})"}[op]
  if op == "mad" and not (mods & set(RND)):     # mad.f32 with no rounding: the legacy unfused multiply-add
    ex = f"{a} * {b} + {c}"
  if op in ("sin", "cos", "ex2", "lg2", "tanh", "rsqrt") and "approx" not in mods: ctx.unknown(inst, f"{op} without .approx")
  if sat: ex = f"sat{bits(t)}({ex})"
  ex = _ftz(t, ex, ftz)
  return fenv_wrap(ctx.loop(ctx.wr(inst.args[0], t, ex)), mode)


HALF_OPS = {"add": "ADD", "sub": "SUB", "mul": "MUL", "fma": "FMA", "min": "MIN", "max": "MAX", "neg": "NEG", "abs": "ABS",
            "ex2": "EX2", "tanh": "TANH"}


def half_op(ctx, inst: Inst, t: str, mods: set[str]) -> str:
  if inst.op not in HALF_OPS: ctx.unknown(inst, f"{inst.op}.{t}")
  if (inst.op in ("ex2", "tanh")) != ("approx" in mods): ctx.unknown(inst, f"{inst.op}.{t} {'without' if 'approx' not in mods else 'with'} .approx")
  if mods & {"rz", "rm", "rp", "full"}: ctx.unknown(inst, f".{sorted(mods & {'rz', 'rm', 'rp', 'full'})[0]} on {t}")
  bf = int(t.startswith("bf"))
  if "sat" in mods and bf: ctx.unknown(inst, f".sat on {t}")
  flags = f"{bf}, {int('ftz' in mods)}, {int('sat' in mods)}, {int('NaN' in mods)}"
  args = [ctx.rd(x, t) for x in inst.args[1:]] + ["0"] * (4 - len(inst.args))
  op = HALF_OPS[inst.op]
  if t.endswith("x2"):
    lo = f"hop(H_{op}, (u16){args[0]}, (u16){args[1]}, (u16){args[2]}, {flags})"
    hi = f"hop(H_{op}, (u16)({args[0]} >> 16), (u16)({args[1]} >> 16), (u16)({args[2]} >> 16), {flags})"
    return ctx.loop(ctx.wr(inst.args[0], t, f"(u32){lo} | (u32){hi} << 16"))
  return ctx.loop(ctx.wr(inst.args[0], t, f"hop(H_{op}, {args[0]}, {args[1]}, {args[2]}, {flags})"))


def int_op(ctx, inst: Inst) -> str:
  op = inst.op
  t = ([m for m in inst.mods if m in TYPES] or [None])[-1]
  if t is None: ctx.unknown(inst, f"{op} without a type")
  if t in FLOAT or t in HALF: return float_op(ctx, inst)
  _, mods = split(inst, {"lo", "hi", "wide", "sat", "cc"} if op in ("mul", "mad", "add", "sub", "mul24", "mad24", "addc", "subc",
                                                               "madc") else set(), ctx)
  if "cc" in mods or op in ("addc", "subc", "madc"): return carry_op(ctx, inst, t, mods)
  A = inst.args
  a, b, c = [ctx.rd(A[i + 1], t) if i + 1 < len(A) else None for i in range(3)]
  u, s, n = uns(t), sgn(t), bits(t)
  wide = {"u16": "u32", "s16": "i32", "u32": "u64", "s32": "i64", "u64": "unsigned __int128", "s64": "__int128"}.get(t)
  dt = t
  if op in ("mul", "mad") and ("hi" in mods or "wide" in mods) and wide is None: ctx.unknown(inst, f"{op}.{t}")
  if op in ("mul", "mad"):
    prod = f"({CT[t]})({a} * {b})"
    if "hi" in mods: prod = f"({CT[t]})((({wide}){a} * ({wide}){b}) >> {n})"
    if "wide" in mods:
      dt = {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64"}[t]
      prod = f"(({wide}){a} * ({wide}){b})"
    ex = prod if op == "mul" else f"({CT[dt]})({prod} + {c if 'wide' not in mods else ctx.rd(A[3], dt)})"
    if op == "mad" and "sat" in mods:
      if t != "s32" or "hi" not in mods: ctx.unknown(inst, ".sat")
      ex = f"(i32)sat_s32((i64)({wide})({prod}) + (i64){c})"
  elif op in ("mul24", "mad24"):
    if "hi" in mods: ctx.unknown(inst, f"{op}.hi")
    ext = f"(i64)(((i32){a} << 8) >> 8) * (i64)(((i32){b} << 8) >> 8)" if signed(t) else f"(u64)({a} & 0xffffff) * ({b} & 0xffffff)"
    ex = f"(u32)({ext})" + (f" + {c}" if op == "mad24" else "")
  elif op in ("add", "sub"):
    sym = "+" if op == "add" else "-"
    ex = f"({CT[t]})({a} {sym} {b})"
    if "sat" in mods:
      if t != "s32": ctx.unknown(inst, f".sat on {op}.{t}")
      ex = f"(i32)sat_s32((i64){a} {sym} (i64){b})"
  elif op in ("and", "or", "xor"):
    ex = f"{a} {BITOP[op]} {b}"
  elif op == "not": ex = f"!{a}" if t == "pred" else f"({CT[t]})~{a}"
  elif op == "cnot": ex = f"({CT[t]})({a} == 0)"
  elif op == "neg": ex = f"({CT[t]})-{a}"
  elif op == "abs": ex = f"({CT[t]})({a} < 0 ? -{a} : {a})"
  elif op in ("min", "max"): ex = f"({a} {'<' if op == 'min' else '>'} {b} ? {a} : {b})"
  elif op == "div":
    ex = (f"({b} == 0 ? ({CT[t]})-1 : ({a} == ({s})((u64)1 << {n - 1}) && {b} == -1) ? {a} : {a} / {b})" if signed(t)
          else f"({b} == 0 ? ({CT[t]})~({u})0 : {a} / {b})")
  elif op == "rem":
    ex = (f"({b} == 0 ? {a} : {b} == -1 ? 0 : {a} % {b})" if signed(t) else f"({b} == 0 ? {a} : {a} % {b})")
  elif op == "shl":
    b = ctx.rd(A[2], "u32")
    ex = f"({CT[t]})({b} > {n - 1} ? 0 : ({u}){a} << {b})"
  elif op == "shr":
    b = ctx.rd(A[2], "u32")
    ex = f"({CT[t]})({a} >> ({b} > {n - 1} ? {n - 1} : {b}))" if signed(t) else f"({CT[t]})({b} > {n - 1} ? 0 : {a} >> {b})"
  elif op == "popc": dt, ex = "u32", f"(u32)__builtin_popcountll({a})"
  elif op == "clz": dt, ex = "u32", f"({a} ? (u32)__builtin_clzll((u64){a}) - {64 - n} : {n})"
  elif op == "brev": ex = f"brev{n}({a})"
  elif op == "bfind":
    dt = "u32"
    v = f"({u})({a} < 0 ? ~{a} : {a})" if signed(t) else a
    ex = f"({v} ? {n - 1} - ((u32)__builtin_clzll((u64){v}) - {64 - n}) : 0xffffffffu)"
  elif op == "bfe": ex = f"({CT[t]})bfe({a}, {ctx.rd(A[2], 'u32')}, {ctx.rd(A[3], 'u32')}, {int(signed(t))}, {n})"
  elif op == "bfi": ex = f"({CT[t]})bfi({a}, {b}, {ctx.rd(A[3], 'u32')}, {ctx.rd(A[4], 'u32')}, {n})"
  else: ctx.unknown(inst, op)
  return ctx.loop(ctx.wr(A[0], dt, ex))


def carry_op(ctx, inst: Inst, t: str, mods: set[str]) -> str:
  """add/sub/mad with the carry flag (ISA "Extended-Precision Integer Arithmetic Instructions"): .cc writes CC.CF
  (the carry out; for sub the borrow), addc/subc/madc read it."""
  if TYPES[t] not in (4, 8): ctx.unknown(inst, f"{inst.op}.{t}")
  op, A, n = inst.op, inst.args, bits(t)
  wide = "u64" if n == 32 else "unsigned __int128"
  a, b = (f"({wide})({uns(t)}){ctx.rd(x, t)}" for x in A[1:3])
  cin = f"({wide})w->cf[l]" if op.endswith("c") else "0"
  if op in ("mad", "madc"):
    if not (mods & {"lo", "hi"}): ctx.unknown(inst, f"{op} without .lo or .hi")
    w2 = "unsigned __int128" if n == 32 else None
    if w2 is None:   # 64-bit: the product's halves from a 128-bit multiply
      prod = f"({uns(t)})(((unsigned __int128)({uns(t)}){ctx.rd(A[1], t)} * ({uns(t)}){ctx.rd(A[2], t)}) >> {n if 'hi' in mods else 0})"
    else: prod = f"({uns(t)})(((u64)({uns(t)}){ctx.rd(A[1], t)} * ({uns(t)}){ctx.rd(A[2], t)}) >> {n if 'hi' in mods else 0})"
    s = f"({wide}){prod} + ({wide})({uns(t)}){ctx.rd(A[3], t)} + {cin}"
  elif op in ("add", "addc"): s = f"{a} + {b} + {cin}"
  else: s = f"{a} - {b} - {cin}"
  body = f"{wide} s_ = {s}; {ctx.wr(A[0], t, f'({CT[t]})s_')}"
  if "cc" in mods: body += f" if (on) w->cf[l] = (u8)((s_ >> {n}) & 1);"
  return ctx.loop(body)


def lop3(ctx, inst: Inst) -> str:
  split(inst, set(), ctx)
  a, b, c = (ctx.rd(x, "b32") for x in inst.args[1:4])
  if inst.args[4].kind != "imm": ctx.unknown(inst, "a lop3 lookup table that is not an immediate")
  lut, terms = inst.args[4].v & 0xff, []
  for i in range(8):
    if (lut >> i) & 1: terms.append(f"({'' if i & 4 else '~'}{a} & {'' if i & 2 else '~'}{b} & {'' if i & 1 else '~'}{c})")
  return ctx.loop(ctx.wr(inst.args[0], "b32", " | ".join(terms) or "0u"))


def shf(ctx, inst: Inst) -> str:
  _, mods = split(inst, {"l", "r", "wrap", "clamp"}, ctx)
  a, b, c = (ctx.rd(x, "u32") for x in inst.args[1:4])
  n = f"({c} & 31)" if "wrap" in mods else f"({c} > 32 ? 32 : {c})"
  v = f"((u64){b} << 32 | {a})"
  ex = f"(u32)(({v} << {n}) >> 32)" if "l" in mods else f"(u32)({v} >> {n})"
  return ctx.loop(ctx.wr(inst.args[0], "b32", ex))


def prmt(ctx, inst: Inst) -> str:
  split(inst, set(), ctx)
  a, b, c = (ctx.rd(x, "u32") for x in inst.args[1:4])
  return ctx.loop(ctx.wr(inst.args[0], "b32", f"prmt({a}, {b}, {c})"))


def dot(ctx, inst: Inst) -> str:
  """dp4a.atype.btype d, a, b, c: c + the products of the four bytes of a and b; dp2a.{lo,hi}.atype.btype: c + the
  products of a's two 16-bit halves with bytes 0-1 (.lo) or 2-3 (.hi) of b. Parts are sign-extended for .s32,
  zero-extended for .u32; d wraps at 32 bits (ISA "Integer Arithmetic Instructions: dp4a, dp2a")."""
  types, mods = split(inst, {"lo", "hi"} if inst.op == "dp2a" else set(), ctx)
  if len(types) != 2 or not set(types) <= {"u32", "s32"} or (inst.op == "dp2a" and len(mods) != 1):
    ctx.unknown(inst, f"{inst.op}.{'.'.join(inst.mods)}")
  (at, bt), (a, b, c) = types, (ctx.rd(x, "u32") for x in inst.args[1:4])
  part = lambda v, t, w, i: f"(i64)({'i' if signed(t) else 'u'}{w})({v} >> {w * i})"
  if inst.op == "dp4a": terms = [f"{part(a, at, 8, i)} * {part(b, bt, 8, i)}" for i in range(4)]
  else: terms = [f"{part(a, at, 16, i)} * {part(b, bt, 8, i + (2 if 'hi' in mods else 0))}" for i in range(2)]
  return ctx.loop(ctx.wr(inst.args[0], "b32", f"(u32)((i64){c} + {' + '.join(terms)})"))


def _cond(cmp: str, t: str, a: str, b: str, inst: Inst, ctx) -> str:
  if t.endswith("x2"): ctx.unknown(inst, f"comparing packed .{t} values")
  if t in HALF:
    f = "b2f" if t == "bf16" else "h2f"
    a, b, t = f"{f}({a})", f"{f}({b})", "f32"
  if t in FLOAT:
    if cmp not in CMP_F: ctx.unknown(inst, f".{cmp}")
    return "(" + CMP_F[cmp].replace("a", "A_").replace("b", "B_").replace("A_", f"({a})").replace("B_", f"({b})") + ")"
  if cmp not in CMP_INT or (cmp in ("lo", "ls", "hi", "hs") and signed(t)): ctx.unknown(inst, f".{cmp} for .{t}")
  return f"({a} {CMP_INT[cmp]} {b})"


def setp(ctx, inst: Inst) -> str:
  types, mods = split(inst, set(CMP_INT) | set(CMP_F) | {"and", "or", "xor", "ftz"}, ctx)
  t = types[-1]
  cmp = [m for m in inst.mods if m in CMP_INT or m in CMP_F][0]
  A = inst.args
  ftz = "ftz" in mods
  a, b = (_ftz(t, ctx.rd(x, t), ftz) for x in A[1:3])
  cond = _cond(cmp, t, a, b, inst, ctx)
  dests = A[0].v if A[0].kind == "pair" else [A[0]]
  boolop = [m for m in ("and", "or", "xor") if m in mods]
  stmts = []
  for i, d in enumerate(dests):
    v = cond if i == 0 else f"!{cond}"
    if boolop: v = f"({v}) {BOOLOP[boolop[0]]} ({ctx.rd(A[3], 'pred')} != 0)"
    stmts.append(ctx.wr(d, "pred", f"(u8)({v})"))
  return ctx.loop("\n".join(stmts))


def set_(ctx, inst: Inst) -> str:
  types, mods = split(inst, set(CMP_INT) | set(CMP_F) | {"and", "or", "xor", "ftz"}, ctx)
  dt, t = types
  cmp = [m for m in inst.mods if m in CMP_INT or m in CMP_F][0]
  A = inst.args
  cond = _cond(cmp, t, _ftz(t, ctx.rd(A[1], t), "ftz" in mods), _ftz(t, ctx.rd(A[2], t), "ftz" in mods), inst, ctx)
  boolop = [m for m in ("and", "or", "xor") if m in mods]
  if boolop: cond = f"(({cond}) {BOOLOP[boolop[0]]} ({ctx.rd(A[3], 'pred')} != 0))"
  true = "1.0f" if dt == "f32" else f"({CT[dt]})~({uns(dt)})0"
  return ctx.loop(ctx.wr(A[0], dt, f"{cond} ? {true} : ({CT[dt]})0"))


def selp(ctx, inst: Inst) -> str:
  types, _ = split(inst, set(), ctx)
  t = types[-1]
  A = inst.args
  return ctx.loop(ctx.wr(A[0], t, f"{ctx.rd(A[3], 'pred')} ? {ctx.rd(A[1], t)} : {ctx.rd(A[2], t)}"))


def testp(ctx, inst: Inst) -> str:
  kinds = ["finite", "infinite", "number", "notanumber", "normal", "subnormal"]
  types, mods = split(inst, set(kinds), ctx)
  t = types[-1]
  what = kinds.index([m for m in mods if m in kinds][0])
  return ctx.loop(ctx.wr(inst.args[0], "pred", f"(u8)testp((double){ctx.rd(inst.args[1], t)}, {what}, {int(t == 'f32')})"))


def cvt(ctx, inst: Inst) -> str:
  types, mods = split(inst, set(RND) | set(IRND) | {"ftz", "sat", "relu", "satfinite"}, ctx)
  dt, st = types
  A = inst.args
  ftz = "ftz" in mods
  if dt in ("f16x2", "bf16x2"):
    f = "f2b" if dt == "bf16x2" else "f2h"
    hi, lo = ctx.rd(A[1], st), ctx.rd(A[2], st)
    if "relu" in mods: hi, lo = f"relu32({hi})", f"relu32({lo})"
    return ctx.loop(ctx.wr(A[0], dt, f"(u32){f}({hi}, {rmode(mods)}) << 16 | {f}({lo}, {rmode(mods)})"))
  a = ctx.rd(A[1], st)
  if st in ("f16", "bf16"): a, st_f = f"{'b2f' if st == 'bf16' else 'h2f'}({a})", "f32"
  else: st_f = st
  a = _ftz(st, a, ftz)
  fenv = "RN"
  if dt in INT and st_f in FLOAT:                 # float -> integer (ISA: saturates, NaN -> 0)
    mode = rmode(mods, IRND, "")
    if not mode: ctx.unknown(inst, "a float-to-integer cvt without .rni/.rzi/.rmi/.rpi")
    if dt == "u64": ex = f"f2u64({a}, {mode})"
    elif dt == "s64": ex = f"f2s64({a}, {mode})"
    else:
      n = bits(dt)
      lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed(dt) else (0, (1 << n) - 1)
      ex = f"({CT[dt]})f2i({a}, {mode}, {lo}.0, {hi}.0)"
  elif dt in INT:                                  # integer -> integer
    ex = f"({CT[dt]})({a})"
    if "sat" in mods:
      n = bits(dt)
      lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed(dt) else (0, (1 << n) - 1)
      ex = f"({CT[dt]})((__int128)({a}) < {lo}ll ? {lo}ll : (__int128)({a}) > (__int128){hi}ull ? {hi}ull : ({a}))"
  elif st_f in INT:                                # integer -> float: rounded by the host in the PTX mode
    fenv = rmode(mods)
    ex = {"f32": f"(float)({a})", "f64": f"(double)({a})", "f16": f"f2h((double)({a}), {fenv})",
          "bf16": f"f2b((double)({a}), {fenv})"}[dt]
  else:                                            # float -> float
    irnd = rmode(mods, IRND, "")
    if irnd:
      if dt != st: ctx.unknown(inst, f"an integer rounding modifier converting {st} to {dt}")
      ex = f"({CT[dt]})fround({a}, {irnd})"
    elif dt == "f64": ex = f"(double)({a})"
    elif dt == "f32": ex = f"uf(dround({a}, 0, 24, 8, {rmode(mods)}, 0))" if st == "f64" else a
    elif dt in ("f16", "bf16"):
      p, e = (11, 5) if dt == "f16" else (8, 8)
      src = f"relu64({a})" if "relu" in mods else a
      ex = f"(u16)dround({src}, 0, {p}, {e}, {rmode(mods)}, {int('satfinite' in mods)})"
    else: ctx.unknown(inst, f"cvt.{dt}.{st}")
  if "sat" in mods and dt in FLOAT: ex = f"sat{bits(dt)}({ex})"
  if dt == "f32": ex = _ftz(dt, ex, ftz)
  return fenv_wrap(ctx.loop(ctx.wr(A[0], dt, ex)), fenv)


GEN = {**{op: int_op for op in ("add", "sub", "mul", "mad", "addc", "subc", "madc", "mul24", "mad24", "div", "rem", "abs", "neg", "min", "max",
                                "and", "or", "xor", "not", "cnot", "shl", "shr", "popc", "clz", "brev", "bfind", "bfe",
                                "bfi")},
       **{op: float_op for op in ("fma", "rcp", "sqrt", "rsqrt", "sin", "cos", "ex2", "lg2", "tanh", "copysign")},
       "lop3": lop3, "shf": shf, "prmt": prmt, "dp4a": dot, "dp2a": dot, "setp": setp, "set": set_, "selp": selp, "testp": testp, "cvt": cvt}
