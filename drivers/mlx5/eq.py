"""The driver's event queues (CREATE_EQ; include/linux/mlx5/device.h mlx5_eqe; kernel mlx5_core eq.c).

The async EQ is subscribed to page requests, command completions, CQ errors and QP errors and polled after every command
(a QP's errors reach the verbs layer as its error CQEs). The completion EQ takes the completion events of armed CQs and
interrupts on MSI-X vector 1 (eqc.intr) when armed, which CQ.wait_event sleeps on. An EQE is new when its owner bit
(byte 63) equals the consumer's pass parity; every owner bit starts at 1 (mlx5 core lib/eq.h MLX5_EQE_OWNER_INIT_VAL).
Consumed entries go back through the EQ doorbell of the UAR page (eqn << 24 | consumer; 0x40 arms the EQ's interrupt,
0x48 does not: lib/eq.h MLX5_EQ_DOORBEL_OFFSET)."""
from __future__ import annotations
import os, select
from typing import TYPE_CHECKING

from autogen import mlx5 as mlx5_ifc, mlx5_core
from drivers.mlx5.ifc import swap32

if TYPE_CHECKING: from drivers.mlx5.device import MLX5Device

LOG_SIZE, EQE = 7, 64
DB_ARM, DB_NOARM = 0x40, 0x48
ASYNC_EVENTS = (mlx5_core.MLX5_EVENT_TYPE_PAGE_REQUEST, mlx5_core.MLX5_EVENT_TYPE_CMD, mlx5_core.MLX5_EVENT_TYPE_CQ_ERROR,
                mlx5_core.MLX5_EVENT_TYPE_WQ_CATAS_ERROR)
COMP_VECTOR = 1              # MSI-X vector of the completion EQ (0, the async EQ's, is never armed: it is polled)


class EQ:
  def __init__(self, dev: MLX5Device, events: tuple[int, ...] = ASYNC_EVENTS, vector: int = 0):
    self.dev, self.cons, self.vector = dev, 0, vector
    self.mem = dev.pci.alloc_dma(EQE << LOG_SIZE)
    for i in range(1 << LOG_SIZE): self.mem.view[i * EQE + 63] = 1
    self.events: list[tuple[int, bytes]] = []        # the last few, for messages
    pas = b"".join(a.to_bytes(8, "big") for a in self.mem.bus_addrs)
    try:
      self.eqn = dev.cmd(mlx5_ifc.MLX5_CMD_OP_CREATE_EQ, {"eq_context_entry.log_eq_size": LOG_SIZE, "eq_context_entry.uar_page": dev.uar,
                                                          "eq_context_entry.intr": vector, "event_bitmask[0]": sum(1 << t for t in events)},
                         payload=pas, poll=False).get("eq_number")
    except BaseException:
      dev.pci.free_dma(self.mem)
      raise
    self.irq = dev.pci.msix_eventfd(vector) if vector else None   # None: no interrupts here (polled)

  def poll(self, arm: bool = False) -> list[tuple[int, bytes]]:
    """The new EQEs (type, 28 data bytes), handed back to the device; `arm`: and interrupt at the next one."""
    got, v = [], self.mem.view
    while True:
      e = (self.cons % (1 << LOG_SIZE)) * EQE
      if v[e + 63] & 1 != (self.cons >> LOG_SIZE) & 1: break
      got.append((v[e + 1], bytes(v[e + 32:e + 60])))
      self.cons += 1
    if got or arm:
      self.dev.uar_bar.write32(DB_ARM if arm else DB_NOARM, swap32(self.eqn << 24 | self.cons & 0xFFFFFF))
      self.events = (self.events + got)[-32:]
    return got

  def wait(self, timeout_s: float) -> None:
    """Sleep until the EQ interrupts (it must be armed) or `timeout_s` passes."""
    if select.select([self.irq], [], [], max(timeout_s, 0.0))[0]:
      try: os.eventfd_read(self.irq)
      except BlockingIOError: pass

  def destroy(self) -> None:
    try: self.dev.cmd(mlx5_ifc.MLX5_CMD_OP_DESTROY_EQ, eq_number=self.eqn, poll=False)
    finally: self.dev.pci.free_dma(self.mem)
