"""IH 7.0 (OSSSYS 7.0), the interrupt-handler IP block of GC 12 GPUs (Linux ih_v7_0.c): IH 6.0's rings and walk
(ih_v7_0_irq_init programs the same fields) on osssys_7_0_0's registers."""
from autogen.amd import osssys_7_0_0
from drivers.amd.am.ih_v6_0 import IHv6_0


class IHv7_0(IHv6_0):
  oss = osssys_7_0_0
