"""What drivers/rdma does for every provider: matching a NIC's completion records to the requests posted (sends that
asked for no completion complete silently before the next one that did, IBTA 10.8.3.1; every receive completes), dropping
the NIC's flush CQEs once the verbs layer has flushed the QP (IBTA 10.8.3.3), the MR page sizes, IPv4-mapped GIDs."""
import ipaddress
from types import SimpleNamespace

import pytest

from drivers.rdma import VerbsError, WCOpcode, WCStatus, ipv4_to_gid
from drivers.rdma.provider import Completion, WorkRequests, ipv4_gid, mr_page_shift
from drivers.rdma.verbs import QPState

SIZES = 1 << 12 | 1 << 16 | 1 << 21                 # 4 KiB, 64 KiB, 2 MiB


def requests() -> WorkRequests:
  wrs = WorkRequests("nic 0000:01:00.0", SimpleNamespace(qp_num=0x42))
  wrs.sq.extend([(10, 0), (11, 1), (12, 2)])       # (the key the NIC names the WQE by, the sequence number)
  wrs.rq.extend([(20, 0), (21, 1)])
  return wrs


def test_a_send_completion_takes_its_request_and_the_silent_ones_before_it():
  wrs = requests()
  assert wrs.take(False, 12) == (12, 2) and not wrs.sq
  assert wrs.completion(False, 2, WCStatus.SUCCESS) == Completion(0x42, False, 2, WCStatus.SUCCESS)


def test_a_receive_completion_must_name_the_oldest_receive():
  wrs = requests()
  with pytest.raises(VerbsError, match="QP 0x42 receive completion names wr_id 0x15, but the next outstanding request's is 0x14"):
    wrs.take(True, 21, "wr_id")
  assert wrs.take(True, 20) == (20, 0) and wrs.take(True, 21) == (21, 1)
  with pytest.raises(VerbsError, match="send completion names WQE 0x9, which no outstanding request is at"):
    wrs.take(False, 9)
  assert not wrs.sq                                 # (every send was passed over looking for it)


def test_after_an_error_completion_the_nics_flush_cqes_are_dropped_until_reset():
  wrs = requests()
  err = wrs.completion(True, wrs.take(True, 20)[1], WCStatus.LOC_PROT_ERR, 5, "PROT", 64, None, WCOpcode.RECV)
  assert err == Completion(0x42, True, 0, WCStatus.LOC_PROT_ERR, 5, "PROT", 64, None, WCOpcode.RECV) and wrs.flushed
  assert wrs.completion(True, wrs.take(True, 21)[1], WCStatus.WR_FLUSH_ERR) is None and not wrs.rq   # retired, dropped
  wrs.modified(QPState.RESET)
  assert (list(wrs.sq), wrs.flushed) == ([], False)
  wrs.modified(QPState.ERR)                         # the verbs layer moved it to ERR: it flushed every request itself
  assert wrs.flushed and wrs.completion(False, 0, WCStatus.SUCCESS) is None


def test_an_mr_takes_only_the_page_sizes_the_nic_names():
  assert [mr_page_shift("nic", s, SIZES) for s in (1 << 12, 1 << 16, 1 << 21)] == [12, 16, 21]
  for bad in (1 << 14, 3 << 12, 0):
    with pytest.raises(ValueError, match=f"nic: MR page size {bad:#x} is not one the NIC's MRs take \\(0x1000, 0x10000, 0x200000 bytes\\)"):
      mr_page_shift("nic", bad, SIZES)


def test_an_ipv4_gid_is_the_ipv4_mapped_ipv6_address():
  assert ipv4_gid(ipv4_to_gid("10.0.0.1"))
  assert not ipv4_gid(ipaddress.IPv6Address("fe80::1").packed) and not ipv4_gid(ipaddress.IPv6Address("::1:ffff:a00:1").packed)
