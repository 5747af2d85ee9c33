"""Backing store v2: the context memory the firmware keeps its per-object state in, which the driver allocates in host
memory (HWRM_FUNC_BACKING_STORE_QCAPS_V2 / _CFG_V2; bnxt_hsi.h; kernel bnxt.c bnxt_hwrm_func_backing_store_qcaps_v2,
bnxt_alloc_ctx_mem, bnxt_init_ctx_mem).

What the model reports (`TYPES`, in the order next_valid_type chains them, the chain ending at 0xffff): every type has
TYPE_VALID; entry sizes are the kernel's maxima where it names one (QP 448, SRQ/CQ 64, MRAV 128); FP_TQM_RING has
eight instances (one per CoS queue, instance_bit_map 0xff), the others one (bitmap 0); no subtypes (subtype_valid_cnt 0);
QP, SRQ, CQ and MRAV ask for initialization (ENABLE_CTX_KIND_INIT): ctx_init_value at byte ctx_init_offset * 4 of
every entry (the kernel's reading of the offset; its unit is 4 bytes).

What it checks: a CFG_V2 names a reported type and instance, the reported entry size, a count within
[min_num_entries, max_num_entries], PBL level 0-2 and a page size of 4K/8K/64K/2M/8M/1G, and a PBL whose entries are
valid for all the pages the entries need (pbl.walk); flags other than BS_CFG_ALL_DONE are refused. BS_CFG_ALL_DONE
commits the store: every type and instance must be configured by then, TIM with at least as many entries as QP (the
timers are per QP), and nothing can be configured again before a FUNC_RESET. Before use (`touch`: creating a QP, CQ,
MR, a ring or a stat context) the entry must exist (index < num_entries), its page must be mapped (a DMA read of the
entry), and, for the types that ask for it, hold the init value at its offset: the model keeps the object's state
itself and only reads the entry.
"""
from __future__ import annotations
from dataclasses import dataclass

from autogen import bnxt as bnxt_hsi
from emu.nic.bnxt.pbl import walk, PBLError
from emu.pci import DMASpace, DMAFault

PAGE_SIZES = {0: 4 << 10, 1: 8 << 10, 2: 64 << 10, 3: 2 << 20, 4: 8 << 20, 5: 1 << 30}   # page_size_pbl_level bits 4-7
INVALID_TYPE = 0xFFFF


@dataclass(frozen=True)
class ContextType:
  type: int
  name: str
  entry_size: int
  min_entries: int
  max_entries: int
  instances: int = 0           # instance_bit_map (0: one instance, number 0)
  init_value: int = 0          # with init_offset: ENABLE_CTX_KIND_INIT
  init_offset: int = 0         # in 4-byte units

  def instance_list(self) -> list[int]: return [i for i in range(32) if self.instances >> i & 1] or [0]



TYPES = (
  ContextType(bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_QP, "QP", 448, 32, 65536, init_value=0xFF, init_offset=4),
  ContextType(bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_SRQ, "SRQ", 64, 0, 8192, init_value=0xFF, init_offset=2),
  ContextType(bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_CQ, "CQ", 64, 32, 65536, init_value=0xFF, init_offset=2),
  ContextType(bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_VNIC, "VNIC", 64, 8, 256),
  ContextType(bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_STAT, "STAT", 32, 16, 2048),
  ContextType(bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_SP_TQM_RING, "SP_TQM_RING", 64, 64, 65536),
  ContextType(bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_FP_TQM_RING, "FP_TQM_RING", 64, 64, 65536, instances=0xFF),
  ContextType(bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_MRAV, "MRAV", 128, 64, 262144, init_value=0xFF, init_offset=1),
  ContextType(bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_TIM, "TIM", 16, 0, 65536),
)
BY_TYPE = {t.type: t for t in TYPES}
QP, SRQ, CQ, VNIC, STAT, SP_TQM, FP_TQM, MRAV, TIM = (t.type for t in TYPES)


class BackingError(ValueError):
  """A backing-store request the firmware refuses; `code` is the HWRM error code it answers with."""
  def __init__(self, msg: str, code: int = bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS):
    super().__init__(msg)
    self.code = code


@dataclass
class Config:
  num_entries: int
  entry_size: int
  pages: list[int]
  page_size: int


