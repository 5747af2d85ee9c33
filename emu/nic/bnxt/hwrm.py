"""The ChiMP firmware's HWRM interface (bnxt_hsi.h structures and codes; kernel bnxt_hwrm.c for the channel; reference
rdma.md 5.3-5.7 and 8.2).

Channel: the driver writes the request (up to 128 bytes, HWRM_MAX_REQ_LEN, as 32-bit stores) into the BAR0 window at
0x000-0x07F and 1 to the trigger at 0x100. The firmware then reads the header (req_type, cmpl_ring, seq_id, target_id,
resp_addr), runs the command and DMAs the response to resp_addr: the output structure with error_code 0, req_type and
seq_id echoed, resp_len = its size, its last byte (`valid`) 1 and written last. On an error the response is the 16-byte
hwrm_err_output with the HWRM_ERR_CODE_* and resp_len 16 (its `valid` is byte 15); the reason is logged (nic.log).
cmpl_ring must be 0xffff (responses by DMA only: completion-ring delivery is not modelled) and target_id 0xffff (this
function: no VFs); a request whose structure does not fit the window would need the short-command format, which
VER_GET does not offer (dev_caps_cfg 0). Commands run synchronously inside the trigger store, so the response is there
when the store returns; a resp_addr outside the driver's DMA buffers raises the DMA fault from that store.

Commands (anything else: HWRM_ERR_CODE_CMD_NOT_SUPPORTED, 0xffff):
  VER_GET                    interface 1.10.3.68, chip 0x1750 (BCM57508), max_req_win_len 128
  FUNC_RESET                 frees everything the function holds (rings, stat contexts, vnics, filters, the backing
                             store, RCFW state, QPs, CQs, MRs, GIDs); PHY loopback (a port setting) stays
  FUNC_QCAPS / FUNC_QCFG     fid 0xffff only; MAC, port 0, ROCE_V2_SUPPORTED, BS_V2_SUPPORTED|REQUIRED; QCFG:
                             legacy_l2_db_size_kb 64 (RoCE doorbell pages start at BAR2 + 64 KiB)
  FUNC_DRV_RGTR / _UNRGTR    registration (its OS/version/forwarding fields are not acted on: no async events are
                             forwarded); UNRGTR needs a registered driver and frees what FUNC_RESET frees
  FUNC_BACKING_STORE_QCAPS_V2 / _CFG_V2   backing.py
  RING_ALLOC / RING_FREE     NQ, L2_CMPL, RX, TX rings: page_size 12 (4 KiB), page_tbl_depth 0-2 with a PBL covering
                             length entries of 16 bytes; L2_CMPL and RX rings name an existing NQ (NQ_RING_ID_VALID),
                             RX rings a buffer size (RX_BUF_SIZE_VALID); ring ids are one id space; a ring still used
                             (by the CMDQ, a CQ, a vnic, or as an L2 ring's NQ) cannot be freed; an NQ is int_mode
                             MSIX (it raises MSI-X vector logical_id when armed: rings.py) or POLL
  STAT_CTX_ALLOC / _FREE     stats_dma_addr must be mapped for stats_dma_length bytes (the model writes no stats)
  VNIC_ALLOC / _FREE / _CFG  CFG enables MRU, DEFAULT_RX_RING_ID, DEFAULT_CMPL_RING_ID (others refused), rings of those types
  CFA_L2_FILTER_ALLOC / _FREE  RX path, exact match (mask ff:ff:ff:ff:ff:ff), dst_id a configured vnic: frames to that
                             MAC are accepted (RoCE ingress needs it: without a filter every frame is dropped)
  PORT_PHY_CFG               LPBK only (NONE or LOCAL; other enables and flags are not modelled and refused)
  PORT_PHY_QCFG              link up at 200G, the loopback mode
Allocations need the backing store committed. After a process that held the device died without FUNC_RESET or
FUNC_DRV_UNRGTR, the next one must FUNC_RESET first: other commands (but VER_GET, FUNC_QCAPS, FUNC_QCFG, PORT_PHY_QCFG)
get HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED until it does.
"""
from __future__ import annotations
import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autogen import bnxt as bnxt_hsi
from emu.nic.bnxt.backing import BackingError, STAT, VNIC
from emu.nic.bnxt.pbl import HostRing, PBLError, walk
from emu.nic.bnxt.rings import EventRing, L2Ring
from emu.pci import DMAFault

