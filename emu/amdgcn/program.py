"""A kernel's reachable code, decoded once and compiled to C: one function per basic block, calling into the
shared runtime (runtime.py) for vector work.

Discovery follows control flow from the entry PC (branch targets, fall-through, call return points);
indirect jumps (s_setpc / s_swappc) to a PC without a block stop the dispatch, which adds that PC and
rebuilds. Blocks end at branches, s_endpgm, s_barrier, s_trap, calls and at the next block's start.
The C is position independent (PCs are offsets from the code base) and cached on disk by content.
"""
from __future__ import annotations
from dataclasses import replace
from functools import cache
from cffi import FFI
from emu import cc, memory
from emu.amdgcn import runtime, operands, targets, gfx12
from emu.amdgcn import gen_scalar, gen_vector, gen_memory, gen_packed, gen_interp
from emu.amdgcn.decode import decode, DecodeError, Inst

MAX_SPAN = 16 << 20      # largest code span (bytes) one program may cover
ILLEGAL_UNSUPPORTED, ILLEGAL_DECODE = 7, 8


@cache
def ffi() -> FFI:
  f = FFI()
  f.cdef(runtime.src("state.h") + "int dispatch_run_w32(dispatch_t *d); int dispatch_run_w64(dispatch_t *d);\n"
         "void (*const *program_blocks(uint64_t *n))(wave_t *);")
  return f


