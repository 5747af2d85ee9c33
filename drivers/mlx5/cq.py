"""Completion queues: CREATE_CQ and polling by owner bit (device.h mlx5_cqe64, mlx5_err_cqe).

64-byte CQEs; byte 63 is opcode << 4 | owner, and a CQE is new when its opcode is not INVALID and its owner bit equals
the consumer's pass parity (every CQE starts as INVALID with owner 1). The consumer index goes to the doorbell record's
first word (big-endian, 24 bits) after each poll. The QP number is in the low 24 bits of the big-endian word at 56.
`wait_event` arms the CQ and sleeps on the completion EQ's interrupt (eq.py)."""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING

from autogen import mlx5 as mlx5_ifc, mlx5_core
from drivers.rdma.provider import Completion
if TYPE_CHECKING: from drivers.mlx5.device import MLX5Device

CQE = 64
# what a CQE's consumer reads, big-endian: imm_inval_pkey (36), byte_cnt (44), the error CQE's vendor_err_synd (54) and
# syndrome (55), sop_drop_qpn / s_wqe_opcode_qpn (56, QPN in the low 24 bits), wqe_counter (60), op_own (63)
FIELDS = struct.Struct(">36xI4xI6xBBIHxB")
DBR_WORD = struct.Struct(">I")               # a doorbell record word


class CQ:
  def __init__(self, dev: MLX5Device, depth: int):
    self.dev = dev
    self.log_size = max(depth - 1, 63).bit_length()         # a power of two with room for `depth`, at least one page
    self.depth = n = 1 << self.log_size
    self.mem = dev.pci.alloc_dma(n * CQE)
    for i in range(n): self.mem.view[i * CQE + 63] = mlx5_core.MLX5_CQE_INVALID << 4 | 1
    self.dbr, self.ci, self.sn = dev.alloc_dbr(), 0, 0
    q = "cq_context."
    try:
      self.cqn = dev.cmd(mlx5_ifc.MLX5_CMD_OP_CREATE_CQ, {f"{q}log_cq_size": self.log_size, f"{q}uar_page": dev.uar,
                         f"{q}c_eqn_or_apu_element": dev.comp_eq.eqn, f"{q}dbr_addr": dev.dbr.bus_addr(self.dbr)},
                         payload=b"".join(a.to_bytes(8, "big") for a in self.mem.bus_addrs)).get("cqn")
    except BaseException:
      self._free()
      raise

  def poll(self, max_entries: int) -> list[Completion]:
    out, v, start = [], self.mem.view, self.ci
    while len(out) < max_entries:
      e = (self.ci % self.depth) * CQE
      op = v[e + 63]
      if op >> 4 == mlx5_core.MLX5_CQE_INVALID or op & 1 != (self.ci >> self.log_size) & 1: break
      imm, byte_cnt, vendor_syndrome, syndrome, qpn, counter, op = FIELDS.unpack_from(v, e)   # (not written again before
      self.ci += 1                                                                         # the consumer passes it)
      if (qp := self.dev.qps.get(qpn & 0xFFFFFF)) is None:
        raise RuntimeError(f"{self.dev.name}: CQ {self.cqn:#x} entry {self.ci - 1} names QP {qpn & 0xFFFFFF:#x}, which this "
                           "driver has not created")
      if (c := qp.completion(op >> 4, counter, byte_cnt, imm, syndrome, vendor_syndrome)) is not None: out.append(c)
    if self.ci != start: DBR_WORD.pack_into(self.dev.dbr.view, self.dbr, self.ci & 0xFFFFFF)
    return out

  def _new(self) -> bool:
    op = self.mem.view[(self.ci % self.depth) * CQE + 63]
    return op >> 4 != mlx5_core.MLX5_CQE_INVALID and op & 1 == (self.ci >> self.log_size) & 1

  def wait_event(self, timeout_s: float) -> bool:
    """Arm the CQ (the doorbell record's arm word, then the UAR's CQ doorbell: sn << 28 | consumer, cqn) and sleep on
    the completion EQ's interrupt until a CQ's next CQE is notified or `timeout_s` passes; False at once where the
    platform gives no interrupts."""
    eq = self.dev.comp_eq
    if eq.irq is None: return False
    eq.poll(arm=True)                                  # the events so far are consumed: interrupt at the next one
    word = (self.sn & 3) << 28 | self.ci & 0xFFFFFF
    self.sn += 1
    self.dev.dbr.view[self.dbr + 4:self.dbr + 8] = word.to_bytes(4, "big")
    self.dev.uar_bar.write64(mlx5_core.MLX5_CQ_DOORBELL, int.from_bytes(word.to_bytes(4, "big") + self.cqn.to_bytes(4, "big"), "little"))
    if not self._new(): eq.wait(timeout_s)             # else it came before the arm (the event is due at once anyway)
    return True

  def destroy(self) -> None:
    try: self.dev.cmd(mlx5_ifc.MLX5_CMD_OP_DESTROY_CQ, cqn=self.cqn)
    finally: self._free()

  def _free(self) -> None:
    self.dev.pci.free_dma(self.mem)
    self.dev.free_dbr(self.dbr)
