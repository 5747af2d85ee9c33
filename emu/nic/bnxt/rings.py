"""The rings the NIC writes and the driver consumes (CREQ, NQ, CQ), their doorbell positions and the HWRM-allocated rings.

Positions are monotonic counts; a ring entry is position % depth. A doorbell names a position by (index, epoch):
index = position % depth and epoch = the parity of position // depth (kernel qplib_res.h BNXT_QPLIB_DBR_EPOCH_SHIFT;
the seed's `db_value`); the model resolves it to the one position within a ring of its last known one, and a doorbell
that names none (a wrong epoch, an index past what exists) is a driver error (ModelError).

An `EventRing` entry is written with the valid bit of its pass (pbl.HostRing.valid_bit: 1 on even passes, 0 on odd):
CREQ entries at byte 8 bit 0 (creq_base.v), NQ entries at byte 8 bit 0 (nq_base / nq_cn.v), CQEs at byte 24 bit 0
(cq_base.cqe_type_toggle TOGGLE). The body is written first, the byte holding the valid bit last. The driver publishes
how far it consumed with doorbells (CQ for CQs, NQ/NQ_ARM for NQs and the CREQ); the NIC never writes into an entry
the driver has not released: a full ring overflows (`push` returns False) and the caller reports it. The C datapath
writes some CQEs and NQ entries the same way itself (emu/nic/fastpath.py; `produced` counts them in).
An NQ-type ring (the CREQ, a notification queue) allocated with int_mode MSIX interrupts: armed by an NQ_ARM doorbell,
it raises its MSI-X vector once when an entry is written (or at once, if the doorbell leaves entries unconsumed), and
is disarmed until the next NQ_ARM; NQ_MASK disarms it. (bnxt_en passes the NQ's MSI-X vector index as the ring's
logical_id: the model raises that vector.)
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Callable

from emu.pci import ModelError
from emu.nic.bnxt.pbl import HostRing


def doorbell_position(index: int, epoch: int, low: int, high: int, depth: int, what: str) -> int:
  """The position in [low, high] with `index` = position % depth and `epoch` = (position // depth) & 1."""
  if index >= depth: raise ModelError(f"{what}: doorbell index {index} is outside the ring of {depth} entries")
  base = low - low % depth
  for p in (base + index, base + depth + index):
    if low <= p <= high and (p // depth) & 1 == epoch: return p
  raise ModelError(f"{what}: doorbell index {index} epoch {epoch} names no position in [{low}, {high}] "
                   f"(ring of {depth}; the epoch bit is the parity of the pass)")


class EventRing:
  def __init__(self, ring: HostRing, valid_byte: int, interrupt: Callable[[], None] | None = None):
    self.ring, self.valid_byte, self.interrupt = ring, valid_byte, interrupt
    self.prod = self.cons = 0
    self.armed = False
    self.fast = None                          # an NQ as the C datapath writes into it (datapath.completion_recipe)

  @property
  def what(self) -> str: return self.ring.what

  def push(self, entry: bytes | bytearray) -> bool:
    """Write `entry` at the producer with the pass's valid bit; False if the ring is full."""
    if self.prod - self.cons >= self.ring.depth: return False
    vb = self.valid_byte
    slot = self.ring.dma.view(self.ring.entry(self.prod), len(entry))      # (an entry never crosses a page)
    slot[:vb] = entry[:vb]
    slot[vb + 1:] = entry[vb + 1:]
    slot[vb] = (entry[vb] & ~1) | self.ring.valid_bit(self.prod)
    self.prod += 1
    self._raise()
    return True

  def produced(self, n: int) -> None:
    """n entries were written at the producer (by the C datapath, emu/nic/fastpath.py): the interrupt they call for."""
    self.prod += n
    self._raise()

  def arm(self, on: bool = True) -> None:
    """NQ_ARM (on) or NQ_MASK (off)."""
    self.armed = on and self.interrupt is not None
    self._raise()

  def _raise(self) -> None:
    if self.armed and self.prod > self.cons:
      self.armed = False
      self.interrupt()

  def consumed(self, index: int, epoch: int) -> None:
    """A doorbell published the driver's consumer index."""
    self.cons = doorbell_position(index, epoch, self.cons, self.prod, self.ring.depth, self.what)


@dataclass
class L2Ring:
  """A ring allocated with HWRM_RING_ALLOC. NQ rings (ring_type NQ) carry an EventRing: the CREQ is one, the
  notification queues CQs report to are others. L2 rings (TX, RX, completion) only record what their doorbells say."""
  id: int
  type: int
  kind: str                                   # "NQ", "L2_CMPL", "RX", "TX"
  ring: HostRing
  nq_id: int | None = None
  events: EventRing | None = None
  doorbell_index: int = 0
  users: set = field(default_factory=set)     # what refers to it ("vnic 1", "CQ 3", "RCFW"): not freed while used
