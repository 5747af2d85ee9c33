"""Doorbells: one 64-bit store into BAR2 at the RoCE doorbell offset (func_qcfg legacy_l2_db_size_kb * 1 KiB; reference/
rdma.md 5.14, kernel qplib_res.h BNXT_QPLIB_INIT_DBHDR).

High dword: the queue's xid (bits 0-19), path ROCE (bits 24-25 = 0), BNXT_QPLIB_DBR_VALID (bit 26), type (bits 28-31).
Low dword: the index (bits 0-23, the producer or consumer slot modulo the ring size), the epoch (bit 24, the
index's pass parity), so the hardware tells a full ring from an empty one, and for CQ arm doorbells the CQ's arm toggle
(bits 25-26, DBC_DBC_TOGGLE).
"""
from __future__ import annotations

from autogen import bnxt as bnxt_hsi, bnxt_re
from drivers.system.mmio import MMIO


def doorbell_value(xid: int, kind: int, index: int, epoch: int, toggle: int = 0) -> int:
  key = (xid & bnxt_hsi.DBC_DBC_XID_MASK) | bnxt_hsi.DBC_DBC_PATH_ROCE | kind | bnxt_re.BNXT_QPLIB_DBR_VALID
  return key << 32 | (index & bnxt_hsi.DBC_DBC_INDEX_MASK) | (epoch & 1) << bnxt_re.BNXT_QPLIB_DBR_EPOCH_SHIFT | \
         (toggle << bnxt_hsi.DBC_DBC_TOGGLE_SFT & bnxt_hsi.DBC_DBC_TOGGLE_MASK)


class Doorbell:
  def __init__(self, bar2: MMIO, offset: int):
    if offset % 8 or offset + 8 > bar2.size:
      raise ValueError(f"RoCE doorbell offset {offset:#x} does not fit BAR2 ({bar2.size:#x} bytes)")
    self.bar2, self.offset = bar2, offset

  def ring(self, xid: int, kind: int, index: int, epoch: int, toggle: int = 0) -> None:
    """`kind` is a DBC_DBC_TYPE_* value (SQ, RQ, CQ, CQ_ARMALL, NQ_ARM, ...)."""
    self.bar2.write(self.offset, 8, doorbell_value(xid, kind, index, epoch, toggle))
