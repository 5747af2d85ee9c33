"""Thread-trace capture on gfx11 around each traced kernel, from the compute queue, as mesa programs it
(src/amd/common/ac_sqtt.c: ac_sqtt_emit_start, ac_sqtt_emit_stop, ac_sqtt_emit_wait, ac_sqtt_copy_info_regs).

Per launch one buffer: the info block (per SE: WPTR, STATUS, DROPPED_CNTR as COPY_DATA writes them back) in the first
4 KiB, then one `se_bytes` region per shader engine. Start: per SE (GRBM_GFX_INDEX.SE_INDEX) BUF0_SIZE then BUF0_BASE
(in this order: ac_sqtt.c), MASK (compute waves, the SA/WGP/SIMD whose instructions are traced), TOKEN_MASK, CTRL
(MODE 1 last: it starts the trace), then broadcast again and COMPUTE_THREAD_TRACE_ENABLE 1. Stop: COMPUTE_THREAD_TRACE_ENABLE
0, EVENT_WRITE THREAD_TRACE_FINISH, and per SE: wait for STATUS.FINISH_DONE, CTRL MODE 0, wait for STATUS.BUSY 0, copy
the info registers. WPTR counts 32-byte units from (base >> 5) & 0x1FFFFFFF on gfx11; the data is full (overflowed) when
it fills the region or DROPPED_CNTR is non-zero (ac_is_sqtt_complete).

Options: HCQ_SQTT_BUFFER (bytes per SE, default 1 MiB, a multiple of 4 KiB), HCQ_SQTT_WGP and HCQ_SQTT_SIMD (the traced
unit; mesa takes the WGP of the last active CU, the default here is WGP 0 of SA 0, where an emulated GPU places the first
workgroup of each SE), HCQ_SQTT_SES (comma-separated SEs that trace instructions; default all; the others trace waves only).
"""
from __future__ import annotations
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autogen.amd import gc_11_0_0 as gc, nvd, soc21_enum
from drivers.amd.sqtt.waves import Code, Wave, decode, map_code
if TYPE_CHECKING:
  from drivers.amd.device import AMDDevice, AMDProgram
  from drivers.amd.iface import AMDMemory
  from drivers.amd.pm4 import PM4Queue
  from drivers.hcq import Signal

ALIGN = 1 << 12                     # BUF0_BASE / SIZE are in 4 KiB units (ac_sqtt_get_buffer_align_shift)
INFO = 12                           # WPTR, STATUS, DROPPED_CNTR per SE
WPTR_MASK = 0x1FFFFFFF
WTYPE_CS = 1 << 6                   # SQ_THREAD_TRACE_MASK.WTYPE_INCLUDE: compute shaders
EXCLUDE_INSTRUCTIONS = 1 << 2 | 1 << 5 | 1 << 8   # TOKEN_EXCLUDE VALUINST, IMMEDIATE, INST (mesa without instruction timing)
WAIT_EQ, WAIT_NE, POLL = 3, 4, 4    # WAIT_REG_MEM function "3 - ==", "4 - !="; poll interval (ac_sqtt_emit_wait)
COPY_SRC_PERF, COPY_DST_TC_L2 = 4, 2   # COPY_DATA SRC_SEL / DST_SEL (mesa sid.h COPY_DATA_PERF, COPY_DATA_TC_L2)
CTRL_ON = dict(MODE=1, HIWATER=5, UTIL_TIMER=1, RT_FREQ=2, DRAW_EVENT_EN=1, SPI_STALL_EN=1, SQ_STALL_EN=1, REG_AT_HWM=2)  # ac_sqtt_get_ctrl
BROADCAST = gc.regGRBM_GFX_INDEX.encode(SE_BROADCAST_WRITES=1, SA_BROADCAST_WRITES=1, INSTANCE_BROADCAST_WRITES=1)


def _int_env(name: str, default: int) -> int:
  v = os.environ.get(name, "")
  try: return int(v, 0) if v else default
  except ValueError: raise ValueError(f"{name}={v!r} is not a number") from None


@dataclass
class Capture:
  """One traced launch: where its trace is, and (after the queue ran) what each SE wrote."""
  kernel: str
  lib: bytes
  base: int                         # the address the code object was loaded at
  unit: tuple[int, int, int]        # SA, WGP, SIMD whose waves' instructions are traced
  mem: AMDMemory
  ses: int
  se_bytes: int
  begin: Signal
  buffers: list[bytes] = field(default_factory=list)
  overflow: list[bool] = field(default_factory=list)

  def data_va(self, se: int) -> int: return self.mem.va + ALIGN + se * self.se_bytes

  def read(self) -> None:
    """The data each SE wrote (from the copied-back WPTR) and whether it overflowed."""
    if (view := self.mem.view) is None: raise RuntimeError("the trace buffer is not CPU-visible (allocate it with cpu_access)")
    self.buffers, self.overflow = [], []
    for se in range(self.ses):
      wptr, _, dropped = (int.from_bytes(view[se * INFO + 4 * i:se * INFO + 4 * i + 4], "little") for i in range(3))
      n = ((wptr - (self.data_va(se) >> 5)) & WPTR_MASK) * 32
      if n > self.se_bytes: raise RuntimeError(f"SQ_THREAD_TRACE_WPTR of SE {se} ({wptr:#x}) lies beyond its {self.se_bytes}-byte buffer")
      off = ALIGN + se * self.se_bytes
      self.buffers.append(bytes(view[off:off + n]))
      self.overflow.append(n == self.se_bytes or dropped != 0)

  def waves(self, target: str) -> list[Wave]:
    """The decoded waves of the data read, mapped onto the launch's code object."""
    code = Code.from_code_object(self.lib, self.base, self.kernel)
    out = []
    for se, data in enumerate(self.buffers):
      ws = decode(data, se, target, self.unit)
      map_code(ws, code)
      out += ws
    return out


