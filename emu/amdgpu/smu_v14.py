"""SMU (MP1 14.0.2 Navi48 / 14.0.3 Navi44): smu.py's model with this generation's ids (smu_v14_0_2_ppsmc.h,
smu14_driver_if_v14_0.h: TABLE_SMU_METRICS 5, SmuMetricsExternal_t of v14). The mode-1 reset is the debug mailbox's only
(smu_v14_0_2_ppt.c smu_v14_0_2_mode1_reset sends DEBUGSMC_MSG_Mode1Reset; the PPSMC header has no Mode1Reset message), and
the driver-interface version is not asked for."""
from __future__ import annotations
from autogen.amd import smu_v14_0_2_ppsmc, smu14_driver_if_v14_0
from emu.amdgpu.smu import SMUModel


class SMU14Model(SMUModel):
  ppsmc, smu_if = smu_v14_0_2_ppsmc, smu14_driver_if_v14_0

  def version_messages(self) -> dict: return {}

  def voltages(self, gfx_mv: float) -> dict[int, float]:
    i = self.smu_if
    return {i.SVI_PLANE_VDD_GFX: gfx_mv, i.SVI_PLANE_VDD_SOC: 850, i.SVI_PLANE_VDDCI_MEM: 850, i.SVI_PLANE_VDDIO_MEM: 1350}

  def temperatures(self) -> dict[int, float]:
    i, s = self.smu_if, self.s
    return {i.TEMP_EDGE: s.t_edge, i.TEMP_HOTSPOT: s.t_hotspot, i.TEMP_HOTSPOT_GFX: s.t_hotspot - 2, i.TEMP_HOTSPOT_SOC: s.t_hotspot - 4,
            i.TEMP_MEM: s.t_mem, i.TEMP_VR_GFX: s.t_edge + 4, i.TEMP_VR_SOC: s.t_edge + 1, i.TEMP_VR_MEM0: s.t_mem - 3,
            i.TEMP_VR_MEM1: s.t_mem - 3}
