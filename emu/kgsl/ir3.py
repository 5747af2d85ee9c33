"""An a6xx shader core for compute: the ir3 instructions mesa's compiler emits for compute.nir kernels, run on every
invocation of a dispatch at once (numpy arrays over lanes), with the hazards the hardware leaves to the compiler checked.

Encodings (mesa src/freedreno/isa/ir3-common.xml, ir3-cat0.xml .. ir3-cat6.xml; what mesa 25 added checked against
tinymesa's disasm_a3xx): the category is bits 63:61; SY 60, JP 59, SS 44 (cat0-cat4). A register field is GPR << 2 |
component (r0.x .. r47.w, the shared r48 .. r55 at 0xc0, a0.x 0xf4, p0.x .. p0.w 0xf8 .. 0xfb). Half registers are merged with the full
ones (SP_CS_CTRL_REG0.MERGEDREGS; a6xx.xml: hr(2n), hr(2n+1) overlap rn): half component k is the low (k even) or high
half of full component k // 2. cat2/cat3 reuse SRC1_R/SRC2_R as a (nopN) count when REPEAT is 0
(#cat2-cat3-nop-encoding); with (rptN) they mark the sources that step with the destination.
  cat0  nop ((rptN): N+1 cycles), end, br / brao / braa (BRTYPE 39:37: a second p0 component ORed / ANDed) / jump
        (IMMED: a signed offset from the branch's own address), predt / predf /
        prede (OPC_HI bit 49: lanes run the instructions between predt and prede only where the p0 component holds / does not), and
        the preamble: shps (it runs: the core is one dispatch), getone (one lane goes on, the rest branch), shpe;
  cat1  mov / cov between the eight types (SRC_TYPE 52:50, DST_TYPE 48:46) from a GPR (form 00), const (01) or 32-bit
        immediate (10); float -> int truncates, int -> float and f32 -> f16 round to nearest even; swz (a two-register
        parallel move, issued as a (rpt1));
  cat2  the float ops (.f: half when FULL is clear), integer ops (32 or 16 bits), cmps (COND 50:48) to a register
        (1 / 0) or p0.x, shifts (by the amount modulo 32: NIR's ishl/ishr/ushr are defined so and ir3_compiler_nir.c
        emits them as shl.b/ashr.b/shr.b), mull.u (the low 16 bits of each source multiplied) and mul.u24/s24;
        (sat) on add/sub (clamped to the type) and add.f/mul.f (to [0, 1]); sources: GPR, const (13:11 = x10), signed
        11-bit immediate (100), float table (101: #flut); ABSNEG (15:14) abs / neg of floats, negation / abs of .s and
        .u sources, not of .b sources; a half float instruction reads a const's float32 as float16; a float result
        whose destination precision differs (DST_CONV) is converted to it (round to nearest even);
  cat3  mad.f32/f16 (the product rounded, then the sum), mad.u24/s24, mad.u16/s16, madsh.m16 (src3 + ((src1 & 0xffff) *
        (src2 >> 16) << 16): ir3_compiler_nir.c builds imul as mull.u + two madsh.m16 with the sources swapped, which
        cannot tell the halves apart; the constant-divisor high products of nir_opt_idiv_const can, and come out as
        numpy's only this way), sel.* (src2 != 0 ? src1 : src3); with bit 13 set mesa 25's shift-and-mask forms
        shrm/shlm/shrg/shlg/andg (FULL in bit 42, a 12-bit immediate where the classic form has a const);
  cat4  rcp rsq log2 exp2 sin cos sqrt (float32 arithmetic of numpy; half when FULL is clear);
  cat6  ldg / stg of 1..4 components of u8 s8 u16 s16 (half registers) or 32-bit types at a 64-bit address held in a
        register pair plus a signed 13-bit immediate offset; stc (the preamble's store of registers to the const file).
Control flow: every lane has its own pc; each step runs the instruction at the smallest pc among the lanes not done, for
the lanes at it (so divergent paths run one after the other and join where the pcs meet, as (jp) marks).
Hazards, with the generation's delay constants (mesa ir3_compiler.c: a6xx alu->alu 3, alu->non-alu 6, a cat3 src2 read
2 later (mad and madsh only); a7xx 2 / 5 / 1) counted in cycles as ir3_delay.c counts them (count_instruction, distance:
one an ALU or flow instruction other than br/jump, plus its (nopN) and (rptN); cat4-cat6 take none), per 16-bit half
of the register file: a source read fewer cycles after the ALU (cat1-cat3) instruction that wrote it than the rule
needs; a register written by an (ss) producer (cat4 SFU, shared-register destinations: ir3.h is_ss_producer) or a (sy)
producer (global loads: is_sy_producer) read before an instruction with that flag; a const stc wrote read before (ss);
a register an earlier SFU, store or stc may still read written before (ss), or a global load's address before (ss) or
(sy) (ir3_legalize.c needs_ss_war); shpe without (ss)(sy) -- each raises HazardError naming the rule and the pc.
Everything else (other instructions, relative and a0 addressing, (ul), REPEAT on cat1/cat4, cat5, cat7, a7xx) raises
IR3Error naming it.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from typing import Callable
import numpy as np
from autogen.ir3.tables import OPS

SHARED_LO, SHARED_HI = 0xC0, 0xE0                # r48.x .. r55.w: one value a wave
A0, P0 = 0xF4, 0xF8
REGS = 0xE0                                      # full components the file holds (GPRs and shared)
TYPES = ("f16", "f32", "u16", "u32", "s16", "s32", "u8", "s8")
HALF_TYPES = {0, 2, 4, 6, 7}
FLUT = (0.0, 0.5, 1.0, 2.0, math.e, math.pi, 1 / math.pi, 1 / math.log2(math.e), math.log2(math.e), 1 / math.log2(10),
        math.log2(10), 4.0)
CONDS = ("lt", "le", "gt", "ge", "eq", "ne")
MAX_STEPS = 50_000_000


class IR3Error(Exception):
  """An instruction or field the core does not model, named with its pc."""


class HazardError(IR3Error):
  """Code that reads or writes a register before the hardware has it: the rule and the pc."""


@dataclass(frozen=True)
class Delays:
  alu_to_alu: int
  non_alu: int
  cat3_src2: int


DELAYS = {6: Delays(3, 6, 2), 7: Delays(2, 5, 1)}


def bits(v: int, hi: int, lo: int) -> int: return v >> lo & ((1 << (hi - lo + 1)) - 1)


def sext(v: int, n: int) -> int: return v - (1 << n) if v >> (n - 1) & 1 else v


def regname(r: int, half: bool = False) -> str:
  if P0 <= r < P0 + 4: return f"p0.{'xyzw'[r - P0]}"
  if A0 <= r < A0 + 4: return f"a0.{'xyzw'[r & 3]}"
  return f"{'h' if half else ''}r{r >> 2}.{'xyzw'[r & 3]}"


def slotname(s: int) -> str:
  """A 16-bit half of the register file (as the hazard checks track them), by the register holding it."""
  return regname(s // 2) if s >= 2 * P0 else f"{regname(s // 2)} ({'low' if s % 2 == 0 else 'high'} half)"


def name_of(w: int) -> str:
  cat = w >> 61
  if cat == 0: return {0: "nop", 1: "br", 2: "jump", 6: "end"}.get(bits(w, 58, 55), "cat0") if not bits(w, 49, 49) else \
    {0x5: "getone", 0x7: "shps", 0x8: "shpe", 0xD: "predt", 0xE: "predf", 0xF: "prede"}.get(bits(w, 58, 55), "cat0")
  opc = {1: bits(w, 58, 57), 2: bits(w, 58, 53), 3: bits(w, 58, 55), 4: bits(w, 58, 53), 5: bits(w, 58, 54), 6: bits(w, 58, 54),
         7: bits(w, 58, 55)}[cat]
  if cat == 3 and bits(w, 13, 13): return _CAT3_ALT.get(opc, f"cat3 alternate opcode {opc:#x}")
  e = OPS[cat].get(opc)
  return e[0] if e else f"cat{cat} opcode {opc:#x}"


def syntax(w: int) -> str:
  """The instruction's sync/nop/repeat flags, mnemonic and first operand as mesa's disassembler prints them (the decode
  the core acts on, for cross-checking against disasm_a3xx)."""
  cat, name = w >> 61, name_of(w)
  flags = "".join(f for f, b in (("(sy)", 60), ("(ss)", 44), ("(jp)", 59)) if bits(w, b, b) and (b != 44 or cat <= 4))
  if cat == 0:
    if name == "nop" and bits(w, 42, 40): return f"{flags}(rpt{bits(w, 42, 40)}){name}"
    if name == "br":
      first = f"{'!' if bits(w, 52, 52) else ''}p0.{'xyzw'[bits(w, 54, 53)]}"
      if bits(w, 39, 37) in (1, 2): return f"{flags}{('brao', 'braa')[bits(w, 39, 37) - 1]} {first}"
      return f"{flags}{name} {first}"
    return flags + name
  nops = ""
  if cat in (2, 3):
    r2 = bits(w, 51, 51) if cat == 2 else bits(w, 15, 15)
    if (bits(w, 43, 43) or r2) and not bits(w, 41, 40): nops = f"(nop{bits(w, 43, 43) | r2 << 1}) "
    elif bits(w, 41, 40): nops = f"(rpt{bits(w, 41, 40)})"
    if bits(w, 42, 42) and (cat == 2 or not bits(w, 13, 13)): nops = "(sat)" + nops
  if cat == 1:
    st, dt = bits(w, 52, 50), bits(w, 48, 46)
    op = "swz" if bits(w, 58, 57) == 2 else "mov" if st == dt else "cov"
    rpt = f"(rpt{bits(w, 41, 40)})" if bits(w, 41, 40) and op != "swz" else ""
    return f"{flags}{rpt}{op}.{TYPES[st]}{TYPES[dt]} {regname(bits(w, 39, 32), dt in HALF_TYPES)}"
  if cat == 6:
    typ = TYPES[bits(w, 51, 49)]
    if bits(w, 58, 54) == 3: return f"{flags}stg.{typ} g[{regname(bits(w, 48, 41))}]"
    if bits(w, 58, 54) == 0x1C: return f"{flags}stc.{typ} c[{bits(w, 39, 32)}]"
    return f"{flags}{name.split('.')[0]}.{typ} {regname(bits(w, 39, 32), bits(w, 51, 49) in HALF_TYPES)}"
  dst = bits(w, 39, 32)
  full = bool(bits(w, 52, 52)) if cat in (2, 4) else bool(bits(w, 42, 42)) if bits(w, 13, 13) else \
    not name.endswith("16") or name.startswith("madsh")
  if cat == 2 and OPS[2][bits(w, 58, 53)][2]: name += "." + CONDS[bits(w, 50, 48)] if bits(w, 50, 48) < len(CONDS) else ".?"
  return f"{flags}{nops}{name} {regname(dst, full == bool(bits(w, 46, 46)) and dst < P0)}"


class Core:
  """`lanes` invocations with their register files; `consts` the const file (uint32 words); `mem(va, n, write)` a
  memoryview of global memory (raising for an address the context has not mapped, or a write to read-only memory)."""
  def __init__(self, gen: int, lanes: int, consts: np.ndarray, mem: Callable[[int, int, bool], memoryview]):
    if gen not in DELAYS: raise IR3Error(f"no ir3 core for a{gen}xx")
    if gen != 6: raise IR3Error("the core models a6xx (a7xx adds scalar ALU, (last) and lock/unlock, which it does not model)")
    self.gen, self.d, self.n = gen, DELAYS[gen], lanes
    self.h = np.zeros((lanes, 2 * REGS), np.uint16)       # the merged register file: full component i = h[:, 2i:2i+2]
    self.f = self.h.view(np.uint32)                        # full components
    self.p = np.zeros((lanes, 4), bool)                   # p0.x .. p0.w
    self.consts, self.mem = consts, mem
    self.steps, self.footprint = 0, SHARED_LO // 4
    # hazard state: the cycle now; per full component, the cycle an ALU instruction wrote it; (ss)/(sy) sets
    self.t = 0
    self.alu_write: dict[int, int] = {}
    self.pending = {"ss": set(), "sy": set()}              # components an unsynced producer writes
    self.pending_consts: set[int] = set()                  # const components stc wrote, readable after (ss)
    # components an unsynced producer may still read: (ss) ends the reads of SFU, store and stc sources, and also those of
    # global loads, whose reads (sy) ends too (the load's result has arrived); "ss/sy" holds the latter
    self.reading = {"ss": set(), "sy": set(), "ss/sy": set()}

  # --- registers
  def comp(self, r: int, half: bool) -> tuple[int, ...]:
    """The 16-bit halves of the register file a register field names (a full component both of its own), within the
    register footprint: what the hazard checks track."""
    if P0 <= r < P0 + 4: return (2 * r,)
    c = (r // 2 if r < SHARED_LO else SHARED_LO + (r - SHARED_LO) // 2) if half else r
    if c >= REGS: raise IR3Error(f"register {regname(r, half)} ({r:#x}) is not modelled")
    if c < SHARED_LO and c >> 2 >= self.footprint:
      raise IR3Error(f"register {regname(r, half)} lies beyond the full register footprint ({self.footprint} vec4s: "
                     "SP_CS_CTRL_REG0.FULLREGFOOTPRINT)")
    return (r if r < SHARED_LO else 2 * c + (r & 1),) if half else (2 * c, 2 * c + 1)

  def read(self, r: int, half: bool) -> np.ndarray:
    """The lanes' values of a register as uint32 (a half register zero-extended)."""
    if P0 <= r < P0 + 4: return self.p[:, r - P0].astype(np.uint32)
    if half:
      if r >= SHARED_LO: raise IR3Error(f"half shared register {regname(r, True)} is not modelled")
      return self.h[:, r].astype(np.uint32)
    if r >= REGS: raise IR3Error(f"register {regname(r)} ({r:#x}) is not modelled")
    return self.f[:, r].copy()

  def write(self, r: int, half: bool, v: np.ndarray, m: np.ndarray) -> None:
    if P0 <= r < P0 + 4: self.p[m, r - P0] = (v & 1).astype(bool)[m]; return
    if half:
      if r >= SHARED_LO: raise IR3Error(f"half shared register {regname(r, True)} is not modelled")
      self.h[m, r] = v[m].astype(np.uint16)
    else:
      if r >= REGS: raise IR3Error(f"register {regname(r)} ({r:#x}) is not modelled")
      self.f[m, r] = v[m].astype(np.uint32)

  # --- hazards
  def _sync(self, w: int, at: int) -> None:
    if bits(w, 44, 44) and w >> 61 <= 4:
      self.pending["ss"].clear(); self.reading["ss"].clear(); self.reading["ss/sy"].clear(); self.pending_consts.clear()
    if bits(w, 60, 60): self.pending["sy"].clear(); self.reading["sy"].clear(); self.reading["ss/sy"].clear()

  def _check_read(self, slots: tuple[int, ...], at: int, consumer_alu: bool, src2_of_cat3: bool, what: str) -> None:
    for c in slots: self._check_read_slot(c, at, consumer_alu, src2_of_cat3, what)

  def _check_read_slot(self, c: int, at: int, consumer_alu: bool, src2_of_cat3: bool, what: str) -> None:
    for flag in ("ss", "sy"):
      if c in self.pending[flag]:
        raise HazardError(f"pc {at}: {what} reads {slotname(c)} before ({flag}): its producer's result is not waited for")
    if (t := self.alu_write.get(c)) is not None:
      need = self.d.alu_to_alu if consumer_alu else self.d.non_alu
      if src2_of_cat3: need -= self.d.cat3_src2
      if self.t - t - 1 < need:
        raise HazardError(f"pc {at}: {what} reads {slotname(c)} {self.t - t - 1} cycles after the ALU instruction that wrote it; "
                          f"{'alu->alu' if consumer_alu else 'alu->non-alu'} needs {need}")

  def _check_write(self, slots: tuple[int, ...], at: int, what: str) -> None:
    for c, flag in ((c, f) for c in slots for f in ("ss", "sy", "ss/sy")):
      if c in self.reading[flag]:
        raise HazardError(f"pc {at}: {what} writes {slotname(c)} while an earlier instruction may still read it (WAR): needs "
                          f"({flag.replace('/', ') or (')})")

  def _wrote(self, slots: tuple[int, ...], alu: bool, sync: str | None) -> None:
    for c in slots:
      for flag in ("ss", "sy"): self.pending[flag].discard(c)
      if alu: self.alu_write[c] = self.t
      else: self.alu_write.pop(c, None)
      if sync: self.pending[sync].add(c)

  # --- running
  def run(self, code: list[int], footprint: int = SHARED_LO // 4) -> int:
    """Run from pc 0 until every lane ends -> instructions issued; `footprint`: the vec4 registers the code may name."""
    self.footprint = footprint
    pc = np.zeros(self.n, np.int64)
    done = np.zeros(self.n, bool)
    pred: np.ndarray | None = None
    while not done.all():
      at = int(pc[~done].min())
      if not 0 <= at < len(code): raise IR3Error(f"pc {at} is outside the program ({len(code)} instructions)")
      m = (pc == at) & ~done
      w = code[at]
      self.steps += 1
      if self.steps > MAX_STEPS: raise IR3Error(f"the kernel ran {MAX_STEPS} instructions without ending (pc {at})")
      self._sync(w, at)
      cat, nxt = w >> 61, at + 1
      cycles = 1
      if cat == 0:
        op, hi = bits(w, 58, 55), bits(w, 49, 49)
        if (op, hi) == (0, 0): cycles += bits(w, 42, 40)
        elif (op, hi) == (6, 0): done |= m
        elif (op, hi) == (1, 0) and bits(w, 39, 37) in (0, 1, 2) or (op, hi) in ((0xD, 1), (0xE, 1)):
          self._check_read(self.comp(P0 + bits(w, 54, 53), False), at, False, False, name_of(w))
          cond = self.p[:, bits(w, 54, 53)] ^ bool(bits(w, 52, 52))
          if op == 1 and bits(w, 39, 37):                       # brao / braa: a second p0 component, OR / AND
            self._check_read(self.comp(P0 + bits(w, 47, 46), False), at, False, False, name_of(w))
            other = self.p[:, bits(w, 47, 46)] ^ bool(bits(w, 45, 45))
            cond = cond | other if bits(w, 39, 37) == 1 else cond & other
          if op == 1: pc[m & cond] = at + sext(bits(w, 31, 0), 32) - 1   # taken lanes; +1 below
          else: pred = cond if op == 0xD else ~cond
        elif (op, hi) == (0xF, 1): pred = None
        elif (op, hi) == (7, 1): pass                          # shps: the preamble runs (once: the core is one dispatch)
        elif (op, hi) == (5, 1):                               # getone: the first lane goes on, the others branch
          first = int(np.argmax(m))
          rest = m.copy()
          rest[first] = False
          pc[rest] = at + sext(bits(w, 31, 0), 32) - 1
        elif (op, hi) == (8, 1):                               # shpe: ir3_legalize.c puts (ss)(sy) on it, to end the preamble
          if not (bits(w, 44, 44) and bits(w, 60, 60)):         # with its const stores and loads done
            raise HazardError(f"pc {at}: shpe without (ss)(sy): the preamble's const stores and loads may still be pending")
        elif (op, hi) == (2, 0): pc[m] = at + sext(bits(w, 31, 0), 32) - 1
        else: raise IR3Error(f"pc {at}: ir3 instruction {name_of(w)} ({w:#018x}) is not modelled")
        if (op, hi) in ((1, 0), (2, 0)): cycles = 0          # branches are not counted (ir3_delay.c count_instruction)
        if op != 6 or hi: pc[m] += 1
        self.t += cycles
        continue
      em = m if pred is None else m & pred
      if cat == 1: cycles += self._cat1(w, at, em)
      elif cat == 2: cycles += self._cat2(w, at, em)
      elif cat == 3: cycles += self._cat3(w, at, em)
      elif cat == 4: self._cat4(w, at, em); cycles = 0   # only ALU and flow instructions count (count_instruction)
      elif cat == 6: self._cat6(w, at, em); cycles = 0
      else: raise IR3Error(f"pc {at}: ir3 instruction {name_of(w)} (cat{cat}, {w:#018x}) is not modelled")
      pc[m] = nxt
      self.t += cycles
    return self.steps

  def _refuse(self, w: int, at: int, **fields: tuple[int, int]) -> None:
    for name, (hi, lo) in fields.items():
      if bits(w, hi, lo): raise IR3Error(f"pc {at}: {name_of(w)} ({w:#018x}) sets {name}, which the core does not model")

  # --- cat1
  def _swz(self, w: int, at: int, m: np.ndarray) -> int:
    """swz DST0, DST1, SRC0, SRC1 (ir3-cat1.xml #instruction-cat1-multi): DST0, DST1 = SRC0, SRC1 (a swap). It issues
    one component a cycle, as a (rpt1) instruction does: SRC1 is read and DST1 written a cycle after SRC0 and DST0 (so
    mesa legalizes it); the values move as one."""
    st, dt = bits(w, 52, 50), bits(w, 48, 46)
    self._refuse(w, at, UL=(45, 45), ROUND=(56, 55), **({"types": (52, 46)} if st != dt else {}))
    sh = st in HALF_TYPES
    srcs, dsts = (bits(w, 7, 0), bits(w, 15, 8)), (bits(w, 39, 32), bits(w, 23, 16))
    vals, t0 = [self.read(r, sh) for r in srcs], self.t
    for k, r in enumerate(srcs):
      self.t = t0 + k
      self._check_read(self.comp(r, sh), at, True, False, "swz")
    for k, (r, v) in enumerate(zip(dsts, vals)):
      self.t, c = t0 + k, self.comp(r, sh)
      self._check_write(c, at, "swz")
      self.write(r, sh, v, m)
      self._wrote(c, True, None)
    return 0

  def _cat1(self, w: int, at: int, m: np.ndarray) -> int:
    """mov/cov; (rptN): N more times, one a cycle, the destination and a GPR source marked (r) one register further."""
    if bits(w, 58, 57) == 2 and bits(w, 41, 40) == 0: return self._swz(w, at, m)
    if bits(w, 58, 57) != 0: raise IR3Error(f"pc {at}: ir3 instruction {name_of(w)} ({w:#018x}) is not modelled")
    self._refuse(w, at, UL=(45, 45), DST_REL=(49, 49), ROUND=(56, 55))
    st, dt, form, dst, rpt, r = bits(w, 52, 50), bits(w, 48, 46), bits(w, 54, 53), bits(w, 39, 32), bits(w, 41, 40), bits(w, 43, 43)
    what = f"{'mov' if st == dt else 'cov'}.{TYPES[st]}{TYPES[dt]}"
    sh = st in HALF_TYPES
    if r and form == 2: raise IR3Error(f"pc {at}: {what} with (r) on an immediate is not modelled")
    for k in range(rpt + 1):
      if k: self.t += 1
      if form == 2: v = np.full(self.n, bits(w, 31, 0) & (0xFFFF if sh else 0xFFFFFFFF), np.uint32)
      elif form == 1:
        if bits(w, 11, 11): raise IR3Error(f"pc {at}: {what} from a relative const is not modelled")
        v = self._const(bits(w, 10, 0) + (k if r else 0), sh, at)
      elif form == 0:
        if bits(w, 11, 8): raise IR3Error(f"pc {at}: {what} from a relative register is not modelled")
        src = bits(w, 7, 0) + (k if r else 0)
        self._check_read(self.comp(src, sh), at, True, False, what)
        v = self.read(src, sh)
      else: raise IR3Error(f"pc {at}: {what} with source form 3 does not exist")
      out = convert(v, st, dt)
      c = self.comp(dst + k, dt in HALF_TYPES)
      self._check_write(c, at, what)
      self.write(dst + k, dt in HALF_TYPES, out, m)
      self._wrote(c, True, "ss" if SHARED_LO <= dst < SHARED_HI else None)
    return 0

  def _const(self, field: int, half: bool, at: int, fl: bool = False) -> np.ndarray:
    """c<n>.<comp> (field: CONST << 2 | SWIZ). The const file is 32-bit: a half float instruction reads the float32 there
    as float16 (ir3 puts the float32 of a half immediate there: a half multiply by 3 reads 0x40400000), a half integer
    one its low 16 bits."""
    if field >= len(self.consts): raise IR3Error(f"const c{field >> 2}.{'xyzw'[field & 3]} is past the consts loaded (constlen)")
    if field in self.pending_consts:
      raise HazardError(f"pc {at}: c{field >> 2}.{'xyzw'[field & 3]} is read before (ss) after the stc that wrote it")
    v = np.full(self.n, int(self.consts[field]), np.uint32)
    if half and fl: return _bits_of(v.view(np.float32), True)
    return v & 0xFFFF if half else v

  # --- cat2
  def _src(self, s: int, half: bool, at: int, what: str, consumer_alu: bool = True, fl: bool = False) -> np.ndarray:
    """A #multisrc (cat2, cat4) operand, ABSNEG left to the caller."""
    kind = bits(s, 13, 11)
    if bits(s, 13, 8) == 0:
      self._check_read(self.comp(bits(s, 7, 0), half), at, consumer_alu, False, what)
      return self.read(bits(s, 7, 0), half)
    if kind in (0b010, 0b110): return self._const(bits(s, 10, 0), half, at, fl)
    if kind == 0b100: return np.full(self.n, sext(bits(s, 10, 0), 11) & (0xFFFF if half else 0xFFFFFFFF), np.uint32)
    if kind == 0b101:
      if bits(s, 9, 0) >= len(FLUT): raise IR3Error(f"pc {at}: {what}: float-table entry {bits(s, 9, 0)} does not exist")
      f = FLUT[bits(s, 9, 0)]
      return np.full(self.n, int(np.array(f, np.float16 if half else np.float32).view(np.uint16 if half else np.uint32)), np.uint32)
    raise IR3Error(f"pc {at}: {what}: a relative source ({s:#06x}) is not modelled")

  def _cat2(self, w: int, at: int, m: np.ndarray) -> int:
    """-> the (nopN) cycles after it. (rptN): N more times, one a cycle, with the destination and every source marked (r)
    one register further each time."""
    name = name_of(w)
    self._refuse(w, at, UL=(45, 45))
    sat = bool(bits(w, 42, 42))
    if sat and name not in _SAT: raise IR3Error(f"pc {at}: {name} ({w:#018x}) with (sat) is not modelled")
    rpt, r1, r2 = bits(w, 41, 40), bits(w, 43, 43), bits(w, 51, 51)
    full, dst = bool(bits(w, 52, 52)), bits(w, 39, 32)
    half = not full
    dhalf = full == bool(bits(w, 46, 46)) and dst < P0
    base, _, sfx = name.partition(".")
    if name not in _CAT2: raise IR3Error(f"pc {at}: ir3 instruction {name} ({w:#018x}) is not modelled")
    nsrc = OPS[2][bits(w, 58, 53)][1] - 1
    for k in range(rpt + 1):
      if k: self.t += 1
      fields = [bits(w, 15 + 16 * i, 16 * i) for i in range(nsrc)]
      if k:
        for i, r in enumerate((r1, r2)[:nsrc]):        # a GPR or const marked (r) steps; an immediate cannot
          if r and bits(fields[i], 13, 8) and bits(fields[i], 12, 11) != 0b10:
            raise IR3Error(f"pc {at}: {name} (rpt{rpt}) of an immediate or relative source marked (r)")
          if r: fields[i] += k
      srcs = [_absneg(self._src(f, half, at, name, fl=sfx == "f"), bits(f, 15, 14), sfx, half) for f in fields]
      if name in ("cmps.f", "cmps.u", "cmps.s"): out = _cmp(srcs[0], srcs[1], bits(w, 50, 48), sfx, half, name, at)
      elif sat: out = _SAT[name](*srcs, half)
      else: out = _CAT2[name](*srcs, half)
      if sfx == "f" and base != "cmps" and dhalf != half: out = convert(out, int(not half), int(not dhalf))   # DST_CONV
      if dhalf: out = out & 0xFFFF
      c = self.comp(dst + k, dhalf)
      self._check_write(c, at, name)
      self.write(dst + k, dhalf, out.astype(np.uint32), m)
      self._wrote(c, True, "ss" if SHARED_LO <= dst < SHARED_HI else None)
    return 0 if rpt else r1 | r2 << 1

  # --- cat3
  def _cat3(self, w: int, at: int, m: np.ndarray) -> int:
    """-> the (nopN) cycles after it; (rptN) as for cat2, the sources marked (r) (SRC1_R 43, SRC2_R 15, SRC3_R 29) and
    the destination one register further each time."""
    name, alt = name_of(w), bool(bits(w, 13, 13))
    self._refuse(w, at, UL=(45, 45), **({} if alt else {"SAT": (42, 42)}))
    if name not in _CAT3: raise IR3Error(f"pc {at}: ir3 instruction {name} ({w:#018x}) is not modelled")
    rpt, rs = bits(w, 41, 40), (bits(w, 43, 43), bits(w, 15, 15), bits(w, 29, 29))
    if not rpt and rs[2]: raise IR3Error(f"pc {at}: {name} with SRC3_R and no repeat is not modelled")
    full = bool(bits(w, 42, 42)) if alt else not name.endswith("16") or name.startswith("madsh")
    half = not full
    dst = bits(w, 39, 32)
    dhalf = full == bool(bits(w, 46, 46)) and dst < P0
    def src3(s: int, i: int, k: int) -> np.ndarray:
      if bits(s, 12, 11) == 0:
        if bits(s, 10, 8): raise IR3Error(f"pc {at}: {name}: source {s:#x} is not a register")
        r = bits(s, 7, 0) + (k if rs[i] else 0)
        self._check_read(self.comp(r, half), at, True, i == 2 and name.startswith("mad"), name)
        return self.read(r, half)
      if alt and bits(s, 12, 12):                        # the shift/mask forms' immediate
        if rs[i] and k: raise IR3Error(f"pc {at}: {name} (rpt{rpt}) of an immediate marked (r)")
        return np.full(self.n, bits(s, 11, 0), np.uint32)
      if bits(s, 12, 12): return self._const(bits(s, 10, 0) + (k if rs[i] else 0), half, at, name.endswith("f16"))
      raise IR3Error(f"pc {at}: {name}: a relative source is not modelled")
    typ = name.split(".")[1] if "." in name else "b"
    for k in range(rpt + 1):
      if k: self.t += 1
      a, c = src3(bits(w, 12, 0), 0, k), src3(bits(w, 28, 16), 2, k)
      rb = bits(w, 54, 47) + (k if rs[1] else 0)
      self._check_read(self.comp(rb, half), at, True, False, name)
      b = self.read(rb, half)
      a, b, c = (_absneg(v, 1 if bits(w, pos, pos) else 0, typ[0], half) for v, pos in ((a, 14), (b, 30), (c, 31)))
      out = _CAT3[name](a, b, c, half)
      if typ[0] == "f" and dhalf != half: out = convert(out, int(not half), int(not dhalf))      # DST_CONV
      if dhalf: out = out & 0xFFFF
      cc = self.comp(dst + k, dhalf)
      self._check_write(cc, at, name)
      self.write(dst + k, dhalf, out.astype(np.uint32), m)
      self._wrote(cc, True, None)
    return 0 if rpt else rs[0] | rs[1] << 1

  # --- cat4
  def _cat4(self, w: int, at: int, m: np.ndarray) -> None:
    name = name_of(w)
    self._refuse(w, at, REPEAT=(41, 40), SAT=(42, 42), SRC_R=(43, 43), UL=(45, 45))
    if name not in _SFU: raise IR3Error(f"pc {at}: ir3 instruction {name} ({w:#018x}) is not modelled")
    full, dst = bool(bits(w, 52, 52)), bits(w, 39, 32)
    half = not full
    dhalf = full == bool(bits(w, 46, 46)) and dst < P0
    s = bits(w, 15, 0)
    v = _absneg(self._src(s, half, at, name, consumer_alu=False, fl=True), bits(s, 15, 14), "f", half)
    ft = np.float16 if half else np.float32
    x = v.astype(np.uint16).view(np.float16).astype(np.float32) if half else v.view(np.float32)
    with np.errstate(all="ignore"): r = _SFU[name](x)
    out = r.astype(ft).view(np.uint16).astype(np.uint32) if half else r.astype(np.float32).view(np.uint32)
    if half != dhalf: out = convert(out, 0 if half else 1, 0 if dhalf else 1)
    c = self.comp(dst, dhalf)
    self._check_write(c, at, name)
    self.write(dst, dhalf, out, m)
    if bits(s, 13, 8) == 0: self.reading["ss"].update(self.comp(bits(s, 7, 0), half))
    self._wrote(c, False, "ss")

  # --- cat6
  def _lanes_mem(self, va: np.ndarray, esize: int, write: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(a uint8 array over global memory, the indices into it of the lanes it holds)]: one mapping for the span of
    every lane's address when one object holds it, else one mapping a lane (each raising where nothing is mapped)."""
    lo, hi = int(va.min()), int(va.max()) + esize
    try: return [(np.frombuffer(self.mem(lo, hi - lo, write), np.uint8), (va - lo).astype(np.int64))]
    except Exception:    # the span crosses objects: each lane's own access, which faults if its address is unmapped
      return [(np.frombuffer(self.mem(int(a), esize, write), np.uint8), np.zeros(1, np.int64)) for a in va]

  def _stc(self, w: int, at: int, m: np.ndarray) -> None:
    """stc c[DST], SRC, SIZE (a6xx preamble): SIZE registers from SRC on into the const file from component DST."""
    src, size, dst = bits(w, 8, 1), bits(w, 26, 24), bits(w, 39, 32)
    lanes = np.nonzero(m)[0]
    if dst + size > len(self.consts): raise IR3Error(f"pc {at}: stc to c[{dst}] of {size} components is past constlen")
    for k in range(size):
      c = self.comp(src + k, False)
      self._check_read(c, at, False, False, "stc")
      vals = self.read(src + k, False)[lanes]
      if len(set(vals.tolist())) > 1: raise IR3Error(f"pc {at}: stc of {regname(src + k)}, which differs between lanes")
      if len(vals): self.consts[dst + k] = vals[0]
      self.pending_consts.add(dst + k)
      self.reading["ss"].update(c)

  def _cat6(self, w: int, at: int, m: np.ndarray) -> None:
    name, typ, size = name_of(w), bits(w, 51, 49), bits(w, 31, 24)
    op = bits(w, 58, 54)
    if op == 0x1C: return self._stc(w, at, m)
    if op not in (0, 3): raise IR3Error(f"pc {at}: ir3 instruction {name} ({w:#018x}) is not modelled")
    if not 1 <= size <= 4: raise IR3Error(f"pc {at}: {name} of {size} components")
    half, esize = typ in HALF_TYPES, (1 if typ in (6, 7) else 2 if typ in HALF_TYPES else 4)
    what = f"{'ldg' if op == 0 else 'stg'}.{TYPES[typ]}"
    if op == 0:
      if bits(w, 22, 22): raise IR3Error(f"pc {at}: {what} with a register offset is not modelled")
      addr_reg, off, reg = bits(w, 21, 14), sext(bits(w, 13, 1), 13), bits(w, 39, 32)
    else:
      if not bits(w, 40, 40): raise IR3Error(f"pc {at}: {what} with a register offset is not modelled")
      addr_reg, off, reg = bits(w, 48, 41), sext(bits(w, 13, 9) << 8 | bits(w, 39, 32), 13), bits(w, 8, 1)
    addr_slots = self.comp(addr_reg, False) + self.comp(addr_reg + 1, False)
    self._check_read(addr_slots, at, False, False, what)
    addr = self.read(addr_reg, False).astype(np.int64) | self.read(addr_reg + 1, False).astype(np.int64) << 32
    lanes = np.nonzero(m)[0]
    regs = [self.comp(reg + k, half) for k in range(size)]
    if op == 0:
      for c in regs: self._check_write(c, at, what)       # (a load may write its own address: read before written)
    self.reading["ss/sy" if op == 0 else "ss"].update(addr_slots)
    if op == 0:
      for k, c in enumerate(regs):
        vals = np.zeros(self.n, np.uint32)
        if len(lanes):
          parts = self._lanes_mem(addr[lanes] + off + k * esize, esize, False)
          raw = np.concatenate([buf[idx[:, None] + np.arange(esize)] for buf, idx in parts]).astype(np.int64) @ \
            (1 << 8 * np.arange(esize, dtype=np.int64))
          vals[lanes] = _mask(np.where(raw >> (8 * esize - 1) & 1, raw - (1 << 8 * esize), raw) if typ in (4, 7) else raw, half)
        self.write(reg + k, half, vals, m)
        self._wrote(c, False, "sy")
    else:
      for c in regs: self._check_read(c, at, False, False, what)
      for c in regs: self.reading["ss"].update(c)
      for k in range(size):
        if not len(lanes): break
        vals = self.read(reg + k, half)[lanes].astype(np.int64)
        data = ((vals[:, None] >> (8 * np.arange(esize))) & 0xFF).astype(np.uint8)
        parts = self._lanes_mem(addr[lanes] + off + k * esize, esize, True)
        if len(parts) == 1: parts[0][0][parts[0][1][:, None] + np.arange(esize)] = data
        else:
          for (buf, _), d in zip(parts, data): buf[:] = d


# --- value helpers (uint32 arrays holding the bits; half values in the low 16)
def _fl(v: np.ndarray, half: bool) -> np.ndarray:
  return v.astype(np.uint16).view(np.float16).astype(np.float32) if half else v.view(np.float32)


def _bits_of(x: np.ndarray, half: bool) -> np.ndarray:
  return x.astype(np.float16).view(np.uint16).astype(np.uint32) if half else x.astype(np.float32).view(np.uint32)


def _signed(v: np.ndarray, half: bool) -> np.ndarray:
  return v.astype(np.uint16).view(np.int16).astype(np.int64) if half else v.view(np.int32).astype(np.int64)


def _mask(v: np.ndarray, half: bool) -> np.ndarray: return (np.asarray(v, np.int64) & (0xFFFF if half else 0xFFFFFFFF)).astype(np.uint32)


def _absneg(v: np.ndarray, an: int, kind: str, half: bool) -> np.ndarray:
  if not an: return v
  if kind == "f":
    x = _fl(v, half)
    if an & 2: x = np.abs(x)
    if an & 1: x = -x
    return _bits_of(x, half)
  if kind == "b":
    if an != 1: raise IR3Error("(abs) on a bitwise source is not modelled")
    return _mask(~v.astype(np.int64), half)
  s = _signed(v, half)
  if an & 2: s = np.abs(s)
  if an & 1: s = -s
  return _mask(s, half)


def _cmp(a: np.ndarray, b: np.ndarray, cond: int, sfx: str, half: bool, name: str, at: int) -> np.ndarray:
  if cond >= len(CONDS): raise IR3Error(f"pc {at}: {name} with condition {cond}")
  x, y = (_fl(a, half), _fl(b, half)) if sfx == "f" else (_signed(a, half), _signed(b, half)) if sfx == "s" else (a, b)
  with np.errstate(invalid="ignore"):
    r = {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}[CONDS[cond]]
  return r.astype(np.uint32)


def _fop(fn):
  def run(*a):
    half = a[-1]
    with np.errstate(all="ignore"): return _bits_of(fn(*(_fl(x, half) for x in a[:-1])), half)
  return run


def _iop(fn, signed: bool = False):
  def run(*a):
    half = a[-1]
    xs = [_signed(x, half) if signed else x.astype(np.int64) for x in a[:-1]]
    return _mask(fn(*xs), half)
  return run


def _amount(b: np.ndarray, half: bool) -> np.ndarray: return b.astype(np.int64) & (15 if half else 31)
def _shl(a, b, half): return _mask(a.astype(np.int64) << _amount(b, half), half)
def _shr(a, b, half): return _mask(a.astype(np.int64) >> _amount(b, half), half)
def _ashr(a, b, half): return _mask(_signed(a, half) >> _amount(b, half), half)


def _u24(x): return x & 0xFFFFFF
def _s24(x): return ((x & 0xFFFFFF) ^ 0x800000) - 0x800000


_CAT2 = {
  "add.f": _fop(np.add), "mul.f": _fop(np.multiply), "min.f": _fop(np.fmin), "max.f": _fop(np.fmax),
  "sign.f": _fop(np.sign), "absneg.f": _fop(lambda x: x), "floor.f": _fop(np.floor), "ceil.f": _fop(np.ceil),
  "rndne.f": _fop(np.rint), "rndaz.f": _fop(lambda x: np.trunc(x + np.copysign(0.5, x))), "trunc.f": _fop(np.trunc),
  "add.u": _iop(np.add), "add.s": _iop(np.add), "sub.u": _iop(np.subtract), "sub.s": _iop(np.subtract),
  "min.u": _iop(np.minimum), "max.u": _iop(np.maximum), "min.s": _iop(np.minimum, True), "max.s": _iop(np.maximum, True),
  "absneg.s": _iop(lambda x: x, True), "and.b": _iop(np.bitwise_and), "or.b": _iop(np.bitwise_or), "xor.b": _iop(np.bitwise_xor),
  "not.b": _iop(np.invert), "mull.u": _iop(lambda a, b: (a & 0xFFFF) * (b & 0xFFFF)),
  "mul.u24": _iop(lambda a, b: _u24(a) * _u24(b)), "mul.s24": _iop(lambda a, b: _s24(a) * _s24(b)),
  "shl.b": _shl, "shr.b": _shr, "ashr.b": _ashr,
  "cmps.f": None, "cmps.u": None, "cmps.s": None,
  # clz.b of 0 is -1: ir3_compiler_nir.c builds ufind_msb as sel(31 - clz, clz >= 0 (signed), clz), so a zero source
  # (no bit set: ufind_msb -1) must give a negative count
  "clz.b": _iop(lambda a: np.where(a == 0, -1, 31 - np.floor(np.log2(np.maximum(a, 1))).astype(np.int64))),
  "cbits.b": _iop(lambda a: np.array([int(x).bit_count() for x in a], np.int64)),
}
def _clip(fn, signed: bool):
  """An integer op whose (sat) result is clamped to the type's range instead of wrapping."""
  def run(a, b, half):
    n = 16 if half else 32
    lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)
    x, y = (_signed(a, half), _signed(b, half)) if signed else (a.astype(np.int64), b.astype(np.int64))
    return _mask(np.clip(fn(x, y), lo, hi), half)
  return run


