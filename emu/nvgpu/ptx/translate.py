"""A PTX kernel to C: one function per basic block, each instruction a loop over the warp's 32 lanes under the block's
active mask (and the instruction's guard predicate).

Execution model (ISA "Machine Model", "Parallel Synchronization and Communication Instructions"): a warp's lanes
share a register file laid out lane-major per register, so each instruction's lane loop vectorises. Every lane has
its own pc (a basic-block index); the scheduler (c/rt.h) runs the block of the smallest pc over the lanes that are
there, so lanes split by a divergent branch run their paths one after another and reconverge where the paths meet
(code after an if/else or a loop sits at higher pcs). A `.sync` warp instruction (shfl, vote, match, redux,
bar.warp) checks that every non-exited lane in its membermask executes it together with the others; a lane still
elsewhere is an error (on hardware it is undefined or hangs). bar.sync / barrier.sync end a block: the lanes wait
until every non-exited thread of the block has arrived (the thread count operand and barrier ids other than 0 are
not distinguished); bar.red (.popc, .and, .or) also gives each waiting thread the block-wide reduction of the
arriving threads' predicates. bar.arrive is not modelled. membar / fence are no-ops: warps run one at a time, so memory is always coherent.

State spaces (ISA "State Spaces"): .global through the launch's memory object, .shared per block (kernel and
module variables, then the dynamic `.extern .shared` array), .local per thread, .param read-only; generic
addresses map the shared and local windows (cvta) and everything else to global. Every access must be naturally
aligned; a misaligned or unmapped one stops the launch with the instruction that made it.
"""
from __future__ import annotations
from emu.nvgpu.ptx import alu
from emu.nvgpu.ptx.alu import CT, FLOAT, split
from emu.nvgpu.ptx.parse import PtxError, Kernel, Module, Inst, Op, TYPES

SPACES = {"global": "SP_GLOBAL", "shared": "SP_SHARED", "shared::cta": "SP_SHARED", "local": "SP_LOCAL",
          "param": "SP_PARAM", "param::entry": "SP_PARAM"}
# modifiers of memory instructions that only steer caches, ordering or scope: no effect on a sequential model
MEMORY_HINTS = {"ca", "cg", "cs", "lu", "cv", "nc", "wb", "wt", "volatile", "relaxed", "acquire", "release", "weak",
                "sc", "acq_rel", "cta", "gpu", "sys", "mmio"}
SREGS = {"%laneid": "(u32)l", "%warpid": "w->id", "%nwarpid": "w->d->nwarps", "%smid": "0u", "%nsmid": "1u",
         "%gridid": "0u", "%clock": "(u32)w->d->instructions", "%clock64": "w->d->instructions",
         "%globaltimer": "w->d->instructions", "%lanemask_eq": "(1u << l)", "%lanemask_lt": "((1u << l) - 1)",
         "%lanemask_le": "((2u << l) - 1)", "%lanemask_gt": "~((2u << l) - 1)", "%lanemask_ge": "~((1u << l) - 1)",
         "%dynamic_smem_size": "(w->d->shared_bytes - STATIC_SHARED)", "%total_smem_size": "w->d->shared_bytes"}
ATOM_OPS = {"add", "min", "max", "inc", "dec", "exch", "cas", "and", "or", "xor"}
GLOBAL_WINDOW = 0x7E00_0000_0000   # global address of the module-level .global variables (no launch buffer lives there)


