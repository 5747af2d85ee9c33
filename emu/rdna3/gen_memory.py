"""C for the memory encodings: DS (LDS), FLAT / GLOBAL / SCRATCH and MUBUF (buffer) instructions.

Memory is synchronous in the emulator (every access completes before the next instruction, so s_waitcnt has
nothing to wait for) and lanes access it in lane order, which makes atomics deterministic. Facts:
reference/emulator.md section 3, 43-45: DS offsets, 2ADDR scaling (x4 / x8, stride64 x256 / x512), 2ADDR loads
read the address before writing; non-RTN atomics leave vdst alone; sub-dword loads sign/zero-extend, D16 loads
keep the other half; GLOBAL's 13-bit signed offset applies with and without saddr; SCRATCH with SVE=0 ignores
VADDR. Atomics return the old value when GLC is set (FLAT/GLOBAL/MUBUF) or the opcode is *_rtn_* (DS).
"""
from __future__ import annotations
from emu.rdna3 import operands as O

SIZES = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}
# atomic op -> C expression of the new memory value from old `o`, data `x` (and `y`, the second data operand)
ATOMIC = {"swap": "x", "storexchg": "x", "add": "o + x", "sub": "o - x", "rsub": "x - o", "and": "o & x", "or": "o | x",
          "xor": "o ^ x", "inc": "o >= x ? 0 : o + 1", "dec": "(o == 0 || o > x) ? x : o - 1",   # fact 44
          "csub": "o > x ? o - x : 0", "mskor": "(o & ~x) | y", "cmpswap": "o == y ? x : o", "cmpstore": "o == y ? x : o"}
TYPED = {"min_i": "(T)o < (T)x ? o : x", "max_i": "(T)o > (T)x ? o : x", "min_u": "o < x ? o : x", "max_u": "o > x ? o : x"}
FATOMIC = {"add_f32": "add32(o, x, 0, 0)", "min_f32": "min32(o, x, 0, 1)", "max_f32": "max32(o, x, 0, 1)",
           "cmpswap_f32": "F(o) == F(y) ? x : o", "cmpstore_f32": "F(o) == F(y) ? x : o",
           "min_f64": "minmax64(o, x, 0, 1, 0)", "max_f64": "minmax64(o, x, 0, 1, 1)", "cmpstore_f64": "D(o) == D(y) ? x : o"}


def atomic_expr(kind: str, bits: int) -> str | None:
  """New-value expression for atomic `kind` ('add', 'min_i', 'cmpswap_f32'...) at `bits` width."""
  if kind in FATOMIC: return FATOMIC[kind]
  if kind[:5] in TYPED and kind[5:] in ("", "32", "64"):
    return TYPED[kind[:5]].replace("T", "i64" if bits == 64 else "i32")
  return ATOMIC.get(kind)


def split_atomic(op: str) -> tuple[str, int, bool] | None:
  """'global_atomic_min_i32' -> ('min_i', 32, False); 'ds_min_rtn_i32' -> ('min_i', 32, True)."""
  parts = op.split("_", 2)
  rest = parts[2] if parts[1] == "atomic" else op.split("_", 1)[1]
  rtn = "_rtn_" in f"_{rest}_"
  rest = rest.replace("rtn_", "")
  name, _, ty = rest.rpartition("_")
  if ty in ("f32", "f64") and name in ("add", "min", "max", "cmpswap", "cmpstore"):
    return f"{name}_{ty}", int(ty[1:]), rtn
  if not name or ty[1:] not in ("32", "64"): return None
  kind = f"{name}_{ty[0]}" if name in ("min", "max") else name
  return kind, int(ty[1:]), rtn


def lane_mem(body: list[str]) -> str:
  return "{ const u64 ex = EXEC; for (int l = 0; l < W; l++) if ((ex >> l) & 1) { " + " ".join(body) + " } }"


def load_body(op: str, vdst: int, ld: str, fail: str) -> list[str]:
  """Lane statements loading through `ld` (a C call with A = address, P = dst pointer, N = bytes)."""
  kind = op.rsplit("_", 1)[1]
  n = SIZES[kind]
  call = lambda p, k: ld.replace("P", p).replace("N", str(k))
  if "_d16_" in op:
    hi = "_d16_hi_" in op
    if kind in ("u8", "i8"): t, ext = "u8 t;", "(u32)(i8)t & 0xffffu" if kind == "i8" else "(u32)t"
    else: t, ext = "u16 t;", "(u32)t"
    merge = f"(V({vdst}, l) & 0xffffu) | ({ext}) << 16" if hi else f"(V({vdst}, l) & 0xffff0000u) | ({ext})"
    return [t, f"if (!{call('&t', n)}) {fail}", f"V({vdst}, l) = {merge};"]
  if n < 4:
    ty = {"u8": "u8", "i8": "i8", "u16": "u16", "i16": "i16"}[kind]
    return [f"{ty} t;", f"if (!{call('&t', n)}) {fail}", f"V({vdst}, l) = (u32)(i32)t;"]
  k = n // 4
  return [f"u32 t[{k}];", f"if (!{call('t', n)}) {fail}", *(f"V({vdst + i}, l) = t[{i}];" for i in range(k))]


