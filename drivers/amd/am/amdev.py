"""AMDev: an AMD GPU driven from userspace through its PCI function (the "AM" driver).

Opening runs the boot state machine of reference/amd_driver.md 2.4: discovery and firmware (init_sw),
then either a partial boot (the GPU is already running our firmware and was left clean) or a full boot
(mode-1 reset if the firmware is alive, then SOC -> GMC -> IH -> PSP -> SMU), then GFX -> SDMA, clocks and
clock gating. SCRATCH_REG7 marks "AM booted this GPU", SCRATCH_REG6 "a driver is running / ended dirty".
"""
from __future__ import annotations
import time

import numpy as np

from autogen.amd import gc_11_0_0 as gc, nbio_4_3_0 as nbio, mp_13_0_0 as mp
from drivers.system.pci import PCIDevice
from drivers.amd.am import discovery, firmware
from drivers.amd.am.mm import MemoryManager
from drivers.amd.am.soc import SOC
from drivers.amd.am.gmc import GMC
from drivers.amd.am.ih import IH
from drivers.amd.am.psp import PSP
from drivers.amd.am.smu import SMU
from drivers.amd.am.gfx import GFX
from drivers.amd.am.sdma import SDMA

AM_VERSION = 0xA0000008        # SCRATCH_REG7 value meaning "booted by this driver version"
MEMSIZE_DWORD = nbio.regRCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE.offset + 0xD20   # readable before discovery (NBIO seg 2)
REG_MODULES = {"GC": gc, "NBIO": nbio, "MP0": mp, "MP1": mp}
TIMEOUT_S = 10


class NotBootedError(RuntimeError):
  """A monitor attached to a GPU the AM driver has not booted."""


