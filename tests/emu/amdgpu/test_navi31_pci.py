"""The emulated Navi31 as a PCI function: identity, BARs, the discovery table in VRAM, register decode (direct, RSMU and
MM_INDEX indirection), the HDP flush remap. Facts: discovery.h, pci_regs.h, amdgpu_device.c amdgpu_device_indirect_rreg."""
import pytest

from autogen.amd import discovery, gc_11_0_0 as gc, nbio_4_3_0 as nbio, mmhub_3_0_0 as mmhub
from drivers.system import DeviceBusyError, list_models, open_model
from emu.amdgpu.registers import ModelError
from tests.emu.amdgpu.regs import BASES, MODULE_IP

# IP versions of a Navi31 by hardware id, and their segment bases (amd_driver.md 2.2)
NAVI31 = {11: ((11, 0, 0), BASES["GC"]), 42: ((6, 0, 0), None), 34: ((3, 0, 0), BASES["MMHUB"]), 108: ((4, 3, 0), BASES["NBIO"]),
          255: ((13, 0, 0), BASES["MP0"]), 1: ((13, 0, 0), BASES["MP1"]), 41: ((6, 0, 0), BASES["HDP"]), 40: ((6, 0, 0), BASES["OSSSYS"])}


# every register the AM boot touches: a register trace of tinygrad's AM boot of Navi31, plus those its code names
AM_REGISTERS = """
BIF_BX_PF0_RSMU_DATA BIF_BX_PF0_RSMU_INDEX BIF_BX_PF0_MM_INDEX BIF_BX_PF0_MM_INDEX_HI BIF_BX_PF0_MM_DATA
BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL BIF_BX_PF0_GPU_HDP_FLUSH_REQ BIF_BX_PF0_GPU_HDP_FLUSH_DONE BIF_BX0_BIF_DOORBELL_INT_CNTL
RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN RCC_DEV0_EPF2_STRAP2
S2A_DOORBELL_ENTRY_0_CTRL S2A_DOORBELL_ENTRY_2_CTRL S2A_DOORBELL_ENTRY_3_CTRL HDP_MEM_POWER_CTRL
CP_HQD_ACTIVE CP_HQD_AQL_CONTROL CP_HQD_ATOMIC0_PREOP_HI CP_HQD_ATOMIC0_PREOP_LO CP_HQD_ATOMIC1_PREOP_HI CP_HQD_ATOMIC1_PREOP_LO
CP_HQD_CNTL_STACK_OFFSET CP_HQD_CNTL_STACK_SIZE CP_HQD_CTX_SAVE_BASE_ADDR_HI CP_HQD_CTX_SAVE_BASE_ADDR_LO CP_HQD_CTX_SAVE_CONTROL
CP_HQD_CTX_SAVE_SIZE CP_HQD_DEQUEUE_REQUEST CP_HQD_DMA_OFFLOAD CP_HQD_EOP_BASE_ADDR CP_HQD_EOP_BASE_ADDR_HI CP_HQD_EOP_CONTROL
CP_HQD_EOP_EVENTS CP_HQD_EOP_RPTR CP_HQD_EOP_WPTR CP_HQD_EOP_WPTR_MEM CP_HQD_ERROR CP_HQD_GDS_RESOURCE_STATE CP_HQD_HQ_CONTROL0
CP_HQD_HQ_CONTROL1 CP_HQD_HQ_SCHEDULER0 CP_HQD_HQ_STATUS1 CP_HQD_IB_BASE_ADDR CP_HQD_IB_BASE_ADDR_HI CP_HQD_IB_CONTROL
CP_HQD_IB_RPTR CP_HQD_IQ_RPTR CP_HQD_IQ_TIMER CP_HQD_MSG_TYPE CP_HQD_PERSISTENT_STATE CP_HQD_PIPE_PRIORITY CP_HQD_PQ_BASE
CP_HQD_PQ_BASE_HI CP_HQD_PQ_CONTROL CP_HQD_PQ_DOORBELL_CONTROL CP_HQD_PQ_RPTR CP_HQD_PQ_RPTR_REPORT_ADDR
CP_HQD_PQ_RPTR_REPORT_ADDR_HI CP_HQD_PQ_WPTR_HI CP_HQD_PQ_WPTR_LO CP_HQD_PQ_WPTR_POLL_ADDR CP_HQD_PQ_WPTR_POLL_ADDR_HI
CP_HQD_QUANTUM CP_HQD_QUEUE_PRIORITY CP_HQD_SEMA_CMD CP_HQD_VMID CP_HQD_WG_STATE_OFFSET CP_MQD_BASE_ADDR CP_MQD_BASE_ADDR_HI
CP_MQD_CONTROL CP_INT_CNTL CP_ME1_PIPE0_INT_CNTL CP_MEC_DOORBELL_RANGE_LOWER CP_MEC_DOORBELL_RANGE_UPPER CP_MEC_RS64_CNTL
CP_MEC_RS64_PRGRM_CNTR_START CP_MEC_RS64_PRGRM_CNTR_START_HI CP_RB_WPTR_POLL_CNTL CP_STAT SPI_COMPUTE_QUEUE_RESET
GRBM_CNTL GRBM_GFX_CNTL GRBM_SOFT_RESET SH_MEM_CONFIG SH_MEM_BASES SCRATCH_REG6 SCRATCH_REG7 TCP_CNTL
RLC_CGCG_CGLS_CTRL RLC_CGTT_MGCG_OVERRIDE RLC_CNTL RLC_SAFE_MODE RLC_SPM_MC_CNTL RLC_SRM_CNTL RLC_RLCS_BOOTLOAD_STATUS
GCMC_VM_AGP_BASE GCMC_VM_AGP_BOT GCMC_VM_AGP_TOP GCMC_VM_MX_L1_TLB_CNTL GCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB
GCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR GCMC_VM_SYSTEM_APERTURE_LOW_ADDR GCVM_CONTEXT0_CNTL
GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32 GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32 GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32
GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32 GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32 GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32
GCVM_INVALIDATE_ENG17_ACK GCVM_INVALIDATE_ENG17_REQ GCVM_INVALIDATE_ENG0_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG17_ADDR_RANGE_HI32
GCVM_L2_CNTL GCVM_L2_CNTL2 GCVM_L2_CNTL3 GCVM_L2_CNTL4 GCVM_L2_CNTL5 GCVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32
GCVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32 GCVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32
GCVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32 GCVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32
GCVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32 GCVM_L2_PROTECTION_FAULT_CNTL2 GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32
GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32 GCVM_L2_PROTECTION_FAULT_STATUS GCVM_L2_PROTECTION_FAULT_ADDR_LO32
GCVM_L2_PROTECTION_FAULT_ADDR_HI32 GCVM_L2_PROTECTION_FAULT_CNTL
IH_DOORBELL_RPTR IH_DOORBELL_RPTR_RING1 IH_INT_FLOOD_CNTL IH_MSI_STORM_CTRL IH_RB_BASE IH_RB_BASE_HI IH_RB_BASE_HI_RING1
IH_RB_BASE_RING1 IH_RB_CNTL IH_RB_CNTL_RING1 IH_RB_RPTR IH_RB_RPTR_RING1 IH_RB_WPTR IH_RB_WPTR_ADDR_HI IH_RB_WPTR_ADDR_LO
IH_RB_WPTR_RING1 IH_STORM_CLIENT_LIST_CNTL
MMMC_VM_AGP_BASE MMMC_VM_AGP_BOT MMMC_VM_AGP_TOP MMMC_VM_FB_LOCATION_BASE MMMC_VM_FB_LOCATION_TOP MMMC_VM_MX_L1_TLB_CNTL
MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB MMMC_VM_SYSTEM_APERTURE_HIGH_ADDR
MMMC_VM_SYSTEM_APERTURE_LOW_ADDR MMVM_CONTEXT0_CNTL MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32 MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32
MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32 MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32 MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32
MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32 MMVM_INVALIDATE_ENG17_ACK MMVM_INVALIDATE_ENG17_REQ MMVM_INVALIDATE_ENG17_SEM
MMVM_L2_BANK_SELECT_RESERVED_CID2 MMVM_L2_CNTL MMVM_L2_CNTL2 MMVM_L2_CNTL3 MMVM_L2_CNTL4 MMVM_L2_CNTL5
MMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32 MMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32
MMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32 MMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32
MMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32 MMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32 MMVM_L2_PROTECTION_FAULT_CNTL2
MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32 MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32 MM_ATC_L2_MISC_CG
MP0_SMN_C2PMSG_35 MP0_SMN_C2PMSG_36 MP0_SMN_C2PMSG_64 MP0_SMN_C2PMSG_67 MP0_SMN_C2PMSG_69 MP0_SMN_C2PMSG_70 MP0_SMN_C2PMSG_71
MP0_SMN_C2PMSG_81 MP1_SMN_C2PMSG_66 MP1_SMN_C2PMSG_82 MP1_SMN_C2PMSG_90 MP1_SMN_C2PMSG_53 MP1_SMN_C2PMSG_54 MP1_SMN_C2PMSG_75
SDMA0_CNTL SDMA0_F32_CNTL SDMA0_QUEUE0_DOORBELL SDMA0_QUEUE0_DOORBELL_OFFSET SDMA0_QUEUE0_IB_CNTL SDMA0_QUEUE0_MINOR_PTR_UPDATE
SDMA0_QUEUE0_RB_BASE SDMA0_QUEUE0_RB_BASE_HI SDMA0_QUEUE0_RB_CNTL SDMA0_QUEUE0_RB_RPTR SDMA0_QUEUE0_RB_RPTR_ADDR_HI
SDMA0_QUEUE0_RB_RPTR_ADDR_LO SDMA0_QUEUE0_RB_RPTR_HI SDMA0_QUEUE0_RB_WPTR SDMA0_QUEUE0_RB_WPTR_HI SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI
SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO SDMA0_RLC_CGCG_CTRL SDMA0_UTCL1_CNTL SDMA0_UTCL1_PAGE SDMA0_WATCHDOG_CNTL SDMA1_RLC_CGCG_CTRL
""".split()