def store_body(op: str, data: int, st: str, fail: str) -> list[str]:
  kind = op.rsplit("_", 1)[1]
  n = SIZES[kind]
  call = lambda p: st.replace("P", p).replace("N", str(n))
  if n < 4:
    sh = " >> 16" if "_d16_hi_" in op else ""
    return [f"{'u8' if n == 1 else 'u16'} t = V({data}, l){sh};", f"if (!{call('&t')}) {fail}"]
  k = n // 4
  return [f"u32 t[{k}] = {{{', '.join(f'V({data + i}, l)' for i in range(k))}}};", f"if (!{call('t')}) {fail}"]


def atomic_body(kind: str, bits: int, rtn: bool, data: int, vdst: int, ptr: str, fail: str, ydata: int | None = None) -> list[str]:
  """Lane statements of an atomic: x = DATA, y = the second data operand (compare value / OR mask), which FLAT and
  MUBUF take from the next register(s) after DATA and DS from DATA1."""
  e = atomic_expr(kind, bits)
  if e is None: raise O.Unsupported(f"atomic {kind}_{bits} is not supported by the emulator")
  ty, ld, st, vr = ("u64", "ld64", "st64", "V64") if bits == 64 else ("u32", "ld32", "st32", "V")
  two = kind in ("cmpswap", "cmpstore", "mskor", "cmpswap_f32", "cmpstore_f32", "cmpstore_f64")
  y = f" y = {vr}({data + bits // 32 if ydata is None else ydata}, l);" if two else ""
  out = [f"u8 *p = {ptr};", f"if (!p) {fail}", f"{ty} o = {ld}(p), x = {vr}({data}, l);{' ' + ty + y if two else ''}",
         f"{st}(p, {e});"]
  if rtn: out.append(f"SETV64({vdst}, l, o);" if bits == 64 else f"V({vdst}, l) = o;")
  return out


