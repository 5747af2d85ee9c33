"""The HCA's life cycle and function-wide objects (mlx5_ifc.h; kernel mlx5_core main.c mlx5_function_setup):
ENABLE_HCA -> QUERY_ISSI / SET_ISSI (1) -> boot pages -> ACCESS_REG HOST_ENDIANNESS -> QUERY_HCA_CAP / SET_HCA_CAP (general, RoCE) -> init pages ->
INIT_HCA -> ... -> TEARDOWN_HCA -> page reclaim -> DISABLE_HCA. Out of order is BAD_SYS_STATE_ERR.

- ENABLE_HCA: function_id 0; fails while a previous driver left the HCA enabled (the state file says so): reset the
  function (FLR) first. DISABLE_HCA needs every page back (pages.py).
- SET_ISSI: 1 only (the ISSI 0 layouts are not modelled); INIT_HCA needs it, and the host's endianness set through
  ACCESS_REG (register HOST_ENDIANNESS, little-endian; no other register is modelled).
- QUERY_HCA_CAP op_mod = type << 1 | current: types GENERAL and ROCE; SET_HCA_CAP (before INIT_HCA, op_mod = type << 1):
  every capability field must be the maximum's except the writable ones, which must not exceed it (WRITABLE below).
- INIT_HCA needs the boot and init pages. TEARDOWN_HCA (graceful or force close) destroys every object the function
  holds (QPs, CQs, EQs, MKEYs, PDs, UARs, RoCE addresses), after which all pages can be reclaimed.
- ALLOC_UAR / DEALLOC_UAR (index 1..MAX_UARS: BAR0 page n), ALLOC_PD / DEALLOC_PD; neither goes while an object uses it.
- QUERY_NIC_VPORT_CONTEXT (vport 0): permanent_address (the MAC), roce_en, the local-loopback disables, mtu.
  MODIFY_NIC_VPORT_CONTEXT: field_select roce_en, disable_uc_local_lb, disable_mc_local_lb only. Unicast local loopback
  (on unless disabled) turns frames to one of the port's own GIDs back into the port: two QPs of one NIC talk.
- SET_ROCE_ADDRESS (vhca_port_num 1, index < roce_address_table_size): RoCE version 2 only, roce_l3_type matching the
  GID (IPv4-mapped or not), no VLAN; the GID is published on the wire; an all-zero GID clears the entry.
Not modelled: registers other than HOST_ENDIANNESS, other vports, the health buffer, ISSI 0.
"""
from __future__ import annotations
from typing import TYPE_CHECKING

from autogen import mlx5 as mlx5_ifc, mlx5_core
from emu.nic import roce
from emu.nic.mlx5 import CommandFailed
from emu.nic.mlx5.cmdq import Command
from emu.nic.mlx5.pages import BOOT, INIT, BAD_PARAM, BAD_STATE
from emu.nic.wire import GIDConflict

if TYPE_CHECKING: from emu.nic.mlx5.cx6dx import CX6DX

