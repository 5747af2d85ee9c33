"""The emulated BCM57508 as a PCI function and its HWRM channel: identity, BAR decode, the request window, trigger and
response DMA (valid byte, sequence ids, error responses), the bring-up commands, backing store v2 and its checks, the
L2 receive path, PHY loopback and the state a NIC keeps across processes. Facts: kernel bnxt.c, bnxt_hwrm.c;
bnxt_hsi.h; emu/nic/bnxt/hwrm.py and backing.py."""
import pytest

from autogen import bnxt as bnxt_hsi
from drivers.system import list_models, open_model
from emu.nic.bnxt import ModelError
from emu.pci import DMAFault
from tests.emu.nic.bnxt_cmds import Bnxt, CommandFailed, Ring, RING


def test_identity_bars_and_listing(nic):
  pci = nic.pci
  assert (pci.vendor_id, pci.device_id, pci.read_config(0x0A, 2)) == (0x14E4, 0x1750, 0x0200)   # Ethernet controller
  assert (pci.bar_size(0), pci.bar_size(2)) == (64 << 10, 1 << 20)
  assert [m.bus for m in list_models("bnxt")] == ["mock-0"]
  assert nic.model.mac == bytes.fromhex("021018000000")


def test_ver_get_round_trip_echoes_the_sequence_and_ends_with_the_valid_byte(nic):
  out = nic.hwrm("ver_get", hwrm_intf_maj=1, hwrm_intf_min=10, hwrm_intf_upd=3)
  assert (out.hwrm_intf_maj_8b, out.hwrm_intf_min_8b, out.hwrm_intf_upd_8b) == (1, 10, 3)
  assert (out.chip_num, out.max_req_win_len, out.resp_len, out.valid) == (0x1750, 128, 176, 1)
  seq = nic.seq
  nic.hwrm("ver_get")
  assert nic.seq == seq + 1 and nic.resp.view[4:6].tobytes() == (seq + 1).to_bytes(2, "little")


def test_unknown_command_gets_cmd_not_supported_in_an_err_output(nic):
  nic.resp.view[:] = b"\xee" * 4096
  raw = bytes(bnxt_hsi.input(req_type=bnxt_hsi.HWRM_FUNC_VF_CFG, cmpl_ring=0xFFFF, seq_id=7, target_id=0xFFFF, resp_addr=nic.resp.bus_addrs[0]))
  for i in range(0, 16, 4): nic.bar0.write32(i, int.from_bytes(raw[i:i + 4], "little"))
  nic.bar0.write32(0x100, 1)
  out = bnxt_hsi.hwrm_err_output.from_buffer_copy(nic.resp.view)
  assert (out.error_code, out.req_type, out.seq_id, out.resp_len, out.valid) == (bnxt_hsi.HWRM_ERR_CODE_CMD_NOT_SUPPORTED, bnxt_hsi.HWRM_FUNC_VF_CFG,
                                                                                 7, 16, 1)
  assert nic.resp.view[16] == 0xEE                                  # nothing beyond the 16-byte response
  assert "not supported" in nic.model.log_lines[-1]


@pytest.mark.parametrize("name, fields, code", [
  ("func_qcaps", {"fid": 3}, bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS),                          # no VFs
  ("func_reset", {"func_reset_level": 3}, bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS),
  ("ver_get", {"cmpl_ring": 5}, bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS),                         # completion-ring delivery
  ("ver_get", {"target_id": 1}, bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS),
  ("port_phy_cfg", {"enables": bnxt_hsi.PORT_PHY_CFG_REQ_ENABLES_AUTO_MODE}, bnxt_hsi.HWRM_ERR_CODE_INVALID_ENABLES),
  ("port_phy_cfg", {"enables": bnxt_hsi.PORT_PHY_CFG_REQ_ENABLES_LPBK, "lpbk": 2}, bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS),
  ("func_drv_unrgtr", {}, bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED)])
def test_bad_fields_get_error_codes(nic, name, fields, code):
  assert nic.hwrm(name, check=False, **fields) == code


