"""Completion queues (CREATE_CQ / DESTROY_CQ, mlx5_ifc.h cqc; include/linux/mlx5/device.h mlx5_cqe64, mlx5_err_cqe).

A CQ is 2^log_cq_size 64-byte CQEs (cqe_sz 0; compression, other sizes and moderation are not modelled) in the pages
`pas` names, bound to an existing EQ (c_eqn) and UAR page, with an 8-byte doorbell record at dbr_addr whose first
big-endian word the driver sets to its consumer index (24 bits). A CQE's byte 63 is opcode << 4 | owner, owner =
(producer index >> log_cq_size) & 1. A CQE for a full CQ (producer - consumer = size) is lost and a CQ_ERROR event
(CQ overrun) goes to the EQs subscribed to it. The CQ doorbell (UAR offset 0x20, 64-bit: sn << 28 | cmd << 24 | consumer
in the high word, cqn in the low) arms the CQ: its next CQE writes a completion EQE (cqn at data+24) to its EQ, at once
if the CQ already holds CQEs past the consumer index the doorbell names. The C datapath writes the RESP_WR_IMM CQEs of
the single-packet WRITEs it takes itself, with an armed CQ's completion EQE (qp.py completion_recipe).
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autogen import mlx5 as mlx5_ifc, mlx5_core
from emu.nic import fastpath
from emu.nic.mlx5 import CommandFailed
from emu.pci import ModelError
from emu.nic.mlx5.buffer import PagedBuffer, check_pages, page_list
from emu.nic.mlx5.cmdq import Command
from emu.nic.mlx5.pages import BAD_PARAM

if TYPE_CHECKING: from emu.nic.mlx5.cx6dx import CX6DX

CQE, PAS = 64, 0x110


@dataclass
class CQ:
  cqn: int
  log_size: int
  uar: int
  eqn: int
  dbr: int
  buf: PagedBuffer
  slot: tuple[int, int]
  prod: int = 0
  armed: bool = False
  users: set = field(default_factory=set)
  fast: fastpath.CQRing | None = None     # the CQ as the C datapath writes into it (qp.py completion_recipe)


class CQs:
  def __init__(self, nic: CX6DX):
    self.nic = nic
    nic.cmdq.register(mlx5_ifc.MLX5_CMD_OP_CREATE_CQ, self.create)
    nic.cmdq.register(mlx5_ifc.MLX5_CMD_OP_DESTROY_CQ, self.destroy)
    self.cqs: dict[int, CQ] = {}

  def reset(self) -> None:
    self.cqs.clear()

  def consumer(self, cq: CQ) -> int:
    return int.from_bytes(self.nic.dma.read(cq.dbr, 4), "big") & 0xFFFFFF

  def push(self, cq: CQ, cqe: bytearray) -> None:
    size = 1 << cq.log_size
    if (cq.prod - self.consumer(cq)) % (1 << 24) >= size:
      self.nic.log(f"CQ {cq.cqn} overrun: the driver has not consumed its entries (doorbell record set_ci)")
      return self.nic.eqs.event(mlx5_core.MLX5_EVENT_TYPE_CQ_ERROR, 0, cq.cqn.to_bytes(4, "big") + bytes(7) +
                                bytes([mlx5_ifc.MLX5_CQ_ERROR_SYNDROME_CQ_OVERRUN]))
    cqe[63] = cqe[63] & 0xF0 | (cq.prod >> cq.log_size & 1)
    cq.buf.write((cq.prod % size) * CQE, bytes(cqe))
    cq.prod = (cq.prod + 1) % (1 << 24)
    if cq.armed: self._notify(cq)

  def _notify(self, cq: CQ) -> None:
    """The armed CQ's completion event (one per arm) to its EQ."""
    cq.armed = False
    eq = self.nic.eqs.eqs.get(cq.eqn)
    if eq is not None and not eq.push(mlx5_core.MLX5_EVENT_TYPE_COMP, 0, bytes(24) + cq.cqn.to_bytes(4, "big")):
      self.nic.log(f"EQ {eq.eqn} is full: CQ {cq.cqn}'s completion event is lost")

  def doorbell(self, uar: int, value: int) -> None:
    hi, cqn = value >> 32, value & 0xFFFFFF
    cq = self.cqs.get(cqn)
    if cq is None or cq.uar != uar: raise ModelError(f"CQ doorbell {value:#018x} on UAR {uar}: no CQ {cqn} on this UAR page")
    cq.armed = True
    if hi & 0xFFFFFF != cq.prod: self._notify(cq)     # CQEs past the consumer the arm names: the event is due now

  def create(self, c: Command) -> None:
    hca = self.nic.hca
    hca.need_init("CREATE_CQ")
    q = lambda n: c.get(f"cq_context.{n}")
    log_size, uar, eqn, log_pg, dbr = q("log_cq_size"), q("uar_page"), q("c_eqn_or_apu_element"), q("log_page_size"), q("dbr_addr")
    if log_size > hca.cap(0, "log_max_cq_sz"): raise CommandFailed(BAD_PARAM, "cq too large", f"log_cq_size {log_size}")
    if q("cqe_sz") or q("cqe_comp_en") or q("cc") or q("oi") or q("page_offset") or q("apu_cq"):
      raise CommandFailed(BAD_PARAM, "cq context not modelled", "cqe_sz (64-byte CQEs), cqe_comp_en, cc, oi, apu_cq and page_offset must be 0")
    if uar not in hca.uars: raise CommandFailed(BAD_PARAM, "no such uar", f"uar_page {uar}")
    if eqn not in self.nic.eqs.eqs: raise CommandFailed(BAD_PARAM, "no such eq", f"c_eqn {eqn}")
    if dbr % 8 or not dbr: raise CommandFailed(BAD_PARAM, "doorbell record alignment", f"dbr_addr {dbr:#x}")
    if len(self.cqs) >= 1 << hca.cap(0, "log_max_cq"): raise CommandFailed(mlx5_core.MLX5_CMD_STAT_NO_RES_ERR, "out of cqs", f"{len(self.cqs)} CQs")
    page = 4096 << log_pg
    npages = -(-(CQE << log_size) // page)
    c.need(PAS + 8 * npages, f"{npages} CQ pages")
    pages = page_list(c.raw(PAS, 8 * npages), npages)
    if why := check_pages(pages, page): raise CommandFailed(BAD_PARAM, "bad page list", why)
    cqn = next(i for i in range(1, 1 << 24) if i not in self.cqs)
    slot = self.nic.pages.alloc_slot(c.raw(16, 64), f"CQ {cqn}")
    self.cqs[cqn] = CQ(cqn, log_size, uar, eqn, dbr, PagedBuffer(self.nic.dma, pages, page, CQE << log_size), slot)
    c.put("cqn", cqn)

  def destroy(self, c: Command) -> None:
    cqn = c.get("cqn")
    if (cq := self.cqs.get(cqn)) is None: raise CommandFailed(BAD_PARAM, "no such cq", f"CQ {cqn}")
    if cq.users: raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_RES_STATE_ERR, "cq in use", f"CQ {cqn} serves QP {sorted(cq.users)}")
    self.nic.pages.free_slot(cq.slot)
    del self.cqs[cqn]
