"""Glue C for the VALU encodings (VOP1, VOP2, VOPC, VOP3, VOP3SD, VOPD, with DPP16/DPP8 on src0): gather each
source into a W-lane array, call the operation's lane kernel in the runtime (runtime.py), write the result
under the EXEC-derived mask. Lane-mask results (compares, carries) are `mask & EXEC` (facts 12, 30); all
sources are read before anything is written (fact 13). 16-bit operands: in VOP1/VOP2/VOPC a VGPR field's bit 7
selects the high half (LLVM's true16 .h), in VOP3 the opsel bits do; a low-half write keeps the high half
(fact 38). OMOD is ignored on RDNA3 (fact 24).
"""
from __future__ import annotations
from dataclasses import dataclass, field
from emu.amdgcn import operands
from emu.amdgcn.runtime import WIDTH, CARRY, uses, ctype
from emu.amdgcn.valu_table import OPS, CMP, cmp_srcs
from emu.amdgcn.decode import VCC_LO

SIGN = {16: 0x8000, 32: 0x80000000, 64: 0x8000000000000000}


@dataclass
class Valu:
  """One VALU operation in encoding-neutral form."""
  op: str
  srcs: list[int]                      # 9-bit source codes (VGPRs as 256 + n)
  vdst: int | None = None              # VGPR number (or the SGPR of a VOP3 compare / readlane)
  sdst: int | None = None              # VOP3SD carry-out SGPR
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
    elif v.op == "v_swap_b16": _true16(v, ("b16",), "b16")
  return v


def dpp16_valid(ctrl: int) -> bool:
  """quad_perm, row_shl/shr/ror 1-15, row_mirror, row_half_mirror, 0x142/0x143 (fact 47), row_share, row_xmask"""
  return ctrl <= 0xFF or any(lo <= ctrl <= lo + 14 for lo in (0x101, 0x111, 0x121)) or 0x140 <= ctrl <= 0x143 or 0x150 <= ctrl <= 0x16F


class Glue:
  """C statements of one instruction: temporaries, gathers, the kernel call, the writes."""
  def __init__(self, wave64: bool):
    self.wave64, self.lines, self.n = wave64, ["const u64 ex = EXEC;"], 0

  def temp(self, t: str) -> str:
    self.n += 1
    self.lines.append(f"{ctype(t)} t{self.n}[W];")
    return f"t{self.n}"

  def source(self, v: Valu, i: int, t: str, wm: list[str]) -> str:
    """Pointer to source i as a W-lane array of type t (abs/neg applied as sign-bit operations, fact 22)."""
    w, code = WIDTH[t], v.srcs[i]
    if i == 0 and v.dpp is not None:
      if w == 64: raise operands.Unsupported(f"DPP on the 64-bit operand of {v.op} is not valid on gfx11")
      p, half = self.temp(t), (2 if v.hi[0] else 1) if w == 16 else 0
      if "sel" in v.dpp:
        sel = sum(s << (3 * k) for k, s in enumerate(v.dpp["sel"]))
        self.lines.append(f"g_dpp8({p}, w, {code - 256}, {half}, {sel:#x}, {v.dpp['fi']}, ex);")
      else:
        d = v.dpp
        if not dpp16_valid(d["ctrl"]): raise operands.Unsupported(f"DPP control {d['ctrl']:#x} is not valid on gfx11")
        lanes = 64 if self.wave64 else 32
        rb = sum(1 << l for l in range(lanes) if d["row_mask"] >> (l >> 4) & 1 and d["bank_mask"] >> ((l >> 2) & 3) & 1)
        self.lines.append(f"u64 dv; g_dpp16({p}, &dv, w, {code - 256}, {half}, {d['ctrl']:#x}, {d['fi']}, {d['bound_ctrl']}, ex);")
        wm.append(f"dv & {rb:#x}ull")
    elif code >= 256 and w == 32: p = f"(&w->v[{code - 256} * W])"
    elif code >= 256:
      p = self.temp(t)
      self.lines.append(f"g_v16({p}, w, {code - 256}, {int(v.hi[i])});" if w == 16 else f"g_v64({p}, w, {code - 256});")
    else:
      p = self.temp(t)
      val = operands.src(code, w, v.literal, float_lit64=(t == "f64"), hi=v.hi[i])
      self.lines.append(f"g_bcast{'64' if w == 64 else '32'}({p}, {val});")
    if v.absm >> i & 1 or v.negm >> i & 1:
      sign, full = SIGN[w], (1 << w) - 1 if w == 64 else 0xFFFFFFFF
      andm, xorm = (full & ~sign) if v.absm >> i & 1 else full, sign if v.negm >> i & 1 else 0
      q = self.temp(t)
      suffix = "ull" if w == 64 else "u"
      self.lines.append(f"g_mod{'64' if w == 64 else '32'}({q}, {p}, {andm:#x}{suffix}, {xorm:#x}{suffix});")
      p = q
    return p

  def old_dst(self, v: Valu, t: str) -> str:
    if WIDTH[t] == 32: return f"(&w->v[{v.vdst} * W])"
    p = self.temp(t)
    self.lines.append(f"g_v16({p}, w, {v.vdst}, {int(v.dhi)});" if WIDTH[t] == 16 else f"g_v64({p}, w, {v.vdst});")
    return p

  def put(self, v: Valu, t: str, r: str, m: str) -> None:
    w = WIDTH[t]
    self.lines.append(f"p_64(w, {v.vdst}, {r}, {m});" if w == 64 else f"p_16(w, {v.vdst}, {int(v.dhi)}, {r}, {m});" if w == 16
                      else f"p_32(w, {v.vdst}, {r}, {m});")

  def text(self) -> str: return "{ " + " ".join(self.lines) + " }"