_SAT = {"add.u": _clip(np.add, False), "sub.u": _clip(np.subtract, False), "add.s": _clip(np.add, True), "sub.s": _clip(np.subtract, True),
        **{f"{op}.f": _fop(lambda *x, fn=fn: np.clip(fn(*x), 0.0, 1.0)) for op, fn in (("add", np.add), ("mul", np.multiply))}}
_CAT3 = {
  "mad.f32": _fop(lambda a, b, c: (a * b).astype(np.float32) + c), "mad.f16": _fop(lambda a, b, c: (a * b).astype(np.float16) + c),
  "mad.u24": _iop(lambda a, b, c: _u24(a) * _u24(b) + c), "mad.s24": _iop(lambda a, b, c: _s24(a) * _s24(b) + c),
  "mad.u16": _iop(lambda a, b, c: (a & 0xFFFF) * (b & 0xFFFF) + c), "mad.s16": _iop(lambda a, b, c: a * b + c, True),
  "madsh.m16": _iop(lambda a, b, c: c + ((a & 0xFFFF) * (b >> 16) << 16)),
  **{f"sel.{t}": (lambda a, b, c, half: np.where(b != 0, a, c).astype(np.uint32)) for t in ("b16", "b32", "s16", "s32")},
  **{f"sel.{t}": (lambda a, b, c, half: np.where(_fl(b, half) != 0, a, c).astype(np.uint32)) for t in ("f16", "f32")},
}
# cat3 with bit 13 set (mesa 25's ir3 encodes its shift-and-mask instructions so; disasm_a3xx names them): dst =
# (src2 >> src1) & src3 and the like -- ir3_compiler_nir.c emits nir_op_shrm_ir3 ((a >> b) & c) as SHRM(b, a, c)
_CAT3_ALT = {8: "shrm", 9: "shlm", 10: "shrg", 11: "shlg", 12: "andg"}
_CAT3.update({
  "shrm": _iop(lambda a, b, c: (b >> (a & 31)) & c), "shlm": _iop(lambda a, b, c: (b << (a & 31)) & c),
  "shrg": _iop(lambda a, b, c: (b >> (a & 31)) | c), "shlg": _iop(lambda a, b, c: (b << (a & 31)) | c),
  "andg": _iop(lambda a, b, c: (a & b) | c)})
