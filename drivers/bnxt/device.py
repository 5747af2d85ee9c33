"""The bnxt RoCE provider: brings a NetXtreme-E function up in the firmware's order and serves drivers/rdma's verbs
(kernel bnxt_en bnxt_init_one + bnxt_re probe, rdma-core providers/bnxt_re).

  1. HWRM: VER_GET, FUNC_RESET, FUNC_QCAPS (MAC, port), FUNC_DRV_RGTR, FUNC_QCFG (doorbell offset)
  2. backing store v2 for every context type the firmware reports
  3. RCFW: CREQ, CMDQ, stat context, INITIALIZE_FW, QUERY_FUNC (queue and CQ limits), the notification queue
  4. the L2 receive path (completion ring, RX ring, VNIC, L2 filter)
GIDs are added afterwards (Context.add_gid). Closing deinitializes the RoCE firmware and unregisters the driver.
"""
from __future__ import annotations
import ctypes

from autogen import bnxt as bnxt_hsi
from drivers.bnxt import backing_store
from drivers.bnxt.cq import CQ
from drivers.bnxt.doorbell import Doorbell
from drivers.bnxt.hwrm import HWRM, RESET_TIMEOUT_S
from drivers.bnxt.l2 import open_rx_path, set_phy_loopback
from drivers.bnxt.mr import MR, MR_PAGE_SIZES
from drivers.bnxt.nq import NQ
from drivers.bnxt.qp import MAX_SGE, QP
from drivers.bnxt.rcfw import RCFW
from drivers.rdma.provider import PCIProvider
from drivers.rdma.verbs import Access, QPCap
from drivers.system.pci import PCIDevice

FID_SELF = 0xFFFF            # func_qcaps/func_qcfg fid: this function
MAX_QP, MAX_CQ, MAX_MR = 64, 64, 1024
T = "FUNC_BACKING_STORE_QCAPS_V2_RESP_TYPE_"
# context entries we use per backing-store type, beyond what the firmware's subtypes need (the L2 rings' QP and CQ
# contexts, QP1 and the stat contexts included)
LIMITS = {getattr(bnxt_hsi, f"{T}QP"): MAX_QP + 4, getattr(bnxt_hsi, f"{T}CQ"): MAX_CQ + 4, getattr(bnxt_hsi, f"{T}MRAV"): MAX_MR,
          getattr(bnxt_hsi, f"{T}STAT"): 4, getattr(bnxt_hsi, f"{T}VNIC"): 1}