if TYPE_CHECKING: from emu.nic.bnxt.bcm57508 import BCM57508

WINDOW, TRIGGER = 0x000, 0x100           # BNXT_GRCPF_REG_CHIMP_COMM, _TRIGGER (bnxt.h)
MAX_REQ_LEN = 128                      # HWRM_MAX_REQ_LEN
NO_CMPL_RING, SELF = 0xFFFF, 0xFFFF    # BNXT_HWRM_NO_CMPL_RING (u16), BNXT_HWRM_TARGET
CHIP_NUM = 0x1750                      # CHIP_NUM_57508
L2_DB_SIZE_KB = 64
RING_ENTRY = 16                        # every L2/NQ ring entry the model sees is 16 bytes (tx/rx BDs, cmpl, nq_base)
FW_VERSION = (230, 0, 168, 0)


class HWRMError(Exception):
  def __init__(self, code: int, msg: str):
    super().__init__(msg)
    self.code = code


@dataclass
class Vnic:
  id: int
  mru: int = 0
  rx_ring: int | None = None
  cmpl_ring: int | None = None


@dataclass
class Filter:
  id: int
  mac: bytes
  vnic: int


def _name(req_type: int) -> str:
  return next((n[5:] for n, v in vars(bnxt_hsi).items() if n.startswith("HWRM_") and type(v) is int and v == req_type
               and not n.startswith(("HWRM_ERR", "HWRM_VERSION", "HWRM_NA_", "HWRM_MAX", "HWRM_DEF", "HWRM_RESP"))), f"{req_type:#x}")


