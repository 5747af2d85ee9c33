"""The copy queue: hcq Queue commands encoded as SDMA packets of the device's format module (`device.sdma_pkt`, picked
by the SDMA version: drivers/amd/ip.py)."""
from __future__ import annotations
from typing import TYPE_CHECKING

from drivers.hcq import Signal
from drivers.hcq.ring import Ring, RingQueue
if TYPE_CHECKING: from drivers.amd.device import AMDDevice


class SDMAQueue(RingQueue):
  """Each packet is added with _packet: SDMA packets never straddle the ring's end."""
  kind = "copy"
  device: AMDDevice

  @property
  def ring(self) -> Ring: return self.device.sdma_ring

  def _copy(self, dest_va: int, src_va: int, size: int) -> None:
    f = self.device.sdma_pkt
    for off in range(0, size, f.MAX_COPY):
      self._patch_point("src", len(self.words) + f.COPY_SRC_AT, 64, off)
      self._patch_point("dest", len(self.words) + f.COPY_DST_AT, 64, off)
      self._packet(f.copy_linear(dest_va + off, src_va + off, min(f.MAX_COPY, size - off)))

  def _signal(self, sig: Signal, value: int) -> None:
    f = self.device.sdma_pkt
    self._patch_point("value", len(self.words) + f.WRITE_DATA_AT, 64)
    self._packet(f.write_u64(sig.va, value))

  def _wait(self, sig: Signal, value: int) -> None:
    """POLL_REGMEM compares one dword, so a 64-bit sig >= value is: the high dword >= value's, then, only if it
    equals value's (COND_EXE), the low dword >= value's. One ring unit, so COND_EXE's skip never crosses ring padding.
    Exact for a signal that reaches the value in its window of 2^32; one that leaps from below the value to a later
    window with a smaller low dword while the queue polls the low dword stalls it until the low dword gets there."""
    f = self.device.sdma_pkt
    hi, lo = value >> 32, value & 0xFFFFFFFF
    high, low = f.poll_mem(sig.va + 4, hi, f.POLL_GE), f.poll_mem(sig.va, lo, f.POLL_GE)
    cond = f.cond_exe(sig.va + 4, hi, len(low))
    value_at, ref_at = f.POLL_VALUE_AT, f.COND_REFERENCE_AT
    self._patch_point("value", ((len(self.words) + value_at, 32), (len(self.words) + len(high) + ref_at, 32),
                                (len(self.words) + len(high) + len(cond) + value_at, 0)), 64)
    self._packet(high + cond + low)

  def poll(self, va: int, value: int, at_least: bool = False) -> SDMAQueue:
    """Stall the queue until the dword at `va` equals `value` (at_least: is >= value) (POLL_REGMEM on memory)."""
    f = self.device.sdma_pkt
    self._packet(f.poll_mem(va, value, f.POLL_GE if at_least else f.POLL_EQ))
    return self

  def fence(self, va: int, value: int) -> SDMAQueue:
    """Write the dword `value` at `va` once the packets before it are done (FENCE)."""
    self._packet(self.device.sdma_pkt.fence(va, value))
    return self

  def _timestamp(self, sig: Signal) -> None:
    self._packet(self.device.sdma_pkt.timestamp(sig.timestamp_va))
