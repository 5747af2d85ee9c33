"""The emulated BCM57508 (NetXtreme-E, "Thor") as the PCI function a userspace bnxt driver brings up from cold.

PCI: vendor 0x14E4, device 0x1750, class 0x020000 (Ethernet). BARs:
  0  registers (64 KiB, aligned 32-bit accesses): the HWRM request window 0x000-0x07F and its trigger 0x100 (write 1;
     hwrm.py), the RCFW mailbox 0x600-0x60F and the CMDQ trigger 0x700 (rcfw.py). Any other offset, or a trigger
     value other than 1, raises ModelError naming it; the trigger registers read as 0.
  2  doorbells (1 MiB, aligned 64-bit stores only, write-only): 64 KiB of L2 doorbells, then 4 KiB RoCE doorbell pages
     (datapath.py).
DMA needs PCI_COMMAND bus mastering: without it every device access to host memory faults.

The port is a WirePort on the loopback network (emu/nic/port.py, wire.py), bound when the function is opened; options
wire_host (a 127.0.0.0/8 address, default 127.0.0.1), wire_port (default 0: an ephemeral port) and wire_faults (a
HCQ_WIRE_FAULTS-style plan). Its MAC is 02:10:18:00:HH:LL for device index 0xHHLL.

Persistent state (`path` given: $TMPDIR/hcq-emu/bnxt-<index>/ from `state_dir`; `path=None` keeps it in memory): one
file `state` (the DeviceState layout below: magic, layout version, MAC, PHY loopback mode, whether a driver is
registered, whether the function holds firmware resources, FLR count), written whenever one of them changes, so a
process killed with -9 leaves it as it was. What a driver allocated (rings, contexts, QPs, CQs, MRs, GIDs) lived in that
driver's DMA memory and dies with its process; the next process to open the device must FUNC_RESET before using it
(hwrm.py). One process at a time: drivers/system holds the device lock while a model is open. A PCI function reset
(FLR, `reset()`) clears bus mastering, every function resource and the PHY loopback.
"""
from __future__ import annotations
from ctypes import Structure, c_uint8, c_uint32

from common.plugin import PCIModel
from emu.pci import PCI_COMMAND, PCI_COMMAND_MEMORY, ModelError, Region, Access
from emu.nic.function import NICFunction
from emu.nic.bnxt.backing import BackingStore
from emu.nic.bnxt.datapath import RoCEEngine
from emu.nic.bnxt.hwrm import HWRM, WINDOW, TRIGGER, MAX_REQ_LEN, L2_DB_SIZE_KB
from emu.nic.bnxt.rcfw import RCFW, MAILBOX, TRIGGER as CMDQ_TRIGGER

VENDOR_ID, DEVICE_ID, REVISION, CLASS_ETHERNET = 0x14E4, 0x1750, 0x11, 0x020000
REGISTER_BAR_SIZE, DOORBELL_BAR_SIZE = 64 << 10, 1 << 20
STATE_MAGIC, STATE_VERSION = 0x54584E42, 1       # "BNXT"
LPBK_NONE, LPBK_LOCAL = 0, 1


class DeviceState(Structure):
  _fields_ = [("magic", c_uint32), ("version", c_uint32), ("mac", c_uint8 * 6), ("lpbk", c_uint8), ("registered", c_uint8),
              ("needs_reset", c_uint8), ("pad", c_uint8 * 3), ("resets", c_uint32)]


