"""AMCore: the AM driver's boot core, an AMD GPU driven from userspace through its PCI function.

It reads the IP discovery table, lets ip_table pick a class for every IP block and helper from the discovered
versions, and runs a boot state machine (tinygrad's am/amdev.py) over the blocks (lifecycle: ip_block.py):
  sw_init of every block (after the firmware files are read), then
  - partial boot, when SCRATCH_REG7 says this driver booted the GPU and SCRATCH_REG6 says the last instance closed
    cleanly and no fault is pending: resume() of every block;
  - full boot otherwise: a mode-1 reset when the firmware of an earlier instance is still alive, then hw_init() of
    every block (SOC -> GMC -> IH -> PSP -> SMU -> GFX -> SDMA);
  then late_init() (clocks) and set_clockgating() of every block, and the boot marks. fini() runs hw_fini() in reverse.
With monitor=True (am_smi) it only attaches to a GPU an AM driver booted: sw_init (which finds the boot-time
structures where the owner put them) and no write but SMU mailbox messages.
"""
from __future__ import annotations
import time

from autogen.pci import PCI_COMMAND, PCI_COMMAND_MASTER
from drivers.system.pci import PCIDevice
from drivers.amd.am import discovery, ip_table
from drivers.amd.am.mm import MemoryManager

AM_VERSION = 0xA0000008        # SCRATCH_REG7 value meaning "booted by this driver version"
# RCC_CONFIG_MEMSIZE (VRAM in MiB) sits at a fixed dword address on every generation, read before discovery gives the
# segment bases (amdgpu_discovery.c: mmRCC_CONFIG_MEMSIZE 0xde3)
MEMSIZE_DWORD = 0xDE3
MODE1_RESET_WAIT_S = 0.05      # the SMU restarts itself after a mode-1 reset and answers nothing meanwhile
TIMEOUT_S = 10


class NotBootedError(RuntimeError):
  """A monitor attached to a GPU the AM driver has not booted."""


