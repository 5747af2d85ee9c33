"""SET_SH_REG and DISPATCH_DIRECT on the MEC of a booted Navi31, fed by hand: a compute queue writes only the COMPUTE_*
registers the model acts on, their fields reach the waves (MODE, WGP mode, v0's id components), the ones it cannot
honour stop the queue, and scratch lives in the driver's ring at COMPUTE_DISPATCH_SCRATCH_BASE, laid out as
COMPUTE_TMPRING_SIZE says (per shader engine, dword-swizzled slots). Facts: gc_11_0_0 COMPUTE_* fields, emu/amdgpu/spi.py."""
import numpy as np
import pytest

from autogen.amd import gc_11_0_0 as gc, nvd
from tests.emu.amdgpu.regs import Queue, pm4, sh_reg, launch, queue_error
from tests.emu.amdgcn.exec_helpers import assemble

RSRC2 = gc.regCOMPUTE_PGM_RSRC2
UNMAPPED = 0x2800_0000_5000          # inside VMID 0's window, far above anything the driver allocates


@pytest.fixture
def bufs(booted):
  """(code, output, scratch) buffers in VRAM."""
  return tuple(booted.iface.alloc(4096, cpu_access=True) for _ in range(3))


def run(booted, code: bytes, bufs, **kw) -> np.ndarray:
  """Launch `code` with s[0:1] = the output buffer; the output as u32 once the queue is idle."""
  code_buf, out, _ = bufs
  code_buf.view[:len(code)] = code
  q = Queue(booted, "compute")
  q.submit(launch(code_buf.va, user=(out.va & 0xFFFFFFFF, out.va >> 32), **kw))
  q.wait_idle()
  return np.frombuffer(out.view, np.uint32)


def test_set_sh_reg_refuses_registers_a_compute_queue_does_not_own(booted):
  line = queue_error(booted, sh_reg(gc.regSPI_SHADER_PGM_LO_PS, 0), "not a compute register")
  assert "SPI_SHADER_PGM_LO_PS" in line and "SET_SH_REG" in line
  assert "COMPUTE_VMID" in queue_error(booted, sh_reg(gc.regCOMPUTE_VMID, 0), "is not a register the model acts on")


def test_set_sh_reg_refuses_the_dispatch_initiator(booted):
  assert "COMPUTE_DISPATCH_INITIATOR" in queue_error(booted, sh_reg(gc.regCOMPUTE_DISPATCH_INITIATOR, 1), "not a register the model acts on")


def test_rsrc1_float_mode_dx10_clamp_and_ieee_make_the_initial_mode(booted, bufs):
  code = assemble("s_getreg_b32 s4, hwreg(HW_REG_MODE)\nv_mov_b32 v1, s4\nv_mov_b32 v0, 0\nglobal_store_b32 v0, v1, s[0:1]\ns_endpgm")
  rsrc1 = gc.regCOMPUTE_PGM_RSRC1.encode(FLOAT_MODE=0xF0, DX10_CLAMP=1, IEEE_MODE=1)
  assert run(booted, code, bufs, rsrc1=rsrc1)[0] == 0x3F0
  assert run(booted, code, bufs, rsrc1=gc.regCOMPUTE_PGM_RSRC1.encode(FLOAT_MODE=0xC0))[0] == 0xC0


def test_rsrc1_wgp_mode_reaches_the_waves_and_ldsdir_refuses_it(booted, bufs):
  code = assemble("s_mov_b32 m0, 0\nlds_param_load v1, attr0.x\ns_endpgm")
  rsrc2 = RSRC2.encode(USER_SGPR=2, LDS_SIZE=1)
  run(booted, code, bufs, rsrc2=rsrc2)                                # CU mode: the load runs
  code_buf, out, _ = bufs
  line = queue_error(booted, launch(code_buf.va, user=(0, 0), rsrc2=rsrc2, rsrc1=gc.regCOMPUTE_PGM_RSRC1.encode(WGP_MODE=1)), "WGP mode")
  assert "lds_param_load" in line