class Registers(Region):
  """BAR0: the HWRM window and trigger, the RCFW mailbox and CMDQ trigger."""
  name, size, valid = "BAR0", REGISTER_BAR_SIZE, (Access("registers", 4, 4),)

  def __init__(self, nic: BCM57508): self.nic = nic

  def _read(self, offset: int, size: int) -> int:
    with self.nic.lock:
      if WINDOW <= offset < WINDOW + MAX_REQ_LEN: return self.nic.hwrm.window_read(offset - WINDOW)
      if MAILBOX <= offset < MAILBOX + 16: return self.nic.rcfw.mailbox_read((offset - MAILBOX) // 4)
      if offset in (TRIGGER, CMDQ_TRIGGER): return 0
    raise ModelError(f"BAR0 read at {offset:#x}: no register there (HWRM window 0x0-0x7f, trigger 0x100, RCFW 0x600-0x60f, 0x700)")

  def _write(self, offset: int, size: int, value: int) -> None:
    with self.nic.lock:
      if WINDOW <= offset < WINDOW + MAX_REQ_LEN: return self.nic.hwrm.window_write(offset - WINDOW, value)
      if offset == TRIGGER:
        if value != 1: raise ModelError(f"HWRM trigger write {value:#x}: write 1")
        return self.nic.hwrm.trigger()
      if MAILBOX <= offset < MAILBOX + 16: return self.nic.rcfw.mailbox_write((offset - MAILBOX) // 4, value)
      if offset == CMDQ_TRIGGER: return self.nic.rcfw.trigger(value)
    raise ModelError(f"BAR0 write of {value:#x} at {offset:#x}: no register there (HWRM window 0x0-0x7f, trigger 0x100, "
                     "RCFW 0x600-0x60f, 0x700)")


class Doorbells(Region):
  """BAR2: L2 doorbells, then the RoCE doorbell pages (datapath.py)."""
  name, size, valid = "BAR2", DOORBELL_BAR_SIZE, (Access("doorbells", 8, 8, readable=False),)

  def __init__(self, nic: BCM57508): self.nic = nic

  def _write(self, offset: int, size: int, value: int) -> None:
    with self.nic.lock: self.nic.roce.doorbell(offset, value)


class BCM57508(NICFunction):
  kind, layout, magic, version, mac_prefix = "bnxt", DeviceState, STATE_MAGIC, STATE_VERSION, bytes((0x02, 0x10, 0x18, 0))

  def __init__(self, bus: str = "mock-0", index: int = 0, path: str | None = None, wire_host: str = "127.0.0.1",
               wire_port: int = 0, wire_faults: str | None = None):
    super().__init__(bus, (VENDOR_ID, DEVICE_ID, CLASS_ETHERNET, REVISION), index, path, wire_host, wire_port, wire_faults)
    self.stale = bool(self.state.needs_reset)     # a previous process left firmware resources: FUNC_RESET first
    if self.stale: self.log("opened after a driver that did not FUNC_RESET or unregister: FUNC_RESET first")
    self.port.loopback = self.state.lpbk == LPBK_LOCAL
    self.l2_db_size, self.doorbell_size = L2_DB_SIZE_KB << 10, DOORBELL_BAR_SIZE
    self.backing = BackingStore(self.dma)
    self.hwrm, self.rcfw, self.roce = HWRM(self), RCFW(self), RoCEEngine(self)
    self.bars[0], self.bars[2] = Registers(self), Doorbells(self)
    self.config[PCI_COMMAND] |= PCI_COMMAND_MEMORY   # the platform enumerated it: memory decoding on
    self.save()

  # --- resets
  def function_reset(self) -> None:
    """FUNC_RESET (and UNRGTR): the function gives back everything it holds."""
    self.roce.clear()
    self.rcfw.clear()
    self.hwrm.clear()
    self.backing.clear()
    self.state.registered = self.state.needs_reset = 0
    self.stale = False
    self.save()

  def set_loopback(self, mode: int) -> None:
    self.state.lpbk = mode
    self.port.loopback = mode == LPBK_LOCAL
    self.save()

  def reset(self) -> None:
    with self.lock:
      super().reset()
      self.function_reset()
      self.state.resets += 1
      self.set_loopback(LPBK_NONE)

  def close(self) -> None:
    """The driver process is done: its port leaves the wire (the state stays in its file)."""
    with self.lock:
      for qp in self.roce.qps.values(): qp.rc.modify("RESET")
    self.port.close()


state_dir, list_states = BCM57508.state_dir, BCM57508.list_states


def _create(bus: str, index: int, **options) -> BCM57508: return BCM57508(bus, index, path=state_dir(index), **options)


# registered under hcq.models (pyproject.toml): open_model("bnxt", index) is this NIC, its state in state_dir(index)
MODEL = PCIModel("bnxt", VENDOR_ID, DEVICE_ID, CLASS_ETHERNET, "emulated BCM57508 NetXtreme-E (hcq model)", _create, list_states)
