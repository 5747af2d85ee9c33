"""Traced execution: the instructions each wave of a dispatch ran, in order (what a GPU model's thread trace and
instruction counters are made of). The scheduler records every block a wave enters (sched.c, only when a trace
buffer is given: an untraced dispatch pays one test per block); a block's instructions are fixed (program.py), so the
record expands to the exact sequence the compiled code executed, including s_delay_alu and s_endpgm."""
from __future__ import annotations
from collections import defaultdict

import numpy as np

from emu.amdgcn import gen_scalar
from emu.amdgcn.decode import Inst

CHUNK = 1 << 16       # block records per drain of the scheduler's buffer


class Trace:
  """`runs[(workgroup, wave)]`: the PCs the wave executed (workgroup = x + gx * (y + gy * z), wave = its index in the
  workgroup); `insts[pc]`: the instructions there."""
  def __init__(self) -> None:
    self.runs: dict[tuple[int, int], list[int]] = defaultdict(list)
    self.insts: dict[int, Inst] = {}
    self._blocks: dict[int, list[int]] = {}

  def drain(self, program, d, buf) -> None:
    """Expand the scheduler's records (while the program's blocks are still the ones they ran)."""
    n = int(d.ntrace)
    if not n: return
    from emu.amdgcn.program import ffi
    e = np.frombuffer(ffi().buffer(buf, 8 * n), np.uint64)
    base, blocks = int(d.code_base), self._blocks
    for pc4, meta in zip(((e & 0xFFFFFFFF) * 4).tolist(), (e >> 32).tolist()):
      pc = base + pc4
      if (pcs := blocks.get(pc)) is None: pcs = blocks[pc] = self._block(program, pc)
      self.runs[(meta >> 8, meta & 0xFF)].extend(pcs)
    d.ntrace = 0

  def _block(self, program, lead: int) -> list[int]:
    pcs, pc = [], lead
    while pc in program.insts:
      inst = self.insts[pc] = program.insts[pc]
      pcs.append(pc)
      pc += inst.size
      if gen_scalar.ends_block(inst) or pc in program.leaders: break
    return pcs

  def invalidate(self) -> None:
    """The program was rebuilt with new blocks: expand later records afresh."""
    self._blocks.clear()
