"""The GC/MM hubs of a booted emulated Navi31 act on what the driver programs: the flat apertures of SH_MEM_BASES, the
L1 TLB / L2 / aperture enables, EXECUTABLE on instruction fetch, and the fault type in the status and the IH entry.
Facts: gmc_v11_0.c, gfxhub_v3_0.c, gfx_v11_0_init_compute_vmid (SH_MEM_BASES 0x10002), kfd_flat_memory.c (gfx9+: LDS aperture at
1 << 48, scratch at 2 << 48), gc_11_0_0 register fields, gfxhub_v3_0's UTCL2 client ids."""
import numpy as np
import pytest

from autogen.amd import gc_11_0_0 as gc, nvd, amdgpu_vm as vm
from drivers.hcq import open_device
from drivers.amd.am.gfxhub_v3_0 import GFXHUBv3_0
from emu.amdgpu.gmc import HubModel
from emu.amdgpu.mmu import TranslationOff, Fault
from tests.emu.amdgpu.regs import Regs, Queue, release_mem, pm4

LDS_APERTURE, SCRATCH_APERTURE = 1 << 48, 2 << 48
CID_CPC, CID_SQC_INST = 5, 9
CLIENT_GFX, SRC_UTCL2_FAULT = 0xA, 0
UNMAPPED = 0x2800_0000_5000

# flat (generic) stores and loads at the apertures' literal addresses, next to the ones the compiler forms from
# src_shared_base / src_private_base: out[l] = (LDS word written through the LDS aperture, scratch word read through the
# scratch aperture, generic address of lds[l], generic address of priv[k])
APERTURES = r"""
__kernel void apertures(__global ulong *out, __global const int *idx) {
  __local int lds[64];
  volatile __private int priv[16];
  uint l = __builtin_amdgcn_workitem_id_x();
  int k = idx[l] & 15;
  priv[k] = 0x5C0 + l;
  lds[l] = 0;
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
  *(volatile int *)((1UL << 48) + (ulong)(uint)(__local int *)&lds[63 - l]) = 0x1D5 + l;
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
  out[l * 4 + 0] = lds[l];
  out[l * 4 + 1] = *(volatile int *)((2UL << 48) + (ulong)(uint)(__private int *)&priv[k]);
  out[l * 4 + 2] = (ulong)(int *)&lds[l];
  out[l * 4 + 3] = (ulong)(int *)&priv[k];
}
"""


def run_apertures(d) -> np.ndarray:
  idx = (np.arange(64, dtype=np.int32) * 7) & 15
  out, ib = d.alloc(64 * 32), d.alloc(idx.nbytes)
  ib.copyin(idx.data)
  d.program("apertures", d.compiler.compile(APERTURES))(out, ib, global_size=(1,), local_size=(64,), wait=True)
  return np.frombuffer(out.copyout(), np.uint64).reshape(64, 4), idx


def apertures_work(d) -> bool:
  r, idx = run_apertures(d)
  lanes = np.arange(64, dtype=np.uint64)
  return (np.array_equal(r[:, 0], 0x1D5 + 63 - lanes) and np.array_equal(r[:, 1], 0x5C0 + lanes) and
          np.array_equal(r[:, 2], LDS_APERTURE + 4 * lanes) and bool((r[:, 3] >> 32 == SCRATCH_APERTURE >> 32).all()))


@pytest.mark.parametrize("name", ["MOCKPCI+AMD", "MOCKKFD+AMD"])
def test_flat_accesses_at_the_kfd_apertures_reach_lds_and_scratch(name):
  d = open_device(name)
  try: assert apertures_work(d)
  finally: d.close()


BASES = r"""
__kernel void bases(__global ulong *out) {
  __local int lds[4];
  volatile __private int priv[4];
  out[0] = (ulong)(int *)lds;
  out[1] = (ulong)(int *)priv;
}
"""


def test_the_apertures_follow_sh_mem_bases_as_written():
  d = open_device("MOCKPCI+AMD")
  try:
    regs = Regs(d.iface.pci, d.iface)
    sel = regs.r(gc.regGRBM_GFX_CNTL)
    regs.w(gc.regGRBM_GFX_CNTL, 0)                                    # VMID 0's copy
    assert regs.r(gc.regSH_MEM_BASES) == 0x10002                      # what the AM driver programs (amd_driver.md 2.10)
    regs.w(gc.regSH_MEM_BASES, SHARED_BASE=0x30, PRIVATE_BASE=0x31)
    regs.w(gc.regGRBM_GFX_CNTL, sel)
    out = d.alloc(16)
    d.program("bases", d.compiler.compile(BASES))(out, global_size=(1,), local_size=(1,), wait=True)
    assert list(np.frombuffer(out.copyout(), np.uint64) >> 32) == [0x30 << 16, 0x31 << 16]   # src_shared/private_base
  finally: d.close()


