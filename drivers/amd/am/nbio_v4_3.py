"""NBIO 4.3 (the PCIe bridge of the GPU): doorbell aperture and routing, the straps the SOC block programs, the remapped
HDP flush register, and indirect access to registers beyond BAR5. Not an IP block: the blocks call it, as Linux's
nbio_v4_3_funcs are called from soc21, gfx_v11_0 and sdma_v6_0 (facts: nbio_v4_3.c, nbio_4_3_0_offset.h)."""
from __future__ import annotations
from autogen.amd import nbio_4_3_0
from drivers.amd.am.ip_block import IPRegisters

# S2A doorbell routing: the AXI id and address bits [31:28] each port's doorbells go out with (nbio_v4_3_gc_doorbell_init,
# nbio_v4_3_sdma_doorbell_range: 0x30000007, 0x3000000d and AWID 0xe)
S2A_AWADDR_31_28 = 3
S2A_AWID_CP, S2A_AWID_CP_PORT3, S2A_AWID_SDMA = 3, 6, 0xE


class NBIOv4_3(IPRegisters):
  IP = "NBIO"
  nbio = nbio_4_3_0           # the register module of this version, and its S2A doorbell routing registers (ports 0, 2, 3)
  S2A = (nbio_4_3_0.regS2A_DOORBELL_ENTRY_0_CTRL, nbio_4_3_0.regS2A_DOORBELL_ENTRY_2_CTRL, nbio_4_3_0.regS2A_DOORBELL_ENTRY_3_CTRL)

  def init_registers(self) -> None:
    """nbio_v4_3_init_registers (NBIO 4.3.0): let a reset of the GPU reset function 2 too."""
    self.rmw(self.nbio.regRCC_DEV0_EPF2_STRAP2, STRAP_NO_SOFT_RESET_DEV0_F2=0)

  def enable_doorbell_aperture(self) -> None:
    self.w(self.nbio.regRCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, BIF_DOORBELL_APER_EN=1)

  def gc_doorbell_init(self) -> None:
    """Route doorbell ports 0 and 3 to the CP (the MEC's doorbells), as nbio_v4_3_gc_doorbell_init."""
    self.w(self.S2A[0], S2A_DOORBELL_PORT0_ENABLE=1, S2A_DOORBELL_PORT0_AWID=S2A_AWID_CP,
           S2A_DOORBELL_PORT0_AWADDR_31_28_VALUE=S2A_AWADDR_31_28)
    self.w(self.S2A[2], S2A_DOORBELL_PORT3_ENABLE=1, S2A_DOORBELL_PORT3_AWID=S2A_AWID_CP_PORT3,
           S2A_DOORBELL_PORT3_AWADDR_31_28_VALUE=S2A_AWADDR_31_28)

  def sdma_doorbell_range(self, first: int, count: int) -> None:
    """Route `count` doorbells from dword index `first` (port 2) to SDMA 0, as nbio_v4_3_sdma_doorbell_range."""
    self.w(self.S2A[1], S2A_DOORBELL_PORT2_ENABLE=1, S2A_DOORBELL_PORT2_AWID=S2A_AWID_SDMA,
                   S2A_DOORBELL_PORT2_RANGE_OFFSET=first, S2A_DOORBELL_PORT2_RANGE_SIZE=count,
                   S2A_DOORBELL_PORT2_AWADDR_31_28_VALUE=S2A_AWADDR_31_28)

  def hdp_mem_flush_dword(self) -> int:
    """The dword address of the HDP memory-flush register: BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL holds its byte offset
    (nbio_v4_3_remap_hdp_registers programs it)."""
    return self.r(self.nbio.regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL) // 4

  # registers beyond BAR5: BIF_BX_PF0_RSMU_INDEX takes the byte address, RSMU_DATA the value (nbio_v4_3_get_pcie_index_offset)
  def indirect_read(self, dword: int) -> int:
    self.w(self.nbio.regBIF_BX_PF0_RSMU_INDEX, dword * 4)
    return self.r(self.nbio.regBIF_BX_PF0_RSMU_DATA)

  def indirect_write(self, dword: int, value: int) -> None:
    self.w(self.nbio.regBIF_BX_PF0_RSMU_INDEX, dword * 4)
    self.w(self.nbio.regBIF_BX_PF0_RSMU_DATA, value)
