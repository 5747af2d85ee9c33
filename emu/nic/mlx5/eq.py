"""Event queues (CREATE_EQ / DESTROY_EQ, mlx5_ifc.h eqc; include/linux/mlx5/device.h mlx5_eqe; kernel mlx5_core eq.c).

An EQ is 2^log_eq_size 64-byte EQEs in the pages `pas` names (4 KiB << log_page_size, page_offset 0), subscribed to the
event types whose bits event_bitmask sets (bit t of the first 64-bit word: type t). An EQE: type at byte 1, sub_type
at 3, 28 bytes of data from 32, owner at 63: the firmware writes owner = (producer index >> log_eq_size) & 1, so an
entry is new when its owner bit equals the consumer's pass parity (the driver initialises every owner bit to 1). The
driver returns entries with the EQ doorbell of the EQ's UAR page (offset 0x40 to arm, 0x48 not; a big-endian
32-bit eqn << 24 | consumer index; mlx5 core lib/eq.h MLX5_EQ_DOORBEL_OFFSET). An event for a full EQ is lost (logged,
counted in `overruns`). Events: command completion (data: BE32 vector of slots), page request (data+2 function id,
data+4 signed BE32 pages), CQ completion (data+24 BE32 cqn). Interrupts: an EQ armed by the 0x40 doorbell raises its
MSI-X vector (eqc.intr; emu/pci.py signal_msix) once, at its next EQE or at once if the doorbell leaves entries
unconsumed, and is disarmed until the next arm. The C datapath writes some CQ completion EQEs the same way itself
(emu/nic/fastpath.py; `produced` counts them in).
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from autogen import mlx5 as mlx5_ifc, mlx5_core
from emu.nic import fastpath
from emu.nic.mlx5 import CommandFailed
from emu.pci import ModelError
from emu.nic.mlx5.buffer import PagedBuffer, check_pages, page_list
from emu.nic.mlx5.cmdq import Command
from emu.nic.mlx5.pages import BAD_PARAM

if TYPE_CHECKING: from emu.nic.mlx5.cx6dx import CX6DX

EQE = 64
DB_ARM, DB_NOARM = 0x40, 0x48
PAS = 0x110


@dataclass
class EQ:
  eqn: int
  log_size: int
  uar: int
  mask: int
  vector: int                   # eqc.intr: the MSI-X vector an armed EQ raises
  buf: PagedBuffer
  slot: tuple[int, int]
  signal: Callable[[int], None]
  prod: int = 0
  cons: int = 0
  armed: bool = False
  overruns: int = 0
  fast: fastpath.CQRing | None = None   # the EQ as the C datapath writes into it (qp.py completion_recipe)

  @staticmethod
  def entry(kind: int, sub: int, data: bytes) -> bytearray:
    """An EQE, its owner bit clear."""
    e = bytearray(EQE)
    e[1], e[3] = kind, sub
    e[32:32 + len(data)] = data
    return e

  def push(self, kind: int, sub: int, data: bytes) -> bool:
    if self.prod - self.cons >= 1 << self.log_size:
      self.overruns += 1
      return False
    e = self.entry(kind, sub, data)
    e[63] = self.prod >> self.log_size & 1
    self.buf.write((self.prod % (1 << self.log_size)) * EQE, bytes(e))
    self.produced(1)
    return True

  def produced(self, n: int) -> None:
    """n EQEs were written at the producer (by push, or by the C datapath: emu/nic/fastpath.py): the interrupt they
    call for."""
    self.prod += n
    self.interrupt()

  def interrupt(self) -> None:
    """An armed EQ with an entry the driver has not consumed raises its vector once and is disarmed."""
    if self.armed and self.prod > self.cons:
      self.armed = False
      self.signal(self.vector)


class EQs:
  def __init__(self, nic: CX6DX):
    self.nic = nic
    nic.cmdq.register(mlx5_ifc.MLX5_CMD_OP_CREATE_EQ, self.create)
    nic.cmdq.register(mlx5_ifc.MLX5_CMD_OP_DESTROY_EQ, self.destroy)
    self.eqs: dict[int, EQ] = {}

  def reset(self) -> None:
    self.eqs.clear()

  def event(self, kind: int, sub: int, data: bytes) -> None:
    for eq in self.eqs.values():
      if eq.mask >> kind & 1 and not eq.push(kind, sub, data):
        self.nic.log(f"EQ {eq.eqn} is full: event type {kind:#x} lost (consumer {eq.cons}, producer {eq.prod})")

  def doorbell(self, uar: int, offset: int, value: int) -> None:
    eqn, ci = value >> 24, value & 0xFFFFFF
    eq = self.eqs.get(eqn)
    if eq is None or eq.uar != uar: raise ModelError(f"EQ doorbell {value:#010x} on UAR {uar}: no EQ {eqn} on this UAR page")
    if not 0 <= (ci - eq.cons) % (1 << 24) <= eq.prod - eq.cons:
      raise ModelError(f"EQ {eqn} doorbell: consumer {ci:#x} is past the producer {eq.prod & 0xFFFFFF:#x} or behind {eq.cons & 0xFFFFFF:#x}")
    eq.cons += (ci - eq.cons) % (1 << 24)
    eq.armed = offset == DB_ARM
    eq.interrupt()                                  # armed over unconsumed entries: at once

  def create(self, c: Command) -> None:
    hca = self.nic.hca
    hca.need_init("CREATE_EQ")
    e = lambda n: c.get(f"eq_context_entry.{n}")
    log_size, uar, log_pg = e("log_eq_size"), e("uar_page"), e("log_page_size")
    if log_size > hca.cap(0, "log_max_eq_sz"): raise CommandFailed(BAD_PARAM, "eq too large", f"log_eq_size {log_size}")
    if uar not in hca.uars: raise CommandFailed(BAD_PARAM, "no such uar", f"uar_page {uar}")
    if e("page_offset") or e("oi") or e("ec"): raise CommandFailed(BAD_PARAM, "eq context not modelled", "page_offset, oi and ec must be 0")
    if len(self.eqs) >= 1 << hca.cap(0, "log_max_eq"): raise CommandFailed(mlx5_core.MLX5_CMD_STAT_NO_RES_ERR, "out of eqs", f"{len(self.eqs)} EQs")
    page = 4096 << log_pg
    npages = -(-(EQE << log_size) // page)
    c.need(PAS + 8 * npages, f"{npages} EQ pages")
    pages = page_list(c.raw(PAS, 8 * npages), npages)
    if why := check_pages(pages, page): raise CommandFailed(BAD_PARAM, "bad page list", why)
    eqn = next(i for i in range(1 << 8) if i not in self.eqs)
    mask = int.from_bytes(c.raw(88, 8), "big")
    slot = self.nic.pages.alloc_slot(c.raw(16, 64), f"EQ {eqn}")
    self.eqs[eqn] = EQ(eqn, log_size, uar, mask, e("intr"), PagedBuffer(self.nic.dma, pages, page, EQE << log_size), slot,
                       self.nic.signal_msix)
    c.put("eq_number", eqn)

  def destroy(self, c: Command) -> None:
    eqn = c.get("eq_number")
    if (eq := self.eqs.get(eqn)) is None: raise CommandFailed(BAD_PARAM, "no such eq", f"EQ {eqn}")
    if users := [cq.cqn for cq in self.nic.cqs.cqs.values() if cq.eqn == eqn]:
      raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_RES_STATE_ERR, "eq in use", f"EQ {eqn} serves CQ {users}")
    self.nic.pages.free_slot(eq.slot)
    del self.eqs[eqn]
