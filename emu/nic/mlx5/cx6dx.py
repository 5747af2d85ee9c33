"""The emulated ConnectX-6 Dx (MT2892, mlx5) as the PCI function a userspace mlx5 driver brings up from cold.

PCI: vendor 0x15B3, device 0x101D, class 0x020000 (Ethernet). BAR0 (1 MiB), big-endian registers:
  page 0, the init segment (aligned 32-bit accesses; include/linux/mlx5/device.h mlx5_init_seg):
    0x000 fw_rev (minor << 16 | major), 0x004 cmdif_rev_fw_sub (command interface revision 5 << 16 | subminor),
    0x010 cmdq_addr_h, 0x014 cmdq_addr_l_sz (low byte read-only: log_cmdq_size << 4 | log_cmdq_stride; the driver
    writes the 4 KiB aligned address with bits 8-11 clear: the full-driver NIC interface), 0x018 cmd_dbell (a bit per
    slot), 0x1fc initializing (bit 31: the firmware is initializing; it reads set once after power-up or an FLR and
    once after the command queue address is written, and a command doorbell while it is set raises ModelError).
  pages 1..64, the UAR pages ALLOC_UAR hands out (write-only): 0x20 CQ doorbell (64-bit), 0x40 / 0x48 EQ doorbells
    (32-bit), 0x800 and 0x900 the send doorbell / BlueFlame registers (64-bit; BlueFlame's WQE copy is not modelled).
The other init segment words read as 0 (the health buffer, timers: not modelled); any other access raises ModelError
naming it. DMA needs PCI_COMMAND bus mastering.

The port is a WirePort on the loopback network (emu/nic/port.py, wire.py): options wire_host, wire_port, wire_faults
as for bnxt. Its MAC is 02:15:b3:00:HH:LL for device index 0xHHLL.

Persistent state (`path`: $TMPDIR/hcq-emu/mlx5-<index>/ from `state_dir`; None keeps it in memory): one file `state`
(magic, layout version, MAC, whether the HCA is enabled, FLR count), written whenever one of them changes. A driver
that ends without TEARDOWN_HCA / DISABLE_HCA leaves the HCA enabled: the next one must reset the function (FLR,
`reset()`) before ENABLE_HCA. What a driver created lived in its DMA memory and dies with its process.
"""
from __future__ import annotations
import struct
from ctypes import Structure, c_uint8, c_uint32

from emu.nic.mlx5.cmdq import CommandQueue, LOG_SIZE, LOG_STRIDE
from emu.nic.mlx5.cq import CQs
from emu.nic.mlx5.eq import EQs, DB_ARM, DB_NOARM
from emu.nic.mlx5.hca import HCA
from emu.nic.mlx5.mkey import MKeys
from emu.nic.mlx5.pages import Pages
from emu.nic.mlx5.qp import QPs
from emu.nic.mlx5.wqe import BF_SIZE, BlueFlame, sq_doorbell
from emu.nic.function import NICFunction
from emu.pci import ModelError, PCI_COMMAND, PCI_COMMAND_MEMORY, Region, Access
from common.plugin import PCIModel

VENDOR_ID, DEVICE_ID, REVISION, CLASS_ETHERNET = 0x15B3, 0x101D, 0x00, 0x020000
BAR0_SIZE, UAR_PAGE = 1 << 20, 4096
FW_VERSION, CMDIF_REV = (22, 39, 1002), 5
FW_REV, CMDIF_REV_FW_SUB, CMDQ_ADDR_H, CMDQ_ADDR_L_SZ, CMD_DBELL, INITIALIZING = 0x000, 0x004, 0x010, 0x014, 0x018, 0x1FC
CQ_DB, BF_0 = 0x20, 0x800
STATE_MAGIC, STATE_VERSION = 0x3558_4C4D, 1      # "MLX5"


class DeviceState(Structure):
  _fields_ = [("magic", c_uint32), ("version", c_uint32), ("mac", c_uint8 * 6), ("enabled", c_uint8), ("pad", c_uint8),
              ("resets", c_uint32)]


def _be(value: int, size: int) -> int:
  """The big-endian value the device sees in a little-endian CPU store."""
  return int.from_bytes(value.to_bytes(size, "little"), "big")


