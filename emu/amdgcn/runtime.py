"""The emulator's C runtime, compiled once per wave size and shared by every program: the scheduler, the
lane kernels of all VALU operations (generated from valu_table and the packed-op table), operand gathering,
vector memory and WMMA. Compiled programs are short glue that calls into it (loaded RTLD_GLOBAL), so a new
program compiles in milliseconds per instruction instead of inlining every lane loop.

Kernel calling conventions (W-lane arrays; 16-bit values zero-extended in u32, 64-bit values in u64):
  k_<op>(w, r, a, b, c, d, mb, K, CL)        r[l] = op(a[l], b[l], c[l]); d = old destination, mb = condition /
                                             VCC mask, K = literal, CL = clamp bit
  u64 c_<op>(w, a, b)                         compare: bit l = condition for lane l (not yet masked by EXEC)
  u64 kc_<op>(w, r, a, b, c, cin, CL)         carry / div_scale / mad_u64: results in r, returns the lane mask
  kh_<op>(w, r, a, b, c, CL)                  one 16-bit half of a packed (VOP3P) op
"""
from __future__ import annotations
import os, re
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from emu import cc
from emu.amdgcn.valu_table import OPS, CMP, PK

C_DIR = os.path.join(os.path.dirname(__file__), "c")
CACHE = "amdgcn"                # compiled runtimes and programs: under $XDG_CACHE_HOME/hcq/amdgcn (emu/cc.py)
WIDTH = {"f16": 16, "i16": 16, "u16": 16, "b16": 16, "f32": 32, "i32": 32, "u32": 32, "b32": 32,
         "f64": 64, "i64": 64, "u64": 64, "b64": 64}
CLAMP = {"f16": "clamp16", "f32": "clamp32", "f64": "clamp64"}
HEADERS = ("core.h", "float.h", "valu.h", "wave.h")
RUNTIME_C = ("lanes.c", "mem.c", "interp.c", "wmma.c", "sched.c")
CHUNKS = 4     # the runtime is compiled as this many shared objects, in parallel, the first time it is needed


@cache
def src(name: str) -> str:
  with open(os.path.join(C_DIR, name)) as f: return cc.inline_includes(f.read())


def ctype(t: str) -> str: return "u64" if WIDTH[t] == 64 else "u32"


def uses(expr: str, name: str) -> bool:
  """Whether `expr` mentions the placeholder variable `name` (not a call such as D(...))."""
  return re.search(rf"\b{name}\b(?!\s*\()", expr) is not None


def subst(expr: str, **names: str) -> str:
  """Replace placeholder variables (identifier tokens not followed by '(') in a C expression."""
  return re.sub(r"\b([A-Za-z_]\w*)\b(?!\s*\()", lambda m: names.get(m.group(1), m.group(1)), expr)


SIG = "(const wave_t *w, void *R, const void *A, const void *B, const void *C, const void *Dp, u64 mb, u32 K, u32 CL)"


def kernel(name: str) -> str:
  dst, srcs, expr = OPS[name]
  lines = [f"void k_{name}{SIG} {{", f"  {ctype(dst)} *r = R;"]
  for v, t in zip("abc", srcs): lines.append(f"  const {ctype(t)} *{v}_ = {v.upper()};")
  if uses(expr, "D"): lines.append(f"  const {ctype(dst)} *d_ = Dp;")
  body = subst(expr, D="d_[l]", MB="((mb >> l) & 1)", VB="(int)((mb >> l) & 1)", a="a_[l]", b="b_[l]", c="c_[l]")
  res = f"({body})"
  if dst in CLAMP and not uses(expr, "CL"): res = f"(CL ? {CLAMP[dst]}({res}) : {res})"
  lines += [f"  for (int l = 0; l < W; l++) r[l] = {res};", "}"]
  return "\n".join(lines)


def compare(name: str) -> str:
  t, stmt = CMP[name]
  bt = "u32" if "_class_" in name else t
  return "\n".join([f"u64 c_{name}(const wave_t *w, const void *A, const void *B) {{",
                    f"  const {ctype(t)} *a_ = A; const {ctype(bt)} *b_ = B; u64 m = 0;",
                    f"  for (int l = 0; l < W; l++) {{ {ctype(t)} a = a_[l]; {ctype(bt)} b = b_[l]; int cond; {stmt} m |= (u64)(cond != 0) << l; }}",
                    "  return m;", "}"])


