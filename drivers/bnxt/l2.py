"""The port's L2 side: the receive path RoCE ingress needs, and PHY loopback (bnxt_hsi.h hwrm_vnic_alloc, hwrm_ring_alloc, hwrm_port_mac_cfg).

Frames reach the RoCE engine only through a VNIC whose L2 filter matches the port's MAC, so even with no Ethernet
buffers ever posted the function gets: an L2 completion ring and an RX ring (HWRM RING_ALLOC, both on the NQ), a VNIC
(VNIC_ALLOC, VNIC_CFG with the MRU and its default rings) and an RX L2 filter for the MAC (CFA_L2_FILTER_ALLOC).
"""
from __future__ import annotations
import ctypes
from dataclasses import dataclass

from autogen import bnxt as bnxt_hsi
from drivers.bnxt.hwrm import HWRM
from drivers.bnxt.pbl import HWQueue
from drivers.system.pci import PCIDevice

RING_ENTRIES = 256          # one page each:
CMPL_SIZE = ctypes.sizeof(bnxt_hsi.hwrm_cmpl)   # completion records are 16 bytes (bnxt_hsi.h hwrm_cmpl and its kin)
RX_BD_SIZE = 16             # an RX buffer descriptor (bnxt.h struct rx_bd)
RX_BUF_SIZE = 640
MRU = 9018                  # jumbo frames: a 4096-byte RoCE MTU plus headers fits


@dataclass
class L2Path:
  cmpl: HWQueue
  rx: HWQueue
  cmpl_id: int
  rx_id: int
  vnic_id: int
  filter_id: int

  def free(self) -> None:
    self.cmpl.free()
    self.rx.free()


def open_rx_path(pci: PCIDevice, hwrm: HWRM, nq_id: int, mac: bytes) -> L2Path:
  cmpl = HWQueue(pci, RING_ENTRIES, CMPL_SIZE)
  cmpl_id = hwrm("ring_alloc", enables=bnxt_hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID, ring_type=bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL,
                 page_tbl_addr=cmpl.pt.base, page_size=12, page_tbl_depth=cmpl.pt.level, length=cmpl.entries,
                 nq_ring_id=nq_id).ring_id
  rx = HWQueue(pci, RING_ENTRIES, RX_BD_SIZE)
  rx_id = hwrm("ring_alloc", enables=bnxt_hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID | bnxt_hsi.RING_ALLOC_REQ_ENABLES_RX_BUF_SIZE_VALID,
               ring_type=bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_RX, page_tbl_addr=rx.pt.base, page_size=12, page_tbl_depth=rx.pt.level,
               length=rx.entries, rx_buf_size=RX_BUF_SIZE, nq_ring_id=nq_id).ring_id
  vnic_id = hwrm("vnic_alloc").vnic_id
  hwrm("vnic_cfg", vnic_id=vnic_id, mru=MRU, default_rx_ring_id=rx_id, default_cmpl_ring_id=cmpl_id,
       enables=bnxt_hsi.VNIC_CFG_REQ_ENABLES_MRU | bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID |
       bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID)
  filt = hwrm("cfa_l2_filter_alloc", flags=bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX, l2_addr=mac, l2_addr_mask=b"\xff" * 6,
              dst_id=vnic_id, enables=bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR | bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK |
              bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID)
  return L2Path(cmpl, rx, cmpl_id, rx_id, vnic_id, filt.l2_filter_id)


def set_phy_loopback(hwrm: HWRM, port_id: int, on: bool) -> None:
  """PORT_PHY_CFG lpbk LOCAL: the PHY turns transmitted frames around into the receive path (NONE: off)."""
  hwrm("port_phy_cfg", port_id=port_id, enables=bnxt_hsi.PORT_PHY_CFG_REQ_ENABLES_LPBK,
       lpbk=bnxt_hsi.PORT_PHY_CFG_REQ_LPBK_LOCAL if on else bnxt_hsi.PORT_PHY_CFG_REQ_LPBK_NONE)
