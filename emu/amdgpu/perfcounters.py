"""Performance counters of the emulated gfx11 GPU: the SQ's (per shader engine) and the GRBM's, as a queue programs them
(mesa's src/gallium/drivers/radeonsi/si_perfcounter.c: CP_PERFMON_CNTL, SQ_PERFCOUNTER_CTRL, the *_SELECT registers, the
counters read per SE through GRBM_GFX_INDEX).

- CP_PERFMON_CNTL.PERFMON_STATE: 0 disables and resets every counter, 1 counts, 2 stops (the counts stay readable);
  SPM_PERFMON_STATE (streaming) is not modelled and must be 0. PERFMON_SAMPLE_ENABLE and the PERFCOUNTER_START / STOP /
  SAMPLE events change nothing here (the counters are read directly).
- SQ_PERFCOUNTER_CTRL.CS_EN: compute waves count only with it. SQ_PERFCOUNTER0..7_SELECT.PERF_SEL: one of SQ_SELECTS
  (anything else is refused, naming the register); SPM_MODE and PERF_MODE must be 0. SQ_PERFCOUNTERn_LO reads the count of
  the SE GRBM_GFX_INDEX.SE_INDEX selects (32 bits, wrapping).
- GRBM_PERFCOUNTER0_SELECT.PERF_SEL: GUI_ACTIVE (the GPU busy clocks), or 0; GRBM_PERFCOUNTER0_LO/HI: 64 bits.

What counts (the instruction classes are by encoding, from the instructions the emulator executed, so they equal its own
counts): WAVES every wave launched; INSTS_ALL every instruction; INSTS_VALU VOP*/VOPD/VINTERP; INSTS_SALU SOP1/SOP2/SOPC/SOPK
but the waits and s_call; INSTS_SMEM SMEM; INSTS_LDS DS and LDSDIR; INSTS_FLAT FLAT/GLOBAL/SCRATCH; INSTS_TEX MUBUF/MTBUF/
MIMG; INSTS_BRANCH branches and s_call; INSTS_SENDMSG; INSTS_DELAY_ALU. The cycle counters follow sqtt.py's timing model:
BUSY_CYCLES the clocks from an SE's first wave start to its last wave end, WAVE_CYCLES the sum of its waves' lifetimes,
GUI_ACTIVE the clocks of the dispatch.
"""
from __future__ import annotations
from collections import Counter

from autogen.amd import gc_11_0_0 as gc, soc21_enum as e
from emu.pci import ModelError
from emu.amdgpu.registers import Block
from emu.amdgpu.sqtt import shape

COUNTERS = 8               # SQ_PERFCOUNTER0..7 (the ones the model has)
SQ_SELECTS = {e.SQ_PERF_SEL_WAVES: "WAVES", e.SQ_PERF_SEL_BUSY_CYCLES: "BUSY_CYCLES", e.SQ_PERF_SEL_WAVE_CYCLES: "WAVE_CYCLES",
              e.SQ_PERF_SEL_INSTS_ALL: "INSTS_ALL", e.SQ_PERF_SEL_INSTS_VALU: "INSTS_VALU", e.SQ_PERF_SEL_INSTS_SALU: "INSTS_SALU",
              e.SQ_PERF_SEL_INSTS_SMEM: "INSTS_SMEM", e.SQ_PERF_SEL_INSTS_LDS: "INSTS_LDS", e.SQ_PERF_SEL_INSTS_FLAT: "INSTS_FLAT",
              e.SQ_PERF_SEL_INSTS_TEX: "INSTS_TEX", e.SQ_PERF_SEL_INSTS_BRANCH: "INSTS_BRANCH",
              e.SQ_PERF_SEL_INSTS_SENDMSG: "INSTS_SENDMSG", e.SQ_PERF_SEL_INSTS_DELAY_ALU: "INSTS_DELAY_ALU"}
STATE_RESET, STATE_COUNT, STATE_STOP = 0, 1, 2


def inst_class(inst) -> str | None:
  """The INSTS_* counter (besides INSTS_ALL) an instruction adds to."""
  enc, op = inst.enc, inst.op
  if enc.startswith("VOP") or enc == "VINTERP": return "INSTS_VALU"
  if enc == "SMEM": return "INSTS_SMEM"
  if enc in ("DS", "LDSDIR"): return "INSTS_LDS"
  if enc in ("FLAT", "GLOBAL", "SCRATCH"): return "INSTS_FLAT"
  if enc in ("MUBUF", "MTBUF", "MIMG"): return "INSTS_TEX"
  if op == "s_branch" or op.startswith("s_cbranch") or op == "s_call_b64": return "INSTS_BRANCH"
  if op.startswith("s_sendmsg"): return "INSTS_SENDMSG"
  if op == "s_delay_alu": return "INSTS_DELAY_ALU"
  if enc in ("SOP1", "SOP2", "SOPC", "SOPK") and not op.startswith("s_waitcnt"): return "INSTS_SALU"
  return None