class HWRM:
  """HWRM requests and the L2 resources they allocate; `nic` is the BCM57508 function."""
  STALE_OK = (bnxt_hsi.HWRM_VER_GET, bnxt_hsi.HWRM_FUNC_RESET, bnxt_hsi.HWRM_FUNC_QCAPS, bnxt_hsi.HWRM_FUNC_QCFG, bnxt_hsi.HWRM_PORT_PHY_QCFG)

  def __init__(self, nic: BCM57508):
    self.nic = nic
    self.window = bytearray(MAX_REQ_LEN)
    self.handlers = {
      bnxt_hsi.HWRM_VER_GET: self.ver_get, bnxt_hsi.HWRM_FUNC_RESET: self.func_reset, bnxt_hsi.HWRM_FUNC_QCAPS: self.func_qcaps,
      bnxt_hsi.HWRM_FUNC_QCFG: self.func_qcfg, bnxt_hsi.HWRM_FUNC_DRV_RGTR: self.func_drv_rgtr, bnxt_hsi.HWRM_FUNC_DRV_UNRGTR: self.func_drv_unrgtr,
      bnxt_hsi.HWRM_FUNC_BACKING_STORE_QCAPS_V2: self.backing_store_qcaps_v2, bnxt_hsi.HWRM_FUNC_BACKING_STORE_CFG_V2: self.backing_store_cfg_v2,
      bnxt_hsi.HWRM_RING_ALLOC: self.ring_alloc, bnxt_hsi.HWRM_RING_FREE: self.ring_free, bnxt_hsi.HWRM_STAT_CTX_ALLOC: self.stat_ctx_alloc,
      bnxt_hsi.HWRM_STAT_CTX_FREE: self.stat_ctx_free, bnxt_hsi.HWRM_VNIC_ALLOC: self.vnic_alloc, bnxt_hsi.HWRM_VNIC_FREE: self.vnic_free,
      bnxt_hsi.HWRM_VNIC_CFG: self.vnic_cfg, bnxt_hsi.HWRM_CFA_L2_FILTER_ALLOC: self.cfa_l2_filter_alloc,
      bnxt_hsi.HWRM_CFA_L2_FILTER_FREE: self.cfa_l2_filter_free, bnxt_hsi.HWRM_PORT_PHY_CFG: self.port_phy_cfg,
      bnxt_hsi.HWRM_PORT_PHY_QCFG: self.port_phy_qcfg}
    self.clear()

  def clear(self) -> None:
    self.rings: dict[int, L2Ring] = {}
    self.stat_ctxs: dict[int, tuple[int, int]] = {}
    self.vnics: dict[int, Vnic] = {}
    self.filters: dict[int, Filter] = {}
    self._next = {"ring": 0, "stat": 0, "vnic": 0, "filter": 1}
    self.nic.port.accept_macs.clear()

  def _id(self, kind: str) -> int:
    self._next[kind] += 1
    return self._next[kind] - 1

  # --- the channel
  def window_write(self, offset: int, value: int) -> None:
    self.window[offset:offset + 4] = value.to_bytes(4, "little")

  def window_read(self, offset: int) -> int: return int.from_bytes(self.window[offset:offset + 4], "little")

  def trigger(self) -> None:
    hdr = bnxt_hsi.input.from_buffer_copy(self.window)
    name = _name(hdr.req_type)
    try:
      if hdr.cmpl_ring != NO_CMPL_RING:
        raise HWRMError(bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS, f"cmpl_ring {hdr.cmpl_ring:#x}: only 0xffff (response by DMA) is modelled")
      if hdr.target_id != SELF: raise HWRMError(bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS,
                                                f"target_id {hdr.target_id:#x}: this function is 0xffff (no VFs)")
      if (fn := self.handlers.get(hdr.req_type)) is None:
        raise HWRMError(bnxt_hsi.HWRM_ERR_CODE_CMD_NOT_SUPPORTED, "command not supported")
      if self.nic.stale and hdr.req_type not in self.STALE_OK:
        raise HWRMError(bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED, "a previous driver left the function without FUNC_RESET: reset it first")
      cls = getattr(bnxt_hsi, f"hwrm_{name.lower()}_input")
      if ctypes.sizeof(cls) > MAX_REQ_LEN:
        raise HWRMError(bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS, f"{ctypes.sizeof(cls)}-byte request needs the short-command format (not offered)")
      out = fn(cls.from_buffer_copy(self.window[:ctypes.sizeof(cls)]))
    except HWRMError as e:
      self.nic.log(f"HWRM {name} (seq {hdr.seq_id}): error {e.code:#x}: {e}")
      out = bnxt_hsi.hwrm_err_output(error_code=e.code)
    out.req_type, out.seq_id, out.resp_len = hdr.req_type, hdr.seq_id, ctypes.sizeof(out)
    raw = bytes(out)
    raw = raw[:-1] + b"\x01"                        # `valid` (HWRM_RESP_VALID_KEY), the last byte, DMAed last
    self.nic.dma.write(hdr.resp_addr, raw[:-1])
    self.nic.dma.write(hdr.resp_addr + len(raw) - 1, raw[-1:])

  # --- helpers
  @staticmethod
  def _fail(msg: str, code: int = bnxt_hsi.HWRM_ERR_CODE_INVALID_PARAMS) -> HWRMError: return HWRMError(code, msg)

  def _allocating(self) -> None:
    if not self.nic.backing.done:
      raise self._fail("resources need the backing store committed first (FUNC_BACKING_STORE_CFG_V2 with BS_CFG_ALL_DONE)",
                       bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED)

  def _touch(self, type_: int, index: int) -> None:
    try: self.nic.backing.touch(type_, index)
    except BackingError as e: raise HWRMError(e.code, str(e)) from None

  def _own_fid(self, fid: int) -> None:
    if fid != SELF: raise self._fail(f"fid {fid:#x}: only this function (0xffff) can be queried (no VFs)")

  # --- function
  def ver_get(self, req):
    out = bnxt_hsi.hwrm_ver_get_output(hwrm_intf_maj_8b=bnxt_hsi.HWRM_VERSION_MAJOR, hwrm_intf_min_8b=bnxt_hsi.HWRM_VERSION_MINOR,
                                       hwrm_intf_upd_8b=bnxt_hsi.HWRM_VERSION_UPDATE, hwrm_intf_rsvd_8b=bnxt_hsi.HWRM_VERSION_RSVD,
                                       chip_num=CHIP_NUM, chip_rev=1, max_req_win_len=MAX_REQ_LEN, max_resp_len=4096,
                                       def_req_timeout=500, max_req_timeout=5000, always_1=1,
                                       hwrm_intf_major=bnxt_hsi.HWRM_VERSION_MAJOR, hwrm_intf_minor=bnxt_hsi.HWRM_VERSION_MINOR,
                                       hwrm_intf_build=bnxt_hsi.HWRM_VERSION_UPDATE, hwrm_intf_patch=bnxt_hsi.HWRM_VERSION_RSVD)
    (out.hwrm_fw_maj_8b, out.hwrm_fw_min_8b, out.hwrm_fw_bld_8b, out.hwrm_fw_rsvd_8b) = FW_VERSION
    (out.roce_fw_maj_8b, out.roce_fw_min_8b, out.roce_fw_bld_8b, out.roce_fw_rsvd_8b) = FW_VERSION
    (out.hwrm_fw_major, out.hwrm_fw_minor, out.hwrm_fw_build, out.hwrm_fw_patch) = FW_VERSION
    (out.roce_fw_major, out.roce_fw_minor, out.roce_fw_build, out.roce_fw_patch) = FW_VERSION
    out.hwrm_fw_name, out.roce_fw_name, out.active_pkg_name = b"hcq-model", b"hcq-model", b"hcq-model"
    return out

  def func_reset(self, req):
    if req.enables & bnxt_hsi.FUNC_RESET_REQ_ENABLES_VF_ID_VALID or req.func_reset_level not in (
        bnxt_hsi.FUNC_RESET_REQ_FUNC_RESET_LEVEL_RESETALL, bnxt_hsi.FUNC_RESET_REQ_FUNC_RESET_LEVEL_RESETME):
      raise self._fail(f"func_reset_level {req.func_reset_level} / vf_id: this function has no VFs")
    self.nic.function_reset()
    return bnxt_hsi.hwrm_func_reset_output()

  def func_qcaps(self, req):
    self._own_fid(req.fid)
    out = bnxt_hsi.hwrm_func_qcaps_output(fid=0, port_id=0, flags=bnxt_hsi.FUNC_QCAPS_RESP_FLAGS_ROCE_V2_SUPPORTED,
                                          flags_ext=bnxt_hsi.FUNC_QCAPS_RESP_FLAGS_EXT_BS_V2_SUPPORTED |
                                          bnxt_hsi.FUNC_QCAPS_RESP_FLAGS_EXT_BS_V2_REQUIRED,
                                          max_rsscos_ctx=16, max_cmpl_rings=128, max_tx_rings=128, max_rx_rings=128, max_l2_ctxs=16,
                                          max_vnics=16, max_stat_ctx=64, max_hw_ring_grps=128, max_tso_segs=64)
    out.mac_address[:] = self.nic.mac
    return out

  def func_qcfg(self, req):
    self._own_fid(req.fid)
    out = bnxt_hsi.hwrm_func_qcfg_output(fid=0, port_id=0, mru=9600, admin_mtu=9600,
                                         alloc_cmpl_rings=self._count(bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL),
                                         alloc_rx_rings=self._count(bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_RX),
                                         alloc_tx_rings=self._count(bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_TX),
                                         alloc_vnics=len(self.vnics), alloc_stat_ctx=len(self.stat_ctxs), legacy_l2_db_size_kb=L2_DB_SIZE_KB,
                                         l2_doorbell_bar_size_kb=L2_DB_SIZE_KB, db_page_size=bnxt_hsi.FUNC_QCFG_RESP_DB_PAGE_SIZE_4KB, always_1=1)
    out.mac_address[:] = self.nic.mac
    return out

  def _count(self, ring_type: int) -> int: return sum(r.type == ring_type for r in self.rings.values())

  def func_drv_rgtr(self, req):
    self.nic.state.registered = 1
    self.nic.state.needs_reset = 1
    self.nic.save()
    return bnxt_hsi.hwrm_func_drv_rgtr_output()

  def func_drv_unrgtr(self, req):
    if not self.nic.state.registered: raise self._fail("no driver is registered", bnxt_hsi.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED)
    self.nic.function_reset()
    return bnxt_hsi.hwrm_func_drv_unrgtr_output()

  def backing_store_qcaps_v2(self, req):
    t, nxt = self.nic.backing.qcaps(req.type)
    out = bnxt_hsi.hwrm_func_backing_store_qcaps_v2_output(type=req.type, next_valid_type=nxt)
    if t is not None:
      out.entry_size, out.instance_bit_map = t.entry_size, t.instances
      out.flags = bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_TYPE_VALID | \
        (bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_ENABLE_CTX_KIND_INIT if t.init_value else 0)
      out.ctx_init_value, out.ctx_init_offset = t.init_value, t.init_offset
      out.min_num_entries, out.max_num_entries = t.min_entries, t.max_entries
    return out

  def backing_store_cfg_v2(self, req):
    try:
      self.nic.backing.configure(req.type, req.instance, req.flags, req.page_dir, req.num_entries, req.entry_size,
                                 req.page_size_pbl_level, req.subtype_valid_cnt)
    except BackingError as e: raise HWRMError(e.code, str(e)) from None
    self.nic.state.needs_reset = 1
    self.nic.save()
    return bnxt_hsi.hwrm_func_backing_store_cfg_v2_output()

  # --- rings
  def ring_alloc(self, req):
    self._allocating()
    types = {bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ: "NQ", bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL: "L2_CMPL",
             bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_RX: "RX", bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_TX: "TX"}
    if (kind := types.get(req.ring_type)) is None: raise self._fail(f"ring_type {req.ring_type}: not modelled (NQ, L2_CMPL, RX, TX are)")
    allowed = {"NQ": 0, "L2_CMPL": bnxt_hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID,
               "RX": bnxt_hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID | bnxt_hsi.RING_ALLOC_REQ_ENABLES_RX_BUF_SIZE_VALID,
               "TX": bnxt_hsi.RING_ALLOC_REQ_ENABLES_STAT_CTX_ID_VALID}[kind]
    if req.enables & ~allowed:
      raise self._fail(f"{kind} ring enables {req.enables:#x}: only {allowed:#x} are modelled", bnxt_hsi.HWRM_ERR_CODE_INVALID_ENABLES)
    if req.page_size != 12: raise self._fail(f"page_size {req.page_size}: rings use 4 KiB pages (12)")
    if not 1 <= req.length <= 1 << 20: raise self._fail(f"length {req.length}")
    nq = None
    if kind in ("L2_CMPL", "RX"):
      if not req.enables & bnxt_hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID: raise self._fail(f"a {kind} ring needs an NQ (NQ_RING_ID_VALID)")
      if (nq := self.rings.get(req.nq_ring_id)) is None or nq.type != bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ:
        raise self._fail(f"nq_ring_id {req.nq_ring_id} is not an NQ ring")
    if kind == "RX" and not (req.enables & bnxt_hsi.RING_ALLOC_REQ_ENABLES_RX_BUF_SIZE_VALID and req.rx_buf_size):
      raise self._fail("an RX ring needs its buffer size (RX_BUF_SIZE_VALID, rx_buf_size)")
    if kind == "TX" and (req.enables & bnxt_hsi.RING_ALLOC_REQ_ENABLES_STAT_CTX_ID_VALID) and req.stat_ctx_id not in self.stat_ctxs:
      raise self._fail(f"stat_ctx_id {req.stat_ctx_id} is not allocated")
    if kind == "NQ" and req.int_mode not in (bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX, bnxt_hsi.RING_ALLOC_REQ_INT_MODE_POLL):
      raise self._fail(f"int_mode {req.int_mode}: an NQ is MSIX or POLL")
    rid = self._id("ring")
    try:
      pages = walk(self.nic.dma, req.page_tbl_addr, req.page_tbl_depth, -(-req.length * RING_ENTRY // 4096), 4096,
                   ring=None, what=f"{kind} ring")
      ring = HostRing(self.nic.dma, pages, 4096, req.length, RING_ENTRY, f"{kind} ring {rid}")
    except (PBLError, DMAFault) as e: raise self._fail(str(e)) from None
    r = self.rings[rid] = L2Ring(rid, req.ring_type, kind, ring, nq.id if nq else None)
    if kind == "NQ":
      vector = req.logical_id
      r.events = EventRing(ring, 8, (lambda: self.nic.signal_msix(vector)) if req.int_mode == bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX else None)
    if nq: nq.users.add(f"{kind} ring {rid}")
    return bnxt_hsi.hwrm_ring_alloc_output(ring_id=rid, logical_ring_id=req.logical_id)

  def ring_free(self, req):
    if (r := self.rings.get(req.ring_id)) is None or r.type != req.ring_type:
      raise self._fail(f"no ring {req.ring_id} of type {req.ring_type}")
    if r.users: raise self._fail(f"ring {r.id} is still used by {', '.join(sorted(r.users))}", bnxt_hsi.HWRM_ERR_CODE_RESOURCE_LOCKED)
    if r.nq_id is not None: self.rings[r.nq_id].users.discard(f"{r.kind} ring {r.id}")
    del self.rings[r.id]
    return bnxt_hsi.hwrm_ring_free_output()

  def stat_ctx_alloc(self, req):
    self._allocating()
    if not req.stats_dma_length: raise self._fail("stats_dma_length 0")
    try: self.nic.dma.read(req.stats_dma_addr, req.stats_dma_length)
    except DMAFault as e: raise self._fail(f"stats buffer: {e}") from None
    sid = self._id("stat")
    self._touch(STAT, sid)
    self.stat_ctxs[sid] = (req.stats_dma_addr, req.stats_dma_length)
    return bnxt_hsi.hwrm_stat_ctx_alloc_output(stat_ctx_id=sid)

  def stat_ctx_free(self, req):
    if self.stat_ctxs.pop(req.stat_ctx_id, None) is None: raise self._fail(f"no stat context {req.stat_ctx_id}")
    return bnxt_hsi.hwrm_stat_ctx_free_output()

  # --- vnics and filters
  def vnic_alloc(self, req):
    self._allocating()
    if req.flags: raise self._fail(f"vnic flags {req.flags:#x}: not modelled", bnxt_hsi.HWRM_ERR_CODE_INVALID_FLAGS)
    vid = self._id("vnic")
    self._touch(VNIC, vid)
    self.vnics[vid] = Vnic(vid)
    return bnxt_hsi.hwrm_vnic_alloc_output(vnic_id=vid)

  def vnic_free(self, req):
    if (v := self.vnics.get(req.vnic_id)) is None: raise self._fail(f"no vnic {req.vnic_id}")
    if any(f.vnic == v.id for f in self.filters.values()): raise self._fail(f"vnic {v.id} is a filter's destination",
                                                                            bnxt_hsi.HWRM_ERR_CODE_RESOURCE_LOCKED)
    for rid in (v.rx_ring, v.cmpl_ring):
      if rid in self.rings: self.rings[rid].users.discard(f"vnic {v.id}")
    del self.vnics[v.id]
    return bnxt_hsi.hwrm_vnic_free_output()

  def vnic_cfg(self, req):
    allowed = (bnxt_hsi.VNIC_CFG_REQ_ENABLES_MRU | bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID |
               bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID)
    if req.enables & ~allowed:
      raise self._fail(f"vnic_cfg enables {req.enables:#x}: only MRU and the default rings are modelled", bnxt_hsi.HWRM_ERR_CODE_INVALID_ENABLES)
    if req.flags: raise self._fail(f"vnic_cfg flags {req.flags:#x}: not modelled", bnxt_hsi.HWRM_ERR_CODE_INVALID_FLAGS)
    if (v := self.vnics.get(req.vnic_id)) is None: raise self._fail(f"no vnic {req.vnic_id}")
    for bit, field_, ring_type in ((bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID, "default_rx_ring_id", bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_RX),
                                   (bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID, "default_cmpl_ring_id",
                                    bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL)):
      if req.enables & bit and ((r := self.rings.get(getattr(req, field_))) is None or r.type != ring_type):
        raise self._fail(f"{field_} {getattr(req, field_)} is not a ring of type {ring_type}")
    if req.enables & bnxt_hsi.VNIC_CFG_REQ_ENABLES_MRU:
      if not 64 <= req.mru <= 9600: raise self._fail(f"mru {req.mru}")
      v.mru = req.mru
    if req.enables & bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID: v.rx_ring = self._use(v, v.rx_ring, req.default_rx_ring_id)
    if req.enables & bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID: v.cmpl_ring = self._use(v, v.cmpl_ring, req.default_cmpl_ring_id)
    self._update_macs()
    return bnxt_hsi.hwrm_vnic_cfg_output()

  def _use(self, v: Vnic, old: int | None, new: int) -> int:
    if old in self.rings: self.rings[old].users.discard(f"vnic {v.id}")
    self.rings[new].users.add(f"vnic {v.id}")
    return new

  def cfa_l2_filter_alloc(self, req):
    self._allocating()
    need = (bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR | bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK |
            bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID)
    if req.enables != need:
      raise self._fail(f"filter enables {req.enables:#x}: the model matches one MAC exactly (enables {need:#x})",
                       bnxt_hsi.HWRM_ERR_CODE_INVALID_ENABLES)
    if req.flags != bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX:
      raise self._fail(f"filter flags {req.flags:#x}: only PATH_RX is modelled", bnxt_hsi.HWRM_ERR_CODE_INVALID_FLAGS)
    if bytes(req.l2_addr_mask) != b"\xff" * 6: raise self._fail(f"l2_addr_mask {bytes(req.l2_addr_mask).hex(':')}: only exact matches are modelled")
    if req.dst_id not in self.vnics: raise self._fail(f"dst_id {req.dst_id} is not a vnic")
    fid = self._id("filter")
    self.filters[fid] = Filter(fid, bytes(req.l2_addr), req.dst_id)
    self._update_macs()
    return bnxt_hsi.hwrm_cfa_l2_filter_alloc_output(l2_filter_id=fid, flow_id=fid)

  def cfa_l2_filter_free(self, req):
    if self.filters.pop(req.l2_filter_id, None) is None: raise self._fail(f"no L2 filter {req.l2_filter_id:#x}")
    self._update_macs()
    return bnxt_hsi.hwrm_cfa_l2_filter_free_output()

  def _update_macs(self) -> None:
    """The MACs RoCE ingress accepts: those of RX filters whose vnic has its default rings."""
    macs = {f.mac for f in self.filters.values() if (v := self.vnics.get(f.vnic)) and v.rx_ring is not None and v.cmpl_ring is not None}
    self.nic.port.accept_macs.clear()
    self.nic.port.accept_macs.update(macs)

  # --- port
  def port_phy_cfg(self, req):
    if req.port_id != 0: raise self._fail(f"port_id {req.port_id}: the function has port 0")
    if req.enables & ~bnxt_hsi.PORT_PHY_CFG_REQ_ENABLES_LPBK or req.flags:
      raise self._fail(f"enables {req.enables:#x} flags {req.flags:#x}: only LPBK is modelled", bnxt_hsi.HWRM_ERR_CODE_INVALID_ENABLES)
    if req.enables & bnxt_hsi.PORT_PHY_CFG_REQ_ENABLES_LPBK:
      if req.lpbk not in (bnxt_hsi.PORT_PHY_CFG_REQ_LPBK_NONE, bnxt_hsi.PORT_PHY_CFG_REQ_LPBK_LOCAL):
        raise self._fail(f"lpbk {req.lpbk}: NONE and LOCAL are modelled")
      self.nic.set_loopback(req.lpbk)
    return bnxt_hsi.hwrm_port_phy_cfg_output()

  def port_phy_qcfg(self, req):
    if req.port_id != 0: raise self._fail(f"port_id {req.port_id}: the function has port 0")
    return bnxt_hsi.hwrm_port_phy_qcfg_output(link=bnxt_hsi.PORT_PHY_QCFG_RESP_LINK_LINK, link_speed=bnxt_hsi.PORT_PHY_QCFG_RESP_LINK_SPEED_200GB,
                                              duplex_cfg=1, duplex_state=1, lpbk=self.nic.state.lpbk)
