"""GMC TLB invalidation, MEC HQD queues and SDMA0 rings of a device the AM driver booted, fed through their doorbells,
and the IH entries device errors raise. Facts: gmc_v11_0_flush_gpu_tlb, gfx_v11_0_compute_mqd_init, sdma_v6_0_gfx_resume, gfx_v11_0/gmc_v11_0 ids,
soc15 IV format."""
import pytest

from autogen.amd import gc_11_0_0 as gc, mmhub_3_0_0 as mmhub, nbio_4_3_0 as nbio, nvd, osssys_6_0_0 as oss, sdma_v6_0_0_pkt_open as sdma_defs
from autogen.amd import amdgpu_vm as vm
from emu.amdgpu.registers import ModelError
from drivers.amd.sdma_v6_0_pkt import pkt as sdma_pkt
from tests.emu.amdgpu.regs import Queue, release_mem, pm4

CLIENT_GFX, CLIENT_GRBM_CP, SRC_UTCL2_FAULT, SRC_SDMA_TRAP, SRC_CP_EOP = 0xA, 0x14, 0, 49, 181
UNMAPPED = 0x2800_0000_5000          # inside VMID 0's window, far above anything the driver allocates


@pytest.fixture
def sig(booted):
  return booted.iface.alloc(4096, host=True)


def u32(mem, off=0) -> int: return int.from_bytes(mem.view[off:off + 4], "little")
def u64(mem, off=0) -> int: return int.from_bytes(mem.view[off:off + 8], "little")


def test_tlb_invalidation_is_acked_and_the_mm_semaphore_is_exclusive(booted):
  assert booted.r(mmhub.regMMVM_INVALIDATE_ENG17_SEM) == 1            # acquired
  assert booted.r(mmhub.regMMVM_INVALIDATE_ENG17_SEM) == 0            # held: a second reader does not get it
  booted.w(mmhub.regMMVM_INVALIDATE_ENG17_REQ, 0xf80001)
  assert booted.r(mmhub.regMMVM_INVALIDATE_ENG17_ACK) == 1
  booted.w(mmhub.regMMVM_INVALIDATE_ENG17_SEM, 0)
  assert booted.r(mmhub.regMMVM_INVALIDATE_ENG17_SEM) == 1
  booted.w(gc.regGCVM_INVALIDATE_ENG17_REQ, PER_VMID_INVALIDATE_REQ=0x5, INVALIDATE_L2_PTES=1)
  assert booted.r(gc.regGCVM_INVALIDATE_ENG17_ACK) == 0x5
  with pytest.raises(ModelError, match="read-only"): booted.w(gc.regGCVM_INVALIDATE_ENG17_ACK, 0)


def test_pm4_release_mem_through_the_doorbell_writes_the_signal(booted, sig):
  q = Queue(booted, "compute")
  q.submit(release_mem(sig.va, 0x1234_5678) + release_mem(sig.va + 8, 0xAABB_CCDD_0011_2233, data_sel=2) +
           release_mem(sig.va + 16, 0, data_sel=3))
  q.wait_idle()
  assert (u32(sig), u64(sig, 8)) == (0x1234_5678, 0xAABB_CCDD_0011_2233)
  assert u64(sig, 16) > 0                                             # the 100 MHz GPU clock
  booted.w(gc.regGRBM_GFX_CNTL, MEID=1)
  assert booted.r(gc.regCP_HQD_PQ_RPTR) == q.put and booted.r(gc.regCP_HQD_ACTIVE) == 1


def test_hqd_dequeue_stops_the_queue_and_frees_its_doorbell(booted, sig):
  q = Queue(booted, "compute")
  booted.w(gc.regGRBM_GFX_CNTL, MEID=1)
  booted.w(gc.regCP_HQD_DEQUEUE_REQUEST, DEQUEUE_REQ=2)
  booted.wait(lambda: booted.r(gc.regCP_HQD_ACTIVE) == 0, "HQD dequeue timeout")
  with pytest.raises(ModelError, match="no queue is bound"): q.submit(release_mem(sig.va, 1))
  assert u32(sig) == 0


def test_hqd_activation_needs_a_running_mec(booted):
  booted.w(gc.regGRBM_GFX_CNTL, MEID=1)
  booted.w(gc.regCP_MEC_RS64_PRGRM_CNTR_START, 0)                     # not the MEC firmware's entry point
  with pytest.raises(ModelError, match="entry point is 0x7000000003000"): Queue(booted, "compute")
  booted.w(gc.regCP_MEC_RS64_CNTL, MEC_HALT=1)
  with pytest.raises(ModelError, match="MEC_HALT"): Queue(booted, "compute")
  booted.w(gc.regGRBM_GFX_CNTL, 0)
  with pytest.raises(ModelError, match="MEID"): booted.r(gc.regCP_HQD_ACTIVE)


