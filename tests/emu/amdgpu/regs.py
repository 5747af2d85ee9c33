"""Register-level helpers for the Navi31 model tests. Booting is the real AM driver's (drivers.amd.pci.PCIIface); these
are the accesses a test makes itself: BAR5 registers by their generated objects (beyond BAR5 through the RSMU window),
and the few handshakes a test drives by hand, often wrongly on purpose: PSP bootloader and ring commands, SMU messages,
the IH ring, and packets fed into a queue the driver created. Facts: discovery.h, gmc_v11_0.c, psp_v13_0.c, smu_v13_0.c, ih_v6_0.c.
"""
from __future__ import annotations
import ctypes, struct, time

import numpy as np

from autogen.regfields import Reg
from autogen.amd import (gc_11_0_0 as gc, mmhub_3_0_0 as mmhub, nbio_4_3_0 as nbio, mp_13_0_0 as mp, osssys_6_0_0 as oss,
                         hdp_6_0_0 as hdp, psp_gfx_if, amdgpu_psp, amdgpu_vm as vm, nvd, soc21_enum)

# segment bases of a Navi31's IP blocks (amd_driver.md 2.2; test_navi31_pci checks the discovery table lists them)
BASES = {"GC": (0x1260, 0xA000, 0x1C000, 0x2402C00), "MMHUB": (0x1A000, 0x2408800),
         "NBIO": (0x0, 0x14, 0xD20, 0x10400, 0x241B000, 0x4040000), "MP0": (0x16000, 0xDC0000, 0xE00000, 0xE40000, 0x243FC00),
         "MP1": (0x16000, 0xDC0000, 0xE00000, 0xE40000, 0x243FC00), "HDP": (0xF20, 0x240A400), "OSSSYS": (0x10A0, 0x240A000)}
MODULE_IP = {gc: "GC", mmhub: "MMHUB", nbio: "NBIO", mp: "MP0", oss: "OSSSYS", hdp: "HDP"}
IP_OF = {id(r): ip for m, ip in MODULE_IP.items() for r in vars(m).values() if isinstance(r, Reg)}
SMU_OK = 1
# where the hand-driven PSP handshakes keep their buffers in VRAM (nothing else uses VRAM before a driver boots)
MSG1, PSP_RING, PSP_CMD, PSP_FENCE, TMR = 0, 1 << 20, (1 << 20) + 0x10000, (1 << 20) + 0x11000, 2 << 20
PSP_RING_BYTES, TMR_BYTES = 0x10000, 0x1300000
BOOTLOADER = {"KDB": amdgpu_psp.PSP_BL__LOAD_KEY_DATABASE, "SPL": amdgpu_psp.PSP_BL__LOAD_TOS_SPL_TABLE,
              "SYS_DRV": amdgpu_psp.PSP_BL__LOAD_SYSDRV, "SOS": amdgpu_psp.PSP_BL__LOAD_SOSDRV}
GFX_ORDER = ("SDMA_UCODE_TH1", "SDMA_UCODE_TH0", "RS64_MEC", "RS64_MEC_P0_STACK", "IMU_I", "IMU_D", "RLC_IRAM",
             "RLC_DRAM_BOOT", "RLC_P", "RLC_V", "RLC_G")                     # amd_driver.md 2.9, observed Navi31 order