def half_kernel(name: str) -> str:
  expr = subst(PK[name], a="a[l]", b="b[l]", c="c[l]")
  clamp = "clamp16(x)" if name.endswith("_f16") else "x"
  return (f"void kh_{name}(const wave_t *w, u32 *r, const u32 *a, const u32 *b, const u32 *c, u32 CL) {{\n"
          f"  for (int l = 0; l < W; l++) {{ u32 x = ({expr}) & 0xffffu; r[l] = CL ? {clamp} : x; }}\n}}")


# lane-mask producing ops: (C type of r, of a/b, of c) and the per-lane statements (set `co` and `v`)
CARRY = {
  "v_add_co_u32": ("u32", "u32", "u32", "u64 s = (u64)a + b; co = s >> 32; v = CL && co ? 0xffffffffu : (u32)s;"),
  "v_sub_co_u32": ("u32", "u32", "u32", "co = b > a; v = CL && co ? 0 : a - b;"),
  "v_subrev_co_u32": ("u32", "u32", "u32", "co = a > b; v = CL && co ? 0 : b - a;"),
  "v_add_co_ci_u32": ("u32", "u32", "u32", "u64 s = (u64)a + b + ci; co = s >> 32; v = CL && co ? 0xffffffffu : (u32)s;"),
  "v_sub_co_ci_u32": ("u32", "u32", "u32", "co = (u64)b + ci > a; v = CL && co ? 0 : a - b - ci;"),
  "v_subrev_co_ci_u32": ("u32", "u32", "u32", "co = (u64)a + ci > b; v = CL && co ? 0 : b - a - ci;"),
  "v_mad_u64_u32": ("u64", "u32", "u64", "unsigned __int128 s = (unsigned __int128)a * b + c; co = (int)(s >> 64); v = CL && co ? ~0ull : (u64)s;"),
  "v_mad_i64_i32": ("u64", "u32", "u64", "__int128 s = (__int128)(i64)(i32)a * (i32)b + (__int128)(i64)c; co = (int)((s >> 64) & 1); "
                    "v = CL && s > (__int128)0x7fffffffffffffffll ? 0x7fffffffffffffffull : CL && s < -(__int128)0x7fffffffffffffffll - 1 "
                    "? 0x8000000000000000ull : (u64)s;"),
  "v_div_scale_f32": ("u32", "u32", "u32", "v = div_scale32(a, b, c, FI32, &co);"),
  "v_div_scale_f64": ("u64", "u64", "u64", "v = div_scale64(a, b, c, FI64, &co);"),
}


def carry_kernel(name: str) -> str:
  rt, st, ct, stmt = CARRY[name]
  return "\n".join([f"u64 kc_{name}(const wave_t *w, {rt} *r, const {st} *A, const {st} *B, const {ct} *Cc, u64 cin, u32 CL) {{",
                    "  u64 m = 0;",
                    f"  for (int l = 0; l < W; l++) {{ {st} a = A[l], b = B[l]; {ct} c = Cc ? Cc[l] : 0; u32 ci = (cin >> l) & 1; "
                    f"int co = 0; {rt} v;",
                    f"    {stmt} r[l] = v; m |= (u64)(co != 0) << l; }}", "  return m;", "}"])


