"""The PCI topology of one host: the functions plugged into its root complex, and where their BARs sit on the bus.

Plugging a function in assigns each of its BARs a bus address (the enumeration firmware does: 64-bit prefetchable
memory above 4 GiB, each BAR aligned to its size, PCI 3.0 6.2.5.1) by writing its BAR registers. A function's DMA to a
bus address that no host memory is mapped at is then routed peer to peer: it reaches the BAR whose window (as the
BAR registers now read) holds it, of a function with memory decoding on (PCI_COMMAND bit 1). What no BAR claims is a
bus error (an Unsupported Request completion, PCIe 3.0 2.3.1), a DMAFault naming the device that made the access.

A peer access to a register BAR (a callback region: doorbells, MMIO) reaches that function's callback as a CPU access
does (drivers/system/mmio.py): one access of 1, 2, 4 or 8 bytes, naturally aligned, inside the BAR, its value little
endian; anything else is a DMAFault, and what the callback raises (the target model's strictness) reaches the initiator.
Any change of what a bus address reaches (a function plugged in or out, a BAR moved, memory decoding switched) counts
in the DMA generation of every plugged-in function, so engines that keep host views (emu/nic/fastpath.py) drop them.
Not modelled: ACS and switch routing (every function is on one root complex that forwards peer requests); access-size
rules of memory BARs; register reads and writes that a TLP would split.
"""
from __future__ import annotations
import threading, weakref

from emu.pci import DMAFault, IORegion, PCIFunction, PCI_BASE_ADDRESS_0, PCI_COMMAND, PCI_COMMAND_MEMORY

BAR_WINDOW = 0x80_0000_0000          # where enumeration starts placing BARs: 512 GiB, above any host DMA address here
LOW_WINDOW = 0xC000_0000             # BAR5 goes below 4 GiB: the dword above its register is the CardBus CIS pointer


class Topology:
  def __init__(self, base: int = BAR_WINDOW):
    # weakly: a function the platform let go of without unplugging it (a driver that never closed) is gone from the bus
    self.base, self.functions = base, weakref.WeakSet()
    self.lock = threading.Lock()

  def plug(self, fn: PCIFunction) -> None:
    """Enumerate `fn`: its BARs get bus addresses after every BAR already placed, and its DMA routes through here."""
    with self.lock:
      if fn in self.functions: raise ValueError(f"{fn.bus} is already plugged into this topology")
      placed = [(a, fn2.bar_size(n)) for fn2 in self.functions for n, a in bar_addresses(fn2).items()]
      tops = {w: max((a + s for a, s in placed if (a >= self.base) == (w == self.base)), default=w)
              for w in (self.base, LOW_WINDOW)}
      for n in sorted(fn.bars):
        size, window = fn.bar_size(n), self.base if n < 5 else LOW_WINDOW
        addr = -(-tops[window] // size) * size
        if window == LOW_WINDOW and addr + size > 1 << 32:
          raise ValueError(f"{fn.bus} BAR{n} ({size:#x} bytes) does not fit below 4 GiB, the only place its one BAR register reaches")
        fn.config_write(PCI_BASE_ADDRESS_0 + 4 * n, 4, addr & 0xFFFFFFFF)
        if n < 5: fn.config_write(PCI_BASE_ADDRESS_0 + 4 * n + 4, 4, addr >> 32)
        tops[window] = addr + size
      self.functions.add(fn)
      fn.topology = fn.dma.topology = self
      fn.dma.initiator = fn.bus
    self.changed()

  def unplug(self, fn: PCIFunction) -> None:
    with self.lock:
      self.functions.discard(fn)
      fn.topology = fn.dma.topology = None
    self.changed()
    fn.dma.generation[0] += 1

  def changed(self) -> None:
    """What some bus address reaches has changed: every function's DMA generation counts it."""
    for fn in list(self.functions): fn.dma.generation[0] += 1

  def route(self, initiator: str, addr: int, n: int) -> tuple[memoryview | Registers, int, int]:
    """(the BAR's memory, or its Registers for a callback BAR; offset of `addr` in it; bytes of [addr, addr + n) within
    it) for a peer access by `initiator`; DMAFault when no BAR claims `addr`."""
    for fn in list(self.functions):
      if not fn.config[PCI_COMMAND] & PCI_COMMAND_MEMORY: continue
      for bar, base in bar_addresses(fn).items():
        off = addr - base
        if not 0 <= off < fn.bar_size(bar): continue
        mem = fn.bars[bar]
        if not isinstance(mem, memoryview): return Registers(initiator, f"register BAR{bar} of {fn.bus}", mem), off, min(n, mem.size - off)
        return mem, off, min(n, mem.nbytes - off)
    raise DMAFault(f"{initiator}: bus error: DMA to bus address {addr:#x} ({n} bytes): no host memory is mapped there "
                   "and no device's BAR claims it (Unsupported Request)")


class Registers:
  """A register BAR as a peer's DMA reaches it: each access is one call of the BAR's read/write callback."""
  def __init__(self, initiator: str, name: str, region: IORegion):
    self.initiator, self.name, self.region = initiator, name, region

  def _check(self, addr: int, off: int, n: int) -> None:
    if n not in (1, 2, 4, 8) or off % n or off + n > self.region.size:
      raise DMAFault(f"{self.initiator}: DMA of {n} bytes to bus address {addr:#x} reaches {self.name} at {off:#x}: registers "
                     "take one naturally aligned access of 1, 2, 4 or 8 bytes inside the BAR")

  def read(self, addr: int, off: int, n: int) -> bytes:
    self._check(addr, off, n)
    return self.region.read(off, n).to_bytes(n, "little")

  def write(self, addr: int, off: int, data: memoryview) -> None:
    self._check(addr, off, data.nbytes)
    self.region.write(off, data.nbytes, int.from_bytes(data, "little"))


def bar_addresses(fn: PCIFunction) -> dict[int, int]:
  """BAR index -> the bus address its registers hold (64-bit memory BARs: low dword flags masked off)."""
  cfg, at = fn.config, lambda n: PCI_BASE_ADDRESS_0 + 4 * n
  return {n: int.from_bytes(cfg[at(n):at(n) + (8 if n < 5 else 4)], "little") & ~0xF for n in fn.bars}


HOST = Topology()                    # the topology of this process's emulated machine (drivers/system plugs models in)