class Regs:
  """The registers and BARs of one emulated Navi31 (`pci`: its PCIDevice), and the driver interface that booted it."""
  def __init__(self, pci, iface=None):
    self.pci, self.iface, self.model = pci, iface, pci.model
    self.mmio, self.vram, self.db = pci.map_bar(5), pci.map_bar(0), pci.map_bar(2)
    self.fence_value = 0

  def addr(self, reg: Reg, ip: str | None = None) -> int: return reg.addr(BASES[ip or IP_OF[id(reg)]])

  def rd(self, addr: int) -> int:
    if addr * 4 < self.mmio.size: return self.mmio.read32(addr * 4)
    self.w(nbio.regBIF_BX_PF0_RSMU_INDEX, addr * 4)
    return self.r(nbio.regBIF_BX_PF0_RSMU_DATA)

  def wd(self, addr: int, value: int) -> None:
    if addr * 4 < self.mmio.size: return self.mmio.write32(addr * 4, value)
    self.w(nbio.regBIF_BX_PF0_RSMU_INDEX, addr * 4)
    self.w(nbio.regBIF_BX_PF0_RSMU_DATA, value)

  def r(self, reg: Reg, ip: str | None = None) -> int: return self.rd(self.addr(reg, ip))

  def w(self, reg: Reg, value: int | None = None, ip: str | None = None, **fields: int) -> None:
    self.wd(self.addr(reg, ip), reg.encode(**fields) if value is None else value)

  def wait(self, cond, what: str, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
      if time.monotonic() > end: raise TimeoutError(what)
      time.sleep(0.001)

  def mc(self, paddr: int) -> int:
    """The MC address of a VRAM offset: VRAM sits at MMMC_VM_FB_LOCATION_BASE (16 MiB units)."""
    return ((self.r(mmhub.regMMMC_VM_FB_LOCATION_BASE) & 0xFFFFFF) << 24) + paddr

  def hdp_flush(self) -> None: self.wd(self.r(nbio.regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL) >> 2, 0)

  # --- GC hub: the driver's VMID 0 page tables (4 levels in VRAM, amdgpu_vm.h)
  def pte(self, va: int) -> int:
    """VRAM offset of the 4 KiB PTE that maps `va`."""
    table = (self.r(gc.regGCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32) << 32 | self.r(gc.regGCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32)) & ~0xFFF
    rel = va - ((self.r(gc.regGCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32) << 32 | self.r(gc.regGCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32)) << 12)
    for shift in (39, 30, 21):
      e = self.vram.read64(table + ((rel >> shift) & 0x1FF) * 8)
      assert e & vm.AMDGPU_PTE_VALID and not e & vm.AMDGPU_PDE_PTE, f"{va:#x} is not mapped by a 4 KiB PTE"
      table = e & 0xFFFF_FFFF_F000
    return table + ((rel >> 12) & 0x1FF) * 8

  def flush_tlb(self) -> None:
    self.hdp_flush()
    self.w(gc.regGCVM_INVALIDATE_ENG17_REQ, PER_VMID_INVALIDATE_REQ=1, INVALIDATE_L2_PTES=1, INVALIDATE_L1_PTES=1)
    self.wait(lambda: self.r(gc.regGCVM_INVALIDATE_ENG17_ACK) & 1, "GC TLB flush")

  # --- SMU mailbox (2.8)
  def smu_msg(self, msg: int, param: int = 0, timeout: float = 1.0) -> tuple[int, int]:
    self.w(mp.regMP1_SMN_C2PMSG_90, 0, "MP1")
    self.w(mp.regMP1_SMN_C2PMSG_82, param, "MP1")
    self.w(mp.regMP1_SMN_C2PMSG_66, msg, "MP1")
    self.wait(lambda: self.r(mp.regMP1_SMN_C2PMSG_90, "MP1") != 0, f"SMU msg {msg:#x} timeout", timeout)
    return self.r(mp.regMP1_SMN_C2PMSG_90, "MP1"), self.r(mp.regMP1_SMN_C2PMSG_82, "MP1")

  # --- IH ring 0 (2.12), wherever the driver put it
  def ih_ring(self) -> tuple[int, int]:
    """(VRAM offset, bytes) of IH ring 0."""
    mc = (self.r(oss.regIH_RB_BASE_HI) << 32 | self.r(oss.regIH_RB_BASE)) << 8
    return mc - self.mc(0), 4 << oss.regIH_RB_CNTL.decode(self.r(oss.regIH_RB_CNTL))["RB_SIZE"]

  def ih_resize(self, size: int) -> None:
    """Shrink ring 0 in place (to test a full ring): disabled, pointers reset, enabled with `size` bytes."""
    self.w(oss.regIH_RB_CNTL, 0)
    self.w(oss.regIH_RB_WPTR, 0)
    self.w(oss.regIH_RB_RPTR, 0)
    self.w(oss.regIH_RB_CNTL, RB_ENABLE=1, RB_SIZE=(size // 4).bit_length() - 1, WPTR_OVERFLOW_ENABLE=1, MC_SPACE=4)

  def ih_entries(self) -> list[tuple[int, ...]]:
    """The entries from the read pointer to the write pointer, which the read pointer then follows."""
    ring, size = self.ih_ring()
    wptr, rptr, out = self.r(oss.regIH_RB_WPTR) & 0x3FFFC, self.r(oss.regIH_RB_RPTR) & 0x3FFFC, []
    while rptr != wptr:
      out.append(struct.unpack("<8I", self.vram.read_bytes(ring + rptr, 32)))
      rptr = (rptr + 32) % size
    self.w(oss.regIH_RB_RPTR, rptr)
    return out

  # --- PSP by hand (2.9): images go to VRAM at MSG1, the KM ring and its command buffer after it
  def psp_bootloader(self, images: dict[str, bytes], order=("KDB", "SPL", "SYS_DRV", "SOS"), spl: str = "SPL") -> None:
    for comp in order:
      self.wait(lambda: self.r(mp.regMP0_SMN_C2PMSG_35) & 0x80000000, "BL not ready")
      self.vram.write_bytes(MSG1, images[spl if comp == "SPL" else comp])
      self.hdp_flush()
      self.w(mp.regMP0_SMN_C2PMSG_36, self.mc(MSG1) >> 20)
      self.w(mp.regMP0_SMN_C2PMSG_35, BOOTLOADER[comp])

  def psp_ring_create(self) -> None:
    self.wait(lambda: self.r(mp.regMP0_SMN_C2PMSG_64) & 0x80000000, "sOS not ready")
    self.w(mp.regMP0_SMN_C2PMSG_69, self.mc(PSP_RING) & 0xFFFFFFFF)
    self.w(mp.regMP0_SMN_C2PMSG_70, self.mc(PSP_RING) >> 32)
    self.w(mp.regMP0_SMN_C2PMSG_71, PSP_RING_BYTES)
    self.w(mp.regMP0_SMN_C2PMSG_64, psp_gfx_if.GFX_CTRL_CMD_ID_INIT_GPCOM_RING)
    self.wait(lambda: self.r(mp.regMP0_SMN_C2PMSG_64) & 0x8000FFFF == 0x80000000, "sOS ring not created")

  def psp_cmd(self, cmd_id: int, member: str | None = None, **values: int) -> psp_gfx_if.psp_gfx_resp:
    cmd = psp_gfx_if.psp_gfx_cmd_resp(buf_size=ctypes.sizeof(psp_gfx_if.psp_gfx_cmd_resp), buf_version=psp_gfx_if.PSP_GFX_CMD_BUF_VERSION,
                                      cmd_id=cmd_id)
    for k, v in values.items(): setattr(getattr(cmd.cmd, member), k, v)
    self.vram.write_bytes(PSP_CMD, bytes(cmd))
    wptr, self.fence_value = self.r(mp.regMP0_SMN_C2PMSG_67), self.fence_value + 1
    cmd_mc, fence_mc = self.mc(PSP_CMD), self.mc(PSP_FENCE)
    frame = psp_gfx_if.psp_gfx_rb_frame(cmd_buf_addr_lo=cmd_mc & 0xFFFFFFFF, cmd_buf_addr_hi=cmd_mc >> 32, fence_addr_lo=fence_mc & 0xFFFFFFFF,
                                        fence_addr_hi=fence_mc >> 32, fence_value=self.fence_value)
    self.vram.write_bytes(PSP_RING + wptr * 4, bytes(frame))
    self.hdp_flush()
    self.w(mp.regMP0_SMN_C2PMSG_67, (wptr + ctypes.sizeof(frame) // 4) % (PSP_RING_BYTES // 4))
    self.wait(lambda: self.vram.read32(PSP_FENCE) == self.fence_value, "sOS ring not responding")
    return psp_gfx_if.psp_gfx_resp.from_buffer_copy(self.vram.read_bytes(PSP_CMD + psp_gfx_if.psp_gfx_cmd_resp.resp.offset,
                                                                         ctypes.sizeof(psp_gfx_if.psp_gfx_resp)))

  def psp_load(self, cmd_id: int, member: str, image: bytes, **values: int) -> psp_gfx_if.psp_gfx_resp:
    """A command whose payload is `image`, staged at MSG1 (LOAD_TOC, LOAD_IP_FW)."""
    self.vram.write_bytes(MSG1, image)
    at, prefix = self.mc(MSG1), "toc" if member == "cmd_load_toc" else "fw"
    return self.psp_cmd(cmd_id, member, **{f"{prefix}_phy_addr_lo": at & 0xFFFFFFFF, f"{prefix}_phy_addr_hi": at >> 32,
                                           f"{prefix}_size": len(image)}, **values)

  def load_ip_fw(self, name: str, image: bytes) -> int:
    return self.psp_load(psp_gfx_if.GFX_CMD_ID_LOAD_IP_FW, "cmd_load_ip_fw", image, fw_type=getattr(psp_gfx_if, f"GFX_FW_TYPE_{name}")).status

  def setup_tmr(self) -> int:
    return self.psp_cmd(psp_gfx_if.GFX_CMD_ID_SETUP_TMR, "cmd_setup_tmr", buf_phy_addr_lo=self.mc(TMR) & 0xFFFFFFFF,
                        buf_phy_addr_hi=self.mc(TMR) >> 32, buf_size=TMR_BYTES, tmr_flags=2, system_phy_addr_lo=TMR).status


class Queue:
  """A hardware queue the real driver created (PCIIface.create_queue), fed by hand: packets into the ring, the write
  pointer published, the HDP flushed, the doorbell rung."""
  def __init__(self, regs: Regs, kind: str, ring_bytes: int = 1 << 16):
    self.regs, self.desc = regs, regs.iface.create_queue(kind, ring_bytes)
    self.unit = 4 if kind == "compute" else 1          # bytes per pointer step: PM4 counts dwords, SDMA bytes
    self.words = np.frombuffer(self.desc.ring.view, np.uint32)
    self.put = 0

  @property
  def rptr(self) -> int: return int(self.desc.rptr[0])

  def submit(self, words: list[int]) -> None:
    for w in words:
      self.words[(self.put * self.unit // 4) % len(self.words)] = w
      self.put += 4 // self.unit
    self.desc.wptr[0] = self.put
    self.regs.hdp_flush()
    self.desc.doorbell.write64(self.desc.doorbell_offset, self.put)

  def wait_idle(self, timeout: float = 5.0) -> None:
    self.regs.wait(lambda: self.rptr == self.put, f"queue at doorbell {self.desc.doorbell_offset:#x}: rptr {self.rptr} != {self.put}", timeout)


def pm4(op: int, *payload: int) -> list[int]:
  return [nvd.PACKET3(op, len(payload) - 1), *payload]


def release_mem(va: int, value: int, data_sel: int = 1, int_sel: int = 0, ctx: int = 0) -> list[int]:
  """RELEASE_MEM at end of pipe (CACHE_FLUSH_AND_INV_TS_EVENT, event index 5) writing `value` to `va`."""
  return pm4(nvd.PACKET3_RELEASE_MEM, soc21_enum.CACHE_FLUSH_AND_INV_TS_EVENT | 5 << 8, data_sel << 29 | int_sel << 24,
             va & 0xFFFFFFFF, va >> 32, value & 0xFFFFFFFF, value >> 32, ctx)


def signal_works(regs: Regs) -> bool:
  """A compute queue of the booted driver writes a signal into host memory."""
  q, sig = Queue(regs, "compute"), regs.iface.alloc(4096, host=True)
  q.submit(release_mem(sig.va, 0x5EED))
  q.wait_idle()
  return int.from_bytes(sig.view[:4], "little") == 0x5EED


def acquire_mem(gcr: int) -> list[int]:
  """ACQUIRE_MEM over the whole address space with GCR_CNTL = `gcr` (the gfx10+ layout)."""
  return pm4(nvd.PACKET3_ACQUIRE_MEM, 0, 0xFFFFFFFF, 0xFF, 0, 0, 0xA, gcr)


def sh_reg(reg: Reg, *values: int) -> list[int]:
  """SET_SH_REG of consecutive registers from `reg` (a GC register)."""
  return pm4(nvd.PACKET3_SET_SH_REG, reg.addr(BASES["GC"]) - nvd.PACKET3_SET_SH_REG_START, *values)


def launch(code_va: int, user=(), block=(32, 1, 1), grid=(1, 1, 1), rsrc1: int = 0, rsrc2: int | None = None,
           rsrc3: int = 0, scratch_va: int = 0, tmpring: int = 0, wave32: bool = True, extra=()) -> list[int]:
  """The COMPUTE_* registers and DISPATCH_DIRECT of one launch of the code at `code_va` (user SGPRs `user`;
  rsrc2 by default: the user SGPR count and TGID_X_EN); `extra`: more packets just before the dispatch."""
  rsrc2 = gc.regCOMPUTE_PGM_RSRC2.encode(USER_SGPR=len(user), TGID_X_EN=1) if rsrc2 is None else rsrc2
  words = (sh_reg(gc.regCOMPUTE_PGM_LO, code_va >> 8 & 0xFFFFFFFF, code_va >> 40) + sh_reg(gc.regCOMPUTE_PGM_RSRC1, rsrc1, rsrc2) +
           sh_reg(gc.regCOMPUTE_PGM_RSRC3, rsrc3) + sh_reg(gc.regCOMPUTE_TMPRING_SIZE, tmpring) +
           sh_reg(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO, scratch_va >> 8 & 0xFFFFFFFF, scratch_va >> 40) +
           sh_reg(gc.regCOMPUTE_NUM_THREAD_X, *block))
  if user: words += sh_reg(gc.regCOMPUTE_USER_DATA_0, *user)
  initiator = gc.regCOMPUTE_DISPATCH_INITIATOR.encode(COMPUTE_SHADER_EN=1, CS_W32_EN=int(wave32))
  return words + list(extra) + pm4(nvd.PACKET3_DISPATCH_DIRECT, *grid, initiator)


def queue_error(regs: Regs, words: list[int], match: str, q: Queue | None = None) -> str:
  """Submit `words` to a (new) compute queue and return the model's log line of the error that stops it."""
  q = q or Queue(regs, "compute")
  q.submit(words)
  regs.wait(lambda: any(match in line for line in regs.model.log_lines), f"an error mentioning {match!r}")
  return next(line for line in regs.model.log_lines if match in line)
