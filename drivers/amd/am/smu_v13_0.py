"""SMU 13.0 (MP1 13.0.0), the power-management firmware's IP block (Linux smu_v13_0.c, smu_v13_0_0_ppt.c): its
mailbox, DPM clock levels, power limit, the metrics table, and the mode-1 reset (ids:
smu_v13_0_0_ppsmc.h, smu13_driver_if_v13_0_0.h)."""
from __future__ import annotations
import ctypes, time
from typing import Any
from types import ModuleType, SimpleNamespace
from autogen.amd import mp_13_0_0 as mp, smu_v13_0_0_ppsmc, smu13_driver_if_v13_0_0
from drivers.amd.am.ip_block import IPBlock

TABLE_SIZE = 16 << 10


def mailbox(mp: ModuleType) -> SimpleNamespace:
  """The SMU mailbox (smu_v13_0_set_smu_mailbox_registers) and debug mailbox (smu_v13_0_0_set_smu_mailbox_registers) in
  the MP1 register module `mp`."""
  return SimpleNamespace(MSG=mp.regMP1_SMN_C2PMSG_66, PARAM=mp.regMP1_SMN_C2PMSG_82, RESP=mp.regMP1_SMN_C2PMSG_90,
                         DEBUG_MSG=mp.regMP1_SMN_C2PMSG_75, DEBUG_PARAM=mp.regMP1_SMN_C2PMSG_53, DEBUG_RESP=mp.regMP1_SMN_C2PMSG_54)


# debug-mailbox message (smu_v13_0_0_ppt.c DEBUGSMC_MSG_Mode1Reset)
DEBUGSMC_MSG_MODE1_RESET = 2
LEVEL_COUNT = 0xFF               # GetDpmFreqByIndex index that asks for the number of levels (smu_v13_0_get_dpm_level_count)
FREQ_MASK = 0x7FFFFFFF           # the answer's value bits; bit 31 flags fine-grained DPM (smu_v13_0_get_fine_grained_status)
BUSY_THRESHOLD = 15              # % activity above which the pre-deep-sleep clock is the one to show (SMU 13.0.0)


def pmfw_ids(smu_if: ModuleType, svi_planes: tuple[int, int, int]) -> SimpleNamespace:
  """What the driver asks the PMFW for, by the ids of this version's driver interface header (smuXX_driver_if_*.h: its
  PPCLK_*, TEMP_*, SVI_PLANE_*, THROTTLER_*_BIT and TABLE_* enums, which differ between versions; Linux maps its generic
  SMU_* enums onto them per ASIC, smu_v13_0_0_ppt.c / smu_v14_0_2_ppt.c *_table_map). `svi_planes`: the AvgVoltage indexes of
  the gfx, soc and memory rails (as the ppt's get_gpu_metrics reads them)."""
  return SimpleNamespace(
    clocks={"gfx": smu_if.PPCLK_GFXCLK, "soc": smu_if.PPCLK_SOCCLK, "mem": smu_if.PPCLK_UCLK, "fclk": smu_if.PPCLK_FCLK},
    temps={"edge": smu_if.TEMP_EDGE, "hotspot": smu_if.TEMP_HOTSPOT, "mem": smu_if.TEMP_MEM},
    voltages=dict(zip(("gfx", "soc", "mem"), svi_planes)),
    throttlers={v: k[len("THROTTLER_"):-len("_BIT")] for k, v in vars(smu_if).items() if k.startswith("THROTTLER_") and k.endswith("_BIT")},
    metrics_table=smu_if.TABLE_SMU_METRICS)

class SMUError(RuntimeError):
  """The SMU answered a message with a failure response."""


