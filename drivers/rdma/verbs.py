"""The verbs vocabulary: access flags, QP states and attribute masks, work requests, completions and their errors.

Names and flag values are rdma-core's (libibverbs verbs.h: enum ibv_access_flags, ibv_qp_state, ibv_qp_attr_mask,
ibv_wr_opcode, ibv_wc_opcode, ibv_wc_status), so a verbs user reads them without a glossary.
"""
from __future__ import annotations
import enum, operator
from dataclasses import dataclass, field


class VerbsError(RuntimeError):
  """A verb the device or the rules of the verbs refused; the message names the object and what it needs."""


class Access(enum.IntFlag):
  """ibv_access_flags: what an MR (or a QP's responder) allows."""
  LOCAL_WRITE = 1
  REMOTE_WRITE = 2
  REMOTE_READ = 4
  REMOTE_ATOMIC = 8


class QPState(enum.IntEnum):
  """ibv_qp_state."""
  RESET = 0
  INIT = 1
  RTR = 2
  RTS = 3
  SQD = 4
  SQE = 5
  ERR = 6


class QPAttrMask(enum.IntFlag):
  """ibv_qp_attr_mask: which QPAttr fields a modify_qp call carries."""
  STATE = 1 << 0
  CUR_STATE = 1 << 1
  ACCESS_FLAGS = 1 << 3
  PKEY_INDEX = 1 << 4
  PORT = 1 << 5
  AV = 1 << 7
  PATH_MTU = 1 << 8
  TIMEOUT = 1 << 9
  RETRY_CNT = 1 << 10
  RNR_RETRY = 1 << 11
  RQ_PSN = 1 << 12
  MAX_QP_RD_ATOMIC = 1 << 13
  MIN_RNR_TIMER = 1 << 15
  SQ_PSN = 1 << 16
  MAX_DEST_RD_ATOMIC = 1 << 17
  DEST_QPN = 1 << 20


# IB path MTUs (IBTA vol. 1, 9.7.6: 256 to 4096 bytes in powers of two)
PATH_MTUS = (256, 512, 1024, 2048, 4096)


@dataclass
class AHAttr:
  """Address vector of a RoCE peer (ibv_ah_attr with its GRH): its GID, our source GID index, and the Ethernet
  destination MAC (rdma-core resolves it from the GID through the kernel's neighbour table; here the peer says it)."""
  dgid: bytes
  sgid_index: int = 0
  dmac: bytes | None = None
  hop_limit: int = 64
  traffic_class: int = 0
  flow_label: int = 0


@dataclass
class QPAttr:
  """ibv_qp_attr: the fields a transition takes (QPAttrMask says which are present). `path_mtu` is in bytes;
  `timeout` is the local ACK timeout exponent (4.096 us * 2^timeout, 0 = infinite); `rnr_retry` 7 = infinite."""
  qp_state: QPState | None = None
  cur_qp_state: QPState | None = None
  qp_access_flags: Access = Access(0)
  pkey_index: int = 0
  port_num: int = 1
  ah_attr: AHAttr | None = None
  path_mtu: int = 1024
  timeout: int = 14
  retry_cnt: int = 7
  rnr_retry: int = 7
  rq_psn: int = 0
  max_rd_atomic: int = 1
  min_rnr_timer: int = 12
  sq_psn: int = 0
  max_dest_rd_atomic: int = 1
  dest_qp_num: int = 0


@dataclass
class QPCap:
  """ibv_qp_cap: queue depths and scatter/gather entries per work request."""
  max_send_wr: int = 64
  max_recv_wr: int = 64
  max_send_sge: int = 1
  max_recv_sge: int = 1


class WROpcode(enum.IntEnum):
  """ibv_wr_opcode."""
  RDMA_WRITE = 0
  RDMA_WRITE_WITH_IMM = 1
  SEND = 2
  SEND_WITH_IMM = 3
  RDMA_READ = 4

  @property
  def is_rdma(self) -> bool: return self in RDMA_OPS         # (sets of the values: enum attribute lookups are slow)

  @property
  def has_imm(self) -> bool: return self in IMM_OPS


RDMA_OPS = frozenset((WROpcode.RDMA_WRITE.value, WROpcode.RDMA_WRITE_WITH_IMM.value, WROpcode.RDMA_READ.value))
IMM_OPS = frozenset((WROpcode.RDMA_WRITE_WITH_IMM.value, WROpcode.SEND_WITH_IMM.value))


class SendFlags(enum.IntFlag):
  """ibv_send_flags (the ones this layer supports)."""
  FENCE = 1
  SIGNALED = 2
  SOLICITED = 4


@dataclass
class SGE:
  """ibv_sge: `length` bytes at `addr` of the MR whose lkey is `lkey`."""
  addr: int
  length: int
  lkey: int


_LENGTH = operator.attrgetter("length")


