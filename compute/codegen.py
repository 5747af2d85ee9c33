"""Codegen: a scheduled Kernel -> C (CPU device), OpenCL C (AMDGPU) or CUDA C (NV) source, plus its launch size.

First the kernel's index space is simplified (size-1 dims dropped, neighbouring dims merged wherever every
view agrees), then loops are laid out:
- GPU (OpenCL, CUDA): one work-item per output element, looping over the reduce dims (no local/shared memory);
- CPU: one workgroup per tile of outputs; a reduce kernel keeps a U0 x U1 block of accumulators in
  registers (U1 along the dim most loads read contiguously, U0 along a dim that reuses a load), so the
  inner loops have constant trip counts that clang unrolls and vectorizes; an elementwise kernel runs
  a chunk of the innermost dim per workgroup. A product-sum whose two factors each ignore one output dim (a
  matmul: A ignores n, B ignores m, over one reduce dim k) is blocked as in Goto & van de Geijn, "Anatomy of
  High-Performance Matrix Multiplication" (ACM TOMS 34(3), 2008): per workgroup a tile of rows x columns of one
  batch element; for each KC slice of k, B's values (any view or elementwise expression) are packed into NR-wide
  panels zero-padded to whole micro-tiles, and per MC rows A's into MR-wide ones (or its rows read in place where A
  is a plain load contiguous along k); an MR x NR micro-kernel of vector accumulators sweeps them.
Expressions are rendered once per scope (CSE by AST node).
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from typing import ClassVar
from math import prod
import numpy as np
from compute.dtypes import DType, dtypes
from compute.lazy import Ops
from compute.schedule import Kernel, KNode
from compute.shape import ShapeTracker, contiguous_strides, form_range

CPU_CHUNK = 4096        # elements of the innermost dim per workgroup in CPU elementwise kernels
GPU_LOCAL = 64          # work-items per workgroup on GPUs (two wave32s)

_BIN = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.DIV: "/", Ops.CMPLT: "<", Ops.CMPLE: "<=", Ops.CMPEQ: "==",
        Ops.CMPNE: "!=", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^"}
_C_TYPES = {"bool": ("_Bool", "uint8_t"), "uint8": ("uint8_t",) * 2, "int8": ("int8_t",) * 2, "uint32": ("uint32_t",) * 2,
            "int32": ("int32_t",) * 2, "int64": ("int64_t",) * 2, "float16": ("_Float16",) * 2, "bfloat16": ("float", "uint16_t"),
            "float32": ("float",) * 2, "float64": ("double",) * 2}
_C_FN = {Ops.EXP: "expf", Ops.LOG: "logf", Ops.EXP2: "exp2f", Ops.LOG2: "log2f", Ops.SIN: "sinf", Ops.COS: "cosf", Ops.SQRT: "sqrtf",
         Ops.TRUNC: "truncf"}
_C_FN64 = {Ops.EXP: "exp", Ops.LOG: "log", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.COS: "cos", Ops.SQRT: "sqrt",
           Ops.TRUNC: "trunc"}
_BF16_LOAD, _BF16_STORE = {"bfloat16": "hcq_bits2f((uint32_t){} << 16)"}, {"bfloat16": "(hcq_f2bits(hcq_bf16r({})) >> 16)"}


class Dialect:
  """A kernel language: how it spells types, math functions, conversions and the kernel's signature. One subclass
  per language, registered under its `name` by being defined; a device's compiler names the dialect it compiles
  (drivers/hcq/compiler.py: Compiler.language), runtime renders through the dialect's render(), and the renderer asks
  the dialect, never the name."""
  name: ClassVar[str]
  named: ClassVar[dict[str, type[Dialect]]] = {}
  host: ClassVar[bool] = False                    # CPU loops over workgroups (else one GPU work-item per output element)
  ids: ClassVar[tuple[str, str]] = ("", "")       # GPU: the block and thread index of the first dim
  types: ClassVar[dict[str, tuple[str, str]]]     # dtype -> (value type: what expressions compute in, storage type)
  fn: ClassVar[dict[Ops, str]]                    # the unary float functions
  fn64: ClassVar[dict[Ops, str]]                  # their double versions
  fma: ClassVar[tuple[str, str]] = ("fmaf", "fma")
  round: ClassVar[dict[str, str]] = {"bfloat16": "hcq_bf16r"}   # value -> its dtype's precision, for dtypes computed wider
  load: ClassVar[dict[str, str]] = _BF16_LOAD     # storage -> value ({} is the element read), where a C conversion is not it
  store: ClassVar[dict[str, str]] = _BF16_STORE   # value -> storage
  prelude: ClassVar[str]

  def __init_subclass__(cls, **kw):
    super().__init_subclass__(**kw)
    if "name" not in cls.__dict__: raise TypeError(f"Dialect {cls.__name__} must set `name`, the language its compilers name")
    if (old := Dialect.named.get(cls.name)) is not None and old.__qualname__ != cls.__qualname__:
      raise TypeError(f"Dialect {cls.__name__}: the name {cls.name!r} is {old.__name__}'s")
    Dialect.named[cls.name] = cls

  @staticmethod
  def of(name: str, device: str) -> type[Dialect]:
    """The dialect `device`'s compiler names; an error naming the registered ones if there is none of that name."""
    if (d := Dialect.named.get(name)) is None:
      raise NotImplementedError(f"{device}: the compute layer has no renderer for kernel language {name!r} (its dialects: "
                                f"{', '.join(sorted(Dialect.named))})")
    return d

  @classmethod
  def render(cls, k: Kernel, vector_registers: tuple[int, int] | None = None) -> Program:
    """The kernel's program in this language: the C-family Renderer's; a language rendered otherwise (an IR built
    through an API rather than source text) overrides this."""
    return Renderer(cls, vector_registers).render(k)

  @classmethod
  def head(cls, name: str, params: list[tuple[str, str]], local: int) -> list[str]:
    """The kernel's signature: params are (element type, name) of its buffers, the output first."""
    raise NotImplementedError(f"{cls.name}: no kernel signature")

  @classmethod
  def vector(cls, scalar: str, lanes: int, name: str) -> str:
    """A typedef of a `lanes`-wide vector of `scalar` (host dialects: the blocked matmul's accumulators)."""
    raise NotImplementedError(f"{cls.name}: no vector types")

  @classmethod
  def finish(cls, src: str) -> str:
    """The rendered source as the compiler takes it."""
    return cls.prelude + src


