"""The SQ's thread trace (SQTT) on gfx11: the SQ_THREAD_TRACE_* registers of each shader engine and the token stream
the model writes from what the waves of a traced dispatch executed (emu/amdgcn/trace.py).

Registers (gc_11_0_0 names; the sequence is mesa's src/amd/common/ac_sqtt.c ac_sqtt_emit_start / ac_sqtt_emit_wait):
- Each SE has its own copy; a write goes to the SE GRBM_GFX_INDEX selects (SE_INDEX), or to all with SE_BROADCAST_WRITES.
- BUF0_BASE / BUF0_SIZE: the buffer at BASE_HI:BASE_LO << 12, SIZE << 12 bytes (ac_sqtt_get_buffer_align_shift: 12
  on gfx11). DOUBLE_BUFFER (BUF1) is not modelled and must stay 0, as must INTERRUPT_EN.
- MASK: SA_SEL, WGP_SEL and SIMD_SEL pick the one SIMD whose waves' instructions are traced; WTYPE_INCLUDE must include CS
  (bit 6) for compute waves to be traced at all. TOKEN_MASK.TOKEN_EXCLUDE drops VALUINST (bit 2), IMMEDIATE (bit 5) and
  INST (bit 8) tokens (the only instruction tokens the model writes); the register tokens it selects are not written.
- CTRL.MODE 1 starts the trace: it checks the buffer is programmed (an error names the register otherwise), sets WPTR to
  its initial value and STATUS.BUSY. HIWATER, UTIL_TIMER, RT_FREQ, the stall and event enables are accepted as hints.
- COMPUTE_THREAD_TRACE_ENABLE (a compute queue's SH register, spi.py) marks the dispatches that are traced.
- WPTR counts 32-byte units from the initial value (base >> 5) & 0x1FFFFFFF, as gfx11 does (ac_sqtt_copy_info_regs);
  a full buffer stops the writes there and DROPPED_CNTR counts the bytes that did not fit (the overflow).
- EVENT_WRITE THREAD_TRACE_FINISH sets STATUS.FINISH_DONE; CTRL.MODE 0 clears STATUS.BUSY.

Timing model (the clock of the tokens; one unit is one shader clock):
- Workgroup k runs on SE k % 6 (as the scratch ring, spi.py), SA n % 2 and WGP n // 2 % 4 of it (n = k // 6); a WGP
  runs one workgroup at a time (the next starts a clock after the last wave of the previous ended). Wave i of a
  workgroup starts 2i clocks after it on SIMD i % 4, slot i // 4, and issues its first instruction a clock later.
- Each SIMD issues one instruction per clock from the waves ready on it (oldest-ready first, then the lower wave):
  ISSUE clocks for its class; a taken branch adds BRANCH_TAKEN. Memory instructions complete LATENCY clocks after issue:
  vector loads count in vmcnt, vector stores (and atomics without return) in vscnt, LDS and scalar loads in lgkmcnt,
  FLAT in both vmcnt and lgkmcnt. s_waitcnt (and s_waitcnt_vscnt / _vmcnt / _lgkmcnt) issues once its counters are
  at most the given values: the wait shows as its stall. s_barrier issues, then the wave waits until every wave of its
  workgroup that has not ended has issued it (released a clock after the last). s_endpgm ends the wave (WAVEEND).
  s_delay_alu issues no token and takes no clock.
"""
from __future__ import annotations
from dataclasses import dataclass, field

from autogen.amd import gc_11_0_0 as gc
from emu.pci import ModelError
from emu.amdgpu.registers import Block

Shape = tuple[int, int, int]   # shader engines, SAs per SE, WGPs per SA (the chip's gc_info: discovery.h gc_info_v1_2)


