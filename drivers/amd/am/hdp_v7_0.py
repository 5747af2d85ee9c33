"""HDP 7.0 (Linux hdp_v7_0.c): HDP 6.0's flush; its clock gating is hdp_v7_0_update_clock_gating with GC 12's
AMD_CG_SUPPORT_HDP_SD (soc24.c cg_flags): the RC clock forced on, every memory power mode off, then shut-down mode for the
atomic and RC memories with their power control, and the clock override released."""
from autogen.amd import hdp_7_0_0
from drivers.amd.am.hdp_v6_0 import HDPv6_0

_MODES = ("CTRL_EN", "LS_EN", "DS_EN", "SD_EN")


class HDPv7_0(HDPv6_0):
  hdp = hdp_7_0_0

  def update_clock_gating(self) -> None:
    h = self.hdp
    self.rmw(h.regHDP_CLK_CNTL, RC_MEM_CLK_SOFT_OVERRIDE=1)
    self.rmw(h.regHDP_MEM_POWER_CTRL, **{f"{m}_MEM_POWER_{f}": 0 for m in ("ATOMIC", "RC") for f in _MODES})
    self.rmw(h.regHDP_MEM_POWER_CTRL, ATOMIC_MEM_POWER_SD_EN=1, RC_MEM_POWER_SD_EN=1)
    self.rmw(h.regHDP_MEM_POWER_CTRL, ATOMIC_MEM_POWER_CTRL_EN=1, RC_MEM_POWER_CTRL_EN=1)
    self.rmw(h.regHDP_CLK_CNTL, RC_MEM_CLK_SOFT_OVERRIDE=0)