class C(Dialect):
  """C for the CPU device (clang): a kernel is a function of a workgroup id, reading its buffer pointers from args."""
  name, host, types, fn, fn64 = "c", True, _C_TYPES, _C_FN, _C_FN64
  prelude = ("#include <stdint.h>\n#include <math.h>\n"
             "static inline float hcq_bits2f(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }\n"
             "static inline uint32_t hcq_f2bits(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }\n")

  @classmethod
  def vector(cls, scalar: str, lanes: int, name: str) -> str:
    """A typedef of a `lanes`-wide vector of `scalar`: a scalar cast to it splats, and __builtin_elementwise_fma takes it."""
    return f"typedef {scalar} {name} __attribute__((ext_vector_type({lanes})));"

  @classmethod
  def head(cls, name: str, params: list[tuple[str, str]], local: int) -> list[str]:
    return [f"void {name}(const uint8_t *restrict args, const uint32_t *restrict gid, const uint32_t *restrict lsize) {{"] + \
           [f"  {t} *restrict {n}; __builtin_memcpy((void *)&{n}, args + {8 * i}, 8);" for i, (t, n) in enumerate(params)]


class OpenCL(Dialect):
  """OpenCL C as clang compiles it for AMDGPU (-x cl): the backend lowers only sqrt and trunc of a double (exp, log, sin,
  cos have no instruction and no device library is linked), so those are _F64_HELPERS."""
  name, ids = "opencl", ("__builtin_amdgcn_workgroup_id_x()", "__builtin_amdgcn_workitem_id_x()")
  types = {"bool": ("bool", "uchar"), "uint8": ("uchar",) * 2, "int8": ("char",) * 2, "uint32": ("uint",) * 2, "int32": ("int",) * 2,
           "int64": ("long",) * 2, "float16": ("half",) * 2, "bfloat16": ("float", "ushort"), "float32": ("float",) * 2,
           "float64": ("double",) * 2}
  fn = {Ops.EXP: "__builtin_expf", Ops.LOG: "__builtin_logf", Ops.EXP2: "__builtin_exp2f", Ops.LOG2: "__builtin_log2f",
        Ops.SIN: "__builtin_sinf", Ops.COS: "__builtin_cosf", Ops.SQRT: "__builtin_sqrtf", Ops.TRUNC: "__builtin_truncf"}
  fn64 = {Ops.EXP: "hcq_exp64", Ops.LOG: "hcq_log64", Ops.EXP2: "hcq_exp2_64", Ops.LOG2: "hcq_log2_64", Ops.SIN: "hcq_sin64",
          Ops.COS: "hcq_cos64", Ops.SQRT: "__builtin_sqrt", Ops.TRUNC: "__builtin_trunc"}
  fma = ("__builtin_fmaf", "__builtin_fma")
  prelude = ("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
             "static inline float hcq_bits2f(uint u) { return as_float(u); }\n"
             "static inline uint hcq_f2bits(float f) { return as_uint(f); }\n")

  @classmethod
  def head(cls, name: str, params: list[tuple[str, str]], local: int) -> list[str]:
    sig = ", ".join(f"__global {t} *restrict {n}" for t, n in params)
    return [f"__kernel __attribute__((reqd_work_group_size({local}, 1, 1))) void {name}({sig}) {{"]

  @classmethod
  def finish(cls, src: str) -> str:
    if "double" in src: src = _F64_HELPERS + src
    return cls.prelude + src.replace("uint32_t", "uint").replace("int32_t", "int").replace("int64_t", "long")


class CUDA(Dialect):
  """CUDA C as NVRTC compiles it. half and bfloat16 are stored as cuda_fp16.h's half and cuda_bf16.h's __nv_bfloat16 and
  computed in float, rounded back after each op: the same values as arithmetic in half (float's 24 bits make the double
  rounding exact), with none of the ambiguous overloads mixing half and float operands would hit."""
  name, ids, fn = "cuda", ("blockIdx.x", "threadIdx.x"), _C_FN          # CUDA's device math library has the C names
  types = {**_C_TYPES, "bool": ("bool", "uint8_t"), "float16": ("float", "half"), "bfloat16": ("float", "__nv_bfloat16")}
  # sin/cos of a double call a non-inlined slow path (__internal_trig_reduction_slowpathd, |x| >= 2^31), a call the PTX
  # engine of MOCK+NV does not model: the series of _F64_HELPERS instead
  fn64 = {**_C_FN64, Ops.SIN: "hcq_sin64", Ops.COS: "hcq_cos64"}
  round = {"bfloat16": "hcq_bf16r", "float16": "hcq_f16r"}
  load = {"float16": "__half2float({})", "bfloat16": "__bfloat162float({})"}
  store = {"float16": "__float2half_rn({})", "bfloat16": "__float2bfloat16_rn({})"}
  # NVRTC has no <stdint.h> or <math.h>: their names defined here; helpers are device functions (finish adds __device__)
  prelude = ("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
             "typedef signed char int8_t; typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef int int32_t;\n"
             "typedef unsigned int uint32_t; typedef long long int64_t; typedef unsigned long long uint64_t;\n"
             "#define INFINITY __int_as_float(0x7f800000)\n#define NAN __int_as_float(0x7fc00000)\n"
             "static inline float hcq_bits2f(uint32_t u) { return __uint_as_float(u); }\n"
             "static inline uint32_t hcq_f2bits(float f) { return __float_as_uint(f); }\n"
             "static inline float hcq_f16r(float x) { return __half2float(__float2half_rn(x)); }\n"
             "static inline float hcq_f16r(double x) { return __half2float(__double2half(x)); }\n")

  @classmethod
  def head(cls, name: str, params: list[tuple[str, str]], local: int) -> list[str]:
    sig = ", ".join(f"{t} *__restrict__ {n}" for t, n in params)
    return [f'extern "C" __global__ void __launch_bounds__({local}) {name}({sig}) {{']

  @classmethod
  def finish(cls, src: str) -> str:
    if "hcq_sin64" in src or "hcq_cos64" in src: src = _F64_HELPERS.replace("__builtin_", "") + src
    return (cls.prelude + src).replace("static inline ", "static __device__ inline ")


