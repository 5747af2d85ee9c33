"""HDP 6.0 (host data path: BAR0 writes on their way to VRAM): the flush that makes CPU writes visible to the GPU, and
its memory power gating. Not an IP block: the SOC block and the core call it, as Linux's hdp_v6_0_funcs (hdp_v6_0.c)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from autogen.amd import hdp_6_0_0
from drivers.amd.am.ip_block import IPRegisters
if TYPE_CHECKING: from drivers.amd.am.core import AMCore


class HDPv6_0(IPRegisters):
  IP = "HDP"
  hdp = hdp_6_0_0             # the register module of this version

  def __init__(self, core: AMCore):
    super().__init__(core)
    self._flush_dword: int | None = None

  def flush_hdp(self) -> None:
    """Write 0 to the remapped HDP memory-flush register (hdp_v6_0_flush_hdp): BAR0 writes so far reach VRAM before
    the GPU reads them."""
    if self._flush_dword is None: self._flush_dword = self.core.nbio.hdp_mem_flush_dword()
    self.core.wdword(self._flush_dword, 0)

  def update_clock_gating(self) -> None:
    """Power down the HDP atomic memory when idle, with deep sleep (hdp_v6_0_update_clock_gating, AMD_CG_SUPPORT_HDP_DS)."""
    self.rmw(self.hdp.regHDP_MEM_POWER_CTRL, ATOMIC_MEM_POWER_CTRL_EN=1, ATOMIC_MEM_POWER_DS_EN=1)
