"""The mlx5 RoCE provider: brings a ConnectX function up in the firmware's order and serves drivers/rdma's verbs
(kernel mlx5_core mlx5_function_setup / mlx5_load, rdma-core providers/mlx5).

  1. FLR; the init segment: firmware version, command interface revision 5, wait for the initializing bit
  2. the command queue (wait for the initializing bit again), ENABLE_HCA, QUERY_ISSI / SET_ISSI 1
  3. boot pages; the host's endianness (ACCESS_REG HOST_ENDIANNESS); QUERY_HCA_CAP / SET_HCA_CAP general (RoCE on, no command checksums, 4 KiB UAR
  pages) and RoCE
     (software-chosen UDP source ports); init pages; INIT_HCA; regular pages
  4. ALLOC_UAR, the event queues (async: page requests, command completions, errors; completions: CQ events on MSI-X
     vector 1), the NIC vport context (MAC, roce_en)
GIDs are RoCE addresses (SET_ROCE_ADDRESS). Closing tears the HCA down, reclaims every page and disables the HCA.
"""
from __future__ import annotations
import secrets

from autogen import mlx5 as mlx5_ifc, mlx5_core
from drivers.system.poll import wait_until
from drivers.mlx5.cmdq import CommandQueue
from drivers.mlx5.cq import CQ
from drivers.mlx5.eq import COMP_VECTOR, EQ
from drivers.mlx5.ifc import CommandError, layouts, swap32
from drivers.mlx5.mr import MR, MR_PAGE_SIZES
from drivers.mlx5.pages import Pages
from drivers.mlx5.qp import MAX_SGE, QP
from drivers.rdma.provider import PCIProvider, ipv4_gid
from drivers.rdma.verbs import Access, QPCap
from drivers.system.pci import PCIDevice

FW_REV, CMDIF_REV_FW_SUB, INITIALIZING = 0x000, 0x004, 0x1FC
CMDIF_REV, INIT_TIMEOUT_S = 5, 10.0
BOOT, INIT, REGULAR = (mlx5_ifc.MLX5_QUERY_PAGES_IN_OP_MOD_BOOT_PAGES, mlx5_ifc.MLX5_QUERY_PAGES_IN_OP_MOD_INIT_PAGES,
                       mlx5_ifc.MLX5_QUERY_PAGES_IN_OP_MOD_REGULAR_PAGES)
GEN, ROCE = mlx5_core.MLX5_CAP_GENERAL, mlx5_core.MLX5_CAP_ROCE
DBR = 8


class Out:
  """A command's output: fields by name, the bytes in `raw`."""
  def __init__(self, layout, raw: bytes): self.layout, self.raw = layout, raw
  def get(self, path: str) -> int: return self.layout.get(self.raw, path)