def code_page(booted, words: list[int], executable: bool):
  code = booted.iface.alloc(4096, cpu_access=True)
  code.view[:4 * len(words)] = b"".join(w.to_bytes(4, "little") for w in words)
  if not executable:
    pte = booted.pte(code.va)
    booted.vram.write64(pte, booted.vram.read64(pte) & ~vm.AMDGPU_PTE_EXECUTABLE)
    booted.flush_tlb()
  return code


def dispatch(booted, q, code_va: int) -> None:
  sh = lambda reg, *v: pm4(nvd.PACKET3_SET_SH_REG, booted.addr(reg) - nvd.PACKET3_SET_SH_REG_START, *v)
  q.submit(sh(gc.regCOMPUTE_PGM_LO, code_va >> 8 & 0xFFFFFFFF, code_va >> 40) + sh(gc.regCOMPUTE_PGM_RSRC1, 0, 0) +
           sh(gc.regCOMPUTE_NUM_THREAD_X, 32, 1, 1) +
           pm4(nvd.PACKET3_DISPATCH_DIRECT, 1, 1, 1, gc.regCOMPUTE_DISPATCH_INITIATOR.encode(COMPUTE_SHADER_EN=1, CS_W32_EN=1)))


def fault_status(booted) -> dict[str, int]:
  booted.wait(lambda: booted.r(gc.regGCVM_L2_PROTECTION_FAULT_STATUS) != 0, "fault status")
  return gc.regGCVM_L2_PROTECTION_FAULT_STATUS.decode(booted.r(gc.regGCVM_L2_PROTECTION_FAULT_STATUS))


@pytest.mark.parametrize("executable", [True, False])
def test_instruction_fetch_needs_an_executable_page(booted, executable):
  q = Queue(booted, "compute")
  dispatch(booted, q, code_page(booted, [0xBFB00000], executable).va)   # s_endpgm
  if executable:
    q.wait_idle()
    assert booted.r(gc.regGCVM_L2_PROTECTION_FAULT_STATUS) == 0
    return
  status = fault_status(booted)
  assert (status["PERMISSION_FAULTS"], status["MAPPING_ERROR"], status["CID"], status["RW"]) == (8, 0, CID_SQC_INST, 0)
  assert booted.iface.core.gfxhub.fault_kind(booted.r(gc.regGCVM_L2_PROTECTION_FAULT_STATUS)) == "no execute permission"
  (e,) = [e for e in booted.ih_entries() if (e[0] & 0xFF, e[0] >> 8 & 0xFF) == (CLIENT_GFX, SRC_UTCL2_FAULT)]
  assert e[0] >> 16 & 0xFF == 0x40                                   # ring_id: execute
  booted.wait(lambda: any("not executable" in line for line in booted.model.log_lines), "the model's log line")


def test_an_execute_fault_interrupts_only_with_its_enable(booted):
  cntl = booted.r(gc.regGCVM_CONTEXT0_CNTL)
  booted.w(gc.regGCVM_CONTEXT0_CNTL, cntl & ~gc.regGCVM_CONTEXT0_CNTL.mask("EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT"))
  q = Queue(booted, "compute")
  dispatch(booted, q, code_page(booted, [0xBFB00000], False).va)
  assert fault_status(booted)["PERMISSION_FAULTS"] == 8
  booted.wait(lambda: any("not executable" in line for line in booted.model.log_lines), "the model's log line")
  assert not [e for e in booted.ih_entries() if (e[0] & 0xFF, e[0] >> 8 & 0xFF) == (CLIENT_GFX, SRC_UTCL2_FAULT)]


# fault type -> (PERMISSION_FAULTS, MAPPING_ERROR, the CONTEXT0_CNTL interrupt enable of that type, what the driver says)
FAULTS = {"not-present": (1 | 4, 1, "VALID", "not present"), "write": (4, 0, "WRITE", "no write permission"),
          "range": (0, 1, "RANGE", "outside the VM range")}


def fault_va(booted, kind: str) -> int:
  if kind == "not-present": return UNMAPPED
  if kind == "range": return 0x1000_0000_0000                         # below context 0's window
  va = booted.iface.alloc(4096, cpu_access=True).va
  pte = booted.pte(va)
  booted.vram.write64(pte, booted.vram.read64(pte) & ~vm.AMDGPU_PTE_WRITEABLE)
  booted.flush_tlb()
  return va