@dataclass
class SendWR:
  """ibv_send_wr. `remote_addr`/`rkey` are the target (RDMA WRITE) or source (RDMA READ) in the peer's MR."""
  wr_id: int
  opcode: WROpcode
  sg_list: list[SGE] = field(default_factory=list)
  send_flags: SendFlags = SendFlags.SIGNALED
  imm_data: int = 0
  remote_addr: int = 0
  rkey: int = 0

  @property
  def length(self) -> int: return sum(map(_LENGTH, self.sg_list))

  def describe(self) -> str:
    """For messages, also about a request whose fields the checks refuse (a length or key that is no int)."""
    hx = lambda v: f"{v:#x}" if isinstance(v, int) else repr(v)
    what = f"{self.opcode.name} wr_id {self.wr_id} ({sum(s.length for s in self.sg_list if isinstance(s.length, int))} B"
    if self.opcode.is_rdma: what += f", remote {hx(self.remote_addr)} rkey {hx(self.rkey)}"
    return what + ")"


@dataclass
class RecvWR:
  """ibv_recv_wr: where an incoming SEND lands (an RDMA WRITE with immediate consumes one with no data)."""
  wr_id: int
  sg_list: list[SGE] = field(default_factory=list)

  def describe(self) -> str:
    return f"RECV wr_id {self.wr_id} ({sum(s.length for s in self.sg_list)} B" + \
      "".join(f", {s.length} at {s.addr:#x} lkey {s.lkey:#x}" for s in self.sg_list) + ")"


class WCOpcode(enum.IntEnum):
  """ibv_wc_opcode."""
  SEND = 0
  RDMA_WRITE = 1
  RDMA_READ = 2
  RECV = 128
  RECV_RDMA_WITH_IMM = 129


# a send work request's completion opcode
SEND_WC = {WROpcode.RDMA_WRITE: WCOpcode.RDMA_WRITE, WROpcode.RDMA_WRITE_WITH_IMM: WCOpcode.RDMA_WRITE,
           WROpcode.SEND: WCOpcode.SEND, WROpcode.SEND_WITH_IMM: WCOpcode.SEND, WROpcode.RDMA_READ: WCOpcode.RDMA_READ}


class WCStatus(enum.IntEnum):
  """ibv_wc_status."""
  SUCCESS = 0
  LOC_LEN_ERR = 1
  LOC_QP_OP_ERR = 2
  LOC_PROT_ERR = 4
  WR_FLUSH_ERR = 5
  BAD_RESP_ERR = 7
  LOC_ACCESS_ERR = 8
  REM_INV_REQ_ERR = 9
  REM_ACCESS_ERR = 10
  REM_OP_ERR = 11
  RETRY_EXC_ERR = 12
  RNR_RETRY_EXC_ERR = 13
  FATAL_ERR = 19
  GENERAL_ERR = 21


# what each error status means, in the words of a user who has to fix it
WC_MEANING = {
  WCStatus.LOC_LEN_ERR: "local length error (the message does not fit the posted buffers)",
  WCStatus.LOC_QP_OP_ERR: "local QP operation error",
  WCStatus.LOC_PROT_ERR: "local protection error (an lkey, its bounds or its access flags refused the buffer)",
  WCStatus.WR_FLUSH_ERR: "flushed: the QP went to the error state before this request ran",
  WCStatus.BAD_RESP_ERR: "bad response from the responder",
  WCStatus.LOC_ACCESS_ERR: "local access error",
  WCStatus.REM_INV_REQ_ERR: "remote invalid request (the responder's QP is not ready to receive, or the request is malformed)",
  WCStatus.REM_ACCESS_ERR: "remote access error (the responder refused the rkey, the range or the access)",
  WCStatus.REM_OP_ERR: "remote operation error",
  WCStatus.RETRY_EXC_ERR: "transport retry counter exceeded (no ACK from the responder)",
  WCStatus.RNR_RETRY_EXC_ERR: "receiver-not-ready retry counter exceeded (the responder posted no receive)",
  WCStatus.FATAL_ERR: "fatal device error",
  WCStatus.GENERAL_ERR: "general error",
}


@dataclass
class WorkCompletion:
  """ibv_wc, plus the work request it completes and the device's own status code (`vendor_err`, its name)."""
  wr_id: int
  status: WCStatus
  opcode: WCOpcode
  qp_num: int
  byte_len: int = 0
  imm_data: int | None = None
  vendor_err: int = 0
  vendor_status: str = ""
  wr: SendWR | RecvWR | None = None


class WCError(VerbsError):
  """An error completion, raised by CQ.poll: `wc` carries the status, the hardware status and the work request."""
  completed: list[WorkCompletion]   # CQ.poll_wait: the successful completions polled before it

  def __init__(self, wc: WorkCompletion):
    self.wc = wc
    what = wc.wr.describe() if isinstance(wc.wr, (SendWR, RecvWR)) else f"{wc.opcode.name} wr_id {wc.wr_id}"
    hw = f"hardware status {wc.vendor_err:#x}" + (f" {wc.vendor_status}" if wc.vendor_status else "")
    super().__init__(f"QP {wc.qp_num:#x}: {what} failed: {wc.status.name}, {WC_MEANING.get(wc.status, 'error')} [{hw}]")
