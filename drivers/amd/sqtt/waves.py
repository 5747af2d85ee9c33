"""Waves from a shader engine's trace buffer, and their instructions mapped onto the code object that ran.

What is assumed (a real capture decodes the same way):
- The time of a token is the sum of the deltas before it, from 0 at the buffer's start; one unit is taken to be one
  shader clock. A wave's `start`/`end` are its WAVESTART/WAVEEND times, None when the trace began after the wave did
  (or ended before it finished).
- Instruction tokens name a slot on the one SIMD the trace's SQ_THREAD_TRACE_MASK selected (`unit`: SA_SEL, WGP_SEL,
  SIMD_SEL; mesa programs SA 0, SIMD 0 and the WGP of the shader engine's last active CU).
- An instruction's `stall` is the clocks between the wave's previous issue (or its start) and this one, beyond the one
  clock back-to-back issue takes.
- Mapping onto code: a wave starts at the kernel's entry; each issue token is the next instruction in program order;
  s_delay_alu (and gfx12's s_wait_alu) issues no token (it is listed at the time of the instruction after it, stall 0); a taken branch
  (BRANCH_TAKEN, CALL) continues at its target; s_endpgm is the wave's end. After s_setpc / s_swappc the PC is unknown
  and the rest of the wave stays unmapped. A token that cannot be the instruction at the PC (a VALU token on a scalar
  instruction, no branch token on a branch) means the code object or its load address does not match the trace. A wave
  of the traced SIMD without any instruction token is left unmapped unless the kernel is a lone s_endpgm (its SE may
  have excluded the instruction tokens).
"""
from __future__ import annotations
from dataclasses import dataclass, field
from types import ModuleType
from typing import NamedTuple
import re, tempfile

from drivers.amd.sqtt import gfx11, gfx12
from drivers.amd.sqtt.tokens import TraceError

GENERATIONS: dict[str, ModuleType] = {"gfx11": gfx11, "gfx12": gfx12}


def generation(target: str) -> ModuleType:
  """The token format of a target (gfx1100 -> gfx11)."""
  gen = target[:5]
  if not target.startswith("gfx") or gen not in GENERATIONS:
    raise TraceError(f"no SQTT token format for target {target!r}: supported are {', '.join(GENERATIONS)} (e.g. gfx1100)")
  return GENERATIONS[gen]


@dataclass
class Issue:
  time: int
  op: str                 # the token's instruction class (gfx11.OPS, VALU, IMMEDIATE; NONE: issued no token; ENDPGM)
  stall: int = 0
  pc: int | None = None
  text: str | None = None

  def json(self) -> dict:
    out = {"pc": self.pc, "time": self.time, "stall": self.stall, "op": self.op}
    if self.text is not None: out["text"] = self.text
    return out


@dataclass
class Wave:
  se: int
  sa: int
  wgp: int
  simd: int
  slot: int
  start: int | None
  end: int | None = None
  detail: bool = False    # on the traced SIMD: its instructions are in the trace
  insts: list[Issue] = field(default_factory=list)

  def json(self) -> dict:
    return {"se": self.se, "sa": self.sa, "wgp": self.wgp, "simd": self.simd, "slot": self.slot, "start": self.start,
            "end": self.end, "insts": [i.json() for i in self.insts]}


def decode(data: bytes, se: int = 0, target: str = "gfx1100", unit: tuple[int, int, int] = (0, 0, 0)) -> list[Wave]:
  """The waves of one shader engine's buffer, in the order they ended (then those still running)."""
  gen = generation(target)
  tokens = gen.FORMAT.tokens(data)
  first = next(tokens, None)
  if first is None or first[0].name != "LAYOUT_HEADER" or first[0].get(first[2], "layout") != gen.LAYOUT:
    what = "is empty" if first is None else f"starts with {first[0].name}" + \
           (f" layout {first[0].get(first[2], 'layout')}" if first[0].name == "LAYOUT_HEADER" else "")
    raise TraceError(f"shader engine {se}'s trace {what}: a {target} trace starts with a LAYOUT_HEADER of layout {gen.LAYOUT}")
  live: dict[tuple[int, int, int, int], Wave] = {}
  out: list[Wave] = []
  for t, time, word in tokens:
    if t.name in ("WAVESTART", "WAVEEND"):
      key = (t.get(word, "sa"), t.get(word, "wgp"), t.get(word, "simd"), t.get(word, "wave"))
      w = live.pop(key, None)
      if t.name == "WAVESTART":
        if w is not None: out.append(w)
        live[key] = Wave(se, *key, start=time, detail=key[:3] == unit)
      else:
        if w is None: w = Wave(se, *key, start=None, detail=key[:3] == unit)
        w.end = time
        out.append(w)
      continue
    for slot, op in gen.issues(t, word):
      key = (*unit, slot)
      if (w := live.get(key)) is None: w = live[key] = Wave(se, *key, start=None, detail=True)
      w.insts.append(Issue(time, op))
  out += live.values()
  for w in out:
    prev = w.start
    for i in w.insts:
      i.stall = 0 if prev is None else max(0, i.time - prev - 1)
      prev = i.time
  return out