MAX_UARS, MAX_PDS, GID_TABLE = 64, 1 << 16, 16
GEN, ROCE = mlx5_core.MLX5_CAP_GENERAL, mlx5_core.MLX5_CAP_ROCE
CAP_BYTES = 4096
MAX_CAPS = {
  GEN: dict(log_max_qp=18, log_max_qp_sz=15, log_max_cq=16, log_max_cq_sz=22, log_max_eq=4, log_max_eq_sz=22, log_max_mkey=16,
            log_max_pd=16, log_max_msg=30, roce=1, num_ports=1, port_type=1, log_max_ra_req_qp=4, log_max_ra_res_qp=4,
            max_wqe_sz_sq=mlx5_core.MLX5_SEND_WQE_MAX_SIZE, max_wqe_sz_rq=512, log_pg_sz=12, bf=1, log_bf_reg_size=9, cmdif_checksum=0,
            log_uar_page_sz=0, pkey_table_size=0, max_sgl_for_optimized_performance=8),
  ROCE: dict(roce_version=mlx5_core.MLX5_ROCE_VERSION_2_CAP, l3_type=mlx5_core.MLX5_ROCE_L3_TYPE_IPV4_CAP | mlx5_core.MLX5_ROCE_L3_TYPE_IPV6_CAP,
             roce_address_table_size=GID_TABLE, r_roce_dest_udp_port=roce.ROCE_V2_UDP_DPORT,
             r_roce_min_src_udp_port=0xC000, r_roce_max_src_udp_port=0xFFFF, sw_r_roce_src_udp_port=1),
}
# bf, log_bf_reg_size 9: BlueFlame in the two 256-byte doorbell registers of a UAR page at 0x800 and 0x900 (MLX5_BF_OFFSET)
WRITABLE = {GEN: {"log_max_qp", "roce", "cmdif_checksum", "log_uar_page_sz", "pkey_table_size"}, ROCE: {"sw_r_roce_src_udp_port"}}
CAP_LAYOUT = {GEN: mlx5_ifc.LAYOUTS["cmd_hca_cap"], ROCE: mlx5_ifc.LAYOUTS["roce_cap"]}