# bfloat16: round a float to the nearest-even bfloat16, kept in a float; integer floor division/modulo like numpy
# (x // 0 == 0 and x % 0 == 0 instead of a trap)
_HELPERS = """static inline float hcq_bf16r(float x) {
  uint32_t u = hcq_f2bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;
  return hcq_bits2f((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}
""" + "".join(f"""static inline int{n}_t hcq_idiv{sfx}(int{n}_t a, int{n}_t b) {{
  if (b == 0) return 0;
  if (b == -1) return (int{n}_t)((uint{n}_t)0 - (uint{n}_t)a);
  int{n}_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}}
static inline int{n}_t hcq_imod{sfx}(int{n}_t a, int{n}_t b) {{
  if (b == 0 || b == -1) return 0;
  int{n}_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}}
""" for n, sfx in ((32, ""), (64, "64")))


def _poly(coefs: list[float], x: str) -> str:
  """Horner form of sum(coefs[i] * x^i) as C."""
  out = repr(coefs[-1])
  for c in reversed(coefs[:-1]): out = f"({out}*{x}+{c!r})"
  return out


# float64 exp/log/sin/cos for AMDGPU, from the textbook series and argument reductions:
# exp: x = k*ln2 + r (ln2 split in two so k*ln2_hi is exact), exp(r) by Taylor to r^13 (|r| <= ln2/2: error < 1e-17);
# log: x = m*2^e with m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s), s = (m-1)/(m+1), series to s^23 (|s| <= 0.172);
# sin/cos: x = k*pi/2 + r (pi/2 in three 33-bit parts: exact products for |k| < 2^20, i.e. |x| < 1.6e6; beyond that the
# error grows with |x|), then the Taylor series of sin or cos on |r| <= pi/4 (to r^19 / r^18), picked by k mod 4.
_F64_HELPERS = f"""static inline double hcq_exp64r(double r) {{ return {_poly([1 / math.factorial(n) for n in range(14)], "r")}; }}
static inline double hcq_exp64(double x) {{
  if (x != x) return x;
  if (x > 709.782712893384) return INFINITY;
  if (x < -745.1332191019412) return 0.0;
  double k = __builtin_rint(x * 1.4426950408889634);
  double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  return __builtin_ldexp(hcq_exp64r(r), (int)k);
}}
static inline double hcq_exp2_64(double x) {{
  if (x != x) return x;
  if (x >= 1024.0) return INFINITY;
  if (x < -1075.0) return 0.0;
  double k = __builtin_rint(x);
  return __builtin_ldexp(hcq_exp64r((x - k) * 6.93147180559945309417e-01), (int)k);
}}
static inline double hcq_log64m(double x, int *e) {{
  double m = __builtin_frexp(x, e);
  if (m < 0.70710678118654752440) {{ m *= 2.0; *e -= 1; }}
  double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  return 2.0 * s * {_poly([1 / (2 * n + 1) for n in range(12)], "s2")};
}}
static inline double hcq_log64(double x) {{
  if (x != x || x == INFINITY) return x;
  if (x < 0.0) return NAN;
  if (x == 0.0) return -INFINITY;
  int e; double l = hcq_log64m(x, &e);
  return e * 6.93147180369123816490e-01 + (l + e * 1.90821492927058770002e-10);
}}
static inline double hcq_log2_64(double x) {{
  if (x != x || x == INFINITY) return x;
  if (x < 0.0) return NAN;
  if (x == 0.0) return -INFINITY;
  int e; double l = hcq_log64m(x, &e);
  return e + l * 1.44269504088896340736;
}}
static inline double hcq_sincos64(double x, int quadrant) {{
  if (x - x != 0.0) return NAN;
  double k = __builtin_rint(x * 6.36619772367581382433e-01);
  double r = ((x - k * 1.57079632673412561417e+00) - k * 6.07710050630396597660e-11) - k * 2.02226624871116645580e-21;
  double r2 = r * r;
  int q = (int)(((long)k + quadrant) & 3);
  double v = (q & 1) ? {_poly([(-1) ** n / math.factorial(2 * n) for n in range(10)], "r2")}
                     : r * {_poly([(-1) ** n / math.factorial(2 * n + 1) for n in range(10)], "r2")};
  return (q & 2) ? -v : v;
}}
static inline double hcq_sin64(double x) {{ return hcq_sincos64(x, 0); }}
static inline double hcq_cos64(double x) {{ return hcq_sincos64(x, 1); }}
"""


@dataclass
class Program:
  name: str
  src: str
  global_size: tuple[int, int, int]
  local_size: tuple[int, int, int]
  n_bufs: int


def _largest_divisor(n: int, cap: int) -> int:
  return next(d for d in range(min(n, cap), 0, -1) if n % d == 0) if n > 0 else 1