class SMUv13_0(IPBlock):
  IP = "MP1"
  M, ppsmc, smu_if = mailbox(mp), smu_v13_0_0_ppsmc, smu13_driver_if_v13_0_0    # registers, message ids, tables of this version
  ids = pmfw_ids(smu13_driver_if_v13_0_0, (smu13_driver_if_v13_0_0.SVI_PLANE_GFX, smu13_driver_if_v13_0_0.SVI_PLANE_SOC,
                                           smu13_driver_if_v13_0_0.SVI_PLANE_VMEMP))

  def sw_init(self) -> None:
    self.table = self.core.mm.palloc(TABLE_SIZE, boot=True, zero=True)
    self.dpm: dict[str, list[int]] = {}

  def send(self, message: int, param: int = 0, timeout: float = 10.0) -> int:
    """One mailbox round trip: clear the response, write the parameter, write the message, wait, read the result."""
    a = self.core
    self.w(self.M.RESP, 0)
    self.w(self.M.PARAM, param)
    self.w(self.M.MSG, message)
    deadline = time.monotonic() + timeout
    while (resp := self.r(self.M.RESP)) == 0:
      if time.monotonic() > deadline: raise TimeoutError(f"{a.pci.bus}: SMU message {message:#x} timeout")
      time.sleep(1e-5)
    if resp != self.ppsmc.PPSMC_Result_OK:
      why = {self.ppsmc.PPSMC_Result_UnknownCmd: "unknown command", self.ppsmc.PPSMC_Result_CmdRejectedPrereq: "rejected (prerequisite)",
             self.ppsmc.PPSMC_Result_CmdRejectedBusy: "rejected (busy)"}.get(resp, "failed")
      raise SMUError(f"{a.pci.bus}: SMU message {message:#x} (param {param:#x}) {why}: response {resp:#x}")
    return self.r(self.M.PARAM)

  def alive(self) -> bool:
    try: self.send(self.ppsmc.PPSMC_MSG_GetSmuVersion, timeout=0.1)
    except (TimeoutError, SMUError): return False
    return self.r(self.M.RESP) != 0

  def mode1_reset(self) -> None:
    """Reset the whole GPU (everything but the PCI config space) through the debug mailbox. Debug messages get no
    response (smu_cmn.c): the SMU itself restarts, so the caller waits a fixed time instead."""
    self.w(self.M.DEBUG_PARAM, 0)
    self.w(self.M.DEBUG_MSG, DEBUGSMC_MSG_MODE1_RESET)
    self.w(self.M.DEBUG_RESP, 0)

  def hw_init(self) -> None:
    """Tell the firmware where the driver table is, then enable every feature (smu_v13_0_set_driver_table_location,
    smu_v13_0_system_features_control)."""
    mc = self.core.mc(self.table)
    self.send(self.ppsmc.PPSMC_MSG_SetDriverDramAddrHigh, mc >> 32)
    self.send(self.ppsmc.PPSMC_MSG_SetDriverDramAddrLow, mc & 0xFFFFFFFF)
    self.send(self.ppsmc.PPSMC_MSG_EnableAllSmuFeatures)

  def levels(self, clk: str) -> list[int]:
    """The DPM levels (MHz) of one clock, queried once: the count, then each level."""
    if clk not in self.dpm:
      n = self.send(self.ppsmc.PPSMC_MSG_GetDpmFreqByIndex, self.ids.clocks[clk] << 16 | LEVEL_COUNT) & FREQ_MASK
      self.dpm[clk] = [self.send(self.ppsmc.PPSMC_MSG_GetDpmFreqByIndex, self.ids.clocks[clk] << 16 | i) & FREQ_MASK for i in range(n)]
    return self.dpm[clk]

  def late_init(self) -> None: self.set_clocks(-1)
  def hw_fini(self) -> None: self.set_clocks(0)

  def set_clocks(self, level: int) -> None:
    """Pin every clock's soft min and max to one DPM level (-1: the highest, 0: the lowest)."""
    for clk in ("mem", "fclk", "soc", "gfx"):
      mhz = self.levels(clk)[level]
      self.send(self.ppsmc.PPSMC_MSG_SetSoftMinByFreq, self.ids.clocks[clk] << 16 | mhz)
      self.send(self.ppsmc.PPSMC_MSG_SetSoftMaxByFreq, self.ids.clocks[clk] << 16 | mhz)

  def set_power_limit(self, watts: int) -> None: self.send(self.ppsmc.PPSMC_MSG_SetPptLimit, watts)
  def power_limit(self) -> int: return self.send(self.ppsmc.PPSMC_MSG_GetPptLimit)

  def metrics(self) -> Any:
    """The SMU's metrics table, transferred to the driver table in VRAM and read from there."""
    self.send(self.ppsmc.PPSMC_MSG_TransferTableSmu2Dram, self.ids.metrics_table)
    self.core.hdp_flush()
    raw = bytes(self.core.vram[self.table:self.table + ctypes.sizeof(self.smu_if.SmuMetricsExternal_t)])
    return self.smu_if.SmuMetricsExternal_t.from_buffer_copy(raw).SmuMetrics

  def reading(self) -> dict[str, Any]:
    """What am_smi shows (drivers/amd/smi.py GPUStatus fields), from one metrics table: its MetricsCounter, activity %,
    temperatures (C), voltages (mV), clocks (MHz: the pre-deep-sleep one while busy), fan, power (W), throttlers."""
    m = self.metrics()
    clock = lambda pre, post, activity: pre if activity > BUSY_THRESHOLD else post
    return dict(
      metrics_counter=m.MetricsCounter, gfx_activity=m.AverageGfxActivity, mem_activity=m.AverageUclkActivity,
      temps={k: m.AvgTemperature[i] for k, i in self.ids.temps.items()}, voltages={k: m.AvgVoltage[i] for k, i in self.ids.voltages.items()},
      clocks={"gfx": clock(m.AverageGfxclkFrequencyPreDs, m.AverageGfxclkFrequencyPostDs, m.AverageGfxActivity),
              "mem": clock(m.AverageMemclkFrequencyPreDs, m.AverageMemclkFrequencyPostDs, m.AverageUclkActivity),
              "fclk": clock(m.AverageFclkFrequencyPreDs, m.AverageFclkFrequencyPostDs, m.AverageUclkActivity)},
      fan_rpm=m.AvgFanRpm, fan_pwm=m.AvgFanPwm, power_w=m.AverageSocketPower, power_limit_w=m.dGPU_W_MAX,
      throttle=[self.ids.throttlers.get(i, f"#{i}") for i, pct in enumerate(m.ThrottlingPercentage) if pct > 0])