class BNXTDevice(PCIProvider):
  """One NetXtreme-E PCI function as a drivers/rdma provider."""
  max_mtu, max_rd_atomic, max_sge = 4096, 16, MAX_SGE
  mr_page_sizes = MR_PAGE_SIZES

  def __init__(self, pci: PCIDevice):
    self.pci, self.name = pci, f"bnxt {pci.bus}"
    self._objects: dict[int, object] = {}
    self._next_handle, self._pds = 1, 0
    self.rcfw = None
    try: self._bring_up()
    except BaseException:
      pci.close()
      raise

  def _bring_up(self) -> None:
    pci = self.pci
    pci.enable_bus_master()
    bar0, bar2 = pci.map_bar(0), pci.map_bar(2)
    hwrm = self.hwrm = HWRM(pci, bar0)
    ver = hwrm("ver_get", hwrm_intf_maj=bnxt_hsi.HWRM_VERSION_MAJOR, hwrm_intf_min=bnxt_hsi.HWRM_VERSION_MINOR,
               hwrm_intf_upd=bnxt_hsi.HWRM_VERSION_UPDATE)
    self.firmware = f"{ver.hwrm_fw_maj_8b}.{ver.hwrm_fw_min_8b}.{ver.hwrm_fw_bld_8b}"
    hwrm("func_reset", timeout_s=RESET_TIMEOUT_S)
    caps = hwrm("func_qcaps", fid=FID_SELF)
    self.mac, self.port_id = bytes(caps.mac_address), caps.port_id
    hwrm("func_drv_rgtr", enables=bnxt_hsi.FUNC_DRV_RGTR_REQ_ENABLES_VER, ver_maj_8b=bnxt_hsi.HWRM_VERSION_MAJOR,
         ver_min_8b=bnxt_hsi.HWRM_VERSION_MINOR, ver_upd_8b=bnxt_hsi.HWRM_VERSION_UPDATE)
    self.db = Doorbell(bar2, hwrm("func_qcfg", fid=FID_SELF).legacy_l2_db_size_kb * 1024)
    self.context = backing_store.configure(pci, hwrm, LIMITS)
    self.rcfw = RCFW(pci, bar0, hwrm, self.db)
    self.stats = pci.alloc_dma(4096)
    self.stat_ctx_id = hwrm("stat_ctx_alloc", stats_dma_addr=self.stats.bus_addr(0),
                            stats_dma_length=ctypes.sizeof(bnxt_hsi.ctx_hw_stats_ext)).stat_ctx_id
    self.rcfw("initialize_fw", stat_ctx_id=self.stat_ctx_id, flags=bnxt_hsi.CMDQ_INITIALIZE_FW_FLAGS_HW_REQUESTER_RETX_SUPPORTED)
    self.max_qp_wr, self.max_cqe = self._query_func()
    self.nq = NQ(self, pci, hwrm, self.db)          # CQs and L2 rings name it; CQ.wait_event sleeps on it
    self.nq_id = self.nq.id
    self.l2 = open_rx_path(pci, hwrm, self.nq_id, self.mac)

  def _query_func(self) -> tuple[int, int]:
    """The function's limits from QUERY_FUNC's side buffer (creq_query_func_resp_sb): work requests per queue, CQEs per CQ."""
    sb, size = self.pci.alloc_dma(4096), ctypes.sizeof(bnxt_hsi.creq_query_func_resp_sb)
    try:
      self.rcfw("query_func", resp_addr=sb.bus_addr(0), resp_size=-(-size // 16))
      attr = bnxt_hsi.creq_query_func_resp_sb.from_buffer_copy(sb.view[:size])
    finally: self.pci.free_dma(sb)
    return attr.max_qp_wr, attr.max_cqe

  # --- objects the hardware names by a 64-bit handle (CQEs carry the QP's, NQ entries the CQ's)
  def new_handle(self, obj: object) -> int:
    h, self._next_handle = self._next_handle, self._next_handle + 1
    self._objects[h] = obj
    return h

  def drop_handle(self, h: int) -> None: self._objects.pop(h, None)

  def qp_by_handle(self, h: int, cq: CQ) -> QP:
    if not isinstance(qp := self._objects.get(h), QP):
      raise RuntimeError(f"{self.name}: CQ {cq.cq_id:#x} holds a completion for QP handle {h:#x}, which names no QP")
    return qp

  def cq_by_handle(self, h: int) -> CQ:
    if not isinstance(cq := self._objects.get(h), CQ):
      raise RuntimeError(f"{self.name}: the NQ holds a notification for CQ handle {h:#x}, which names no CQ")
    return cq

  def check_faults(self) -> None:
    """(Rings ask while they wait for room.) A QP's errors arrive as its error completions: nothing to do here."""

  # --- the provider interface (drivers/rdma/provider.py; alloc, map_dma and free are PCIProvider's)
  def add_gid(self, gid: bytes) -> int:
    # cmdq_add_gid: gid as four big-endian dwords in reverse order (the 16 bytes reversed), src_mac as three
    # big-endian halfwords (each byte pair swapped); kernel qplib_sp.c bnxt_qplib_add_sgid
    mac = b"".join(self.mac[i:i + 2][::-1] for i in range(0, 6, 2))
    return self.rcfw("add_gid", gid=bytes(gid)[::-1], src_mac=mac).xid

  def alloc_pd(self) -> int:
    self._pds += 1                # protection domains are the driver's numbering (the kernel's PD bitmap)
    return self._pds

  def reg_mr(self, pd: int, pages: list[int], page_size: int, iova: int, length: int, access: Access) -> MR:
    return MR(self, pages, page_size, iova, length, access)

  def create_cq(self, depth: int) -> CQ: return CQ(self, depth)
  def create_qp(self, pd: int, send_cq: CQ, recv_cq: CQ, cap: QPCap) -> QP: return QP(self, pd, send_cq, recv_cq, cap)
  def set_loopback(self, on: bool) -> None: set_phy_loopback(self.hwrm, self.port_id, on)

  def close(self) -> None:
    try:
      if self.rcfw is not None: self.rcfw("deinitialize_fw")
      self.hwrm("func_drv_unrgtr")
    finally: self.pci.close()
