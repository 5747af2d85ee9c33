"""C for the VALU encodings: VOP1, VOP2, VOPC, VOP3, VOP3SD and VOPD, with DPP16/DPP8 on src0.

Each instruction becomes one lane loop over the wave: sources read (after abs/neg), the per-lane expression
from valu_table, then an EXEC-masked write. Lane-mask results (compares, carries) are gathered in the loop
and written after it as `mask & EXEC` (facts 12, 30); sources are always read before any write (fact 13).
16-bit operands: in VOP1/VOP2/VOPC a VGPR field's bit 7 selects the high half (LLVM's true16 .h), in VOP3
the opsel bits do; a low-half write keeps the high half (fact 38). OMOD is ignored on RDNA3 (fact 24).
"""
from __future__ import annotations
import re
from dataclasses import dataclass, field
from emu.rdna3 import operands as O
from emu.rdna3.valu_table import OPS, CMP, cmp_srcs

WIDTH = {"f16": 16, "i16": 16, "u16": 16, "b16": 16, "f32": 32, "i32": 32, "u32": 32, "b32": 32,
         "f64": 64, "i64": 64, "u64": 64, "b64": 64}
SIGN = {16: "0x8000u", 32: "0x80000000u", 64: "0x8000000000000000ull"}
CLAMP = {"f16": "clamp16", "f32": "clamp32", "f64": "clamp64"}


@dataclass
class Valu:
  """One VALU operation in encoding-neutral form."""
  op: str
  srcs: list[int]                      # 9-bit source codes (VGPRs as 256 + n)
  vdst: int | None = None              # VGPR number
  sdst: int | None = None              # SGPR destination (VOP3 compare / VOP3SD carry)
  e64: bool = False
  hi: list[bool] = field(default_factory=lambda: [False] * 3)
  dhi: bool = False
  absm: int = 0
  negm: int = 0
  clmp: int = 0
  literal: int | None = None
  dpp: dict | None = None


def _true16(v: Valu, types: tuple[str, ...], dst_t: str | None) -> None:
  """e32 encodings: for 16-bit operands bit 7 of a VGPR number selects the high half."""
  for i, t in enumerate(types):
    if i < len(v.srcs) and WIDTH.get(t) == 16 and v.srcs[i] >= 256:
      v.hi[i], v.srcs[i] = bool((v.srcs[i] - 256) & 0x80), 256 + ((v.srcs[i] - 256) & 0x7F)
  if dst_t and WIDTH.get(dst_t) == 16 and v.vdst is not None:
    v.dhi, v.vdst = bool(v.vdst & 0x80), v.vdst & 0x7F


def normalize(inst) -> Valu:
  f, e = inst.fields, inst.enc
  if e == "VOP1": v = Valu(inst.op, [f["src0"]], vdst=f["vdst"])
  elif e == "VOP2": v = Valu(inst.op, [f["src0"], 256 + f["vsrc1"]], vdst=f["vdst"])
  elif e == "VOPC": v = Valu(inst.op, [f["src0"], 256 + f["vsrc1"]])
  else:
    v = Valu(inst.op, [f["src0"], f["src1"], f["src2"]], vdst=f["vdst"], e64=True, negm=f["neg"], clmp=f["clmp"])
    if e == "VOP3SD": v.sdst = f["sdst"]
    else:
      v.absm, opsel = f["abs"], f["opsel"]
      v.hi, v.dhi = [bool(opsel >> i & 1) for i in range(3)], bool(opsel >> 3 & 1)
  v.literal = inst.literal
  if inst.dpp is not None:
    v.dpp, v.srcs[0] = inst.dpp, 256 + inst.dpp["src0"]
    if not v.e64 and "ctrl" in inst.dpp:
      v.absm |= inst.dpp["src0_abs"] | inst.dpp["src1_abs"] << 1
      v.negm |= inst.dpp["src0_neg"] | inst.dpp["src1_neg"] << 1
  if not v.e64:
    name = v.op.replace("v_cmpx_", "v_cmp_")
    if name in OPS: _true16(v, OPS[name][1], OPS[name][0])
    elif name in CMP: _true16(v, cmp_srcs(name), None)
    elif v.op in ("v_swap_b16",): _true16(v, ("b16",), "b16")
  return v


