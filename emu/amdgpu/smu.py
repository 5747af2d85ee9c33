"""SMU (MP1 13.0.0): the power-management firmware's mailboxes, DPM tables and the metrics table. smu_v14.py is MP1 14.0.2/14.0.3,
which differs in its ids and tables only.

Mailbox (MP1_SMN_C2PMSG_n, mp_13_0_0; amd_driver.md 2.8): write the parameter to 82, the message id to 66;
the response appears in 90 (PPSMC_Result_OK 1, Failed 0xFF, UnknownCmd 0xFE, CmdRejectedPrereq 0xFD) and
a return value in 82. Nothing answers until the PSP has loaded the PMFW (LOAD_IP_FW SMU): 90 stays as the
driver left it. Debug mailbox: 53 = parameter, 75 = message (DEBUGSMC_MSG_Mode1Reset = 2, per
smu_v13_0_0_ppt.c), 54 = response.

Messages (smu_v13_0_0_ppsmc.h): GetSmuVersion (the PMFW image's version), GetDriverIfVersion,
SetDriverDramAddrHigh/Low, EnableAllSmuFeatures / DisableAllSmuFeatures, GetRunningSmuFeaturesLow/High,
GetDpmFreqByIndex (param clk << 16 | index; index 0xFF returns the level count, bit 31 set for a
fine-grained clock), GetMinDpmFreq/GetMaxDpmFreq, SetSoftMinByFreq/SetSoftMaxByFreq (clk << 16 | MHz,
clamped to the table; need the features enabled), SetPptLimit/GetPptLimit (watts, 100..402),
TransferTableSmu2Dram (param & 0xFFFF = table id; TABLE_SMU_METRICS = 5 writes SmuMetricsExternal_t to the
driver table, an MC address reached through the MM hub), PrepareMp1ForUnload, Mode1Reset (resets the whole device). Clock ids: PPCLK_GFXCLK 0,
SOCCLK 1, UCLK 2, FCLK 3.

The metrics are computed when transferred, from what the engines did since the last transfer: activity
is their busy fraction (averaged over ~0.2 s), power follows activity and clocks up to the PPT limit
(throttling PPT0 beyond it), temperatures approach a power-dependent target with a 1.5 s time constant,
and the fan spins up past 60 C hotspot. Values are plausible for an RX 7900 XTX, not measurements.
"""
from __future__ import annotations
import ctypes, math, time
from ctypes import Structure, c_double, c_uint32, c_uint64
from typing import TYPE_CHECKING

from autogen.amd import smu_v13_0_0_ppsmc, smu13_driver_if_v13_0_0
from emu.amdgpu.mmu import GPUPageFault
from emu.amdgpu.registers import Block, storage
if TYPE_CHECKING: from emu.amdgpu.function import GPUFunction

# DPM levels (MHz) per clock id (PPCLK_GFXCLK 0, SOCCLK 1, UCLK 2, FCLK 3 in every smuXX_driver_if header): plausible RX 7900 XTX
# tables; GFXCLK is fine-grained (any MHz in range)
GFXCLK, SOCCLK, UCLK, FCLK = 0, 1, 2, 3
DPM = {GFXCLK: (500, 2500), SOCCLK: (500, 960, 1200), UCLK: (96, 456, 772, 1250), FCLK: (888, 1200, 1600, 1900)}
FINE_GRAINED = {GFXCLK}
PPT_DEFAULT, PPT_MIN, PPT_MAX = 355, 100, 402            # watts
IDLE_W, MEM_W = 22.0, 35.0
ACTIVITY_TAU, THERMAL_TAU = 0.2, 1.5                     # seconds
DEBUGSMC_MSG_Mode1Reset = 2
# mailbox responses: the same in every PPSMC header (smu_v13_0_0_ppsmc.h, smu_v14_0_2_ppsmc.h)
OK, FAILED, UNKNOWN, PREREQ = 0x1, 0xFF, 0xFE, 0xFD


