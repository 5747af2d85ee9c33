"""C for the scalar encodings: SOP1, SOP2, SOPK, SOPC, SOPP (control flow) and SMEM.

SCC rules follow the RDNA3 ISA guide chapter 4 pseudocode (S_MAX/S_MIN compare strictly, S_ABSDIFF takes
the wrapped difference, sdst=NULL still writes SCC, 64-bit operands zero-extend a 32-bit literal and take
float constants as f64). In wave32 the *_b32 EXEC ops act on EXEC_LO and VCCZ/EXECZ test the low half.
"""
from __future__ import annotations
import re
from emu.amdgcn import operands
from emu.amdgcn.valu_table import FCOND, FLOAD

SEXT16 = "(u32)(i32)(i16)"
# name -> (dst bits, (src bits...), C statements reading a/b (and d for read-modify ops), writing r / SCC)
SOP: dict[str, tuple[int, tuple[int, ...], str]] = {
  "s_add_u32": (32, (32, 32), "u64 t = (u64)a + b; r = (u32)t; SCC = (u32)(t >> 32);"),
  "s_sub_u32": (32, (32, 32), "r = a - b; SCC = b > a;"),
  "s_add_i32": (32, (32, 32), "r = a + b; SCC = ((a ^ r) & (b ^ r)) >> 31;"),
  "s_sub_i32": (32, (32, 32), "r = a - b; SCC = ((a ^ b) & (a ^ r)) >> 31;"),
  "s_addc_u32": (32, (32, 32), "u64 t = (u64)a + b + SCC; r = (u32)t; SCC = (u32)(t >> 32);"),
  "s_subb_u32": (32, (32, 32), "u64 t = (u64)b + SCC; r = a - (u32)t; SCC = t > a;"),
  "s_absdiff_i32": (32, (32, 32), "r = a - b; if ((i32)r < 0) r = -r; SCC = r != 0;"),
  "s_min_i32": (32, (32, 32), "SCC = (i32)a < (i32)b; r = SCC ? a : b;"),
  "s_min_u32": (32, (32, 32), "SCC = a < b; r = SCC ? a : b;"),
  "s_max_i32": (32, (32, 32), "SCC = (i32)a > (i32)b; r = SCC ? a : b;"),
  "s_max_u32": (32, (32, 32), "SCC = a > b; r = SCC ? a : b;"),
  "s_lshl_b32": (32, (32, 32), "r = a << (b & 31); SCC = r != 0;"),
  "s_lshl_b64": (64, (64, 32), "r = a << (b & 63); SCC = r != 0;"),
  "s_lshr_b32": (32, (32, 32), "r = a >> (b & 31); SCC = r != 0;"),
  "s_lshr_b64": (64, (64, 32), "r = a >> (b & 63); SCC = r != 0;"),
  "s_ashr_i32": (32, (32, 32), "r = (u32)((i32)a >> (b & 31)); SCC = r != 0;"),
  "s_ashr_i64": (64, (64, 32), "r = (u64)((i64)a >> (b & 63)); SCC = r != 0;"),
  "s_bfe_u32": (32, (32, 32), "r = sbfe_u32(a, b); SCC = r != 0;"),
  "s_bfe_i32": (32, (32, 32), "r = sbfe_i32(a, b); SCC = r != 0;"),
  "s_bfe_u64": (64, (64, 32), "r = bfe_u64(a, b & 63, (b >> 16) & 0x7f); SCC = r != 0;"),
  "s_bfe_i64": (64, (64, 32), "r = bfe_i64(a, b & 63, (b >> 16) & 0x7f); SCC = r != 0;"),
  "s_bfm_b32": (32, (32, 32), "r = ((1u << (a & 31)) - 1) << (b & 31);"),
  "s_bfm_b64": (64, (32, 32), "r = ((1ull << (a & 63)) - 1) << (b & 63);"),
  "s_mul_i32": (32, (32, 32), "r = a * b;"),
  "s_mul_hi_u32": (32, (32, 32), "r = (u32)(((u64)a * b) >> 32);"),
  "s_mul_hi_i32": (32, (32, 32), "r = (u32)(((i64)(i32)a * (i32)b) >> 32);"),
  "s_cselect_b32": (32, (32, 32), "r = SCC ? a : b;"),
  "s_cselect_b64": (64, (64, 64), "r = SCC ? a : b;"),
  "s_pack_ll_b32_b16": (32, (32, 32), "r = (a & 0xffffu) | b << 16;"),
  "s_pack_lh_b32_b16": (32, (32, 32), "r = (a & 0xffffu) | (b & 0xffff0000u);"),
  "s_pack_hh_b32_b16": (32, (32, 32), "r = (a >> 16) | (b & 0xffff0000u);"),
  "s_pack_hl_b32_b16": (32, (32, 32), "r = (a >> 16) | b << 16;"),
  # SOP1
  "s_mov_b32": (32, (32,), "r = a;"),
  "s_mov_b64": (64, (64,), "r = a;"),
  "s_cmov_b32": (32, (32,), "r = SCC ? a : d;"),
  "s_cmov_b64": (64, (64,), "r = SCC ? a : d;"),
  "s_not_b32": (32, (32,), "r = ~a; SCC = r != 0;"),
  "s_not_b64": (64, (64,), "r = ~a; SCC = r != 0;"),
  "s_wqm_b32": (32, (32,), "r = wqm64(a) & 0xffffffffu; SCC = r != 0;"),
  "s_wqm_b64": (64, (64,), "r = wqm64(a); SCC = r != 0;"),
  "s_brev_b32": (32, (32,), "r = brev32(a);"),
  "s_brev_b64": (64, (64,), "r = brev64(a);"),
  "s_bcnt0_i32_b32": (32, (32,), "r = __builtin_popcount(~a); SCC = r != 0;"),
  "s_bcnt0_i32_b64": (32, (64,), "r = __builtin_popcountll(~a); SCC = r != 0;"),
  "s_bcnt1_i32_b32": (32, (32,), "r = __builtin_popcount(a); SCC = r != 0;"),
  "s_bcnt1_i32_b64": (32, (64,), "r = __builtin_popcountll(a); SCC = r != 0;"),
  "s_ctz_i32_b32": (32, (32,), "r = ctz32(a);"),
  "s_ctz_i32_b64": (32, (64,), "r = ctz64(a);"),
  "s_clz_i32_u32": (32, (32,), "r = clz32(a);"),
  "s_clz_i32_u64": (32, (64,), "r = clz64(a);"),
  "s_cls_i32": (32, (32,), "r = cls32(a);"),
  "s_cls_i32_i64": (32, (64,), "r = cls64(a);"),
  "s_sext_i32_i8": (32, (32,), "r = (u32)(i32)(i8)a;"),
  "s_sext_i32_i16": (32, (32,), "r = (u32)(i32)(i16)a;"),
  "s_bitset0_b32": (32, (32,), "r = d & ~(1u << (a & 31));"),
  "s_bitset0_b64": (64, (32,), "r = d & ~(1ull << (a & 63));"),
  "s_bitset1_b32": (32, (32,), "r = d | 1u << (a & 31);"),
  "s_bitset1_b64": (64, (32,), "r = d | 1ull << (a & 63);"),
  "s_bitreplicate_b64_b32": (64, (32,), "r = 0; for (int i = 0; i < 32; i++) r |= (u64)((a >> i) & 1) * 3ull << (2 * i);"),
  "s_abs_i32": (32, (32,), "r = (i32)a < 0 ? -a : a; SCC = r != 0;"),
  "s_quadmask_b32": (32, (32,), "r = quadmask(a); SCC = r != 0;"),
  "s_quadmask_b64": (64, (64,), "r = quadmask(a); SCC = r != 0;"),
  # SOPC
  "s_bitcmp0_b32": (0, (32, 32), "SCC = ((a >> (b & 31)) & 1) == 0;"),
  "s_bitcmp1_b32": (0, (32, 32), "SCC = ((a >> (b & 31)) & 1) == 1;"),
  "s_bitcmp0_b64": (0, (64, 32), "SCC = ((a >> (b & 63)) & 1) == 0;"),
  "s_bitcmp1_b64": (0, (64, 32), "SCC = ((a >> (b & 63)) & 1) == 1;"),
  "s_cmp_eq_u64": (0, (64, 64), "SCC = a == b;"),
  "s_cmp_lg_u64": (0, (64, 64), "SCC = a != b;"),
  # gfx12 (RDNA4 guide, SOP2): 64-bit add/sub/mul without a carry-out, SCC unchanged
  "s_add_nc_u64": (64, (64, 64), "r = a + b;"),
  "s_sub_nc_u64": (64, (64, 64), "r = a - b;"),
  "s_mul_u64": (64, (64, 64), "r = a * b;"),
}
for _w in (32, 64):
  for _n, _e in (("and", "a & b"), ("or", "a | b"), ("xor", "a ^ b"), ("nand", "~(a & b)"), ("nor", "~(a | b)"),
                 ("xnor", "~(a ^ b)"), ("and_not1", "a & ~b"), ("or_not1", "a | ~b")):
    SOP[f"s_{_n}_b{_w}"] = (_w, (_w, _w), f"r = {_e}; SCC = r != 0;")
