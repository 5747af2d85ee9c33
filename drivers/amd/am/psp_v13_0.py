"""PSP 13.0 (MP0 13.0), the security processor that loads every other firmware (Linux psp_v13_0.c, amdgpu_psp.c):
the bootloader handshake, the KM ring, and the command sequence TOC -> SMU -> TMR -> IP firmware -> RLC autoload
(psp_v13_0.c, amdgpu_psp.c psp_load_fw; structures: psp_gfx_if.h)."""
from __future__ import annotations
import ctypes, time
from types import SimpleNamespace
from autogen.amd import mp_13_0_0 as mp, psp_gfx_if, amdgpu_psp
from drivers.amd.am.ip_block import IPBlock

MSG1_SIZE, RING_SIZE = 1 << 20, 0x10000
TMR_SIZE = 0x1300000                 # the TMR reserved: what Navi31's TOC asks for (amdgpu_psp.c psp_tmr_init), the size without a TOC
FRAME_DW = ctypes.sizeof(psp_gfx_if.psp_gfx_rb_frame) // 4




BL_READY = 1 << 31                   # BL_CMD bit 31 (psp_v13_0_wait_for_bootloader: 0x80000000)
RING_STOP_WAIT_S = 0.02              # after DESTROY_RINGS (psp_v13_0_ring_stop: mdelay(20))


class PSPError(RuntimeError):
  """The PSP rejected a command or a firmware component; the message names which and the status."""