def src_expr(v: Valu, i: int, t: str) -> str:
  """Lane expression for source i of type t with abs/neg applied as sign-bit operations (fact 22)."""
  w = WIDTH[t]
  if i == 0 and v.dpp is not None: e = "(dp_[l] & 0xffffu)" if w == 16 else "dp_[l]"
  else: e = O.src(v.srcs[i], w, v.literal, float_lit64=(t == "f64"), hi=v.hi[i])
  if v.absm >> i & 1: e = f"({e} & ~{SIGN[w]})"
  if v.negm >> i & 1: e = f"({e} ^ {SIGN[w]})"
  return e


def dst_read(v: Valu, t: str) -> str:
  return O.vgpr(256 + v.vdst, WIDTH[t], v.dhi)


def dst_write(v: Valu, t: str, r: str, m: str = "wm_") -> str:
  """Masked write of result `r` to the VGPR destination for lane l."""
  d, w, sel = v.vdst, WIDTH[t], f"(({m} >> l) & 1)"
  if w == 64: return f"if {sel} SETV64({d}, l, {r});"
  if w == 16:
    if v.dhi: return f"V({d}, l) = {sel} ? (V({d}, l) & 0xffffu) | ({r} << 16) : V({d}, l);"
    return f"V({d}, l) = {sel} ? (V({d}, l) & 0xffff0000u) | ({r} & 0xffffu) : V({d}, l);"
  return f"V({d}, l) = {sel} ? {r} : V({d}, l);"


def ctype(t: str) -> str: return "u64" if WIDTH[t] == 64 else "u32"


def mask_src(code: int, wave64: bool) -> str:
  """A lane mask operand (VCC, an SGPR pair in wave64 / one SGPR in wave32, or a constant)."""
  if code < 128 and code != O.NULL: return f"LANEMASK({code})"
  return O.scalar(code, 64 if wave64 else 32, None)


def write_mask(reg: int | None, m: str) -> list[str]:
  if reg is None or reg == O.NULL: return []
  if reg >= 128: raise O.Unsupported(f"lane-mask destination code {reg} is not an SGPR")
  return [f"SETMASK({reg}, {m});"]


# ---- DPP: src0 comes from another lane ----
def dpp_lane(ctrl: int) -> str | None:
  """C expression of the source lane for DPP16 control `ctrl` (None: not a gfx11 control)."""
  if ctrl <= 0xFF: return f"((l & ~3) | (({ctrl:#x} >> ((l & 3) * 2)) & 3))"
  n = ctrl & 0xF
  if 0x101 <= ctrl <= 0x10F: return f"((l & 15) + {n} < 16 ? l + {n} : -1)"
  if 0x111 <= ctrl <= 0x11F: return f"((l & 15) >= {n} ? l - {n} : -1)"
  if 0x121 <= ctrl <= 0x12F: return f"((l & ~15) | ((l - {n}) & 15))"
  if ctrl == 0x140: return "((l & ~15) | (15 - (l & 15)))"
  if ctrl == 0x141: return "((l & ~7) | (7 - (l & 7)))"
  if ctrl in (0x142, 0x143): return "(l & ~15)"                  # fact 47: broadcast lane 0 of each row
  if 0x150 <= ctrl <= 0x15F: return f"((l & ~15) | {n})"          # row_share
  if 0x160 <= ctrl <= 0x16F: return f"((l & ~15) | ((l & 15) ^ {n}))"   # row_xmask
  return None