def mask_src(code: int, wave64: bool) -> str:
  """A lane mask operand (VCC, an SGPR pair in wave64 / one SGPR in wave32, or a constant)."""
  if code < 128 and code != operands.NULL: return f"LANEMASK({code})"
  return operands.scalar(code, 64 if wave64 else 32, None)


def write_mask(reg: int | None, m: str) -> list[str]:
  if reg is None or reg == operands.NULL: return []
  if reg >= 128: raise operands.Unsupported(f"lane-mask destination code {reg} is not an SGPR")
  return [f"SETMASK({reg}, {m});"]


def write_mask_expr(wm: list[str]) -> str: return " & ".join(["ex"] + [f"({m})" for m in wm])


def table_op(v: Valu, wave64: bool) -> str:
  dst_t, src_t, expr = OPS[v.op]
  g, wm = Glue(wave64), []
  args = [g.source(v, i, t, wm) for i, t in enumerate(src_t)] + ["0"] * (3 - len(src_t))
  d = g.old_dst(v, dst_t) if uses(expr, "D") else "0"
  mb = (mask_src(v.srcs[2], wave64) if v.e64 else "VCC") if uses(expr, "MB") else "VCC" if uses(expr, "VB") else "0"
  if uses(expr, "K") and v.literal is None: raise operands.Unsupported(f"{v.op} needs a literal constant")
  r = g.temp(dst_t)
  g.lines.append(f"k_{v.op}(w, {r}, {', '.join(args)}, {d}, {mb}, {v.literal or 0:#x}u, {v.clmp});")
  g.put(v, dst_t, r, write_mask_expr(wm))
  return g.text()


def compare(v: Valu, wave64: bool) -> str:
  name = v.op.replace("v_cmpx_", "v_cmp_")
  g, wm = Glue(wave64), []
  a, b = (g.source(v, i, t, wm) for i, t in enumerate(cmp_srcs(name)))
  g.lines.append(f"u64 m = c_{name}(w, {a}, {b}) & {write_mask_expr(wm)};")
  if v.op.startswith("v_cmpx_"): g.lines.append("SETMASK(EXEC_LO, m);")    # fact 31: only EXEC is written
  else: g.lines += write_mask(v.vdst if v.e64 else VCC_LO, "m")          # VOP3 compares name the SGPR in vdst
  return g.text()