def byte_sum(b: bytes) -> int: return sum(b) & 0xFFFF


def test_config_space_is_an_rx_7900_xtx_with_three_bars(dev):
  assert dev.read_config(0, 2) == 0x1002 and dev.read_config(2, 2) == 0x744C
  assert dev.read_config(0x08, 4) >> 8 == 0x030000 and dev.read_config(0x08, 1) == 0xC8    # VGA class, revision c8
  assert (dev.bar_size(0), dev.bar_size(2), dev.bar_size(5)) == (512 << 20, 256 << 20, 1 << 20)
  dev.write_config(0x10, 4, 0xFFFFFFFF)                                  # BAR0 sizing: 64-bit prefetchable memory
  assert dev.read_config(0x10, 4) == (~((512 << 20) - 1) & 0xFFFFFFF0) | 0xC
  assert not dev.read_config(0x04, 2) & 0x4                              # bus mastering is off until the driver sets it


def test_memsize_register_reports_the_vram_in_mib(dev):
  assert dev.map_bar(5).read32(0xDE3 * 4) == 512


def test_discovery_binary_parses_and_its_checksums_verify(dev):
  blob = dev.map_bar(0).read_bytes((512 << 20) - (64 << 10), 10 << 10)
  bh = discovery.binary_header.from_buffer_copy(blob)
  assert bh.binary_signature == 0x28211407
  assert byte_sum(blob[10:bh.binary_size]) == bh.binary_checksum       # Linux: sum over [offsetof(binary_size), size)
  ip_at = bh.table_list[discovery.IP_DISCOVERY].offset
  ih = discovery.ip_discovery_header.from_buffer_copy(blob, ip_at)
  assert ih.signature == 0x53445049 and ih.num_dies == 1
  assert byte_sum(blob[ip_at:ip_at + ih.size]) == bh.table_list[discovery.IP_DISCOVERY].checksum
  off = ih.die_info[0].die_offset
  die = discovery.die_header.from_buffer_copy(blob, off)
  off += 4
  found = {}
  for _ in range(die.num_ips):
    hw_id, _, nbase, major, minor, rev = blob[off] | blob[off + 1] << 8, blob[off + 2], blob[off + 3], blob[off + 4], blob[off + 5], blob[off + 6]
    found[hw_id] = ((major, minor, rev), tuple(int.from_bytes(blob[off + 8 + 4 * i:off + 12 + 4 * i], "little") for i in range(nbase)))
    off += 8 + 4 * nbase
  for hw_id, (version, bases) in NAVI31.items():
    assert found[hw_id][0] == version, hw_id
    if bases: assert found[hw_id][1] == bases, hw_id
  gc_at = bh.table_list[discovery.GC].offset
  gi = discovery.gc_info_v1_0.from_buffer_copy(blob, gc_at)
  assert gi.header.table_id == discovery.GC_TABLE_ID and gi.header.version_major == 1
  assert byte_sum(blob[gc_at:gc_at + gi.header.size]) == bh.table_list[discovery.GC].checksum
  cus = gi.gc_num_se * gi.gc_num_sa_per_se * 2 * (gi.gc_num_wgp0_per_sa + gi.gc_num_wgp1_per_sa)
  assert (cus, gi.gc_max_waves_per_simd, gi.gc_lds_size, gi.gc_wave_size) == (96, 16, 64, 32)