def dpp_prologue(v: Valu, t: str, wave64: bool) -> tuple[list[str], str]:
  """Lines that fill dp_[] with the permuted src0, and the write-mask expression."""
  d, lanes = v.dpp, 64 if wave64 else 32
  if WIDTH[t] == 64: raise O.Unsupported(f"DPP on the 64-bit operand of {v.op} is not valid on gfx11")
  rd = O.vgpr(v.srcs[0], WIDTH[t], v.hi[0], lane="sl")
  if "sel" in d:   # DPP8
    sel = ", ".join(str(s) for s in d["sel"])
    return [f"static const u8 sel_[8] = {{{sel}}};", "u32 dp_[W];",
            f"for (int l = 0; l < W; l++) {{ int sl = (l & ~7) | sel_[l & 7]; dp_[l] = ({d['fi']} || ((ex >> sl) & 1)) ? {rd} : 0; }}"], "ex"
  lane = dpp_lane(d["ctrl"])
  if lane is None: raise O.Unsupported(f"DPP control {d['ctrl']:#x} is not valid on gfx11")
  rb = sum(1 << l for l in range(lanes) if d["row_mask"] >> (l >> 4) & 1 and d["bank_mask"] >> ((l >> 2) & 3) & 1)
  return ["u32 dp_[W]; u64 dv_ = 0;",
          f"for (int l = 0; l < W; l++) {{ int sl = {lane}; int ok = sl >= 0 && ({d['fi']} || ((ex >> sl) & 1));"
          f" dp_[l] = ok ? {rd} : 0; dv_ |= (u64)(ok || {d['bound_ctrl']}) << l; }}"], f"(ex & dv_ & {rb:#x}ull)"


def lane_loop(pre: list[str], body: list[str], post: list[str] = ()) -> str:
  return "{ " + " ".join(["const u64 ex = EXEC;", *pre, "for (int l = 0; l < W; l++) {", *body, "}", *post]) + " }"


# ---- plain table ops ----
def table_op(v: Valu, wave64: bool) -> str:
  dst_t, src_t, expr = OPS[v.op]
  pre, wm = ([], "ex") if v.dpp is None else dpp_prologue(v, src_t[0], wave64)
  pre.append(f"const u64 wm_ = {wm};")
  body = [f"{ctype(t)} {'abc'[i]} = {src_expr(v, i, t)};" for i, t in enumerate(src_t)]
  if uses(expr, "D"): body.append(f"{ctype(dst_t)} d_ = {dst_read(v, dst_t)};")
  if uses(expr, "MB"): pre.append(f"const u64 mb_ = {mask_src(v.srcs[2], wave64) if v.e64 else 'VCC'};")
  if uses(expr, "VB"): pre.append("const u64 vb_ = VCC;")
  if uses(expr, "K") and v.literal is None: raise O.Unsupported(f"{v.op} needs a literal constant")
  r = "(" + subst(expr, D="d_", MB="((mb_ >> l) & 1)", VB="(int)((vb_ >> l) & 1)", K=f"{v.literal or 0:#x}u", CL=str(v.clmp)) + ")"
  if v.clmp and not uses(expr, "CL") and dst_t in CLAMP: r = f"{CLAMP[dst_t]}({r})"
  body += [f"{ctype(dst_t)} r = {r};", dst_write(v, dst_t, "r")]
  return lane_loop(pre, body)


def compare(v: Valu, wave64: bool) -> str:
  name = v.op.replace("v_cmpx_", "v_cmp_")
  t, stmt = CMP[name]
  src_t = cmp_srcs(name)
  pre, wm = ([], "ex") if v.dpp is None else dpp_prologue(v, t, wave64)
  body = [f"{ctype(s)} {'ab'[i]} = {src_expr(v, i, s)};" for i, s in enumerate(src_t)]
  body += ["int cond;", stmt, "m_ |= (u64)(cond != 0) << l;"]
  if v.op.startswith("v_cmpx_"): post = [f"SETMASK(EXEC_LO, m_ & {wm});"]   # fact 31: only EXEC is written
  else: post = write_mask(v.vdst if v.e64 else O.VCC_LO, f"m_ & {wm}")   # VOP3 compares name the SGPR in vdst
  return lane_loop(pre + ["u64 m_ = 0;"], body, post)