class ThreadTracer:
  """Traces every kernel a device's compute queues launch (PM4Queue calls start/stop around each)."""
  def __init__(self, device: AMDDevice):
    self.device = device
    p = device.iface.props
    self.ses = p["array_count"] // p["simd_arrays_per_engine"]
    self.se_bytes = _int_env("HCQ_SQTT_BUFFER", 1 << 20)
    if self.se_bytes <= 0 or self.se_bytes % ALIGN: raise ValueError(f"HCQ_SQTT_BUFFER={self.se_bytes}: give a positive multiple of {ALIGN} bytes")
    self.unit = (0, _int_env("HCQ_SQTT_WGP", 0), _int_env("HCQ_SQTT_SIMD", 0))
    ses = os.environ.get("HCQ_SQTT_SES", "")
    try: self.detail = {int(s) for s in ses.split(",")} if ses else set(range(self.ses))
    except ValueError: raise ValueError(f"HCQ_SQTT_SES={ses!r}: give shader engines as numbers, e.g. 0,1") from None
    if bad := [s for s in self.detail if not 0 <= s < self.ses]: raise ValueError(f"HCQ_SQTT_SES: the GPU has SEs 0-{self.ses - 1}, not {bad}")
    self.captures: list[Capture] = []

  def _uconfig(self, q: PM4Queue, reg, value: int) -> None:
    q.pkt3(nvd.PACKET3_SET_UCONFIG_REG, self.device.gc_addr(reg) - nvd.PACKET3_SET_UCONFIG_REG_START, value)

  def _select(self, q: PM4Queue, se: int) -> None:
    self._uconfig(q, gc.regGRBM_GFX_INDEX, gc.regGRBM_GFX_INDEX.encode(SE_INDEX=se, INSTANCE_BROADCAST_WRITES=1))

  def start(self, q: PM4Queue, prg: AMDProgram) -> None:
    mem = self.device.alloc_owned(ALIGN + self.ses * self.se_bytes, cpu_access=True)
    c = Capture(prg.name, prg.lib, prg.image.va, self.unit, mem, self.ses, self.se_bytes, self.device.new_signal(name="sqtt"))
    self.captures.append(c)
    sa, wgp, simd = self.unit
    for se in range(self.ses):
      va = c.data_va(se) >> 12
      self._select(q, se)
      self._uconfig(q, gc.regSQ_THREAD_TRACE_BUF0_SIZE, gc.regSQ_THREAD_TRACE_BUF0_SIZE.encode(SIZE=self.se_bytes >> 12, BASE_HI=va >> 32))
      self._uconfig(q, gc.regSQ_THREAD_TRACE_BUF0_BASE, va & 0xFFFFFFFF)
      self._uconfig(q, gc.regSQ_THREAD_TRACE_MASK, gc.regSQ_THREAD_TRACE_MASK.encode(WTYPE_INCLUDE=WTYPE_CS, SA_SEL=sa, WGP_SEL=wgp, SIMD_SEL=simd))
      exclude = 0 if se in self.detail else EXCLUDE_INSTRUCTIONS
      self._uconfig(q, gc.regSQ_THREAD_TRACE_TOKEN_MASK, gc.regSQ_THREAD_TRACE_TOKEN_MASK.encode(TOKEN_EXCLUDE=exclude, BOP_EVENTS_TOKEN_INCLUDE=1))
      self._uconfig(q, gc.regSQ_THREAD_TRACE_CTRL, gc.regSQ_THREAD_TRACE_CTRL.encode(**CTRL_ON))
    self._uconfig(q, gc.regGRBM_GFX_INDEX, BROADCAST)
    q.sh_reg(gc.regCOMPUTE_THREAD_TRACE_ENABLE, 1)
    q._timestamp(c.begin)

  def stop(self, q: PM4Queue) -> None:
    c, status = self.captures[-1], gc.regSQ_THREAD_TRACE_STATUS
    q.sh_reg(gc.regCOMPUTE_THREAD_TRACE_ENABLE, 0)
    q.pkt3(nvd.PACKET3_EVENT_WRITE, nvd.EVENT_TYPE(soc21_enum.THREAD_TRACE_FINISH) | nvd.EVENT_INDEX(0))
    for se in range(self.ses):
      self._select(q, se)
      q.pkt3(nvd.PACKET3_WAIT_REG_MEM, nvd.WAIT_REG_MEM_FUNCTION(WAIT_NE), self.device.gc_addr(status), 0, 0, status.mask("FINISH_DONE"), POLL)
      self._uconfig(q, gc.regSQ_THREAD_TRACE_CTRL, gc.regSQ_THREAD_TRACE_CTRL.encode(**{**CTRL_ON, "MODE": 0}))
      q.pkt3(nvd.PACKET3_WAIT_REG_MEM, nvd.WAIT_REG_MEM_FUNCTION(WAIT_EQ), self.device.gc_addr(status), 0, 0, status.mask("BUSY"), POLL)
      for i, reg in enumerate((gc.regSQ_THREAD_TRACE_WPTR, status, gc.regSQ_THREAD_TRACE_DROPPED_CNTR)):
        va = c.mem.va + se * INFO + 4 * i
        q.pkt3(nvd.PACKET3_COPY_DATA, COPY_SRC_PERF | COPY_DST_TC_L2 << 8 | nvd.WR_CONFIRM, self.device.gc_addr(reg), 0, va, va >> 32)
    self._uconfig(q, gc.regGRBM_GFX_INDEX, BROADCAST)