class AMCore:
  def __init__(self, pci: PCIDevice, reset: bool = False, monitor: bool = False):
    """Boot the GPU behind `pci`; with monitor=True only attach to one an AM driver booted, writing nothing but
    SMU mailbox messages (what am_smi does while another process owns the device)."""
    self.pci = pci
    self.mmio, self.doorbells, self.vram_bar = pci.map_bar(5), pci.map_bar(2), pci.map_bar(0)
    self.vram_size = self.mmio.read32(MEMSIZE_DWORD * 4) << 20
    if self.vram_bar.size < self.vram_size:
      raise RuntimeError(f"{pci.bus}: BAR0 is {self.vram_bar.size >> 20} MiB but VRAM is {self.vram_size >> 20} MiB; the AM driver "
                         "needs a large BAR: enable Resizable BAR (Above 4G decoding) in the BIOS")
    self.vram = self.vram_bar.as_array()      # VRAM as bytes: the mapped BAR, or accesses through the bus (USB)
    top = self.vram_size - discovery.DISCOVERY_TMR_SIZE
    self.ip = discovery.parse(bytes(self.vram[top:top + discovery.DISCOVERY_READ]))
    self.bases, self.versions = self.ip.bases, self.ip.versions
    blocks, helpers = ip_table.instantiate(self)
    self.pte = ip_table.PTE.pick(self.versions["GC"])   # the page-table entry layout
    self.nbio, self.hdp, self.mmhub, self.gfxhub = helpers["NBIO"], helpers["HDP"], helpers["MMHUB"], helpers["GFXHUB"]
    self.blocks = list(blocks.values())           # init order
    self.soc, self.gmc, self.ih, self.psp = blocks["SOC"], blocks["GMC"], blocks["IH"], blocks["PSP"]
    self.smu, self.gfx, self.sdma = blocks["SMU"], blocks["GFX"], blocks["SDMA"]
    if monitor and self.gfx.marks()[0] != AM_VERSION:
      raise NotBootedError(f"{pci.bus} has not been booted by the AM driver (open it with PCI+AMD first)")
    self.fw = None if monitor else ip_table.FIRMWARE.pick(self.versions["GC"]).load(self.versions)
    self.is_err_state = False
    # the boot-time allocations come out in the same places every time: a monitor finds the SMU table where the
    # owner put it (it must not clear anything, so nothing it allocates is zeroed)
    self.mm = MemoryManager(self.vram, self.vram_size, self.pte, clear=not monitor)
    for block in self.blocks: block.sw_init()
    self.mm.booting = False
    if not monitor: self.boot(reset)

  # --- registers: dword address = IP segment base + offset; beyond BAR5 through NBIO's RSMU index/data pair
  def addr(self, ip: str, reg) -> int: return reg.addr(self.bases[ip])

  def rreg(self, ip: str, reg) -> int: return self.rdword(self.addr(ip, reg))

  def wreg(self, ip: str, reg, value: int | None = None, **fields: int) -> None:
    self.wdword(self.addr(ip, reg), reg.encode(**fields) if value is None else value)

  def rmw(self, ip: str, reg, **fields: int) -> None:
    v = self.rreg(ip, reg)
    for name, x in fields.items(): v = (v & ~reg.mask(name)) | (x << reg.fields[name][0])
    self.wreg(ip, reg, v)

  def rdword(self, a: int) -> int:
    return self.mmio.read32(a * 4) if a * 4 < self.mmio.size else self.nbio.indirect_read(a)

  def wdword(self, a: int, v: int) -> None:
    if a * 4 < self.mmio.size: self.mmio.write32(a * 4, v & 0xFFFFFFFF)
    else: self.nbio.indirect_write(a, v & 0xFFFFFFFF)

  def wait(self, ip: str, reg, mask: int, value: int, what: str, timeout: float = TIMEOUT_S) -> int:
    """Poll until (reg & mask) == value; TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while ((v := self.rreg(ip, reg)) & mask) != value:
      if time.monotonic() > deadline:
        raise TimeoutError(f"{self.pci.bus}: {what} timeout ({reg.name} = {v:#x}, waiting for {value:#x} under mask {mask:#x})")
      time.sleep(1e-4)
    return v

  # --- addresses
  def mc(self, paddr: int) -> int:
    """The MC address of a VRAM offset (what firmware-facing pointers hold)."""
    return self.gmc.fb_base + paddr

  def hdp_flush(self) -> None: self.hdp.flush_hdp()

  # --- boot
  def boot(self, force_reset: bool) -> None:
    booted, running = self.gfx.marks()
    partial = booted == AM_VERSION and not force_reset
    if partial and (running != 0 or self.gfxhub.fault_status() != 0):
      partial = False   # the last driver instance died or the device faulted: malformed state, boot from scratch
    self.partial_boot, self.mode1_reset_done = partial, False
    if not partial:
      if self.psp.sos_alive() and self.smu.alive():   # firmware of an earlier instance still running: reset it all
        self.pci.write_config(PCI_COMMAND, 2, self.pci.read_config(PCI_COMMAND, 2) & ~PCI_COMMAND_MASTER)   # no DMA meanwhile
        self.smu.mode1_reset()
        self.mode1_reset_done = True
        time.sleep(MODE1_RESET_WAIT_S)
    self.pci.enable_bus_master()
    for block in self.blocks:
      if partial: block.resume()
      else: block.hw_init()
    for block in self.blocks: block.late_init()
    for block in self.blocks: block.set_clockgating()
    self.gfx.set_mark(running=1, booted=AM_VERSION)

  def fini(self) -> None:
    """Stop the engines (hw_fini in reverse init order) and mark the device clean, or faulted, for the next instance."""
    try:
      for block in reversed(self.blocks): block.hw_fini()
    finally: self.gfx.set_mark(running=int(self.is_err_state))