EXTRA = r"""
/* DOT4/DOT8 (integer): elements of `bits` bits, signed when sa / sb (DOT*_IU take them from NEG), clamp saturates */
void kd_idot(const wave_t *w, u32 *r, const u32 *a, const u32 *b, const u32 *c, u32 bits, u32 sa, u32 sb, u32 CL) {
  u32 mask = (1u << bits) - 1, signed_ = sa || sb;
  for (int l = 0; l < W; l++) {
    i64 s = signed_ ? (i64)(i32)c[l] : (i64)c[l];
    for (u32 k = 0; k < 32 / bits; k++) {
      i64 x = (a[l] >> (bits * k)) & mask, y = (b[l] >> (bits * k)) & mask;
      if (sa && x >> (bits - 1)) x -= (i64)1 << bits;
      if (sb && y >> (bits - 1)) y -= (i64)1 << bits;
      s += x * y;
    }
    r[l] = CL ? (signed_ ? sat_i32(s) : sat_u32((u64)s)) : (u32)s;
  }
}
/* V_DOT2_F32_F16 / _BF16: packed halves of a and b, f32 accumulator c */
void kd_fdot2(const wave_t *w, u32 *r, const u32 *a, const u32 *b, const u32 *c, u32 bf, u32 CL) {
  for (int l = 0; l < W; l++) {
    u32 x = bf ? dot2_f32_bf16(a[l], b[l], c[l], FO32) : dot2_f32_f16(a[l], b[l], c[l], FI16, FO32);
    r[l] = CL ? clamp32(x) : x;
  }
}
/* FMA_MIX: sources already f32; f16 = 0 -> f32 result, 1 -> f16 result (rounded once from the exact f64 fma) */
void kd_mix(const wave_t *w, u32 *r, const u32 *a, const u32 *b, const u32 *c, u32 f16, u32 CL) {
  for (int l = 0; l < W; l++) {
    if (!f16) { u32 x = fma32(a[l], b[l], c[l], 0, FO32); r[l] = CL ? clamp32(x) : x; continue; }
    double x = __builtin_fma((double)F(a[l]), (double)F(b[l]), (double)F(c[l]));
    u32 h = x != x ? nan3_16(f2h(a[l], 0), f2h(b[l], 0), f2h(c[l], 0)) : ftz16(d2h(UD(x)), FO16);
    r[l] = CL ? clamp16(h) : h;
  }
}
"""


def kernel_list() -> list[str]:
  return [*map(kernel, OPS), *map(compare, CMP), *map(half_kernel, PK), *map(carry_kernel, CARRY), EXTRA]


def kernels() -> str: return "\n".join(kernel_list())


def prototypes(c: str) -> list[str]:
  """Declarations of the functions a C source defines at file scope (non-static)."""
  return [m.group(1) + ";" for m in re.finditer(r"^((?:void|int|u64|u32) \w+\([^)]*\)) \{", c, re.M)]


@cache
def _exports() -> tuple[list[str], list[str]]:
  protos = prototypes("\n".join([kernels(), *map(src, RUNTIME_C)]))
  return protos, [re.match(r"\w+ \**(\w+)\(", p).group(1) for p in protos]


def prelude(wave64: bool) -> str:
  """W, and every runtime symbol renamed per wave size (name_w32 / name_w64): both runtimes are loaded
  RTLD_GLOBAL into one process, and a program must bind to the one of its own wave size."""
  lanes = 64 if wave64 else 32
  return "\n".join([f"#define W {lanes}", *(f"#define {n} {n}_w{lanes}" for n in _exports()[1]), "#include <stdint.h>"])


@cache
def sources(wave64: bool) -> tuple[str, ...]:
  """The runtime's translation units: the hand-written C, then the lane kernels in CHUNKS - 1 parts."""
  head = "\n".join([prelude(wave64), src("state.h"), *map(src, HEADERS)])
  ks = kernel_list()
  parts = [ks[i::CHUNKS - 1] for i in range(CHUNKS - 1)]
  return tuple(head + "\n" + body for body in ["\n".join(map(src, RUNTIME_C)), *("\n".join(p) for p in parts)])


def declarations() -> str:
  """What a compiled program needs to call into the runtime (after prelude())."""
  return "\n".join(_exports()[0])


@cache
def load(wave64: bool):
  """The runtime for one wave size, loaded so that programs resolve their calls against it; returns the
  library holding the scheduler."""
  from emu.amdgcn.program import ffi
  f, lanes = ffi(), 64 if wave64 else 32
  with cc.timed(f"the RDNA3 emulator's wave{lanes} runtime", CACHE), ThreadPoolExecutor(CHUNKS) as pool:   # each build is a compiler subprocess
    paths = list(pool.map(lambda ip: cc.build(ip[1], f"rt{lanes}-{ip[0]}", where=CACHE), enumerate(sources(wave64))))
  return [f.dlopen(p, f.RTLD_NOW | f.RTLD_GLOBAL) for p in paths][0]


def dispatch_run(wave64: bool):
  return getattr(load(wave64), f"dispatch_run_w{64 if wave64 else 32}")


def identity(wave64: bool) -> str:
  """A line tying a program's source (and so its cache key) to the runtime it links against."""
  return f"/* runtime {cc.key(''.join(sources(wave64)))} */"
