"""A scripted AM-style driver for the Navi31 model tests, written only against the PCIDevice boundary (BAR0 VRAM,
BAR2 doorbells, BAR5 registers, DMA memory) and the sequences of reference/amd_driver.md section 2. IP bases come
from the discovery table it reads out of VRAM, register addresses from autogen's headers; nothing from emu/.
"""
from __future__ import annotations
import ctypes, os, struct, time

from autogen.amd import (gc_11_0_0 as gc, mmhub_3_0_0 as mmhub, nbio_4_3_0 as nbio, mp_13_0_0 as mp, osssys_6_0_0 as oss,
                         hdp_6_0_0 as hdp, psp_gfx_if as G, amdgpu_ucode as U, discovery as D, soc15_hw_ip as H, nvd, soc21_enum)

HW_IDS = {H.GC_HWID: "GC", H.SDMA0_HWID: "SDMA0", H.MMHUB_HWID: "MMHUB", H.NBIF_HWID: "NBIO", H.MP0_HWID: "MP0",
          H.MP1_HWID: "MP1", H.HDP_HWID: "HDP", H.OSSSYS_HWID: "OSSSYS"}
MODULE_IP = {gc: "GC", mmhub: "MMHUB", nbio: "NBIO", mp: "MP0", oss: "OSSSYS", hdp: "HDP"}
BL = {"KDB": 0x80000, "SPL": 0x10000000, "SYS_DRV": 0x10000, "SOS": 0x20000}   # PSP_BL__LOAD_* (psp_v13_0)
GFX_ORDER = ("SDMA_UCODE_TH1", "SDMA_UCODE_TH0", "RS64_MEC", "RS64_MEC_P0_STACK", "IMU_I", "IMU_D", "RLC_IRAM",
             "RLC_DRAM_BOOT", "RLC_P", "RLC_V", "RLC_G")                     # amd_driver.md 2.9, observed Navi31 order
SMU_OK = 1
VA_BASE = 0x2000_0000_0000
PTE_VALID, PTE_SYSTEM, PTE_SNOOPED, PTE_RWX, PTE_WRITEABLE = 1, 2, 4, 0x70, 0x40
MEC_DOORBELL, SDMA_DOORBELL = 3 * 8, 0x100 * 8


def firmware_pieces(path: str) -> dict[str, bytes]:
  """The loadable pieces of the six Navi31 files, cut as amd_driver.md section 3 describes."""
  rd = lambda n: open(os.path.join(path, n), "rb").read()
  out = {}
  sos = rd("psp_13_0_0_sos.bin")
  h = U.psp_firmware_header_v2_0.from_buffer_copy(sos)
  names = {U.PSP_FW_TYPE_PSP_SOS: "SOS", U.PSP_FW_TYPE_PSP_SYS_DRV: "SYS_DRV", U.PSP_FW_TYPE_PSP_KDB: "KDB",
           U.PSP_FW_TYPE_PSP_TOC: "TOC", U.PSP_FW_TYPE_PSP_SPL: "SPL"}
  for d in (U.psp_fw_bin_desc * h.psp_fw_bin_count).from_buffer_copy(sos, U.psp_firmware_header_v2_0.psp_fw_bin.offset):
    if d.fw_type in names: out[names[d.fw_type]] = sos[h.header.ucode_array_offset_bytes + d.offset_bytes:][:d.size_bytes]
  if os.path.exists(os.path.join(path, "smu_13_0_0.bin")):
    smu = rd("smu_13_0_0.bin")
    c = U.common_firmware_header.from_buffer_copy(smu)
    out["SMU"] = smu[c.ucode_array_offset_bytes:][:c.ucode_size_bytes]
  sd = rd("sdma_6_0_0.bin")
  h = U.sdma_firmware_header_v2_0.from_buffer_copy(sd)
  out["SDMA_UCODE_TH0"] = sd[h.header.ucode_array_offset_bytes:][:h.ctx_ucode_size_bytes]
  out["SDMA_UCODE_TH1"] = sd[h.ctl_ucode_offset:][:h.ctl_ucode_size_bytes]
  mec = rd("gc_11_0_0_mec.bin")
  h = U.gfx_firmware_header_v2_0.from_buffer_copy(mec)
  out["RS64_MEC"], out["RS64_MEC_P0_STACK"] = mec[h.ucode_offset_bytes:][:h.ucode_size_bytes], mec[h.data_offset_bytes:][:h.data_size_bytes]
  out["mec_start"] = h.ucode_start_addr_hi << 32 | h.ucode_start_addr_lo
  imu = rd("gc_11_0_0_imu.bin")
  h = U.imu_firmware_header_v1_0.from_buffer_copy(imu)
  a = h.header.ucode_array_offset_bytes
  out["IMU_I"] = imu[a + h.imu_iram_ucode_offset_bytes:][:h.imu_iram_ucode_size_bytes]
  out["IMU_D"] = imu[a + h.imu_dram_ucode_offset_bytes:][:h.imu_dram_ucode_size_bytes]
  rlc = rd("gc_11_0_0_rlc.bin")
  h = U.rlc_firmware_header_v2_3.from_buffer_copy(rlc)
  c = h.v2_2.v2_1.v2_0.header
  out["RLC_G"] = rlc[c.ucode_array_offset_bytes:][:c.ucode_size_bytes]
  for name, off, size in (("RLC_IRAM", h.v2_2.rlc_iram_ucode_offset_bytes, h.v2_2.rlc_iram_ucode_size_bytes),
                          ("RLC_DRAM_BOOT", h.v2_2.rlc_dram_ucode_offset_bytes, h.v2_2.rlc_dram_ucode_size_bytes),
                          ("RLC_P", h.rlcp_ucode_offset_bytes, h.rlcp_ucode_size_bytes), ("RLC_V", h.rlcv_ucode_offset_bytes, h.rlcv_ucode_size_bytes)):
    if size: out[name] = rlc[off:][:size]
  return out