class BAR0(Region):
  """Page 0 the init segment, then the UAR pages."""
  name, size = "BAR0", BAR0_SIZE
  valid = (Access("init segment registers", 4, 4, end=UAR_PAGE), Access("UAR pages", 4, 8, readable=False))

  def __init__(self, nic: CX6DX): self.nic = nic

  def _read(self, offset: int, size: int) -> int:
    with self.nic.lock: return _be(self.nic.init_segment(offset), 4)

  def _write(self, offset: int, size: int, value: int) -> None:
    nic = self.nic
    with nic.lock:
      page, off = divmod(offset, UAR_PAGE)
      if page == 0: return self._init_segment(offset, _be(value, size))
      if page not in nic.hca.uars: raise ModelError(f"BAR0 store at {offset:#x}: UAR page {page} is not allocated (ALLOC_UAR)")
      if BF_0 <= off < BF_0 + 2 * BF_SIZE and size == 8:
        reg, within = divmod(off - BF_0, BF_SIZE)
        if within: return nic.blueflame.store(page, reg, within, value.to_bytes(8, "little"))
        return nic.blueflame.doorbell(page, reg, sq_doorbell(nic.qps, page, value))
      if off == CQ_DB and size == 8: return nic.cqs.doorbell(page, _be(value, 8))
      if off in (DB_ARM, DB_NOARM) and size == 4: return nic.eqs.doorbell(page, off, _be(value, 4))
    raise ModelError(f"UAR page {page} store of {size} bytes at {off:#x}: no doorbell there (0x20 CQ, 0x40/0x48 EQ: 32-bit, "
                     "0x800/0x900 send: 64-bit)")

  def write_many(self, offset: int, size: int, values: list[int]) -> None:
    """Stores in a row: a BlueFlame copy (a send doorbell, then the rest of its WQE in the same register) is checked as
    one block, as its 8-byte stores one by one would be."""
    page, off = divmod(offset, UAR_PAGE)
    reg, within = divmod(off - BF_0, BF_SIZE)
    with self.nic.lock:
      if size != 8 or page == 0 or page not in self.nic.hca.uars or not 0 <= reg < 2 or within + 8 * len(values) > BF_SIZE:
        for i, v in enumerate(values): self.write(offset + size * i, size, v)
        return
      start = 0
      if not within:
        self.write(offset, 8, values[0])
        start, within = 1, 8
      if values[start:]: self.nic.blueflame.store(page, reg, within, struct.pack(f"<{len(values) - start}Q", *values[start:]))

  def _init_segment(self, offset: int, value: int) -> None:
    nic = self.nic
    if offset == CMDQ_ADDR_H: nic.cmdq.addr_h = value
    elif offset == CMDQ_ADDR_L_SZ:
      if value & 0xF00: raise ModelError(f"cmdq_addr_l_sz {value:#010x}: bits 8-11 (nic_interface) must be 0 (full driver)")
      nic.cmdq.addr_l = value & ~0xFFF
      nic.initializing = 1
    elif offset == CMD_DBELL:
      if nic.initializing: raise ModelError("command doorbell while the firmware is initializing (init segment 0x1fc bit 31)")
      nic.cmdq.doorbell(value)
    else: raise ModelError(f"init segment write of {value:#x} at {offset:#x}: read-only or no register")


class CX6DX(NICFunction):
  kind, layout, magic, version, mac_prefix = "mlx5", DeviceState, STATE_MAGIC, STATE_VERSION, bytes((0x02, 0x15, 0xB3, 0))

  def __init__(self, bus: str = "mock-0", index: int = 0, path: str | None = None, wire_host: str = "127.0.0.1",
               wire_port: int = 0, wire_faults: str | None = None):
    super().__init__(bus, (VENDOR_ID, DEVICE_ID, CLASS_ETHERNET, REVISION), index, path, wire_host, wire_port, wire_faults)
    self.stale = bool(self.state.enabled)
    if self.stale: self.log("opened after a driver that left the HCA enabled: reset the function first")
    self.initializing = 1
    self.cmdq = CommandQueue(self)
    self.hca, self.pages = HCA(self), Pages(self)
    self.eqs, self.cqs, self.mkeys, self.qps = EQs(self), CQs(self), MKeys(self), QPs(self)
    self.blueflame = BlueFlame()
    self.bars[0] = BAR0(self)
    self.config[PCI_COMMAND] |= PCI_COMMAND_MEMORY
    self.save()

  def init_segment(self, offset: int) -> int:
    if offset == FW_REV: return FW_VERSION[1] << 16 | FW_VERSION[0]
    if offset == CMDIF_REV_FW_SUB: return CMDIF_REV << 16 | FW_VERSION[2]
    if offset == CMDQ_ADDR_H: return self.cmdq.addr_h
    if offset == CMDQ_ADDR_L_SZ: return self.cmdq.addr_l | LOG_SIZE << 4 | LOG_STRIDE
    if offset == CMD_DBELL: return 0
    if offset == INITIALIZING:
      busy, self.initializing = self.initializing, 0      # the firmware finishes while the driver polls
      return busy << 31
    if offset < 0x200: return 0                           # reserved and unmodelled words (health, timers) read as 0
    raise ModelError(f"BAR0 read at {offset:#x}: past the init segment (0x000-0x1ff)")

  def set_enabled(self, on: bool) -> None:
    self.state.enabled = on
    self.save()

  def destroy_objects(self) -> None:
    """TEARDOWN_HCA or FLR: every object the function holds goes."""
    self.qps.reset()
    for t in (self.mkeys, self.cqs, self.eqs): t.reset()
    for page in self.pages.slots.values(): page[:] = [False] * len(page)
    for i in list(self.port.gids): self.port.delete_gid(i)
    self.port.accept_macs = set()

  def reset(self) -> None:
    with self.lock:
      super().reset()
      self.destroy_objects()
      self.hca.reset()
      self.pages.reset()
      self.cmdq.reset()
      self.stale, self.initializing = False, 1
      self.state.resets += 1
      self.set_enabled(False)

  def close(self) -> None:
    with self.lock: self.qps.reset()
    self.port.close()


state_dir, list_states = CX6DX.state_dir, CX6DX.list_states


def _create(bus: str, index: int, **options) -> CX6DX: return CX6DX(bus, index, path=state_dir(index), **options)


# registered under hcq.models (pyproject.toml): open_model("mlx5", index) is this NIC, its state in state_dir(index)
MODEL = PCIModel("mlx5", VENDOR_ID, DEVICE_ID, CLASS_ETHERNET, "emulated ConnectX-6 Dx (hcq model)", _create, list_states)
