"""GFX 12.0 (GC 12.0.0 Navi44, 12.0.1 Navi48), the graphics/compute IP block (Linux gfx_v12_0.c): GFX 11.0's bring-up
(RLC autoload wait, GC hub, RS64 MEC program counter and pipe reset, SH_MEM apertures, clock gating) and its direct HQD
queue, on gc_12_0_0's registers with a v12 compute MQD (v12_structs.h; gfx_v12_0_compute_mqd_init uses the same header
and fields) and soc24_enum's field values. Interrupt sources are still irqsrcs_gfx_11_0_0.h (gfx_v12_0.c includes it)."""
from autogen.amd import gc_12_0_0, soc24_enum, v12_structs
from drivers.amd.am.gfx_v11_0 import GFXv11_0


class GFXv12_0(GFXv11_0):
  gc, enums, MQD = gc_12_0_0, soc24_enum, v12_structs.v12_compute_mqd
