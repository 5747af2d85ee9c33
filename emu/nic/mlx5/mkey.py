"""Memory keys (CREATE_MKEY / DESTROY_MKEY, mlx5_ifc.h mkc).

An MKEY translates [start_addr, start_addr + len) through its MTT: access_mode MTT (access_mode_1_0 1, 4_2 0; PA, KLM
and the rest are not modelled), pages of 2^log_page_size bytes (12..30), one big-endian 64-bit page address per entry
from input byte 0x110 (translations_octword_actual_size 16-byte octwords, two entries each; entries aligned to the page
size, their low bits clear: no on-demand paging), start_addr's offset into its page is where the region starts. The
key is mkey_index << 8 | mkey_7_0 (the variant byte the driver picks); a WQE or a packet naming another variant of
the index does not match. qpn must be 0xFFFFFF (not bound to a QP), length64 0, the PD an allocated one; lr, lw, rr, rw
and a are the rights: local read, local write, remote read, remote write, remote atomic (rw and a need lw, IBTA 10.6.3.1).
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autogen import mlx5 as mlx5_ifc, mlx5_core
from emu.nic import rc
from emu.nic.memory import mr_region
from emu.nic.mlx5 import CommandFailed
from emu.nic.mlx5.buffer import check_pages, page_list
from emu.nic.mlx5.cmdq import Command
from emu.nic.mlx5.pages import BAD_PARAM

if TYPE_CHECKING: from emu.nic.mlx5.cx6dx import CX6DX

MTT = 0x110


@dataclass
class MKey:
  key: int
  pd: int
  local_read: bool
  region: rc.Region
  slot: tuple[int, int]


class MKeys:
  def __init__(self, nic: CX6DX):
    self.nic = nic
    nic.cmdq.register(mlx5_ifc.MLX5_CMD_OP_CREATE_MKEY, self.create)
    nic.cmdq.register(mlx5_ifc.MLX5_CMD_OP_DESTROY_MKEY, self.destroy)
    self.mkeys: dict[int, MKey] = {}

  def reset(self) -> None:
    self.mkeys.clear()

  def lookup(self, key: int) -> MKey | None:
    m = self.mkeys.get(key >> 8)
    return m if m is not None and m.key == key else None

  def create(self, c: Command) -> None:
    hca = self.nic.hca
    hca.need_init("CREATE_MKEY")
    m = lambda n: c.get(f"memory_key_mkey_entry.{n}")
    if m("access_mode_1_0") != 1 or m("access_mode_4_2"):
      raise CommandFailed(BAD_PARAM, "mkey access mode not modelled", f"access_mode {m('access_mode_4_2') << 2 | m('access_mode_1_0')}: MTT (1) is")
    if m("qpn") != 0xFFFFFF: raise CommandFailed(BAD_PARAM, "mkey bound to a qp", f"qpn {m('qpn'):#x}: must be 0xffffff")
    if m("length64") or m("umr_en") or m("bsf_en") or m("free"):
      raise CommandFailed(BAD_PARAM, "mkey context not modelled", "length64, umr_en, bsf_en and free must be 0")
    if m("pd") not in hca.pds: raise CommandFailed(BAD_PARAM, "no such pd", f"pd {m('pd')}")
    if (m("rw") or m("a")) and not m("lw"): raise CommandFailed(BAD_PARAM, "remote write without local write", "rw/a need lw")
    log_pg = m("log_page_size")
    if not 12 <= log_pg <= 30: raise CommandFailed(BAD_PARAM, "mkey page size", f"log_page_size {log_pg}")
    page, start, length = 1 << log_pg, m("start_addr"), m("len")
    first = start % page
    n = -(-(first + length) // page) if length else 0
    octs = c.get("translations_octword_actual_size")
    if octs < -(-n // 2) or m("translations_octword_size") < -(-n // 2):
      raise CommandFailed(BAD_PARAM, "mtt too short", f"[{start:#x}, +{length:#x}) in {page}-byte pages needs {n} entries; "
                          f"translations_octword_actual_size {octs}, translations_octword_size {m('translations_octword_size')}")
    c.need(MTT + 16 * octs, f"{octs} MTT octwords")
    pages = page_list(c.raw(MTT, 8 * n), n)
    if why := check_pages(pages, page): raise CommandFailed(BAD_PARAM, "bad mtt entry", why)
    index = next((i for i in range(1, 1 << hca.cap(0, "log_max_mkey")) if i not in self.mkeys), None)
    if index is None: raise CommandFailed(mlx5_core.MLX5_CMD_STAT_NO_RES_ERR, "out of mkeys", f"{len(self.mkeys)} MKEYs")
    key = index << 8 | m("mkey_7_0")
    rights = (rc.LOCAL_WRITE if m("lw") else 0) | (rc.REMOTE_READ if m("rr") else 0) | \
             (rc.REMOTE_WRITE if m("rw") else 0) | (rc.REMOTE_ATOMIC if m("a") else 0)
    slot = self.nic.pages.alloc_slot(c.raw(16, 64), f"MKEY {key:#x}")
    self.mkeys[index] = MKey(key, m("pd"), bool(m("lr")), mr_region(self.nic.dma, key, start, length, rights, pages, page, first), slot)
    c.put("mkey_index", index)

  def destroy(self, c: Command) -> None:
    index = c.get("mkey_index")
    if (mk := self.mkeys.get(index)) is None: raise CommandFailed(BAD_PARAM, "no such mkey", f"mkey_index {index:#x}")
    self.nic.pages.free_slot(mk.slot)
    del self.mkeys[index]
