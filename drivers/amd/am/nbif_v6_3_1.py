"""NBIF 6.3.1, the PCIe bridge of GC 12 GPUs (Linux nbif_v6_3_1.c): NBIO 4.3's functions on nbif_6_3_1's registers,
where the S2A doorbell routing registers are GDC_S2A0_S2A_DOORBELL_ENTRY_<n>_CTRL (nbif_v6_3_1_sdma_doorbell_range,
gfx_v12_0.c's doorbell init: the same ports, AXI ids and address bits as NBIO 4.3)."""
from autogen.amd import nbif_6_3_1
from drivers.amd.am.nbio_v4_3 import NBIOv4_3


class NBIFv6_3_1(NBIOv4_3):
  nbio = nbif_6_3_1
  S2A = (nbif_6_3_1.regGDC_S2A0_S2A_DOORBELL_ENTRY_0_CTRL, nbif_6_3_1.regGDC_S2A0_S2A_DOORBELL_ENTRY_2_CTRL,
         nbif_6_3_1.regGDC_S2A0_S2A_DOORBELL_ENTRY_3_CTRL)
