"""The lifecycle every IP block of the AM driver follows: Linux amdgpu's amd_ip_funcs (amdgpu_device.c drives the
same phases over its ip_blocks[]), reduced to what a userspace driver that keeps the firmware running needs.

AMCore (core.py) calls each phase on every block, in the order of ip_table.BLOCKS; hw_fini runs in reverse.
  sw_init()          software state and boot-region VRAM (mm.palloc(boot=True)). Reads registers at most, writes none.
                     Runs on every open, am_smi's monitor included, and allocates in the same order each time: a
                     partial boot and a monitor find the firmware-owned structures where the first boot put them.
  hw_init()          full boot: program the block from its reset state.
  resume()           partial boot: the GPU still runs this driver's firmware and the last instance closed cleanly
                     (hw_fini ran). Re-arm what hw_fini stopped; what the firmware keeps needs nothing.
  late_init()        after every block is up, on both boots (the SMU pins the clocks here).
  set_clockgating()  after late_init, on both boots (Linux: amdgpu_device_set_cg_state after late init).
  hw_fini()          close: stop what the block runs (queues, clocks, pending interrupts). The firmware stays loaded so
                     the next open can resume, which makes this hw_fini what Linux calls suspend: there is no
                     separate suspend phase.
  soft_reset()       reset the block's engines alone (GRBM_SOFT_RESET); a block calls it from its own phases
                     (resume, hw_fini); AMCore never does. The whole-GPU reset is SMU mode 1 (core.py).
A block implements the phases it has; the others do nothing.
"""
from __future__ import annotations
from typing import TYPE_CHECKING
from autogen.regfields import Reg
if TYPE_CHECKING: from drivers.amd.am.core import AMCore


class IPRegisters:
  """Access to the registers of one discovered IP (`IP`: whose segment bases their offsets use), for the blocks and
  helpers that live in it."""
  IP: str

  def __init__(self, core: AMCore):
    self.core = core

  def r(self, reg: Reg) -> int: return self.core.rreg(self.IP, reg)
  def w(self, reg: Reg, value: int | None = None, **fields: int) -> None: self.core.wreg(self.IP, reg, value, **fields)
  def rmw(self, reg: Reg, **fields: int) -> None: self.core.rmw(self.IP, reg, **fields)
  def wait(self, reg: Reg, mask: int, value: int, what: str) -> int: return self.core.wait(self.IP, reg, mask, value, what)


class IPBlock(IPRegisters):

  def sw_init(self) -> None: pass
  def hw_init(self) -> None: pass
  def resume(self) -> None: pass
  def late_init(self) -> None: pass
  def set_clockgating(self) -> None: pass
  def hw_fini(self) -> None: pass
  def soft_reset(self) -> None: pass