# ---- FLAT / GLOBAL / SCRATCH ----
def flat(inst, pc: int) -> str:
  f, op, e = inst.fields, inst.op, inst.enc
  off = f["offset"] - (1 << 13) if f["offset"] & (1 << 12) else f["offset"]    # 13-bit signed (fact 45)
  fail = f"FAIL(BASE + {pc:#x});"
  if e == "SCRATCH":
    parts = [f"(u64)V({f['addr']}, l)" if f["sve"] else None, f"(u64)S({f['saddr']})" if f["saddr"] != O.NULL else None]
    addr = "(u32)(" + " + ".join([p for p in parts if p] + [f"(u64)(i64){off}"]) + ")"
    ld, st, at = "sld(w, l, A, P, N)", "sst(w, l, A, P, N)", None
  else:
    if e == "GLOBAL" and f["saddr"] != O.NULL: addr = f"S64({f['saddr']}) + (u64)V({f['addr']}, l) + (u64)(i64){off}"
    else: addr = f"V64({f['addr']}, l) + (u64)(i64){off}"
    if e == "FLAT": ld, st, at = "fld(w, l, A, P, N)", "fst(w, l, A, P, N)", "fatom(w, l, A, N)"
    else: ld, st, at = "gld(w, A, P, N)", "gst(w, A, P, N)", "gatom(w, A, N)"
  ld, st = ld.replace("A", "a"), st.replace("A", "a")
  head = [f"u64 a = {addr};"]
  if "_load_" in op and "addtid" not in op and "_lds_" not in op: return lane_mem(head + load_body(op, f["vdst"], ld, fail))
  if "_store_" in op and "addtid" not in op: return lane_mem(head + store_body(op, f["data"], st, fail))
  if "_atomic_" in op and at is not None and (sa := split_atomic(op)):
    kind, bits, _ = sa
    ptr = at.replace("A", "a").replace("N", str(bits // 8))
    return lane_mem(head + atomic_body(kind, bits, bool(f["glc"]), f["data"], f["vdst"], ptr, fail))
  raise O.Unsupported(f"{op} is not supported by the emulator")


# ---- DS (LDS) ----
def ds(inst, pc: int, wave64: bool) -> str:
  f, op = inst.fields, inst.op
  fail = f"FAIL(BASE + {pc:#x});"
  off = f["offset1"] << 8 | f["offset0"]
  addr, d0, d1, vdst = f["addr"], f["data0"], f["data1"], f["vdst"]
  if op == "ds_nop": return ""
  if "_2addr_" in op:
    b64 = op.endswith("64")
    scale = (512 if b64 else 256) if "stride64" in op else (8 if b64 else 4)
    n, k = (8, 2) if b64 else (4, 1)
    o0, o1 = f["offset0"] * scale, f["offset1"] * scale
    head = [f"u64 a = V({addr}, l);"]
    if op.startswith("ds_load_"):   # both addresses are read before any destination write (fact 43)
      return lane_mem(head + [f"u32 t[{2 * k}];", f"if (!lld(w, a + {o0}, t, {n}) || !lld(w, a + {o1}, t + {k}, {n})) {fail}",
                              *(f"V({vdst + i}, l) = t[{i}];" for i in range(2 * k))])
    if op.startswith("ds_store_"):
      return lane_mem(head + [f"u32 t[{2 * k}] = {{{', '.join([f'V({d0 + i}, l)' for i in range(k)] + [f'V({d1 + i}, l)' for i in range(k)])}}};",
                              f"if (!lst(w, a + {o0}, t, {n}) || !lst(w, a + {o1}, t + {k}, {n})) {fail}"])
    if op.startswith("ds_storexchg_2addr"):
      ty, ld_, st_, vr = ("u64", "ld64", "st64", "V64") if b64 else ("u32", "ld32", "st32", "V")
      return lane_mem(head + [f"u8 *p = latom(w, a + {o0}, {n}), *q = latom(w, a + {o1}, {n});", f"if (!p || !q) {fail}",
                              f"{ty} o0 = {ld_}(p), o1 = {ld_}(q), x = {vr}({d0}, l), y = {vr}({d1}, l);",
                              f"{st_}(p, x); {st_}(q, y);",
                              *( [f"SETV64({vdst}, l, o0); SETV64({vdst + 2}, l, o1);"] if b64 else [f"V({vdst}, l) = o0; V({vdst + 1}, l) = o1;"])])
  head = [f"u64 a = (u64)V({addr}, l) + {off};"]
  if op.startswith("ds_load_") and "addtid" not in op: return lane_mem(head + load_body(op, vdst, "lld(w, a, P, N)", fail))
  if op.startswith("ds_store_") and "addtid" not in op: return lane_mem(head + store_body(op, d0, "lst(w, a, P, N)", fail))
  if op in ("ds_permute_b32", "ds_bpermute_b32", "ds_swizzle_b32"): return cross_lane(op, f, off)
  if op in ("ds_append", "ds_consume"):
    sign = "+" if op == "ds_append" else "-"
    return "{ " + f"u64 a = (S(M0) & 0xffffu) + {off}; u8 *p = latom(w, a, 4); if (!p) {fail} u32 o = ld32(p); " \
           f"st32(p, o {sign} (u32)__builtin_popcountll(EXEC)); const u64 ex = EXEC; for (int l = 0; l < W; l++) if ((ex >> l) & 1) V({vdst}, l) = o;" + " }"
  if (sa := split_atomic(op)) and atomic_expr(sa[0], sa[1]):
    kind, bits, rtn = sa
    return lane_mem(head + atomic_body(kind, bits, rtn, d0, vdst, f"latom(w, a, {bits // 8})", fail, ydata=d1))
  raise O.Unsupported(f"{op} is not supported by the emulator")


def cross_lane(op: str, f: dict, off: int) -> str:
  addr, d0, vdst = f["addr"], f["data0"], f["vdst"]
  if op == "ds_permute_b32":   # lane l sends data0 to lane (addr + offset) / 4; later lanes win
    return "{ const u64 ex = EXEC; u32 t_[W] = {0}; " \
           f"for (int l = 0; l < W; l++) if ((ex >> l) & 1) t_[((V({addr}, l) + {off}) >> 2) & (W - 1)] = V({d0}, l); " \
           f"for (int l = 0; l < W; l++) if ((ex >> l) & 1) V({vdst}, l) = t_[l]; }}"
  if op == "ds_bpermute_b32":  # lane l reads data0 of lane (addr + offset) / 4 (0 from an inactive lane)
    return "{ const u64 ex = EXEC; u32 t_[W]; " \
           f"for (int l = 0; l < W; l++) {{ int s = ((V({addr}, l) + {off}) >> 2) & (W - 1); t_[l] = ((ex >> s) & 1) ? V({d0}, s) : 0; }} " \
           f"for (int l = 0; l < W; l++) if ((ex >> l) & 1) V({vdst}, l) = t_[l]; }}"
  # ds_swizzle_b32 (data in the ADDR field): offset[15] = 1 -> quad permute (offset[7:0]); offset[15] = 0 ->
  # and/or/xor lane masks within each group of 32 lanes
  if off & 0x8000:
    if off & 0x6000: raise O.Unsupported(f"ds_swizzle_b32 rotate/FFT mode (offset {off:#x}) is not supported")
    src = f"((l & ~3) | (({off & 0xFF:#x} >> ((l & 3) * 2)) & 3))"
  else:
    a, o, x = off & 0x1F, (off >> 5) & 0x1F, (off >> 10) & 0x1F
    src = f"((l & ~31) | ((((l & 31) & {a}) | {o}) ^ {x}))"
  return "{ const u64 ex = EXEC; u32 t_[W]; " \
         f"for (int l = 0; l < W; l++) {{ int s = {src}; t_[l] = ((ex >> s) & 1) ? V({addr}, s) : 0; }} " \
         f"for (int l = 0; l < W; l++) if ((ex >> l) & 1) V({vdst}, l) = t_[l]; }}"


# ---- MUBUF: buffer resource V# in s[4*srsrc : 4*srsrc+3] ----
def mubuf(inst, pc: int) -> str:
  f, op = inst.fields, inst.op
  if op in ("buffer_gl0_inv", "buffer_gl1_inv"): return ""
  if "format" in op or f.get("lds") or f["tfe"]:
    raise O.Unsupported(f"{op} (format conversion / LDS / TFE) is not supported by the emulator")
  r = 4 * f["srsrc"]
  fail = f"FAIL(BASE + {pc:#x});"
  idx = f"V({f['vaddr']}, l)" if f["idxen"] else "0"
  voff = f"V({f['vaddr'] + f['idxen']}, l)" if f["offen"] else "0"
  soff = O.scalar(f["soffset"], 32, inst.literal)
  kind = op.rsplit("_", 1)[1]
  n = SIZES.get(kind, 4)
  if "_atomic_" in op:
    sa = split_atomic(op)
    if not sa: raise O.Unsupported(f"{op} is not supported by the emulator")
    n = sa[1] // 8
  # address = base + soffset + offset + index * stride; out-of-range (OOB_SELECT, V# dword3 [29:28]) loads read 0,
  # stores and atomics are dropped; the swizzled layout is not modelled
  head = [f"u64 base = S64({r}) & 0xffffffffffffull; u32 stride = (S({r + 1}) >> 16) & 0x3fff, nr = S({r + 2}), oob = (S({r + 3}) >> 28) & 3;",
          f"if (S({r + 1}) >> 30) STOP(STOP_ILLEGAL, BASE + {pc:#x}, 6);",
          f"u32 ix = {idx}; u64 bo = (u64){voff} + {f['offset']};",
          f"int out = oob == 3 ? bo + (u64)ix * stride + {n} > nr : oob == 2 ? nr == 0 : oob == 1 ? ix >= nr : (ix >= nr || (stride && bo >= stride));",
          f"u64 a = base + {soff} + bo + (u64)ix * stride;"]
  if "_load_" in op:
    zero = ["if (out) {", *(f"V({f['vdata'] + i}, l) = 0;" for i in range(max(1, n // 4)) if "_d16_" not in op), "continue; }"]
    return lane_mem_loop(head + zero + load_body(op, f["vdata"], "gld(w, a, P, N)", fail))
  if "_store_" in op: return lane_mem_loop(head + ["if (out) continue;"] + store_body(op, f["vdata"], "gst(w, a, P, N)", fail))
  if "_atomic_" in op:
    kind, bits, _ = split_atomic(op)
    return lane_mem_loop(head + ["if (out) continue;"] + atomic_body(kind, bits, bool(f["glc"]), f["vdata"], f["vdata"], f"gatom(w, a, {bits // 8})", fail))
  raise O.Unsupported(f"{op} is not supported by the emulator")


def lane_mem_loop(body: list[str]) -> str:
  """Like lane_mem but the body may `continue` to the next lane."""
  return "{ const u64 ex = EXEC; for (int l = 0; l < W; l++) { if (!((ex >> l) & 1)) continue; " + " ".join(body) + " } }"


def gen(inst, pc: int, wave64: bool) -> str:
  if inst.enc == "DS": return ds(inst, pc, wave64)
  if inst.enc in ("FLAT", "GLOBAL", "SCRATCH"): return flat(inst, pc)
  if inst.enc == "MUBUF": return mubuf(inst, pc)
  raise O.Unsupported(f"{inst.enc} instructions ({inst.op}) are not supported by the emulator")