def mask_op(v: Valu, wave64: bool) -> str:
  """Carry-in/out ops (VOP2 e32 use VCC, VOP3SD sdst / src2), v_mad_u64/i64, v_div_scale."""
  rt, st, ct, _ = CARRY[v.op]
  if v.op == "v_div_scale_f64": st = ct = "f64"   # f64 operands: a literal is their high 32 bits (RDNA3 ISA guide, literal constants)
  g, wm = Glue(wave64), []
  a, b = g.source(v, 0, st, wm), g.source(v, 1, st, wm)
  c = g.source(v, 2, ct, wm) if v.op.startswith(("v_mad_", "v_div_scale")) else "0"
  cin = (mask_src(v.srcs[2], wave64) if v.e64 else "VCC") if "_ci_" in v.op else "0"
  r = g.temp(rt)
  g.lines.append(f"u64 m = kc_{v.op}(w, {r}, {a}, {b}, {c}, {cin}, {v.clmp});")
  g.put(v, rt, r, write_mask_expr(wm))
  g.lines += write_mask(v.sdst if v.e64 else VCC_LO, "m & ex")
  return g.text()


# ---- cross-lane and register-indexed ops ----
def lane_ops(v: Valu, wave64: bool, pc: int) -> str:
  op = v.op
  if op in ("v_nop", "v_pipeflush"): return ""
  if op == "v_readfirstlane_b32":   # fact 41: lowest active lane, lane 0 when EXEC = 0
    val = operands.vgpr(v.srcs[0], 32, lane="fl") if v.srcs[0] >= 256 else operands.scalar(v.srcs[0], 32, v.literal)
    return "{ " + f"const u64 ex = EXEC; int fl = ex ? __builtin_ctzll(ex) : 0; {_sdst(v.vdst, val)}" + " }"
  if op == "v_readlane_b32":
    sel = operands.scalar(v.srcs[1], 32, v.literal)
    val = operands.vgpr(v.srcs[0], 32, lane="sl") if v.srcs[0] >= 256 else operands.scalar(v.srcs[0], 32, v.literal)
    return "{ " + f"int sl = ({sel}) & (W - 1); {_sdst(v.vdst, val)}" + " }"
  if op == "v_writelane_b32":     # ignores EXEC
    sel, val = operands.scalar(v.srcs[1], 32, v.literal), operands.scalar(v.srcs[0], 32, v.literal)
    return "{ " + f"int sl = ({sel}) & (W - 1); V({v.vdst}, sl) = {val};" + " }"
  if op in ("v_permlane16_b32", "v_permlanex16_b32", "v_permlane64_b32") and v.srcs[0] < 256:
    raise operands.Unsupported(f"{op} needs a VGPR source")
  if op in ("v_permlane16_b32", "v_permlanex16_b32"):
    fi, bc = int(v.hi[0]), int(v.hi[1])    # opsel[0] = fetch inactive, opsel[1] = bound control
    sel = f"({operands.scalar(v.srcs[1], 32, v.literal)} | (u64){operands.scalar(v.srcs[2], 32, v.literal)} << 32)"
    row = "(l & ~15)" if op == "v_permlane16_b32" else "((l & ~15) ^ 16)"
    src = operands.vgpr(v.srcs[0], 32, lane="t_[l]")
    return ("{ const u64 ex = EXEC; " + f"const u64 sel_ = {sel}; u32 dp_[W]; int t_[W]; "
            f"for (int l = 0; l < W; l++) {{ t_[l] = {row} | ((sel_ >> ((l & 15) * 4)) & 15); dp_[l] = ({fi} || ((ex >> t_[l]) & 1)) ? {src} : 0; }} "
            f"for (int l = 0; l < W; l++) {{ int ok = {fi} || ((ex >> t_[l]) & 1); "
            f"if (((ex >> l) & 1) && (ok || {bc})) V({v.vdst}, l) = dp_[l]; }} }}")
  if op == "v_permlane64_b32":      # fact 41: a no-op in wave32
    if not wave64: return ""
    return ("{ const u64 ex = EXEC; " + f"u32 dp_[W]; for (int l = 0; l < W; l++) dp_[l] = V({v.srcs[0] - 256}, l ^ 32); "
            f"for (int l = 0; l < W; l++) if ((ex >> l) & 1) V({v.vdst}, l) = dp_[l]; }}")
  if op == "v_swap_b32":
    s = v.srcs[0] - 256
    return "{ const u64 ex = EXEC; " + \
      f"for (int l = 0; l < W; l++) if ((ex >> l) & 1) {{ u32 t = V({v.vdst}, l); V({v.vdst}, l) = V({s}, l); V({s}, l) = t; }} }}"
  if op == "v_swap_b16":
    g, other = Glue(wave64), Valu(op, [], vdst=v.srcs[0] - 256, dhi=v.hi[0])
    x, y = g.temp("b16"), g.temp("b16")
    g.lines += [f"g_v16({x}, w, {v.vdst}, {int(v.dhi)});", f"g_v16({y}, w, {v.srcs[0] - 256}, {int(v.hi[0])});"]
    g.put(v, "b16", y, "ex")
    g.put(other, "b16", x, "ex")
    return g.text()
  if op in ("v_movrels_b32", "v_movreld_b32", "v_movrelsd_b32", "v_movrelsd_2_b32"):
    # VGPR index relative to M0 (movrelsd_2: source += M0[9:0], destination += M0[25:16])
    so, do = {"v_movrels_b32": ("S(M0)", "0"), "v_movreld_b32": ("0", "S(M0)"), "v_movrelsd_b32": ("S(M0)", "S(M0)"),
              "v_movrelsd_2_b32": ("(S(M0) & 0x3ff)", "((S(M0) >> 16) & 0x3ff)")}[op]
    if v.srcs[0] >= 256: src = f"w->v[({v.srcs[0] - 256} + so_) * W + l]"
    else: src, so = operands.scalar(v.srcs[0], 32, v.literal), "0"
    return ("{ " + f"u32 so_ = {so}, do_ = {do}; if ({v.srcs[0] - 256 if v.srcs[0] >= 256 else 0} + so_ > 255 || {v.vdst} + do_ > 255) "
            f"STOP(STOP_ILLEGAL, BASE + {pc:#x}, 1); const u64 ex = EXEC; "
            f"for (int l = 0; l < W; l++) if ((ex >> l) & 1) w->v[({v.vdst} + do_) * W + l] = {src}; }}")
  raise operands.Unsupported(f"{op} is not supported by the emulator")