def test_sdma_ring_copies_vram_to_host_memory_and_fences(booted, sig):
  q = Queue(booted, "sdma")
  data = bytes(range(256)) * 64
  src, dst = booted.iface.alloc(len(data), cpu_access=True), booted.iface.alloc(len(data), host=True)
  src.view[:] = data
  q.submit(sdma_pkt("COPY_LINEAR", 7, HEADER_op=sdma_defs.SDMA_OP_COPY, COUNT_count=len(data) - 1, SRC_ADDR_LO_src_addr_31_0=src.va & 0xFFFFFFFF,
                    SRC_ADDR_HI_src_addr_63_32=src.va >> 32, DST_ADDR_LO_dst_addr_31_0=dst.va & 0xFFFFFFFF, DST_ADDR_HI_dst_addr_63_32=dst.va >> 32) +
           sdma_pkt("FENCE", 4, HEADER_op=sdma_defs.SDMA_OP_FENCE, ADDR_LO_addr_31_0=sig.va & 0xFFFFFFFF, ADDR_HI_addr_63_32=sig.va >> 32,
                    DATA_data=7))
  q.wait_idle()
  assert bytes(dst.view) == data and u32(sig) == 7
  assert booted.r(gc.regSDMA0_QUEUE0_RB_RPTR) == q.put                # bytes
  booted.w(gc.regSDMA0_QUEUE0_RB_CNTL, 0)
  with pytest.raises(ModelError, match="no queue is bound"): q.submit(sdma_pkt("NOP", 1, HEADER_op=sdma_defs.SDMA_OP_NOP))


@pytest.mark.parametrize("mapped", [False, True])
def test_gpu_page_fault_posts_a_utcl2_entry_and_latches_the_fault(booted, sig, mapped):
  q = Queue(booted, "compute")
  bad = UNMAPPED
  if mapped:                                                          # a read-only page: a permission fault
    bad = booted.iface.alloc(4096, cpu_access=True).va
    pte = booted.pte(bad)
    booted.vram.write64(pte, booted.vram.read64(pte) & ~vm.AMDGPU_PTE_WRITEABLE)
    booted.flush_tlb()
  q.submit(release_mem(bad, 1))
  booted.wait(lambda: booted.r(gc.regGCVM_L2_PROTECTION_FAULT_STATUS) != 0, "fault status")
  status = gc.regGCVM_L2_PROTECTION_FAULT_STATUS.decode(booted.r(gc.regGCVM_L2_PROTECTION_FAULT_STATUS))
  assert (status["MAPPING_ERROR"], status["PERMISSION_FAULTS"]) == ((0, 4) if mapped else (1, 5))   # WRITE; VALID | WRITE
  assert (status["RW"], status["CID"]) == (1, 5)                     # a write by the CPC (compute CP)
  assert booted.r(gc.regGCVM_L2_PROTECTION_FAULT_ADDR_LO32) == (bad >> 12) & 0xFFFFFFFF
  assert booted.r(gc.regGCVM_L2_PROTECTION_FAULT_ADDR_HI32) == bad >> 44
  (e,) = booted.ih_entries()
  assert (e[0] & 0xFF, e[0] >> 8 & 0xFF) == (CLIENT_GFX, SRC_UTCL2_FAULT)
  assert (e[4] << 12 | (e[5] & 0xF) << 44, e[5] & 0x20) == (bad, 0x20)  # VA[43:12], VA[47:44], write
  booted.w(gc.regGCVM_L2_PROTECTION_FAULT_CNTL, CLEAR_PROTECTION_FAULT_STATUS_ADDR=1)
  assert booted.r(gc.regGCVM_L2_PROTECTION_FAULT_STATUS) == 0
  q.submit(release_mem(sig.va, 5))                                   # the faulted queue is hung
  booted.wait(lambda: any("page fault" in line for line in booted.model.log_lines), "the model's log line")
  assert u32(sig) == 0


def test_device_dma_needs_bus_mastering(booted, sig):
  q = Queue(booted, "compute")
  booted.pci.write_config(0x04, 2, booted.pci.read_config(0x04, 2) & ~0x4)
  q.submit(release_mem(sig.va, 1))
  booted.wait(lambda: booted.r(gc.regGCVM_L2_PROTECTION_FAULT_STATUS) != 0, "fault status")
  booted.wait(lambda: any("bus mastering disabled" in line for line in booted.model.log_lines), "the model's log line")
  assert u32(sig) == 0


