"""Backing store (context memory), HWRM v2: host memory the firmware keeps its QP, CQ, MR, ... contexts in
(kernel bnxt.c bnxt_hwrm_func_backing_store_qcaps_v2 / _cfg_v2).

Discovery starts at type 0 and follows `next_valid_type` until FUNC_BACKING_STORE_QCAPS_V2_RESP_TYPE_INVALID; a type
without FLAGS_TYPE_VALID is skipped. Each valid type gets, per instance in `instance_bit_map` (or instance 0), a block
of `num_entries * entry_size` bytes behind a page table. With FLAGS_ENABLE_CTX_KIND_INIT, each entry's byte at
`ctx_init_offset * 4` starts as `ctx_init_value`. The last configuration carries BS_CFG_ALL_DONE.
"""
from __future__ import annotations
from dataclasses import dataclass

from autogen import bnxt as bnxt_hsi
from drivers.bnxt.hwrm import HWRM
from drivers.bnxt.pbl import PageTable, page_table
from drivers.system.dma import DMAMemory, PAGE
from drivers.system.pci import PCIDevice

INVALID = bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_TYPE_INVALID


@dataclass
class ContextBlock:
  type: int
  instance: int
  entries: int
  entry_size: int
  mem: DMAMemory
  pt: PageTable


def entries_wanted(caps, limits: dict[int, int], qp_entries: int) -> int:
  """How many entries of this type: what the firmware's subtypes need plus what we use, within its bounds.
  TIM (timer) contexts pair one to one with QP contexts."""
  if caps.type == bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_TYPE_TIM: n = qp_entries
  else:
    splits = sum(getattr(caps, f"split_entry_{i}") for i in range(min(caps.subtype_valid_cnt, 4)))
    n = max(caps.min_num_entries, splits + limits.get(caps.type, 0))
  if caps.entry_multiple > 1: n = -(-n // caps.entry_multiple) * caps.entry_multiple
  return min(n, caps.max_num_entries) if caps.max_num_entries else n


def configure(pci: PCIDevice, hwrm: HWRM, limits: dict[int, int]) -> list[ContextBlock]:
  """Query every context type the firmware reports and give each its memory; `limits`: entries we use per type."""
  types, t = [], 0
  while t != INVALID:
    caps = hwrm("func_backing_store_qcaps_v2", type=t)
    if caps.flags & bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_TYPE_VALID and caps.entry_size: types.append(caps)
    if caps.next_valid_type != INVALID and caps.next_valid_type <= t:
      raise RuntimeError(f"{pci.bus}: backing store type {t} names next type {caps.next_valid_type}: the list does not advance")
    t = caps.next_valid_type
  qp_entries = next((entries_wanted(c, limits, 0) for c in types if c.type == bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_TYPE_QP), 0)
  plan = [(c, i) for c in types for i in ([b for b in range(32) if c.instance_bit_map >> b & 1] or [0])]
  blocks = []
  for k, (caps, instance) in enumerate(plan):
    n = entries_wanted(caps, limits, qp_entries)
    mem = pci.alloc_dma(max(-(-n * caps.entry_size // PAGE), 1) * PAGE)
    if caps.flags & bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_ENABLE_CTX_KIND_INIT and caps.ctx_init_value:
      off = caps.ctx_init_offset * 4
      if off >= caps.entry_size:
        raise RuntimeError(f"{pci.bus}: backing store type {caps.type}: init offset {off} is outside its {caps.entry_size}-byte entries")
      mem.view[off:n * caps.entry_size:caps.entry_size] = bytes([caps.ctx_init_value]) * n
    pt = page_table(pci, mem.bus_addrs)
    splits = {f"split_entry_{i}": getattr(caps, f"split_entry_{i}") for i in range(min(caps.subtype_valid_cnt, 4))}
    hwrm("func_backing_store_cfg_v2", type=caps.type, instance=instance, num_entries=n, entry_size=caps.entry_size,
         page_dir=pt.base, page_size_pbl_level=pt.level | bnxt_hsi.FUNC_BACKING_STORE_CFG_V2_REQ_PAGE_SIZE_PG_4K,
         subtype_valid_cnt=len(splits), flags=bnxt_hsi.FUNC_BACKING_STORE_CFG_V2_REQ_FLAGS_BS_CFG_ALL_DONE if k == len(plan) - 1 else 0,
         **splits)
    blocks.append(ContextBlock(caps.type, instance, n, caps.entry_size, mem, pt))
  return blocks