def _sdst(reg: int, val: str) -> str:
  if reg == operands.NULL: return ""
  if reg >= 128: raise operands.Unsupported(f"scalar destination code {reg} is not an SGPR")
  return f"S({reg}) = {val};"


LANE_OPS = {"v_nop", "v_pipeflush", "v_readfirstlane_b32", "v_readlane_b32", "v_writelane_b32", "v_permlane16_b32",
            "v_permlanex16_b32", "v_permlane64_b32", "v_swap_b32", "v_swap_b16", "v_movrels_b32", "v_movreld_b32",
            "v_movrelsd_b32", "v_movrelsd_2_b32"}


def gen(inst, wave64: bool, pc: int) -> str:
  """C for one VOP1/VOP2/VOPC/VOP3/VOP3SD instruction."""
  v = normalize(inst)
  if v.op in CARRY: return mask_op(v, wave64)
  if v.op in LANE_OPS: return lane_ops(v, wave64, pc)
  if v.op.replace("v_cmpx_", "v_cmp_") in CMP: return compare(v, wave64)
  if v.op in OPS: return table_op(v, wave64)
  raise operands.Unsupported(f"{v.op} is not supported by the emulator")


def gen_vopd(inst, wave64: bool) -> str:
  """VOPD: two VOP2-like ops issued together; both read all their sources before either writes."""
  g, halves = Glue(wave64), []
  for name, f in inst.vopd:
    v = Valu(name.replace("v_dual_", "v_"), [f["src0"], 256 + f["vsrc1"]], vdst=f["vdst"], literal=inst.literal)
    dst_t, src_t, expr = OPS[v.op]
    args = [g.source(v, i, t, []) for i, t in enumerate(src_t)] + ["0"] * (3 - len(src_t))
    d = g.old_dst(v, dst_t) if uses(expr, "D") else "0"
    halves.append((v, args, d, "VCC" if uses(expr, "MB") else "0"))
  outs = []
  for v, args, d, mb in halves:
    r = g.temp("u32")
    g.lines.append(f"k_{v.op}(w, {r}, {', '.join(args)}, {d}, {mb}, {inst.literal or 0:#x}u, 0);")
    outs.append((v, r))
  for v, r in outs: g.put(v, "u32", r, "ex")
  return g.text()