class Driver:
  def __init__(self, dev):
    self.dev, self.vram, self.db, self.mmio = dev, dev.map_bar(0), dev.map_bar(2), dev.map_bar(5)
    self.vram_size = self.mmio.read32(0xde3 * 4) << 20     # RCC_CONFIG_MEMSIZE, before any base is known
    self.bases = self.discovery()
    self.fb_base = (self.r(mmhub.regMMMC_VM_FB_LOCATION_BASE) & 0xFFFFFF) << 24
    self.next_paddr, self.timeout = 0, 5.0

  # --- discovery and registers
  def discovery(self) -> dict[str, tuple[int, ...]]:
    at = self.vram_size - (64 << 10)
    blob = self.vram.read_bytes(at, 10 << 10)
    bh = D.binary_header.from_buffer_copy(blob)
    ih = D.ip_discovery_header.from_buffer_copy(blob, bh.table_list[D.IP_DISCOVERY].offset)
    off = ih.die_info[0].die_offset
    die = D.die_header.from_buffer_copy(blob, off)
    off += ctypes.sizeof(D.die_header)
    bases = {}
    for _ in range(die.num_ips):
      ip = D.ip_v4.from_buffer_copy(blob[off:off + 8] + bytes(8))
      vals = struct.unpack_from(f"<{ip.num_base_address}I", blob, off + 8)
      if ip.hw_id in HW_IDS: bases[HW_IDS[ip.hw_id]] = vals
      off += 8 + 4 * ip.num_base_address
    return bases

  def addr(self, reg, ip: str | None = None) -> int:
    return reg.addr(self.bases[ip or MODULE_IP[reg_module(reg)]])

  def _rsmu(self, addr: int) -> None: self.wreg_addr(nbio.regBIF_BX_PF0_RSMU_INDEX.addr(self.bases["NBIO"]), addr * 4)

  def rreg_addr(self, addr: int) -> int:
    if addr * 4 < self.mmio.size: return self.mmio.read32(addr * 4)
    self._rsmu(addr)
    return self.mmio.read32(nbio.regBIF_BX_PF0_RSMU_DATA.addr(self.bases["NBIO"]) * 4)

  def wreg_addr(self, addr: int, value: int) -> None:
    if addr * 4 < self.mmio.size: return self.mmio.write32(addr * 4, value)
    self._rsmu(addr)
    self.mmio.write32(nbio.regBIF_BX_PF0_RSMU_DATA.addr(self.bases["NBIO"]) * 4, value)

  def r(self, reg, ip: str | None = None) -> int: return self.rreg_addr(self.addr(reg, ip))
  def w(self, reg, value: int, ip: str | None = None) -> None: self.wreg_addr(self.addr(reg, ip), value)
  def w_fields(self, reg, ip: str | None = None, **f) -> None: self.w(reg, reg.encode(**f), ip)

  def wait(self, cond, what: str, timeout: float | None = None) -> None:
    end = time.monotonic() + (self.timeout if timeout is None else timeout)
    while not cond():
      if time.monotonic() > end: raise TimeoutError(what)
      time.sleep(0.001)

  # --- VRAM
  def alloc(self, size: int, align: int = 4096) -> int:
    self.next_paddr = (self.next_paddr + align - 1) & ~(align - 1)
    p, self.next_paddr = self.next_paddr, self.next_paddr + size
    return p

  def mc(self, paddr: int) -> int: return self.fb_base + paddr

  def hdp_flush(self) -> None:
    self.wreg_addr(self.r(nbio.regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL) >> 2, 0)

  # --- SOC, GMC, IH (2.10, 2.7)
  def soc_init(self) -> None:
    self.w(nbio.regRCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 1)

  def hub_init(self, prefix: str) -> None:
    m, ip = (gc, "GC") if prefix == "GC" else (mmhub, "MMHUB")
    R = lambda n: getattr(m, f"reg{prefix}{n}")
    top = ((self.r(R("MC_VM_FB_LOCATION_TOP"), ip) & 0xFFFFFF) << 24) | 0xFFFFFF
    self.w(R("MC_VM_SYSTEM_APERTURE_LOW_ADDR"), self.fb_base >> 18, ip)
    self.w(R("MC_VM_SYSTEM_APERTURE_HIGH_ADDR"), top >> 18, ip)
    self.w(R("VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32"), (VA_BASE >> 12) & 0xFFFFFFFF, ip)
    self.w(R("VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32"), VA_BASE >> 44, ip)
    self.w(R("VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32"), 0xFFFFFFFF, ip)
    self.w(R("VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32"), 7, ip)
    self.w(R("VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"), self.root | 1, ip)
    self.w(R("VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32"), 0, ip)
    self.w(R("VM_CONTEXT0_CNTL"), 0x1fffe07, ip)   # the trace's value: enable, depth 3, every fault interrupt

  def flush_tlb(self, prefix: str) -> None:
    m, ip = (gc, "GC") if prefix == "GC" else (mmhub, "MMHUB")
    R = lambda n: getattr(m, f"reg{prefix}{n}")
    self.hdp_flush()
    if prefix == "MM": self.wait(lambda: self.r(R("VM_INVALIDATE_ENG17_SEM"), ip) & 1, "mm semaphore")
    self.w(R("VM_INVALIDATE_ENG17_REQ"), 0xf80001, ip)
    self.wait(lambda: self.r(R("VM_INVALIDATE_ENG17_ACK"), ip) & 1, f"{prefix} flush_tlb timeout")
    if prefix == "MM": self.w(R("VM_INVALIDATE_ENG17_SEM"), 0, ip)

  def ih_init(self, size: int = 1 << 16) -> None:
    self.ih_paddr, self.ih_size = self.alloc(size), size
    self.w(oss.regIH_RB_BASE, self.mc(self.ih_paddr) >> 8)
    self.w(oss.regIH_RB_BASE_HI, self.mc(self.ih_paddr) >> 40)
    self.w(oss.regIH_RB_WPTR, 0)
    self.w(oss.regIH_RB_RPTR, 0)
    self.w_fields(oss.regIH_RB_CNTL, RB_ENABLE=1, RB_SIZE=(size // 4).bit_length() - 1, WPTR_OVERFLOW_ENABLE=1, MC_SPACE=4)

  def ih_entries(self) -> list[tuple[int, ...]]:
    wptr = self.r(oss.regIH_RB_WPTR) & 0x3FFFC
    rptr, out = self.r(oss.regIH_RB_RPTR) & 0x3FFFC, []
    while rptr != wptr:
      out.append(struct.unpack("<8I", self.vram.read_bytes(self.ih_paddr + rptr, 32)))
      rptr = (rptr + 32) % self.ih_size
    self.w(oss.regIH_RB_RPTR, rptr)
    return out

  # --- PSP (2.9)
  def psp_bootloader(self, pieces: dict[str, bytes], order=("KDB", "SPL", "SYS_DRV", "SOS"), spl_piece: str = "SPL") -> None:
    self.msg1 = self.alloc(1 << 20, 1 << 20)
    for comp in order:
      self.wait(lambda: self.r(mp.regMP0_SMN_C2PMSG_35) & 0x80000000, "BL not ready")
      self.vram.write_bytes(self.msg1, pieces[spl_piece if comp == "SPL" else comp])
      self.hdp_flush()
      self.w(mp.regMP0_SMN_C2PMSG_36, self.mc(self.msg1) >> 20)
      self.w(mp.regMP0_SMN_C2PMSG_35, BL[comp])

  def psp_ring_create(self) -> None:
    self.ring, self.cmd, self.fence = self.alloc(0x10000), self.alloc(4096), self.alloc(4096)
    self.wait(lambda: self.r(mp.regMP0_SMN_C2PMSG_64) & 0x80000000, "sOS not ready")
    self.w(mp.regMP0_SMN_C2PMSG_69, self.mc(self.ring) & 0xFFFFFFFF)
    self.w(mp.regMP0_SMN_C2PMSG_70, self.mc(self.ring) >> 32)
    self.w(mp.regMP0_SMN_C2PMSG_71, 0x10000)
    self.w(mp.regMP0_SMN_C2PMSG_64, G.GFX_CTRL_CMD_ID_INIT_GPCOM_RING)
    self.wait(lambda: self.r(mp.regMP0_SMN_C2PMSG_64) & 0x8000FFFF == 0x80000000, "sOS ring not created")

  def psp_cmd(self, cmd_id: int, field: str | None = None, **values) -> G.psp_gfx_resp:
    cmd = G.psp_gfx_cmd_resp(buf_size=ctypes.sizeof(G.psp_gfx_cmd_resp), buf_version=G.PSP_GFX_CMD_BUF_VERSION, cmd_id=cmd_id)
    for k, v in values.items(): setattr(getattr(cmd.cmd, field), k, v)
    self.vram.write_bytes(self.cmd, bytes(cmd))
    wptr = self.r(mp.regMP0_SMN_C2PMSG_67)
    self.fence_value = getattr(self, "fence_value", 0) + 1
    frame = G.psp_gfx_rb_frame(cmd_buf_addr_lo=self.mc(self.cmd) & 0xFFFFFFFF, cmd_buf_addr_hi=self.mc(self.cmd) >> 32,
                               fence_addr_lo=self.mc(self.fence) & 0xFFFFFFFF, fence_addr_hi=self.mc(self.fence) >> 32,
                               fence_value=self.fence_value)
    self.vram.write_bytes(self.ring + wptr * 4, bytes(frame))
    self.hdp_flush()
    self.w(mp.regMP0_SMN_C2PMSG_67, (wptr + 16) % (0x10000 // 4))
    self.wait(lambda: self.vram.read32(self.fence) == self.fence_value, "sOS ring not responding")
    return G.psp_gfx_resp.from_buffer_copy(self.vram.read_bytes(self.cmd + G.psp_gfx_cmd_resp.resp.offset, ctypes.sizeof(G.psp_gfx_resp)))

  def load_ip_fw(self, name: str, data: bytes) -> int:
    self.vram.write_bytes(self.msg1, data)
    fw_type = getattr(G, f"GFX_FW_TYPE_{name}")
    return self.psp_cmd(G.GFX_CMD_ID_LOAD_IP_FW, "cmd_load_ip_fw", fw_phy_addr_lo=self.mc(self.msg1) & 0xFFFFFFFF,
                        fw_phy_addr_hi=self.mc(self.msg1) >> 32, fw_size=len(data), fw_type=fw_type).status

  def psp_load_all(self, pieces: dict[str, bytes], gfx_order=GFX_ORDER) -> None:
    self.vram.write_bytes(self.msg1, pieces["TOC"])
    resp = self.psp_cmd(G.GFX_CMD_ID_LOAD_TOC, "cmd_load_toc", toc_phy_addr_lo=self.mc(self.msg1) & 0xFFFFFFFF,
                        toc_phy_addr_hi=self.mc(self.msg1) >> 32, toc_size=len(pieces["TOC"]))
    assert resp.status == 0, f"LOAD_TOC: status {resp.status:#x}"
    self.tmr_size = resp.tmr_size
    assert self.load_ip_fw("SMU", pieces["SMU"]) == 0
    self.tmr = self.alloc(self.tmr_size, 1 << 20)
    resp = self.psp_cmd(G.GFX_CMD_ID_SETUP_TMR, "cmd_setup_tmr", buf_phy_addr_lo=self.mc(self.tmr) & 0xFFFFFFFF,
                        buf_phy_addr_hi=self.mc(self.tmr) >> 32, buf_size=self.tmr_size, tmr_flags=2,
                        system_phy_addr_lo=self.tmr, system_phy_addr_hi=0)
    assert resp.status == 0, f"SETUP_TMR: status {resp.status:#x}"
    for name in gfx_order:
      if name in pieces: assert self.load_ip_fw(name, pieces[name]) == 0, name
    assert self.psp_cmd(G.GFX_CMD_ID_AUTOLOAD_RLC).status == 0

  # --- SMU (2.8)
  def smu_msg(self, msg: int, param: int = 0, timeout: float = 1.0) -> tuple[int, int]:
    self.w(mp.regMP1_SMN_C2PMSG_90, 0, "MP1")
    self.w(mp.regMP1_SMN_C2PMSG_82, param, "MP1")
    self.w(mp.regMP1_SMN_C2PMSG_66, msg, "MP1")
    self.wait(lambda: self.r(mp.regMP1_SMN_C2PMSG_90, "MP1") != 0, f"SMU msg {msg:#x} timeout", timeout)
    return self.r(mp.regMP1_SMN_C2PMSG_90, "MP1"), self.r(mp.regMP1_SMN_C2PMSG_82, "MP1")

  # --- GFX (2.10)
  def gfx_init(self, mec_start: int) -> None:
    self.wait(lambda: self.r(gc.regRLC_RLCS_BOOTLOAD_STATUS) >> 31, "RLC autoload timeout")
    self.hub_init("GC")
    self.w_fields(gc.regGRBM_GFX_CNTL, MEID=1)
    self.w(gc.regCP_MEC_RS64_PRGRM_CNTR_START, (mec_start >> 2) & 0xFFFFFFFF)
    self.w(gc.regCP_MEC_RS64_PRGRM_CNTR_START_HI, mec_start >> 34)
    self.w(gc.regGRBM_GFX_CNTL, 0)
    self.w_fields(gc.regCP_MEC_RS64_CNTL, MEC_PIPE0_RESET=1)
    self.w(gc.regCP_MEC_RS64_CNTL, 0)
    self.w(gc.regCP_MEC_DOORBELL_RANGE_LOWER, 0)
    self.w(gc.regCP_MEC_DOORBELL_RANGE_UPPER, 0xf8)
    self.w_fields(gc.regCP_MEC_RS64_CNTL, MEC_PIPE0_ACTIVE=1)

  def sdma_init(self) -> None:
    self.w(gc.regSDMA0_F32_CNTL, 0, "GC")
    self.w_fields(gc.regSDMA0_CNTL, "GC", TRAP_ENABLE=1)

  # --- page tables (2.6): 4 levels of 512 u64 in VRAM, written through BAR0
  def map(self, va: int, targets: list[int], system: bool, writeable: bool = True) -> None:
    """Map 4 KiB pages at `va` to VRAM addresses or host bus addresses."""
    for i, t in enumerate(targets):
      table, rel = self.root, va + i * 4096 - VA_BASE
      for shift in (39, 30, 21):
        slot = table + ((rel >> shift) & 0x1FF) * 8
        if not (e := self.vram.read64(slot)) & PTE_VALID:
          e = self.alloc(4096) | PTE_VALID
          self.vram.write_bytes(e & ~0xFFF, bytes(4096))
          self.vram.write64(slot, e)
        table = e & 0xFFFFFFFFF000
      perm = PTE_RWX if writeable else PTE_RWX & ~PTE_WRITEABLE
      self.vram.write64(table + ((rel >> 12) & 0x1FF) * 8, t | PTE_VALID | perm | ((PTE_SYSTEM | PTE_SNOOPED) if system else 0))

  def map_dma(self, va: int, mem) -> int:
    self.map(va, mem.bus_addrs, system=True)
    return va

  # --- queues (2.11)
  def compute_queue(self, va: int = VA_BASE + (1 << 30), ring_bytes: int = 1 << 16) -> Queue:
    q = Queue(self, va, ring_bytes, 4, MEC_DOORBELL)
    self.w_fields(gc.regGRBM_GFX_CNTL, MEID=1)
    self.w(gc.regCP_HQD_ACTIVE, 0)
    self.w(gc.regCP_HQD_VMID, 0)
    self.w(gc.regCP_HQD_PQ_BASE, (va >> 8) & 0xFFFFFFFF)
    self.w(gc.regCP_HQD_PQ_BASE_HI, va >> 40)
    self.w(gc.regCP_HQD_PQ_RPTR, 0)
    self.w(gc.regCP_HQD_PQ_RPTR_REPORT_ADDR, q.rptr_va & 0xFFFFFFFF)
    self.w(gc.regCP_HQD_PQ_RPTR_REPORT_ADDR_HI, q.rptr_va >> 32)
    self.w(gc.regCP_HQD_PQ_WPTR_POLL_ADDR, q.wptr_va & 0xFFFFFFFF)
    self.w(gc.regCP_HQD_PQ_WPTR_POLL_ADDR_HI, q.wptr_va >> 32)
    self.w_fields(gc.regCP_HQD_PQ_DOORBELL_CONTROL, DOORBELL_OFFSET=MEC_DOORBELL // 4, DOORBELL_EN=1)
    self.w_fields(gc.regCP_HQD_PQ_CONTROL, QUEUE_SIZE=(ring_bytes // 4).bit_length() - 2, RPTR_BLOCK_SIZE=5)
    self.w(gc.regCP_HQD_AQL_CONTROL, 0)
    self.w(gc.regCP_HQD_ACTIVE, 1)
    self.w(gc.regGRBM_GFX_CNTL, 0)
    return q

  def sdma_queue(self, va: int = VA_BASE + (2 << 30), ring_bytes: int = 1 << 16) -> Queue:
    q = Queue(self, va, ring_bytes, 1, SDMA_DOORBELL)
    self.w(gc.regSDMA0_QUEUE0_MINOR_PTR_UPDATE, 1, "GC")
    for reg in (gc.regSDMA0_QUEUE0_RB_RPTR, gc.regSDMA0_QUEUE0_RB_RPTR_HI, gc.regSDMA0_QUEUE0_RB_WPTR, gc.regSDMA0_QUEUE0_RB_WPTR_HI):
      self.w(reg, 0, "GC")
    self.w(gc.regSDMA0_QUEUE0_RB_BASE, (va >> 8) & 0xFFFFFFFF, "GC")
    self.w(gc.regSDMA0_QUEUE0_RB_BASE_HI, va >> 40, "GC")
    self.w(gc.regSDMA0_QUEUE0_RB_RPTR_ADDR_LO, q.rptr_va & 0xFFFFFFFF, "GC")
    self.w(gc.regSDMA0_QUEUE0_RB_RPTR_ADDR_HI, q.rptr_va >> 32, "GC")
    self.w(gc.regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO, q.wptr_va & 0xFFFFFFFF, "GC")
    self.w(gc.regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI, q.wptr_va >> 32, "GC")
    self.w_fields(gc.regSDMA0_QUEUE0_DOORBELL_OFFSET, "GC", OFFSET=SDMA_DOORBELL // 4)
    self.w_fields(gc.regSDMA0_QUEUE0_DOORBELL, "GC", ENABLE=1)
    self.w(gc.regSDMA0_QUEUE0_MINOR_PTR_UPDATE, 0, "GC")
    self.w_fields(gc.regSDMA0_QUEUE0_RB_CNTL, "GC", RB_ENABLE=1, RB_SIZE=(ring_bytes // 4).bit_length() - 1,
                  RPTR_WRITEBACK_ENABLE=1, RPTR_WRITEBACK_TIMER=4, RB_PRIV=1, F32_WPTR_POLL_ENABLE=1)
    self.w_fields(gc.regSDMA0_QUEUE0_IB_CNTL, "GC", IB_ENABLE=1)
    return q

  # --- boot (2.4 with the steps a test needs; boot allocations are deterministic, so a partial boot finds its
  # structures at the same VRAM addresses the full boot of an earlier process used)
  def boot(self, fw: dict[str, bytes], partial: bool = False) -> None:
    self.dev.enable_bus_master()
    self.root = self.alloc(4096)
    self.vram.write_bytes(self.root, bytes(4096))
    if partial:
      self.ih_paddr, self.ih_size = self.alloc(1 << 16), 1 << 16
      self.msg1 = self.alloc(1 << 20, 1 << 20)
      self.ring, self.cmd, self.fence = self.alloc(0x10000), self.alloc(4096), self.alloc(4096)
      self.tmr = self.alloc(0x1300000, 1 << 20)
    else:
      self.soc_init()
      self.hub_init("MM")
      self.ih_init()
      self.psp_bootloader(fw)
      self.wait(lambda: self.r(mp.regMP0_SMN_C2PMSG_81), "sOS failed to start")
      self.psp_ring_create()
      self.psp_load_all(fw)
    self.smu_table = self.alloc(16 << 10)
    if not partial:
      for msg, p in ((0xE, self.mc(self.smu_table) >> 32), (0xF, self.mc(self.smu_table) & 0xFFFFFFFF), (0x6, 0)):
        assert self.smu_msg(msg, p)[0] == SMU_OK
    self.gfx_init(fw["mec_start"])
    self.sdma_init()


def pm4(op: int, *payload: int) -> list[int]:
  return [nvd.PACKET3(op, len(payload) - 1), *payload]


def release_mem(va: int, value: int, data_sel: int = 1, int_sel: int = 0, ctx: int = 0) -> list[int]:
  """RELEASE_MEM at end of pipe (CACHE_FLUSH_AND_INV_TS_EVENT, event index 5) writing `value` to `va`."""
  return pm4(nvd.PACKET3_RELEASE_MEM, soc21_enum.CACHE_FLUSH_AND_INV_TS_EVENT | 5 << 8, data_sel << 29 | int_sel << 24,
             va & 0xFFFFFFFF, va >> 32, value & 0xFFFFFFFF, value >> 32, ctx)


class Queue:
  """A ring in host DMA memory with its read/write pointer words (the AM "gart page"), mapped into the GPU VA."""
  def __init__(self, drv: Driver, va: int, ring_bytes: int, unit: int, doorbell: int):
    self.drv, self.ring_va, self.size, self.unit, self.doorbell = drv, va, ring_bytes, unit, doorbell
    self.ring = drv.dev.alloc_dma(ring_bytes)
    self.ptrs = drv.dev.alloc_dma(4096)
    drv.map_dma(va, self.ring)
    self.ptrs_va = drv.map_dma(va + ring_bytes, self.ptrs)
    self.wptr_va, self.rptr_va = self.ptrs_va + 56, self.ptrs_va + 128      # amd_queue_t write/read dispatch ids
    self.put = 0

  @property
  def rptr(self) -> int: return int.from_bytes(self.ptrs.view[128:136], "little")

  def submit(self, words: list[int]) -> None:
    for w in words:
      off = (self.put * self.unit) % self.size if self.unit == 4 else self.put % self.size
      self.ring.view[off:off + 4] = w.to_bytes(4, "little")
      self.put += 1 if self.unit == 4 else 4
    self.ptrs.view[56:64] = self.put.to_bytes(8, "little")
    self.drv.hdp_flush()
    self.drv.db.write64(self.doorbell, self.put)

  def wait_idle(self, timeout: float | None = None) -> None:
    self.drv.wait(lambda: self.rptr == self.put, f"queue at doorbell {self.doorbell:#x}: rptr {self.rptr} != {self.put}", timeout)


_MODULES: dict[int, object] = {}


def reg_module(reg):
  if id(reg) not in _MODULES:
    _MODULES[id(reg)] = next(m for m in MODULE_IP if any(v is reg for v in vars(m).values()))
  return _MODULES[id(reg)]