# ---- ops with a lane-mask output or input (VOP2 e32 uses VCC, VOP3SD uses sdst / src2) ----
CARRY = {
  "v_add_co_u32": ("u64 s = (u64)a + b;", "s >> 32", "CL && (s >> 32) ? 0xffffffffu : (u32)s"),
  "v_sub_co_u32": ("u64 s = (u64)a - b;", "b > a", "CL && b > a ? 0 : (u32)s"),
  "v_subrev_co_u32": ("u64 s = (u64)b - a;", "a > b", "CL && a > b ? 0 : (u32)s"),
  "v_add_co_ci_u32": ("u64 s = (u64)a + b + ci;", "s >> 32", "CL && (s >> 32) ? 0xffffffffu : (u32)s"),
  "v_sub_co_ci_u32": ("u64 s = (u64)a - b - ci;", "(u64)b + ci > a", "CL && (u64)b + ci > a ? 0 : (u32)s"),
  "v_subrev_co_ci_u32": ("u64 s = (u64)b - a - ci;", "(u64)a + ci > b", "CL && (u64)a + ci > b ? 0 : (u32)s"),
}


def carry_op(v: Valu, wave64: bool) -> str:
  calc, cout, res = CARRY[v.op]
  pre = ["u64 m_ = 0;"]
  if "_ci_" in v.op: pre.append(f"const u64 ci_ = {mask_src(v.srcs[2], wave64) if v.e64 else 'VCC'};")
  pre2, wm = ([], "ex") if v.dpp is None else dpp_prologue(v, "u32", wave64)
  body = [f"u32 a = {src_expr(v, 0, 'u32')}, b = {src_expr(v, 1, 'u32')};"]
  if "_ci_" in v.op: body.append("u32 ci = (ci_ >> l) & 1;")
  body += [calc, f"m_ |= (u64)(({cout}) != 0) << l;", f"u32 r = {res.replace('CL', str(v.clmp))};", dst_write(v, "u32", "r")]
  return lane_loop(pre + pre2 + [f"const u64 wm_ = {wm};"], body, write_mask(v.sdst if v.e64 else O.VCC_LO, "m_ & ex"))


def mad64(v: Valu) -> str:
  signed = v.op == "v_mad_i64_i32"
  if signed:
    calc = ["__int128 s = (__int128)(i64)(i32)a * (i32)b + (__int128)(i64)c;", "int co = (int)((s >> 64) & 1);",
            "u64 r = CL ? (s > (__int128)0x7fffffffffffffffll ? 0x7fffffffffffffffull : s < -(__int128)0x7fffffffffffffffll - 1 ? 0x8000000000000000ull : (u64)s) : (u64)s;"]
  else:
    calc = ["unsigned __int128 s = (unsigned __int128)a * b + c;", "int co = (int)(s >> 64);", "u64 r = CL && co ? ~0ull : (u64)s;"]
  body = [f"u32 a = {src_expr(v, 0, 'u32')}, b = {src_expr(v, 1, 'u32')}; u64 c = {src_expr(v, 2, 'u64')};",
          *(x.replace("CL", str(v.clmp)) for x in calc), "m_ |= (u64)co << l;", dst_write(v, "u64", "r", "ex")]
  return lane_loop(["u64 m_ = 0;"], body, write_mask(v.sdst, "m_ & ex"))


def div_scale(v: Valu) -> str:
  t = "f64" if v.op.endswith("f64") else "f32"
  fn = "div_scale64(a, b, c, FI64, FO64, &vc)" if t == "f64" else "div_scale32(a, b, c, FI32, FO32, &vc)"
  body = [f"{ctype(t)} a = {src_expr(v, 0, t)}, b = {src_expr(v, 1, t)}, c = {src_expr(v, 2, t)};",
          f"int vc; {ctype(t)} r = {fn};", "m_ |= (u64)vc << l;", dst_write(v, t, "r", "ex")]
  return lane_loop(["u64 m_ = 0;"], body, write_mask(v.sdst, "m_ & ex"))


