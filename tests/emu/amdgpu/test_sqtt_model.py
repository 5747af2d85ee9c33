"""The thread trace of the emulated Navi31, programmed from a compute queue as mesa's ac_sqtt.c does (GRBM_GFX_INDEX
per SE, SQ_THREAD_TRACE_BUF0_SIZE/BASE, MASK, TOKEN_MASK, CTRL; COMPUTE_THREAD_TRACE_ENABLE; THREAD_TRACE_FINISH, the
STATUS waits, CTRL off and the COPY_DATA of WPTR/STATUS/DROPPED_CNTR), decoded by drivers/amd/sqtt: each traced wave's token
classes follow the program's control flow, wave placement and counts match the dispatch, a small buffer overflows and a
misprogrammed register names itself."""
import numpy as np

from autogen.amd import gc_11_0_0 as gc, nvd, soc21_enum
from tests.emu.amdgpu.regs import BASES, Queue, pm4, sh_reg, launch, queue_error
from tests.emu.amdgcn.exec_helpers import assemble
from drivers.amd.sqtt import decode

SES = 6
LOOP = """s_mov_b32 s2, {loops}
loop:
  v_add_f32 v1, v1, v1
  s_sub_u32 s2, s2, 1
  s_cmp_lg_u32 s2, 0
  s_cbranch_scc1 loop
v_mov_b32 v0, 0
s_load_b32 s3, s[0:1], 0x0
s_waitcnt lgkmcnt(0)
s_delay_alu instid0(VALU_DEP_1)
global_store_b32 v0, v1, s[0:1]
s_barrier
s_endpgm"""
# the classes of the tokens one wave of LOOP issues (s_delay_alu issues none; s_endpgm is its WAVEEND)
EXPECT = ["SALU"] + ["VALU", "SALU", "SALU", "BRANCH_TAKEN"] * 2 + ["VALU", "SALU", "SALU", "BRANCH_NOT_TAKEN"] + \
         ["VALU", "SMEM", "IMMEDIATE", "GLOBAL_STORE_2", "BARRIER"]


def uconfig(reg, value: int) -> list[int]:
  return pm4(nvd.PACKET3_SET_UCONFIG_REG, reg.addr(BASES["GC"]) - nvd.PACKET3_SET_UCONFIG_REG_START, value)


def start(buf_va: int, se_bytes: int, wgp: int = 0, simd: int = 0, exclude: int = 0) -> list[int]:
  words = []
  for se in range(SES):
    va = (buf_va + se * se_bytes) >> 12
    words += uconfig(gc.regGRBM_GFX_INDEX, gc.regGRBM_GFX_INDEX.encode(SE_INDEX=se, INSTANCE_BROADCAST_WRITES=1))
    words += uconfig(gc.regSQ_THREAD_TRACE_BUF0_SIZE, gc.regSQ_THREAD_TRACE_BUF0_SIZE.encode(SIZE=se_bytes >> 12, BASE_HI=va >> 32))
    words += uconfig(gc.regSQ_THREAD_TRACE_BUF0_BASE, va & 0xFFFFFFFF)
    words += uconfig(gc.regSQ_THREAD_TRACE_MASK, gc.regSQ_THREAD_TRACE_MASK.encode(WTYPE_INCLUDE=0x55, WGP_SEL=wgp, SIMD_SEL=simd))
    words += uconfig(gc.regSQ_THREAD_TRACE_TOKEN_MASK, gc.regSQ_THREAD_TRACE_TOKEN_MASK.encode(TOKEN_EXCLUDE=exclude, BOP_EVENTS_TOKEN_INCLUDE=1))
    words += uconfig(gc.regSQ_THREAD_TRACE_CTRL, gc.regSQ_THREAD_TRACE_CTRL.encode(MODE=1, HIWATER=5, UTIL_TIMER=1, RT_FREQ=2,
                                                                                 DRAW_EVENT_EN=1, SPI_STALL_EN=1, SQ_STALL_EN=1, REG_AT_HWM=2))
  words += uconfig(gc.regGRBM_GFX_INDEX, gc.regGRBM_GFX_INDEX.encode(SE_BROADCAST_WRITES=1, SA_BROADCAST_WRITES=1, INSTANCE_BROADCAST_WRITES=1))
  return words + sh_reg(gc.regCOMPUTE_THREAD_TRACE_ENABLE, 1)


