"""GFXHUB 3.0: the GC's VM hub on GC 11.0 (Linux gfxhub_v3_0.c), the steps of vmhub.VMHub on its GCVM_/GCMC_ registers."""
from types import SimpleNamespace
from drivers.amd.am.gmc_v11_0 import HUB_REGS
from drivers.amd.am.vmhub import VMHub


class GFXHUBv3_0(VMHub):
  IP, NAME = "GC", "GC"
  R = SimpleNamespace(**{name: regs[0] for name, regs in HUB_REGS.items()})
