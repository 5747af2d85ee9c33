"""Glue C for the memory encodings: DS (LDS), FLAT / GLOBAL / SCRATCH and MUBUF (buffer) instructions, calling
the runtime's vector memory operations (c/mem.c).

Memory is synchronous in the emulator (every access completes before the next instruction, so s_waitcnt has
nothing to wait for) and lanes access it in lane order, which makes atomics deterministic. Facts:
the RDNA3 ISA guide chapters 10-12: DS offsets, 2ADDR scaling (x4 / x8, stride64 x256 / x512), 2ADDR loads
read the address before writing; non-RTN atomics leave vdst alone; sub-dword loads sign/zero-extend, D16 loads
keep the other half (DS and FLAT alike); GLOBAL's 13-bit signed offset applies with and without saddr; SCRATCH with SVE=0 ignores
VADDR. Atomics return the old value when GLC is set (FLAT/GLOBAL/MUBUF) or the opcode is *_rtn_* (DS).
"""
from __future__ import annotations
from emu.amdgcn import operands

SP_GLOBAL, SP_FLAT, SP_SCRATCH, SP_LDS = range(4)
SIZES = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}
# atomic operations in the order of c/mem.c's A_* enum; DS names map onto them
ATOMICS = ("swap", "add", "sub", "rsub", "and", "or", "xor", "inc", "dec", "csub", "mskor", "cmpswap", "min_i", "max_i",
           "min_u", "max_u", "add_f32", "min_f32", "max_f32", "cmpswap_f32", "min_f64", "max_f64", "cmpswap_f64")
ALIASES = {"storexchg": "swap", "cmpstore": "cmpswap", "cmpstore_f32": "cmpswap_f32", "cmpstore_f64": "cmpswap_f64"}
TWO_OPERANDS = ("mskor", "cmpswap", "cmpswap_f32", "cmpswap_f64")


def split_atomic(op: str) -> tuple[int, int, bool] | None:
  """'global_atomic_min_i32' -> (A_MIN_I, 32, False); 'ds_min_rtn_i32' -> (A_MIN_I, 32, True)."""
  parts = op.split("_", 2)
  rest = parts[2] if parts[1] == "atomic" else op.split("_", 1)[1]
  rtn = "_rtn_" in f"_{rest}_"
  name, _, ty = rest.replace("rtn_", "").rpartition("_")
  if ty in ("f32", "f64") and name in ("add", "min", "max", "cmpswap", "cmpstore"): kind = f"{name}_{ty}"
  elif name and ty[1:] in ("32", "64"): kind = f"{name}_{ty[0]}" if name in ("min", "max") else name
  else: return None
  kind = ALIASES.get(kind, kind)
  if kind not in ATOMICS: return None
  return ATOMICS.index(kind), int(ty[1:]), rtn


def d16_form(op: str) -> str:
  """DS names put the D16 part last (ds_load_u8_d16_hi, ds_store_b16_d16_hi), FLAT ones before the type
  (global_load_d16_hi_u8): the FLAT form, which load_store reads."""
  for suf in ("_d16_hi", "_d16"):
    if op.endswith(suf):
      head, _, kind = op[:-len(suf)].rpartition("_")
      return f"{head}{suf}_{kind}"
  return op


def glue(lines: list[str]) -> str: return "{ const u64 ex = EXEC; " + " ".join(lines) + " }"