def stop(info_va: int) -> list[int]:
  status = gc.regSQ_THREAD_TRACE_STATUS
  words = sh_reg(gc.regCOMPUTE_THREAD_TRACE_ENABLE, 0) + pm4(nvd.PACKET3_EVENT_WRITE, soc21_enum.THREAD_TRACE_FINISH)
  for se in range(SES):
    words += uconfig(gc.regGRBM_GFX_INDEX, gc.regGRBM_GFX_INDEX.encode(SE_INDEX=se, INSTANCE_BROADCAST_WRITES=1))
    words += pm4(nvd.PACKET3_WAIT_REG_MEM, 4, status.addr(BASES["GC"]), 0, 0, status.mask("FINISH_DONE"), 4)
    words += uconfig(gc.regSQ_THREAD_TRACE_CTRL, 0)
    words += pm4(nvd.PACKET3_WAIT_REG_MEM, 3, status.addr(BASES["GC"]), 0, 0, status.mask("BUSY"), 4)
    for i, reg in enumerate((gc.regSQ_THREAD_TRACE_WPTR, status, gc.regSQ_THREAD_TRACE_DROPPED_CNTR)):
      va = info_va + se * 12 + i * 4
      words += pm4(nvd.PACKET3_COPY_DATA, 4 | 2 << 8 | 1 << 20, reg.addr(BASES["GC"]), 0, va & 0xFFFFFFFF, va >> 32)
  return words + uconfig(gc.regGRBM_GFX_INDEX, gc.regGRBM_GFX_INDEX.encode(SE_BROADCAST_WRITES=1, SA_BROADCAST_WRITES=1,
                                                                           INSTANCE_BROADCAST_WRITES=1))


def traced(booted, grid, block, se_bytes=1 << 16, loops=3, **kw):
  code_buf, out, info = (booted.iface.alloc(4096, cpu_access=True) for _ in range(3))
  tt = booted.iface.alloc(SES * se_bytes, cpu_access=True)
  code = assemble(LOOP.format(loops=loops))
  code_buf.view[:len(code)] = code
  q = Queue(booted, "compute")
  q.submit(start(tt.va, se_bytes, **kw) + launch(code_buf.va, user=(out.va & 0xFFFFFFFF, out.va >> 32), block=block, grid=grid) + stop(info.va))
  q.wait_idle()
  regs = np.frombuffer(info.view, np.uint32)[:3 * SES].reshape(SES, 3)
  bufs = []
  for se in range(SES):
    written = (int(regs[se, 0]) - ((tt.va + se * se_bytes) >> 5 & 0x1FFFFFFF)) * 32
    bufs.append(bytes(tt.view[se * se_bytes:se * se_bytes + written]))
  return bufs, regs


def test_traced_waves_follow_the_program(booted):
  bufs, regs = traced(booted, grid=(13, 1, 1), block=(64, 1, 1))
  assert (regs[:, 2] == 0).all() and (regs[:, 1] & gc.regSQ_THREAD_TRACE_STATUS.mask("BUSY") == 0).all()
  waves = [w for se, b in enumerate(bufs) for w in decode(b, se, unit=(0, 0, 0))]
  assert len(waves) == 13 * 2 and all(w.start is not None and w.end > w.start for w in waves)
  # workgroup k on SE k % 6, SA n % 2, WGP n // 2 % 4 (n = k // 6); its two waves on SIMD 0 and 1
  assert sorted((w.se, w.sa, w.wgp, w.simd) for w in waves) == sorted((k % 6, k // 6 % 2, k // 12 % 4, i) for k in range(13) for i in range(2))
  detail = [w for w in waves if w.detail]
  assert len(detail) == 6       # wave 0 of workgroups 0-5: SA 0, WGP 0, SIMD 0 of each SE
  for w in detail: assert [i.op for i in w.insts] == EXPECT
  for w in waves:
    if not w.detail: assert w.insts == []


def test_token_exclude_and_the_traced_simd(booted):
  bufs, _ = traced(booted, grid=(1, 1, 1), block=(128, 1, 1), simd=2, exclude=1 << 2)   # no VALUINST
  (w,) = [w for w in decode(bufs[0], 0, unit=(0, 0, 2)) if w.detail]
  assert [i.op for i in w.insts] == [op for op in EXPECT if op != "VALU"]


def test_a_small_buffer_overflows(booted):
  bufs, regs = traced(booted, grid=(1, 1, 1), block=(1024, 1, 1), se_bytes=4096, loops=100)
  assert regs[0, 2] > 0 and len(bufs[0]) == 4096     # DROPPED_CNTR counts what did not fit; WPTR stops at the end
  (w, *_) = [w for w in decode(bufs[0]) if w.detail]
  assert [i.op for i in w.insts[:9]] == EXPECT[:9]


def test_enabling_without_a_buffer_names_the_register(booted):
  words = uconfig(gc.regSQ_THREAD_TRACE_CTRL, gc.regSQ_THREAD_TRACE_CTRL.encode(MODE=1))
  assert "SQ_THREAD_TRACE_BUF0_SIZE" in queue_error(booted, words, "SQ_THREAD_TRACE_CTRL")
