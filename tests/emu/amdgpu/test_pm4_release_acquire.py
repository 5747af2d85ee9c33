"""RELEASE_MEM and ACQUIRE_MEM on the MEC of a booted Navi31, fed by hand: the write, the interrupt and the cache
actions happen as the packet's fields say, combinations a compute queue cannot use stop the queue with an error
naming the packet, and the scalar (K$) and instruction (I$) caches stay stale until a GCR invalidate.
Facts: nvd.h PACKET3_RELEASE_MEM_* / PACKET3_ACQUIRE_MEM_GCR_CNTL_*, soc21_enum.h VGT_EVENT_TYPE, RELEASE_MEM's
DATA_SEL/INT_SEL values (gfx_v11_0.c gfx_v11_0_ring_emit_fence)."""
import pytest

from autogen.amd import gc_11_0_0 as gc, nvd, soc21_enum
from tests.emu.amdgpu.regs import Queue, pm4, acquire_mem, launch, queue_error
from tests.emu.amdgcn.exec_helpers import assemble

CLIENT_GRBM_CP, SRC_CP_EOP = 0x14, 181
GCR_ALL = 0x1FFFF & ~(3 << 2 | 3 << 11 | 1 << 13)       # every ACQUIRE_MEM invalidate / write-back, SEQ 1, no ranges


def rel(va: int, value: int = 0, event: int = soc21_enum.CACHE_FLUSH_AND_INV_TS_EVENT, index: int = 5, gcr: int = 0,
        data_sel: int = 1, int_sel: int = 0, dst_sel: int = 0, ctx: int = 0) -> list[int]:
  return pm4(nvd.PACKET3_RELEASE_MEM, event | index << 8 | gcr, data_sel << 29 | int_sel << 24 | dst_sel << 16,
             va & 0xFFFFFFFF, va >> 32, value & 0xFFFFFFFF, value >> 32, ctx)


@pytest.fixture
def sig(booted):
  mem = booted.iface.alloc(4096, host=True)
  mem.view[:64] = b"\xee" * 64
  return mem


def u64(mem, off=0) -> int: return int.from_bytes(mem.view[off:off + 8], "little")


def test_release_mem_writes_what_data_sel_selects(booted, sig):
  q = Queue(booted, "compute")
  value = 0x1122_3344_5566_7788
  q.submit(rel(sig.va, value, data_sel=0) + rel(sig.va + 8, value, data_sel=1) + rel(sig.va + 16, value, data_sel=2) +
           rel(sig.va + 24, value, data_sel=3) + rel(sig.va + 32, value, data_sel=4, event=soc21_enum.BOTTOM_OF_PIPE_TS) +
           rel(sig.va + 40, value, data_sel=2, event=soc21_enum.CS_DONE, index=6) + rel(sig.va + 48, value, data_sel=1, dst_sel=1))
  q.wait_idle()
  assert u64(sig, 0) == 0xEEEE_EEEE_EEEE_EEEE                        # DATA_SEL 0: nothing is written
  assert u64(sig, 8) == 0xEEEE_EEEE_5566_7788                        # 1: the low 32 bits only
  assert u64(sig, 16) == value                                       # 2: all 64
  assert 0 < u64(sig, 24) <= u64(sig, 32) < 1 << 40                  # 3, 4: the 100 MHz counter, not the data
  assert u64(sig, 40) == value and u64(sig, 48) == 0xEEEE_EEEE_5566_7788


@pytest.mark.parametrize("int_sel, data_sel, posted", [(0, 1, False), (1, 0, True), (2, 1, True), (2, 0, True), (3, 2, False)])
def test_release_mem_interrupts_as_int_sel_says(booted, sig, int_sel, data_sel, posted):
  booted.w(gc.regCP_ME1_PIPE0_INT_CNTL, TIME_STAMP_INT_ENABLE=1)
  q = Queue(booted, "compute")
  q.submit(rel(sig.va, 7, data_sel=data_sel, int_sel=int_sel, ctx=0x1234))
  q.wait_idle()
  entries = [(e[0] & 0xFF, e[0] >> 8 & 0xFF, e[4]) for e in booted.ih_entries()]
  assert entries == ([(CLIENT_GRBM_CP, SRC_CP_EOP, 0x1234)] if posted else [])
  assert u64(sig) == {0: 0xEEEE_EEEE_EEEE_EEEE, 1: 0xEEEE_EEEE_0000_0007, 2: 7}[data_sel]


