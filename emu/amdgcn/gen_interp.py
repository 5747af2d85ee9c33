"""Glue C for pixel parameter interpolation: LDS_PARAM_LOAD / LDS_DIRECT_LOAD (LDSDIR) and V_INTERP_* (VINTERP),
calling c/interp.c. Facts: AMD "RDNA3.5" ISA guide (gfx11's LDSDIR and VINTERP are the same): 3.4.3 and 12.2.1 (M0
of LDS_PARAM_LOAD: {1'b0, new_prim_mask[15:1], param_offset[15:0]}, offset[6:0] zero, wave32 mask {8'b0, mask[7:1]}),
12.4 (M0 of LDS_DIRECT_LOAD: {13'b0, type[2:0], address[15:0]}, dword aligned; types 3, 6, 7 reserved), 2.3 (neither
load is supported in WGP mode), 12.3 (V_INTERP operands; OPSEL only for 16-bit operands). The loads complete at once
in the emulator, so wait_vdst / wait_exp have nothing to wait for.
"""
from __future__ import annotations
from emu.amdgcn import operands

ILLEGAL_LDSDIR_M0, ILLEGAL_LDSDIR_WGP = 9, 10
MAX_ATTR = 32      # ATTR: attribute number 0 - 32 (guide table 57)


def ldsdir(inst, pc: int) -> str:
  f = inst.fields
  stop = lambda why: f"STOP(STOP_ILLEGAL, BASE + {pc:#x}, {why});"
  lines = ["const u64 ex = EXEC;", f"if (w->d->wgp_mode) {stop(ILLEGAL_LDSDIR_WGP)}", "u32 m0 = S(M0);"]
  if inst.op == "lds_direct_load":
    lines += [f"if ((m0 >> 19) || ((m0 >> 16) & 7) == 3 || ((m0 >> 16) & 7) > 5 || (m0 & 3)) {stop(ILLEGAL_LDSDIR_M0)}",
              f"if (!m_lds_direct(w, {f['vdst']}, ex)) FAIL(BASE + {pc:#x});"]
  else:
    if f["attr"] > MAX_ATTR: raise operands.Unsupported(f"lds_param_load attribute {f['attr']} is out of range (0-{MAX_ATTR})")
    lines += [f"if ((m0 & 0x7f) || (m0 >> 31) || (W == 32 && (m0 >> 23))) {stop(ILLEGAL_LDSDIR_M0)}",
              f"if (!m_lds_param(w, {f['vdst']}, {f['attr']}, {f['attrchan']}, ex)) FAIL(BASE + {pc:#x});"]
  return "{ " + " ".join(lines) + " }"


def vinterp(inst) -> str:
  f, op = inst.fields, inst.opcode
  if f["src0"] < 256 or f["src2"] < 256:
    raise operands.Unsupported(f"{inst.op}: src0 and src2 must be VGPRs (their values come from other lanes of the quad)")
  f16, p2 = op >= 2, op & 1
  halves = (0b0001 | (0b1000 if p2 else 0b0100)) if f16 else 0    # opsel bits of the 16-bit operands: src0, dst / src2
  if f["opsel"] & ~halves: raise operands.Unsupported(f"{inst.op}: OPSEL {f['opsel']:#x} selects a half of a 32-bit operand")
  lines = ["const u64 ex = EXEC;"]
  if f["src1"] >= 256: b = f"(&w->v[{f['src1'] - 256} * W])"
  else: lines.append(f"u32 b_[W]; g_bcast32(b_, {operands.scalar(f['src1'], 32, inst.literal)});"); b = "b_"
  lines.append(f"u32 r_[W]; k_interp(w, r_, {f['src0'] - 256}, {b}, {f['src2'] - 256}, {op}, {f['opsel']}, {f['neg']}, {f['clmp']});")
  lines.append(f"p_16(w, {f['vdst']}, {f['opsel'] >> 3 & 1}, r_, ex);" if f16 and p2 else f"p_32(w, {f['vdst']}, r_, ex);")
  return "{ " + " ".join(lines) + " }"