def test_bring_up_reports_what_a_driver_reads(nic):
  caps = nic.hwrm("func_qcaps", fid=0xFFFF)
  assert caps.flags & bnxt_hsi.FUNC_QCAPS_RESP_FLAGS_ROCE_V2_SUPPORTED and caps.flags_ext & bnxt_hsi.FUNC_QCAPS_RESP_FLAGS_EXT_BS_V2_REQUIRED
  assert bytes(caps.mac_address) == nic.model.mac and caps.port_id == 0
  assert nic.hwrm("func_qcfg", fid=0xFFFF).legacy_l2_db_size_kb == 64


def test_backing_store_types_chain_through_next_valid_type(nic):
  seen, t = [], 0
  while t != 0xFFFF:
    c = nic.hwrm("func_backing_store_qcaps_v2", type=t)
    seen.append((c.type, c.entry_size, c.instance_bit_map, c.ctx_init_value, c.ctx_init_offset))
    t = c.next_valid_type
  assert [s[0] for s in seen] == [0, 1, 2, 3, 4, 5, 6, 0xE, 0xF]
  assert seen[0] == (0, 448, 0, 0xFF, 4) and seen[6][2] == 0xFF            # QP init at byte 16; FP_TQM per CoS queue


def test_resources_need_the_committed_backing_store(nic):
  nic.hwrm("func_reset")
  ring = Ring(nic, RING, 16)
  assert nic.hwrm("ring_alloc", check=False, ring_type=bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, page_tbl_addr=ring.base, page_size=12,
                  length=16, int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX) == bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED
  with pytest.raises(CommandFailed) as e: nic.backing_store(skip=bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_MRAV)
  assert e.value.code == bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS and "MRAV[0]" in nic.model.log_lines[-1]
  nic.hwrm("func_reset")
  nic.backing_store()
  assert nic.ring_alloc(ring, bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX) == 0
  assert nic.hwrm("func_backing_store_cfg_v2", check=False, type=0, entry_size=448, num_entries=32) == bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED


@pytest.mark.parametrize("field, value, match", [("entry_size", 64, "entry_size 64"), ("num_entries", 1 << 20, "outside"),
                                                 ("page_size_pbl_level", 0x71, "page size"), ("instance", 3, "instance_bit_map"),
                                                 ("flags", 0x4, "BS_EXTEND")])
def test_backing_store_cfg_checks_its_fields(nic, field, value, match):
  mem = nic.pci.alloc_dma(32 * 448)
  level, base = nic.pbl(mem)
  fields = dict(type=0, instance=0, entry_size=448, num_entries=32, page_dir=base, page_size_pbl_level=level, flags=0)
  fields[field] = value
  assert nic.hwrm("func_backing_store_cfg_v2", check=False, **fields) != 0
  assert match in nic.model.log_lines[-1]


def test_backing_store_pbl_entries_must_be_valid(nic):
  mem = nic.pci.alloc_dma(32 * 448)
  level, base = nic.pbl(mem)
  assert level == 1
  table = next(m for m in nic.pci._dma if m.bus_addrs[0] == base)
  table.view[8] &= ~1                                              # PTE 1 without its VALID bit
  assert nic.hwrm("func_backing_store_cfg_v2", check=False, type=0, entry_size=448, num_entries=32, page_dir=base,
                  page_size_pbl_level=1) == bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS
  assert "PTE 1" in nic.model.log_lines[-1] and "VALID" in nic.model.log_lines[-1]


def test_context_pages_must_be_present_when_used(nic):
  nic.bring_up(rcfw=False, l2=False)
  nic.hwrm("func_reset")
  mems = nic.backing_store(init=False)                              # ctx_init_value not written
  ring = Ring(nic, RING, 16)
  stats = nic.pci.alloc_dma(4096)
  assert nic.hwrm("stat_ctx_alloc", stats_dma_addr=stats.bus_addrs[0], stats_dma_length=176).stat_ctx_id == 0   # STAT needs no init
  nic.ring_alloc(ring, bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX)
  vnic_pages = mems[bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_VNIC][0]
  nic.pci.free_dma(vnic_pages)                                      # the VNIC context page is gone
  assert nic.hwrm("vnic_alloc", check=False) == bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS
  assert "backing page is gone" in nic.model.log_lines[-1]