def check_registers(inst: Inst) -> None:
  """Reject an instruction whose VGPR range runs past the register file (v255), using the operand widths of
  the ISA tables (a 128-bit load into v254 would need v257)."""
  for o in inst.operands:
    val = inst.fields.get(o.field)
    if val is None or not (o.kind == "vgpr" or (o.kind == "src" and val >= 256)): continue
    reg = val - 256 if o.kind == "src" else val
    if o.bits == 16 and inst.enc in ("VOP1", "VOP2", "VOPC"): reg &= 0x7F      # true16: bit 7 picks the half
    if reg + max(1, o.bits // 32) > 256:
      raise operands.Unsupported(f"register v{256 if reg < 256 else reg} is outside the register file (v0-v255)")


def gen_inst(inst: Inst, pc: int, nxt: int, wave64: bool) -> str:
  """C statements for one instruction at code offset `pc` (`nxt` = offset of the next one)."""
  check_registers(inst)
  return _gen(inst, pc, nxt, wave64)


def _gen(inst: Inst, pc: int, nxt: int, wave64: bool) -> str:
  if targets.get(inst.target).isa == "gfx12": inst = _as_gfx11(inst)
  e = inst.enc
  if e in ("SOP1", "SOP2", "SOPK", "SOPC", "SOPP", "SMEM"): return gen_scalar.gen(inst, pc, nxt)
  if e in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD"): return gen_vector.gen(inst, wave64, pc)
  if e == "VOPD": return gen_vector.gen_vopd(inst, wave64)
  if e == "VOP3P": return gen_packed.gen(inst, wave64)
  if e in ("DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF"): return gen_memory.gen(inst, pc, wave64)
  if e == "LDSDIR": return gen_interp.ldsdir(inst, pc)
  if e == "VINTERP": return gen_interp.vinterp(inst)
  raise operands.Unsupported(f"{e} instructions ({inst.op}) are not supported by the emulator")


def _as_gfx11(inst: Inst) -> Inst:
  """A gfx12 instruction under the RDNA3 name whose semantics it has (gfx12.same_as), VOPD halves included."""
  if inst.vopd is not None:
    return replace(inst, vopd=tuple((gfx12.same_as(op) or op, f) for op, f in inst.vopd))
  return replace(inst, op=new) if (new := gfx12.same_as(inst.op)) else inst


class Program:
  """Decoded code reachable from `entry` (absolute GPU addresses) for one target, compiled for one wave size."""

  def __init__(self, mem: memory.GpuMemory, entry: int, wave64: bool, target: str = targets.DEFAULT):
    self.wave64, self.entry, self.target = wave64, entry, target
    self.insts: dict[int, Inst] = {}
    self.raw: dict[int, bytes] = {}
    self.leaders: set[int] = set()
    self.problems: dict[int, str] = {}      # pc -> why the instruction there cannot run
    self.lib = None
    self.base = 0
    self.epoch: int | None = None           # the memory's icache_epoch when the code was last read (dispatch.program_for)
    self.add(mem, entry)

  # ---- discovery ----
  @staticmethod
  def _fetch(mem: memory.GpuMemory, pc: int) -> bytes:
    """Up to 16 bytes of code at pc (fewer at the end of a mapped run)."""
    run = mem.fetch(pc)
    if run is None: raise memory.MemoryFault(f"instruction fetch at {pc:#x}: address not mapped or not executable")
    start, length, _ = run
    return memory.read(mem, pc, min(16, start + length - pc), code=True)

  def add(self, mem: memory.GpuMemory, pc: int) -> None:
    """Make `pc` a block start and decode everything newly reachable from it."""
    self.leaders.add(pc)
    work = [pc]
    while work:
      pc = work.pop()
      while pc not in self.insts and pc not in self.problems:
        try:
          code = self._fetch(mem, pc)
          inst = decode(code, 0, self.target)
        except (DecodeError, memory.MemoryFault) as e:
          self.problems[pc] = f"cannot decode the instruction: {e}"
          break
        self.insts[pc], self.raw[pc] = inst, code[:inst.size]
        nxt = pc + inst.size
        if gen_scalar.ends_block(inst):
          for t in gen_scalar.successors(inst, pc, nxt):
            if t not in self.leaders: self.leaders.add(t); work.append(t)
          break
        pc = nxt

  # ---- code generation ----
  def source(self) -> str:
    pcs = sorted(self.insts)
    self.base = min(pcs + sorted(self.problems)) & ~0xFF
    end = max([p + self.insts[p].size for p in pcs] + [p + 4 for p in self.problems])
    if end - self.base > MAX_SPAN: raise operands.Unsupported(f"code spans {end - self.base:#x} bytes (more than {MAX_SPAN:#x})")
    out = [runtime.prelude(self.wave64), runtime.src("state.h"), *map(runtime.src, runtime.HEADERS),
           runtime.declarations(), runtime.identity(self.wave64)]
    table = []
    for lead in sorted(self.leaders):
      out.append(self._block(lead))
      table.append(f"[{(lead - self.base) >> 2}] = b_{lead - self.base:x}")
    words = (end - self.base + 3) >> 2
    out.append(f"static void (*const BLOCKS[{words}])(wave_t *) = {{{', '.join(table)}}};")
    out.append(f"void (*const *program_blocks(uint64_t *n))(wave_t *) {{ *n = {words}; return BLOCKS; }}")
    return "\n".join(out)

  def _block(self, lead: int) -> str:
    body, pc, n = [], lead, 0
    while True:
      off = pc - self.base
      if pc in self.problems or pc not in self.insts:
        if pc not in self.problems: self.problems[pc] = "no instruction was decoded here"
        body.append(f"STOP(STOP_ILLEGAL, BASE + {off:#x}, {ILLEGAL_DECODE});")
        break
      inst = self.insts[pc]
      nxt = pc + inst.size
      try: code = gen_inst(inst, off, nxt - self.base, self.wave64)
      except operands.Unsupported as e:
        self.problems[pc] = str(e)
        code = f"STOP(STOP_ILLEGAL, BASE + {off:#x}, {ILLEGAL_UNSUPPORTED});"
      body.append(f"/* {off:#x}: {inst.name} */ {code}")
      n += 1
      if gen_scalar.ends_block(inst) or pc in self.problems: break
      pc = nxt
      if pc in self.leaders:
        body.append(f"w->pc = BASE + {pc - self.base:#x}; return;")
        break
    # count the block's instructions up front (a fault or stop inside it over-counts by the rest)
    return f"static void b_{lead - self.base:x}(wave_t *w) {{\n  w->d->instructions += {n};\n  " + "\n  ".join(body) + "\n}"

  def build(self) -> None:
    runtime.load(self.wave64)     # loaded first: the program's calls resolve against it
    with cc.timed("the RDNA3 emulator's C translation of a kernel", runtime.CACHE):
      self.lib = ffi().dlopen(cc.build(self.source(), "wave64" if self.wave64 else "wave32", where=runtime.CACHE))
    self._spans = self.spans()
    n = ffi().new("uint64_t *")
    self.blocks = self.lib.program_blocks(n)
    self.nblocks = n[0]

  def spans(self) -> list[tuple[int, bytes]]:
    """The decoded code as contiguous (address, bytes) runs."""
    out: list[tuple[int, bytes]] = []
    for pc in sorted(self.raw):
      if out and out[-1][0] + len(out[-1][1]) == pc: out[-1] = (out[-1][0], out[-1][1] + self.raw[pc])
      else: out.append((pc, self.raw[pc]))
    return out

  def still_valid(self, mem: memory.GpuMemory) -> bool:
    """True if the code in memory is still the code this program was built from."""
    try: return all(memory.read(mem, pc, len(raw), code=True) == raw for pc, raw in self._spans)
    except memory.MemoryFault: return False