@pytest.mark.parametrize("fields, match", [
  (dict(event=soc21_enum.CS_DONE), "CS_DONE with event index 5 is not an end-of-pipe event"),
  (dict(event=soc21_enum.BOTTOM_OF_PIPE_TS, index=6), "event index 6 is not an end-of-shader"),
  (dict(event=soc21_enum.PS_DONE, index=6), "PS_DONE with event index 6"),
  (dict(event=soc21_enum.FLUSH_AND_INV_CB_DATA_TS), "FLUSH_AND_INV_CB_DATA_TS with event index 5"),
  (dict(event=soc21_enum.CS_PARTIAL_FLUSH, index=4), "event index 4: a compute queue releases at end of pipe"),
  (dict(event=soc21_enum.CS_DONE, index=6, gcr=nvd.PACKET3_RELEASE_MEM_GCR_GL2_WB), "end of shader) with cache actions"),
  (dict(data_sel=5), "DATA_SEL 5 is GDS data"),
  (dict(data_sel=6), "DATA_SEL 6 is reserved"),
  (dict(int_sel=5), "INT_SEL 5 (a conditional interrupt) is not modelled"),
  (dict(int_sel=1, data_sel=1), "INT_SEL 1 (interrupt only) with DATA_SEL 1"),
  (dict(dst_sel=2), "DST_SEL 2 (a queue write pointer) is not modelled"),
  (dict(gcr=3 << 22), "GCR SEQ 3 is reserved"),
  (dict(gcr=nvd.PACKET3_RELEASE_MEM_GCR_GL2_RANGE), "GL2_RANGE 1: a release has no address range"),
  (dict(gcr=nvd.PACKET3_RELEASE_MEM_GCR_GL2_DISCARD), "GL2_DISCARD"),
  (dict(gcr=nvd.PACKET3_RELEASE_MEM_EXECUTE), "EXECUTE (a queue phase update) is not modelled"),
  (dict(gcr=1 << 24), "sets reserved bits 0x1000000"),
  (dict(va_off=4, data_sel=2), "is not 8-byte aligned for DATA_SEL 2"),
  (dict(va_off=2, data_sel=1), "is not 4-byte aligned for DATA_SEL 1"),
])
def test_release_mem_a_compute_queue_cannot_use_stops_the_queue_naming_the_packet(booted, sig, fields, match):
  va = sig.va + fields.pop("va_off", 0)
  line = queue_error(booted, rel(va, 5, **fields), match)
  assert "RELEASE_MEM" in line and "MEC pipe0" in line
  assert u64(sig) == 0xEEEE_EEEE_EEEE_EEEE                           # nothing written


def test_release_mem_performs_its_gcr_cache_actions(booted, sig):
  q = Queue(booted, "compute")
  caches = booted.model.gpu.shader_memory
  before = dict(caches.actions)
  gcr = nvd.PACKET3_RELEASE_MEM_GCR_GL2_WB | nvd.PACKET3_RELEASE_MEM_GCR_GLV_INV | nvd.PACKET3_RELEASE_MEM_GCR_GLM_WB
  q.submit(rel(sig.va, 1, gcr=gcr) + rel(sig.va, 2, gcr=nvd.PACKET3_RELEASE_MEM_GCR_GL2_INV))
  q.wait_idle()
  done = {k: v - before.get(k, 0) for k, v in caches.actions.items() if v != before.get(k, 0)}
  assert done == {"RELEASE_MEM GL2_WB": 1, "RELEASE_MEM GLV_INV": 1, "RELEASE_MEM GLM_WB": 1, "RELEASE_MEM GL2_INV": 1}


# s[0:1]: the kernel arguments (host-written): u64 out, u32 value; the kernel stores value to out[0]
STORE_ARG = assemble("""
  s_load_b64 s[4:5], s[0:1], 0x0
  s_load_b32 s6, s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v1, s6
  v_mov_b32 v0, 0
  global_store_b32 v0, v1, s[4:5]
  s_endpgm""")


