"""SOC (NBIO 4.3): doorbell aperture, HDP flush, SOC clock gating (reference/amd_driver.md 2.7, 2.10)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from autogen.amd import nbio_4_3_0 as nbio, hdp_6_0_0 as hdp
if TYPE_CHECKING: from drivers.amd.am.amdev import AMDev


class SOC:
  def __init__(self, adev: AMDev):
    self.adev = adev
    self._hdp_flush_dword: int | None = None

  def init_hw(self) -> None:
    self.adev.rmw("NBIO", nbio.regRCC_DEV0_EPF2_STRAP2, STRAP_NO_SOFT_RESET_DEV0_F2=0)
    self.adev.wreg("NBIO", nbio.regRCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, BIF_DOORBELL_APER_EN=1)

  def hdp_flush(self) -> None:
    """Flush the host data path so writes through BAR0 reach VRAM before the GPU reads them:
    BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL holds the byte offset of the register that does it."""
    if self._hdp_flush_dword is None: self._hdp_flush_dword = self.adev.rreg("NBIO", nbio.regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL) // 4
    self.adev.wdword(self._hdp_flush_dword, 0)

  def set_clockgating(self) -> None:
    self.adev.rmw("HDP", hdp.regHDP_MEM_POWER_CTRL, ATOMIC_MEM_POWER_CTRL_EN=1, ATOMIC_MEM_POWER_DS_EN=1)
