"""The firmware's memory: pages the driver gives it (QUERY_PAGES, MANAGE_PAGES; mlx5_ifc.h query_pages_*,
manage_pages_*; kernel mlx5_core pagealloc.c). The model keeps nothing of its own for the driver's objects: each QP, CQ,
EQ and MKEY context is written into a 256-byte ICM slot of a page the driver gave, and the model uses no page it was
not given or has returned.

- Boot pages (QUERY_PAGES op_mod BOOT): BOOT_PAGES, wanted once the HCA is enabled; init pages (INIT): INIT_PAGES, wanted
  before INIT_HCA (which fails without both); regular pages (REGULAR): after INIT_HCA, enough for the ICM slots in use
  (16 a page) plus one spare page. When that need changes the firmware posts a page-request EQE (type PAGE_REQUEST,
  num_pages > 0: give that many; < 0: take that many back) to an EQ subscribed to it; a create that finds no free slot
  (the driver did not answer) fails with NO_RES_ERR.
- MANAGE_PAGES ALLOCATION_SUCCESS gives input_num_entries pages (pas: big-endian addresses, 4 KiB aligned, each reachable
  by DMA, none already given, no more than asked for; else BAD_PARAM and nothing is taken). ALLOCATION_FAIL is noted.
  HCA_RETURN_PAGES returns up to input_num_entries pages (output_num_entries, pas): regular pages with no slot in use; after
  TEARDOWN_HCA every page. DISABLE_HCA with pages still given fails (BAD_RES_STATE): teardown must reclaim them all.
QUERY_PAGES num_pages is signed (negative: pages the firmware would return). function_id must be 0 (this function).
"""
from __future__ import annotations
from typing import TYPE_CHECKING

from autogen import mlx5 as mlx5_ifc, mlx5_core
from emu.nic.mlx5 import CommandFailed
from emu.nic.mlx5.buffer import page_list
from emu.nic.mlx5.cmdq import Command
from emu.pci import DMAFault

if TYPE_CHECKING: from emu.nic.mlx5.cx6dx import CX6DX

PAGE, SLOT = 4096, 256
SLOTS = PAGE // SLOT
BOOT_PAGES, INIT_PAGES, SPARE = 4, 8, 1
BOOT, INIT, REGULAR = (mlx5_ifc.MLX5_QUERY_PAGES_IN_OP_MOD_BOOT_PAGES, mlx5_ifc.MLX5_QUERY_PAGES_IN_OP_MOD_INIT_PAGES,
                       mlx5_ifc.MLX5_QUERY_PAGES_IN_OP_MOD_REGULAR_PAGES)
BAD_PARAM, BAD_STATE = mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, mlx5_core.MLX5_CMD_STAT_BAD_SYS_STATE_ERR