class MLX5Device(PCIProvider):
  """One ConnectX PCI function as a drivers/rdma provider."""
  max_mtu, max_sge = 4096, MAX_SGE
  mr_page_sizes = MR_PAGE_SIZES

  def __init__(self, pci: PCIDevice):
    self.pci, self.name = pci, f"mlx5 {pci.bus}"
    self.cmdq = self.eq = None
    self.qps: dict[int, QP] = {}
    self.pages = Pages(self)
    self._servicing, self.initialized = False, False
    self.dbr_free: list[int] = []
    self.gids: dict[int, bytes] = {}
    self.mkey_variant = 0                       # the low key byte of the last MKEY (drivers/mlx5/mr.py)
    try: self._bring_up()
    except BaseException:
      self._teardown(quiet=True)
      raise

  def _wait_initialized(self) -> None:
    wait_until(lambda: not swap32(self.bar.read32(INITIALIZING)) >> 31, INIT_TIMEOUT_S,
               lambda: f"{self.name}: the firmware is still initializing after {INIT_TIMEOUT_S:g} s (init segment 0x1fc bit 31)")

  def _bring_up(self) -> None:
    pci = self.pci
    pci.reset()
    pci.enable_bus_master()
    self.bar = pci.map_bar(0)
    fw, cmdif = swap32(self.bar.read32(FW_REV)), swap32(self.bar.read32(CMDIF_REV_FW_SUB))
    self.firmware = f"{fw & 0xFFFF}.{fw >> 16}.{cmdif & 0xFFFF}"
    if cmdif >> 16 != CMDIF_REV:
      raise RuntimeError(f"{self.name}: command interface revision {cmdif >> 16}; this driver speaks {CMDIF_REV} (firmware {self.firmware})")
    self._wait_initialized()
    self.cmdq = CommandQueue(pci, self.bar, self.name)
    self._wait_initialized()
    self.cmd(mlx5_ifc.MLX5_CMD_OP_ENABLE_HCA)
    self.enabled = True
    if not self.cmd(mlx5_ifc.MLX5_CMD_OP_QUERY_ISSI).get("supported_issi_dw0") & 2:
      raise RuntimeError(f"{self.name}: the firmware does not support ISSI 1")
    self.cmd(mlx5_ifc.MLX5_CMD_OP_SET_ISSI, current_issi=1)
    self.pages.satisfy(BOOT)
    # HOST_ENDIANNESS (16 bytes, `he` 0: a little-endian host; mlx5 core main.c set_hca_ctrl)
    self.cmd(mlx5_ifc.MLX5_CMD_OP_ACCESS_REG, op_mod=mlx5_ifc.MLX5_ACCESS_REGISTER_IN_OP_MOD_WRITE, register_id=mlx5_core.MLX5_REG_HOST_ENDIANNESS,
             payload=bytes(16))
    self._set_caps(GEN, {"cmdif_checksum": 0, "log_uar_page_sz": 0, "pkey_table_size": 0, "roce": 1})
    self._set_caps(ROCE, {"sw_r_roce_src_udp_port": 1})
    self.pages.satisfy(INIT)
    self.cmd(mlx5_ifc.MLX5_CMD_OP_INIT_HCA, {f"sw_owner_id[{i}]": secrets.randbits(32) for i in range(4)})
    self.initialized = True
    self.caps = self.query_caps(GEN)
    self.max_rd_atomic = 1 << min(self._cap("log_max_ra_req_qp"), self._cap("log_max_ra_res_qp"))
    # mlx5_ib_query_device (drivers/infiniband/hw/mlx5/main.c): max_qp_wr 1 << log_max_qp_sz, max_cqe (1 << log_max_cq_sz) - 1
    self.max_qp_wr, self.max_cqe = 1 << self._cap("log_max_qp_sz"), (1 << self._cap("log_max_cq_sz")) - 1
    self.pages.satisfy(REGULAR)
    self.uar = self.cmd(mlx5_ifc.MLX5_CMD_OP_ALLOC_UAR).get("uar")
    self.uar_bar = UARPage(self.bar, self.uar * 4096)
    self.eq = EQ(self)
    self.comp_eq = EQ(self, (), COMP_VECTOR)       # completion events of armed CQs (they go to the CQ's EQ)
    vport = self.cmd(mlx5_ifc.MLX5_CMD_OP_QUERY_NIC_VPORT_CONTEXT)
    self.mac = (vport.get("nic_vport_context.permanent_address.mac_addr_47_32") << 32 |
                vport.get("nic_vport_context.permanent_address.mac_addr_31_0")).to_bytes(6, "big")
    self.cmd(mlx5_ifc.MLX5_CMD_OP_MODIFY_NIC_VPORT_CONTEXT, {"field_select.roce_en": 1, "nic_vport_context.roce_en": 1})
    self.dbr = pci.alloc_dma(4096)
    self.dbr_free = list(range(0, 4096, DBR))

  # --- commands
  def cmd(self, opcode: int, fields: dict[str, int] | None = None, op_mod: int = 0, payload: bytes = b"",
          outlen: int | None = None, at: dict[int, bytes] | None = None, poll: bool = True, **kw: int) -> Out:
    """Run a command: input fields by mlx5_ifc.h path, `payload` after the input layout (page lists), `at` bytes
    placed at byte offsets; then the events it caused are served (page requests)."""
    lin, lout = layouts(opcode)
    inp = lin.build({**(fields or {}), **kw, "opcode": opcode, "op_mod": op_mod})
    for off, data in (at or {}).items(): inp[off:off + len(data)] = data
    raw = self.cmdq.exec(bytes(inp) + payload, outlen or lout.nbytes)
    if poll: self.service_events()
    return Out(lout, raw)

  def service_events(self) -> None:
    if self.eq is None or self._servicing: return
    self._servicing = True
    try:
      while evs := self.eq.poll():
        for kind, data in evs:
          if kind == mlx5_core.MLX5_EVENT_TYPE_PAGE_REQUEST:
            n = int.from_bytes(data[4:8], "big", signed=True)
            if n > 0: self.pages.give(n)
            elif n < 0: self.pages.reclaim(-n)
          elif kind == mlx5_core.MLX5_EVENT_TYPE_CQ_ERROR:
            raise RuntimeError(f"{self.name}: CQ {int.from_bytes(data[0:4], 'big') & 0xFFFFFF:#x} overran (CQ error event)")
    finally: self._servicing = False

  def query_caps(self, kind: int) -> bytes:
    return self.cmd(mlx5_ifc.MLX5_CMD_OP_QUERY_HCA_CAP, op_mod=kind << 1 | 1).raw[16:16 + 4096]

  def _cap(self, name: str) -> int: return mlx5_ifc.LAYOUTS["cmd_hca_cap"].get(self.caps, name)

  def _set_caps(self, kind: int, values: dict[str, int]) -> None:
    layout = mlx5_ifc.LAYOUTS["cmd_hca_cap" if kind == GEN else "roce_cap"]
    blob = bytearray(self.query_caps(kind))
    for k, v in values.items(): layout.set(blob, k, v)
    self.cmd(mlx5_ifc.MLX5_CMD_OP_SET_HCA_CAP, op_mod=kind << 1, at={16: bytes(blob)})

  # --- doorbell records (8 bytes each, in one page)
  def alloc_dbr(self) -> int:
    if not self.dbr_free: raise RuntimeError(f"{self.name}: all {4096 // DBR} doorbell records are in use")
    off = self.dbr_free.pop(0)
    self.dbr.view[off:off + DBR] = bytes(DBR)
    return off

  def free_dbr(self, off: int) -> None: self.dbr_free.append(off)

  # --- the provider interface (drivers/rdma/provider.py; alloc, map_dma and free are PCIProvider's)
  def add_gid(self, gid: bytes) -> int:
    index = next(i for i in range(1 << 16) if i not in self.gids)
    mac = int.from_bytes(self.mac, "big")
    self.cmd(mlx5_ifc.MLX5_CMD_OP_SET_ROCE_ADDRESS, {"roce_address_index": index, "vhca_port_num": 1,
             "roce_address.roce_version": mlx5_core.MLX5_ROCE_VERSION_2,
             "roce_address.roce_l3_type": mlx5_core.MLX5_ROCE_L3_TYPE_IPV4 if ipv4_gid(gid) else mlx5_core.MLX5_ROCE_L3_TYPE_IPV6,
             "roce_address.source_mac_47_32": mac >> 32, "roce_address.source_mac_31_0": mac & 0xFFFFFFFF},
             at={16: bytes(gid)})
    self.gids[index] = bytes(gid)
    return index

  def alloc_pd(self) -> int: return self.cmd(mlx5_ifc.MLX5_CMD_OP_ALLOC_PD).get("pd")

  def reg_mr(self, pd: int, pages: list[int], page_size: int, iova: int, length: int, access: Access) -> MR:
    return MR(self, pd, pages, page_size, iova, length, access)

  def create_cq(self, depth: int) -> CQ: return CQ(self, depth)
  def create_qp(self, pd: int, send_cq: CQ, recv_cq: CQ, cap: QPCap) -> QP: return QP(self, pd, send_cq, recv_cq, cap)

  def set_loopback(self, on: bool) -> None:
    """The NIC's internal unicast loopback (frames to one of its own GIDs come back in): on unless disabled."""
    self.cmd(mlx5_ifc.MLX5_CMD_OP_MODIFY_NIC_VPORT_CONTEXT, {"field_select.disable_uc_local_lb": 1,
                                                             "nic_vport_context.disable_uc_local_lb": int(not on)})

  def close(self) -> None: self._teardown()

  def _teardown(self, quiet: bool = False) -> None:
    """TEARDOWN_HCA (it destroys every object), reclaim every page, DISABLE_HCA; the function's DMA memory is freed."""
    try:
      if self.cmdq is not None and getattr(self, "enabled", False):
        try:
          if self.initialized:
            self.eq = None                      # the teardown takes the EQ with it: no more events
            self.cmd(mlx5_ifc.MLX5_CMD_OP_TEARDOWN_HCA, poll=False)
            self.initialized = False
          while self.pages.given and self.pages.reclaim(len(self.pages.given)): pass
          if self.pages.given: raise RuntimeError(f"{self.name}: {len(self.pages.given)} pages were not returned after TEARDOWN_HCA")
          self.cmd(mlx5_ifc.MLX5_CMD_OP_DISABLE_HCA, poll=False)
          self.enabled = False
        except (CommandError, RuntimeError):
          if not quiet: raise
    finally: self.pci.close()


class UARPage:
  """A 4 KiB window of BAR0 (one UAR page)."""
  def __init__(self, bar, base: int): self.bar, self.base = bar, base
  def write32(self, off: int, v: int) -> None: self.bar.write32(self.base + off, v)
  def write64(self, off: int, v: int) -> None: self.bar.write64(self.base + off, v)
  def write64s(self, off: int, values: list[int]) -> None: self.bar.write64s(self.base + off, values)
