"""What every emulated NIC's PCI function is besides its own blocks: its lock (the driver's MMIO and the wire's receive
thread take it), its log, its persistent state (emu/state.py: a ctypes layout of the model's that starts with magic,
version and MAC, written whole by `save`), its MAC (a new state's: the model's 4-byte prefix, then the device index in
16 bits), host memory as the function reaches it (memory.py) and its RoCE port on the wire (port.py, named
"<kind>-<bus>"). A model declares `kind`, its state `layout` with `magic` and `version`, and `mac_prefix`."""
from __future__ import annotations
import ctypes, threading

from emu import state
from emu.nic.memory import HostMemory
from emu.nic.port import RoCEPort
from emu.pci import PCIFunction

LOG_LINES = 1000                # the log keeps the last this many lines


class NICFunction(PCIFunction):
  kind: str
  layout: type[ctypes.Structure]
  magic: int
  version: int
  mac_prefix: bytes

  def __init__(self, bus: str, ids: tuple[int, int, int, int], index: int, path: str | None, wire_host: str, wire_port: int,
               wire_faults: str | None):
    """`ids`: vendor id, device id, class code, revision; `path`: the state's directory (None: in memory only)."""
    super().__init__(bus, *ids)
    self.path, self.lock = path, threading.RLock()
    self.log_lines: list[str] = []
    self.state = state.load_or_new(path, self.layout, self.magic, self.version)
    if not any(self.state.mac): self.state.mac[:] = self.mac_prefix + bytes((index >> 8 & 0xFF, index & 0xFF))
    self.mac = bytes(self.state.mac)
    self.dma = HostMemory(self)
    self.port = RoCEPort(f"{self.kind}-{bus}", self.mac, self.lock, wire_host, wire_port, wire_faults)

  @classmethod
  def state_dir(cls, index: int) -> str:
    """Where emulated NIC `index` keeps its state: $TMPDIR/hcq-emu/<kind>-<index>."""
    return state.state_dir(cls.kind, index)

  @classmethod
  def list_states(cls) -> list[int]:
    """Indexes of this model's emulated NICs with saved state under $TMPDIR/hcq-emu."""
    return state.saved(cls.kind, cls.layout, cls.magic, cls.version)

  def save(self) -> None:
    if self.path is not None: state.save(self.path, self.state)

  def log(self, line: str) -> None:
    self.log_lines.append(line)
    del self.log_lines[:-LOG_LINES]