class BackingStore:
  def __init__(self, dma: DMASpace):
    self.dma = dma
    self.clear()

  def clear(self) -> None:
    self.configs: dict[tuple[int, int], Config] = {}
    self.done = False

  def qcaps(self, type_: int) -> tuple[ContextType | None, int]:
    """(the type's description or None if not reported, the next valid type)."""
    order = [t.type for t in TYPES]
    nxt = next((t for t in order if t > type_), INVALID_TYPE)
    return BY_TYPE.get(type_), nxt

  def configure(self, type_: int, instance: int, flags: int, page_dir: int, num_entries: int, entry_size: int,
                page_size_pbl_level: int, subtype_valid_cnt: int) -> None:
    if self.done: raise BackingError("the backing store is committed (BS_CFG_ALL_DONE): FUNC_RESET before configuring it again",
                                     bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED)
    if flags & ~bnxt_hsi.FUNC_BACKING_STORE_CFG_V2_REQ_FLAGS_BS_CFG_ALL_DONE:
      raise BackingError(f"flags {flags:#x}: only BS_CFG_ALL_DONE is modelled (no preboot mode, no BS_EXTEND)", bnxt_hsi.HWRM_ERR_CODE_INVALID_FLAGS)
    if (t := BY_TYPE.get(type_)) is None: raise BackingError(f"type {type_:#x} is not a context type this firmware reports")
    if instance not in t.instance_list(): raise BackingError(f"{t.name}: instance {instance} is not in instance_bit_map {t.instances:#x}")
    if entry_size != t.entry_size: raise BackingError(f"{t.name}: entry_size {entry_size}, the firmware reported {t.entry_size}")
    if not t.min_entries <= num_entries <= t.max_entries:
      raise BackingError(f"{t.name}: num_entries {num_entries} outside [{t.min_entries}, {t.max_entries}]")
    if subtype_valid_cnt: raise BackingError(f"{t.name}: subtype_valid_cnt {subtype_valid_cnt}, the firmware reported no subtypes")
    level, psize = page_size_pbl_level & 0xF, PAGE_SIZES.get(page_size_pbl_level >> 4)
    if psize is None: raise BackingError(f"{t.name}: page size code {page_size_pbl_level >> 4}")
    pages: list[int] = []
    if num_entries:
      try: pages = walk(self.dma, page_dir, level, -(-num_entries * entry_size // psize), psize, what=f"backing store {t.name}")
      except (PBLError, DMAFault) as e: raise BackingError(str(e)) from None
    self.configs[(type_, instance)] = Config(num_entries, entry_size, pages, psize)
    if flags & bnxt_hsi.FUNC_BACKING_STORE_CFG_V2_REQ_FLAGS_BS_CFG_ALL_DONE: self._commit()

  def _commit(self) -> None:
    missing = [f"{t.name}[{i}]" for t in TYPES for i in t.instance_list() if (t.type, i) not in self.configs]
    if missing: raise BackingError(f"BS_CFG_ALL_DONE with types not configured: {', '.join(missing)}")
    if self.entries(TIM) < self.entries(QP):
      raise BackingError(f"TIM has {self.entries(TIM)} entries, fewer than QP's {self.entries(QP)} (one timer per QP)")
    self.done = True

  def entries(self, type_: int) -> int:
    c = self.configs.get((type_, 0))
    return c.num_entries if c else 0

  def touch(self, type_: int, index: int) -> None:
    """Check entry `index` of `type_` can be used (module docstring); raises BackingError."""
    t = BY_TYPE[type_]
    if not self.done: raise BackingError(f"{t.name} context used before the backing store was committed (BS_CFG_ALL_DONE)",
                                         bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED)
    c = self.configs[(type_, 0)]
    if not 0 <= index < c.num_entries:
      raise BackingError(f"{t.name} context {index}: the backing store has {c.num_entries} entries", bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR)
    page, off = divmod(index * c.entry_size, c.page_size)
    try: entry = self.dma.read(c.pages[page] + off, min(c.entry_size, c.page_size - off))
    except DMAFault as e: raise BackingError(f"{t.name} context {index}: its backing page is gone ({e})") from None
    if t.init_value and (at := t.init_offset * 4) < len(entry) and entry[at] != t.init_value:
      raise BackingError(f"{t.name} context {index}: byte {at} is {entry[at]:#x}, not the init value {t.init_value:#x} "
                         "(ctx_init_value at ctx_init_offset * 4 of each entry)")