class AMDev:
  def __init__(self, pci: PCIDevice, reset: bool = False, monitor: bool = False):
    """Boot the GPU behind `pci`; with monitor=True only attach to one an AM driver booted, writing nothing but
    SMU mailbox messages (what am_smi does while another process owns the device)."""
    self.pci = pci
    self.mmio, self.doorbells, self.vram_bar = pci.map_bar(5), pci.map_bar(2), pci.map_bar(0)
    self.vram_size = self.mmio.read32(MEMSIZE_DWORD * 4) << 20
    if self.vram_bar.size < self.vram_size:
      raise RuntimeError(f"{pci.bus}: BAR0 is {self.vram_bar.size >> 20} MiB but VRAM is {self.vram_size >> 20} MiB; the AM driver "
                         "needs a large BAR: enable Resizable BAR (Above 4G decoding) in the BIOS")
    self.vram = np.frombuffer(self.vram_bar.view, np.uint8)
    blob = bytes(self.vram[self.vram_size - discovery.DISCOVERY_TMR_SIZE:][:discovery.DISCOVERY_READ])
    self.ip = discovery.parse(blob)
    self.bases, self.versions = self.ip.bases, self.ip.versions
    if self.versions["GC"][0] != 11: raise RuntimeError(f"{pci.bus}: GC {self.versions['GC']} is not supported (gfx11 only)")
    if monitor and self.rreg("GC", gc.regSCRATCH_REG7) != AM_VERSION:
      raise NotBootedError(f"{pci.bus} has not been booted by the AM driver (open it with PCI+AMD first)")
    self.fw = None if monitor else firmware.load(self.versions)
    self.is_err_state = False
    # the boot-time allocations come out in the same places every time: a monitor finds the SMU table where the
    # owner put it (it must not clear anything, so nothing it allocates is zeroed)
    self.mm = MemoryManager(self.vram, self.vram_size, clear=not monitor)
    self.soc, self.gmc, self.ih, self.psp = SOC(self), GMC(self), IH(self), PSP(self)
    self.smu, self.gfx, self.sdma = SMU(self), GFX(self), SDMA(self)
    if not monitor: self.boot(reset)

  # --- registers: dword address = IP segment base + offset; beyond BAR5 through the RSMU index/data pair
  def addr(self, ip: str, reg) -> int: return reg.addr(self.bases[ip])

  def rreg(self, ip: str, reg) -> int: return self.rdword(self.addr(ip, reg))

  def wreg(self, ip: str, reg, value: int | None = None, **fields: int) -> None:
    self.wdword(self.addr(ip, reg), reg.encode(**fields) if value is None else value)

  def rmw(self, ip: str, reg, **fields: int) -> None:
    v = self.rreg(ip, reg)
    for name, x in fields.items(): v = (v & ~reg.mask(name)) | (x << reg.fields[name][0])
    self.wreg(ip, reg, v)

  def rdword(self, a: int) -> int:
    if a * 4 < self.mmio.size: return self.mmio.read32(a * 4)
    self.wreg("NBIO", nbio.regBIF_BX_PF0_RSMU_INDEX, a * 4)
    return self.rreg("NBIO", nbio.regBIF_BX_PF0_RSMU_DATA)

  def wdword(self, a: int, v: int) -> None:
    if a * 4 < self.mmio.size: return self.mmio.write32(a * 4, v & 0xFFFFFFFF)
    self.wreg("NBIO", nbio.regBIF_BX_PF0_RSMU_INDEX, a * 4)
    self.wreg("NBIO", nbio.regBIF_BX_PF0_RSMU_DATA, v & 0xFFFFFFFF)

  def wait(self, ip: str, reg, mask: int, value: int, what: str, timeout: float = TIMEOUT_S) -> int:
    """Poll until (reg & mask) == value; TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while ((v := self.rreg(ip, reg)) & mask) != value:
      if time.monotonic() > deadline:
        raise TimeoutError(f"{self.pci.bus}: {what} timeout ({reg.name} = {v:#x}, waiting for {value:#x} under mask {mask:#x})")
      time.sleep(1e-4)
    return v

  # --- addresses
  @property
  def fb_base(self) -> int: return self.gmc.fb_base

  def mc(self, paddr: int) -> int:
    """The MC address of a VRAM offset (what firmware-facing pointers hold)."""
    return self.fb_base + paddr

  def hdp_flush(self) -> None: self.soc.hdp_flush()

  # --- boot
  def boot(self, force_reset: bool) -> None:
    partial = self.rreg("GC", gc.regSCRATCH_REG7) == AM_VERSION and not force_reset
    if partial and (self.rreg("GC", gc.regSCRATCH_REG6) != 0 or self.rreg("GC", gc.regGCVM_L2_PROTECTION_FAULT_STATUS) != 0):
      partial = False   # the last driver instance died or the device faulted: malformed state, boot from scratch
    self.partial_boot, self.mode1_reset_done = partial, False
    if not partial:
      if self.psp.sos_alive() and self.smu.alive():   # firmware of an earlier instance still running: reset it all
        self.pci.write_config(4, 2, self.pci.read_config(4, 2) & ~0x4)   # no DMA while the GPU resets
        self.smu.mode1_reset()
        self.mode1_reset_done = True
        time.sleep(0.05)
      self.pci.enable_bus_master()
      for block in (self.soc, self.gmc, self.ih, self.psp, self.smu): block.init_hw()
    else: self.pci.enable_bus_master()
    self.mm.booting = False
    self.gfx.init_hw()
    self.sdma.init_hw()
    self.smu.set_clocks(-1)
    self.soc.set_clockgating()
    self.gfx.set_clockgating()
    self.wreg("GC", gc.regSCRATCH_REG7, AM_VERSION)
    self.wreg("GC", gc.regSCRATCH_REG6, 1)

  def fini(self) -> None:
    """Stop the engines and mark the device clean (or faulted) for the next driver instance."""
    try:
      self.gfx.fini_hw()
      self.sdma.fini_hw()
      self.smu.set_clocks(0)
      self.ih.drain()
    finally: self.wreg("GC", gc.regSCRATCH_REG6, int(self.is_err_state))