_SFU = {"rcp": lambda x: 1 / x, "rsq": lambda x: 1 / np.sqrt(x), "log2": np.log2, "exp2": np.exp2, "sin": np.sin, "cos": np.cos,
        "sqrt": np.sqrt}


def convert(v: np.ndarray, st: int, dt: int) -> np.ndarray:
  """cat1 mov/cov from type `st` to `dt` (#type indices) of uint32 bit patterns."""
  sname, dname = TYPES[st], TYPES[dt]
  if sname[0] == "f": x = _fl(v, sname == "f16")
  else:
    n = int(sname[1:])
    x = v.astype(np.int64) & ((1 << n) - 1)
    if sname[0] == "s": x = (x ^ 1 << (n - 1)) - (1 << (n - 1))
  if dname[0] == "f":
    with np.errstate(all="ignore"): return _bits_of(np.asarray(x, np.float64).astype(np.float32), dname == "f16")
  n = int(dname[1:])
  if sname[0] == "f":
    with np.errstate(all="ignore"):
      t = np.trunc(np.nan_to_num(np.asarray(x, np.float64), nan=0.0))
      lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if dname[0] == "s" else (0, (1 << n) - 1)
      x = np.clip(t, lo, hi).astype(np.int64)
  return _mask(np.asarray(x, np.int64) & ((1 << n) - 1) if n < 32 else np.asarray(x, np.int64), n <= 16)