for _c, _e in (("eq", "=="), ("lg", "!="), ("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
  SOP[f"s_cmp_{_c}_i32"] = (0, (32, 32), f"SCC = (i32)a {_e} (i32)b;")
  SOP[f"s_cmp_{_c}_u32"] = (0, (32, 32), f"SCC = a {_e} b;")
  SOP[f"s_cmpk_{_c}_i32"] = (0, (32,), f"SCC = (i32)d {_e} (i32){SEXT16}K;")
  SOP[f"s_cmpk_{_c}_u32"] = (0, (32,), f"SCC = d {_e} (u32)(K & 0xffffu);")
for _k in (1, 2, 3, 4):
  SOP[f"s_lshl{_k}_add_u32"] = (32, (32, 32), f"u64 t = ((u64)a << {_k}) + b; r = (u32)t; SCC = t >> 32 != 0;")
# RDNA3.5 (gfx1150/gfx1151) scalar float ops. AMD "RDNA3.5" ISA guide 6.8: they give the results of their VALU
# counterparts (the same helpers here, MODE's denormal and IEEE bits included), without source modifiers; f16 ops read
# bits 15:0 of their SGPRs (a float inline constant is the f16 value) and zero bits 31:16 of the result; 16.1-16.3
# pseudocode: S_FMAAK/S_FMAMK use the literal (K), S_FMAC accumulates into D, S_CVT_HI_F32_F16 converts bits 31:16.
for _n in ("add", "sub", "mul"):
  SOP[f"s_{_n}_f32"] = (32, (32, 32), f"r = {_n}32(a, b, FI32, FO32);")
  SOP[f"s_{_n}_f16"] = (16, (16, 16), f"r = {_n}16(a, b, FI16, FO16);")
for _k, _n in enumerate(("min", "max")):
  SOP[f"s_{_n}_f32"] = (32, (32, 32), f"r = {_n}32(a, b, FI32, IEEE);")
  SOP[f"s_{_n}_f16"] = (16, (16, 16), f"r = minmax16(a, b, FI16, IEEE, {_k});")
for _k, _n in enumerate(("trunc", "ceil", "rndne", "floor")):
  SOP[f"s_{_n}_f32"] = (32, (32,), f"r = round32(a, FI32, {_k});")
  SOP[f"s_{_n}_f16"] = (16, (16,), f"r = round16(a, FI16, {_k});")
SOP.update({
  "s_fmaak_f32": (32, (32, 32), "r = fma32(a, b, K, FI32, FO32);"),
  "s_fmamk_f32": (32, (32, 32), "r = fma32(a, K, b, FI32, FO32);"),
  "s_fmac_f32": (32, (32, 32), "r = fma32(a, b, d, FI32, FO32);"),
  "s_fmac_f16": (16, (16, 16), "r = fma16(a, b, d, FI16, FO16);"),
  "s_cvt_pk_rtz_f16_f32": (32, (32, 32), "r = f2h(ftz32(a, FI32), 1) | f2h(ftz32(b, FI32), 1) << 16;"),
  "s_cvt_f32_i32": (32, (32,), "r = cvt_f32_i32(a, FO32);"),
  "s_cvt_f32_u32": (32, (32,), "r = cvt_f32_u32(a, FO32);"),
  "s_cvt_i32_f32": (32, (32,), "r = cvt_i32_f32(a, FI32);"),
  "s_cvt_u32_f32": (32, (32,), "r = cvt_u32_f32(a, FI32);"),
  "s_cvt_f16_f32": (16, (32,), "r = cvt_f16_f32(a, FI32, FO16);"),
  "s_cvt_f32_f16": (32, (16,), "r = cvt_f32_f16(a, FI16, FO32);"),
  "s_cvt_hi_f32_f16": (32, (32,), "r = cvt_f32_f16(a >> 16, FI16, FO32);"),
})
for _c in ("lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt"):
  for _t, _w in (("f32", 32), ("f16", 16)): SOP[f"s_cmp_{_c}_{_t}"] = (0, (_w, _w), f"{{ {FLOAD[_t]} SCC = {FCOND[_c]}; }}")
# EXEC logic: new EXEC = f(S0, EXEC); saveexec writes the old EXEC to sdst, wrexec the new one (guide 4.2)
SAVEEXEC = {"and": "s & e", "or": "s | e", "xor": "s ^ e", "nand": "~(s & e)", "nor": "~(s | e)", "xnor": "~(s ^ e)",
            "and_not0": "~s & e", "or_not0": "~s | e", "and_not1": "s & ~e", "or_not1": "s | ~e"}
SOPK = {"s_movk_i32": f"d = {SEXT16}K;", "s_cmovk_i32": f"if (SCC) d = {SEXT16}K;", "s_mulk_i32": f"d = d * {SEXT16}K;",
        "s_addk_i32": f"u32 k = {SEXT16}K, r = d + k; SCC = ((d ^ r) & (k ^ r)) >> 31; d = r;"}
NOPS = {"s_nop", "s_clause", "s_delay_alu", "s_waitcnt", "s_waitcnt_depctr", "s_wait_idle", "s_wait_event", "s_icache_inv",
        "s_set_inst_prefetch_distance", "s_setprio", "s_sleep", "s_ttracedata", "s_ttracedata_imm", "s_incperflevel",
        "s_decperflevel", "s_wakeup", "s_setkill", "s_version", "s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_expcnt",
        "s_waitcnt_lgkmcnt", "s_dcache_inv", "s_gl1_inv", "s_atc_probe", "s_atc_probe_buffer",
        # gfx12's split counters and ALU dependency waits: memory completes in order here, so nothing is outstanding;
        # its prefetches have no cache to fill
        "s_wait_loadcnt", "s_wait_storecnt", "s_wait_samplecnt", "s_wait_bvhcnt", "s_wait_expcnt", "s_wait_dscnt",
        "s_wait_kmcnt", "s_wait_loadcnt_dscnt", "s_wait_storecnt_dscnt", "s_wait_alu", "s_prefetch_inst", "s_prefetch_inst_pc_rel",
        "s_prefetch_data", "s_buffer_prefetch_data", "s_prefetch_data_pc_rel"}
WORKGROUP_BARRIER = 0xFFFF   # gfx12 s_barrier_signal -1 / s_barrier_wait -1: the workgroup's barrier (named barriers: others)
BRANCH = {"s_branch": "1", "s_cbranch_scc0": "!w->scc", "s_cbranch_scc1": "w->scc", "s_cbranch_vccz": "VCC == 0",
          "s_cbranch_vccnz": "VCC != 0", "s_cbranch_execz": "EXEC == 0", "s_cbranch_execnz": "EXEC != 0",
          # no debugger is attached, so the conditional-debug bits are clear
          "s_cbranch_cdbgsys": "0", "s_cbranch_cdbguser": "0", "s_cbranch_cdbgsys_or_user": "0", "s_cbranch_cdbgsys_and_user": "0"}
ENDS = {"s_endpgm", "s_endpgm_saved", "s_endpgm_ordered_ps_done"}
MSG_INTERRUPT, MSG_DEALLOC_VGPRS, MSG_RTN_GET_REALTIME = 1, 3, 0x83
ILLEGAL_ROUND_MODE, ILLEGAL_CODE_END, ILLEGAL_HWREG, ILLEGAL_MOVREL = 2, 3, 4, 5


def sread(code: int, bits: int, literal: int | None) -> str:
  return operands.scalar(code, bits, literal)


def swrite(code: int, bits: int, val: str) -> str:
  regs = operands.sdst_regs(code, bits)
  if not regs: return ""
  return f"SET64({code}, {val});" if bits == 64 else f"S({code}) = {val};"


def target(pc: int, simm16: int) -> int:
  return pc + 4 + 4 * (simm16 - 0x10000 if simm16 & 0x8000 else simm16)


def alu(inst) -> str:
  f, op = inst.fields, inst.op
  if op.endswith(("_saveexec_b32", "_saveexec_b64", "_wrexec_b32", "_wrexec_b64")):
    bits = 64 if op.endswith("64") else 32
    kind = op[2:].rsplit("_", 2)[0]
    ex = "S64(EXEC_LO)" if bits == 64 else "S(EXEC_LO)"
    new = SAVEEXEC[kind].replace("s", "s_").replace("e", "e_")
    ty = "u64" if bits == 64 else "u32"
    keep = "n_" if "wrexec" in op else "e_"
    setex = "SET64(EXEC_LO, n_);" if bits == 64 else "S(EXEC_LO) = n_;"
    return "{ " + f"{ty} s_ = {sread(f['ssrc0'], bits, inst.literal)}, e_ = {ex}, n_ = {new}; {setex} " \
           f"{swrite(f['sdst'], bits, keep)} w->scc = n_ != 0;" + " }"
  dbits, sbits, body = SOP[op]
  srcs = [sread(f[k], b, inst.literal) for k, b in zip(("ssrc0", "ssrc1"), sbits)]
  ty = "u64" if dbits == 64 else "u32"
  lines = [f"{'u64' if b == 64 else 'u32'} {n} = {s};" for n, s, b in zip("ab", srcs, sbits)]
  if re.search(r"\bK\b", body): lines.append(f"const u32 K = {inst.literal:#x}u;")
  if re.search(r"\bd\b", body):
    lines.append(f"{ty} d = {sread(f['sdst'], dbits, None) if f['sdst'] != operands.NULL else '0'};")
  if dbits: lines.append(f"{ty} r;")
  lines.append("u32 SCC = w->scc;")
  lines.append(body)
  if dbits: lines.append(swrite(f["sdst"], dbits, "r"))
  lines.append("w->scc = SCC;")
  return "{ " + " ".join(lines) + " }"


def sopk(inst, pc: int) -> str:
  f, op = inst.fields, inst.op
  k = f"{f['simm16']:#x}u"
  if op.startswith("s_cmpk_"):
    body = SOP[op][2].replace("K", k)
    return "{ " + f"u32 d = S({f['sdst']}); u32 SCC; {body} w->scc = SCC;" + " }"
  if op in SOPK:
    d = f"S({f['sdst']})" if f["sdst"] != operands.NULL else "0"
    return "{ " + f"u32 d = {d}; u32 SCC = w->scc; {SOPK[op].replace('K', k)} {swrite(f['sdst'], 32, 'd')} w->scc = SCC;" + " }"
  if op == "s_getreg_b32":
    return "{ " + f"int ok; u32 v = getreg(w, {f['simm16']:#x}, &ok); if (!ok) STOP(STOP_ILLEGAL, BASE + {pc:#x}, {ILLEGAL_HWREG}); " \
           f"{swrite(f['sdst'], 32, 'v')}" + " }"
  if op in ("s_setreg_b32", "s_setreg_imm32_b32"):
    val = f"{inst.literal:#x}u" if op == "s_setreg_imm32_b32" else f"S({f['sdst']})"
    return "{ " + f"int r = setreg(w, {f['simm16']:#x}, {val}); if (r) STOP(STOP_ILLEGAL, BASE + {pc:#x}, r);" + " }"
  if op in NOPS: return ""
  raise operands.Unsupported(f"{op} is not supported by the emulator")


def sop1_control(inst, pc: int, nxt: int) -> str | None:
  """s_getpc/s_setpc/s_swappc and friends (the latter end the block)."""
  f, op = inst.fields, inst.op
  if op == "s_getpc_b64": return swrite(f["sdst"], 64, f"BASE + {nxt:#x}")
  if op == "s_setpc_b64": return f"w->pc = {sread(f['ssrc0'], 64, inst.literal)}; return;"
  if op == "s_swappc_b64":
    return "{ " + f"u64 t = {sread(f['ssrc0'], 64, inst.literal)}; {swrite(f['sdst'], 64, f'BASE + {nxt:#x}')} w->pc = t; return;" + " }"
  if op in ("s_movrels_b32", "s_movrels_b64", "s_movreld_b32", "s_movreld_b64"):
    n = 2 if op.endswith("64") else 1
    if op.startswith("s_movrels"):
      src, dst = f"{f['ssrc0']} + S(M0)", f"{f['sdst']}"
    else:
      src, dst = f"{f['ssrc0']}", f"{f['sdst']} + S(M0)"
    return "{ " + f"u32 si = {src}, di = {dst}; if (si + {n} > 106 || di + {n} > 106) STOP(STOP_ILLEGAL, BASE + {pc:#x}, {ILLEGAL_MOVREL}); " \
           + " ".join(f"w->s[di + {i}] = w->s[si + {i}];" for i in range(n)) + " }"
  if op == "s_barrier_signal":   # gfx12: the wave arrives; it waits at s_barrier_wait, which is the emulator's barrier
    if f["ssrc0"] != 0xC1: raise operands.Unsupported("s_barrier_signal of a named barrier (only -1, the workgroup's, is modelled)")
    return ""
  if op in ("s_sendmsg_rtn_b32", "s_sendmsg_rtn_b64"):
    if f["ssrc0"] != MSG_RTN_GET_REALTIME: raise operands.Unsupported(f"{op} message {f['ssrc0']:#x} is not modelled")
    return swrite(f["sdst"], 64 if op.endswith("64") else 32, "w->d->instructions")
  return None


def sopp(inst, pc: int, nxt: int) -> str:
  op, imm = inst.op, inst.fields["simm16"]
  if op in NOPS: return ""
  if op in BRANCH:
    t = target(pc, imm)
    return f"w->pc = BASE + ({BRANCH[op]} ? {t:#x} : {nxt:#x}); return;"
  if op in ENDS: return "w->status = WAVE_END; return;"
  if op == "s_barrier" or (op == "s_barrier_wait" and imm == WORKGROUP_BARRIER):
    return f"w->pc = BASE + {nxt:#x}; w->status = WAVE_BARRIER; return;"
  if op == "s_trap": return f"STOP(STOP_TRAP, BASE + {pc:#x}, {imm & 0xff});"
  if op == "s_sethalt": return f"STOP(STOP_HALT, BASE + {pc:#x}, 0);" if imm & 1 else ""
  if op == "s_code_end": return f"STOP(STOP_ILLEGAL, BASE + {pc:#x}, {ILLEGAL_CODE_END});"
  if op == "s_sendmsg":
    if imm & 0xff in (MSG_DEALLOC_VGPRS, MSG_INTERRUPT): return ""   # no effect on the emulated state
    raise operands.Unsupported(f"s_sendmsg message {imm & 0xff:#x} is not modelled")
  if op == "s_denorm_mode": return f"w->mode = (w->mode & ~0xf0u) | {(imm & 0xF) << 4:#x}u;"
  if op == "s_round_mode":
    if imm & 0xF: return f"STOP(STOP_ILLEGAL, BASE + {pc:#x}, {ILLEGAL_ROUND_MODE});"
    return "w->mode &= ~0xfu;"
  raise operands.Unsupported(f"{op} is not supported by the emulator")


def smem_sub_dword(op: str, kind: str, base: int, off: int, soff: str, dst: int, pc: int) -> str:
  """gfx12's S_LOAD_U8/I8/U16/I16 and S_BUFFER_LOAD_*: one byte or short at its byte address into one SGPR, zero- or
  sign-extended (RDNA4 ISA reference guide, SMEM instructions); a buffer load past num_records reads 0."""
  nb = int(kind[1:]) // 8
  ext = {"u8": "v_ & 0xffu", "i8": "(u32)(i32)(i8)v_", "u16": "v_ & 0xffffu", "i16": "(u32)(i32)(i16)v_"}[kind]
  store = "" if dst == operands.NULL else f"S({dst}) = {ext};"
  if op.startswith("s_load_"):
    return "{ " + f"u64 a = S64({base}) + (u64)(i64){off}{soff}; u32 v_ = 0; if (!kld(w, a, &v_, {nb})) FAIL(BASE + {pc:#x}); {store}" + " }"
  if op.startswith("s_buffer_load_"):
    return "{ " + f"u64 b = S64({base}) & 0xffffffffffffull; u32 nr = S({base + 2}); u32 o = (u32){off}{soff}; u32 v_ = 0; " \
           f"if (o < nr && !kld(w, b + o, &v_, {nb})) FAIL(BASE + {pc:#x}); {store}" + " }"
  raise operands.Unsupported(f"{op} is not supported by the emulator")


def smem(inst, pc: int) -> str:
  f, op = inst.fields, inst.op
  if op in NOPS: return ""
  if f.get("scale_offset"): raise operands.Unsupported(f"{op} with scale_offset (not a gfx12 feature) is not supported")
  bits = 24 if "th" in f else 21   # fact 8: 21-bit signed; gfx12: 24-bit signed (its encodings.py)
  off = f["offset"] - (1 << bits) if f["offset"] & (1 << (bits - 1)) else f["offset"]
  soff = f" + S({f['soffset']})" if f["soffset"] != operands.NULL else ""
  base = 2 * f["sbase"]
  dst = f["sdata"]
  if not (kind := op.rsplit("_", 1)[1]).startswith("b"): return smem_sub_dword(op, kind, base, off, soff, dst, pc)
  n = int(op.rsplit("_b", 1)[1]) // 32
  if dst + n > 128 and dst != operands.NULL: raise operands.Unsupported(f"{op} destination s{dst} runs past the SGPR file")
  store = "" if dst == operands.NULL else " ".join(f"S({dst + i}) = v_[{i}];" for i in range(n))
  if op.startswith("s_load_"):
    return "{ " + f"u64 a = (S64({base}) + (u64)(i64){off}{soff}) & ~3ull; u32 v_[{n}]; " \
           f"if (!kld(w, a, v_, {4 * n})) FAIL(BASE + {pc:#x}); {store}" + " }"
  if op.startswith("s_buffer_load_"):
    # buffer resource: base [47:0], num_records [95:64] (bytes); dwords past num_records read 0
    return "{ " + f"u64 b = S64({base}) & 0xffffffffffffull; u32 nr = S({base + 2}); u32 o = ((u32){off}{soff}) & ~3u; u32 v_[{n}]; " \
           f"for (int i = 0; i < {n}; i++) {{ u32 oi = o + 4 * i; v_[i] = 0; " \
           f"if (oi < nr && !kld(w, b + oi, &v_[i], 4)) FAIL(BASE + {pc:#x}); }} {store}" + " }"
  raise operands.Unsupported(f"{op} is not supported by the emulator")


def gen(inst, pc: int, nxt: int) -> str:
  """C for one scalar instruction; control transfers set w->pc and return from the block."""
  e = inst.enc
  if e == "SOPP": return sopp(inst, pc, nxt)
  if e == "SMEM": return smem(inst, pc)
  if e == "SOPK":
    if inst.op == "s_call_b64":
      return "{ " + f"{swrite(inst.fields['sdst'], 64, f'BASE + {nxt:#x}')} w->pc = BASE + {target(pc, inst.fields['simm16']):#x}; return;" + " }"
    return sopk(inst, pc)
  if e == "SOP1" and (c := sop1_control(inst, pc, nxt)) is not None: return c
  if inst.op in SOP or inst.op.endswith(("exec_b32", "exec_b64")): return alu(inst)
  raise operands.Unsupported(f"{inst.op} is not supported by the emulator")


def ends_block(inst) -> bool:
  """Instructions after which control does not simply fall through inside the compiled block."""
  op = inst.op
  return op in BRANCH or op in ENDS or op in ("s_barrier", "s_barrier_wait", "s_trap", "s_setpc_b64", "s_swappc_b64", "s_call_b64",
                                               "s_code_end") or (op == "s_sethalt" and inst.fields["simm16"] & 1)


def successors(inst, pc: int, nxt: int) -> list[int]:
  """Statically known next PCs (offsets) of a block-ending instruction."""
  op = inst.op
  if op == "s_branch": return [target(pc, inst.fields["simm16"])]
  if op in BRANCH: return [target(pc, inst.fields["simm16"]), nxt]
  if op in ("s_barrier", "s_barrier_wait"): return [nxt]
  if op == "s_call_b64": return [target(pc, inst.fields["simm16"]), nxt]
  if op == "s_swappc_b64": return [nxt]
  return []