class Translator:
  """C source for one kernel, with the layout the launcher needs (register, shared, local and param bytes)."""

  def __init__(self, module: Module, kernel: Kernel):
    self.m, self.k = module, kernel
    self.insts: list[Inst] = [i for i in kernel.body if isinstance(i, Inst)]
    self.index = {id(i): n for n, i in enumerate(self.insts)}
    self.regs: dict[str, tuple[int, int]] = {}        # name -> (byte offset in a warp's registers, size)
    off = 0
    for name, t in kernel.regs.items():
      size = TYPES[t]
      off = (off + size * 32 - 1) // (size * 32) * (size * 32)
      self.regs[name] = (off, size)
      off += size * 32
    self.reg_bytes = (off + 63) // 64 * 64
    self.shared: dict[str, int] = {}
    self.local: dict[str, int] = {}
    soff = loff = 0
    for v in [*module.vars, *kernel.vars]:
      if v.space == "shared":
        soff = (soff + v.align - 1) // v.align * v.align; self.shared[v.name] = soff; soff += v.size
      elif v.space == "local":
        loff = (loff + v.align - 1) // v.align * v.align; self.local[v.name] = loff; loff += v.size
    soff = (soff + 15) // 16 * 16
    for name in module.extern_shared: self.shared[name] = soff
    self.static_shared, self.local_bytes = soff, (loff + 15) // 16 * 16
    self.params = {p.name: p for p in kernel.params}
    # module-level .global variables: one image, at GLOBAL_WINDOW in the global space (launch.py gives each Program a copy)
    self.globals: dict[str, int] = {}
    self.global_image = bytearray()
    for v in module.vars:
      if v.space != "global": continue
      goff = (len(self.global_image) + v.align - 1) // v.align * v.align
      self.globals[v.name] = goff
      self.global_image += bytes(goff - len(self.global_image)) + v.init + bytes(v.size - len(v.init))
    self.consts = {v.name for v in module.vars if v.space == "const"}

  # ---- errors ----
  def unknown(self, inst: Inst, what: str) -> None:
    raise PtxError(f"kernel {self.k.name}, line {inst.line}: {what} is not supported by the PTX engine (in `{inst.text}`)")

  # ---- operands, for lane l ----
  def reg(self, o: Op, inst: Inst) -> tuple[int, int]:
    if o.v not in self.regs: raise PtxError(f"kernel {self.k.name}, line {inst.line}: register {o.v} is not declared")
    return self.regs[o.v]

  def rd(self, o: Op, t: str) -> str:
    inst = self.cur
    ct = CT[t]
    if o.kind == "reg":
      off, size = self.reg(o, inst)
      if t == "pred" or TYPES[t] == size: return f"R({ct}, {off})[l]"
      if t in FLOAT or t in alu.HALF: self.unknown(inst, f"a .{t} operand in the {size * 8}-bit register {o.v}")
      return f"(({ct})R({alu.uns('u' + str(size * 8))}, {off})[l])"
    if o.kind == "imm":
      if t in FLOAT: return f"(({ct}){o.v})"
      return f"(({ct}){o.v & ((1 << 64) - 1):#x}ull)"
    if o.kind == "fimm":
      v, width = o.v
      f = f"uf({v:#x}u)" if width == 32 else f"ud({v:#x}ull)"
      return f"(({ct}){f})" if t in FLOAT else f"(({ct}){v:#x}ull)"
    if o.kind == "not": return f"(!{self.rd(o.v, 'pred')})"
    if o.kind == "sreg":
      name, _, dim = o.v.partition(".")
      axis = "xyz".index(dim) if dim else 0
      ex = {"%tid": f"w->tid[{axis}][l]", "%ntid": f"w->d->block[{axis}]", "%ctaid": f"w->d->ctaid[{axis}]",
            "%nctaid": f"w->d->grid[{axis}]"}.get(name) or SREGS[o.v]
      return f"(({ct}){ex})"
    if o.kind == "sym": return f"(({ct}){self.sym_addr(o.v, inst)}ull)"
    self.unknown(inst, f"the operand kind {o.kind}")

  def sym_addr(self, name: str, inst: Inst) -> int:
    """A variable's address in its own state space (ISA "Variables": the name of a variable is its address)."""
    if name in self.shared: return self.shared[name]
    if name in self.local: return self.local[name]
    if name in self.params: return self.params[name].offset
    if name in self.globals: return GLOBAL_WINDOW + self.globals[name]
    if name in self.consts: self.unknown(inst, f"the module-level .const variable {name}")
    raise PtxError(f"kernel {self.k.name}, line {inst.line}: unknown symbol {name} (in `{inst.text}`)")

  def wr(self, o: Op, t: str, val: str) -> str:
    """Write `val` (a value of type t) to the destination for lane l when the lane is on."""
    if o.kind == "sink": return ""
    if o.kind != "reg": self.unknown(self.cur, f"a destination of kind {o.kind}")
    off, size = self.reg(o, self.cur)
    if t == "pred" or TYPES[t] == size:
      p = f"R({CT[t]}, {off})[l]"
      return f"{p} = on ? ({CT[t]})({val}) : {p};"
    if t in FLOAT or t in alu.HALF or TYPES[t] > size:
      self.unknown(self.cur, f"a .{t} result in the {size * 8}-bit register {o.v}")
    st = alu.uns("u" + str(size * 8))
    ext = alu.sgn(t) if alu.signed(t) else CT[t]
    p = f"R({st}, {off})[l]"
    return f"{p} = on ? ({st})({ext})({val}) : {p};"

  def loop(self, body: str) -> str:
    return f"for (int l = 0; l < LANES; l++) {{ const int on = {self.on}; {body} }}"

  # ---- source ----
  def blocks(self) -> list[list[Inst]]:
    """Basic blocks: they start at labels and after branches, exits, barriers and traps."""
    out: list[list[Inst]] = [[]]
    self.labels: dict[str, int] = {}
    for item in self.k.body:
      if isinstance(item, str):
        if out[-1]: out.append([])
        self.labels[item] = len(out) - 1
        continue
      out[-1].append(item)
      if item.op in ("bra", "ret", "exit", "bar", "barrier", "trap", "brkpt"): out.append([])
    if out[-1]: out.append([])     # the last block is empty: lanes that reach it exit
    return out

  def source(self) -> str:
    blocks = self.blocks()
    fns = []
    for n, insts in enumerate(blocks):
      body = [f"w->d->instructions += (u64)__builtin_popcount(M) * {len(insts)};"]
      ended = False
      for inst in insts:
        self.cur = inst
        body.append(f"/* {inst.line}: {inst.text.replace('*/', '* /')} */")
        code, ended = self.inst(inst, n, len(blocks))
        body.append(code)
      if not ended: body.append(self.goto(n + 1, len(blocks)))
      fns.append(f"static void b_{n}(warp_t *w, u32 M) {{\n  " + "\n  ".join(body) + "\n}")
    table = ", ".join(f"b_{n}" for n in range(len(blocks)))
    return "\n".join([f"#define STATIC_SHARED {self.static_shared}u", *fns,
                      f"static const block_fn BLOCKS[] = {{{table}}};"])

  def goto(self, target: int, nblocks: int) -> str:
    if target >= nblocks: return "w->live &= ~M; return;"    # falling off the end of the kernel ends the threads
    return f"for (int l = 0; l < LANES; l++) if (ON(l)) w->pc[l] = {target}u; return;"

  @property
  def on(self) -> str:
    i = self.cur
    if i.pred is None: return "ON(l)"
    if i.pred not in self.regs: raise PtxError(f"kernel {self.k.name}, line {i.line}: register {i.pred} is not declared")
    return f"(ON(l) && {'!' if i.neg else ''}R(u8, {self.regs[i.pred][0]})[l])"

  def inst(self, inst: Inst, n: int, nblocks: int) -> tuple[str, bool]:
    """(C for the instruction, whether it ends the block)."""
    op, idx = inst.op, self.index[id(inst)]
    if op == "bra":
      split(inst, {"uni"}, self)
      t = inst.args[0]
      if t.kind != "sym" or t.v not in self.labels: self.unknown(inst, f"the branch target {t.v}")
      return f"for (int l = 0; l < LANES; l++) if (ON(l)) w->pc[l] = {self.on} ? {self.labels[t.v]}u : {n + 1}u; return;", True
    if op in ("ret", "exit"):
      split(inst, {"uni"}, self)
      if inst.pred is None: return "w->live &= ~M; return;", True
      return f"w->live &= ~{self.mask_expr()};\n  {self.goto(n + 1, nblocks)}", True
    if op in ("bar", "barrier"):
      _, mods = split(inst, {"sync", "aligned", "warp", "cta", "red", "popc", "and", "or"}, self)
      if "warp" in mods:
        return self.warp_sync(inst, idx), False
      if inst.pred: self.unknown(inst, "a predicated barrier")
      if "red" in mods:      # bar.red.popc.u32 d, a{, b}, {!}c / bar.red.and|or.pred d, a{, b}, {!}c
        kind = [k for k in ("popc", "and", "or") if k in mods]
        d = inst.args[0]
        if len(kind) != 1 or d.kind != "reg": self.unknown(inst, f"{op}.{'.'.join(inst.mods)}")
        bits = f"u32 p_ = 0; for (int l = 0; l < LANES; l++) p_ |= (u32)({self.rd(inst.args[-1], 'pred')} != 0) << l;"
        red = f"bar_red(w, M, p_, RED_{kind[0].upper()}, {self.reg(d, inst)[0]});"
        return f"{{ {bits} {red} }}\n  {self.goto(n + 1, nblocks)}", True
      if "sync" not in mods: self.unknown(inst, f"{op}.{'.'.join(inst.mods)}")
      return f"w->bar |= M;\n  {self.goto(n + 1, nblocks)}", True
    if op in ("trap", "brkpt"):
      return f"w->d->stop = STOP_TRAP; w->d->stop_warp = w->id; w->d->stop_inst = {idx}; return;", True
    if op in ("membar", "fence", "nanosleep", "prefetch", "prefetchu"): return f"/* {op}: no effect in this model */", False
    if op in ("ld", "ldu", "st"): return self.ldst(inst, idx), False
    if op in ("atom", "red"): return self.atom(inst, idx), False
    if op == "mov": return self.mov(inst), False
    if op == "cvta": return self.cvta(inst), False
    if op == "isspacep": return self.isspacep(inst), False
    if op in ("shfl", "vote", "activemask", "redux", "match"): return self.warp_op(inst, idx), False
    if op in alu.GEN: return alu.GEN[op](self, inst), False
    self.unknown(inst, f"the instruction {op!r}")

  def mask_expr(self) -> str:
    """The lanes of M for which the current instruction's guard holds."""
    if self.cur.pred is None: return "M"
    off = self.regs[self.cur.pred][0]
    return f"pmask(w, M, {off}, {int(self.cur.neg)})"

  # ---- data movement ----
  def mov(self, inst: Inst) -> str:
    types, _ = split(inst, set(), self)
    t = types[-1]
    d, a = inst.args
    if d.kind == "vec" or a.kind == "vec":       # pack / unpack: {lo, ..., hi}
      parts = d.v if d.kind == "vec" else a.v
      w = TYPES[t] * 8 // len(parts)
      et = {8: "b8", 16: "b16", 32: "b32"}[w]
      if a.kind == "vec":
        ex = " | ".join(f"(({CT[t]}){self.rd(p, et)} << {i * w})" for i, p in enumerate(parts))
        return self.loop(self.wr(d, t, ex))
      src = self.rd(a, t)
      return self.loop(" ".join(self.wr(p, et, f"({CT[et]})({src} >> {i * w})") for i, p in enumerate(parts)))
    return self.loop(self.wr(d, t, self.rd(a, t)))

  def cvta(self, inst: Inst) -> str:
    types, mods = split(inst, {"to", "global", "shared", "local", "const", "param"}, self)
    t = types[-1]
    sp = [m for m in mods if m != "to"][0]
    a = self.rd(inst.args[1], t)
    if sp == "global": ex = a
    elif sp in ("shared", "local"):
      win = f"w->d->{sp}_window"
      ex = f"{a} - {win}" if "to" in mods else f"{a} + {win}"
    else: self.unknown(inst, f"cvta of the .{sp} space")
    return self.loop(self.wr(inst.args[0], t, ex))

  def isspacep(self, inst: Inst) -> str:
    _, mods = split(inst, {"global", "shared", "local"}, self)
    a = self.rd(inst.args[1], "u64")
    sh, lo = f"({a} - w->d->shared_window < w->d->shared_bytes)", f"({a} - w->d->local_window < w->d->local_bytes)"
    ex = sh if "shared" in mods else lo if "local" in mods else f"!{sh} && !{lo}"
    return self.loop(self.wr(inst.args[0], "pred", ex))

  def address(self, o: Op) -> str:
    if o.kind != "mem": self.unknown(self.cur, "an address operand that is not [reg+offset]")
    base = "0" if o.v is None else self.rd(o.v, "u64")
    return f"({base} + (u64){o.off & ((1 << 64) - 1):#x}ull)"

  def space(self, mods: set[str]) -> str:
    sp = [m for m in mods if m in SPACES or m in ("const", "shared::cluster")]
    if not sp: return "SP_GENERIC"
    if sp[0] not in SPACES: self.unknown(self.cur, f"the .{sp[0]} state space")
    return SPACES[sp[0]]

  def ldst(self, inst: Inst, idx: int) -> str:
    hints = {m for m in inst.mods if m.startswith(("L1::", "L2::"))}
    if "L2::cache_hint" in hints: self.unknown(inst, ".L2::cache_hint")
    types, mods = split(inst, set(SPACES) | MEMORY_HINTS | hints | {"const", "shared::cluster", "v2", "v4", "v8"}, self)
    t = types[-1]
    sp, wr = self.space(mods), inst.op == "st"
    ptr, val = (inst.args[0], inst.args[1]) if wr else (inst.args[1], inst.args[0])
    regs = val.v if val.kind == "vec" else [val]
    n = TYPES[t]
    if "v2" in mods or "v4" in mods or "v8" in mods:
      want = 2 if "v2" in mods else 4 if "v4" in mods else 8
      if val.kind != "vec" or len(regs) != want: self.unknown(inst, "a vector access whose register list does not match")
    total = n * len(regs)
    ct = CT[t]
    lines = [f"u64 a_ = {self.address(ptr)};", f"u8 *p_ = addr(w, l, {sp}, a_, {total}, {int(wr)}, {idx});",
             "if (!p_) return;"]
    for i, r in enumerate(regs):
      if wr:
        src = self.rd(r, t) if r.kind != "sink" else "0"
        lines.append(f"{{ {ct} v_ = {src}; memcpy(p_ + {i * n}, &v_, {n}); }}")
      elif r.kind != "sink":
        lines.append(f"{{ {ct} v_; memcpy(&v_, p_ + {i * n}, {n}); {self.wr(r, t, 'v_')} }}")
    return f"for (int l = 0; l < LANES; l++) {{ const int on = {self.on}; if (!on) continue; " + " ".join(lines) + " }"

  def atom(self, inst: Inst, idx: int) -> str:
    types, mods = split(inst, set(SPACES) | MEMORY_HINTS | ATOM_OPS | {"noftz"}, self)
    t = types[-1]
    op = [m for m in mods if m in ATOM_OPS]
    if len(op) != 1: self.unknown(inst, f"atomic operation {'.'.join(inst.mods)}")
    op, sp, ct, n = op[0], self.space(mods), CT[t], TYPES[t]
    if t in alu.HALF or t not in ("b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64"): self.unknown(inst, f"{inst.op}.{op}.{t}")
    red = inst.op == "red"
    A = inst.args
    ptr, b = (A[0], A[1]) if red else (A[1], A[2])
    bv = self.rd(b, t)
    if t in FLOAT:
      if op not in ("add", "exch", "cas", "min", "max"): self.unknown(inst, f"{inst.op}.{op}.{t}")
    new = {"add": f"old + {bv}", "min": f"(old < {bv} ? old : {bv})", "max": f"(old > {bv} ? old : {bv})",
           "inc": f"(old >= {bv} ? 0 : old + 1)", "dec": f"((old == 0 || old > {bv}) ? {bv} : old - 1)",
           "exch": bv, "and": f"old & {bv}", "or": f"old | {bv}", "xor": f"old ^ {bv}"}.get(op)
    if t == "f32" and op == "add": new = f"ftz32(ftz32(old) + ftz32({bv}))"   # atom.add.f32 flushes subnormals
    if t in FLOAT and op in ("min", "max"): new = f"{op}{n * 8}(old, {bv}, 0)"
    if op == "cas": new = f"(old == {bv} ? {self.rd(A[3], t)} : old)"
    if op in ("inc", "dec") and t != "u32": self.unknown(inst, f"{inst.op}.{op}.{t}")
    store = "" if red else self.wr(A[0], t, "old")
    return (f"for (int l = 0; l < LANES; l++) {{ const int on = {self.on}; if (!on) continue; "
            f"u64 a_ = {self.address(ptr)}; u8 *p_ = addr(w, l, {sp}, a_, {n}, 1, {idx}); if (!p_) return; "
            f"{ct} old; memcpy(&old, p_, {n}); {{ {ct} new_ = {new}; memcpy(p_, &new_, {n}); }} {store} }}")

  # ---- warp-level ----
  def lanes_of(self, name: str, o: Op, t: str = "u32") -> str:
    return f"{CT[t]} {name}[LANES]; for (int l = 0; l < LANES; l++) {name}[l] = {self.rd(o, t)};"

  def active(self) -> str:
    return f"u32 m_ = 0; for (int l = 0; l < LANES; l++) m_ |= (u32)({self.on} != 0) << l;"

  def warp_sync(self, inst: Inst, idx: int) -> str:
    return "{ " + self.active() + " " + self.lanes_of("mm_", inst.args[0]) + f" if (!check_members(w, m_, mm_, {idx})) return; }}"

  def warp_op(self, inst: Inst, idx: int) -> str:
    op, A = inst.op, inst.args
    if op == "activemask":
      split(inst, set(), self)
      return "{ " + self.active() + " " + self.loop(self.wr(A[0], "b32", "m_")) + " }"
    if op == "shfl":
      modes = ["up", "down", "bfly", "idx"]
      types, mods = split(inst, {"sync", *modes}, self)
      if "sync" not in mods: self.unknown(inst, "shfl without .sync (removed for sm_70+)")
      mode = modes.index([m for m in mods if m in modes][0])
      d, p = (A[0].v if A[0].kind == "pair" else [A[0], Op("sink")])
      code = [self.active(), self.lanes_of("a_", A[1]), self.lanes_of("b_", A[2]), self.lanes_of("c_", A[3]),
              self.lanes_of("mm_", A[4]), f"if (!check_members(w, m_, mm_, {idx})) return;",
              "u32 d_[LANES]; u8 p_[LANES];", f"shfl(m_, {mode}, a_, b_, c_, d_, p_);",
              self.loop(self.wr(d, "b32", "d_[l]") + " " + self.wr(p, "pred", "p_[l]"))]
      return "{ " + "\n  ".join(code) + " }"
    if op in ("vote", "redux", "match"):
      kinds = {"vote": ["all", "any", "uni", "ballot"], "redux": ["add", "min", "max", "and", "or", "xor"],
               "match": ["any", "all"]}[op]
      types, mods = split(inst, {"sync", *kinds}, self)
      kind = [m for m in inst.mods if m in kinds][0]
      t = types[-1] if types else "pred"
      mm = A[-1] if "sync" in mods else Op("imm", 0xffffffff)
      code = [self.active(), self.lanes_of("mm_", mm)]
      if "sync" in mods: code.append(f"if (!check_members(w, m_, mm_, {idx})) return;")
      if op == "vote":
        code += [self.lanes_of("a_", A[1], "pred"), "u32 b_ = 0; for (int l = 0; l < LANES; l++) b_ |= (u32)(((m_ >> l) & 1) && a_[l]) << l;"]
        ex = {"ballot": "b_ & mm_[l]", "any": "(b_ & mm_[l]) != 0", "all": "(b_ & mm_[l]) == (m_ & mm_[l])",
              "uni": "((b_ & mm_[l]) == 0 || (b_ & mm_[l]) == (m_ & mm_[l]))"}[kind]
        code.append(self.loop(self.wr(A[0], "b32" if kind == "ballot" else "pred", ex)))
      elif op == "redux":
        code.append(self.lanes_of("a_", A[1], t))
        f = {"add": "r + v", "min": "(v < r ? v : r)", "max": "(v > r ? v : r)", "and": "r & v", "or": "r | v", "xor": "r ^ v"}[kind]
        init = {"add": "0", "or": "0", "xor": "0", "and": "~0u"}.get(kind, "a_[l]")
        code.append(self.loop(f"{CT[t]} r = {init}; for (int j = 0; j < LANES; j++) if ((m_ & mm_[l]) >> j & 1) {{ {CT[t]} v = a_[j]; r = {f}; }} "
                              f"{self.wr(A[0], t, 'r')}"))
      else:
        code.append(self.lanes_of("a_", A[1], t))
        d, p = (A[0].v if A[0].kind == "pair" else [A[0], Op("sink")])
        same = "u32 s = 0; for (int j = 0; j < LANES; j++) if ((m_ & mm_[l]) >> j & 1 && a_[j] == a_[l]) s |= 1u << j;"
        if kind == "any": code.append(self.loop(same + " " + self.wr(d, "b32", "s")))
        else: code.append(self.loop(same + " int all = s == (m_ & mm_[l]); " + self.wr(d, "b32", "all ? s : 0") + " " + self.wr(p, "pred", "all")))
      return "{ " + "\n  ".join(code) + " }"
    self.unknown(inst, f"the instruction {op!r}")