class SMUState(Structure):
  """The SMU's part of the persistent device state (see navi31.py for the file)."""
  _fields_ = [("alive", c_uint32), ("version", c_uint32), ("features", c_uint64), ("table_hi", c_uint32),
              ("table_lo", c_uint32), ("soft_min", c_uint32 * 4), ("soft_max", c_uint32 * 4), ("ppt_w", c_uint32),
              ("counter", c_uint32), ("gfx_act", c_double), ("mem_act", c_double), ("t_edge", c_double),
              ("t_hotspot", c_double), ("t_mem", c_double), ("energy_j", c_double), ("last_wall", c_double),
              ("seen_busy_ns", c_uint64 * 2)]   # engine busy time (gfx, sdma) at the last update, whichever process made it


class SMUModel(Block):
  name = ip = "MP1"
  ppsmc, smu_if = smu_v13_0_0_ppsmc, smu13_driver_if_v13_0_0     # this version's message ids and driver interface

  def __init__(self, dev: GPUFunction, state: SMUState):
    super().__init__(dev)
    ppsmc, self.mp = self.ppsmc, dev.chip.reg("MP1")
    self.STORAGE = storage(self.mp, "MP1_SMN_C2PMSG_82", "MP1_SMN_C2PMSG_90", "MP1_SMN_C2PMSG_53", "MP1_SMN_C2PMSG_54")
    self.features = sum(1 << v for k, v in vars(self.smu_if).items() if k.startswith("FEATURE_") and k.endswith("_BIT") and "SPARE" not in k)
    self.msg_names = {v: k[10:] for k, v in vars(ppsmc).items() if k.startswith("PPSMC_MSG_")}
    self.s = state
    self.messages: list[tuple[int, int, int]] = []    # (message, parameter, response) this process sent
    self._handlers = {ppsmc.PPSMC_MSG_GetSmuVersion: lambda p: (OK, self.s.version),
                      ppsmc.PPSMC_MSG_SetDriverDramAddrHigh: self._dram_hi, ppsmc.PPSMC_MSG_SetDriverDramAddrLow: self._dram_lo,
                      ppsmc.PPSMC_MSG_EnableAllSmuFeatures: self._enable, ppsmc.PPSMC_MSG_DisableAllSmuFeatures: self._disable,
                      ppsmc.PPSMC_MSG_GetRunningSmuFeaturesLow: lambda p: (OK, self.s.features & 0xFFFFFFFF),
                      ppsmc.PPSMC_MSG_GetRunningSmuFeaturesHigh: lambda p: (OK, self.s.features >> 32),
                      ppsmc.PPSMC_MSG_GetDpmFreqByIndex: self._freq_by_index,
                      ppsmc.PPSMC_MSG_GetMinDpmFreq: lambda p: self._table_end(p, 0), ppsmc.PPSMC_MSG_GetMaxDpmFreq: lambda p: self._table_end(p, -1),
                      ppsmc.PPSMC_MSG_SetSoftMinByFreq: lambda p: self._soft(p, self.s.soft_min),
                      ppsmc.PPSMC_MSG_SetSoftMaxByFreq: lambda p: self._soft(p, self.s.soft_max),
                      ppsmc.PPSMC_MSG_SetPptLimit: self._set_ppt, ppsmc.PPSMC_MSG_GetPptLimit: lambda p: (OK, self.s.ppt_w),
                      ppsmc.PPSMC_MSG_TransferTableSmu2Dram: self._transfer, ppsmc.PPSMC_MSG_PrepareMp1ForUnload: lambda p: (OK, 0),
                      **self.version_messages()}

  def version_messages(self) -> dict:
    """The messages only this version has: SMU 13.0.0's GetDriverIfVersion and mailbox Mode1Reset."""
    return {self.ppsmc.PPSMC_MSG_GetDriverIfVersion: lambda p: (OK, self.smu_if.SMU13_0_0_DRIVER_IF_VERSION),
            self.ppsmc.PPSMC_MSG_Mode1Reset: self._mode1_reset}

  def handlers(self):
    return {self.addr(self.mp.regMP1_SMN_C2PMSG_66): (None, self._message),
            self.addr(self.mp.regMP1_SMN_C2PMSG_75): (None, self._debug_message)}

  def power_on(self) -> None:
    ctypes.memset(ctypes.addressof(self.s), 0, ctypes.sizeof(self.s))

  def start(self, version: int) -> None:
    """The PSP loaded the PMFW: the SMU runs with its default tables."""
    self.s.alive, self.s.version, self.s.ppt_w = 1, version, PPT_DEFAULT
    for clk, levels in DPM.items(): self.s.soft_min[clk], self.s.soft_max[clk] = levels[0], levels[-1]
    self.s.t_edge, self.s.t_hotspot, self.s.t_mem = self._targets(IDLE_W)
    self.s.last_wall = time.time()

  # --- mailboxes
  def _message(self, addr: int, msg: int) -> None:
    self.regs[addr] = msg
    if not self.s.alive: return           # no firmware: nobody answers
    param = self.get(self.mp.regMP1_SMN_C2PMSG_82)
    handler = self._handlers.get(msg)
    if handler is None:
      self.dev.log(f"SMU: message {msg:#x} ({self.msg_names.get(msg, 'unknown')}) is not modelled")
      resp, value = UNKNOWN, param
    else: resp, value = handler(param)
    self.messages.append((msg, param, resp))
    if self._handlers.get(msg) != self._mode1_reset or resp != OK: self.set(self.mp.regMP1_SMN_C2PMSG_82, value)
    self.set(self.mp.regMP1_SMN_C2PMSG_90, resp)

  def _debug_message(self, addr: int, msg: int) -> None:
    self.regs[addr] = msg
    if not self.s.alive: return
    if msg == DEBUGSMC_MSG_Mode1Reset: return self.dev.mode1_reset()
    self.dev.log(f"SMU: debug message {msg:#x} is not modelled (only DEBUGSMC_MSG_Mode1Reset = 2)")
    self.set(self.mp.regMP1_SMN_C2PMSG_54, UNKNOWN)

  # --- messages: (response, return value)
  def _dram_hi(self, p: int) -> tuple[int, int]:
    self.s.table_hi = p
    return OK, 0

  def _dram_lo(self, p: int) -> tuple[int, int]:
    self.s.table_lo = p
    return OK, 0

  def _enable(self, p: int) -> tuple[int, int]:
    self.s.features = self.features
    return OK, 0

  def _disable(self, p: int) -> tuple[int, int]:
    self.s.features = 0
    return OK, 0

  def _freq_by_index(self, p: int) -> tuple[int, int]:
    clk, idx = p >> 16, p & 0xFFFF
    if (levels := DPM.get(clk)) is None: return self._fail(f"GetDpmFreqByIndex: clock {clk} has no DPM table")
    if idx == 0xFF: return OK, len(levels) | (0x80000000 if clk in FINE_GRAINED else 0)
    if idx >= len(levels): return self._fail(f"GetDpmFreqByIndex: clock {clk} has {len(levels)} levels, asked for {idx}")
    return OK, levels[idx]

  def _table_end(self, p: int, end: int) -> tuple[int, int]:
    if (levels := DPM.get(p >> 16)) is None: return self._fail(f"Get{'Min' if end == 0 else 'Max'}DpmFreq: clock {p >> 16} has no DPM table")
    return OK, levels[end]

  def _soft(self, p: int, limits) -> tuple[int, int]:
    clk, mhz = p >> 16, p & 0xFFFF
    if not self.s.features: return PREREQ, 0
    if (levels := DPM.get(clk)) is None: return self._fail(f"soft limit for clock {clk}, which has no DPM table")
    limits[clk] = min(max(mhz, levels[0]), levels[-1])
    return OK, 0

  def _set_ppt(self, p: int) -> tuple[int, int]:
    watts = p & 0xFFFF
    if not self.s.features: return PREREQ, 0
    if not PPT_MIN <= watts <= PPT_MAX: return self._fail(f"SetPptLimit {watts} W: the board allows {PPT_MIN}..{PPT_MAX} W")
    self.s.ppt_w = watts
    return OK, 0

  def _mode1_reset(self, p: int) -> tuple[int, int]:
    self.dev.mode1_reset()
    return OK, 0

  def _fail(self, why: str) -> tuple[int, int]:
    self.dev.log(f"SMU: {why}")
    return FAILED, 0

  def _transfer(self, p: int) -> tuple[int, int]:
    table = p & 0xFFFF
    if not (self.s.table_hi or self.s.table_lo): return PREREQ, 0
    if table != self.smu_if.TABLE_SMU_METRICS:
      return self._fail(f"TransferTableSmu2Dram: table {table} is not modelled (TABLE_SMU_METRICS = {self.smu_if.TABLE_SMU_METRICS} is)")
    try: self.dev.gmc_mm.mmu.write(self.s.table_hi << 32 | self.s.table_lo, bytes(self.metrics()), "SMU")
    except GPUPageFault as e: return self._fail(f"TransferTableSmu2Dram: {e}")
    return OK, 0

  # --- the metrics model
  def _clock(self, clk: int, activity: float) -> float:
    lo, hi = self.s.soft_min[clk], self.s.soft_max[clk]
    return hi if lo >= hi else lo + (hi - lo) * min(1.0, activity * 1.5)

  @staticmethod
  def _targets(power: float) -> tuple[float, float, float]:
    edge = 30 + 0.115 * power
    return edge, edge + 0.06 * power, 38 + 0.065 * power

  def update(self) -> None:
    """Advance activity, power, temperatures and energy to now."""
    now = time.time()
    dt = max(now - self.s.last_wall, 1e-6)
    busy = {k: self.dev.gpu.busy_time(k) for k in ("gfx", "sdma")}
    inst = {k: min(1.0, max(0, busy[k] - self.s.seen_busy_ns[i]) / 1e9 / dt) for i, k in enumerate(busy)}
    self.s.seen_busy_ns[0], self.s.seen_busy_ns[1] = busy["gfx"], busy["sdma"]
    a = 1 - math.exp(-dt / ACTIVITY_TAU)
    self.s.gfx_act += a * (max(inst["gfx"], inst["sdma"]) - self.s.gfx_act)
    self.s.mem_act += a * (min(1.0, inst["sdma"] + 0.3 * inst["gfx"]) - self.s.mem_act)
    power = self.power()[0]
    b = 1 - math.exp(-dt / THERMAL_TAU)
    for name, target in zip(("t_edge", "t_hotspot", "t_mem"), self._targets(power)):
      setattr(self.s, name, getattr(self.s, name) + b * (target - getattr(self.s, name)))
    self.s.energy_j += power * dt
    self.s.last_wall, self.s.counter = now, self.s.counter + 1

  def power(self) -> tuple[float, float]:
    """(socket power W, fraction of demand cut by the PPT limit)."""
    gfx_ratio = self._clock(GFXCLK, self.s.gfx_act) / DPM[GFXCLK][-1]
    demand = IDLE_W + (PPT_MAX - IDLE_W) * self.s.gfx_act * gfx_ratio + MEM_W * self.s.mem_act
    return min(demand, self.s.ppt_w), max(0.0, 1 - self.s.ppt_w / demand)

  def voltages(self, gfx_mv: float) -> dict[int, float]:
    """AvgVoltage by SVI plane (smu13_driver_if_v13_0_0.h SVI_PLANE_e)."""
    i = self.smu_if
    return {i.SVI_PLANE_GFX: gfx_mv, i.SVI_PLANE_SOC: 850, i.SVI_PLANE_VMEMP: 1350, i.SVI_PLANE_VDDIO_MEM: 1350, i.SVI_PLANE_U: 750}

  def temperatures(self) -> dict[int, float]:
    """AvgTemperature by sensor (smu13_driver_if_v13_0_0.h TEMP_e)."""
    i, s = self.smu_if, self.s
    return {i.TEMP_EDGE: s.t_edge, i.TEMP_HOTSPOT: s.t_hotspot, i.TEMP_HOTSPOT_G: s.t_hotspot - 2, i.TEMP_HOTSPOT_M: s.t_hotspot - 4,
            i.TEMP_MEM: s.t_mem, i.TEMP_VR_GFX: s.t_edge + 4, i.TEMP_VR_MEM0: s.t_mem - 3, i.TEMP_VR_MEM1: s.t_mem - 3,
            i.TEMP_VR_SOC: s.t_edge + 1, i.TEMP_VR_U: s.t_edge}

  def metrics(self):
    self.update()
    out = self.smu_if.SmuMetricsExternal_t()
    m, t = out.SmuMetrics, time.time()
    power, throttle = self.power()
    jitter = math.sin(t * 7.0)                  # sensors are never perfectly still
    clocks = {clk: self._clock(clk, self.s.mem_act if clk in (UCLK, FCLK) else self.s.gfx_act) for clk in DPM}
    clocks[GFXCLK] *= 1 - throttle
    for clk, mhz in clocks.items(): m.CurrClock[clk] = round(mhz)
    gfx = clocks[GFXCLK]
    m.AverageGfxclkFrequencyTarget = self.s.soft_max[GFXCLK]
    m.AverageGfxclkFrequencyPreDs, m.AverageGfxclkFrequencyPostDs = round(gfx), round(gfx * (0.1 + 0.9 * self.s.gfx_act))
    m.AverageFclkFrequencyPreDs = m.AverageFclkFrequencyPostDs = round(clocks[FCLK])
    m.AverageMemclkFrequencyPreDs = m.AverageMemclkFrequencyPostDs = round(clocks[UCLK])
    m.dGPU_W_MAX, m.MetricsCounter = self.s.ppt_w, self.s.counter
    gfx_lo, gfx_hi = DPM[GFXCLK]
    gfx_mv = 700 + 400 * (gfx - gfx_lo) / (gfx_hi - gfx_lo)
    for plane, mv in self.voltages(gfx_mv).items(): m.AvgVoltage[plane] = round(mv)
    m.AvgCurrent[0] = round((power - IDLE_W / 2) / (gfx_mv / 1000))    # SVI plane 0 is the gfx rail in every version
    m.AverageGfxActivity, m.AverageUclkActivity = round(100 * self.s.gfx_act), round(100 * self.s.mem_act)
    m.EnergyAccumulator = int(self.s.energy_j) & 0xFFFFFFFF
    m.AverageSocketPower = round(power + jitter)
    m.AverageTotalBoardPower = round(power * 1.08 + jitter)
    for i, c in self.temperatures().items(): m.AvgTemperature[i] = round(c + 0.4 * jitter)
    m.AvgTemperatureFanIntake = 25
    m.PcieRate, m.PcieWidth = 3, 6                 # link speed/width indices as the PPTable's link levels: Gen4, x16
    rpm = 0 if self.s.t_hotspot < 60 else min(3300, 800 + 60 * (self.s.t_hotspot - 60))
    m.AvgFanRpm, m.AvgFanPwm = round(rpm), round(100 * rpm / 3300)
    m.ThrottlingPercentage[self.smu_if.THROTTLER_PPT0_BIT] = round(100 * throttle)
    m.ThrottlingPercentage[self.smu_if.THROTTLER_TEMP_HOTSPOT_BIT] = max(0, min(100, round(4 * (self.s.t_hotspot - 100))))
    return out