class Pages:
  def __init__(self, nic: CX6DX):
    self.nic = nic
    nic.cmdq.register(mlx5_ifc.MLX5_CMD_OP_QUERY_PAGES, self.query_pages)
    nic.cmdq.register(mlx5_ifc.MLX5_CMD_OP_MANAGE_PAGES, self.manage_pages)
    self.reset()

  def reset(self) -> None:
    self.kind: dict[int, int] = {}                # given page -> BOOT / INIT / REGULAR
    self.slots: dict[int, list[bool]] = {}        # regular page -> slots in use
    self.requested = 0                            # the last page request posted

  def count(self, kind: int) -> int: return sum(1 for k in self.kind.values() if k == kind)

  def want(self, kind: int) -> int:
    hca = self.nic.hca
    if not hca.enabled: return 0
    if hca.torn_down: return -self.count(kind)
    if kind == BOOT: return BOOT_PAGES - self.count(BOOT)
    if kind == INIT: return INIT_PAGES - self.count(INIT) if not hca.initialized else 0
    if not hca.initialized: return 0
    used = sum(sum(s) for s in self.slots.values())
    need = -(-used // SLOTS) + SPARE
    free = [p for p, s in self.slots.items() if not any(s)]
    return need - len(self.slots) if need >= len(self.slots) else -min(len(self.slots) - need, len(free))

  # --- ICM slots
  def alloc_slot(self, context: bytes, what: str) -> tuple[int, int]:
    for page, s in self.slots.items():
      if not all(s):
        i = s.index(False)
        s[i] = True
        self.nic.dma.write(page + i * SLOT, bytes(context[:SLOT]).ljust(SLOT, b"\0"))
        return page, i
    raise CommandFailed(mlx5_core.MLX5_CMD_STAT_NO_RES_ERR, "out of ICM pages", f"{what}: no free context slot in the "
                        f"{len(self.slots)} regular pages (answer the page requests)")

  def free_slot(self, where: tuple[int, int]) -> None:
    self.slots[where[0]][where[1]] = False

  def update(self) -> None:
    """Post a page request if the regular-page need changed."""
    want = self.want(REGULAR)
    if want != self.requested:
      self.requested = want
      if want: self.nic.eqs.event(mlx5_core.MLX5_EVENT_TYPE_PAGE_REQUEST, 0, bytes(4) + (want & 0xFFFFFFFF).to_bytes(4, "big"))

  # --- commands
  def _function(self, c: Command) -> None:
    if c.get("embedded_cpu_function") or c.get("function_id"):
      raise CommandFailed(BAD_PARAM, "other function", f"function_id {c.get('function_id')}: only this function (0)")
    if not self.nic.hca.enabled: raise CommandFailed(BAD_STATE, "hca not enabled", "ENABLE_HCA first")

  def query_pages(self, c: Command) -> None:
    self._function(c)
    if c.op_mod not in (BOOT, INIT, REGULAR): raise CommandFailed(BAD_PARAM, "query_pages op_mod", f"op_mod {c.op_mod}")
    c.put("num_pages", self.want(c.op_mod) & 0xFFFFFFFF)

  def manage_pages(self, c: Command) -> None:
    self._function(c)
    n = c.get("input_num_entries")
    if c.op_mod == mlx5_ifc.MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_FAIL: return self.nic.log(f"the driver could not give {n} pages")
    if c.op_mod == mlx5_ifc.MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_SUCCESS: return self._give(c, n)
    if c.op_mod == mlx5_ifc.MLX5_MANAGE_PAGES_IN_OP_MOD_HCA_RETURN_PAGES: return self._take(c, n)
    raise CommandFailed(BAD_PARAM, "manage_pages op_mod", f"op_mod {c.op_mod}")

  def _give(self, c: Command, n: int) -> None:
    c.need(16 + 8 * n, f"{n} page addresses")
    pages = page_list(c.raw(16, 8 * n), n)
    wants = [(k, self.want(k)) for k in (BOOT, INIT, REGULAR)]
    if n > sum(max(w, 0) for _, w in wants):
      raise CommandFailed(BAD_PARAM, "more pages than requested", f"{n} pages given, the firmware asked for {dict(wants)}")
    for i, p in enumerate(pages):
      if p % PAGE: raise CommandFailed(BAD_PARAM, "page not aligned", f"pas[{i}] {p:#x}")
      if p in self.kind or pages.index(p) != i: raise CommandFailed(BAD_PARAM, "page given twice", f"pas[{i}] {p:#x}")
    try:
      for p in pages: self.nic.dma.write(p, bytes(PAGE))      # the firmware clears what it takes
    except DMAFault as e: raise CommandFailed(BAD_PARAM, "page not reachable", str(e)) from None
    for kind, w in wants:
      while w > 0 and pages:
        p = pages.pop(0)
        self.kind[p] = kind
        if kind == REGULAR: self.slots[p] = [False] * SLOTS
        w -= 1
    self.requested = self.want(REGULAR)

  def _take(self, c: Command, n: int) -> None:
    if c.outlen < 16 + 8 * n:
      raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR, "outlen too short for pages", f"{n} pages need {16 + 8 * n} bytes")
    if self.nic.hca.torn_down: back = list(self.kind)[:n]
    else:
      spare = max(0, -self.want(REGULAR)) if self.nic.hca.initialized else 0
      back = [p for p, s in self.slots.items() if not any(s)][:min(n, spare)]
    for p in back:
      del self.kind[p]
      self.slots.pop(p, None)
    c.put("output_num_entries", len(back))
    c.out[16:16 + 8 * len(back)] = b"".join(p.to_bytes(8, "big") for p in back)
    self.requested = self.want(REGULAR)
