"""Memory regions: RCFW REGISTER_MR with ALLOC_MR, the firmware choosing the key (roce_hsi.h cmdq_register_mr; kernel qplib_sp.c bnxt_qplib_reg_mr).

The MR's pages go behind a page table (level 0: one page is named directly; 1 and 2 for more), `va` is the MR's
I/O virtual address and `mr_size` its length; requests name bytes by va, and the key serves as lkey and rkey. The
MR's access bits are REGISTER_MR's own (LOCAL_WRITE 1, REMOTE_READ 2, REMOTE_WRITE 4: not modify_qp's order).
"""
from __future__ import annotations
from typing import TYPE_CHECKING

from autogen import bnxt as bnxt_hsi
from drivers.bnxt.pbl import page_table
from drivers.rdma.provider import mr_page_shift
from drivers.rdma.verbs import Access
if TYPE_CHECKING: from drivers.bnxt.device import BNXTDevice

MR_ACCESS = {Access.LOCAL_WRITE: bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE, Access.REMOTE_READ: bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_READ,
             Access.REMOTE_WRITE: bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE, Access.REMOTE_ATOMIC: bnxt_hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_ATOMIC}


# the page sizes REGISTER_MR names (roce_hsi.h CMDQ_REGISTER_MR_LOG2_PG_SIZE_PG_*: log2 of the size, a bit each)
MR_PAGE_SIZES = sum(1 << (v >> bnxt_hsi.CMDQ_REGISTER_MR_LOG2_PG_SIZE_SFT) for k, v in vars(bnxt_hsi).items()
                    if k.startswith("CMDQ_REGISTER_MR_LOG2_PG_SIZE_PG_"))


def mr_access(access: Access) -> int: return sum(bit for flag, bit in MR_ACCESS.items() if access & flag)


class MR:
  def __init__(self, dev: BNXTDevice, pages: list[int], page_size: int, iova: int, length: int, access: Access):
    shift = mr_page_shift(dev.name, page_size, MR_PAGE_SIZES)
    self.dev, self.pt = dev, page_table(dev.pci, pages)
    try:
      resp = dev.rcfw("register_mr", flags=bnxt_hsi.CMDQ_REGISTER_MR_FLAGS_ALLOC_MR, access=mr_access(access),
                      log2_pg_size_lvl=self.pt.level | shift << bnxt_hsi.CMDQ_REGISTER_MR_LOG2_PG_SIZE_SFT,
                      log2_pbl_pg_size=bnxt_hsi.CMDQ_REGISTER_MR_LOG2_PBL_PG_SIZE_PG_4K, pbl=self.pt.base, va=iova, mr_size=length)
    except BaseException:
      self.pt.free(dev.pci)
      raise
    self.lkey = self.rkey = resp.xid

  def deregister(self) -> None:
    try: self.dev.rcfw("deregister_mr", lkey=self.lkey)
    finally: self.pt.free(self.dev.pci)