def test_every_register_the_am_boot_touches_is_modelled(regs):
  missing = []
  for name in AM_REGISTERS:
    module = next(m for m in MODULE_IP if hasattr(m, f"reg{name}"))
    if regs.addr(getattr(module, f"reg{name}")) not in regs.model.regs.decode: missing.append(name)
  assert missing == []


def test_unmodelled_register_access_raises_naming_the_register(regs):
  with pytest.raises(ModelError, match="GCVM_CONTEXT1_CNTL"): regs.r(gc.regGCVM_CONTEXT1_CNTL)
  with pytest.raises(ModelError, match="read-only"): regs.w(nbio.regRCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE, 1)
  with pytest.raises(ModelError, match="32-bit"): regs.mmio.read16(0)


def test_registers_beyond_bar5_are_reached_through_rsmu(regs):
  entry = regs.addr(nbio.regS2A_DOORBELL_ENTRY_2_CTRL)
  assert entry * 4 >= regs.mmio.size
  regs.wd(entry, 0x3009001D)                                           # the SDMA doorbell route from the boot trace
  assert regs.rd(entry) == 0x3009001D
  assert regs.r(nbio.regBIF_BX_PF0_RSMU_INDEX) == entry * 4
  with pytest.raises(IndexError): regs.mmio.read32(entry * 4)


