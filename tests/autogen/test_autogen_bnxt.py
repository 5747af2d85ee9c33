"""bnxt bindings (6.12 bnxt_hsi.h / roce_hsi.h): HWRM and RoCE command sizes and offsets as the kernel's bnxt_re uses them."""
import ctypes
from autogen import bnxt


def test_hwrm_command_layouts():
  assert bnxt.HWRM_MAX_REQ_LEN == 128  # the BAR0 request window
  assert (bnxt.HWRM_VERSION_MAJOR, bnxt.HWRM_VERSION_MINOR, bnxt.HWRM_VERSION_UPDATE, bnxt.HWRM_VERSION_RSVD) == (1, 10, 3, 68)
  for inp in ("hwrm_func_qcaps_input", "hwrm_ring_alloc_input", "hwrm_port_phy_cfg_input"):  # common request header
    cls = getattr(bnxt, inp)
    assert [(f, getattr(cls, f).offset) for f in ("req_type", "cmpl_ring", "seq_id", "target_id", "resp_addr")] == \
      [("req_type", 0), ("cmpl_ring", 2), ("seq_id", 4), ("target_id", 6), ("resp_addr", 8)]
  assert (ctypes.sizeof(bnxt.hwrm_ver_get_output), ctypes.sizeof(bnxt.hwrm_func_qcaps_output)) == (176, 144)
  assert bnxt.hwrm_func_qcaps_output.port_id.offset == 10 and bnxt.hwrm_func_qcaps_output.mac_address.offset == 16
  assert ctypes.sizeof(bnxt.hwrm_func_qcfg_output) == 160 and bnxt.hwrm_func_qcfg_output.legacy_l2_db_size_kb.offset == 84
  assert ctypes.sizeof(bnxt.hwrm_ring_alloc_input) == 88 and bnxt.hwrm_ring_alloc_input.int_mode.offset == 76
  assert ctypes.sizeof(bnxt.hwrm_func_backing_store_qcaps_v2_output) == 56
  assert bnxt.hwrm_port_phy_cfg_input.lpbk.offset == 37


def test_hwrm_opcodes():
  assert (bnxt.HWRM_VER_GET, bnxt.HWRM_FUNC_QCAPS, bnxt.HWRM_RING_ALLOC) == (0x0, 0x15, 0x50)
  assert (bnxt.HWRM_FUNC_BACKING_STORE_CFG_V2, bnxt.HWRM_FUNC_BACKING_STORE_QCAPS_V2) == (0x1a3, 0x1a8)


def test_roce_cmdq_layouts():
  sizes = {"cmdq_create_qp": 104, "cmdq_modify_qp": 144, "cmdq_create_cq": 56, "cmdq_register_mr": 56,
           "cmdq_add_gid": 48, "cmdq_initialize_fw": 112, "creq_create_qp_resp": 16, "cmdq_init": 16}
  assert {n: ctypes.sizeof(getattr(bnxt, n)) for n in sizes} == sizes
  assert (bnxt.CMDQ_BASE_OPCODE_CREATE_QP, bnxt.CMDQ_BASE_OPCODE_INITIALIZE_FW) == (0x01, 0x80)
  assert bnxt.cmdq_modify_qp.qp_type.offset == 7 and bnxt.CMDQ_MODIFY_QP_QP_TYPE_RC == 0x2
  assert bnxt.SQ_RDMA_HDR_WQE_TYPE_WRITE_WQE == 0x4 and ctypes.sizeof(bnxt.sq_msn_search) == 8


def test_rcfw_and_doorbell_constants():
  from autogen import bnxt_re  # kernel-internal headers, constants only (bnxt_re qplib_rcfw.h)
  assert (bnxt_re.RCFW_COMM_BASE_OFFSET, bnxt_re.RCFW_PF_VF_COMM_PROD_OFFSET, bnxt_re.RCFW_COMM_TRIG_OFFSET) == (0x600, 0xc, 0x100)
  assert bnxt_re.RCFW_CMDQ_TRIG_VAL == 1 and bnxt_re.FIRMWARE_FIRST_FLAG == 31  # a bit number: the flag is 1 << 31
  assert bnxt_re.BNXT_QPLIB_DBR_VALID == 1 << 26 and bnxt_re.BNXT_QPLIB_DBR_EPOCH_SHIFT == 24
  assert (bnxt_re.BNXT_HWRM_TARGET, bnxt_re.BNXT_HWRM_NO_CMPL_RING) == (0xFFFF, -1)
