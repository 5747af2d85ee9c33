"""The notification queue (NQ) the RoCE CQs report to, and its interrupt (roce_hsi.h
nq_cn; kernel qplib_fp.c bnxt_qplib_service_nq, bnxt_qplib_arm_cq).

A CQ armed with a CQ_ARMALL doorbell (index = its consumer, toggle = its arm toggle) makes the NIC write one nq_cn
(type CQ_NOTIFICATION, the CQ's 64-bit handle, the CQ's new toggle in bits 6-7; valid bit `v` at byte 8 bit 0, 1 on
even passes) at its next CQE, and the NQ, armed with NQ_ARM, raises its MSI-X vector: the ring's logical_id (bnxt_en
gives an NQ the index of its MSI-X entry there). One interrupt per NQ_ARM; servicing the entries re-arms it.
Where the platform delivers no interrupts (`PCIDevice.msix_eventfd` is None) the NQ is never waited on: CQs poll.
"""
from __future__ import annotations
import ctypes, os, select
from typing import TYPE_CHECKING

from autogen import bnxt as bnxt_hsi
from drivers.bnxt.doorbell import Doorbell
from drivers.bnxt.hsi import Packer
from drivers.bnxt.hwrm import HWRM
from drivers.bnxt.pbl import HWQueue
from drivers.bnxt.rcfw import NQ_ENTRIES, alloc_nq_ring
from drivers.system.pci import PCIDevice
if TYPE_CHECKING: from drivers.bnxt.device import BNXTDevice

NQ_CN = Packer(bnxt_hsi.nq_cn, "type cq_handle_low cq_handle_high")
VECTOR = 1                   # MSI-X vector of the NQ (vector 0 would be the CREQ's, which the RCFW polls)


class NQ:
  def __init__(self, dev: BNXTDevice, pci: PCIDevice, hwrm: HWRM, db: Doorbell):
    self.dev, self.db = dev, db
    self.q = HWQueue(pci, NQ_ENTRIES, ctypes.sizeof(bnxt_hsi.nq_base))
    self.id = alloc_nq_ring(hwrm, self.q, logical_id=VECTOR)
    self.event = pci.msix_eventfd(VECTOR)
    self.arm()

  def arm(self) -> None:
    """NQ_ARM: publish the consumer and interrupt on the next entry (at once if one is unconsumed)."""
    q = self.q
    self.db.ring(self.id, bnxt_hsi.DBC_DBC_TYPE_NQ_ARM, q.cons % q.entries, q.epoch(q.cons))

  def service(self) -> None:
    """Consume the NQ's entries: each CQ notification hands its CQ the arm toggle to use next."""
    q, got = self.q, False
    while True:
      at = q.cons % q.entries * q.stride
      if bool(q.ring[at + 8] & bnxt_hsi.NQ_CN_V) == bool(q.epoch(q.cons)): break   # not written in this pass yet
      q.cons, got = q.cons + 1, True
      kind, low, high = NQ_CN.unpack_from(q.ring, at)
      if kind & bnxt_hsi.NQ_CN_TYPE_MASK != bnxt_hsi.NQ_CN_TYPE_CQ_NOTIFICATION: continue   # SRQ/QP events: not used here
      self.dev.cq_by_handle(low | high << 32).notified((kind & bnxt_hsi.NQ_CN_TOGGLE_MASK) >> bnxt_hsi.NQ_CN_TOGGLE_SFT)
    if got: self.arm()

  def wait(self, timeout_s: float) -> None:
    """Sleep until the NQ interrupts or `timeout_s` passes, then service it."""
    if select.select([self.event], [], [], max(timeout_s, 0.0))[0]:
      try: os.eventfd_read(self.event)
      except BlockingIOError: pass
    self.service()

  def free(self) -> None: self.q.free()