class Inst(NamedTuple):
  op: str
  size: int
  text: str
  simm16: int           # bits 15:0 of the first dword (a SOPP branch's offset in dwords)


# llvm-objdump's AMDGPU lines: "\t<text>  // <address>: <dwords in hex>[ <symbolized target>]"
LINE = re.compile(r"^\t(\S.*?)\s*// ([0-9A-F]+): ((?:[0-9A-F]{8} ?)+)", re.M)


@dataclass
class Code:
  """A code object's instructions as loaded at `base` (llvm-objdump's disassembly); waves start at `entry`."""
  insts: dict[int, Inst]
  base: int
  entry: int
  target: str = "gfx1100"

  @classmethod
  def from_code_object(cls, blob: bytes, base: int = 0, kernel: str | None = None) -> "Code":
    from drivers.amd.elf import load_code_object
    from drivers.hcq.compiler import llvm_tool, run_tool
    co = load_code_object(blob)
    if kernel is not None and kernel not in co.kernels:
      raise TraceError(f"the code object has no kernel {kernel!r} (it has {', '.join(co.kernels)})")
    k = co.kernels[kernel] if kernel is not None else next(iter(co.kernels.values()))
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
      f.write(blob); f.flush()
      text = run_tool([llvm_tool("llvm-objdump"), "-d", f"--mcpu={co.arch}", f.name], "disassembling the code object").decode()
    insts = {}
    for m in LINE.finditer(text):
      words = [int(w, 16) for w in m.group(3).split()]
      insts[base + int(m.group(2), 16)] = Inst(m.group(1).split()[0], 4 * len(words), m.group(1), words[0] & 0xFFFF)
    return cls(insts, base, base + k.code_offset, co.arch)

  def at(self, pc: int) -> Inst:
    if (inst := self.insts.get(pc)) is None:
      raise TraceError(f"no instruction of the code object is at PC {pc:#x} (it was loaded at {self.base:#x}?)")
    return inst


def _mismatch(w: Wave, i: Issue, pc: int, text: str) -> TraceError:
  return TraceError(f"wave (SE {w.se} SA {w.sa} WGP {w.wgp} SIMD {w.simd} slot {w.slot}): token {i.op} at time {i.time} cannot be "
                    f"`{text}` at PC {pc:#x}: the code object or its load address (--base) does not match the trace")


def map_code(waves: list[Wave], code: Code) -> None:
  """Give each traced wave's issues their PC and disassembly (see the module's assumptions)."""
  silent = generation(code.target).SILENT
  for w in waves:
    if not w.detail: continue
    if not w.insts and code.at(code.entry).op != "s_endpgm": continue   # its SE traced no instructions (TOKEN_EXCLUDE)
    pc: int | None = code.entry
    out: list[Issue] = []
    for i in w.insts:
      if pc is None: out.append(i); continue
      while (inst := code.at(pc)).op in silent:
        out.append(Issue(i.time, "NONE", 0, pc, inst.text)); pc += inst.size
      i.pc, i.text = pc, inst.text
      op, branch = inst.op, i.op in ("BRANCH_TAKEN", "BRANCH_NOT_TAKEN")
      if (op == "s_branch" or op.startswith("s_cbranch")) != branch or (i.op == "VALU" and not op.startswith("v_")) \
         or (i.op == "CALL") != (op == "s_call_b64"):
        raise _mismatch(w, i, pc, i.text)
      out.append(i)
      target = pc + 4 + ((inst.simm16 ^ 0x8000) - 0x8000) * 4
      pc = target if i.op in ("BRANCH_TAKEN", "CALL") else None if op in ("s_setpc_b64", "s_swappc_b64") else pc + inst.size
    if w.end is not None and pc is not None:
      while (inst := code.at(pc)).op in silent:
        out.append(Issue(w.end, "NONE", 0, pc, inst.text)); pc += inst.size
      end = Issue(w.end, "ENDPGM", 0, pc, inst.text)
      if inst.op != "s_endpgm": raise _mismatch(w, end, pc, inst.text)
      last = out[-1].time if out else w.start
      end.stall = 0 if last is None else max(0, w.end - last - 1)
      out.append(end)
    w.insts = out
