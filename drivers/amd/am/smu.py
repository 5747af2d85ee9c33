"""SMU (MP1 13.0.0): the power-management firmware's mailbox, DPM clock levels, power limit, the metrics
table, and the mode-1 reset (reference/amd_driver.md 2.8; ids: smu_v13_0_0_ppsmc.h, smu13_driver_if_v13_0_0.h)."""
from __future__ import annotations
import ctypes, time
from typing import TYPE_CHECKING
from autogen.amd import mp_13_0_0 as mp, smu_v13_0_0_ppsmc as msg, smu13_driver_if_v13_0_0 as drv
if TYPE_CHECKING: from drivers.amd.am.amdev import AMDev

TABLE_SIZE = 16 << 10
DEBUGSMC_MSG_MODE1_RESET = 2     # debug-mailbox message of SMU 13.0.0/13.0.10 (smu_v13_0_0_ppt.c)
CLOCKS = {"gfx": drv.PPCLK_GFXCLK, "soc": drv.PPCLK_SOCCLK, "mem": drv.PPCLK_UCLK, "fclk": drv.PPCLK_FCLK}
LEVEL_COUNT = 0xFF               # GetDpmFreqByIndex index that asks for the number of levels


class SMUError(RuntimeError):
  """The SMU answered a message with a failure response."""


class SMU:
  def __init__(self, adev: AMDev):
    self.adev = adev
    self.table = adev.mm.palloc(TABLE_SIZE, boot=True, zero=True)
    self.dpm: dict[str, list[int]] = {}

  def _reg(self, n: int): return getattr(mp, f"regMP1_SMN_C2PMSG_{n}")

  def send(self, message: int, param: int = 0, timeout: float = 10.0) -> int:
    """One mailbox round trip: clear the response, write the parameter, write the message, wait, read the result."""
    resp_r, param_r, msg_r = 90, 82, 66
    a = self.adev
    a.wreg("MP1", self._reg(resp_r), 0)
    a.wreg("MP1", self._reg(param_r), param)
    a.wreg("MP1", self._reg(msg_r), message)
    deadline = time.monotonic() + timeout
    while (resp := a.rreg("MP1", self._reg(resp_r))) == 0:
      if time.monotonic() > deadline: raise TimeoutError(f"{a.pci.bus}: SMU message {message:#x} timeout")
      time.sleep(1e-5)
    if resp != msg.PPSMC_Result_OK:
      why = {msg.PPSMC_Result_UnknownCmd: "unknown command", msg.PPSMC_Result_CmdRejectedPrereq: "rejected (prerequisite)",
             msg.PPSMC_Result_CmdRejectedBusy: "rejected (busy)"}.get(resp, "failed")
      raise SMUError(f"{a.pci.bus}: SMU message {message:#x} (param {param:#x}) {why}: response {resp:#x}")
    return a.rreg("MP1", self._reg(param_r))

  def alive(self) -> bool:
    try: self.send(msg.PPSMC_MSG_GetSmuVersion, timeout=0.1)
    except (TimeoutError, SMUError): return False
    return self.adev.rreg("MP1", self._reg(90)) != 0

  def mode1_reset(self) -> None:
    """Reset the whole GPU (everything but the PCI config space) through the debug mailbox. Debug messages get no
    response (smu_cmn.c): the SMU itself restarts, so the caller waits a fixed time instead."""
    a = self.adev
    a.wreg("MP1", self._reg(53), 0)
    a.wreg("MP1", self._reg(75), DEBUGSMC_MSG_MODE1_RESET)
    a.wreg("MP1", self._reg(54), 0)

  def init_hw(self) -> None:
    mc = self.adev.mc(self.table)
    self.send(msg.PPSMC_MSG_SetDriverDramAddrHigh, mc >> 32)
    self.send(msg.PPSMC_MSG_SetDriverDramAddrLow, mc & 0xFFFFFFFF)
    self.send(msg.PPSMC_MSG_EnableAllSmuFeatures)

  def levels(self, clk: str) -> list[int]:
    """The DPM levels (MHz) of one clock, queried once: the count, then each level."""
    if clk not in self.dpm:
      n = self.send(msg.PPSMC_MSG_GetDpmFreqByIndex, CLOCKS[clk] << 16 | LEVEL_COUNT) & 0x7FFFFFFF
      self.dpm[clk] = [self.send(msg.PPSMC_MSG_GetDpmFreqByIndex, CLOCKS[clk] << 16 | i) & 0x7FFFFFFF for i in range(n)]
    return self.dpm[clk]

  def set_clocks(self, level: int) -> None:
    """Pin every clock's soft min and max to one DPM level (-1: the highest, 0: the lowest)."""
    for clk in ("mem", "fclk", "soc", "gfx"):
      mhz = self.levels(clk)[level]
      self.send(msg.PPSMC_MSG_SetSoftMinByFreq, CLOCKS[clk] << 16 | mhz)
      self.send(msg.PPSMC_MSG_SetSoftMaxByFreq, CLOCKS[clk] << 16 | mhz)

  def set_power_limit(self, watts: int) -> None: self.send(msg.PPSMC_MSG_SetPptLimit, watts)
  def power_limit(self) -> int: return self.send(msg.PPSMC_MSG_GetPptLimit)

  def metrics(self) -> drv.SmuMetrics_t:
    """The SMU's metrics table, transferred to the driver table in VRAM and read from there."""
    self.send(msg.PPSMC_MSG_TransferTableSmu2Dram, drv.TABLE_SMU_METRICS)
    self.adev.hdp_flush()
    raw = bytes(self.adev.vram[self.table:self.table + ctypes.sizeof(drv.SmuMetricsExternal_t)])
    return drv.SmuMetricsExternal_t.from_buffer_copy(raw).SmuMetrics