@pytest.mark.parametrize("comps, expect", [(0, lambda x, y: x), (1, lambda x, y: x | y << 10)])
def test_rsrc2_tidig_comp_cnt_selects_the_id_components_in_v0(booted, bufs, comps, expect):
  code = assemble("v_mbcnt_lo_u32_b32 v1, -1, 0\nv_lshlrev_b32 v1, 2, v1\nglobal_store_b32 v1, v0, s[0:1]\ns_endpgm")
  got = run(booted, code, bufs, block=(8, 4, 1), rsrc2=RSRC2.encode(USER_SGPR=2, TIDIG_COMP_CNT=comps))[:32]
  np.testing.assert_array_equal(got, [expect(i % 8, i // 8) for i in range(32)])


@pytest.mark.parametrize("packets, match", [
  (sh_reg(gc.regCOMPUTE_PGM_RSRC1, gc.regCOMPUTE_PGM_RSRC1.encode(FP16_OVFL=1)), "COMPUTE_PGM_RSRC1 FP16_OVFL=1 is not modelled"),
  (sh_reg(gc.regCOMPUTE_PGM_RSRC2, RSRC2.encode(TRAP_PRESENT=1)), "COMPUTE_PGM_RSRC2 TRAP_PRESENT=1"),
  (sh_reg(gc.regCOMPUTE_PGM_RSRC2, RSRC2.encode(TG_SIZE_EN=1)), "COMPUTE_PGM_RSRC2 TG_SIZE_EN=1"),
  (sh_reg(gc.regCOMPUTE_PGM_RSRC2, RSRC2.encode(EXCP_EN=1)), "COMPUTE_PGM_RSRC2 EXCP_EN=1"),
  (sh_reg(gc.regCOMPUTE_PGM_RSRC2, RSRC2.encode(USER_SGPR=17)), "USER_SGPR = 17"),
  (sh_reg(gc.regCOMPUTE_PGM_RSRC2, RSRC2.encode(TIDIG_COMP_CNT=3)), "TIDIG_COMP_CNT = 3 is reserved"),
  (sh_reg(gc.regCOMPUTE_PGM_RSRC3, gc.regCOMPUTE_PGM_RSRC3.encode(TRAP_ON_END=1)), "COMPUTE_PGM_RSRC3 TRAP_ON_END=1"),
  (sh_reg(gc.regCOMPUTE_PGM_RSRC3, gc.regCOMPUTE_PGM_RSRC3.encode(SHARED_VGPR_CNT=2)), "SHARED_VGPR_CNT=2"),
  (sh_reg(gc.regCOMPUTE_PGM_RSRC3, 1 << 20), "COMPUTE_PGM_RSRC3 0x100000 sets reserved bits"),
  (sh_reg(gc.regCOMPUTE_RESOURCE_LIMITS, gc.regCOMPUTE_RESOURCE_LIMITS.encode(WAVES_PER_SH=4)), "COMPUTE_RESOURCE_LIMITS WAVES_PER_SH=4"),
  (sh_reg(gc.regCOMPUTE_RESOURCE_LIMITS, gc.regCOMPUTE_RESOURCE_LIMITS.encode(LOCK_THRESHOLD=1)), "LOCK_THRESHOLD=1"),
  (sh_reg(gc.regCOMPUTE_START_X, 1), "COMPUTE_START_X START=1"),
  (sh_reg(gc.regCOMPUTE_RESTART_Y, 3), "COMPUTE_RESTART_Y RESTART=3"),
  (sh_reg(gc.regCOMPUTE_PIPELINESTAT_ENABLE, 1), "COMPUTE_PIPELINESTAT_ENABLE PIPELINESTAT_ENABLE=1"),
  (sh_reg(gc.regCOMPUTE_PERFCOUNT_ENABLE, 1), "COMPUTE_PERFCOUNT_ENABLE PERFCOUNT_ENABLE=1"),
])
def test_fields_the_model_cannot_honour_stop_the_dispatch(booted, bufs, packets, match):
  code_buf, out, _ = bufs
  code_buf.view[:4] = (0xBFB00000).to_bytes(4, "little")            # s_endpgm
  line = queue_error(booted, launch(code_buf.va, user=(0, 0), extra=packets), match)
  assert "DISPATCH_DIRECT" in line


@pytest.mark.parametrize("field", ["RESTORE", "USE_THREAD_DIMENSIONS", "PARTIAL_TG_EN", "ORDERED_APPEND_ENBL"])
def test_initiator_bits_the_model_cannot_honour_stop_the_dispatch(booted, bufs, field):
  code_buf = bufs[0]
  code_buf.view[:4] = (0xBFB00000).to_bytes(4, "little")
  words = launch(code_buf.va)[:-5] + pm4(nvd.PACKET3_DISPATCH_DIRECT, 1, 1, 1,
                                          gc.regCOMPUTE_DISPATCH_INITIATOR.encode(COMPUTE_SHADER_EN=1, CS_W32_EN=1, **{field: 1}))
  assert f"initiator {field} is not modelled" in queue_error(booted, words, "initiator")


# each lane stores tgid * 256 + its id at scratch offset 4, reads it back and writes it to out[tgid * 64 + id]
SCRATCH = assemble("""
  s_lshl_b32 s4, s2, 8
  v_add_nc_u32 v1, s4, v0
  scratch_store_b32 off, v1, off offset:4
  scratch_load_b32 v2, off, off offset:4
  s_waitcnt vmcnt(0)
  v_lshlrev_b32 v3, 2, v0
  v_add_nc_u32 v3, s4, v3
  global_store_b32 v3, v2, s[0:1]
  s_endpgm""")
SCRATCH_RSRC2 = RSRC2.encode(SCRATCH_EN=1, USER_SGPR=2, TGID_X_EN=1)
TMPRING = gc.regCOMPUTE_TMPRING_SIZE.encode(WAVES=2, WAVESIZE=1)   # 2 slots of 256 bytes on each shader engine


def test_scratch_lives_in_the_drivers_ring_one_per_shader_engine_with_swizzled_slots(booted, bufs):
  scratch = bufs[2]
  got = run(booted, SCRATCH, bufs, block=(64, 1, 1), grid=(7, 1, 1), rsrc2=SCRATCH_RSRC2, scratch_va=scratch.va, tmpring=TMPRING)
  np.testing.assert_array_equal(got[:7 * 64], [k * 256 + i for k in range(7) for i in range(64)])
  ring = np.frombuffer(scratch.view, np.uint32)
  for se in range(6):                      # workgroup k ran on engine k % 6 (workgroup 6 after 0, in the same slots)
    k = se or 6
    for wave in range(2):                  # dword 1 of lane l of slot `wave`: (1 * 32 + l) * 4 bytes into the slot
      slot = (se * 2 + wave) * 64
      np.testing.assert_array_equal(ring[slot + 32:slot + 64], k * 256 + wave * 32 + np.arange(32))
  assert not ring[6 * 2 * 64:].any()                                 # nothing past the 6 rings of 2 slots


@pytest.mark.parametrize("kw, match", [
  (dict(tmpring=gc.regCOMPUTE_TMPRING_SIZE.encode(WAVES=1, WAVESIZE=1)), "a workgroup of 2 waves needs 2 scratch slots"),
  (dict(tmpring=gc.regCOMPUTE_TMPRING_SIZE.encode(WAVES=2)), "WAVESIZE is 0"),
  (dict(rsrc2=RSRC2.encode(USER_SGPR=2, TGID_X_EN=1)), "scratch (private) address 0x4 (each lane has 0 bytes)"),
  (dict(scratch_va=UNMAPPED), "scratch backing memory"),
])
def test_scratch_the_registers_do_not_provide_stops_the_dispatch(booted, bufs, kw, match):
  code_buf, out, scratch = bufs
  code_buf.view[:len(SCRATCH)] = SCRATCH
  args = dict(block=(64, 1, 1), rsrc2=SCRATCH_RSRC2, scratch_va=scratch.va, tmpring=TMPRING) | kw
  queue_error(booted, launch(code_buf.va, user=(out.va & 0xFFFFFFFF, out.va >> 32), **args), match)
  assert not np.frombuffer(out.view, np.uint32).any()


def test_a_lane_owns_its_share_of_the_wave_slot(booted, bufs):
  """WAVESIZE 1 gives a wave32 lane 256 / 32 = 8 bytes: a store at offset 8 is outside it."""
  code_buf, out, scratch = bufs
  code = assemble("v_mov_b32 v1, 1\nscratch_store_b32 off, v1, off offset:8\ns_endpgm")
  code_buf.view[:len(code)] = code
  queue_error(booted, launch(code_buf.va, rsrc2=RSRC2.encode(SCRATCH_EN=1), scratch_va=scratch.va, tmpring=TMPRING),
              "(each lane has 8 bytes)")
