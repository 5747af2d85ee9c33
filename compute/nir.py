"""A scheduled Kernel -> NIR as text ("nir": one SSA instruction a line), for devices whose compiler builds mesa NIR.

The layout is codegen's GPU one: one invocation per output element (global id = workgroup id x * local size + local id x),
reduce dims as loops. Every value has a NIR bit size: bool 1, int8/uint8 32 (wrapped back to 8 bits after each op,
as C's assignment to an 8-bit type does), int32/uint32/float32 32, float16 16, int64 64 (for compilers that lower 64-bit
integer ops, as ir3 does: nir_shader_compiler_options.lower_int64_options); float64 and bfloat16 are refused.
Buffers hold bool as one byte. A masked load (padding) reads element 0 and selects 0, so no load leaves its buffer.

The text (parsed by the device's compiler):
  nir 1 / bufs N / local X              header
  %n = gid                              the global invocation id x (32 bits)
  %n = imm BITS VALUE                   a constant (VALUE: the bits as an unsigned integer)
  %n = OP %a [%b [%c]]                  a NIR ALU op by its name (nir_op_infos)
  %n = load BITS BUF %i                 element %i (an int32 index) of buffer BUF, BITS wide
  store BITS BUF %i %v
  reg R BITS / %n = read R / write R %v a variable (NIR reg intrinsics; decls first)
  if %c / else / endif / loop / break / endloop
"""
from __future__ import annotations
import struct
import numpy as np
from compute.codegen import GPU_LOCAL, Dialect, Program, _Canon
from compute.dtypes import DType, dtypes
from compute.lazy import Ops
from compute.schedule import Kernel, KNode
from compute.shape import ShapeTracker, contiguous_strides, form_range

BITS = {"bool": 1, "uint8": 32, "int8": 32, "uint32": 32, "int32": 32, "int64": 64, "float16": 16, "float32": 32}
STORE_BITS = {"bool": 8, "uint8": 8, "int8": 8, "uint32": 32, "int32": 32, "int64": 64, "float16": 16, "float32": 32}
_UNARY_F = {Ops.EXP2: "fexp2", Ops.LOG2: "flog2", Ops.SIN: "fsin", Ops.COS: "fcos", Ops.SQRT: "fsqrt", Ops.RECIP: "frcp",
            Ops.TRUNC: "ftrunc", Ops.NEG: "fneg"}
LOG2E, LN2 = 1.4426950408889634, 0.6931471805599453


class Unsupported(NotImplementedError):
  """A kernel the NIR renderer does not express (a data type the target lacks), named."""


def check_dtype(dt: DType) -> None:
  if dt.name not in BITS:
    why = "the GPUs ir3 compiles for have no double-precision floats" if dt.itemsize == 8 else "it is not a NIR type"
    raise Unsupported(f"{dt.name} values in a NIR kernel: {why}; NIR kernels take {', '.join(BITS)}: cast first "
                      "(e.g. to float32 or int32), or run this on another device")


