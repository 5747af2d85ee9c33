"""PSP (MP0 13.0.0): the bootloader, then the secure OS (sOS) with its KM command ring (amd_driver.md 2.9).

Registers (C2PMSG_n: MP0_SMN_C2PMSG_n of mp_13_0_0, MPASP_SMN_C2PMSG_n of mp_14_0_2, the same offsets):
- 35: bootloader command/status. Reads bit 31 set while the bootloader waits for a command. Writing a
  PSP_BL__* command loads the component whose image sits at MC address C2PMSG_36 << 20 (its size comes
  from the image header). Accepted in this order: KDB, SPL (the TOS SPL table; on MP0 13.x the KDB image is
  also taken here, as drivers send it), SYS_DRV, then SOC/INTF/DBG/RAS drivers, then SOS. A refused
  component halts the bootloader: bit 31 stays clear and `failures` says why. After SOS the sOS runs:
  C2PMSG_81 reads its version (non-zero) and C2PMSG_64 reads 0x80000000.
- 64: ring control (sOS). Write GFX_CTRL_CMD_ID_INIT_GPCOM_RING (ring MC = C2PMSG_70:69, size C2PMSG_71
  bytes) or GFX_CTRL_CMD_ID_DESTROY_RINGS; reads back 0x80000000 | status (0 = done). No response before
  the sOS runs.
- 67: ring write pointer in dwords (modulo the ring size). Each write executes the 64-byte psp_gfx_rb_frame(s)
  from the previous pointer: the 1 KiB psp_gfx_cmd_resp at cmd_buf_addr runs, its resp is written back
  (status at +864, tmr_size at +880), then fence_value is written to fence_addr. All addresses are MC
  addresses in VRAM.
Commands: LOAD_TOC, SETUP_TMR, LOAD_IP_FW, AUTOLOAD_RLC. LOAD_TOC parses the TOC (firmware.py: its layout, and
what is read of a TOC in AMD's own layout) and answers resp.tmr_size with the TMR size it names. Order enforced:
LOAD_TOC, then the SMU firmware (PMFW-centralized C-state management loads it before the TMR), then
SETUP_TMR (buf_size >= the TOC's TMR size, 1 MiB aligned, system_phy_addr = the VRAM offset when virt_phy_addr), then
the other firmware with RLC_G last, then AUTOLOAD_RLC, which needs SDMA TH0/TH1, RS64 MEC + P0 stack, IMU I/D
and RLC IRAM/DRAM/P/V/G. LOAD_IP_FW takes only those components and the SMU (firmware.IP_FIRMWARE), and only those
the TOC lists: any other fw_type is refused. A refused command gets resp.status TEE_ERROR_NOT_SUPPORTED (unknown
command ids: PSP_ERR_UNKNOWN_COMMAND) and a line in `failures` naming the component and the reason.
Not checked: signatures (no keys; firmware.py says what stands in for them), the TMR's contents, what the firmware does.
"""
from __future__ import annotations
import ctypes
from ctypes import Structure, c_uint8, c_uint32
from typing import TYPE_CHECKING

from autogen.amd import psp_gfx_if
from emu.amdgpu import firmware
from emu.amdgpu.registers import Block
from emu.pci import ModelError
if TYPE_CHECKING: from emu.amdgpu.function import GPUFunction

READY = 0x80000000
STAGE_BOOTLOADER, STAGE_SOS, STAGE_HALTED = 0, 1, 2
BL_ORDER = ("KDB", "SPL", "SYS_DRV", "SOC_DRV", "INTF_DRV", "DBG_DRV", "RAS_DRV", "SOS")
RESP_OFFSET = psp_gfx_if.psp_gfx_cmd_resp.resp.offset
FRAME_DW = ctypes.sizeof(psp_gfx_if.psp_gfx_rb_frame) // 4
MAILBOX_PREFIX = {"mp_13_0_0": "MP0", "mp_14_0_2": "MPASP"}   # the C2PMSG registers' names by register module


class PSPState(Structure):
  """The PSP's part of the persistent device state (see navi31.py for the file)."""
  _fields_ = [("stage", c_uint32), ("bl_loaded", c_uint32), ("ring_ok", c_uint32), ("ring_rptr", c_uint32),
              ("toc", c_uint32), ("tmr_ok", c_uint32), ("autoload", c_uint32), ("fw_loaded", c_uint8 * 32),
              ("tmr_size", c_uint32), ("toc_fw", c_uint32)]   # the TOC's TMR size, the IP_FIRMWARE it lists (bit i: entry i)


