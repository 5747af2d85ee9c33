"""The driver's event queue (CREATE_EQ; include/linux/mlx5/device.h mlx5_eqe; reference/rdma.md 6.4): subscribed to page
requests, command completions, CQ errors and QP errors; polled after every command (no interrupts); a QP's errors
reach the verbs layer as its error CQEs. An EQE is new when its owner bit (byte 63) equals the consumer's pass
parity; every owner bit starts at 1 (mlx5 core lib/eq.h MLX5_EQE_OWNER_INIT_VAL). Consumed entries go back through
the EQ doorbell (UAR offset 0x48: eqn << 24 | consumer)."""
from __future__ import annotations
from typing import TYPE_CHECKING

from autogen import mlx5 as H, mlx5_core as C
from drivers.mlx5.ifc import swap32

if TYPE_CHECKING: from drivers.mlx5.device import MLX5Device

LOG_SIZE, EQE = 7, 64
DB_NOARM = 0x48
EVENTS = (C.MLX5_EVENT_TYPE_PAGE_REQUEST, C.MLX5_EVENT_TYPE_CMD, C.MLX5_EVENT_TYPE_CQ_ERROR, C.MLX5_EVENT_TYPE_WQ_CATAS_ERROR)


class EQ:
  def __init__(self, dev: MLX5Device):
    self.dev, self.cons = dev, 0
    self.mem = dev.pci.alloc_dma(EQE << LOG_SIZE)
    for i in range(1 << LOG_SIZE): self.mem.view[i * EQE + 63] = 1
    self.events: list[tuple[int, bytes]] = []        # the last few, for messages
    mask = sum(1 << t for t in EVENTS)
    pas = b"".join(a.to_bytes(8, "big") for a in self.mem.bus_addrs)
    try:
      self.eqn = dev.cmd(H.MLX5_CMD_OP_CREATE_EQ, {"eq_context_entry.log_eq_size": LOG_SIZE, "eq_context_entry.uar_page": dev.uar,
                                                   "event_bitmask[0]": mask}, payload=pas, poll=False).get("eq_number")
    except BaseException:
      dev.pci.free_dma(self.mem)
      raise

  def poll(self) -> list[tuple[int, bytes]]:
    """The new EQEs (type, 28 data bytes), handed back to the device."""
    got, v = [], self.mem.view
    while True:
      e = (self.cons % (1 << LOG_SIZE)) * EQE
      if v[e + 63] & 1 != (self.cons >> LOG_SIZE) & 1: break
      got.append((v[e + 1], bytes(v[e + 32:e + 60])))
      self.cons += 1
    if got:
      self.dev.uar_bar.write32(DB_NOARM, swap32(self.eqn << 24 | self.cons & 0xFFFFFF))
      self.events = (self.events + got)[-32:]
    return got

  def destroy(self) -> None:
    try: self.dev.cmd(H.MLX5_CMD_OP_DESTROY_EQ, eq_number=self.eqn, poll=False)
    finally: self.dev.pci.free_dma(self.mem)