class PerfCounters(Block):
  """The SQ and GRBM counters of the model (see the module's docstring)."""
  name = ip = "GC"

  def __init__(self, dev):
    super().__init__(dev)
    self.ses = shape(dev.chip.gc_info)[0]
    self.state, self.cs_en = STATE_RESET, False
    self.select = [0] * COUNTERS
    self.grbm_select = 0
    self.counts = [Counter() for _ in range(self.ses)]
    self.gui_active = 0

  def handlers(self):
    h = {self.addr(gc.regCP_PERFMON_CNTL): (None, self._cntl), self.addr(gc.regSQ_PERFCOUNTER_CTRL): (None, self._ctrl),
         self.addr(gc.regGRBM_PERFCOUNTER0_SELECT): (None, self._grbm_select),
         self.addr(gc.regGRBM_PERFCOUNTER0_LO): (lambda a: self.gui_active & 0xFFFFFFFF, self._read_only),
         self.addr(gc.regGRBM_PERFCOUNTER0_HI): (lambda a: self.gui_active >> 32 & 0xFFFFFFFF, self._read_only)}
    for n in range(COUNTERS):
      h[self.addr(getattr(gc, f"regSQ_PERFCOUNTER{n}_SELECT"))] = (lambda a, n=n: self.select[n], lambda a, v, n=n: self._select(n, v))
      h[self.addr(getattr(gc, f"regSQ_PERFCOUNTER{n}_LO"))] = (lambda a, n=n: self._count(n), self._read_only)
    return h

  def _read_only(self, addr: int, value: int) -> None:
    raise ModelError(f"write of {value:#x} to {self.regs.name_of(addr)}: the counter is read-only")

  def _cntl(self, addr: int, value: int) -> None:
    f = gc.regCP_PERFMON_CNTL.decode(value)
    if f["SPM_PERFMON_STATE"]: raise ModelError(f"CP_PERFMON_CNTL.SPM_PERFMON_STATE {f['SPM_PERFMON_STATE']}: streaming counters are not modelled")
    if f["PERFMON_STATE"] not in (STATE_RESET, STATE_COUNT, STATE_STOP):
      raise ModelError(f"CP_PERFMON_CNTL.PERFMON_STATE {f['PERFMON_STATE']} is not modelled (0 reset, 1 count, 2 stop)")
    self.state = f["PERFMON_STATE"]
    if self.state == STATE_RESET: self.counts, self.gui_active = [Counter() for _ in range(self.ses)], 0

  def _ctrl(self, addr: int, value: int) -> None: self.cs_en = bool(gc.regSQ_PERFCOUNTER_CTRL.decode(value)["CS_EN"])

  def _select(self, n: int, value: int) -> None:
    f = gc.regSQ_PERFCOUNTER0_SELECT.decode(value)
    if f["PERF_SEL"] not in SQ_SELECTS:
      raise ModelError(f"SQ_PERFCOUNTER{n}_SELECT.PERF_SEL {f['PERF_SEL']:#x} is not modelled (modelled: "
                       f"{', '.join(f'{v} {k:#x}' for k, v in SQ_SELECTS.items())})")
    if f["SPM_MODE"] or f["PERF_MODE"]: raise ModelError(f"SQ_PERFCOUNTER{n}_SELECT: SPM_MODE and PERF_MODE are not modelled (must be 0)")
    self.select[n] = value

  def _grbm_select(self, addr: int, value: int) -> None:
    sel = gc.regGRBM_PERFCOUNTER0_SELECT.decode(value)["PERF_SEL"]
    if sel not in (0, e.GRBM_PERF_SEL_GUI_ACTIVE):
      raise ModelError(f"GRBM_PERFCOUNTER0_SELECT.PERF_SEL {sel:#x} is not modelled (GUI_ACTIVE {e.GRBM_PERF_SEL_GUI_ACTIVE:#x} is)")
    self.grbm_select = sel

  def _count(self, n: int) -> int:
    index = gc.regGRBM_GFX_INDEX.decode(self.get(gc.regGRBM_GFX_INDEX))
    if index["SE_INDEX"] >= self.ses: raise ModelError(f"GRBM_GFX_INDEX.SE_INDEX {index['SE_INDEX']} selects no shader engine (there are {self.ses})")
    sel = gc.regSQ_PERFCOUNTER0_SELECT.decode(self.select[n])["PERF_SEL"]
    return self.counts[index["SE_INDEX"]][SQ_SELECTS[sel]] & 0xFFFFFFFF if sel in SQ_SELECTS else 0

  def counting(self) -> bool: return self.state == STATE_COUNT

  def record(self, runs: dict, insts: dict, waves: list[tuple], start: int, end: int) -> None:
    """Add a dispatch: `runs`/`insts` what its waves executed (emu/amdgcn/trace.py), `waves` their schedule (sqtt.schedule)
    from `start` to `end` clocks."""
    if self.grbm_select == e.GRBM_PERF_SEL_GUI_ACTIVE: self.gui_active += end - start
    if not self.cs_en: return
    classes = {pc: inst_class(i) for pc, i in insts.items()}
    for (wg, _), pcs in runs.items():
      c = self.counts[wg % self.ses]
      c["WAVES"] += 1
      c["INSTS_ALL"] += len(pcs)
      c.update(cls for pc in pcs if (cls := classes[pc]) is not None)
    for se in range(self.ses):
      mine = [(t0, t1) for s, *_, t0, t1, _ in waves if s == se]
      if mine:
        self.counts[se]["WAVE_CYCLES"] += sum(t1 - t0 for t0, t1 in mine)
        self.counts[se]["BUSY_CYCLES"] += max(t1 for _, t1 in mine) - min(t0 for t0, _ in mine)