def test_mm_index_mm_data_reach_vram_and_registers(regs):
  addr = 0x1234_5678
  regs.w(nbio.regBIF_BX_PF0_MM_INDEX_HI, addr >> 31)
  regs.w(nbio.regBIF_BX_PF0_MM_INDEX, addr & 0x7FFFFFFF | 0x80000000)
  regs.w(nbio.regBIF_BX_PF0_MM_DATA, 0xFEEDF00D)
  assert regs.vram.read32(addr) == 0xFEEDF00D
  regs.vram.write32(addr, 0x0BADCAFE)
  assert regs.r(nbio.regBIF_BX_PF0_MM_DATA) == 0x0BADCAFE
  regs.w(nbio.regBIF_BX_PF0_MM_INDEX, regs.addr(gc.regSCRATCH_REG0) * 4)   # MM_APER clear: a register byte address
  regs.w(nbio.regBIF_BX_PF0_MM_DATA, 0x5CA7C4)
  assert regs.r(gc.regSCRATCH_REG0) == 0x5CA7C4


def test_hdp_flush_goes_through_the_remapped_register_and_the_flush_request(regs):
  hdp = regs.model.gpu.hdp
  assert regs.r(nbio.regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL) == 0x7F000
  before = hdp.flushes
  regs.hdp_flush()
  assert hdp.flushes == before + 1 and regs.rd(0x7F000 >> 2) == 0
  regs.w(nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ, 0xFFFFFFFF)
  assert regs.r(nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE) == 0xFFFFFFFF and hdp.flushes == before + 2
  regs.wd(0x7F004 >> 2, 0)                                             # the register-cache flush: nothing to flush
  assert hdp.flushes == before + 2


def test_framebuffer_location_is_where_the_vbios_put_it(regs):
  base, top = regs.r(mmhub.regMMMC_VM_FB_LOCATION_BASE), regs.r(mmhub.regMMMC_VM_FB_LOCATION_TOP)
  assert base == regs.r(gc.regGCMC_VM_FB_LOCATION_BASE) and base << 24 == 0x80_0000_0000
  assert ((top - base + 1) << 24) == 512 << 20                         # TOP is the last 16 MiB unit, inclusive


def test_doorbells_need_the_aperture_enabled_and_a_bound_queue(regs):
  with pytest.raises(ModelError, match="DOORBELL_APER_EN"): regs.db.write64(0x18, 1)
  regs.w(nbio.regRCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, BIF_DOORBELL_APER_EN=1)
  with pytest.raises(ModelError, match="no queue is bound"): regs.db.write64(0x18, 1)


def test_device_lock_and_listing(dev):
  with pytest.raises(DeviceBusyError, match="mock-0"): open_model("navi31")
  assert [(m.bus, m.vendor_id, m.device_id) for m in list_models()] == [("mock-0", 0x1002, 0x744C)]


def test_reopening_with_another_vram_size_is_refused():
  open_model("navi31", index=1, vram_size=256 << 20).close()
  with pytest.raises(ValueError, match="256 MiB of VRAM, not 1024 MiB"): open_model("navi31", index=1, vram_size=1 << 30)
  with open_model("navi31", index=1, vram_size=256 << 20) as d: assert d.map_bar(5).read32(0xDE3 * 4) == 256