# ---- cross-lane and register-indexed ops ----
def lane_ops(v: Valu, wave64: bool, pc: int) -> str:
  op = v.op
  if op in ("v_nop", "v_pipeflush"): return ""
  if op == "v_readfirstlane_b32":   # fact 41: lowest active lane, lane 0 when EXEC = 0
    val = O.vgpr(v.srcs[0], 32, lane="fl") if v.srcs[0] >= 256 else O.scalar(v.srcs[0], 32, v.literal)
    return "{ " + f"const u64 ex = EXEC; int fl = ex ? __builtin_ctzll(ex) : 0; {_sdst(v.vdst, val)}" + " }"
  if op == "v_readlane_b32":
    sel = O.scalar(v.srcs[1], 32, v.literal)
    val = O.vgpr(v.srcs[0], 32, lane="sl") if v.srcs[0] >= 256 else O.scalar(v.srcs[0], 32, v.literal)
    return "{ " + f"int sl = ({sel}) & (W - 1); {_sdst(v.vdst, val)}" + " }"
  if op == "v_writelane_b32":     # ignores EXEC
    sel, val = O.scalar(v.srcs[1], 32, v.literal), O.scalar(v.srcs[0], 32, v.literal)
    return "{ " + f"int sl = ({sel}) & (W - 1); V({v.vdst}, sl) = {val};" + " }"
  if op in ("v_permlane16_b32", "v_permlanex16_b32", "v_permlane64_b32") and v.srcs[0] < 256:
    raise O.Unsupported(f"{op} needs a VGPR source")
  if op in ("v_permlane16_b32", "v_permlanex16_b32"):
    fi, bc = int(v.hi[0]), int(v.hi[1])    # opsel[0] = fetch inactive, opsel[1] = bound control
    sel = f"({O.scalar(v.srcs[1], 32, v.literal)} | (u64){O.scalar(v.srcs[2], 32, v.literal)} << 32)"
    row = "(l & ~15)" if op == "v_permlane16_b32" else "((l & ~15) ^ 16)"
    src = O.vgpr(v.srcs[0], 32, lane="t_[l]")
    return lane_loop([f"const u64 sel_ = {sel}; u32 dp_[W]; int t_[W];",
                      f"for (int l = 0; l < W; l++) {{ t_[l] = {row} | ((sel_ >> ((l & 15) * 4)) & 15); dp_[l] = ({fi} || ((ex >> t_[l]) & 1)) ? {src} : 0; }}"],
                     [f"int ok = {fi} || ((ex >> t_[l]) & 1);", f"if (((ex >> l) & 1) && (ok || {bc})) V({v.vdst}, l) = dp_[l];"])
  if op == "v_permlane64_b32":      # fact 41: a no-op in wave32
    if not wave64: return ""
    return lane_loop([f"u32 dp_[W]; for (int l = 0; l < W; l++) dp_[l] = V({v.srcs[0] - 256}, l ^ 32);"],
                     [f"if ((ex >> l) & 1) V({v.vdst}, l) = dp_[l];"])
  if op in ("v_swap_b32", "v_swap_b16"):
    s = v.srcs[0] - 256
    if op == "v_swap_b32":
      return lane_loop([], [f"if ((ex >> l) & 1) {{ u32 t = V({v.vdst}, l); V({v.vdst}, l) = V({s}, l); V({s}, l) = t; }}"])
    a, b = (O.vgpr(256 + v.vdst, 16, v.dhi), O.vgpr(v.srcs[0], 16, v.hi[0]))
    va = Valu(op, [v.srcs[0]], vdst=s, dhi=v.hi[0])
    return lane_loop(["const u64 wm_ = ex;"], [f"u32 x = {a}, y = {b};", dst_write(v, "b16", "y"), dst_write(va, "b16", "x")])
  if op in ("v_movrels_b32", "v_movreld_b32", "v_movrelsd_b32", "v_movrelsd_2_b32"):
    # VGPR index relative to M0 (movrelsd_2: source += M0[9:0], destination += M0[25:16])
    so, do = {"v_movrels_b32": ("S(M0)", "0"), "v_movreld_b32": ("0", "S(M0)"), "v_movrelsd_b32": ("S(M0)", "S(M0)"),
              "v_movrelsd_2_b32": ("(S(M0) & 0x3ff)", "((S(M0) >> 16) & 0x3ff)")}[op]
    if v.srcs[0] >= 256: src = f"w->v[({v.srcs[0] - 256} + so_) * W + l]"
    else: src, so = O.scalar(v.srcs[0], 32, v.literal), "0"
    return ("{ " + f"u32 so_ = {so}, do_ = {do}; if ({v.srcs[0] - 256 if v.srcs[0] >= 256 else 0} + so_ > 255 || {v.vdst} + do_ > 255) "
            f"STOP(STOP_ILLEGAL, BASE + {pc:#x}, 1);" + lane_loop([], [f"if ((ex >> l) & 1) w->v[({v.vdst} + do_) * W + l] = {src};"]) + " }")
  raise O.Unsupported(f"{op} is not supported by the emulator")


