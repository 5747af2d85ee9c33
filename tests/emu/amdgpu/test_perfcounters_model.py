"""The SQ and GRBM performance counters of the emulated Navi31, programmed from a compute queue as radeonsi does
(CP_PERFMON_CNTL reset/count/stop, SQ_PERFCOUNTER_CTRL, the selects; read per SE through GRBM_GFX_INDEX and COPY_DATA):
instruction and wave counts equal what the program executes (derived by hand from its control flow), per SE as the
workgroups are placed; a select the model does not have is refused by name."""
import numpy as np

from autogen.amd import gc_11_0_0 as gc, nvd, soc21_enum as e
from tests.emu.amdgpu.regs import BASES, Queue, pm4, launch, queue_error
from tests.emu.amdgpu.test_sqtt_model import LOOP, uconfig, SES
from tests.emu.amdgcn.exec_helpers import assemble

SELECTS = ("WAVES", "INSTS_ALL", "INSTS_VALU", "INSTS_SALU", "INSTS_SMEM", "INSTS_FLAT", "INSTS_BRANCH", "INSTS_DELAY_ALU")


def per_wave(loops: int) -> dict[str, int]:
  """LOOP's counts for one wave: s_mov, loops x (v_add, s_sub, s_cmp, s_cbranch), v_mov, s_load, s_waitcnt, s_delay_alu,
  global_store, s_barrier, s_endpgm."""
  return {"WAVES": 1, "INSTS_ALL": 1 + 4 * loops + 7, "INSTS_VALU": loops + 1, "INSTS_SALU": 1 + 2 * loops, "INSTS_SMEM": 1,
          "INSTS_FLAT": 1, "INSTS_BRANCH": loops, "INSTS_DELAY_ALU": 1}


def counted(booted, grid, block, loops=3, cs_en=1):
  code_buf, out, info = (booted.iface.alloc(4096, cpu_access=True) for _ in range(3))
  code = assemble(LOOP.format(loops=loops))
  code_buf.view[:len(code)] = code
  cntl = gc.regCP_PERFMON_CNTL
  words = uconfig(gc.regCP_PERFMON_CNTL, cntl.encode(PERFMON_STATE=0))
  words += uconfig(gc.regSQ_PERFCOUNTER_CTRL, gc.regSQ_PERFCOUNTER_CTRL.encode(CS_EN=cs_en))
  for n, name in enumerate(SELECTS): words += uconfig(getattr(gc, f"regSQ_PERFCOUNTER{n}_SELECT"), getattr(e, f"SQ_PERF_SEL_{name}"))
  words += uconfig(gc.regGRBM_PERFCOUNTER0_SELECT, e.GRBM_PERF_SEL_GUI_ACTIVE) + uconfig(gc.regCP_PERFMON_CNTL, cntl.encode(PERFMON_STATE=1))
  words += launch(code_buf.va, user=(out.va & 0xFFFFFFFF, out.va >> 32), block=block, grid=grid)
  words += pm4(nvd.PACKET3_EVENT_WRITE, e.PERFCOUNTER_SAMPLE) + uconfig(gc.regCP_PERFMON_CNTL, cntl.encode(PERFMON_STATE=2, PERFMON_SAMPLE_ENABLE=1))
  for se in range(SES):
    words += uconfig(gc.regGRBM_GFX_INDEX, gc.regGRBM_GFX_INDEX.encode(SE_INDEX=se, INSTANCE_BROADCAST_WRITES=1))
    for n in range(len(SELECTS)):
      va = info.va + 4 * (se * len(SELECTS) + n)
      words += pm4(nvd.PACKET3_COPY_DATA, 4 | 5 << 8, getattr(gc, f"regSQ_PERFCOUNTER{n}_LO").addr(BASES["GC"]), 0, va & 0xFFFFFFFF, va >> 32)
  va = info.va + 4 * SES * len(SELECTS)
  words += pm4(nvd.PACKET3_COPY_DATA, 4 | 5 << 8 | 1 << 16, gc.regGRBM_PERFCOUNTER0_LO.addr(BASES["GC"]), 0, va & 0xFFFFFFFF, va >> 32)
  q = Queue(booted, "compute")
  q.submit(words)
  q.wait_idle()
  v = np.frombuffer(info.view, np.uint32)
  return v[:SES * len(SELECTS)].reshape(SES, len(SELECTS)), int(v[SES * len(SELECTS)]) | int(v[SES * len(SELECTS) + 1]) << 32


def test_counts_equal_what_the_waves_executed(booted):
  counts, gui = counted(booted, grid=(8, 1, 1), block=(96, 1, 1), loops=5)     # 3 waves per workgroup
  wgs_on = [len(range(se, 8, SES)) for se in range(SES)]                       # workgroup k runs on SE k % 6
  expect = np.array([[per_wave(5)[name] * 3 * n for name in SELECTS] for n in wgs_on])
  np.testing.assert_array_equal(counts, expect)
  assert gui > 0


def test_without_cs_en_the_sq_counts_nothing(booted):
  counts, gui = counted(booted, grid=(2, 1, 1), block=(32, 1, 1), cs_en=0)
  assert not counts.any() and gui > 0


def test_a_select_the_model_lacks_is_refused_by_name(booted):
  line = queue_error(booted, uconfig(gc.regSQ_PERFCOUNTER3_SELECT, e.SQ_PERF_SEL_INSTS_EXP), "SQ_PERFCOUNTER3_SELECT")
  assert "not modelled" in line
