"""Struct-level helpers for the bnxt model tests: a minimal HWRM/RCFW command writer, rings and page lists in DMA memory,
and the WQE/doorbell/CQE formats, which a test drives by hand (often wrongly on purpose). Not a driver (that is
drivers/bnxt): no error recovery, no verbs. Facts: kernel bnxt_re qplib_*.c; the layouts are autogen.bnxt's."""
from __future__ import annotations
import ctypes, socket, time

from autogen import bnxt as bnxt_hsi

SLOT, WQE, CQE_SIZE, RING = 16, 128, 32, 16       # CMDQ slot, static WQE, CQE, ring entries used here


class CommandFailed(RuntimeError):
  def __init__(self, what: str, code: int):
    super().__init__(f"{what} failed with {code:#x}")
    self.code = code


def wait(cond, what: str, timeout: float = 10.0) -> None:
  end = time.monotonic() + timeout
  while not cond():
    if time.monotonic() > end: raise TimeoutError(f"timed out waiting for {what}")
    time.sleep(0.0002)


def fill(s, **fields):
  for k, v in fields.items():
    if isinstance(v, (bytes, bytearray)):
      f = getattr(type(s), k)
      ctypes.memmove(ctypes.addressof(s) + f.offset, bytes(v), min(len(v), f.size))
    else: setattr(s, k, v)
  return s


def ipv4_gid(ip: str) -> bytes: return bytes(10) + b"\xff\xff" + socket.inet_aton(ip)


def db(xid: int, type_: int, index: int, epoch: int = 0, toggle: int = 0) -> int:
  """A RoCE doorbell (dbc_dbc): VALID | type | xid in the high word, index | epoch | toggle in the low word."""
  return (xid & bnxt_hsi.DBC_DBC_XID_MASK | bnxt_hsi.DBC_DBC_VALID | type_) << 32 | index & bnxt_hsi.DBC_DBC_INDEX_MASK | epoch << 24 | toggle << 25