def test_interrupt_sources_post_ih_entries_when_enabled(booted, sig):
  q, s = Queue(booted, "compute"), Queue(booted, "sdma")
  q.submit(release_mem(sig.va, 1, int_sel=2, ctx=0x77))              # EOP interrupts are off: no entry
  q.wait_idle()
  booted.w(gc.regCP_ME1_PIPE0_INT_CNTL, TIME_STAMP_INT_ENABLE=1, OPCODE_ERROR_INT_ENABLE=1)
  q.submit(release_mem(sig.va, 2, int_sel=2, ctx=0x78))
  q.wait_idle()
  s.submit(sdma_pkt("TRAP", 2, HEADER_op=sdma_defs.SDMA_OP_TRAP, INT_CONTEXT_int_context=0x99))   # the driver set SDMA0_CNTL.TRAP_ENABLE
  s.wait_idle()
  q.submit(pm4(0xEE, 0))                                              # no such PM4 opcode: the CP reports it
  booted.wait(lambda: any("opcode 0xee" in line for line in booted.model.log_lines), "bad opcode")
  got = [(e[0] & 0xFF, e[0] >> 8 & 0xFF, e[4]) for e in booted.ih_entries()]
  assert got == [(CLIENT_GRBM_CP, SRC_CP_EOP, 0x78), (CLIENT_GFX, SRC_SDMA_TRAP, 0x99), (CLIENT_GRBM_CP, 183, 0)]


def test_grbm_soft_reset_drops_every_queue(booted):
  q, s = Queue(booted, "compute"), Queue(booted, "sdma")
  booted.w(gc.regGRBM_SOFT_RESET, SOFT_RESET_CP=1, SOFT_RESET_CPC=1, SOFT_RESET_SDMA0=1)
  booted.w(gc.regGRBM_SOFT_RESET, 0)
  booted.w(gc.regGRBM_GFX_CNTL, MEID=1)
  assert booted.r(gc.regCP_HQD_ACTIVE) == 0 and booted.r(gc.regSDMA0_QUEUE0_RB_CNTL) & 1 == 0
  for queue in (q, s):
    with pytest.raises(ModelError, match="no queue is bound"): queue.submit([0])


def test_shader_trap_posts_an_sq_error_entry(booted):
  code = booted.iface.alloc(4096, cpu_access=True)
  code.view[:8] = (0xBF900002).to_bytes(4, "little") + (0xBFB00000).to_bytes(4, "little")   # s_trap 2; s_endpgm
  sh = lambda reg, *v: pm4(nvd.PACKET3_SET_SH_REG, booted.addr(reg) - nvd.PACKET3_SET_SH_REG_START, *v)
  q = Queue(booted, "compute")
  q.submit(sh(gc.regCOMPUTE_PGM_LO, code.va >> 8 & 0xFFFFFFFF, code.va >> 40) + sh(gc.regCOMPUTE_PGM_RSRC1, 0, 0) +
           sh(gc.regCOMPUTE_NUM_THREAD_X, 32, 1, 1) +
           pm4(nvd.PACKET3_DISPATCH_DIRECT, 1, 1, 1, gc.regCOMPUTE_DISPATCH_INITIATOR.encode(COMPUTE_SHADER_EN=1, CS_W32_EN=1)))
  booted.wait(lambda: any("s_trap" in line for line in booted.model.log_lines), "shader trap")
  (e,) = booted.ih_entries()
  assert (e[0] & 0xFF, e[0] >> 8 & 0xFF) == (CLIENT_GRBM_CP, 239)     # SQ_INTERRUPT_ID
  assert (e[5] >> 6 & 3, e[4] >> 21 & 0xF) == (2, 1)                 # ENCODING = ERROR, TYPE = ILLEGAL_INST


def test_a_full_ih_ring_drops_entries_and_flags_overflow(booted):
  booted.ih_resize(128)                                               # room for 3 entries: one slot stays free
  dropped = booted.model.ih.dropped
  s = Queue(booted, "sdma")
  s.submit(sum((sdma_pkt("TRAP", 2, HEADER_op=sdma_defs.SDMA_OP_TRAP, INT_CONTEXT_int_context=i) for i in range(5)), []))
  s.wait_idle()
  assert booted.r(oss.regIH_RB_WPTR) == 96 | 1 and booted.model.ih.dropped == dropped + 2   # OFFSET 96, RB_OVERFLOW
  assert [e[4] for e in booted.ih_entries()] == [0, 1, 2]
  booted.w(oss.regIH_RB_CNTL, booted.r(oss.regIH_RB_CNTL) | oss.regIH_RB_CNTL.mask("WPTR_OVERFLOW_CLEAR"))
  assert booted.r(oss.regIH_RB_WPTR) == 96


