"""SMU 14.0 (MP1 14.0.2 Navi48 / 14.0.3 Navi44), the power-management firmware of GC 12 GPUs (Linux smu_v14_0.c,
smu_v14_0_2_ppt.c): SMU 13.0's mailbox protocol on MP1 14.0.2's registers (segment 1), with this generation's message
ids (smu_v14_0_2_ppsmc.h) and PMFW table/clock/sensor ids (smu14_driver_if_v14_0.h: TABLE_SMU_METRICS is 5 there, as
smu_v14_0_2_ppt.c's table map sends it, not Linux's generic SMU_TABLE_SMU_METRICS)."""
from autogen.amd import mp_14_0_2, smu_v14_0_2_ppsmc, smu14_driver_if_v14_0
from drivers.amd.am.smu_v13_0 import SMUv13_0, mailbox, pmfw_ids


class SMUv14_0(SMUv13_0):
  M, ppsmc, smu_if = mailbox(mp_14_0_2), smu_v14_0_2_ppsmc, smu14_driver_if_v14_0
  ids = pmfw_ids(smu14_driver_if_v14_0, (smu14_driver_if_v14_0.SVI_PLANE_VDD_GFX, smu14_driver_if_v14_0.SVI_PLANE_VDD_SOC,
                                         smu14_driver_if_v14_0.SVI_PLANE_VDDIO_MEM))   # as smu_v14_0_2_get_gpu_metrics reads them