def shape(gc_info: dict[str, int]) -> Shape: return gc_info["gc_num_se"], gc_info["gc_num_sa_per_se"], gc_info["gc_num_wgp0_per_sa"]
SIMDS = 4                   # SIMD32s per WGP (two per CU)
ALIGN_SHIFT = 12            # BUF0_BASE / SIZE unit
WPTR_UNIT = 32
WPTR_MASK = 0x1FFFFFFF      # WPTR.OFFSET
WTYPE_CS = 1 << 6           # WTYPE_INCLUDE bit of compute shaders (ac_sqtt_get_shader_mask: PS, VS, GS, ES, HS, LS, CS)
EXCLUDE_VALUINST, EXCLUDE_IMMEDIATE, EXCLUDE_INST = 1 << 2, 1 << 5, 1 << 8   # TOKEN_EXCLUDE (ThreadTraceTokenExclude)

ISSUE = {"VALU_TRANS": 4, "VALU_64_SHIFT": 2, "VALU_64": 16}   # clocks a SIMD is busy issuing; every other class takes 1
BRANCH_TAKEN = 2
LATENCY = {"vm": 120, "vs": 80, "lgkm_lds": 32, "lgkm_smem": 40}
TRANS = ("v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_")
SHIFT64 = ("v_lshlrev_b64", "v_lshrrev_b64", "v_ashrrev_i64")   # their own INST class (0xd), as gfx1100 captures show

# gfx11 tokens the model writes, (code, code bits, nibbles, delta (lo, width), fields): the layout facts of the open
# SQTT decoders (tinygrad's renderer/amd/sqtt.py), layout 3
TOKENS = {"LAYOUT_HEADER": (0b0010001, 16, None, {"layout": 7, "simd": 13}),
          "WAVESTART": (0b01100, 8, (5, 2), {"sa": 7, "simd": 8, "wgp": 10, "wave": 13}),
          "WAVEEND": (0b10101, 5, (5, 3), {"sa": 8, "simd": 9, "wgp": 11, "wave": 15}),
          "INST": (0b010, 5, (4, 3), {"wave": 8, "op": 13}),
          "VALUINST": (0b011, 3, (3, 3), {"wave": 7}),
          "IMMEDIATE": (0b1101, 3, (4, 3), {"wave": 7}),
          "TS_DELTA_OR_MARK": (0b0000001, 12, (12, 36), {})}
LAYOUT = 3
INST_OP = {"SALU": 0x0, "SMEM": 0x1, "BRANCH_TAKEN": 0x3, "BRANCH_NOT_TAKEN": 0x4, "CALL": 0x5, "MESSAGE": 0x9, "VALU_TRANS": 0xb,
           "VALU_64_SHIFT": 0xd, "VALU_64": 0xf, "VINTERP": 0x12, "BARRIER": 0x13, "FLAT_LOAD": 0x1c, "FLAT_STORE": 0x1d, "GLOBAL_LOAD": 0x21,
           "GLOBAL_LOAD_VADDR": 0x22, "GLOBAL_STORE": 0x24, "LDS_LOAD": 0x29, "LDS_STORE": 0x2b, "SALU_EXEC": 0x72, "VALU_EXEC": 0x73}
NULL_SGPR = 124


