"""The RoCE firmware channel (RCFW): command queue (CMDQ), its completion ring (CREQ) and the notification queue
(roce_hsi.h cmdq_* / creq_*, kernel qplib_rcfw.c).

Bring-up: the CREQ is an NQ-type ring (HWRM RING_ALLOC) and is armed with an NQ_ARM doorbell; the CMDQ's page table,
size and CREQ id go to the RCFW mailbox (struct cmdq_init at BAR0 + RCFW_COMM_BASE_OFFSET). A command is a cmdq_<name>
struct of `cmd_size` 16-byte slots copied in at the producer; the new producer (modulo the ring) goes to the mailbox's
producer word, with FIRMWARE_FIRST_FLAG on the very first command (the firmware resets its pointers), and
RCFW_CMDQ_TRIG_VAL to the trigger. The firmware answers each command with one creq_<name>_resp: type QP_EVENT, the
opcode as `event`, our cookie, a status and the new object's xid; its valid bit `v` is 1 on even passes of the ring.
Consuming entries is published with an NQ_ARM doorbell on the CREQ. Asynchronous events (QP/CQ error
notifications, function events) arrive on the CREQ too; they are kept in `events`.
"""
from __future__ import annotations
import ctypes

from autogen import bnxt as bnxt_hsi, bnxt_re
from drivers.bnxt.doorbell import Doorbell
from drivers.bnxt.hsi import RCFW_COMMANDS, decode, encode
from drivers.system.poll import wait_until
from drivers.bnxt.hwrm import HWRM
from drivers.bnxt.pbl import HWQueue
from drivers.hcq.ring import Ring
from drivers.system.mmio import MMIO
from drivers.system.pci import PCIDevice

CMDQ_SLOTS = 256            # 16-byte slots: one page
CREQ_ENTRIES = NQ_ENTRIES = 256
MAILBOX = bnxt_re.RCFW_COMM_BASE_OFFSET
PROD = bnxt_re.RCFW_COMM_BASE_OFFSET + bnxt_re.RCFW_PF_VF_COMM_PROD_OFFSET
TRIGGER = bnxt_re.RCFW_COMM_BASE_OFFSET + bnxt_re.RCFW_COMM_TRIG_OFFSET
TIMEOUT_S = bnxt_re.RCFW_CMD_WAIT_TIME_MS / 1000
EVENTS_KEPT = 16            # the last asynchronous events, for error messages
ERROR_EVENTS = {bnxt_hsi.CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION: "QP error notification",
                bnxt_hsi.CREQ_QP_EVENT_EVENT_CQ_ERROR_NOTIFICATION: "CQ error notification"}


class RCFWError(RuntimeError):
  """The RoCE firmware answered a command with a non-zero status."""


def alloc_nq_ring(hwrm: HWRM, q: HWQueue, logical_id: int = 0) -> int:
  """HWRM RING_ALLOC of an NQ-type ring (the CREQ and the notification queue) -> its ring id."""
  return hwrm("ring_alloc", ring_type=bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, page_tbl_addr=q.pt.base, page_size=12,
              page_tbl_depth=q.pt.level, length=q.entries, logical_id=logical_id,
              int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX).ring_id


