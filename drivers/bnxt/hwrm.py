"""The HWRM channel: the driver's command interface to the NIC firmware (bnxt_hsi.h; kernel bnxt_hwrm.c).

A request is an `hwrm_<name>_input` struct (header: req_type, cmpl_ring, seq_id, target_id, resp_addr) written as
little-endian dwords into BAR0's request window (GRCPF CHIMP_COMM, 128 bytes, zero-padded); writing 1 to the trigger
register (CHIMP_COMM_TRIGGER, BAR0 + 0x100) hands it to the firmware. The firmware DMAs the `hwrm_<name>_output` to
resp_addr: error_code, req_type, seq_id, resp_len, the fields, and last a `valid` byte (HWRM_RESP_VALID_KEY), which
it writes after everything else. One command is outstanding at a time; each carries the next 16-bit sequence id.
"""
from __future__ import annotations
import ctypes

from autogen import bnxt as bnxt_hsi, bnxt_re
from drivers.bnxt.hsi import HWRM_COMMANDS, HWRM_ERRORS, decode, encode
from drivers.system.poll import wait_until
from drivers.system.mmio import MMIO
from drivers.system.pci import PCIDevice

CHIMP_COMM, CHIMP_COMM_TRIGGER = 0x0, 0x100   # BAR0 (bnxt.h BNXT_GRCPF_REG_CHIMP_COMM / _TRIGGER)
TIMEOUT_S = 10.0
RESET_TIMEOUT_S = 40.0                        # FUNC_RESET waits for the function's rings and contexts to go


class HWRMError(RuntimeError):
  """The firmware answered a command with a non-zero error_code."""
  def __init__(self, name: str, req_type: int, code: int, where: str):
    self.name, self.req_type, self.code = name, req_type, code
    super().__init__(f"{where}: HWRM {name} ({req_type:#x}) failed: error {code:#x} "
                     f"({HWRM_ERRORS.get(code, 'unknown error code')})")


class HWRM:
  def __init__(self, pci: PCIDevice, bar0: MMIO):
    self.pci, self.bar0 = pci, bar0
    self.resp = pci.alloc_dma(4096)
    self.seq = 0

  def __call__(self, name: str, timeout_s: float = TIMEOUT_S, **fields) -> ctypes.Structure:
    """Send `hwrm_<name>_input` with `fields`; returns the parsed `hwrm_<name>_output`."""
    inp, out = getattr(bnxt_hsi, f"hwrm_{name}_input"), getattr(bnxt_hsi, f"hwrm_{name}_output")
    req_type = getattr(bnxt_hsi, f"HWRM_{name.upper()}")
    self.seq = (self.seq + 1) & 0xFFFF
    req = encode(inp, req_type=req_type, cmpl_ring=bnxt_re.BNXT_HWRM_NO_CMPL_RING & 0xFFFF, seq_id=self.seq,
                 target_id=bnxt_re.BNXT_HWRM_TARGET, resp_addr=self.resp.bus_addr(0), **fields)
    if len(req) > bnxt_hsi.HWRM_MAX_REQ_LEN:
      raise ValueError(f"HWRM {name} request is {len(req)} bytes; the window takes {bnxt_hsi.HWRM_MAX_REQ_LEN}")
    req += bytes(bnxt_hsi.HWRM_MAX_REQ_LEN - len(req))
    resp = self.resp.view
    resp[:] = bytes(len(resp))                # a stale valid byte must not pass for the answer
    for i in range(0, len(req), 4): self.bar0.write32(CHIMP_COMM + i, int.from_bytes(req[i:i + 4], "little"))
    self.bar0.write32(CHIMP_COMM_TRIGGER, 1)
    hdr = decode(bnxt_hsi.hwrm_resp_hdr, resp)

    def done() -> bool:
      nonlocal hdr
      hdr = decode(bnxt_hsi.hwrm_resp_hdr, resp)
      n = hdr.resp_len
      return n != 0 and hdr.seq_id == self.seq and n <= len(resp) and resp[n - 1] == bnxt_hsi.HWRM_RESP_VALID_KEY

    wait_until(done, timeout_s, lambda: f"{self.pci.bus}: HWRM {name.upper()} ({req_type:#x}) seq {self.seq}: no valid response "
               f"in {timeout_s:g} s (resp_len {hdr.resp_len}, seq_id {hdr.seq_id})")
    if hdr.error_code: raise HWRMError(name.upper(), req_type, hdr.error_code, self.pci.bus)
    if hdr.req_type != req_type:
      raise RuntimeError(f"{self.pci.bus}: HWRM {name.upper()} seq {self.seq} was answered for command {hdr.req_type:#x} "
                         f"({HWRM_COMMANDS.get(hdr.req_type, '?')})")
    return decode(out, resp)