def classify(inst, taken: bool) -> tuple[str, str]:
  """(token, class) of an instruction: the token is INST, VALUINST, IMMEDIATE, END (s_endpgm: WAVEEND) or '' (none)."""
  op, enc = inst.op, inst.enc
  if op == "s_endpgm": return "END", "END"
  if op == "s_delay_alu": return "", ""
  if op == "s_branch" or op.startswith("s_cbranch"): return "INST", "BRANCH_TAKEN" if taken else "BRANCH_NOT_TAKEN"
  if op == "s_barrier": return "INST", "BARRIER"
  if op == "s_call_b64": return "INST", "CALL"
  if op.startswith("s_sendmsg"): return "INST", "MESSAGE"
  if enc == "SOPP" or op.startswith("s_waitcnt"): return "IMMEDIATE", "IMMEDIATE"
  if enc in ("SOP1", "SOP2", "SOPK", "SOPC"): return "INST", "SALU_EXEC" if "saveexec" in op else "SALU"
  if enc == "SMEM": return "INST", "SMEM"
  if enc == "VINTERP": return "INST", "VINTERP"
  if enc.startswith("VOP"):
    if op.startswith("v_cmpx"): return "INST", "VALU_EXEC"
    if op.startswith(TRANS): return "INST", "VALU_TRANS"
    if op in SHIFT64: return "INST", "VALU_64_SHIFT"
    if op.endswith("_f64"): return "INST", "VALU_64"
    return "VALUINST", "VALU"
  load = "load" in op or ("atomic" in op and inst.fields.get("glc"))
  if enc in ("DS", "LDSDIR"): return "INST", "LDS_LOAD" if "store" not in op and "write" not in op else "LDS_STORE"
  if enc in ("FLAT", "SCRATCH"): return "INST", "FLAT_LOAD" if load else "FLAT_STORE"
  if enc == "GLOBAL" and inst.fields.get("saddr", NULL_SGPR) & 0x7F == NULL_SGPR:
    return "INST", "GLOBAL_LOAD_VADDR" if load else "GLOBAL_STORE"
  return "INST", "GLOBAL_LOAD" if load else "GLOBAL_STORE"


def counters(inst, cls: str) -> tuple[str, ...]:
  """The wait counters an instruction's completion is counted in."""
  if cls in ("LDS_LOAD", "LDS_STORE"): return ("lgkm_lds",)
  if cls == "SMEM": return ("lgkm_smem",)
  if cls == "FLAT_LOAD" and inst.enc == "FLAT": return ("vm", "lgkm_lds")
  if cls == "FLAT_STORE" and inst.enc == "FLAT": return ("vs", "lgkm_lds")
  if cls in ("FLAT_LOAD", "GLOBAL_LOAD", "GLOBAL_LOAD_VADDR"): return ("vm",)
  if cls in ("FLAT_STORE", "GLOBAL_STORE"): return ("vs",)
  return ()


def waits(inst) -> dict[str, int]:
  """What an s_waitcnt waits for: counter -> the most that may stay outstanding (gfx11 SIMM16: vmcnt [15:10], lgkmcnt
  [9:4]; the SOPK forms give one counter)."""
  op, simm = inst.op, inst.fields.get("simm16", 0)
  if op == "s_waitcnt": return {"vm": simm >> 10 & 0x3F, "lgkm": simm >> 4 & 0x3F}
  return {{"s_waitcnt_vscnt": "vs", "s_waitcnt_vmcnt": "vm", "s_waitcnt_lgkmcnt": "lgkm"}[op]: simm} \
    if op in ("s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt") else {}


@dataclass
class _Wave:
  index: int
  pcs: list[int]
  simd: int
  slot: int
  start: int
  ready: int
  pos: int = 0
  end: int | None = None
  parked: bool = False
  pending: dict[str, list[int]] = field(default_factory=lambda: {"vm": [], "vs": [], "lgkm_lds": [], "lgkm_smem": []})


@dataclass
class Event:
  time: int
  token: str
  wave: int               # index of the wave in the dispatch's event list (tie order)
  fields: dict


def _outstanding_until(pending: list[int], allowed: int, now: int) -> int:
  """The first time at or after `now` when at most `allowed` of the completions in `pending` (ascending) are still
  ahead; the ones done by then are dropped from it."""
  done = 0
  while done < len(pending) and pending[done] <= now: done += 1
  del pending[:done]
  if len(pending) <= allowed: return now
  return pending[len(pending) - allowed - 1]


def _info(inst, taken: bool) -> tuple:
  """(token, class, issue clocks, extra clocks before the next issue, waits, counters) of an instruction."""
  token, cls = classify(inst, taken)
  return token, cls, ISSUE.get(cls, 1), BRANCH_TAKEN if cls in ("BRANCH_TAKEN", "CALL") else 0, tuple(waits(inst).items()), \
    tuple(counters(inst, cls))