def store_const(value: int) -> bytes:
  return assemble(f"v_mov_b32 v1, {value:#x}\nv_mov_b32 v0, 0\nglobal_store_b32 v0, v1, s[0:1]\ns_endpgm")


@pytest.fixture
def kernel(booted):
  """(code, arguments, output) buffers in VRAM, written by the host."""
  return tuple(booted.iface.alloc(4096, cpu_access=True) for _ in range(3))


def test_host_written_kernel_arguments_reach_a_dispatch_only_after_glk_inv(booted, kernel):
  code, args, out = kernel
  code.view[:len(STORE_ARG)] = STORE_ARG
  q = Queue(booted, "compute")
  def run(value: int, gcr: int | None) -> int:
    args.view[:12] = out.va.to_bytes(8, "little") + value.to_bytes(4, "little")
    q.submit(([] if gcr is None else acquire_mem(gcr)) + launch(code.va, user=(args.va & 0xFFFFFFFF, args.va >> 32)))
    q.wait_idle()
    return int.from_bytes(out.view[:4], "little")
  assert run(111, nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1)) == 111
  assert run(222, None) == 111                                       # no invalidate: the K$ still holds the old line
  assert run(333, GCR_ALL & ~nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1)) == 111   # every other cache is not the K$
  assert run(444, nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1)) == 444


def test_code_rewritten_in_place_runs_stale_until_gli_inv(booted, kernel):
  code, _, out = kernel
  q = Queue(booted, "compute")
  def run(value: int, gcr: int | None) -> int:
    code.view[:len(store_const(value))] = store_const(value)
    q.submit(([] if gcr is None else acquire_mem(gcr)) + launch(code.va, user=(out.va & 0xFFFFFFFF, out.va >> 32)))
    q.wait_idle()
    return int.from_bytes(out.view[:4], "little")
  assert run(0x111, None) == 0x111                                   # first fetch: from memory
  assert run(0x222, GCR_ALL & ~nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(3)) == 0x111   # the I$ still holds the old code
  assert run(0x333, nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(1)) == 0x333


@pytest.mark.parametrize("words, match", [
  ([1, 0xFFFFFFFF, 0xFF, 0, 0, 0xA, 0], "COHER_CNTL 0x1"),
  ([0, 0xFFFFFFFF, 0x1FF, 0, 0, 0xA, 0], "reserved bits of COHER_SIZE_HI"),
  ([0, 0xFFFFFFFF, 0xFF, 0, 0, 0xA, 1 << 19], "GCR bits 0x80000 are reserved"),
  ([0, 0xFFFFFFFF, 0xFF, 0, 0, 0xA, nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_SEQ(3)], "GCR SEQ 3 is reserved"),
  ([0, 0xFFFFFFFF, 0xFF, 0, 0, 0xA, nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_DISCARD(1)], "GL2_DISCARD"),
  ([0, 0xFFFFFFFF, 0xFF, 0, 0, 0xA, nvd.PACKET3_ACQUIRE_MEM_GCR_RANGE_IS_PA], "RANGE_IS_PA"),
  ([0, 0xFFFFFFFF, 0xFF, 0, 0, 0xA], "ACQUIRE_MEM takes 7 payload dwords, got 6"),
])
def test_acquire_mem_fields_the_model_does_not_know_stop_the_queue(booted, words, match):
  assert "ACQUIRE_MEM" in queue_error(booted, pm4(nvd.PACKET3_ACQUIRE_MEM, *words), match)


def test_acquire_mem_performs_the_gcr_actions_it_names(booted):
  q = Queue(booted, "compute")
  caches = booted.model.gpu.shader_memory
  before = dict(caches.actions)
  q.submit(acquire_mem(GCR_ALL))
  q.wait_idle()
  done = {k: v - before.get(k, 0) for k, v in caches.actions.items() if v != before.get(k, 0)}
  assert done == {f"ACQUIRE_MEM {n}": 1 for n in ("GLI_INV", "GLM_WB", "GLM_INV", "GLK_WB", "GLK_INV", "GLV_INV", "GL1_INV", "GL2_INV", "GL2_WB")}