class Refused(Exception):
  def __init__(self, msg: str, status: int = psp_gfx_if.TEE_ERROR_NOT_SUPPORTED):
    super().__init__(msg)
    self.status = status


class PSPModel(Block):
  name = ip = "MP0"

  def __init__(self, dev: GPUFunction, state: PSPState):
    super().__init__(dev)
    mp, prefix = dev.chip.reg("MP0"), MAILBOX_PREFIX[dev.chip.regs["MP0"]]
    self.msg = {n: getattr(mp, f"reg{prefix}_SMN_C2PMSG_{n}") for n in (35, 36, 64, 67, 69, 70, 71, 81)}
    self.STORAGE = (self.msg[36], self.msg[69], self.msg[70], self.msg[71])
    self.rules = firmware.RULES[dev.chip.versions["MP0"]]    # what this PSP generation's firmware looks like and loads
    self.s = state
    self.failures: list[str] = []

  def handlers(self):
    return {self.addr(self.msg[35]): (None, self._bootloader),
            self.addr(self.msg[64]): (None, self._ring_control),
            self.addr(self.msg[67]): (None, self._ring_wptr),
            self.addr(self.msg[81]): (None, self._read_only)}

  def power_on(self) -> None:
    ctypes.memset(ctypes.addressof(self.s), 0, ctypes.sizeof(self.s))
    self.set(self.msg[35], READY)

  def loaded(self, name: str) -> bool:
    t = getattr(psp_gfx_if, f"GFX_FW_TYPE_{name}")
    return bool(self.s.fw_loaded[t // 8] >> (t % 8) & 1)

  def _fail(self, msg: str) -> None:
    self.failures.append(msg)
    self.dev.log(f"PSP: {msg}")

  def _read_only(self, addr: int, value: int) -> None:
    raise ModelError("C2PMSG_81 is written by the sOS only (it reads non-zero once the sOS runs)")

  # --- bootloader
  def _bootloader(self, addr: int, cmd: int) -> None:
    if self.s.stage == STAGE_SOS:
      raise ModelError(f"PSP bootloader command {cmd:#x} written to C2PMSG_35 while the sOS runs (C2PMSG_81 != 0): skip the bootloader stage")
    if not self.get(self.msg[35]) & READY:
      raise ModelError(f"PSP bootloader command {cmd:#x} written while the bootloader is not ready (wait for C2PMSG_35 bit 31)")
    self.regs[addr] = cmd            # busy: bit 31 clear until the component is in
    try: img = self._bl_load(cmd)
    except (firmware.Rejected, ValueError) as e:
      self.s.stage = STAGE_HALTED
      return self._fail(f"bootloader halted: {e}")
    self.s.bl_loaded |= 1 << BL_ORDER.index(img.name)
    if img.name == "SOS":
      self.s.stage = STAGE_SOS
      self.regs[addr] = 0
      self.set(self.msg[81], img.version or 1)
      self.set(self.msg[64], READY)
    else: self.regs[addr] = READY

  def _bl_load(self, cmd: int) -> firmware.Image:
    if (name := firmware.BL_COMMANDS.get(cmd)) is None: raise firmware.Rejected(f"unknown bootloader command {cmd:#x}")
    idx, done = BL_ORDER.index(name), [n for i, n in enumerate(BL_ORDER) if self.s.bl_loaded >> i & 1]
    if name in done: raise firmware.Rejected(f"{name} loaded twice")
    if later := [n for n in done if BL_ORDER.index(n) > idx]:
      raise firmware.Rejected(f"{name} sent after {later[-1]}: order is {', '.join(BL_ORDER)}")
    need = {"KDB": (), "SPL": ("KDB",), "SYS_DRV": ("KDB",)}.get(name, ("KDB", "SYS_DRV"))
    if missing := [n for n in need if n not in done]: raise firmware.Rejected(f"{name} sent before {', '.join(missing)}")
    mc = self.get(self.msg[36]) << 20
    limit = self.dev.gmc_mm.fb[1] + 1 - mc   # the image may extend to the end of VRAM
    total = self.rules.total(self.dev.gmc_mm.read_vram(mc, firmware.HEADER, f"{name} image (C2PMSG_36 = {mc >> 20:#x})"))
    data = self.dev.gmc_mm.read_vram(mc, max(firmware.HEADER, min(total, limit)), f"{name} image")
    return firmware.check(name, data, limit, ("KDB",) if name == "SPL" else (), self.rules)

  # --- KM ring
  def _ring_control(self, addr: int, value: int) -> None:
    self.regs[addr] = value
    if self.s.stage != STAGE_SOS: return   # nobody answers
    cmd, status = value & psp_gfx_if.GFX_CMD_ID_MASK, 0
    if cmd == psp_gfx_if.GFX_CTRL_CMD_ID_INIT_GPCOM_RING:
      mc, size = self.get(self.msg[70]) << 32 | self.get(self.msg[69]), self.get(self.msg[71])
      try:
        if self.s.ring_ok: raise ValueError("a KM ring already exists (DESTROY_RINGS first)")
        if size < 4096 or size % (FRAME_DW * 4) or mc % 4096:
          raise ValueError(f"ring of {size:#x} bytes at {mc:#x}: need a 4 KiB-aligned ring of whole 64-byte frames, at least 4 KiB")
        self.dev.gmc_mm.vram_offset(mc, size, "KM ring")
        self.s.ring_ok, self.s.ring_rptr = 1, 0
        self.set(self.msg[67], 0)
      except ValueError as e:
        self._fail(f"INIT_GPCOM_RING refused: {e}")
        status = 1
    elif cmd in (psp_gfx_if.GFX_CTRL_CMD_ID_DESTROY_RINGS, psp_gfx_if.GFX_CTRL_CMD_ID_DESTROY_GPCOM_RING): self.s.ring_ok = 0
    else:
      self._fail(f"ring control command {value:#x} is not modelled")
      status = psp_gfx_if.PSP_ERR_UNKNOWN_COMMAND & 0xFFFF
    self.regs[addr] = READY | status

  def _ring_wptr(self, addr: int, wptr: int) -> None:
    if self.s.stage != STAGE_SOS or not self.s.ring_ok:
      raise ModelError("C2PMSG_67 (KM ring write pointer) written but the sOS has no ring: INIT_GPCOM_RING first")
    size_dw = self.get(self.msg[71]) // 4
    if wptr % FRAME_DW or wptr > size_dw:
      raise ModelError(f"KM ring write pointer {wptr:#x}: must be a multiple of {FRAME_DW} dwords within the {size_dw:#x}-dword ring")
    self.regs[addr] = wptr
    ring = self.get(self.msg[70]) << 32 | self.get(self.msg[69])
    while self.s.ring_rptr != wptr % size_dw:
      frame = psp_gfx_if.psp_gfx_rb_frame.from_buffer_copy(self.dev.gmc_mm.read_vram(ring + self.s.ring_rptr * 4, FRAME_DW * 4, "KM ring frame"))
      self._frame(frame)
      self.s.ring_rptr = (self.s.ring_rptr + FRAME_DW) % size_dw

  def _frame(self, frame: psp_gfx_if.psp_gfx_rb_frame) -> None:
    cmd_mc, mm = frame.cmd_buf_addr_hi << 32 | frame.cmd_buf_addr_lo, self.dev.gmc_mm
    try:
      cmd = psp_gfx_if.psp_gfx_cmd_resp.from_buffer_copy(mm.read_vram(cmd_mc, ctypes.sizeof(psp_gfx_if.psp_gfx_cmd_resp), "PSP command buffer"))
      resp = psp_gfx_if.psp_gfx_resp()
      try: self._command(cmd, resp)
      except (Refused, firmware.Rejected, ValueError) as e:
        resp.status = getattr(e, "status", psp_gfx_if.TEE_ERROR_NOT_SUPPORTED)
        self._fail(str(e))
      mm.write_vram(cmd_mc + RESP_OFFSET, bytes(resp), "PSP response")
      mm.write_vram(frame.fence_addr_hi << 32 | frame.fence_addr_lo, frame.fence_value.to_bytes(4, "little"), "PSP fence")
    except ValueError as e:   # the frame points outside VRAM: nothing can be answered
      self._fail(f"ring frame dropped: {e}")

  def _command(self, cmd: psp_gfx_if.psp_gfx_cmd_resp, resp: psp_gfx_if.psp_gfx_resp) -> None:
    cid = cmd.cmd_id
    if cid == psp_gfx_if.GFX_CMD_ID_LOAD_TOC:
      c = cmd.cmd.cmd_load_toc
      toc = firmware.parse_toc(self._image("TOC", c.toc_phy_addr_hi << 32 | c.toc_phy_addr_lo, c.toc_size)[1], self.rules)
      self.s.toc, self.s.tmr_size = 1, toc.tmr_size
      self.s.toc_fw = sum(1 << i for i, n in enumerate(self.rules.ip_firmware) if n in toc.firmware)
      resp.tmr_size = toc.tmr_size
    elif cid == psp_gfx_if.GFX_CMD_ID_SETUP_TMR: self._setup_tmr(cmd.cmd.cmd_setup_tmr)
    elif cid == psp_gfx_if.GFX_CMD_ID_LOAD_IP_FW: self._load_ip_fw(cmd.cmd.cmd_load_ip_fw)
    elif cid == psp_gfx_if.GFX_CMD_ID_AUTOLOAD_RLC:
      if missing := [n for n in self.rules.ip_firmware[1:] if not self.loaded(n)]:
        raise Refused(f"AUTOLOAD_RLC before {', '.join(missing)} was loaded")
      self.s.autoload = 1
      self.dev.gfx.rlc_autoload_done()
    elif cid in {v for k, v in vars(psp_gfx_if).items() if k.startswith("GFX_CMD_ID_")}:
      raise Refused(f"PSP command {cid:#x} is not modelled (LOAD_TOC, SETUP_TMR, LOAD_IP_FW and AUTOLOAD_RLC are)")
    else: raise Refused(f"unknown PSP command id {cid:#x}", psp_gfx_if.PSP_ERR_UNKNOWN_COMMAND)

  def _image(self, name: str, mc: int, size: int) -> tuple[firmware.Image, bytes]:
    if size == 0: raise Refused(f"{name}: zero-sized image")
    data = self.dev.gmc_mm.read_vram(mc, size, f"{name} image")
    return firmware.check(name, data, size, rules=self.rules), data

  def _setup_tmr(self, c: psp_gfx_if.psp_gfx_cmd_setup_tmr) -> None:
    mc = c.buf_phy_addr_hi << 32 | c.buf_phy_addr_lo
    if not self.s.toc: raise Refused("SETUP_TMR before LOAD_TOC (the TOC gives the TMR size)")
    if not self.loaded("SMU"): raise Refused("SETUP_TMR before the SMU firmware: with PMFW-centralized C-state management the SMU loads first")
    if c.buf_size < self.s.tmr_size or mc % firmware.TMR_ALIGN:
      raise Refused(f"SETUP_TMR with {c.buf_size:#x} bytes at MC {mc:#x}: the TOC asks for >= {self.s.tmr_size:#x} bytes, 1 MiB aligned")
    off = self.dev.gmc_mm.vram_offset(mc, c.buf_size, "TMR")
    if c.bitfield.virt_phy_addr and (c.system_phy_addr_hi << 32 | c.system_phy_addr_lo) != off:
      raise Refused(f"SETUP_TMR system_phy_addr {c.system_phy_addr_hi << 32 | c.system_phy_addr_lo:#x} is not the TMR's VRAM offset {off:#x}")
    self.s.tmr_ok = 1

  def _load_ip_fw(self, c: psp_gfx_if.psp_gfx_cmd_load_ip_fw) -> None:
    name = firmware.FW_TYPE_NAMES.get(c.fw_type, f"fw_type {c.fw_type}")
    if name not in self.rules.ip_firmware: raise Refused(f"LOAD_IP_FW {name}: not a firmware type of {self.rules.psp}")
    if not self.s.toc: raise Refused(f"LOAD_IP_FW {name} before LOAD_TOC")
    if not self.s.toc_fw >> self.rules.ip_firmware.index(name) & 1: raise Refused(f"LOAD_IP_FW {name}: the TOC does not list it")
    if self.loaded(name): raise Refused(f"LOAD_IP_FW {name}: already loaded")
    if name == "SMU" and self.s.tmr_ok: raise Refused("LOAD_IP_FW SMU after SETUP_TMR: the SMU firmware goes before the TMR")
    if name != "SMU" and not self.s.tmr_ok: raise Refused(f"LOAD_IP_FW {name} before SETUP_TMR")
    if name in self.rules.ip_firmware[1:] and self.loaded("RLC_G"): raise Refused(f"LOAD_IP_FW {name} after RLC_G: RLC_G is the last GFX firmware")
    if self.s.autoload: raise Refused(f"LOAD_IP_FW {name} after AUTOLOAD_RLC")
    img, _ = self._image(name, c.fw_phy_addr_hi << 32 | c.fw_phy_addr_lo, c.fw_size)
    self.s.fw_loaded[c.fw_type // 8] |= 1 << (c.fw_type % 8)
    if name == "SMU": self.dev.smu.start(firmware.pmfw_version(img.version))
