"""Performance counters around each launch on gfx11 (HCQ_PMC=1), from the compute queue as mesa's radeonsi does
(src/gallium/drivers/radeonsi/si_perfcounter.c: si_pc_emit_start / si_pc_emit_stop / si_pc_emit_read, si_pc_emit_shaders):
CP_PERFMON_CNTL disable-and-reset, SQ_PERFCOUNTER_CTRL (compute waves), the SQ_PERFCOUNTER0..7_SELECT and
GRBM_PERFCOUNTER0_SELECT selects, CP_PERFMON_CNTL start; after the kernel EVENT_WRITE PERFCOUNTER_SAMPLE, CP_PERFMON_CNTL
stop (PERFMON_SAMPLE_ENABLE), then per SE (GRBM_GFX_INDEX) COPY_DATA of each SQ counter (32 bits on gfx11) and once the
GRBM counter (64 bits). The values are summed over the SEs."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autogen.amd import gc_11_0_0 as gc, nvd, soc21_enum
if TYPE_CHECKING:
  from drivers.amd.device import AMDDevice, AMDProgram
  from drivers.amd.iface import AMDMemory
  from drivers.amd.pm4 import PM4Queue
  from drivers.hcq import Signal

SQ = {"WAVES": soc21_enum.SQ_PERF_SEL_WAVES, "INSTS_ALL": soc21_enum.SQ_PERF_SEL_INSTS_ALL, "INSTS_VALU": soc21_enum.SQ_PERF_SEL_INSTS_VALU,
      "INSTS_SALU": soc21_enum.SQ_PERF_SEL_INSTS_SALU, "INSTS_SMEM": soc21_enum.SQ_PERF_SEL_INSTS_SMEM,
      "INSTS_LDS": soc21_enum.SQ_PERF_SEL_INSTS_LDS, "INSTS_FLAT": soc21_enum.SQ_PERF_SEL_INSTS_FLAT, "INSTS_TEX": soc21_enum.SQ_PERF_SEL_INSTS_TEX}
SELECT = (gc.regSQ_PERFCOUNTER0_SELECT, gc.regSQ_PERFCOUNTER1_SELECT, gc.regSQ_PERFCOUNTER2_SELECT, gc.regSQ_PERFCOUNTER3_SELECT,
          gc.regSQ_PERFCOUNTER4_SELECT, gc.regSQ_PERFCOUNTER5_SELECT, gc.regSQ_PERFCOUNTER6_SELECT, gc.regSQ_PERFCOUNTER7_SELECT)
COUNTER = (gc.regSQ_PERFCOUNTER0_LO, gc.regSQ_PERFCOUNTER1_LO, gc.regSQ_PERFCOUNTER2_LO, gc.regSQ_PERFCOUNTER3_LO,
           gc.regSQ_PERFCOUNTER4_LO, gc.regSQ_PERFCOUNTER5_LO, gc.regSQ_PERFCOUNTER6_LO, gc.regSQ_PERFCOUNTER7_LO)
PERFMON_RESET, PERFMON_COUNT, PERFMON_STOP = 0, 1, 2     # CP_PERFMON_CNTL.PERFMON_STATE (mesa V_036020_CP_PERFMON_STATE_*)
COPY_SRC_PERF, COPY_DST_MEM, COPY_COUNT_64 = 4, 5, 1 << 16   # COPY_DATA SRC_SEL / DST_SEL / COUNT_SEL
BROADCAST = gc.regGRBM_GFX_INDEX.encode(SE_BROADCAST_WRITES=1, SA_BROADCAST_WRITES=1, INSTANCE_BROADCAST_WRITES=1)


@dataclass
class Sample:
  kernel: str
  mem: AMDMemory
  begin: Signal
  end: Signal
  values: dict[str, int] = field(default_factory=dict)


class PerfCounters:
  """Counts every kernel a device's compute queues launch (PM4Queue calls start/stop around each)."""
  def __init__(self, device: AMDDevice):
    if not device.arch.startswith("gfx11"):
      raise ValueError(f"HCQ_PMC: counter programming is implemented for gfx11 (its registers and selects), {device.name} is {device.arch}")
    self.device = device
    p = device.iface.props
    self.ses = p["array_count"] // p["simd_arrays_per_engine"]
    self.samples: list[Sample] = []

  def _uconfig(self, q: PM4Queue, reg, *values: int) -> None:
    q.pkt3(nvd.PACKET3_SET_UCONFIG_REG, self.device.gc_addr(reg) - nvd.PACKET3_SET_UCONFIG_REG_START, *values)

  def start(self, q: PM4Queue, prg: AMDProgram) -> None:
    dev = self.device
    s = Sample(prg.name, dev.alloc_owned(4 * len(SQ) * self.ses + 8, cpu_access=True), dev.new_signal(name="pmc"), dev.new_signal(name="pmc"))
    self.samples.append(s)
    self._uconfig(q, gc.regCP_PERFMON_CNTL, gc.regCP_PERFMON_CNTL.encode(PERFMON_STATE=PERFMON_RESET))
    self._uconfig(q, gc.regGRBM_GFX_INDEX, BROADCAST)
    self._uconfig(q, gc.regSQ_PERFCOUNTER_CTRL, gc.regSQ_PERFCOUNTER_CTRL.encode(CS_EN=1))
    for reg, sel in zip(SELECT, SQ.values()): self._uconfig(q, reg, sel)
    self._uconfig(q, gc.regGRBM_PERFCOUNTER0_SELECT, gc.regGRBM_PERFCOUNTER0_SELECT.encode(PERF_SEL=soc21_enum.GRBM_PERF_SEL_GUI_ACTIVE))
    q.pkt3(nvd.PACKET3_EVENT_WRITE, nvd.EVENT_TYPE(soc21_enum.PERFCOUNTER_START) | nvd.EVENT_INDEX(0))
    self._uconfig(q, gc.regCP_PERFMON_CNTL, gc.regCP_PERFMON_CNTL.encode(PERFMON_STATE=PERFMON_COUNT))
    q._timestamp(s.begin)

  def stop(self, q: PM4Queue) -> None:
    s = self.samples[-1]
    q._timestamp(s.end)
    q.pkt3(nvd.PACKET3_EVENT_WRITE, nvd.EVENT_TYPE(soc21_enum.PERFCOUNTER_SAMPLE) | nvd.EVENT_INDEX(0))
    self._uconfig(q, gc.regCP_PERFMON_CNTL, gc.regCP_PERFMON_CNTL.encode(PERFMON_STATE=PERFMON_STOP, PERFMON_SAMPLE_ENABLE=1))
    va = s.mem.va
    for se in range(self.ses):
      self._uconfig(q, gc.regGRBM_GFX_INDEX, gc.regGRBM_GFX_INDEX.encode(SE_INDEX=se, INSTANCE_BROADCAST_WRITES=1))
      for reg in COUNTER[:len(SQ)]:
        q.pkt3(nvd.PACKET3_COPY_DATA, COPY_SRC_PERF | COPY_DST_MEM << 8 | nvd.WR_CONFIRM, self.device.gc_addr(reg), 0, va, va >> 32)
        va += 4
    self._uconfig(q, gc.regGRBM_GFX_INDEX, BROADCAST)
    q.pkt3(nvd.PACKET3_COPY_DATA, COPY_SRC_PERF | COPY_DST_MEM << 8 | COPY_COUNT_64 | nvd.WR_CONFIRM,
           self.device.gc_addr(gc.regGRBM_PERFCOUNTER0_LO), 0, va, va >> 32)

  def read(self, s: Sample) -> dict[str, int]:
    """The sample's counters (SQ ones summed over the SEs; GUI_ACTIVE), once its queue ran it."""
    if s.mem.view is None: raise RuntimeError("the counter buffer is not CPU-visible (allocate it with cpu_access)")
    view = bytes(s.mem.view)
    per = [int.from_bytes(view[4 * i:4 * i + 4], "little") for i in range(len(SQ) * self.ses)]
    s.values = {name: sum(per[se * len(SQ) + n] for se in range(self.ses)) for n, name in enumerate(SQ)}
    off = 4 * len(SQ) * self.ses
    s.values["GUI_ACTIVE"] = int.from_bytes(view[off:off + 8], "little")
    return s.values