def test_dma_needs_bus_mastering(nic):
  nic.pci.write_config(0x04, 2, nic.pci.read_config(0x04, 2) & ~0x4)
  with pytest.raises(DMAFault, match="bus mastering"): nic.hwrm("ver_get")


@pytest.mark.parametrize("offset, size", [(0x200, 4), (0x2, 4), (0x0, 1), (0x600, 8)])
def test_bar0_decodes_only_its_registers(nic, offset, size):
  with pytest.raises((ModelError, ValueError)): nic.bar0.write(offset, size, 0)


def test_hwrm_trigger_takes_one(nic):
  with pytest.raises(ModelError, match="write 1"): nic.bar0.write32(0x100, 2)


def test_l2_filter_opens_roce_ingress(nic):
  nic.bring_up(rcfw=False, l2=False)
  assert nic.model.port.accept_macs == set()
  nic.open_l2()
  assert nic.model.port.accept_macs == {nic.mac}
  assert nic.hwrm("vnic_free", check=False, vnic_id=nic.vnic) == bnxt_hsi.HWRM_ERR_CODE_RESOURCE_LOCKED
  nic.hwrm("cfa_l2_filter_free", l2_filter_id=nic.filter)
  assert nic.model.port.accept_macs == set()


def test_l2_rings_name_an_nq_and_rings_in_use_stay(nic):
  nic.bring_up(rcfw=False, l2=False)
  nq = nic.ring_alloc(Ring(nic, RING, 16), bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_POLL)
  cmpl = Ring(nic, RING, 16)
  assert nic.hwrm("ring_alloc", check=False, ring_type=bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL, page_tbl_addr=cmpl.base, page_size=12,
                  length=16) == bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS               # no NQ named
  cid = nic.ring_alloc(cmpl, bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL, enables=bnxt_hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID, nq_ring_id=nq)
  assert nic.hwrm("ring_free", check=False, ring_type=bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, ring_id=nq) == bnxt_hsi.HWRM_ERR_CODE_RESOURCE_LOCKED
  nic.hwrm("ring_free", ring_type=bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL, ring_id=cid)
  nic.hwrm("ring_free", ring_type=bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, ring_id=nq)


def test_phy_loopback_persists_across_opens_and_flr_clears_it(nic):
  nic.hwrm("port_phy_cfg", enables=bnxt_hsi.PORT_PHY_CFG_REQ_ENABLES_LPBK, lpbk=bnxt_hsi.PORT_PHY_CFG_REQ_LPBK_LOCAL)
  assert nic.hwrm("port_phy_qcfg").lpbk == bnxt_hsi.PORT_PHY_QCFG_RESP_LPBK_LOCAL and nic.model.port.loopback
  nic.pci.close()
  again = Bnxt(open_model("bnxt", 0))
  try:
    assert again.hwrm("port_phy_qcfg").lpbk == bnxt_hsi.PORT_PHY_QCFG_RESP_LPBK_LOCAL and again.model.port.loopback
    again.pci.reset()
    again.pci.enable_bus_master()
    assert again.hwrm("port_phy_qcfg").lpbk == bnxt_hsi.PORT_PHY_QCFG_RESP_LPBK_NONE and not again.model.port.loopback
  finally: again.pci.close()
  nic.pci = again.pci                                               # the fixture closes it again (harmless)


def test_a_driver_that_died_without_reset_leaves_the_function_to_reset(nic):
  nic.bring_up(rcfw=False, l2=False)
  nic.pci.close()                                                   # as if the process died: no FUNC_RESET, no UNRGTR
  again = Bnxt(open_model("bnxt", 0))
  try:
    assert again.hwrm("func_qcaps", fid=0xFFFF).port_id == 0        # queries work
    assert again.hwrm("func_drv_rgtr", check=False) == bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED
    again.hwrm("func_reset")
    again.hwrm("func_drv_rgtr")
  finally: again.pci.close()
  nic.pci = again.pci


def test_the_device_lock_is_held_while_open(nic):
  from drivers.system import DeviceBusyError
  with pytest.raises(DeviceBusyError): open_model("bnxt", 0)