class Ring:
  """`depth` entries of `stride` bytes in DMA pages, with the PBL a command names them by."""
  def __init__(self, nic: Bnxt, depth: int, stride: int, ring_marks: bool = True, extra: int = 0):
    self.nic, self.depth, self.stride = nic, depth, stride
    self.mem = nic.pci.alloc_dma(depth * stride + extra)
    self.level, self.base = nic.pbl(self.mem, ring_marks)
    self.prod = self.cons = 0

  def put(self, index: int, data: bytes) -> None:
    off = (index % self.depth) * self.stride
    self.mem.view[off:off + len(data)] = data

  def get(self, index: int, n: int | None = None) -> bytes:
    off = (index % self.depth) * self.stride
    return bytes(self.mem.view[off:off + (n or self.stride)])

  def phase(self, index: int) -> int: return ((index // self.depth) & 1) ^ 1


class Bnxt:
  """One emulated NIC opened through drivers.system (`pci`), driven by hand."""
  def __init__(self, pci):
    self.pci, self.model = pci, pci.model
    pci.enable_bus_master()
    self.bar0, self.dbar = pci.map_bar(0), pci.map_bar(2)
    self.resp = pci.alloc_dma(4096)
    self.seq, self.cookie = 0, 0
    self.db_off = 0

  # --- page lists
  def pbl(self, mem, ring_marks: bool = False) -> tuple[int, int]:
    """(level, base) of a PBL over the pages of `mem` (level 0 for one page)."""
    pages = mem.bus_addrs
    if len(pages) == 1: return 0, pages[0]
    ptes = [p | bnxt_hsi.PTU_PTE_VALID for p in pages]
    if ring_marks:
      ptes[-1] |= bnxt_hsi.PTU_PTE_LAST
      if len(ptes) > 1: ptes[-2] |= bnxt_hsi.PTU_PTE_NEXT_TO_LAST
    table = self.pci.alloc_dma(8 * len(ptes))
    for i, pte in enumerate(ptes): table.view[8 * i:8 * i + 8] = pte.to_bytes(8, "little")
    if len(ptes) <= 512: return 1, table.bus_addrs[0]
    top = self.pci.alloc_dma(8 * len(table.bus_addrs))
    for i, p in enumerate(table.bus_addrs): top.view[8 * i:8 * i + 8] = (p | bnxt_hsi.PTU_PDE_VALID).to_bytes(8, "little")
    return 2, top.bus_addrs[0]

  # --- HWRM
  def hwrm(self, name: str, check: bool = True, **fields):
    """Run HWRM command `name`: its output structure, or (check=False) the error code if it failed."""
    self.seq = (self.seq + 1) & 0xFFFF
    req = fill(getattr(bnxt_hsi, f"hwrm_{name}_input")(req_type=getattr(bnxt_hsi, f"HWRM_{name.upper()}"), cmpl_ring=0xFFFF, seq_id=self.seq,
                                                target_id=0xFFFF, resp_addr=self.resp.bus_addrs[0]), **fields)
    self.resp.view[:] = bytes(4096)
    raw = bytes(req).ljust(128, b"\0")
    for i in range(0, 128, 4): self.bar0.write32(i, int.from_bytes(raw[i:i + 4], "little"))
    self.bar0.write32(0x100, 1)
    hdr = bnxt_hsi.hwrm_resp_hdr.from_buffer_copy(self.resp.view[:8])
    assert hdr.seq_id == self.seq and hdr.req_type == req.req_type and self.resp.view[hdr.resp_len - 1] == 1
    if hdr.error_code:
      if check: raise CommandFailed(f"HWRM {name}", hdr.error_code)
      return hdr.error_code
    return getattr(bnxt_hsi, f"hwrm_{name}_output").from_buffer_copy(self.resp.view)

  def backing_store(self, init: bool = True, skip: int | None = None, done: bool = True) -> dict[int, list]:
    """Configure every context type the firmware reports (following next_valid_type), each instance, TIM sized like
    QP; the last one BS_CFG_ALL_DONE. `init` writes ctx_init_value where asked; `skip` leaves a type out."""
    caps, t = [], 0
    while t != 0xFFFF:
      c = self.hwrm("func_backing_store_qcaps_v2", type=t)
      if c.flags & bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_TYPE_VALID and t != skip: caps.append(c)
      t = c.next_valid_type
    qp_entries, mems = 0, {}
    for j, c in enumerate(caps):
      n = qp_entries if c.type == bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_TIM else max(c.min_num_entries, 1)
      if c.type == bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_QP: qp_entries = n
      instances = [i for i in range(32) if c.instance_bit_map >> i & 1] or [0]
      for k, inst in enumerate(instances):
        mem = self.pci.alloc_dma(n * c.entry_size)
        if init and c.flags & bnxt_hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_ENABLE_CTX_KIND_INIT:
          for e in range(n): mem.view[e * c.entry_size + c.ctx_init_offset * 4] = c.ctx_init_value
        level, base = self.pbl(mem)
        last = done and j == len(caps) - 1 and k == len(instances) - 1
        self.hwrm("func_backing_store_cfg_v2", type=c.type, instance=inst, entry_size=c.entry_size, num_entries=n,
                  page_dir=base, page_size_pbl_level=level, flags=bnxt_hsi.FUNC_BACKING_STORE_CFG_V2_REQ_FLAGS_BS_CFG_ALL_DONE if last else 0)
        mems.setdefault(c.type, []).append(mem)
    return mems

  def ring_alloc(self, ring: Ring, ring_type: int, **fields) -> int:
    return self.hwrm("ring_alloc", ring_type=ring_type, page_tbl_addr=ring.base, page_size=12, page_tbl_depth=ring.level,
                     length=ring.depth, **fields).ring_id

  # --- bring-up (reference rdma.md 5.4)
  def bring_up(self, ip: str = "10.0.0.1", rcfw: bool = True, l2: bool = True) -> None:
    self.hwrm("ver_get", hwrm_intf_maj=1, hwrm_intf_min=10, hwrm_intf_upd=3)
    self.hwrm("func_reset")
    caps = self.hwrm("func_qcaps", fid=0xFFFF)
    self.mac = bytes(caps.mac_address)
    self.hwrm("func_drv_rgtr")
    self.db_off = self.hwrm("func_qcfg", fid=0xFFFF).legacy_l2_db_size_kb * 1024
    self.backing = self.backing_store()
    if rcfw: self.open_rcfw()
    if l2: self.open_l2()
    if rcfw: self.gid_index = self.add_gid(ipv4_gid(ip), self.mac)
    self.gid = ipv4_gid(ip)

  def open_rcfw(self, depth: int = 64) -> None:
    self.creq = Ring(self, RING, 16, ring_marks=False)
    self.creq_id = self.ring_alloc(self.creq, bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX)
    self.cmdq = Ring(self, depth, SLOT, ring_marks=False)
    init = bnxt_hsi.cmdq_init(cmdq_pbl=self.cmdq.base, cmdq_size_cmdq_lvl=depth << 2 | self.cmdq.level, creq_ring_id=self.creq_id)
    raw = bytes(init)
    for i in range(4): self.bar0.write32(0x600 + 4 * i, int.from_bytes(raw[4 * i:4 * i + 4], "little"))
    self.first = True
    self.ring_db(db(self.creq_id, bnxt_hsi.DBC_DBC_TYPE_NQ_ARM, 0))
    self.stats = self.pci.alloc_dma(4096)
    self.stat_ctx = self.hwrm("stat_ctx_alloc", stats_dma_addr=self.stats.bus_addrs[0], stats_dma_length=176).stat_ctx_id
    self.rcfw("initialize_fw", stat_ctx_id=self.stat_ctx, flags=bnxt_hsi.CMDQ_INITIALIZE_FW_FLAGS_HW_REQUESTER_RETX_SUPPORTED)
    self.nq = Ring(self, RING, 16, ring_marks=False)
    self.nq_id = self.ring_alloc(self.nq, bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, logical_id=1, int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_MSIX)

  def open_l2(self) -> None:
    nq = getattr(self, "nq_id", None)
    if nq is None: nq = self.ring_alloc(Ring(self, RING, 16), bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_NQ, int_mode=bnxt_hsi.RING_ALLOC_REQ_INT_MODE_POLL)
    cmpl = self.ring_alloc(Ring(self, RING, 16), bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL, enables=bnxt_hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID,
                           nq_ring_id=nq)
    rx = self.ring_alloc(Ring(self, RING, 16), bnxt_hsi.RING_ALLOC_REQ_RING_TYPE_RX, nq_ring_id=nq, rx_buf_size=640,
                         enables=bnxt_hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID | bnxt_hsi.RING_ALLOC_REQ_ENABLES_RX_BUF_SIZE_VALID)
    self.vnic = self.hwrm("vnic_alloc").vnic_id
    self.hwrm("vnic_cfg", vnic_id=self.vnic, mru=9018, default_rx_ring_id=rx, default_cmpl_ring_id=cmpl,
              enables=bnxt_hsi.VNIC_CFG_REQ_ENABLES_MRU | bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID |
              bnxt_hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID)
    self.filter = self.hwrm("cfa_l2_filter_alloc", flags=bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX, l2_addr=self.mac, l2_addr_mask=b"\xff" * 6,
                            dst_id=self.vnic, enables=bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR |
                            bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK | bnxt_hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID).l2_filter_id

  def ring_db(self, value: int, dpi: int = 0) -> None: self.dbar.write64(self.db_off + dpi * 4096, value)

  # --- RCFW
  def rcfw(self, name: str, check: bool = True, events: list | None = None, **fields):
    """Run RCFW command `name` through the CMDQ; its CREQ response (status checked unless check=False). Asynchronous
    CREQ events met on the way go to `events`."""
    cls = getattr(bnxt_hsi, f"cmdq_{name}")
    slots = -(-ctypes.sizeof(cls) // SLOT)
    self.cookie = (self.cookie + 1) & 0x7FFF
    raw = bytes(fill(cls(opcode=getattr(bnxt_hsi, f"CMDQ_BASE_OPCODE_{name.upper()}"), cmd_size=slots, cookie=self.cookie), **fields))
    raw = raw.ljust(slots * SLOT, b"\0")
    for i in range(slots): self.cmdq.put(self.cmdq.prod + i, raw[i * SLOT:(i + 1) * SLOT])
    self.cmdq.prod += slots
    self.bar0.write32(0x60C, self.cmdq.prod % self.cmdq.depth | (1 << 31 if self.first else 0))
    self.first = False
    self.bar0.write32(0x700, 1)
    while True:
      entry = self.creq_next()
      if entry[9] < 0xC0: break
      (events if events is not None else []).append(entry)
    resp = getattr(bnxt_hsi, f"creq_{name}_resp", bnxt_hsi.creq_base).from_buffer_copy(entry)
    assert resp.type == bnxt_hsi.CREQ_BASE_TYPE_QP_EVENT and entry[9] == raw[0] and int.from_bytes(entry[2:4], "little") == self.cookie
    if entry[1] and check: raise CommandFailed(f"RCFW {name}", entry[1])
    return resp if check else entry[1]

  def creq_next(self, timeout: float = 5.0) -> bytes:
    c = self.creq
    wait(lambda: c.get(c.cons)[8] & 1 == c.phase(c.cons), "a CREQ entry", timeout)
    entry = c.get(c.cons)
    c.cons += 1
    self.ring_db(db(self.creq_id, bnxt_hsi.DBC_DBC_TYPE_NQ_ARM, c.cons % c.depth, (c.cons // c.depth) & 1))
    return entry

  def add_gid(self, gid: bytes, mac: bytes) -> int:
    """ADD_GID with the GID byte-reversed and the MAC's byte pairs swapped, as the kernel writes them (rdma.md 5.8)."""
    return self.rcfw("add_gid", gid=gid[::-1], src_mac=bytes((mac[1], mac[0], mac[3], mac[2], mac[5], mac[4]))).xid

  # --- memory regions
  def register(self, size: int, access: int = 0x7, va: int | None = None):
    """(key, DMA memory, va) of an MR over a new buffer (REGISTER_MR with ALLOC_MR); va defaults to the first page's
    bus address, as the seed driver does."""
    mem = self.pci.alloc_dma(size)
    level, base = self.pbl(mem)
    va = mem.bus_addrs[0] if va is None else va
    key = self.rcfw("register_mr", flags=bnxt_hsi.CMDQ_REGISTER_MR_FLAGS_ALLOC_MR, log2_pg_size_lvl=12 << 2 | level, access=access,
                    log2_pbl_pg_size=12, pbl=base, va=va, mr_size=size).xid
    return key, mem, va


class QPair:
  """One RC QP in static WQE mode with its CQ, SQ (16 WQEs + MSN table) and RQ, driven by hand."""
  def __init__(self, nic: Bnxt, depth: int = 16, qp_flags: int = 0):
    self.nic, self.depth = nic, depth
    self.cq = Ring(nic, depth * 2, CQE_SIZE)
    self.cq_id = nic.rcfw("create_cq", cq_handle=0xC0FFEE, cq_size=self.cq.depth, pbl=self.cq.base, pg_size_lvl=self.cq.level,
                          cq_fco_cnq_id=nic.nq_id).xid
    self.msn_entries = 1 << (depth - 1).bit_length()
    self.sq = Ring(nic, depth, WQE, extra=8 * self.msn_entries)
    self.rq = Ring(nic, depth, WQE)
    self.qpn = nic.rcfw("create_qp", type=bnxt_hsi.CMDQ_CREATE_QP_TYPE_RC, qp_handle=0xABCD, qp_flags=qp_flags, sq_size=depth,
                        rq_size=depth, sq_fwo_sq_sge=6, rq_fwo_rq_sge=6, scq_cid=self.cq_id, rcq_cid=self.cq_id,
                        sq_pbl=self.sq.base, sq_pg_size_sq_lvl=self.sq.level, rq_pbl=self.rq.base,
                        rq_pg_size_rq_lvl=self.rq.level).xid
    self.psn = self.msn = 0
    self.mtu = 1024

  def modify(self, state: int, mask: str, check: bool = True, **fields):
    """MODIFY_QP to `state` (with the network type bits) with the mask bits named in `mask`."""
    bits = sum(getattr(bnxt_hsi, f"CMDQ_MODIFY_QP_MODIFY_MASK_{n}") for n in mask.split())
    return self.nic.rcfw("modify_qp", check=check, qp_cid=self.qpn, modify_mask=bits, network_type_en_sqd_async_notify_new_state=state, **fields)

  def connect(self, peer_qpn: int, peer_gid: bytes, peer_mac: bytes, mtu: int = 1024, timeout: int = 18, retry_cnt: int = 7,
              access: int = 0x7) -> None:
    self.mtu = mtu
    self.modify(bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_INIT, "STATE ACCESS PKEY", access=access, pkey=0xFFFF)
    self.modify(bnxt_hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4 | bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_RTR,
                "STATE DGID SGID_INDEX DEST_MAC PATH_MTU DEST_QP_ID RQ_PSN MAX_DEST_RD_ATOMIC MIN_RNR_TIMER HOP_LIMIT",
                qp_type=bnxt_hsi.CMDQ_MODIFY_QP_QP_TYPE_RC, dgid=peer_gid, sgid_index=self.nic.gid_index, dest_mac=peer_mac, hop_limit=64,
                path_mtu_pingpong_push_enable=(mtu.bit_length() - 9) << 4, dest_qp_id=peer_qpn, max_dest_rd_atomic=4, min_rnr_timer=1)
    self.modify(bnxt_hsi.CMDQ_MODIFY_QP_NEW_STATE_RTS, "STATE TIMEOUT RETRY_CNT RNR_RETRY SQ_PSN MAX_RD_ATOMIC",
                qp_type=bnxt_hsi.CMDQ_MODIFY_QP_QP_TYPE_RC,
                timeout=timeout, retry_cnt=retry_cnt, rnr_retry=7, max_rd_atomic=4)

  def post(self, wqe_type: int, sges: list[tuple[int, int, int]], length: int, remote_va: int = 0, rkey: int = 0, imm: int = 0,
           flags: int = bnxt_hsi.SQ_SEND_FLAGS_SIGNAL_COMP, msn_entry: int | None = None, ring: bool = True) -> None:
    """Write one static-mode WQE (header + SGEs (va, lkey, size)) and its MSN table entry, then ring the SQ."""
    hdr = bnxt_hsi.sq_rdma_hdr(wqe_type=wqe_type, flags=flags, wqe_size=2 + len(sges), imm_data=imm, length=length, remote_va=remote_va,
                               remote_key=rkey)
    raw = bytes(hdr) + b"".join(bytes(bnxt_hsi.sq_sge(va_or_pa=va, l_key=k, size=n)) for va, k, n in sges)
    index = self.sq.prod % self.depth
    self.sq.put(self.sq.prod, raw)
    npkts = max(1, -(-length // self.mtu))
    entry = index << 48 | ((self.psn + npkts) & 0xFFFFFF) << 24 | self.psn if msn_entry is None else msn_entry
    off = self.depth * WQE + 8 * (self.msn % self.msn_entries)
    self.sq.mem.view[off:off + 8] = entry.to_bytes(8, "little")
    self.psn, self.msn = (self.psn + npkts) & 0xFFFFFF, self.msn + 1
    self.sq.prod += 1
    if ring: self.nic.ring_db(db(self.qpn, bnxt_hsi.DBC_DBC_TYPE_SQ, self.sq.prod % self.depth, (self.sq.prod // self.depth) & 1))

  def post_recv(self, sges: list[tuple[int, int, int]], wr_id: int) -> None:
    hdr = bnxt_hsi.rq_wqe_hdr(wqe_type=bnxt_hsi.RQ_WQE_WQE_TYPE_RCV, wqe_size=2 + len(sges))
    hdr.wr_id[0] = wr_id
    self.rq.put(self.rq.prod, bytes(hdr) + b"".join(bytes(bnxt_hsi.sq_sge(va_or_pa=va, l_key=k, size=n)) for va, k, n in sges))
    self.rq.prod += 1
    self.nic.ring_db(db(self.qpn, bnxt_hsi.DBC_DBC_TYPE_RQ, self.rq.prod % self.depth, (self.rq.prod // self.depth) & 1))

  def poll(self, timeout: float = 10.0) -> bytes:
    """The next CQE (toggle bit = the pass's phase), released with a CQ doorbell."""
    c = self.cq
    wait(lambda: c.get(c.cons)[24] & 1 == c.phase(c.cons), f"a CQE on CQ {self.cq_id}", timeout)
    cqe = c.get(c.cons)
    c.cons += 1
    self.nic.ring_db(db(self.cq_id, bnxt_hsi.DBC_DBC_TYPE_CQ, c.cons % c.depth, (c.cons // c.depth) & 1))
    return cqe
