"""What the bnxt driver puts in memory and registers, against the bnxt_hsi.h / roce_hsi.h layouts (kernel qplib_fp.c):
doorbells, WQEs, the MSN table, page tables of levels 0-2, modify_qp masks, and the HWRM channel's handshake."""
import ctypes, struct

import numpy as np
import pytest

from autogen import bnxt as bnxt_hsi
from drivers.bnxt.doorbell import doorbell_value
from drivers.bnxt.hwrm import HWRM, HWRMError
from drivers.bnxt.pbl import page_table
from drivers.bnxt.qp import modify_mask, msn_entry, recv_wqe, send_wqe
from drivers.rdma import QPAttrMask as M, RecvWR, SGE, SendFlags, SendWR, WROpcode
from drivers.system.pci import ModelPCIDevice
from emu.pci import PCIFunction


@pytest.fixture
def pci():
  dev = ModelPCIDevice(PCIFunction("t-0", 0x14E4, 0x1750, 0x020000), None)
  yield dev
  dev.close()


def test_doorbell_carries_xid_type_valid_index_and_epoch():
  v = doorbell_value(0x12345, bnxt_hsi.DBC_DBC_TYPE_SQ, 0x1FF, 1)
  assert v >> 32 == 0x12345 | 1 << 26 and v & 0xFFFFFFFF == 0x1FF | 1 << 24
  assert doorbell_value(7, bnxt_hsi.DBC_DBC_TYPE_CQ, 0x1_000005, 0) == ((7 | 1 << 26 | 0x4 << 28) << 32 | 5)   # index: 24 bits


def test_rdma_write_wqe_is_sq_rdma_hdr_then_the_sge_in_128_bytes():
  wqe = send_wqe(SendWR(9, WROpcode.RDMA_WRITE, [SGE(0x1000_0000_0040, 300, 0x77)], remote_addr=0x2000_0000_0080, rkey=0xABCD))
  assert len(wqe) == 128
  assert (wqe[0], wqe[1], wqe[2]) == (bnxt_hsi.SQ_RDMA_HDR_WQE_TYPE_WRITE_WQE, bnxt_hsi.SQ_RDMA_HDR_FLAGS_SIGNAL_COMP, 3)
  assert struct.unpack_from("<IIIQI", wqe, 4) == (0, 300, 0, 0x2000_0000_0080, 0xABCD)
  assert struct.unpack_from("<QII", wqe, 32) == (0x1000_0000_0040, 0x77, 300) and wqe[48:] == bytes(80)


def test_write_with_immediate_read_and_send_wqes():
  w = send_wqe(SendWR(1, WROpcode.RDMA_WRITE_WITH_IMM, [], SendFlags(0), imm_data=0xFEEDF00D, remote_addr=8, rkey=1))
  assert (w[0], w[1], w[2], struct.unpack_from("<I", w, 4)[0]) == (bnxt_hsi.SQ_RDMA_HDR_WQE_TYPE_WRITE_W_IMMEAD, 0, 2, 0xFEEDF00D)
  r = send_wqe(SendWR(2, WROpcode.RDMA_READ, [SGE(0x40, 8, 3)], remote_addr=0x80, rkey=4))
  assert r[0] == bnxt_hsi.SQ_RDMA_HDR_WQE_TYPE_READ_WQE and struct.unpack_from("<Q", r, 16)[0] == 0x80
  s = send_wqe(SendWR(3, WROpcode.SEND_WITH_IMM, [SGE(0x40, 8, 3), SGE(0x80, 4, 3)], SendFlags.SIGNALED | SendFlags.SOLICITED,
                      imm_data=5))
  assert (s[0], s[1], s[2], struct.unpack_from("<II", s, 4)) == (bnxt_hsi.SQ_SEND_HDR_WQE_TYPE_SEND_W_IMMEAD,
                                                                  bnxt_hsi.SQ_SEND_HDR_FLAGS_SIGNAL_COMP | bnxt_hsi.SQ_SEND_HDR_FLAGS_SE, 4, (5, 12))


def test_receive_wqe_carries_the_sequence_number_as_wr_id():
  w = recv_wqe(0x123456, RecvWR(77, [SGE(0x1000, 64, 9)]))
  assert (w[0], w[2], struct.unpack_from("<Q", w, 8)[0]) == (bnxt_hsi.RQ_WQE_WQE_TYPE_RCV, 3, 0x23456)   # 20-bit wr_id
  assert struct.unpack_from("<QII", w, 32) == (0x1000, 9, 64) and len(w) == 128


def test_msn_entry_packs_start_index_next_psn_and_start_psn():
  assert msn_entry(0x1234, 0xABCDEF, 0x123456) == 0x1234 << 48 | 0x123456 << 24 | 0xABCDEF