@pytest.mark.parametrize("interrupt", [True, False])
@pytest.mark.parametrize("kind", FAULTS)
def test_the_fault_type_is_in_the_status_and_its_enable_gates_the_interrupt(booted, kind, interrupt):
  perm, mapping, enable, said = FAULTS[kind]
  if not interrupt:
    cntl = booted.r(gc.regGCVM_CONTEXT0_CNTL)
    booted.w(gc.regGCVM_CONTEXT0_CNTL, cntl & ~gc.regGCVM_CONTEXT0_CNTL.mask(f"{enable}_PROTECTION_FAULT_ENABLE_INTERRUPT"))
  q = Queue(booted, "compute")
  va = fault_va(booted, kind)
  q.submit(release_mem(va, 1))
  status = fault_status(booted)
  assert (status["PERMISSION_FAULTS"], status["MAPPING_ERROR"], status["CID"], status["RW"]) == (perm, mapping, CID_CPC, 1)
  assert booted.iface.core.gfxhub.fault_kind(booted.r(gc.regGCVM_L2_PROTECTION_FAULT_STATUS)) == said
  booted.wait(lambda: any("page fault" in line for line in booted.model.log_lines), "the model's log line")
  faults = [e for e in booted.ih_entries() if (e[0] & 0xFF, e[0] >> 8 & 0xFF) == (CLIENT_GFX, SRC_UTCL2_FAULT)]
  assert [e[0] >> 16 & 0xFF for e in faults] == [perm << 3] * int(interrupt)   # ring_id: KFD's prot_valid/read/write bits


@pytest.mark.parametrize("reg, field, value, why", [
  (gc.regGCMC_VM_MX_L1_TLB_CNTL, "ENABLE_L1_TLB", 0, "ENABLE_L1_TLB is 0"),
  (gc.regGCMC_VM_MX_L1_TLB_CNTL, "SYSTEM_ACCESS_MODE", 1, "SYSTEM_ACCESS_MODE is 1"),
  (gc.regGCMC_VM_MX_L1_TLB_CNTL, "ENABLE_ADVANCED_DRIVER_MODEL", 0, "ENABLE_ADVANCED_DRIVER_MODEL is 0"),
  (gc.regGCMC_VM_MX_L1_TLB_CNTL, "MTYPE", 5, "MTYPE 5 is reserved"),
  (gc.regGCVM_L2_CNTL, "ENABLE_L2_CACHE", 0, "ENABLE_L2_CACHE is 0"),
  (gc.regGCMC_VM_SYSTEM_APERTURE_HIGH_ADDR, "LOGICAL_ADDR", 0, "system aperture"),
])
def test_nothing_translates_until_the_hub_is_enabled(booted, reg, field, value, why):
  mmu = booted.model.gmc_gc.mmu
  assert mmu.translate(booted.iface.alloc(4096).va, False, "CP") is not None
  booted.w(reg, (booted.r(reg) & ~reg.mask(field)) | value << reg.fields[field][0])
  with pytest.raises(TranslationOff, match=why): mmu.translate(UNMAPPED, False, "CP")


def test_a_device_powered_on_translates_nothing_before_the_driver(dev):
  with pytest.raises(TranslationOff, match=r"GPU read at 0x200000000000 by CP: GCMC_VM_MX_L1_TLB_CNTL.ENABLE_L1_TLB is 0"):
    dev.model.gmc_gc.mmu.read(0x2000_0000_0000, 4)
  with pytest.raises(TranslationOff, match="MMMC_VM_MX_L1_TLB_CNTL.ENABLE_L1_TLB is 0"):
    dev.model.gmc_mm.mmu.write(dev.model.gmc_mm.fb[0], b"x", "IH")


@pytest.mark.parametrize("kind, write, execute, said", [
  ("not-present", False, False, "not present"), ("not-present", True, False, "not present"),
  ("read", False, False, "no read permission"), ("write", True, False, "no write permission"),
  ("execute", False, True, "no execute permission"), ("range", False, False, "outside the VM range"),
  ("pde", False, False, "page-table walk error")])
def test_each_fault_type_latched_by_the_hub_is_named_by_the_driver(kind, write, execute, said):
  fields = HubModel.fault_status_fields(Fault(UNMAPPED, write, "CP", "", kind, execute))
  status = gc.regGCVM_L2_PROTECTION_FAULT_STATUS.encode(**fields, RW=int(write))
  assert GFXHUBv3_0(None).fault_kind(status) == said