def loaded(op: str, vdst: int, t: str, m: str = "ex") -> list[str]:
  """Write a load's result (t: dword-major W-lane array) to vdst: whole dwords, extended sub-dwords, or D16 halves."""
  kind = op.rsplit("_", 1)[1]
  if "_d16_" in op: return [f"p_16(w, {vdst}, {int('_d16_hi_' in op)}, {t}, {m});"]
  return [f"p_32(w, {vdst + i}, {t} + {i} * W, {m});" for i in range(max(1, SIZES[kind] // 4))]


def load_store(op: str, space: int, addr: list[str], vdst: int, data: int, fail: str, m: str = "ex") -> list[str] | None:
  kind = op.rsplit("_", 1)[1]
  if kind not in SIZES: return None
  n = SIZES[kind]
  if "_load_" in op:
    sign = int(kind in ("i8", "i16"))
    return [*addr, "u32 t[4 * W];", f"if (!m_load(w, {space}, a, t, {n}, {sign}, {m})) {fail}", *loaded(op, vdst, "t", m)]
  if "_store_" in op: return [*addr, f"if (!m_store(w, {space}, a, {data}, {n}, {int('_d16_hi_' in op)}, {m})) {fail}"]
  return None


def flat(inst, pc: int) -> str:
  f, op, e = inst.fields, inst.op, inst.enc
  if op in ("global_inv", "global_wb", "global_wbinv"): return ""   # gfx12 cache maintenance: memory here has no caches
  bits = 24 if "th" in f else 13   # 13-bit signed (fact 45); gfx12: 24-bit signed, th bit 0 returns an atomic's old value
  off = f["offset"] - (1 << bits) if f["offset"] & (1 << (bits - 1)) else f["offset"]
  if f.get("scale_offset"): raise operands.Unsupported(f"{op} with scale_offset (not a gfx12 feature) is not supported")
  fail = f"FAIL(BASE + {pc:#x});"
  if e == "SCRATCH":
    sval = f"S({f['saddr']})" if f["saddr"] != operands.NULL else "0"
    addr, space = [f"u64 a[W]; a_scratch(a, w, {f['addr'] if f['sve'] else -1}, {sval}, {off});"], SP_SCRATCH
  else:
    saddr = f["saddr"] if e == "GLOBAL" and f["saddr"] != operands.NULL else -1
    addr, space = [f"u64 a[W]; a_global(a, w, {f['addr']}, {saddr}, {off});"], SP_FLAT if e == "FLAT" else SP_GLOBAL
  if "addtid" not in op and "_lds_" not in op and (body := load_store(op, space, addr, f["vdst"], f["data"], fail)): return glue(body)
  if "_atomic_" in op and space != SP_SCRATCH and (sa := split_atomic(op)):
    code, bits, _ = sa
    y = f["data"] + bits // 32 if ATOMICS[code] in TWO_OPERANDS else f["data"]
    rtn = f["th"] & 1 if "th" in f else f["glc"]
    return glue([*addr, f"if (!m_atomic(w, {space}, a, {code}, {bits}, {f['data']}, {y}, {f['vdst']}, {rtn}, ex)) {fail}"])
  raise operands.Unsupported(f"{op} is not supported by the emulator")


def ds(inst, pc: int) -> str:
  f, op = inst.fields, inst.op
  fail = f"FAIL(BASE + {pc:#x});"
  off = f["offset1"] << 8 | f["offset0"]
  addr, d0, d1, vdst = f["addr"], f["data0"], f["data1"], f["vdst"]
  if op == "ds_nop": return ""
  if "_2addr_" in op:
    b64 = op.endswith("64")
    scale = (512 if b64 else 256) if "stride64" in op else (8 if b64 else 4)
    n, k = (8, 2) if b64 else (4, 1)
    two = [f"u64 a[W], b[W]; a_ds(a, w, {addr}, {f['offset0'] * scale}); a_ds(b, w, {addr}, {f['offset1'] * scale});"]
    if op.startswith("ds_load_"):   # both addresses are read before any destination write (fact 43)
      return glue([*two, "u32 t[2 * W], u[2 * W];", f"if (!m_load(w, {SP_LDS}, a, t, {n}, 0, ex) || !m_load(w, {SP_LDS}, b, u, {n}, 0, ex)) {fail}",
                   *(f"p_32(w, {vdst + i}, t + {i} * W, ex);" for i in range(k)), *(f"p_32(w, {vdst + k + i}, u + {i} * W, ex);" for i in range(k))])
    if op.startswith("ds_store_"): return glue([*two, f"if (!m_store2(w, a, b, {d0}, {d1}, {n}, ex)) {fail}"])
    if op.startswith("ds_storexchg_2addr"): return glue([*two, f"if (!m_xchg2(w, a, b, {d0}, {d1}, {vdst}, {8 * n}, ex)) {fail}"])
  if op in ("ds_permute_b32", "ds_bpermute_b32", "ds_swizzle_b32"): return cross_lane(op, f, off)
  if op in ("ds_append", "ds_consume"):
    sign = "+" if op == "ds_append" else "-"
    return glue([f"u64 a = (S(M0) & 0xffffu) + {off}; u8 *p = latom(w, a, 4); if (!p) {fail} u32 o = ld32(p);",
                 f"st32(p, o {sign} (u32)__builtin_popcountll(ex)); for (int l = 0; l < W; l++) if ((ex >> l) & 1) V({vdst}, l) = o;"])
  one = [f"u64 a[W]; a_ds(a, w, {addr}, {off});"]
  if "addtid" not in op and (body := load_store(d16_form(op), SP_LDS, one, vdst, d0, fail)): return glue(body)
  if sa := split_atomic(op):
    code, bits, rtn = sa
    return glue([*one, f"if (!m_atomic(w, {SP_LDS}, a, {code}, {bits}, {d0}, {d1}, {vdst}, {int(rtn)}, ex)) {fail}"])
  raise operands.Unsupported(f"{op} is not supported by the emulator")


def cross_lane(op: str, f: dict, off: int) -> str:
  addr, d0, vdst = f["addr"], f["data0"], f["vdst"]
  if op == "ds_permute_b32":   # lane l sends data0 to lane (addr + offset) / 4; later lanes win
    return glue(["u32 t_[W] = {0};", f"for (int l = 0; l < W; l++) if ((ex >> l) & 1) t_[((V({addr}, l) + {off}) >> 2) & (W - 1)] = V({d0}, l);",
                 f"p_32(w, {vdst}, t_, ex);"])
  if op == "ds_bpermute_b32":  # lane l reads data0 of lane (addr + offset) / 4 (0 from an inactive lane)
    return glue(["u32 t_[W];",
                 f"for (int l = 0; l < W; l++) {{ int s = ((V({addr}, l) + {off}) >> 2) & (W - 1); t_[l] = ((ex >> s) & 1) ? V({d0}, s) : 0; }}",
                 f"p_32(w, {vdst}, t_, ex);"])
  # ds_swizzle_b32 (data in the ADDR field): offset[15] = 1 -> quad permute (offset[7:0]); offset[15] = 0 ->
  # and/or/xor lane masks within each group of 32 lanes
  if off & 0x8000:
    if off & 0x6000: raise operands.Unsupported(f"ds_swizzle_b32 rotate/FFT mode (offset {off:#x}) is not supported")
    src = f"((l & ~3) | (({off & 0xFF:#x} >> ((l & 3) * 2)) & 3))"
  else:
    a, o, x = off & 0x1F, (off >> 5) & 0x1F, (off >> 10) & 0x1F
    src = f"((l & ~31) | ((((l & 31) & {a}) | {o}) ^ {x}))"
  return glue(["u32 t_[W];", f"for (int l = 0; l < W; l++) {{ int s = {src}; t_[l] = ((ex >> s) & 1) ? V({addr}, s) : 0; }}",
               f"p_32(w, {vdst}, t_, ex);"])


def mubuf(inst, pc: int) -> str:
  f, op = inst.fields, inst.op
  if op in ("buffer_gl0_inv", "buffer_gl1_inv"): return ""
  if "format" in op or f.get("lds") or f["tfe"]:
    raise operands.Unsupported(f"{op} (format conversion / LDS / TFE) is not supported by the emulator")
  fail = f"FAIL(BASE + {pc:#x});"
  kind = op.rsplit("_", 1)[1]
  sa = split_atomic(op) if "_atomic_" in op else None
  n = sa[1] // 8 if sa else SIZES.get(kind, 4)
  idx = f["vaddr"] if f["idxen"] else -1
  voff = f["vaddr"] + f["idxen"] if f["offen"] else -1
  soff = operands.scalar(f["soffset"], 32, inst.literal)
  # out-of-range lanes: loads read 0, stores and atomics do nothing; a swizzled resource is not modelled
  addr = [f"u64 a[W], in; if (!a_buffer(a, &in, w, {4 * f['srsrc']}, {idx}, {voff}, {f['offset']}, {soff}, {n})) "
          f"STOP(STOP_ILLEGAL, BASE + {pc:#x}, 6);"]
  if "_load_" in op:
    sign = int(kind in ("i8", "i16"))
    return glue([*addr, "u32 t[4 * W] = {0};", f"if (!m_load(w, {SP_GLOBAL}, a, t, {n}, {sign}, ex & in)) {fail}", *loaded(op, f["vdata"], "t")])
  if "_store_" in op: return glue([*addr, f"if (!m_store(w, {SP_GLOBAL}, a, {f['vdata']}, {n}, {int('_d16_hi_' in op)}, ex & in)) {fail}"])
  if sa:
    code, bits, _ = sa
    y = f["vdata"] + bits // 32 if ATOMICS[code] in TWO_OPERANDS else f["vdata"]
    rtn = f["th"] & 1 if "th" in f else f["glc"]   # gfx12: th bit 0 (TH_ATOMIC_RETURN)
    return glue([*addr, f"if (!m_atomic(w, {SP_GLOBAL}, a, {code}, {bits}, {f['vdata']}, {y}, {f['vdata']}, {rtn}, ex & in)) {fail}"])
  raise operands.Unsupported(f"{op} is not supported by the emulator")


def gen(inst, pc: int, wave64: bool) -> str:
  if inst.enc == "DS": return ds(inst, pc)
  if inst.enc in ("FLAT", "GLOBAL", "SCRATCH"): return flat(inst, pc)
  if inst.enc == "MUBUF": return mubuf(inst, pc)
  raise operands.Unsupported(f"{inst.enc} instructions ({inst.op}) are not supported by the emulator")