def _fmt_const(v, dt: DType, d: type[Dialect]) -> str:
  if dt is dtypes.bool: return "1" if v else "0"
  if dt.is_int:
    v = int(np.array(v).astype(dt.np)) if dt.np else int(v)
    if dt is dtypes.int64: return "(-9223372036854775807L-1)" if v == -2**63 else f"{v}L"
    if dt.kind == "u": return f"{v}u"
    return "(-2147483647-1)" if v == -2**31 else str(v)
  f = float(v) if dt is dtypes.float64 else float(np.float32(v))
  if f != f: return "NAN"
  if f in (float("inf"), float("-inf")): return "INFINITY" if f > 0 else "(-INFINITY)"
  s = repr(f)
  if dt is dtypes.float64: return s if "e" in s or "." in s else f"{s}.0"
  if dt is not dtypes.float16: return f"{s}f" if "e" in s or "." in s else f"{s}.0f"
  return f"{d.round['float16']}({s}f)" if "float16" in d.round else f"(({d.types['float16'][0]}){s}f)"


def _lin(coefs, const: int, idx: list[str]) -> str:
  terms = [idx[d] if c == 1 else f"{idx[d]}*{c}" for d, c in enumerate(coefs) if c != 0]
  if const or not terms: terms.append(str(const))
  return "(" + "+".join(terms).replace("+-", "-") + ")"


def render_index(st: ShapeTracker, idx: list[str]) -> tuple[str, list[str]]:
  """(memory index expression, validity conditions) for a view stack indexed by `idx`."""
  conds: list[str] = []
  cur = idx
  for i in range(len(st.views) - 1, -1, -1):
    v = st.views[i]
    if v.empty: return "0", ["0"]
    for c, k, lo, hi in v.valid:
      e, (mn, mx) = _lin(c, k, cur), form_range(c, k, v.shape)
      if mn < lo: conds.append(f"{e}>={lo}")
      if mx >= hi: conds.append(f"{e}<{hi}")
    flat = _lin(v.strides, v.offset, cur)
    if i == 0: return flat, conds
    inner = st.views[i - 1].shape
    strides, first = contiguous_strides(inner), next((d for d, n in enumerate(inner) if n != 1), None)
    cur = ["0" if n == 1 else (f"({flat}/{s})" if d == first else f"(({flat}/{s})%{n})" if s != 1 else f"({flat}%{n})")
           for d, (n, s) in enumerate(zip(inner, strides))]
  raise AssertionError("unreachable")


class _Canon:
  """The kernel's index space with size-1 dims dropped and mergeable neighbours merged; trackers remapped."""
  def __init__(self, k: Kernel):
    inner, outer = _nodes_with_trackers(k)
    full, out = k.full_shape, k.out_shape
    keep = [d for d, n in enumerate(full) if n != 1]
    self.sizes = [full[d] for d in keep]
    self.reduce = [full[d] != out[d] for d in keep]
    osh = lambda sizes, red: tuple(1 if r else n for n, r in zip(sizes, red))
    self.st = {id(n): n.arg[-1].reshape(tuple(self.sizes)) for n in inner}
    self.st.update({id(n): n.arg[-1].reshape(osh(self.sizes, self.reduce)) for n in outer})
    self.store = ShapeTracker.contiguous(osh(self.sizes, self.reduce))
    inner_ids = {id(n) for n in inner}
    for i in range(len(self.sizes) - 2, -1, -1):
      if self.reduce[i] != self.reduce[i + 1]: continue
      sizes = self.sizes[:i] + [self.sizes[i] * self.sizes[i + 1]] + self.sizes[i + 2:]
      red = self.reduce[:i] + self.reduce[i + 1:]
      new = {key: st.reshape(tuple(sizes) if key in inner_ids else osh(sizes, red), strict=True) for key, st in self.st.items()}
      if all(v is not None for v in new.values()):
        self.sizes, self.reduce, self.st = sizes, red, new
        self.store = ShapeTracker.contiguous(osh(sizes, red))
    self.out_dims = [d for d, r in enumerate(self.reduce) if not r]
    self.red_dims = [d for d, r in enumerate(self.reduce) if r]
    self.inner = inner


def _nodes_with_trackers(k: Kernel) -> tuple[list[KNode], list[KNode]]:
  """Leaves with a tracker, split into those inside the reduce (full shape) and outside (output shape)."""
  inner: list[KNode] = []
  outer: list[KNode] = []
  seen: set[int] = set()
  def walk(n: KNode, inside: bool):
    if id(n) in seen: return
    seen.add(id(n))
    if n.op in ("LOAD", Ops.CONST, Ops.ARANGE): (inner if inside else outer).append(n)
    for s in n.srcs: walk(s, inside or n.op is Ops.REDUCE)
  walk(k.root, False)
  return inner, outer


