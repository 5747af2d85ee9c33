"""SMU (MP1 13.0.0): the mailbox, DPM tables, soft limits, power limit, the metrics table and the mode-1 reset.
Facts: smu_v13_0.c, smu_v13_0_0_ppt.c, smu_v13_0_0_ppsmc.h, smu13_driver_if_v13_0_0.h."""
import ctypes, time
import pytest

from autogen.amd import gc_11_0_0 as gc, mmhub_3_0_0 as mmhub, mp_13_0_0 as mp, smu_v13_0_0_ppsmc as ppsmc, smu13_driver_if_v13_0_0 as smu_if
from autogen.amd import sdma_v6_0_0_pkt_open as sdma_defs
from drivers.amd.sdma_v6_0_pkt import pkt as sdma_pkt
from tests.emu.amdgpu.regs import Queue

OK, FAILED, UNKNOWN, PREREQ = 1, 0xFF, 0xFE, 0xFD
CLOCKS = (smu_if.PPCLK_GFXCLK, smu_if.PPCLK_SOCCLK, smu_if.PPCLK_UCLK, smu_if.PPCLK_FCLK)


@pytest.fixture
def table(booted):
  """A driver table in host memory the test owns, at a GPU VA the MM hub reaches (the driver's VMID 0 tables)."""
  mem = booted.iface.alloc(16 << 10, host=True)
  assert booted.smu_msg(ppsmc.PPSMC_MSG_SetDriverDramAddrHigh, mem.va >> 32)[0] == OK
  assert booted.smu_msg(ppsmc.PPSMC_MSG_SetDriverDramAddrLow, mem.va & 0xFFFFFFFF)[0] == OK
  return mem


def metrics(regs, table) -> smu_if.SmuMetrics_t:
  assert regs.smu_msg(ppsmc.PPSMC_MSG_TransferTableSmu2Dram, smu_if.TABLE_SMU_METRICS) == (OK, 0)
  return smu_if.SmuMetricsExternal_t.from_buffer_copy(bytes(table.view[:ctypes.sizeof(smu_if.SmuMetricsExternal_t)])).SmuMetrics


def dpm(regs, clk: int) -> list[int]:
  resp, count = regs.smu_msg(ppsmc.PPSMC_MSG_GetDpmFreqByIndex, clk << 16 | 0xFF)
  assert resp == OK
  return [regs.smu_msg(ppsmc.PPSMC_MSG_GetDpmFreqByIndex, clk << 16 | i)[1] for i in range(count & 0x7FFFFFFF)]


def test_no_answer_before_the_psp_loads_the_pmfw(regs):
  with pytest.raises(TimeoutError, match="SMU msg 0x2 timeout"): regs.smu_msg(ppsmc.PPSMC_MSG_GetSmuVersion, timeout=0.05)
  assert regs.r(mp.regMP1_SMN_C2PMSG_90, "MP1") == 0


def test_dpm_tables_have_a_few_ascending_levels(booted):
  for clk in CLOCKS:
    levels = dpm(booted, clk)
    assert 2 <= len(levels) <= 16 and levels == sorted(levels) and 50 <= levels[0] < levels[-1] <= 3000, (clk, levels)
  assert booted.smu_msg(ppsmc.PPSMC_MSG_GetDpmFreqByIndex, smu_if.PPCLK_GFXCLK << 16 | 0xFF)[1] >> 31 == 1   # GFXCLK is fine-grained
  assert booted.smu_msg(ppsmc.PPSMC_MSG_GetDpmFreqByIndex, smu_if.PPCLK_UCLK << 16 | 0xFF)[1] >> 31 == 0
  assert booted.smu_msg(ppsmc.PPSMC_MSG_GetDpmFreqByIndex, smu_if.PPCLK_UCLK << 16 | 9)[0] == FAILED
  assert booted.smu_msg(ppsmc.PPSMC_MSG_GetMaxDpmFreq, smu_if.PPCLK_UCLK << 16) == (OK, dpm(booted, smu_if.PPCLK_UCLK)[-1])