def test_modify_mask_maps_the_address_vector_to_the_grh_and_ethernet_fields():
  got = modify_mask(M.STATE | M.AV | M.DEST_QPN)
  want = sum(getattr(bnxt_hsi, f"CMDQ_MODIFY_QP_MODIFY_MASK_{n}") for n in
             ("STATE", "DGID", "SGID_INDEX", "HOP_LIMIT", "TRAFFIC_CLASS", "FLOW_LABEL", "DEST_MAC", "DEST_QP_ID"))
  assert got == want
  assert modify_mask(M.PORT) == 0      # one port: nothing to tell the firmware


def _ptes(pci, addr: int, n: int) -> np.ndarray:
  return np.frombuffer(pci.model.dma.read(addr, 8 * n), np.uint64)


def test_page_tables_of_level_0_1_and_2(pci):
  one = pci.alloc_dma(4096)
  assert (pt := page_table(pci, one.bus_addrs)).level == 0 and pt.base == one.bus_addrs[0] and not pt.tables
  mem = pci.alloc_dma(3 * 4096)
  pt = page_table(pci, mem.bus_addrs, queue=True)
  assert pt.level == 1
  assert list(_ptes(pci, pt.base, 3)) == [mem.bus_addrs[0] | bnxt_hsi.PTU_PTE_VALID, mem.bus_addrs[1] | bnxt_hsi.PTU_PTE_VALID |
                                           bnxt_hsi.PTU_PTE_NEXT_TO_LAST, mem.bus_addrs[2] | bnxt_hsi.PTU_PTE_VALID | bnxt_hsi.PTU_PTE_LAST]
  big = pci.alloc_dma(513 * 4096)
  pt = page_table(pci, big.bus_addrs)
  top = _ptes(pci, pt.base, 3)
  assert pt.level == 2 and top[2] == 0 and all(top[:2] & bnxt_hsi.PTU_PDE_VALID)
  second = _ptes(pci, int(top[1]) & ~0xFFF, 2)
  assert second[0] == big.bus_addrs[512] | bnxt_hsi.PTU_PTE_VALID and second[1] == 0
  assert _ptes(pci, int(top[0]) & ~0xFFF, 512)[511] == big.bus_addrs[511] | bnxt_hsi.PTU_PTE_VALID


class FakeFirmware(PCIFunction):
  """BAR0's HWRM window and trigger only: answers each request as `answer(req_type, seq)` says (or not at all)."""
  def __init__(self, answer):
    super().__init__("fw-0", 0x14E4, 0x1750, 0x020000)
    self.answer, self.window = answer, bytearray(128)
    fw = self

    class BAR0:
      size = 0x1000
      def read(self, offset, size): return 0
      def write(self, offset, size, value):
        if offset < 128: fw.window[offset:offset + 4] = value.to_bytes(4, "little")
        elif offset == 0x100: fw.trigger()
    self.bars[0] = BAR0()

  def trigger(self):
    req_type, _, seq, _, resp_addr = struct.unpack_from("<HHHHQ", self.window)
    if (r := self.answer(req_type, seq)) is not None: self.dma.write(resp_addr, r)


def response(cls, req_type, seq, error=0, **fields):
  out = cls(error_code=error, req_type=req_type, seq_id=seq, resp_len=ctypes.sizeof(cls), valid=1, **fields)
  return bytes(out)


def test_hwrm_answer_with_valid_byte_and_sequence_ids():
  seen = []
  def answer(req_type, seq):
    seen.append((req_type, seq))
    return response(bnxt_hsi.hwrm_func_qcfg_output, req_type, seq, legacy_l2_db_size_kb=64)
  with ModelPCIDevice(FakeFirmware(answer), None) as pci:
    hwrm = HWRM(pci, pci.map_bar(0))
    assert hwrm("func_qcfg", fid=0xFFFF).legacy_l2_db_size_kb == 64
    hwrm("func_qcfg", fid=0xFFFF)
  assert seen == [(bnxt_hsi.HWRM_FUNC_QCFG, 1), (bnxt_hsi.HWRM_FUNC_QCFG, 2)]


def test_hwrm_error_code_names_the_command_and_the_error():
  answer = lambda t, s: response(bnxt_hsi.hwrm_func_qcaps_output, t, s, error=bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS)
  with ModelPCIDevice(FakeFirmware(answer), None) as pci:
    with pytest.raises(HWRMError, match=r"fw-0: HWRM FUNC_QCAPS \(0x15\) failed: error 0x2 \(INVALID_PARAMS\)"):
      HWRM(pci, pci.map_bar(0))("func_qcaps", fid=0xFFFF)


@pytest.mark.parametrize("answer", [lambda t, s: None, lambda t, s: response(bnxt_hsi.hwrm_func_qcfg_output, t, s + 1),
                                    lambda t, s: response(bnxt_hsi.hwrm_func_qcfg_output, t, s)[:-1] + b"\0"])
def test_hwrm_without_a_valid_answer_times_out_naming_the_command(answer):
  with ModelPCIDevice(FakeFirmware(answer), None) as pci:
    with pytest.raises(TimeoutError, match=r"fw-0: HWRM FUNC_QCFG \(0x16\) seq 1: no valid response in 0.05 s"):
      HWRM(pci, pci.map_bar(0))("func_qcfg", timeout_s=0.05, fid=0xFFFF)