class Renderer:
  def __init__(self, dialect: type[Dialect], vector_registers: tuple[int, int] | None = None):
    """`vector_registers`: (count, bytes each) of the CPU's vector register file; half of it holds a CPU reduce
    kernel's block of accumulators (AVX-512: 1 KiB, e.g. an 8 x 32 block of float32 sums of a matmul)."""
    self.d = dialect
    self.types = dialect.types
    self.vregs = vector_registers or (16, 16)
    self.acc_bytes = self.vregs[0] * self.vregs[1] // 2

  def vtype(self, dt: DType) -> str: return self.types[dt.name][0]
  def stype(self, dt: DType) -> str: return self.types[dt.name][1]
  def acc_type(self, dt: DType) -> str: return "float" if dt in (dtypes.float16, dtypes.bfloat16) else self.vtype(dt)

  def render(self, k: Kernel) -> Program:
    self.k, self.c = k, _Canon(k)
    self.lines: list[str] = []
    self.nvar = 0
    c = self.c
    name = f"{'r' if k.reduce is not None else 'e'}_{'_'.join(map(str, c.sizes)) or 'scalar'}"
    gsize, lsize, body = self._cpu_body() if self.d.host else self._gpu_body()
    params = [(f"{'' if i == 0 else 'const '}{self.stype(b.dtype)}", f"d{i}") for i, b in enumerate(k.bufs)]
    src = self.d.finish(_HELPERS + "\n".join(self.d.head(name, params, lsize[0]) + body + ["}"]) + "\n")
    return Program(name, src, gsize, lsize, len(k.bufs))

  # --- loop layouts
  def _decode(self, dims: list[tuple[int, int, str]], g: str) -> list[str]:
    """Split flat index `g` into per-dim counters (innermost last): dims = [(dim, count, var)]."""
    out = []
    for i, (d, n, var) in enumerate(reversed(dims)):
      last = i == len(dims) - 1
      out.append(f"  const int64_t {var} = {g}" + ("" if last else f" % {n}") + ";")
      if not last: out.append(f"  {g} /= {n};")
    return out

  def _cpu_body(self):
    c, k = self.c, self.k
    lines = ["  int64_t g = gid[0];"]
    if k.reduce is None:
      if not c.out_dims: idx, grid = [], 1
      else:
        last = c.out_dims[-1]
        n = c.sizes[last]
        chunks = (n + CPU_CHUNK - 1) // CPU_CHUNK
        outer = [(d, c.sizes[d], f"i{d}") for d in c.out_dims[:-1]] + [(last, chunks, "chunk")]
        grid = prod(x[1] for x in outer)
        lines += self._decode(outer, "g")
        lines.append(f"  for (int64_t i{last} = chunk*{CPU_CHUNK}; i{last} < (chunk+1)*{CPU_CHUNK} && i{last} < {n}; i{last}++) {{")
        idx = [f"i{d}" for d in range(len(c.sizes))]
      self.lines, memo = [], {}
      val = self.expr(k.root, idx, memo)
      lines += ["  " + l for l in self.lines] + [self.store(idx, val)]
      if c.out_dims: lines.append("  }")
      return (grid, 1, 1), (1, 1, 1), lines
    if (mm := self._matmul_dims()) is not None: return self._cpu_matmul(*mm)
    u1, u0 = self._choose_upcast()
    U1 = _largest_divisor(c.sizes[u1], 32) if u1 is not None else 1
    acc_size = max(4, k.reduce.dtype.itemsize)   # half floats accumulate in float
    U0 = _largest_divisor(c.sizes[u0], max(1, min(8, self.acc_bytes // (acc_size * U1)))) if u0 is not None else 1
    up = {u1: (U1, "u1"), u0: (U0, "u0")} if u0 is not None else {u1: (U1, "u1")}
    tiles = [(d, c.sizes[d] // up[d][0] if d in up else c.sizes[d], f"o{d}") for d in c.out_dims]
    grid = prod(t[1] for t in tiles)
    lines += self._decode(tiles, "g")
    idx = [f"o{d}" if d in c.out_dims else f"r{d}" for d in range(len(c.sizes))]
    for d, (U, u) in up.items():
      if U > 1: idx[d] = f"({idx[d]}*{U}+{u})"
    red = k.reduce
    acc_t, op = self.acc_type(red.dtype), red.arg[0]
    lines.append(f"  {acc_t} acc[{U0 * U1}];")
    lines.append(f"  for (int i = 0; i < {U0 * U1}; i++) acc[i] = {self.identity(op, red.dtype)};")
    for d in c.red_dims:
      n = c.sizes[d] // (U1 if d == u1 else 1)
      lines.append(f"  for (int64_t r{d} = 0; r{d} < {n}; r{d}++) {{")
    lines.append(f"  for (int u0 = 0; u0 < {U0}; u0++) for (int u1 = 0; u1 < {U1}; u1++) {{")
    self.lines, memo = [], {}
    upd = self.accumulate(red, idx, memo, "acc[u0*%d+u1]" % U1)
    lines += ["    " + l for l in self.lines] + [f"    {upd}", "  }" + "}" * len(c.red_dims)]
    if u1 in c.red_dims:   # partial sums along the vectorized reduce dim: combine them
      lines.append(f"  for (int u0 = 0; u0 < {U0}; u0++) for (int u1 = 1; u1 < {U1}; u1++) "
                   f"acc[u0*{U1}] = {self.combine(op, red.dtype, f'acc[u0*{U1}]', f'acc[u0*{U1}+u1]')};")
      lines.append(f"  for (int u0 = 0; u0 < {U0}; u0++) {{ const int u1 = 0;")
    else: lines.append(f"  for (int u0 = 0; u0 < {U0}; u0++) for (int u1 = 0; u1 < {U1}; u1++) {{")
    self.reduce_value = self.rounded(red.dtype, f"(({self.vtype(red.dtype)})acc[u0*{U1}+u1])")
    self.lines, memo = [], {}
    val = self.expr(k.root, idx, memo)
    lines += ["    " + l for l in self.lines] + ["  " + self.store(idx, val), "  }"]
    return (grid, 1, 1), (1, 1, 1), lines

  def _choose_upcast(self) -> tuple[int | None, int | None]:
    """U1: the dim most loads in the reduce read with stride 1 (then the store's); U0: an output dim along
    which some load is constant (so one vector load serves U0 accumulators)."""
    c = self.c
    loads = [c.st[id(n)] for n in c.inner if n.op == "LOAD"]
    def unit(st: ShapeTracker, d: int) -> bool: return len(st.views) == 1 and st.views[0].strides[d] == 1
    last_out = c.out_dims[-1] if c.out_dims else None
    cands = c.out_dims + c.red_dims
    u1 = max(cands, key=lambda d: (sum(unit(st, d) for st in loads), d == last_out, d in c.out_dims, d))
    def reuse(d): return sum(st.views[-1].strides[d] == 0 for st in loads)
    others = [d for d in c.out_dims if d != u1 and reuse(d) > 0]
    u0 = max(others, key=lambda d: (reuse(d), d)) if others else None
    return u1, u0

  def _free_of(self, n: KNode, d: int) -> bool:
    """Whether expression `n` reads the same value at every index along canonical dim d."""
    stack, seen = [n], set()
    while stack:
      if id(x := stack.pop()) in seen: continue
      seen.add(id(x))
      if x.op in ("LOAD", Ops.CONST, Ops.ARANGE):   # the last view takes the index: no stride or bound on d, no dependence
        v = self.c.st[id(x)].views[-1]
        if not v.empty and (v.strides[d] != 0 or any(cf[d] for cf, *_ in v.valid)): return False
      stack.extend(x.srcs)
    return True

  def _matmul_dims(self) -> tuple[KNode, KNode, int, int, int] | None:
    """(A, B, m, n, k) where the kernel's reduce sums A*B over its one reduce dim k, A reading the same along output dim
    n and B along output dim m (n the last output dim where possible: contiguous stores); else None."""
    c, red = self.c, self.k.reduce
    assert red is not None
    src = red.srcs[0]
    if red.arg[0] is not Ops.ADD or len(c.red_dims) != 1 or c.sizes[c.red_dims[0]] == 0 or src.op is not Ops.MUL or \
       src.dtype is not red.dtype or red.dtype not in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint32, dtypes.int64):
      return None
    found = []
    for a, b in (src.srcs, src.srcs[::-1]):   # a*b == b*a, rounding included
      ns = [d for d in c.out_dims if self._free_of(a, d) and not self._free_of(b, d)]
      ms = [d for d in c.out_dims if self._free_of(b, d) and not self._free_of(a, d)]
      if ms and ns: found.append((ns[-1] != c.out_dims[-1], (a, b, ms[-1], ns[-1], c.red_dims[0])))
    return min(found, key=lambda f: f[0])[1] if found else None

  def _pack(self, x: KNode, idx: list[str], d: int, kd: int, buf: str, first: str, count: str, R: int) -> list[str]:
    """Loops storing x at (d = first + p*R+r, p*R+r < `count`; kd = k0+k, k < kc) into `buf` as panels p of kc x R (R
    contiguous), zeros past `count` in the last panel (read at its last valid index, so nothing out of range is read).
    The loops follow the dim x's loads read contiguously: k innermost, or k outermost and the panels' rows inside it."""
    def unit(dim: int) -> int:
      return sum(1 for s in self._leaves(x) if s.op == "LOAD" and len(st := self.c.st[id(s)].views) == 1 and st[0].strides[dim] == 1)
    along_k = unit(kd) > unit(d)
    loop_k, loop_r = "for (int64_t k = 0; k < kc; k++)", f"for (int64_t r = 0; r < {R}; r++)"
    out = []
    for last in (False, True):
      idx = list(idx)
      idx[d], idx[kd] = f"({first}+{'q' if last else 'p*%d+r' % R})", "(k0+k)"
      self.lines, memo = [], dict[int, str]()
      v = self.expr(x, idx, memo)
      panels = f"const int64_t p = {count} / {R};" if last else f"for (int64_t p = 0; p < {count} / {R}; p++)"
      loops = [panels, loop_r, loop_k] if along_k else [loop_k, panels, loop_r]
      opened = [l + " {" if l.startswith("for") else l for l in loops]
      out.append(f"      {f'if ({count} % {R}) ' if last else ''}{{ " + " ".join(opened))
      if last: out.append(f"          const int64_t q = p*{R}+r < {count} ? p*{R}+r : {count}-1;")
      val = f"p*{R}+r < {count} ? {v} : 0" if last else v
      out += ["          " + l for l in self.lines] + [f"          {buf}[p*kc*{R}+k*{R}+r] = {val};",
                                                        "      " + "}" * (1 + sum(l.endswith("{") for l in opened))]
    return out

  @staticmethod
  def _leaves(n: KNode) -> list[KNode]:
    out, stack, seen = [], [n], set()
    while stack:
      if id(x := stack.pop()) in seen: continue
      seen.add(id(x))
      if not x.srcs: out.append(x)
      stack.extend(x.srcs)
    return out

  def _cpu_matmul(self, a: KNode, b: KNode, m: int, n: int, kd: int):
    """The blocked matmul (module docstring). A workgroup computes rows x cols of one batch element: for each KC slice,
    B's cols x KC are packed once, then per MC rows A's (packed, unless A is a plain load contiguous along k: its rows are
    read in place) and the micro-kernel sweeps them; sums cross slices in ct, the epilogue stores from there."""
    c, k = self.c, self.k
    assert k.reduce is not None
    dt = k.reduce.dtype
    t = self.vtype(dt)
    count, width = self.vregs
    VL, NV = max(1, width // dt.itemsize), 2          # NV vectors of VL lanes across a micro-tile row
    NR, MR = NV * VL, max(1, min(12, (count - NV - 2) // NV))   # MR x NV accumulators, NV loads of B, a broadcast of A
    KC = max(16, 16384 // (NR * dt.itemsize))         # a KC x NR sliver of B: 16 KiB, half of L1
    MC = MR * max(1, 98304 // (KC * dt.itemsize * MR))   # an MC x KC block of A: 96 KiB, in L2
    M, N, K = c.sizes[m], c.sizes[n], c.sizes[kd]
    def split(size: int, R: int, most: int) -> tuple[int, int]:   # (tile, tiles): tiles of whole R-panels, as even as they go
      panels = -(-size // R)
      tiles = -(-panels // most)
      return R * -(-panels // tiles), tiles
    batch = prod(c.sizes[d] for d in c.out_dims if d not in (m, n))
    (NW, TN) = split(N, NR, 16)                       # B's KC x NW: 256 KiB
    (MW, TM) = split(M, MC, max(1, min(6, 2**20 // (MC * NW * dt.itemsize))))   # sums ct: MW x NW, at most 1 MiB
    direct = a.op == "LOAD" and a.dtype is dt and len(v := c.st[id(a)].views) == 1 and not v[0].valid and v[0].strides[kd] == 1
    while batch * TM * TN < 4:   # work for several threads: more row tiles where A is packed (once per column tile), else columns
      if not direct and MW > MC: (MW, TM) = split(M, MC, MW // MC // 2)
      elif NW > 4 * NR: (NW, TN) = split(N, NR, NW // NR // 2)
      else: break
    tiles = [(d, c.sizes[d], f"o{d}") for d in c.out_dims if d not in (m, n)] + [(m, TM, "mt"), (n, TN, "nt")]
    lines = ["  " + self.d.vector(t, VL, "hcq_v"), "  int64_t g = gid[0];"] + self._decode(tiles, "g")
    lines += [f"  const int64_t m0 = mt*{MW}, n0 = nt*{NW};",
              f"  const int64_t rows = {M} - m0 < {MW} ? {M} - m0 : {MW}, cols = {N} - n0 < {NW} ? {N} - n0 : {NW};",
              f"  const int64_t np = (cols+{NR - 1})/{NR};",
              f"  {t} bp[{NW * KC}] __attribute__((aligned(64))), ct[{MW * NW}] __attribute__((aligned(64)));"]
    if not direct: lines.append(f"  {t} ap[{MC * KC}] __attribute__((aligned(64)));")
    lines += [f"  for (int64_t k0 = 0; k0 < {K}; k0 += {KC}) {{", f"    const int64_t kc = {K} - k0 < {KC} ? {K} - k0 : {KC};"]
    idx = [f"o{d}" for d in range(len(c.sizes))]
    lines += [l[2:] for l in self._pack(b, idx, n, kd, "bp", "n0", "cols", NR)]
    lines += [f"    for (int64_t i0 = 0; i0 < rows; i0 += {MC}) {{",
              f"      const int64_t mrows = rows - i0 < {MC} ? rows - i0 : {MC}, mp = (mrows+{MR - 1})/{MR};"]
    if not direct: lines += self._pack(a, idx, m, kd, "ap", "m0+i0", "mrows", MR)
    acc = [[f"c{i}_{j}" for j in range(NV)] for i in range(MR)]
    flat = [v for row in acc for v in row]
    at = lambda i, j: f"*(hcq_v *)(pc + {i * NW + j * VL})"
    upd = (lambda cv, j: f"{cv} = __builtin_elementwise_fma(ai, b{j}, {cv});") if dt.is_float else (lambda cv, j: f"{cv} += ai * b{j};")
    lines += ["      for (int64_t jr = 0; jr < np; jr++) for (int64_t ir = 0; ir < mp; ir++) {",
              f"        const {t} *restrict pb = bp + jr*kc*{NR};", f"        {t} *restrict pc = ct + (i0+ir*{MR})*{NW} + jr*{NR};"]
    if direct:   # row i of the micro-tile read in place (past the last row: the last row again, its sums unused)
      rix = list(idx)
      for i in range(MR):
        rix[m], rix[kd] = f"(m0+(i0+ir*{MR}+{i} < rows ? i0+ir*{MR}+{i} : rows-1))", "k0"
        lines.append(f"        const {t} *restrict pa{i} = d{a.arg[0]} + {render_index(c.st[id(a)], rix)[0]};")
      aval = lambda i: f"pa{i}[k]"
    else:
      lines.append(f"        const {t} *restrict pa = ap + ir*kc*{MR};")
      aval = lambda i: f"pa[k*{MR}+{i}]"
    lines += [f"        hcq_v {', '.join(flat)};",
              f"        if (k0 == 0) {{ {' '.join(f'{v} = (hcq_v)0;' for v in flat)} }}",
              f"        else {{ {' '.join(f'{acc[i][j]} = {at(i, j)};' for i in range(MR) for j in range(NV))} }}",
              "        for (int64_t k = 0; k < kc; k++) {",
              "          " + " ".join(f"const hcq_v b{j} = *(const hcq_v *)(pb + k*{NR} + {j * VL});" for j in range(NV))]
    lines += [f"          {{ const hcq_v ai = (hcq_v){aval(i)}; {' '.join(upd(acc[i][j], j) for j in range(NV))} }}" for i in range(MR)]
    lines += ["        }", "        " + " ".join(f"{at(i, j)} = {acc[i][j]};" for i in range(MR) for j in range(NV)), "      }", "    }", "  }"]
    idx[m], idx[n], idx[kd] = "(m0+i)", "(n0+j)", "0"
    self.reduce_value = f"ct[i*{NW}+j]"
    self.lines, memo = [], dict[int, str]()
    val = self.expr(k.root, idx, memo)
    lines += ["  for (int64_t i = 0; i < rows; i++) for (int64_t j = 0; j < cols; j++) {"] + ["    " + l for l in self.lines]
    lines += ["  " + self.store(idx, val), "  }"]
    return (prod(x[1] for x in tiles), 1, 1), (1, 1, 1), lines

  def _gpu_body(self):
    c, k = self.c, self.k
    n_out = prod(c.sizes[d] for d in c.out_dims)
    ls = min(GPU_LOCAL, max(1, n_out))
    block, thread = self.d.ids
    lines = [f"  long g = (long){block} * {ls} + (long){thread};",
             f"  if (g >= {n_out}) return;"]
    lines += self._decode([(d, c.sizes[d], f"o{d}") for d in c.out_dims], "g")
    idx = [f"o{d}" if d in c.out_dims else f"r{d}" for d in range(len(c.sizes))]
    if k.reduce is not None:
      red = k.reduce
      lines.append(f"  {self.acc_type(red.dtype)} acc0 = {self.identity(red.arg[0], red.dtype)};")
      lines += [f"  for (long r{d} = 0; r{d} < {c.sizes[d]}; r{d}++) {{" for d in c.red_dims]
      self.lines, memo = [], {}
      upd = self.accumulate(red, idx, memo, "acc0")
      lines += ["    " + l for l in self.lines] + [f"    {upd}", "  " + "}" * len(c.red_dims)]
      self.reduce_value = self.rounded(red.dtype, f"(({self.vtype(red.dtype)})acc0)")
    self.lines, memo = [], {}
    val = self.expr(k.root, idx, memo)
    lines += ["  " + l for l in self.lines] + [self.store(idx, val)]
    return ((n_out + ls - 1) // ls, 1, 1), (ls, 1, 1), lines

  # --- expressions
  def var(self, t: str, e: str) -> str:
    self.nvar += 1
    self.lines.append(f"const {t} v{self.nvar} = {e};")
    return f"v{self.nvar}"

  def rounded(self, dt: DType, e: str) -> str:
    """`e` rounded to `dt`'s precision where the value type is wider (bfloat16 in float, half in float on CUDA)."""
    return f"{r}({e})" if (r := self.d.round.get(dt.name)) else e

  def store(self, idx: list[str], val: str) -> str:
    i, _ = render_index(self.c.store, idx)
    dt = self.k.bufs[0].dtype
    if (conv := self.d.store.get(dt.name)) is not None: val = conv.format(val)
    return f"  d0[{i}] = ({self.stype(dt)})({val});"

  def identity(self, op: Ops, dt: DType) -> str:
    if op is Ops.ADD: return _fmt_const(0, dt, self.d)
    lo = op is Ops.MAX
    if dt.is_float: return "(-INFINITY)" if lo else "INFINITY"
    return _fmt_const(dt.min if lo else dt.max, dt, self.d)

  def combine(self, op: Ops, dt: DType, a: str, b: str) -> str:
    if op is Ops.ADD: return f"({a}+{b})"
    return self.binary(Ops.MAX if op is Ops.MAX else Ops.MIN, dt, a, b)

  def accumulate(self, red: KNode, idx, memo, acc: str) -> str:
    src, op = red.srcs[0], red.arg[0]
    if op is Ops.ADD and src.op is Ops.MUL and src.dtype in (dtypes.float32, dtypes.float64):   # multiply-accumulate, fused like BLAS
      a, b = (self.expr(s, idx, memo) for s in src.srcs)
      fma = self.d.fma[0] if src.dtype is dtypes.float32 else self.d.fma[1]
      return f"{acc} = {fma}({a}, {b}, {acc});"
    v = self.expr(src, idx, memo)
    return f"{acc} = {self.combine(op, red.dtype, acc, v)};"

  def binary(self, op: Ops, dt: DType, a: str, b: str) -> str:
    if op in (Ops.MAX, Ops.MIN):
      cmp = ">" if op is Ops.MAX else "<"
      if dt.is_float: return f"(({a}){cmp}({b}) || ({a})!=({a}) ? ({a}) : ({b}))"   # NaN propagates, like numpy
      return f"(({a}){cmp}({b}) ? ({a}) : ({b}))"
    if op in (Ops.IDIV, Ops.MOD):
      if dt.kind == "i": return f"hcq_{'idiv' if op is Ops.IDIV else 'imod'}{'64' if dt.itemsize == 8 else ''}({a}, {b})"
      return f"(({b}) ? ({a}){'/' if op is Ops.IDIV else '%'}({b}) : 0)"
    return f"({a}{_BIN[op]}{b})"

  def expr(self, n: KNode, idx: list[str], memo: dict) -> str:
    if id(n) in memo: return memo[id(n)]
    vt = self.vtype(n.dtype)
    if n.op is Ops.REDUCE: out = self.reduce_value
    elif n.op in ("LOAD", Ops.CONST, Ops.ARANGE):
      st = self.c.st[id(n)]
      i, conds = render_index(st, idx)
      if n.op == "LOAD":
        v = f"d{n.arg[0]}[{i}]"
        if n.dtype is dtypes.bool: v = f"({v}!=0)"
        elif (conv := self.d.load.get(n.dtype.name)) is not None: v = conv.format(v)
      elif n.op is Ops.CONST: v = _fmt_const(n.arg[0], n.dtype, self.d)
      else:
        start, step = n.arg[0], n.arg[1]
        r = (lambda e: self.rounded(n.dtype, e)) if n.dtype is dtypes.float16 else (lambda e: e)   # half arithmetic: each op rounded
        c0, c1 = _fmt_const(start, n.dtype, self.d), _fmt_const(step, n.dtype, self.d)
        v = r(f"({c0}+{r(r(f'({vt}){i}') + '*' + c1)})")
      out = self.var(vt, f"({'&&'.join(conds)} ? {v} : 0)" if conds else v)
    else:
      s = [self.expr(x, idx, memo) for x in n.srcs]
      sdt = n.srcs[0].dtype
      if n.op is Ops.CAST:
        if n.dtype is dtypes.bool: e = f"({s[0]}!=0)"
        elif n.dtype.name in self.d.round: e = self.rounded(n.dtype, s[0] if sdt is dtypes.float64 else f"(float){s[0]}")
        else: e = f"(({vt}){s[0]})"
      elif n.op is Ops.NEG: e = f"(-{s[0]})"
      elif n.op is Ops.NOT: e = f"(!{s[0]})"
      elif n.op is Ops.RECIP: e = f"(({vt})1/{s[0]})"
      elif vt == "double" and n.op in self.d.fn64: e = f"{self.d.fn64[n.op]}({s[0]})"
      elif n.op in self.d.fn:
        e = f"{self.d.fn[n.op]}({s[0]})" if vt == "float" else f"(({vt}){self.d.fn[n.op]}((float){s[0]}))"
      elif n.op is Ops.WHERE: e = f"({s[0]} ? {s[1]} : {s[2]})"
      else: e = self.binary(n.op, sdt, s[0], s[1])
      if n.op is not Ops.CAST and n.op is not Ops.WHERE: e = self.rounded(n.dtype, e)
      out = self.var(vt, e)
    memo[id(n)] = out
    return out