def test_messages_answer_with_ppsmc_results(booted):
  assert booted.smu_msg(ppsmc.PPSMC_MSG_GetDriverIfVersion) == (OK, smu_if.SMU13_0_0_DRIVER_IF_VERSION)
  assert booted.smu_msg(0x50, 7)[0] == UNKNOWN                      # not a 13.0.0 message
  assert booted.smu_msg(ppsmc.PPSMC_MSG_TransferTableSmu2Dram, smu_if.TABLE_OVERDRIVE)[0] == FAILED
  lo, hi = booted.smu_msg(ppsmc.PPSMC_MSG_GetRunningSmuFeaturesLow)[1], booted.smu_msg(ppsmc.PPSMC_MSG_GetRunningSmuFeaturesHigh)[1]
  assert lo >> smu_if.FEATURE_DPM_GFXCLK_BIT & 1 and hi >> (smu_if.FEATURE_MEM_TEMP_READ_BIT - 32) & 1
  assert booted.smu_msg(ppsmc.PPSMC_MSG_DisableAllSmuFeatures)[0] == OK
  assert booted.smu_msg(ppsmc.PPSMC_MSG_SetSoftMaxByFreq, smu_if.PPCLK_UCLK << 16 | 456)[0] == PREREQ


def test_soft_limits_pin_clocks_and_the_power_limit_shows_in_metrics(booted, table):
  for clk in (smu_if.PPCLK_UCLK, smu_if.PPCLK_FCLK):
    top = dpm(booted, clk)[-1]
    assert booted.smu_msg(ppsmc.PPSMC_MSG_SetSoftMinByFreq, clk << 16 | top)[0] == OK
    assert booted.smu_msg(ppsmc.PPSMC_MSG_SetSoftMaxByFreq, clk << 16 | top)[0] == OK
  assert booted.smu_msg(ppsmc.PPSMC_MSG_SetPptLimit, 300) == (OK, 0)
  assert booted.smu_msg(ppsmc.PPSMC_MSG_GetPptLimit) == (OK, 300)
  assert booted.smu_msg(ppsmc.PPSMC_MSG_SetPptLimit, 1000)[0] == FAILED
  m = metrics(booted, table)
  assert m.CurrClock[smu_if.PPCLK_UCLK] == dpm(booted, smu_if.PPCLK_UCLK)[-1] and m.AverageMemclkFrequencyPreDs == m.CurrClock[smu_if.PPCLK_UCLK]
  assert m.CurrClock[smu_if.PPCLK_FCLK] == dpm(booted, smu_if.PPCLK_FCLK)[-1] and m.dGPU_W_MAX == 300
  low = dpm(booted, smu_if.PPCLK_UCLK)[0]
  booted.smu_msg(ppsmc.PPSMC_MSG_SetSoftMinByFreq, smu_if.PPCLK_UCLK << 16 | low)
  booted.smu_msg(ppsmc.PPSMC_MSG_SetSoftMaxByFreq, smu_if.PPCLK_UCLK << 16 | low)
  assert metrics(booted, table).CurrClock[smu_if.PPCLK_UCLK] == low