def schedule(runs: dict[tuple[int, int], list[int]], insts: dict, chip: Shape, start: int = 0) -> tuple[list[tuple], int]:
  """The timing model over a dispatch's executed instructions: per wave (se, sa, wgp, simd, slot, start, end, [(time,
  token, class, pc)]), and the clock when the last wave ended; workgroups are placed round-robin over the chip's SEs."""
  ses, sas, wgps = chip
  by_wg: dict[int, dict[int, list[int]]] = {}
  for (wg, wave), pcs in runs.items(): by_wg.setdefault(wg, {})[wave] = pcs
  wgp_free: dict[tuple[int, int, int], int] = {}
  info: dict[tuple[int, bool], tuple] = {}
  out, last = [], start
  for k in sorted(by_wg):
    se, n = k % ses, k // ses
    place = (se, n % sas, n // sas % wgps)
    t0 = max(start, wgp_free.get(place, start))
    waves = [_Wave(i, pcs, i % SIMDS, i // SIMDS, t0 + 2 * i, t0 + 2 * i + 1) for i, pcs in sorted(by_wg[k].items())]
    issues: dict[int, list] = {w.index: [] for w in waves}
    simd_free = [0] * SIMDS
    live = list(waves)
    while True:
      if not live:
        parked = [w for w in waves if w.parked]
        if not parked: break
        release = max(w.ready for w in parked) + 1
        for w in parked: w.parked, w.ready = False, release
        live = parked
        continue
      w = min(live, key=lambda w: (max(w.ready, simd_free[w.simd]), w.index)) if len(live) > 1 else live[0]
      if w.pos == len(w.pcs): raise ModelError(f"workgroup {k} wave {w.index} stopped without s_endpgm")
      pc = w.pcs[w.pos]
      w.pos += 1
      inst = insts[pc]
      taken = w.pos < len(w.pcs) and w.pcs[w.pos] != pc + inst.size
      if (key := (pc, taken)) not in info: info[key] = _info(inst, taken)
      token, cls, cost, extra, wait, ctrs = info[key]
      if not token: continue
      t = max(w.ready, simd_free[w.simd])
      for c, allowed in wait:
        if c == "lgkm":   # one counter for LDS and scalar loads
          merged = sorted(w.pending["lgkm_lds"] + w.pending["lgkm_smem"])
          t = _outstanding_until(merged, allowed, t)
          for q in ("lgkm_lds", "lgkm_smem"): _outstanding_until(w.pending[q], len(w.pending[q]), t)
        else: t = _outstanding_until(w.pending[c], allowed, t)
      simd_free[w.simd] = t + cost
      w.ready = t + cost + extra
      for c in ctrs: w.pending[c].append(t + LATENCY[c])
      issues[w.index].append((t, token, cls, pc))
      if token == "END": w.end = t; live.remove(w)
      elif cls == "BARRIER": w.parked = True; live.remove(w)
    end = max(w.end for w in waves if w.end is not None)
    wgp_free[place] = end + 1
    last = max(last, end)
    out += [(se, place[1], place[2], w.simd, w.slot, w.start, w.end, issues[w.index]) for w in waves]
  return out, last


class Tokens:
  """A gfx11 token stream being written (nibbles, low first) with its running clock."""
  def __init__(self, now: int = 0):
    self.nibbles, self.now = bytearray(), now

  def put(self, name: str, time: int = 0, **values: int) -> None:
    code, n, delta, fields = TOKENS[name]
    word = code
    if delta is not None:
      d = time - self.now
      if d >= 1 << delta[1]:
        self.put("TS_DELTA_OR_MARK", time)
        d = 0
      word |= d << delta[0]
      self.now = time
    for k, v in values.items(): word |= v << fields[k]
    self.nibbles += bytes((word >> 4 * i) & 0xF for i in range(n))

  def data(self) -> bytes:
    """The stream padded with NOP nibbles (0) to whole 32-byte units, as the SQ writes it."""
    nib = self.nibbles + bytes(-len(self.nibbles) % (2 * WPTR_UNIT))
    return bytes(lo | hi << 4 for lo, hi in zip(nib[0::2], nib[1::2]))


@dataclass
class _SE:
  regs: dict[str, int] = field(default_factory=dict)
  wptr: int = 0
  status: int = 0
  dropped: int = 0
  clock: int = 0
  header: bool = False      # the stream since MODE 1 has its LAYOUT_HEADER


PER_SE = ("BUF0_BASE", "BUF0_SIZE", "MASK", "TOKEN_MASK", "CTRL")


class ThreadTrace(Block):
  """The SQ_THREAD_TRACE_* registers of every SE and the writer of their buffers (see the module's docstring)."""
  name = ip = "GC"

  def __init__(self, dev):
    super().__init__(dev)
    self.ses, _, self.wgps = shape(dev.chip.gc_info)
    self.se = [_SE() for _ in range(self.ses)]
    self.mem = dev.mmu.client("SQTT")

  def handlers(self):
    h = {}
    for name in PER_SE:
      reg = getattr(gc, f"regSQ_THREAD_TRACE_{name}")
      h[self.addr(reg)] = (lambda a, n=name: self._target(a)[0].regs.get(n, 0), lambda a, v, n=name: self._write(n, v))
    for name, attr in (("WPTR", "wptr"), ("STATUS", "status"), ("DROPPED_CNTR", "dropped")):
      h[self.addr(getattr(gc, f"regSQ_THREAD_TRACE_{name}"))] = (lambda a, at=attr: getattr(self._target(a)[0], at), self._read_only)
    return h

  def _read_only(self, addr: int, value: int) -> None:
    raise ModelError(f"write of {value:#x} to {self.regs.name_of(addr)}: the register is read-only")

  def _target(self, addr: int | None = None) -> list[_SE]:
    """The SEs GRBM_GFX_INDEX selects (all with SE_BROADCAST_WRITES; a read takes SE_INDEX's)."""
    index = gc.regGRBM_GFX_INDEX.decode(self.get(gc.regGRBM_GFX_INDEX))
    if index["SE_BROADCAST_WRITES"] and addr is None: return self.se
    if index["SE_INDEX"] >= self.ses:
      raise ModelError(f"GRBM_GFX_INDEX.SE_INDEX {index['SE_INDEX']} selects no shader engine (there are {self.ses}) for SQ_THREAD_TRACE_*")
    return [self.se[index["SE_INDEX"]]]

  def _write(self, name: str, value: int) -> None:
    for se in self._target():
      se.regs[name] = value
      if name == "CTRL": self._ctrl(self.se.index(se), se, value)

  def _ctrl(self, i: int, se: _SE, value: int) -> None:
    ctrl = gc.regSQ_THREAD_TRACE_CTRL.decode(value)
    where = f"SQ_THREAD_TRACE_CTRL of SE {i}"
    if ctrl["DOUBLE_BUFFER"]: raise ModelError(f"{where}: DOUBLE_BUFFER (BUF1) is not modelled: trace into BUF0 only")
    if ctrl["INTERRUPT_EN"]: raise ModelError(f"{where}: INTERRUPT_EN is not modelled")
    if ctrl["MODE"] > 1: raise ModelError(f"{where}: MODE {ctrl['MODE']} is not modelled (0 off, 1 on)")
    if ctrl["MODE"] == 0:
      se.status &= ~gc.regSQ_THREAD_TRACE_STATUS.mask("BUSY")
      return
    base, size = self.buffer(se)
    if not size: raise ModelError(f"{where}: MODE 1 with SQ_THREAD_TRACE_BUF0_SIZE.SIZE 0: program the buffer size first")
    if not base: raise ModelError(f"{where}: MODE 1 with SQ_THREAD_TRACE_BUF0_BASE 0: program the buffer address first")
    se.wptr, se.dropped, se.header, se.clock = (base >> 5) & WPTR_MASK, 0, False, 0
    se.status = gc.regSQ_THREAD_TRACE_STATUS.encode(BUSY=1)

  def buffer(self, se: _SE) -> tuple[int, int]:
    size = gc.regSQ_THREAD_TRACE_BUF0_SIZE.decode(se.regs.get("BUF0_SIZE", 0))
    return (size["BASE_HI"] << 32 | se.regs.get("BUF0_BASE", 0)) << ALIGN_SHIFT, size["SIZE"] << ALIGN_SHIFT

  def finish(self) -> None:
    """EVENT_WRITE THREAD_TRACE_FINISH: every tracing SE reports its data written."""
    for se in self.se:
      if se.status & gc.regSQ_THREAD_TRACE_STATUS.mask("BUSY"): se.status |= gc.regSQ_THREAD_TRACE_STATUS.encode(FINISH_DONE=1)

  def tracing(self) -> list[int]:
    """The SEs whose trace is on (CTRL.MODE 1) and include compute waves."""
    return [i for i, se in enumerate(self.se) if gc.regSQ_THREAD_TRACE_CTRL.decode(se.regs.get("CTRL", 0))["MODE"] == 1
            and gc.regSQ_THREAD_TRACE_MASK.decode(se.regs.get("MASK", 0))["WTYPE_INCLUDE"] & WTYPE_CS]

  def start_clock(self) -> int:
    """The clock a traced dispatch starts at: after everything the tracing SEs' streams hold."""
    return max(self.se[i].clock for i in self.tracing()) + 16

  def record(self, waves: list[tuple]) -> None:
    """Write the tokens of a traced dispatch (its schedule()) into the buffer of each tracing SE."""
    for i in self.tracing():
      se = self.se[i]
      mask = gc.regSQ_THREAD_TRACE_MASK.decode(se.regs.get("MASK", 0))
      unit = (mask["SA_SEL"], mask["WGP_SEL"], mask["SIMD_SEL"])
      if mask["WGP_SEL"] >= self.wgps: raise ModelError(f"SQ_THREAD_TRACE_MASK of SE {i}: WGP_SEL {mask['WGP_SEL']}: an SA has {self.wgps} WGPs")
      exclude = gc.regSQ_THREAD_TRACE_TOKEN_MASK.decode(se.regs.get("TOKEN_MASK", 0))["TOKEN_EXCLUDE"]
      dropped = {"VALUINST": exclude & EXCLUDE_VALUINST, "IMMEDIATE": exclude & EXCLUDE_IMMEDIATE, "INST": exclude & EXCLUDE_INST}
      events: list[tuple] = []
      for n, (s, sa, wgp, simd, slot, t0, t1, issues) in enumerate(waves):
        if s != i: continue
        place = dict(sa=sa, wgp=wgp, simd=simd, wave=slot)
        events.append((t0, n, 0, "WAVESTART", place))
        events.append((t1, n, 2, "WAVEEND", place))
        if (sa, wgp, simd) != unit: continue
        for t, token, cls, _ in issues:
          if token == "END" or dropped[token]: continue
          events.append((t, n, 1, token, {"wave": slot, "op": INST_OP[cls]} if token == "INST" else {"wave": slot}))
      tokens = Tokens(se.clock)
      if not se.header: tokens.put("LAYOUT_HEADER", layout=LAYOUT, simd=mask["SIMD_SEL"]); se.header = True
      for t, _, _, name, fields in sorted(events, key=lambda e: e[:3]): tokens.put(name, t, **fields)
      se.clock = tokens.now
      self._store(i, se, tokens.data())

  def _store(self, i: int, se: _SE, data: bytes) -> None:
    base, size = self.buffer(se)
    written = (se.wptr - ((base >> 5) & WPTR_MASK)) * WPTR_UNIT
    room = max(0, size - written)
    if data[:room]: self.mem.write(base + written, data[:room])
    se.wptr = (se.wptr + len(data[:room]) // WPTR_UNIT) & WPTR_MASK
    se.dropped += len(data) - len(data[:room])