class PSPv13_0(IPBlock):
  IP = "MP0"
  # the MP0 mailbox registers by role (psp_v13_0.c)
  M = SimpleNamespace(
    BL_CMD=mp.regMP0_SMN_C2PMSG_35,      # bootloader: command in, bit 31 = ready for the next one (psp_v13_0_wait_for_bootloader)
    BL_ADDR=mp.regMP0_SMN_C2PMSG_36,     # bootloader: MC address >> 20 of the component (psp_v13_0_bootloader_load_component)
    SOS_ALIVE=mp.regMP0_SMN_C2PMSG_81,   # non-zero once the sOS runs (psp_v13_0_is_sos_alive)
    RING_CTL=mp.regMP0_SMN_C2PMSG_64,    # KM ring command in, GFX_FLAG_RESPONSE + status out (psp_v13_0_ring_create)
    RING_WPTR=mp.regMP0_SMN_C2PMSG_67,   # KM ring write pointer in dwords (psp_v13_0_ring_set_wptr)
    RING_LO=mp.regMP0_SMN_C2PMSG_69, RING_HI=mp.regMP0_SMN_C2PMSG_70, RING_SIZE=mp.regMP0_SMN_C2PMSG_71)   # ring MC address, size

  def sw_init(self) -> None:
    mm = self.core.mm
    self.msg1 = mm.palloc(MSG1_SIZE, align=1 << 20, boot=True)
    self.cmd, self.fence = mm.palloc(4096, boot=True), mm.palloc(4096, boot=True)
    self.ring = mm.palloc(RING_SIZE, boot=True, zero=True)
    self.tmr = mm.palloc(TMR_SIZE, align=1 << 20, boot=True)
    self.wptr = 0

  def sos_alive(self) -> bool: return self.r(self.M.SOS_ALIVE) != 0

  def hw_init(self) -> None:
    fw = self.core.fw
    if not self.sos_alive():
      for fw_type, cmd, blob in fw.bootloader: self._bootloader_load(cmd, blob)
      deadline = time.monotonic() + 10
      while not self.sos_alive():
        if time.monotonic() > deadline: raise TimeoutError(f"{self.core.pci.bus}: PSP sOS failed to start after the bootloader stage")
        time.sleep(1e-4)
    self._ring_create()
    tmr_size = TMR_SIZE
    if fw.toc is not None:   # the PSP reads the TOC and answers the TMR size the listed firmware needs (psp_load_toc)
      addr = self._stage(fw.toc)
      cmd = self._cmd(psp_gfx_if.GFX_CMD_ID_LOAD_TOC)
      cmd.cmd.cmd_load_toc = psp_gfx_if.psp_gfx_cmd_load_toc(toc_phy_addr_lo=addr & 0xFFFFFFFF, toc_phy_addr_hi=addr >> 32, toc_size=len(fw.toc))
      resp = self._submit(cmd, "LOAD_TOC")
      if resp.tmr_size > TMR_SIZE: raise PSPError(f"PSP asks for a {resp.tmr_size:#x}-byte TMR; {TMR_SIZE:#x} was reserved")
      tmr_size = resp.tmr_size
    self._load_ip_fw(psp_gfx_if.GFX_FW_TYPE_SMU, fw.smu)   # GC 11: the SMU firmware goes before the TMR (reference 2.9)
    mc, cmd = self.core.mc(self.tmr), self._cmd(psp_gfx_if.GFX_CMD_ID_SETUP_TMR)
    cmd.cmd.cmd_setup_tmr = psp_gfx_if.psp_gfx_cmd_setup_tmr(buf_phy_addr_lo=mc & 0xFFFFFFFF, buf_phy_addr_hi=mc >> 32, buf_size=tmr_size,
                                                             system_phy_addr_lo=self.tmr & 0xFFFFFFFF, system_phy_addr_hi=self.tmr >> 32)
    cmd.cmd.cmd_setup_tmr.bitfield.virt_phy_addr = 1   # system_phy_addr holds the VRAM address too (psp_prep_tmr_cmd_buf)
    self._submit(cmd, "SETUP_TMR")
    for fw_type, blob in fw.ip: self._load_ip_fw(fw_type, blob)
    self._submit(self._cmd(psp_gfx_if.GFX_CMD_ID_AUTOLOAD_RLC), "AUTOLOAD_RLC")

  def _bootloader_load(self, cmd: int, blob: bytes) -> None:
    c = self.core
    self.wait(self.M.BL_CMD, BL_READY, BL_READY, "PSP bootloader not ready")
    c.vram[self.msg1:self.msg1 + MSG1_SIZE] = 0
    c.vram[self.msg1:self.msg1 + len(blob)] = memoryview(blob)
    c.hdp_flush()
    self.w(self.M.BL_ADDR, c.mc(self.msg1) >> 20)
    self.w(self.M.BL_CMD, cmd)
    if cmd != amdgpu_psp.PSP_BL__LOAD_SOSDRV: self.wait(self.M.BL_CMD, BL_READY, BL_READY, f"PSP bootloader (after command {cmd:#x})")

  def _ring_create(self) -> None:
    c = self.core
    if self.r(self.M.RING_SIZE) != 0:   # a ring from an earlier driver instance: destroy it first
      self.w(self.M.RING_CTL, psp_gfx_if.GFX_CTRL_CMD_ID_DESTROY_RINGS)
      time.sleep(RING_STOP_WAIT_S)
    self.wait(self.M.RING_CTL, psp_gfx_if.GFX_FLAG_RESPONSE, psp_gfx_if.GFX_FLAG_RESPONSE, "PSP sOS not ready")
    mc = c.mc(self.ring)
    self.w(self.M.RING_LO, mc & 0xFFFFFFFF); self.w(self.M.RING_HI, mc >> 32); self.w(self.M.RING_SIZE, RING_SIZE)
    self.w(self.M.RING_CTL, amdgpu_psp.PSP_RING_TYPE__KM << 16)   # the ring type in bits 16+ (psp_v13_0_ring_create)
    self.wait(self.M.RING_CTL, psp_gfx_if.GFX_FLAG_RESPONSE | psp_gfx_if.GFX_CMD_STATUS_MASK, psp_gfx_if.GFX_FLAG_RESPONSE,
              "PSP sOS ring not created")
    self.wptr = 0

  def _stage(self, blob: bytes) -> int:
    """Copy a firmware blob to the 1 MiB message buffer; returns its MC address."""
    if len(blob) > MSG1_SIZE: raise PSPError(f"a {len(blob)}-byte firmware blob does not fit the {MSG1_SIZE}-byte PSP buffer")
    self.core.vram[self.msg1:self.msg1 + len(blob)] = memoryview(blob)
    self.core.hdp_flush()
    return self.core.mc(self.msg1)

  def _load_ip_fw(self, fw_type: int, blob: bytes) -> None:
    addr = self._stage(blob)
    name = next((k[12:] for k, v in vars(psp_gfx_if).items() if k.startswith("GFX_FW_TYPE_") and v == fw_type), str(fw_type))
    cmd = self._cmd(psp_gfx_if.GFX_CMD_ID_LOAD_IP_FW)
    cmd.cmd.cmd_load_ip_fw = psp_gfx_if.psp_gfx_cmd_load_ip_fw(fw_phy_addr_lo=addr & 0xFFFFFFFF, fw_phy_addr_hi=addr >> 32,
                                                               fw_size=len(blob), fw_type=fw_type)
    self._submit(cmd, f"LOAD_IP_FW {name}")

  def _cmd(self, cmd_id: int) -> psp_gfx_if.psp_gfx_cmd_resp:
    return psp_gfx_if.psp_gfx_cmd_resp(buf_size=ctypes.sizeof(psp_gfx_if.psp_gfx_cmd_resp), buf_version=psp_gfx_if.PSP_GFX_CMD_BUF_VERSION,
                                       cmd_id=cmd_id)

  def _submit(self, cmd: psp_gfx_if.psp_gfx_cmd_resp, what: str) -> psp_gfx_if.psp_gfx_resp:
    """One command through the KM ring: the command buffer, a ring frame pointing at it and at the fence, the write
    pointer, then wait for the fence (psp_cmd_submit_buf / psp_ring_cmd_submit)."""
    c = self.core
    c.vram[self.cmd:self.cmd + ctypes.sizeof(cmd)] = memoryview(bytes(cmd))
    c.vram[self.fence:self.fence + 4] = 0
    fence_value = self.wptr // FRAME_DW + 1
    frame = psp_gfx_if.psp_gfx_rb_frame(cmd_buf_addr_lo=c.mc(self.cmd) & 0xFFFFFFFF, cmd_buf_addr_hi=c.mc(self.cmd) >> 32,
                                        fence_addr_lo=c.mc(self.fence) & 0xFFFFFFFF, fence_addr_hi=c.mc(self.fence) >> 32, fence_value=fence_value)
    at = self.ring + (self.wptr * 4) % RING_SIZE
    c.vram[at:at + ctypes.sizeof(frame)] = memoryview(bytes(frame))
    c.hdp_flush()
    self.wptr += FRAME_DW
    self.w(self.M.RING_WPTR, self.wptr)
    deadline = time.monotonic() + 10
    while int.from_bytes(c.vram[self.fence:self.fence + 4], "little") != fence_value:
      if time.monotonic() > deadline: raise TimeoutError(f"{c.pci.bus}: PSP sOS ring not responding to {what}")
      time.sleep(1e-4)
    at = self.cmd + psp_gfx_if.psp_gfx_cmd_resp.resp.offset
    resp = psp_gfx_if.psp_gfx_resp.from_buffer_copy(bytes(c.vram[at:at + ctypes.sizeof(psp_gfx_if.psp_gfx_resp)]))
    if resp.status & psp_gfx_if.GFX_CMD_STATUS_MASK:
      raise PSPError(f"{c.pci.bus}: PSP command {what} failed with status {resp.status:#x}: the firmware was rejected; check the "
                     f"files in {c.fw.files.get('sos', 'the firmware directory')} and its neighbours")
    return resp