class HCA:
  def __init__(self, nic: CX6DX):
    self.nic = nic
    q = nic.cmdq.register
    for op, fn in ((mlx5_ifc.MLX5_CMD_OP_ENABLE_HCA, self.enable_hca), (mlx5_ifc.MLX5_CMD_OP_DISABLE_HCA, self.disable_hca),
                   (mlx5_ifc.MLX5_CMD_OP_QUERY_ISSI, self.query_issi), (mlx5_ifc.MLX5_CMD_OP_SET_ISSI, self.set_issi),
                   (mlx5_ifc.MLX5_CMD_OP_QUERY_HCA_CAP, self.query_hca_cap), (mlx5_ifc.MLX5_CMD_OP_SET_HCA_CAP, self.set_hca_cap),
                   (mlx5_ifc.MLX5_CMD_OP_INIT_HCA, self.init_hca), (mlx5_ifc.MLX5_CMD_OP_TEARDOWN_HCA, self.teardown_hca),
                   (mlx5_ifc.MLX5_CMD_OP_ALLOC_UAR, self.alloc_uar), (mlx5_ifc.MLX5_CMD_OP_DEALLOC_UAR, self.dealloc_uar),
                   (mlx5_ifc.MLX5_CMD_OP_ALLOC_PD, self.alloc_pd), (mlx5_ifc.MLX5_CMD_OP_DEALLOC_PD, self.dealloc_pd),
                   (mlx5_ifc.MLX5_CMD_OP_QUERY_NIC_VPORT_CONTEXT, self.query_vport), (mlx5_ifc.MLX5_CMD_OP_MODIFY_NIC_VPORT_CONTEXT,
                                                                                      self.modify_vport),
                   (mlx5_ifc.MLX5_CMD_OP_SET_ROCE_ADDRESS, self.set_roce_address), (mlx5_ifc.MLX5_CMD_OP_ACCESS_REG, self.access_reg)):
      q(op, fn)
    self.reset()

  def reset(self) -> None:
    self.enabled = self.initialized = self.torn_down = False
    self.issi = 0
    self.caps = {t: self._max_blob(t) for t in MAX_CAPS}
    self.uars: set[int] = set()
    self.pds: set[int] = set()
    self.roce_en, self.uc_lb_disabled, self.mc_lb_disabled = False, False, False
    self.roce_macs: dict[int, bytes] = {}
    self.host_endianness: int | None = None

  @staticmethod
  def _max_blob(t: int) -> bytearray:
    return CAP_LAYOUT[t].build(MAX_CAPS[t], nbytes=CAP_BYTES)

  def cap(self, t: int, name: str) -> int: return CAP_LAYOUT[t].get(self.caps[t], name)

  def need_init(self, what: str) -> None:
    if not self.initialized: raise CommandFailed(BAD_STATE, "hca not initialized", f"{what} needs INIT_HCA first")

  # --- life cycle
  def enable_hca(self, c: Command) -> None:
    if c.get("function_id") or c.get("embedded_cpu_function"): raise CommandFailed(BAD_PARAM, "other function", "function_id must be 0")
    if self.nic.stale: raise CommandFailed(BAD_STATE, "hca left enabled", "a previous driver left the HCA enabled: reset the function (FLR)")
    if self.enabled: raise CommandFailed(BAD_STATE, "hca already enabled", "ENABLE_HCA twice")
    self.enabled = True
    self.nic.set_enabled(True)

  def disable_hca(self, c: Command) -> None:
    if not self.enabled: raise CommandFailed(BAD_STATE, "hca not enabled", "DISABLE_HCA before ENABLE_HCA")
    if self.initialized: raise CommandFailed(BAD_STATE, "hca initialized", "TEARDOWN_HCA before DISABLE_HCA")
    if n := len(self.nic.pages.kind):
      raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_RES_STATE_ERR, "pages still given", f"{n} pages not reclaimed (MANAGE_PAGES HCA_RETURN_PAGES)")
    self.nic.pages.reset()
    self.reset()
    self.nic.set_enabled(False)

  def query_issi(self, c: Command) -> None:
    if not self.enabled: raise CommandFailed(BAD_STATE, "hca not enabled", "ENABLE_HCA first")
    c.put("current_issi", self.issi)
    c.put("supported_issi_dw0", 0b11)          # ISSI 0 and 1

  def set_issi(self, c: Command) -> None:
    if not self.enabled or self.initialized: raise CommandFailed(BAD_STATE, "set_issi state", "SET_ISSI goes between ENABLE_HCA and INIT_HCA")
    if c.get("current_issi") != 1: raise CommandFailed(BAD_PARAM, "issi not supported", f"ISSI {c.get('current_issi')}: only 1 is modelled")
    self.issi = 1

  def query_hca_cap(self, c: Command) -> None:
    if not self.enabled: raise CommandFailed(BAD_STATE, "hca not enabled", "ENABLE_HCA first")
    t, current = c.op_mod >> 1, c.op_mod & 1
    if t not in MAX_CAPS: raise CommandFailed(BAD_PARAM, "capability type not modelled", f"type {t:#x}")
    if c.get("other_function") or c.get("function_id"): raise CommandFailed(BAD_PARAM, "other function", "function_id must be 0")
    c.out[16:16 + CAP_BYTES] = self.caps[t] if current else self._max_blob(t)

  def set_hca_cap(self, c: Command) -> None:
    if not self.enabled or self.initialized: raise CommandFailed(BAD_STATE, "set_hca_cap state", "SET_HCA_CAP goes before INIT_HCA")
    t = c.op_mod >> 1
    if c.op_mod & 1 or t not in MAX_CAPS: raise CommandFailed(BAD_PARAM, "capability type not modelled", f"op_mod {c.op_mod:#x}")
    blob, layout = bytearray(c.raw(16, CAP_BYTES)), CAP_LAYOUT[t]
    top = layout.decode(self._max_blob(t))
    for name, v in layout.decode(blob).items():
      if v == top[name]: continue
      if name not in WRITABLE[t]: raise CommandFailed(BAD_PARAM, "capability not writable", f"{name} = {v}, the device's is {top[name]}")
      if v > top[name] and name != "cmdif_checksum": raise CommandFailed(BAD_PARAM, "capability above maximum", f"{name} = {v} > {top[name]}")
    if t == GEN and layout.get(blob, "cmdif_checksum"):
      raise CommandFailed(BAD_PARAM, "command checksums not modelled", "cmdif_checksum must be 0")
    self.caps[t] = blob

  def access_reg(self, c: Command) -> None:
    """ACCESS_REG: the HOST_ENDIANNESS register only (16 bytes, `he` at byte 0: 0 a little-endian host, the only kind
    modelled; mlx5 core main.c MLX5_SET_HOST_ENDIANNESS)."""
    if not self.enabled: raise CommandFailed(BAD_STATE, "hca not enabled", "ENABLE_HCA first")
    if c.get("register_id") != mlx5_core.MLX5_REG_HOST_ENDIANNESS:
      raise CommandFailed(BAD_PARAM, "register not modelled", f"register_id {c.get('register_id'):#x}: HOST_ENDIANNESS (0x7004) is")
    if c.op_mod == mlx5_ifc.MLX5_ACCESS_REGISTER_IN_OP_MOD_READ:
      c.out[16:32] = bytes([self.host_endianness or 0]) + bytes(15)
      return
    if c.op_mod != mlx5_ifc.MLX5_ACCESS_REGISTER_IN_OP_MOD_WRITE: raise CommandFailed(BAD_PARAM, "access_reg op_mod", f"op_mod {c.op_mod}")
    c.need(32, "the 16-byte HOST_ENDIANNESS register")
    if (he := c.raw(16, 1)[0]) != 0: raise CommandFailed(BAD_PARAM, "big-endian host not modelled", f"he {he:#x}")
    self.host_endianness = he

  def init_hca(self, c: Command) -> None:
    if not self.enabled or self.initialized or self.torn_down: raise CommandFailed(BAD_STATE, "init_hca state", "INIT_HCA once, after ENABLE_HCA")
    if self.issi != 1: raise CommandFailed(BAD_STATE, "issi not set", "SET_ISSI 1 before INIT_HCA")
    if self.host_endianness is None: raise CommandFailed(BAD_STATE, "host endianness not set", "ACCESS_REG HOST_ENDIANNESS before INIT_HCA")
    pages = self.nic.pages
    if pages.want(BOOT) > 0 or pages.want(INIT) > 0:
      raise CommandFailed(BAD_STATE, "init pages missing", f"boot pages missing: {pages.want(BOOT)}, init pages missing: {pages.want(INIT)}")
    self.initialized = True

  def teardown_hca(self, c: Command) -> None:
    self.need_init("TEARDOWN_HCA")
    if c.get("profile") > 1: raise CommandFailed(BAD_PARAM, "teardown profile", f"profile {c.get('profile')}")
    self.nic.destroy_objects()
    self.initialized, self.torn_down = False, True
    self.uars.clear()
    self.pds.clear()

  # --- UARs and PDs
  def alloc_uar(self, c: Command) -> None:
    self.need_init("ALLOC_UAR")
    free = [i for i in range(1, MAX_UARS + 1) if i not in self.uars]
    if not free: raise CommandFailed(mlx5_core.MLX5_CMD_STAT_NO_RES_ERR, "out of uars", f"all {MAX_UARS} UAR pages are allocated")
    self.uars.add(free[0])
    c.put("uar", free[0])

  def dealloc_uar(self, c: Command) -> None:
    if (u := c.get("uar")) not in self.uars: raise CommandFailed(BAD_PARAM, "no such uar", f"UAR {u}")
    nic = self.nic
    users = [f"EQ {q.eqn}" for q in nic.eqs.eqs.values() if q.uar == u] + [f"CQ {q.cqn}" for q in nic.cqs.cqs.values() if q.uar == u] + \
            [f"QP {q.qpn:#x}" for q in nic.qps.qps.values() if q.uar == u]
    if users: raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_RES_STATE_ERR, "uar in use", f"UAR {u} serves {', '.join(users)}")
    self.uars.discard(u)

  def alloc_pd(self, c: Command) -> None:
    self.need_init("ALLOC_PD")
    pd = next(i for i in range(1, MAX_PDS) if i not in self.pds)
    self.pds.add(pd)
    c.put("pd", pd)

  def dealloc_pd(self, c: Command) -> None:
    if (pd := c.get("pd")) not in self.pds: raise CommandFailed(BAD_PARAM, "no such pd", f"PD {pd}")
    nic = self.nic
    users = [f"MKEY {m.key:#x}" for m in nic.mkeys.mkeys.values() if m.pd == pd] + [f"QP {q.qpn:#x}" for q in nic.qps.qps.values() if q.pd == pd]
    if users: raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_RES_STATE_ERR, "pd in use", f"PD {pd} is used by {', '.join(users[:4])}")
    self.pds.discard(pd)

  # --- vport and RoCE addresses
  def query_vport(self, c: Command) -> None:
    self.need_init("QUERY_NIC_VPORT_CONTEXT")
    if c.get("other_vport") or c.get("vport_number"): raise CommandFailed(BAD_PARAM, "other vport", "vport 0 only")
    mac = int.from_bytes(self.nic.mac, "big")
    for path, v in (("permanent_address.mac_addr_47_32", mac >> 32), ("permanent_address.mac_addr_31_0", mac & 0xFFFFFFFF),
                    ("roce_en", self.roce_en), ("disable_uc_local_lb", self.uc_lb_disabled),
                    ("disable_mc_local_lb", self.mc_lb_disabled), ("mtu", 4096 + 18 + 4)):   # the port's Ethernet MTU
      c.put(f"nic_vport_context.{path}", int(v))

  def modify_vport(self, c: Command) -> None:
    self.need_init("MODIFY_NIC_VPORT_CONTEXT")
    if c.get("other_vport") or c.get("vport_number"): raise CommandFailed(BAD_PARAM, "other vport", "vport 0 only")
    sel = mlx5_ifc.LAYOUTS["modify_nic_vport_field_select"]
    fields = sel.decode(c.raw(12, 4))
    if extra := [n for n, v in fields.items() if v and n not in ("roce_en", "disable_uc_local_lb", "disable_mc_local_lb")]:
      raise CommandFailed(BAD_PARAM, "vport field not modelled", f"field_select {', '.join(extra)}")
    get = lambda n: c.get(f"nic_vport_context.{n}")
    if fields["roce_en"]: self.roce_en = bool(get("roce_en"))
    if fields["disable_uc_local_lb"]: self.uc_lb_disabled = bool(get("disable_uc_local_lb"))
    if fields["disable_mc_local_lb"]: self.mc_lb_disabled = bool(get("disable_mc_local_lb"))
    self.nic.port.accept_macs = {self.nic.mac} if self.roce_en else set()

  def set_roce_address(self, c: Command) -> None:
    self.need_init("SET_ROCE_ADDRESS")
    i, port = c.get("roce_address_index"), c.get("vhca_port_num")
    if port != 1: raise CommandFailed(BAD_PARAM, "bad port", f"vhca_port_num {port}: the port is 1")
    if i >= GID_TABLE: raise CommandFailed(BAD_PARAM, "roce address index", f"index {i} >= {GID_TABLE}")
    a = lambda n: c.get(f"roce_address.{n}")
    gid = c.raw(16, 16)
    mac = (a("source_mac_47_32") << 32 | a("source_mac_31_0")).to_bytes(6, "big")
    port_ = self.nic.port
    if not any(gid):
      if i in port_.gids: port_.delete_gid(i)
      self.roce_macs.pop(i, None)
      return
    if a("roce_version") != mlx5_core.MLX5_ROCE_VERSION_2:
      raise CommandFailed(BAD_PARAM, "roce version", f"roce_version {a('roce_version')}: only RoCEv2 (2) is modelled")
    if a("vlan_valid"): raise CommandFailed(BAD_PARAM, "vlan not modelled", "vlan_valid must be 0")
    want = mlx5_core.MLX5_ROCE_L3_TYPE_IPV4 if roce.is_ipv4_gid(gid) else mlx5_core.MLX5_ROCE_L3_TYPE_IPV6
    if a("roce_l3_type") != want: raise CommandFailed(BAD_PARAM, "roce l3 type", f"roce_l3_type {a('roce_l3_type')} for a GID that needs {want}")
    if i in port_.gids: port_.delete_gid(i)
    try: port_.add_gid(i, gid)
    except GIDConflict as e: raise CommandFailed(BAD_PARAM, "gid in use on the wire", str(e)) from None
    self.roce_macs[i] = mac