def _sdst(reg: int, val: str) -> str:
  if reg == O.NULL: return ""
  if reg >= 128: raise O.Unsupported(f"scalar destination code {reg} is not an SGPR")
  return f"S({reg}) = {val};"


LANE_OPS = {"v_nop", "v_pipeflush", "v_readfirstlane_b32", "v_readlane_b32", "v_writelane_b32", "v_permlane16_b32",
            "v_permlanex16_b32", "v_permlane64_b32", "v_swap_b32", "v_swap_b16", "v_movrels_b32", "v_movreld_b32",
            "v_movrelsd_b32", "v_movrelsd_2_b32"}


def gen(inst, wave64: bool, pc: int) -> str:
  """C for one VOP1/VOP2/VOPC/VOP3/VOP3SD instruction."""
  v = normalize(inst)
  if v.op in CARRY: return carry_op(v, wave64)
  if v.op in ("v_mad_u64_u32", "v_mad_i64_i32"): return mad64(v)
  if v.op in ("v_div_scale_f32", "v_div_scale_f64"): return div_scale(v)
  if v.op in LANE_OPS: return lane_ops(v, wave64, pc)
  if v.op.replace("v_cmpx_", "v_cmp_") in CMP: return compare(v, wave64)
  if v.op in OPS: return table_op(v, wave64)
  raise O.Unsupported(f"{v.op} is not supported by the emulator")


# ---- VOPD: two VOP2-like ops issued together; both read all their sources before either writes ----
def gen_vopd(inst) -> str:
  parts, pre = [], []
  for k, (name, f) in enumerate(inst.vopd):
    op = name.replace("v_dual_", "v_")
    v = Valu(op, [f["src0"], 256 + f["vsrc1"]], vdst=f["vdst"], literal=inst.literal)
    dst_t, src_t, expr = OPS[op]
    reads = [f"{ctype(t)} {n}{k} = {src_expr(v, i, t)};" for i, (t, n) in enumerate(zip(src_t, "abc"))]
    if uses(expr, "D"): reads.append(f"u32 d{k} = V({v.vdst}, l);")
    expr = subst(expr, a=f"a{k}", b=f"b{k}", c=f"c{k}", D=f"d{k}", MB="((vcc_ >> l) & 1)", K=f"{inst.literal or 0:#x}u", CL="0")
    parts.append((v, reads, f"u32 r{k} = ({expr});"))
  body = [*parts[0][1], *parts[1][1], parts[0][2], parts[1][2],
          dst_write(parts[0][0], "b32", "r0", "ex"), dst_write(parts[1][0], "b32", "r1", "ex")]
  return lane_loop(["const u64 vcc_ = VCC;"], body)


def uses(expr: str, name: str) -> bool:
  """Whether `expr` mentions the placeholder variable `name` (not a call such as D(...))."""
  return re.search(rf"\b{name}\b(?!\s*\()", expr) is not None


def subst(expr: str, **names: str) -> str:
  """Replace placeholder variables (identifier tokens not followed by '(') in a C expression."""
  return re.sub(r"\b([A-Za-z_]\w*)\b(?!\s*\()", lambda m: names.get(m.group(1), m.group(1)), expr)