class RCFW:
  def __init__(self, pci: PCIDevice, bar0: MMIO, hwrm: HWRM, db: Doorbell):
    self.pci, self.bar0, self.db, self.name = pci, bar0, db, f"{pci.bus} RCFW"
    self.creq = HWQueue(pci, CREQ_ENTRIES, ctypes.sizeof(bnxt_hsi.creq_base))
    self.creq_id = alloc_nq_ring(hwrm, self.creq)
    self.cmdq = HWQueue(pci, CMDQ_SLOTS, bnxt_re.BNXT_QPLIB_CMDQE_UNITS)
    self._consumed = memoryview(bytearray(8)).cast("Q")   # CMDQ slots the firmware has read (known from its answers)
    self.ring = Ring(self, "CMDQ", self.cmdq.ring, self._consumed, None, self._publish, unit=bnxt_re.BNXT_QPLIB_CMDQE_UNITS)
    self.db.ring(self.creq_id, bnxt_hsi.DBC_DBC_TYPE_NQ_ARM, 0, 0)
    init = encode(bnxt_hsi.cmdq_init, cmdq_pbl=self.cmdq.pt.base, creq_ring_id=self.creq_id,
                  cmdq_size_cmdq_lvl=CMDQ_SLOTS << bnxt_hsi.CMDQ_INIT_CMDQ_SIZE_SFT | self.cmdq.pt.level)
    for i in range(0, len(init), 4): bar0.write32(MAILBOX + i, int.from_bytes(init[i:i + 4], "little"))
    self.first, self.seq = True, 0
    self.events: list[str] = []

  def check_faults(self) -> None:
    """(The Ring asks while it waits for room.) Nothing here stops the queue: errors come with the answers."""

  def _publish(self, put: int) -> None:
    prod = put % CMDQ_SLOTS | (1 << bnxt_re.FIRMWARE_FIRST_FLAG if self.first else 0)
    self.first = False
    self.bar0.write32(PROD, prod)
    self.bar0.write32(TRIGGER, bnxt_re.RCFW_CMDQ_TRIG_VAL)

  def __call__(self, name: str, timeout_s: float = TIMEOUT_S, **fields) -> ctypes.Structure:
    """Send `cmdq_<name>` with `fields`; returns the parsed `creq_<name>_resp` once the firmware answered."""
    cls, resp_cls = getattr(bnxt_hsi, f"cmdq_{name}"), getattr(bnxt_hsi, f"creq_{name}_resp")
    opcode = getattr(bnxt_hsi, f"CMDQ_BASE_OPCODE_{name.upper()}")
    slots = -(-ctypes.sizeof(cls) // bnxt_re.BNXT_QPLIB_CMDQE_UNITS)
    self.seq += 1
    cookie = self.seq & bnxt_re.RCFW_MAX_COOKIE_VALUE
    cmd = encode(cls, opcode=opcode, cmd_size=slots, cookie=cookie | bnxt_re.RCFW_CMD_IS_BLOCKING, **fields)
    cmd += bytes(slots * bnxt_re.BNXT_QPLIB_CMDQE_UNITS - len(cmd))
    self.ring.submit([cmd], [])
    answer: list[bytes] = []

    def answered() -> bool:
      while (e := self._next()) is not None:
        base = decode(bnxt_hsi.creq_base, e)
        if base.type & bnxt_hsi.CREQ_BASE_TYPE_MASK == bnxt_hsi.CREQ_BASE_TYPE_QP_EVENT and base.event == opcode:
          got = decode(resp_cls, e).cookie & bnxt_re.RCFW_MAX_COOKIE_VALUE
          if got != cookie:
            raise RuntimeError(f"{self.name}: {name.upper()} #{self.seq} was answered with cookie {got} (expected {cookie})")
          answer.append(e)
        else:
          self.events.append(self._event(base, e))
          del self.events[:-EVENTS_KEPT]
      return bool(answer)

    wait_until(answered, timeout_s, lambda: f"{self.name}: {name.upper()} ({opcode:#x}) #{self.seq}: no answer on the CREQ in "
               f"{timeout_s:g} s" + (f"; events: {'; '.join(self.events)}" if self.events else ""))
    self._consumed[0] = self.ring.put
    resp = decode(resp_cls, answer[0])
    if resp.status:
      raise RCFWError(f"{self.name}: {name.upper()} ({opcode:#x}) failed: status {resp.status:#x}"
                      + (f"; events: {'; '.join(self.events)}" if self.events else ""))
    return resp

  def _next(self) -> bytes | None:
    """The next CREQ entry if the firmware has written it (valid bit = 1 on even passes); consumes it."""
    q = self.creq
    e = q.slot(q.cons)
    if bool(e[8] & bnxt_hsi.CREQ_BASE_V) == bool(q.epoch(q.cons)): return None
    data = bytes(e)
    q.cons += 1
    self.db.ring(self.creq_id, bnxt_hsi.DBC_DBC_TYPE_NQ_ARM, q.cons % q.entries, q.epoch(q.cons))
    return data

  @staticmethod
  def _event(base, e: bytes) -> str:
    if base.type & bnxt_hsi.CREQ_BASE_TYPE_MASK == bnxt_hsi.CREQ_BASE_TYPE_FUNC_EVENT: return f"function event {base.event:#x}"
    if base.event in ERROR_EVENTS:
      xid = int.from_bytes(e[4:8], "little")
      return f"{ERROR_EVENTS[base.event]} for xid {xid:#x} (entry {e.hex()})"
    return f"unexpected CREQ entry type {base.type:#x} event {base.event:#x} ({RCFW_COMMANDS.get(base.event, '?')})"

  def free(self) -> None:
    self.creq.free()
    self.cmdq.free()
