"""The NIC verbs API: rdma-core's nouns (Context, PD, MR, CQ, QP) and transitions over a provider per vendor.

  from drivers.rdma import open_context, Access, SendWR, WROpcode
  ctx = open_context("<nic>", "mock-0", ip="10.0.0.1")      # vendor (hcq-rdma --nic), PCI bus or mock-<n>
  pd, cq = ctx.alloc_pd(), ctx.create_cq()
  mr = pd.reg_mr(ctx.alloc(4096), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
  qp = pd.create_qp(cq); qp.connect(peer_endpoint, psn=0)  # or qp.modify(QPAttr(...), QPAttrMask...) step by step
  qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, [mr.sge()], remote_addr=..., rkey=...)); cq.wait()

The shared layer names no vendor; vendors plug in with `Vendor.rdma` (drivers/system/registry.py).
"""
from drivers.rdma.verbs import (AHAttr, Access, QPAttr, QPAttrMask, QPCap, QPState, RecvWR, SGE, SendFlags, SendWR,
                                VerbsError, WCError, WCOpcode, WCStatus, WorkCompletion, WROpcode, PATH_MTUS)
from drivers.rdma.context import Context, PD, MR, open_context, rdma_vendors, ipv4_to_gid, gid_text
from drivers.rdma.queues import CQ, QP
from drivers.rdma.exchange import Endpoint, RemoteMR, ProtocolError

__all__ = ["AHAttr", "Access", "QPAttr", "QPAttrMask", "QPCap", "QPState", "RecvWR", "SGE", "SendFlags", "SendWR",
           "VerbsError", "WCError", "WCOpcode", "WCStatus", "WorkCompletion", "WROpcode", "PATH_MTUS", "Context", "PD",
           "MR", "open_context", "rdma_vendors", "ipv4_to_gid", "gid_text", "CQ", "QP", "Endpoint", "RemoteMR",
           "ProtocolError"]
