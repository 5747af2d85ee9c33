"""PSP (MP0 13.0): the security processor that loads every other firmware: bootloader handshake, the KM
ring, and the command sequence TOC -> SMU -> TMR -> IP firmware -> RLC autoload
(reference/amd_driver.md 2.9; structures: psp_gfx_if.h)."""
from __future__ import annotations
import ctypes, time
from typing import TYPE_CHECKING
from autogen.amd import mp_13_0_0 as mp, psp_gfx_if as g, amdgpu_psp
if TYPE_CHECKING: from drivers.amd.am.amdev import AMDev

MSG1_SIZE, RING_SIZE, TMR_SIZE = 1 << 20, 0x10000, 0x1300000
BL_READY = 1 << 31                   # C2PMSG_35 bit 31: the bootloader takes the next component
RING_READY = 1 << 31                 # C2PMSG_64 bit 31: the ring interface is idle
FRAME_DW = ctypes.sizeof(g.psp_gfx_rb_frame) // 4


class PSPError(RuntimeError):
  """The PSP rejected a command or a firmware component; the message names which and the status."""


class PSP:
  def __init__(self, adev: AMDev):
    self.adev = adev
    mm = adev.mm
    self.msg1 = mm.palloc(MSG1_SIZE, align=1 << 20, boot=True)
    self.cmd, self.fence = mm.palloc(4096, boot=True), mm.palloc(4096, boot=True)
    self.ring = mm.palloc(RING_SIZE, boot=True, zero=True)
    self.tmr = mm.palloc(TMR_SIZE, align=1 << 20, boot=True)
    self.wptr = 0

  def r(self, n: int) -> int: return self.adev.rreg("MP0", getattr(mp, f"regMP0_SMN_C2PMSG_{n}"))
  def w(self, n: int, v: int) -> None: self.adev.wreg("MP0", getattr(mp, f"regMP0_SMN_C2PMSG_{n}"), v)
  def wait(self, n: int, mask: int, value: int, what: str) -> None:
    self.adev.wait("MP0", getattr(mp, f"regMP0_SMN_C2PMSG_{n}"), mask, value, what)

  def sos_alive(self) -> bool: return self.r(81) != 0

  def init_hw(self) -> None:
    fw = self.adev.fw
    if not self.sos_alive():
      for fw_type, cmd, blob in fw.bootloader: self._bootloader_load(cmd, blob)
      deadline = time.monotonic() + 10
      while not self.sos_alive():
        if time.monotonic() > deadline: raise TimeoutError(f"{self.adev.pci.bus}: PSP sOS failed to start after the bootloader stage")
        time.sleep(1e-4)
    self._ring_create()
    if fw.toc is not None:
      resp = self._submit(g.GFX_CMD_ID_LOAD_TOC, "cmd_load_toc", self._stage(fw.toc), toc_size=len(fw.toc), what="LOAD_TOC")
      if resp.tmr_size > TMR_SIZE: raise PSPError(f"PSP asks for a {resp.tmr_size:#x}-byte TMR; {TMR_SIZE:#x} was reserved")
    self._load_ip_fw(g.GFX_FW_TYPE_SMU, fw.smu)
    tmr = self.adev.mc(self.tmr)
    self._submit(g.GFX_CMD_ID_SETUP_TMR, "cmd_setup_tmr", None, buf_phy_addr_lo=tmr & 0xFFFFFFFF, buf_phy_addr_hi=tmr >> 32,
                 buf_size=TMR_SIZE, tmr_flags=2, system_phy_addr_lo=self.tmr & 0xFFFFFFFF, system_phy_addr_hi=self.tmr >> 32,
                 what="SETUP_TMR")   # tmr_flags bit 1: virt_phy_addr
    for fw_type, blob in fw.ip: self._load_ip_fw(fw_type, blob)
    self._submit(g.GFX_CMD_ID_AUTOLOAD_RLC, None, None, what="AUTOLOAD_RLC")

  def _bootloader_load(self, cmd: int, blob: bytes) -> None:
    self.wait(35, BL_READY, BL_READY, "PSP bootloader not ready")
    self.adev.vram[self.msg1:self.msg1 + MSG1_SIZE] = 0
    self.adev.vram[self.msg1:self.msg1 + len(blob)] = memoryview(blob)
    self.adev.hdp_flush()
    self.w(36, self.adev.mc(self.msg1) >> 20)
    self.w(35, cmd)
    if cmd != amdgpu_psp.PSP_BL__LOAD_SOSDRV: self.wait(35, BL_READY, BL_READY, f"PSP bootloader (after command {cmd:#x})")

  def _ring_create(self) -> None:
    if self.r(71) != 0:   # a ring from an earlier driver instance: destroy it first
      self.w(64, g.GFX_CTRL_CMD_ID_DESTROY_RINGS)
      time.sleep(0.02)
    self.wait(64, RING_READY, RING_READY, "PSP sOS not ready")
    mc = self.adev.mc(self.ring)
    self.w(69, mc & 0xFFFFFFFF); self.w(70, mc >> 32); self.w(71, RING_SIZE)
    self.w(64, amdgpu_psp.PSP_RING_TYPE__KM << 16)
    self.wait(64, 0x8000FFFF, 0x80000000, "PSP sOS ring not created")
    self.wptr = 0

  def _stage(self, blob: bytes) -> int:
    """Copy a firmware blob to the 1 MiB message buffer; returns its MC address."""
    if len(blob) > MSG1_SIZE: raise PSPError(f"a {len(blob)}-byte firmware blob does not fit the {MSG1_SIZE}-byte PSP buffer")
    self.adev.vram[self.msg1:self.msg1 + len(blob)] = memoryview(blob)
    self.adev.hdp_flush()
    return self.adev.mc(self.msg1)

  def _load_ip_fw(self, fw_type: int, blob: bytes) -> None:
    addr = self._stage(blob)
    name = next((k[12:] for k, v in vars(g).items() if k.startswith("GFX_FW_TYPE_") and v == fw_type), str(fw_type))
    self._submit(g.GFX_CMD_ID_LOAD_IP_FW, "cmd_load_ip_fw", None, fw_phy_addr_lo=addr & 0xFFFFFFFF, fw_phy_addr_hi=addr >> 32,
                 fw_size=len(blob), fw_type=fw_type, what=f"LOAD_IP_FW {name}")

  def _submit(self, cmd_id: int, member: str | None, toc_addr: int | None, what: str, **fields) -> g.psp_gfx_resp:
    a = self.adev
    cmd = g.psp_gfx_cmd_resp(buf_size=ctypes.sizeof(g.psp_gfx_cmd_resp), buf_version=g.PSP_GFX_CMD_BUF_VERSION, cmd_id=cmd_id)
    if member == "cmd_load_toc": fields.update(toc_phy_addr_lo=toc_addr & 0xFFFFFFFF, toc_phy_addr_hi=toc_addr >> 32)
    if member is not None:
      body = getattr(cmd.cmd, member)
      for k, v in fields.items(): setattr(body, k, v)
    a.vram[self.cmd:self.cmd + ctypes.sizeof(cmd)] = memoryview(bytes(cmd))
    a.vram[self.fence:self.fence + 4] = 0
    fence_value = self.wptr // FRAME_DW + 1
    frame = g.psp_gfx_rb_frame(cmd_buf_addr_lo=a.mc(self.cmd) & 0xFFFFFFFF, cmd_buf_addr_hi=a.mc(self.cmd) >> 32,
                               fence_addr_lo=a.mc(self.fence) & 0xFFFFFFFF, fence_addr_hi=a.mc(self.fence) >> 32, fence_value=fence_value)
    at = self.ring + (self.wptr * 4) % RING_SIZE
    a.vram[at:at + ctypes.sizeof(frame)] = memoryview(bytes(frame))
    a.hdp_flush()
    self.wptr += FRAME_DW
    self.w(67, self.wptr)
    deadline = time.monotonic() + 10
    while int.from_bytes(a.vram[self.fence:self.fence + 4], "little") != fence_value:
      if time.monotonic() > deadline: raise TimeoutError(f"{a.pci.bus}: PSP sOS ring not responding to {what}")
      time.sleep(1e-4)
    resp = g.psp_gfx_resp.from_buffer_copy(bytes(a.vram[self.cmd + g.psp_gfx_cmd_resp.resp.offset:][:ctypes.sizeof(g.psp_gfx_resp)]))
    if resp.status & g.GFX_CMD_STATUS_MASK:
      raise PSPError(f"{a.pci.bus}: PSP command {what} failed with status {resp.status:#x}: the firmware was rejected; check the "
                     f"files in {a.fw.files.get('sos', 'the firmware directory')} and its neighbours")
    return resp
