"""SOC21, the common IP block of GC 11 GPUs (Linux soc21.c, soc21_common_ip_block): the bridge straps, the doorbell
aperture, and HDP clock gating, through the NBIO and HDP helpers of the discovered versions."""
from __future__ import annotations
from drivers.amd.am.ip_block import IPBlock


class SOC21(IPBlock):
  def hw_init(self) -> None:
    """soc21_common_hw_init: NBIO registers, then the doorbell aperture (BAR2) on."""
    self.core.nbio.init_registers()
    self.core.nbio.enable_doorbell_aperture()

  def set_clockgating(self) -> None: self.core.hdp.update_clock_gating()
