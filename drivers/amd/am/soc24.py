"""SOC24, the common IP block of GC 12 GPUs (Linux soc24.c, soc24_common_ip_block): as SOC21, the bridge straps, the
doorbell aperture and HDP clock gating (soc24_common_hw_init, soc24_common_set_clockgating_state), through the NBIO (NBIF
6.3.1) and HDP 7.0 helpers of the discovered versions."""
from __future__ import annotations
from drivers.amd.am.soc21 import SOC21


class SOC24(SOC21):
  pass