def test_the_hdp_flush_of_a_pm4_wait_reg_mem_is_the_one_flush_rule(booted, sig):
  """The WAIT_REG_MEM write-then-wait on GPU_HDP_FLUSH_REQ/DONE (what the driver's memory barrier sends) completes
  through the same register file and HDP as a BAR5 write."""
  req, done = (booted.addr(r) for r in (nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ, nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE))
  q = Queue(booted, "compute")
  before = booted.model.gpu.hdp.flushes
  q.submit(pm4(nvd.PACKET3_WAIT_REG_MEM, nvd.WAIT_REG_MEM_OPERATION(1) | nvd.WAIT_REG_MEM_FUNCTION(3), req, done, 0x5, 0xF, 0x20) +
           release_mem(sig.va, 1))
  q.wait_idle()
  assert u32(sig) == 1 and booted.r(nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE) == 0x5
  assert booted.model.gpu.hdp.flushes == before + 2                   # the submission's BAR5 flush, then the packet's


def wait64(va: int, ref: int, mask: int = (1 << 64) - 1, control: int = nvd.WAIT_REG_MEM_MEM_SPACE(1) | nvd.WAIT_REG_MEM_FUNCTION(5)):
  return pm4(nvd.PACKET3_WAIT_REG_MEM64, control, va & 0xFFFFFFFF, va >> 32, ref & 0xFFFFFFFF, ref >> 32,
             mask & 0xFFFFFFFF, mask >> 32, 0x4)


def test_wait_reg_mem64_compares_all_64_bits(booted, sig):
  """Waiting for >= 0x1_0000_0005 while memory holds 0xFFFF_FFF0: the low dword alone (0xFFFF_FFF0 >= 5) would pass."""
  sig.view[:8] = (0xFFFF_FFF0).to_bytes(8, "little")
  q, first = Queue(booted, "compute"), release_mem(sig.va + 16, 9)
  q.submit(first + wait64(sig.va, 0x1_0000_0005) + release_mem(sig.va + 8, 1))
  # the HQD writes its read pointer back where it stalls: at the wait, past the first packet
  booted.wait(lambda: q.rptr == len(first), "the queue stalled on WAIT_REG_MEM64")
  assert (u32(sig, 16), u32(sig, 8)) == (9, 0)
  sig.view[:8] = (0x1_0000_0005).to_bytes(8, "little")
  q.wait_idle()
  assert u32(sig, 8) == 1


@pytest.mark.parametrize("packet, why", [
  (wait64(UNMAPPED + 4, 1), "WAIT_REG_MEM64 address 0x280000005004 is not 8-byte aligned"),
  (wait64(0x1000, 1, control=nvd.WAIT_REG_MEM_FUNCTION(5)), "WAIT_REG_MEM64 is modelled on memory only"),
  (wait64(UNMAPPED, 1, control=nvd.WAIT_REG_MEM_MEM_SPACE(1) | 7), "WAIT_REG_MEM64 function 7 is reserved"),
  (pm4(nvd.PACKET3_WAIT_REG_MEM64, 0x10, 0, 0, 1), "WAIT_REG_MEM64 takes 8 payload dwords, got 4"),
])
def test_bad_wait_reg_mem64_stops_the_queue_naming_it(booted, packet, why):
  Queue(booted, "compute").submit(packet)
  booted.wait(lambda: any(why in line for line in booted.model.log_lines), f"the model's log line {why!r}")
  assert any(why in line for line in booted.model.log_lines)


def cond_exe(va: int, ref: int, count: int) -> list[int]:
  return sdma_pkt("COND_EXE", 5, HEADER_op=sdma_defs.SDMA_OP_COND_EXE, ADDR_LO_addr_31_0=va & 0xFFFFFFFF, ADDR_HI_addr_63_32=va >> 32,
                  REFERENCE_reference=ref, EXEC_COUNT_exec_count=count)


def fence(va: int, value: int) -> list[int]:
  return sdma_pkt("FENCE", 4, HEADER_op=sdma_defs.SDMA_OP_FENCE, ADDR_LO_addr_31_0=va & 0xFFFFFFFF, ADDR_HI_addr_63_32=va >> 32, DATA_data=value)


def test_sdma_cond_exe_runs_the_next_dwords_only_if_memory_equals_the_reference(booted, sig):
  sig.view[:4] = (7).to_bytes(4, "little")
  s = Queue(booted, "sdma")
  s.submit(cond_exe(sig.va, 7, 4) + fence(sig.va + 8, 1) + cond_exe(sig.va, 6, 4) + fence(sig.va + 12, 2) + fence(sig.va + 16, 3))
  s.wait_idle()
  assert (u32(sig, 8), u32(sig, 12), u32(sig, 16)) == (1, 0, 3)       # equal: run; not equal: the fence is skipped


def test_sdma_cond_exe_skipping_past_what_was_written_stops_the_queue(booted, sig):
  Queue(booted, "sdma").submit(cond_exe(sig.va, 1, 9) + fence(sig.va + 8, 1))
  booted.wait(lambda: any("COND_EXE at ring byte 0 skips 9 dwords, only 4 written" in line for line in booted.model.log_lines), "log")
  assert u32(sig, 8) == 0