def test_metrics_change_over_time_and_rise_with_load(booted, table):
  idle1, deadline = metrics(booted, table), time.monotonic() + 60
  reads = [metrics(booted, table)]
  while reads[-1].EnergyAccumulator == idle1.EnergyAccumulator:   # idle power (>= 20 W) adds a joule within ~50 ms
    assert time.monotonic() < deadline, "the energy accumulator never advanced"
    reads.append(metrics(booted, table))
  idle2 = reads[-1]
  assert idle2.MetricsCounter == idle1.MetricsCounter + len(reads)   # one per table written
  assert idle2.AverageGfxActivity <= 5 and 20 <= idle2.AvgTemperature[smu_if.TEMP_EDGE] <= 50
  assert idle2.AvgTemperature[smu_if.TEMP_HOTSPOT] >= idle2.AvgTemperature[smu_if.TEMP_EDGE] and idle2.AvgFanRpm == 0
  # keep SDMA busy with VRAM-to-VRAM copies, sampling as it works
  q = Queue(booted, "sdma")
  n = 8 << 20
  s, d = booted.iface.alloc(n).va, booted.iface.alloc(n).va
  copy = sdma_pkt("COPY_LINEAR", 7, HEADER_op=sdma_defs.SDMA_OP_COPY, COUNT_count=n - 1, SRC_ADDR_LO_src_addr_31_0=s & 0xFFFFFFFF,
                  SRC_ADDR_HI_src_addr_63_32=s >> 32, DST_ADDR_LO_dst_addr_31_0=d & 0xFFFFFFFF, DST_ADDR_HI_dst_addr_63_32=d >> 32)
  busy, deadline = [], time.monotonic() + 120
  def loaded() -> bool:       # activity, memory activity and power rose (peaks), and the edge is warming (now)
    return bool(busy) and max(m.AverageGfxActivity for m in busy) >= 50 and max(m.AverageUclkActivity for m in busy) >= 50 \
      and max(m.AverageSocketPower for m in busy) > idle2.AverageSocketPower + 50 \
      and busy[-1].AvgTemperature[smu_if.TEMP_EDGE] > idle2.AvgTemperature[smu_if.TEMP_EDGE]
  while not loaded():
    assert time.monotonic() < deadline, f"the load never showed in {len(busy)} readings"
    if q.put - q.rptr < 64 * 7 * 4: q.submit(copy * 96)              # never let the ring run dry
    time.sleep(0.02)                                                 # the sampling interval
    busy.append(metrics(booted, table))
  q.wait_idle(30)


@pytest.mark.parametrize("mailbox", ["debug", "message"])
def test_mode1_reset_returns_the_device_to_cold(booted, mailbox):
  booted.w(gc.regSCRATCH_REG7, 0xA0000008)
  if mailbox == "debug":
    booted.w(mp.regMP1_SMN_C2PMSG_53, 0, "MP1")
    booted.w(mp.regMP1_SMN_C2PMSG_75, 2, "MP1")                       # DEBUGSMC_MSG_Mode1Reset
    booted.w(mp.regMP1_SMN_C2PMSG_54, 0, "MP1")
  else: assert booted.smu_msg(ppsmc.PPSMC_MSG_Mode1Reset)[0] == OK
  assert booted.r(mp.regMP0_SMN_C2PMSG_81) == 0 and booted.r(mp.regMP0_SMN_C2PMSG_35) == 0x80000000   # bootloader again
  assert booted.r(gc.regSCRATCH_REG7) == 0 and not booted.r(gc.regRLC_RLCS_BOOTLOAD_STATUS) >> 31
  assert not booted.pci.read_config(0x04, 2) & 0x4                   # bus mastering off after the reset
  with pytest.raises(TimeoutError): booted.smu_msg(ppsmc.PPSMC_MSG_GetSmuVersion, timeout=0.05)


def test_driver_table_outside_the_mm_hub_faults_instead_of_landing_anywhere(booted):
  bad = 0x10_0000_0000                                                # not VRAM, not in the MM hub's VMID 0 window
  booted.smu_msg(ppsmc.PPSMC_MSG_SetDriverDramAddrHigh, bad >> 32)
  booted.smu_msg(ppsmc.PPSMC_MSG_SetDriverDramAddrLow, bad & 0xFFFFFFFF)
  assert booted.smu_msg(ppsmc.PPSMC_MSG_TransferTableSmu2Dram, smu_if.TABLE_SMU_METRICS)[0] == FAILED
  status = mmhub.regMMVM_L2_PROTECTION_FAULT_STATUS.decode(booted.r(mmhub.regMMVM_L2_PROTECTION_FAULT_STATUS))
  assert status["MAPPING_ERROR"] == 1 and status["RW"] == 1
  assert booted.r(mmhub.regMMVM_L2_PROTECTION_FAULT_ADDR_LO32) == (bad >> 12) & 0xFFFFFFFF
  (e,) = booted.ih_entries()
  assert (e[0] & 0xFF, e[0] >> 8 & 0xFF) == (0x12, 0)                  # SOC21_IH_CLIENTID_VMC, VM fault