class NIRRenderer:
  def render(self, k: Kernel) -> Program:
    self.k, self.c = k, _Canon(k)
    self.lines: list[str] = []
    self.decls: list[str] = []
    self.n = 0
    for b in k.bufs: check_dtype(b.dtype)
    c = self.c
    name = f"{'r' if k.reduce is not None else 'e'}_{'_'.join(map(str, c.sizes)) or 'scalar'}"
    n_out = 1
    for d in c.out_dims: n_out *= c.sizes[d]
    if n_out >= 1 << 31 or any(s >= 1 << 31 for s in c.sizes):
      raise Unsupported(f"kernel {name}: the NIR renderer indexes with 32-bit integers; {c.sizes} is too large")
    ls = min(GPU_LOCAL, max(1, n_out))
    g = self.emit("gid")
    self.lines.append(f"if {self.alu('ult', g, self.imm(32, n_out))}")
    idx: dict[int, str] = {}
    for d in reversed(c.out_dims):
      n = c.sizes[d]
      idx[d] = self.alu("umod", g, self.imm(32, n)) if d != c.out_dims[0] else g
      if d != c.out_dims[0]: g = self.alu("udiv", g, self.imm(32, n))
    if k.reduce is not None: self.reduce_value = self._reduce(k.reduce, idx)
    val = self.expr(k.root, idx, {})
    ix, _ = self.index(c.store, idx)
    dt = k.bufs[0].dtype
    self.lines.append(f"store {STORE_BITS[dt.name]} 0 {ix} {self.to_storage(val, dt)}")
    self.lines.append("endif")
    src = "\n".join([f"nir 1\nbufs {len(k.bufs)}\nlocal {ls}", *self.decls, *self.lines]) + "\n"
    return Program(name, src, ((n_out + ls - 1) // ls, 1, 1), (ls, 1, 1), len(k.bufs))

  # --- instructions
  def emit(self, text: str) -> str:
    self.n += 1
    self.lines.append(f"%{self.n} = {text}")
    return f"%{self.n}"

  def alu(self, op: str, *srcs: str) -> str: return self.emit(" ".join((op, *srcs)))

  def imm(self, bits: int, v: int) -> str: return self.emit(f"imm {bits} {v & ((1 << bits) - 1)}")

  def const(self, v, dt: DType) -> str:
    check_dtype(dt)
    if dt is dtypes.bool: return self.imm(1, int(bool(v)))
    if dt.is_int: return self.imm(BITS[dt.name], int(np.array(v).astype(dt.np)))
    if dt is dtypes.float16: return self.imm(16, int(np.array(v, np.float16).view(np.uint16)))
    return self.imm(32, struct.unpack("<I", struct.pack("<f", float(np.float32(v))))[0])

  def reg(self, bits: int) -> str:
    r = f"r{len(self.decls)}"
    self.decls.append(f"reg {r} {bits}")
    return r

  def wrap(self, v: str, dt: DType) -> str:
    """An int8/uint8 value computed in 32 bits, wrapped to its 8 bits (as storing to the C type does)."""
    if dt is dtypes.int8: return self.alu("i2i32", self.alu("i2i8", v))
    if dt is dtypes.uint8: return self.alu("u2u32", self.alu("u2u8", v))
    return v

  def to_storage(self, v: str, dt: DType) -> str:
    if dt is dtypes.bool: return self.alu("u2u8", self.alu("b2i32", v))
    return self.alu("u2u8", v) if dt in (dtypes.int8, dtypes.uint8) else v

  # --- indexing (codegen.render_index as NIR: int32 arithmetic)
  def lin(self, coefs, const: int, cur: list[str]) -> str:
    out = None
    for d, c in enumerate(coefs):
      if c == 0: continue
      t = cur[d] if c == 1 else self.alu("imul", cur[d], self.imm(32, c))
      out = t if out is None else self.alu("iadd", out, t)
    if const or out is None: out = self.imm(32, const) if out is None else self.alu("iadd", out, self.imm(32, const))
    return out

  def index(self, st: ShapeTracker, idx: dict[int, str]) -> tuple[str, list[str]]:
    """(int32 element index, validity conditions) of a view stack indexed by `idx` (dim -> value)."""
    conds: list[str] = []
    cur = [idx.get(d, "") for d in range(len(self.c.sizes))]
    for i in range(len(st.views) - 1, -1, -1):
      v = st.views[i]
      if v.empty: return self.imm(32, 0), [self.imm(1, 0)]
      for c, k, lo, hi in v.valid:
        e, (mn, mx) = self.lin(c, k, cur), form_range(c, k, v.shape)
        if mn < lo: conds.append(self.alu("ige", e, self.imm(32, lo)))
        if mx >= hi: conds.append(self.alu("ilt", e, self.imm(32, hi)))
      flat = self.lin(v.strides, v.offset, cur)
      if i == 0: return flat, conds
      inner = st.views[i - 1].shape
      strides, first = contiguous_strides(inner), next((d for d, n in enumerate(inner) if n != 1), None)
      nxt = []
      for d, (n, s) in enumerate(zip(inner, strides)):
        if n == 1: nxt.append(self.imm(32, 0)); continue
        q = flat if s == 1 else self.alu("udiv", flat, self.imm(32, s))
        nxt.append(q if d == first else self.alu("umod", q, self.imm(32, n)))
      cur = nxt
    raise AssertionError("unreachable")

  def load(self, n: KNode, idx: dict[int, str]) -> str:
    i, conds = self.index(self.c.st[id(n)], idx)
    ok = None
    for cnd in conds: ok = cnd if ok is None else self.alu("iand", ok, cnd)
    if ok is not None: i = self.alu("bcsel", ok, i, self.imm(32, 0))
    dt = n.dtype
    check_dtype(dt)
    v = self.emit(f"load {STORE_BITS[dt.name]} {n.arg[0]} {i}")
    if dt is dtypes.bool: v = self.alu("ine", self.alu("u2u32", v), self.imm(32, 0))
    elif dt is dtypes.int8: v = self.alu("i2i32", v)
    elif dt is dtypes.uint8: v = self.alu("u2u32", v)
    return v if ok is None else self.alu("bcsel", ok, v, self.const(0, dt))

  # --- reductions: a loop per reduce dim around one accumulator
  def acc_dtype(self, dt: DType) -> DType: return dtypes.float32 if dt is dtypes.float16 else dtypes.uint32 if dt is dtypes.bool else dt

  def identity(self, op: Ops, dt: DType) -> str:
    if op is Ops.ADD: return self.const(0, dt)
    lo = op is Ops.MAX
    if dt.is_float: return self.const(float("-inf") if lo else float("inf"), dt)
    return self.const(dt.min if lo else dt.max, dt)

  def cast(self, v: str, src: DType, dst: DType) -> str:
    if src is dst: return v
    if dst is dtypes.bool: return self.alu("fneu" if src.is_float else "ine", v, self.const(0, src))
    if src is dtypes.bool: v, src = self.alu("b2i32", v), dtypes.int32
    if dst.is_float:
      bits = BITS[dst.name]
      return self.alu(f"f2f{bits}" if src.is_float else f"{'i' if src.kind == 'i' else 'u'}2f{bits}", v)
    db = BITS[dst.name]
    if src.is_float: return self.wrap(self.alu(f"f2{'i' if dst.kind == 'i' else 'u'}{db}", v), dst)
    if BITS[src.name] < db: v = self.alu(f"{'i2i' if src.kind == 'i' else 'u2u'}{db}", v)     # widened by the source's sign
    elif BITS[src.name] > db: v = self.alu(f"u2u{db}", v)                                      # the low bits
    return self.wrap(v, dst)

  def _reduce(self, red: KNode, idx: dict[int, str]) -> str:
    op, acc_t = red.arg[0], self.acc_dtype(red.dtype)
    acc = self.reg(BITS[acc_t.name])
    self.lines.append(f"write {acc} {self.identity(op, acc_t)}")
    counters = []
    for d in self.c.red_dims:
      r = self.reg(32)
      self.lines.append(f"write {r} {self.imm(32, 0)}")
      self.lines.append("loop")
      i = idx[d] = self.emit(f"read {r}")
      self.lines += [f"if {self.alu('ige', i, self.imm(32, self.c.sizes[d]))}", "break", "endif"]
      counters.append((r, i))
    src, memo = red.srcs[0], dict[int, str]()
    a = self.emit(f"read {acc}")
    if op is Ops.ADD and src.op is Ops.MUL and src.dtype is dtypes.float32:   # multiply-accumulate, fused like BLAS
      x, y = (self.expr(s, idx, memo) for s in src.srcs)
      new = self.alu("ffma", x, y, a)
    else: new = self.combine(op, acc_t, a, self.cast(self.expr(src, idx, memo), src.dtype, acc_t))
    self.lines.append(f"write {acc} {new}")
    for r, i in reversed(counters):
      self.lines += [f"write {r} {self.alu('iadd', i, self.imm(32, 1))}", "endloop"]
    for d in self.c.red_dims: del idx[d]
    return self.cast(self.emit(f"read {acc}"), acc_t, red.dtype)

  def combine(self, op: Ops, dt: DType, a: str, b: str) -> str:
    if op is Ops.ADD: return self.binary(Ops.ADD, dt, a, b)
    return self.binary(Ops.MAX if op is Ops.MAX else Ops.MIN, dt, a, b)

  # --- expressions
  def binary(self, op: Ops, dt: DType, a: str, b: str) -> str:
    f, s = dt.is_float, dt.kind == "i"
    if dt is dtypes.bool and op in (Ops.CMPLT, Ops.CMPLE, Ops.MAX, Ops.MIN, Ops.ADD, Ops.SUB, Ops.MUL):
      out = self.binary(op, dtypes.uint32, self.alu("b2i32", a), self.alu("b2i32", b))
      return out if op in (Ops.CMPLT, Ops.CMPLE) else self.alu("ine", out, self.imm(32, 0))
    if op in (Ops.MAX, Ops.MIN):
      if f:   # NaN propagates, like numpy: a if a > b or a != a else b
        gt = self.alu("flt", b, a) if op is Ops.MAX else self.alu("flt", a, b)
        return self.alu("bcsel", self.alu("ior", gt, self.alu("fneu", a, a)), a, b)
      return self.alu(("i" if s else "u") + ("max" if op is Ops.MAX else "min"), a, b)
    if op is Ops.CMPLT: return self.alu("flt" if f else "ilt" if s else "ult", a, b)
    if op is Ops.CMPLE: return self.alu("fge" if f else "ige" if s else "uge", b, a)
    if op is Ops.CMPEQ: return self.alu("feq" if f else "ieq", a, b)
    if op is Ops.CMPNE: return self.alu("fneu" if f else "ine", a, b)
    if op in (Ops.AND, Ops.OR, Ops.XOR): return self.wrap(self.alu({Ops.AND: "iand", Ops.OR: "ior", Ops.XOR: "ixor"}[op], a, b), dt)
    if op in (Ops.ADD, Ops.SUB, Ops.MUL):
      name = {Ops.ADD: "add", Ops.SUB: "sub", Ops.MUL: "mul"}[op]
      return self.alu("f" + name, a, b) if f else self.wrap(self.alu("i" + name, a, b), dt)
    if op is Ops.DIV:
      if not f: raise Unsupported(f"true division of {dt.name} values: the NIR renderer divides floats only")
      return self.alu("fdiv", a, b)
    if op in (Ops.IDIV, Ops.MOD): return self.wrap(self.intdiv(op, dt, a, b), dt)
    raise Unsupported(f"{op.name} of {dt.name} values is not rendered to NIR")

  def intdiv(self, op: Ops, dt: DType, a: str, b: str) -> str:
    """numpy's floor division and modulo, with x // 0 == x % 0 == 0."""
    zero = self.const(0, dt)
    bz = self.alu("ieq", b, zero)
    if dt.kind != "i":
      return self.alu("bcsel", bz, zero, self.alu("udiv" if op is Ops.IDIV else "umod", a, b))
    if op is Ops.MOD: return self.alu("bcsel", bz, zero, self.alu("imod", a, b))   # NIR imod: the divisor's sign (floor)
    q = self.alu("idiv", a, b)                                                   # truncating
    fix = self.alu("iand", self.alu("ine", self.alu("imul", q, b), a), self.alu("ine", self.alu("ilt", a, zero), self.alu("ilt", b, zero)))
    return self.alu("bcsel", bz, zero, self.alu("isub", q, self.cast(fix, dtypes.bool, dt)))

  def expr(self, n: KNode, idx: dict[int, str], memo: dict) -> str:
    if id(n) in memo: return memo[id(n)]
    check_dtype(n.dtype)
    if n.op is Ops.REDUCE: out = self.reduce_value
    elif n.op == "LOAD": out = self.load(n, idx)
    elif n.op in (Ops.CONST, Ops.ARANGE):
      i, conds = self.index(self.c.st[id(n)], idx)
      if n.op is Ops.CONST: v = self.const(n.arg[0], n.dtype)
      else:
        start, step = self.const(n.arg[0], n.dtype), self.const(n.arg[1], n.dtype)
        fi = self.cast(i, dtypes.int32, n.dtype)
        v = self.binary(Ops.ADD, n.dtype, start, self.binary(Ops.MUL, n.dtype, fi, step))
      ok = None
      for cnd in conds: ok = cnd if ok is None else self.alu("iand", ok, cnd)
      out = v if ok is None else self.alu("bcsel", ok, v, self.const(0, n.dtype))
    else:
      s = [self.expr(x, idx, memo) for x in n.srcs]
      sdt, dt = n.srcs[0].dtype, n.dtype
      if n.op is Ops.CAST: out = self.cast(s[0], sdt, dt)
      elif n.op is Ops.WHERE: out = self.alu("bcsel", *s)
      elif n.op is Ops.NOT: out = self.alu("inot", s[0]) if dt is dtypes.bool else self.alu("ieq", s[0], self.const(0, sdt))
      elif n.op is Ops.NEG and not dt.is_float: out = self.wrap(self.alu("ineg", s[0]), dt)
      elif n.op in (Ops.EXP, Ops.LOG, *_UNARY_F):
        if not dt.is_float: raise Unsupported(f"{n.op.name} of {dt.name} values is not rendered to NIR")
        x = s[0]
        if n.op is Ops.EXP: out = self.alu("fexp2", self.alu("fmul", x, self.const(LOG2E, dt)))
        elif n.op is Ops.LOG: out = self.alu("fmul", self.alu("flog2", x), self.const(LN2, dt))
        else: out = self.alu(_UNARY_F[n.op], x)
      else: out = self.binary(n.op, sdt, s[0], s[1])
    memo[id(n)] = out
    return out


class NIR(Dialect):
  """NIR, built through tinymesa's builders by the device's compiler (drivers/qcom/compiler.py) from NIRRenderer's text."""
  name = "nir"

  @classmethod
  def render(cls, k: Kernel, vector_registers: tuple[int, int] | None = None) -> Program: return NIRRenderer().render(k)
