"""The mlx5 command interface as the firmware serves it (kernel mlx5_core cmd.c; include/linux/mlx5/device.h
mlx5_cmd_layout, mlx5_cmd_prot_block; mlx5_ifc.h for every command's input and output).

The command queue is one 4 KiB page the driver names in the init segment (cmdq_addr_h/l): 2^LOG_SIZE slots of 2^LOG_STRIDE
bytes. A doorbell (cmd_dbell, a bit per slot) hands slots to the firmware, which executes them at once, in slot order:
- The 64-byte layout: type must be MLX5_PCI_CMD_XPORT (7), status_own bit 0 set (owned by the hardware; a slot the
  driver does not own raises ModelError). inlen bytes of input: the first 16 in the layout, the rest in a chain of
  576-byte mailbox blocks from in_ptr (512 data bytes, `next` at 560, block_num at 568, token at 573); outlen bytes of
  output the same way from out_ptr. Blocks must be 1 KiB aligned (the kernel's pool alignment), numbered 0, 1, ... and
  carry the layout's token; a chain too short for the length is a length error. Such faults are delivery errors: status_own
  bits 1-7 (MLX5_CMD_DELIVERY_STAT_*, drivers/net/ethernet/mellanox/mlx5/core/cmd.c), and the command does not run.
- The command (opcode at input bytes 0-1, op_mod at 6-7) must be one this firmware implements (else BAD_OP_ERR), inlen
  must cover its input layout and outlen its output (BAD_INP_LEN_ERR / BAD_OUTP_LEN_ERR). A refused command returns its
  status (output byte 0) and syndrome (bytes 4-7); every check's syndrome is `syndrome(key)` (emu/nic/mlx5/__init__.py).
- The firmware then gives the slot back (status_own = 0) and, where an EQ subscribed to command-completion events
  (MLX5_EVENT_TYPE_CMD), writes an EQE whose vector names the slot.
Not modelled: command signatures (the driver turns cmdif_checksum off; they are not checked), command timeouts.
"""
from __future__ import annotations
from typing import TYPE_CHECKING, Callable

from autogen import mlx5 as mlx5_ifc, mlx5_core
from autogen.bitlayout import BitLayout
from emu.nic.mlx5 import CommandFailed
from emu.pci import ModelError, DMAFault

if TYPE_CHECKING: from emu.nic.mlx5.cx6dx import CX6DX

LOG_SIZE, LOG_STRIDE = 5, 6
LAYOUT, BLOCK, BLOCK_DATA, BLOCK_ALIGN = 64, 576, mlx5_core.MLX5_CMD_DATA_BLOCK_SIZE, 1024
# MLX5_CMD_DELIVERY_STAT_* (mlx5 core cmd.c)
TOK_ERR, BAD_BLK_NUM_ERR, OUT_PTR_ALIGN_ERR, IN_PTR_ALIGN_ERR, FW_ERR, IN_LENGTH_ERR, OUT_LENGTH_ERR = 2, 3, 4, 5, 6, 7, 8
CMD_DESCR_ERR = 0x10
NAMES = {v: k[len("MLX5_CMD_OP_"):] for k, v in vars(mlx5_ifc).items() if k.startswith("MLX5_CMD_OP_") and isinstance(v, int)}


class Delivery(Exception):
  def __init__(self, code: int, why: str):
    super().__init__(why)
    self.code = code


class Command:
  """One command's input, with its layout: `c.get("qpc.pd")`, and its output buffer `c.out`."""
  def __init__(self, opcode: int, data: bytes, in_layout: BitLayout, out_layout: BitLayout, outlen: int):
    self.opcode, self.data, self.layout = opcode, data, in_layout
    self.op_mod = int.from_bytes(data[6:8], "big")
    self.out_layout, self.outlen = out_layout, outlen
    self.out = bytearray(outlen)

  def get(self, path: str) -> int: return self.layout.get(self.data, path)
  def raw(self, byte_off: int, n: int) -> bytes: return self.data[byte_off:byte_off + n]
  def put(self, path: str, value: int) -> None: self.out_layout.set(self.out, path, value)

  def need(self, nbytes: int, what: str) -> None:
    if len(self.data) < nbytes:
      raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_INP_LEN_ERR, "input shorter than its payload",
                          f"{what} needs {nbytes} input bytes, inlen is {len(self.data)}")


Handler = Callable[[Command], None]


class CommandQueue:
  def __init__(self, nic: CX6DX):
    self.nic = nic
    self.commands: dict[int, tuple[Handler, BitLayout, BitLayout]] = {}
    self.reset()

  def reset(self) -> None:
    self.addr_h = self.addr_l = 0
    self.executed: list[tuple[str, int, int]] = []        # (command, status, syndrome), the last few

  def register(self, opcode: int, handler: Handler) -> None:
    name = NAMES[opcode].lower()
    alias = {"2err_qp": "qp_2err", "2rst_qp": "qp_2rst", "access_reg": "access_register"}.get(name, name)
    self.commands[opcode] = (handler, mlx5_ifc.LAYOUTS[f"{alias}_in"], mlx5_ifc.LAYOUTS[f"{alias}_out"])

  @property
  def addr(self) -> int: return self.addr_h << 32 | (self.addr_l & ~0xFFF)

  def doorbell(self, mask: int) -> None:
    if mask >> (1 << LOG_SIZE): raise ModelError(f"command doorbell {mask:#x}: only {1 << LOG_SIZE} slots")
    if not self.addr: raise ModelError("command doorbell before the driver set the command queue address")
    for slot in range(1 << LOG_SIZE):
      if mask >> slot & 1: self._slot(slot)

  def _slot(self, slot: int) -> None:
    dma, base = self.nic.dma, self.addr + (slot << LOG_STRIDE)
    lay = bytearray(dma.read(base, LAYOUT))
    if not lay[63] & mlx5_core.CMD_OWNER_HW:
      raise ModelError(f"command doorbell for slot {slot}, which the driver has not handed over (status_own bit 0)")
    token = lay[60]
    try:
      if lay[0] != mlx5_core.MLX5_PCI_CMD_XPORT: raise Delivery(CMD_DESCR_ERR, f"layout type {lay[0]}, not {mlx5_core.MLX5_PCI_CMD_XPORT}")
      inlen, outlen = int.from_bytes(lay[4:8], "big"), int.from_bytes(lay[56:60], "big")
      in_blocks = self._chain(int.from_bytes(lay[8:16], "big"), max(0, inlen - 16), token, IN_PTR_ALIGN_ERR, IN_LENGTH_ERR)
      out_blocks = self._chain(int.from_bytes(lay[48:56], "big"), max(0, outlen - 16), token, OUT_PTR_ALIGN_ERR, OUT_LENGTH_ERR)
      data = bytes(lay[16:16 + min(inlen, 16)]) + b"".join(dma.read(b, BLOCK_DATA) for b in in_blocks)
      out = self._execute(data[:inlen], outlen)
      lay[32:48] = out[:16].ljust(16, b"\0")
      rest = out[16:]
      for i, b in enumerate(out_blocks): dma.write(b, rest[i * BLOCK_DATA:(i + 1) * BLOCK_DATA].ljust(BLOCK_DATA, b"\0"))
      lay[63] = 0
    except Delivery as d:
      self.nic.log(f"command slot {slot}: delivery error {d.code:#x}: {d}")
      lay[63] = d.code << 1
    except DMAFault as e:
      self.nic.log(f"command slot {slot}: {e}")
      lay[63] = FW_ERR << 1
    dma.write(base, bytes(lay))
    self.nic.pages.update()                     # a page request, if the command changed what the firmware needs
    self.nic.eqs.event(mlx5_core.MLX5_EVENT_TYPE_CMD, 0, (1 << slot).to_bytes(4, "big"))

  def _chain(self, ptr: int, nbytes: int, token: int, align_err: int, len_err: int) -> list[int]:
    blocks = []
    while len(blocks) * BLOCK_DATA < nbytes:
      if not ptr: raise Delivery(len_err, f"the mailbox chain ends after {len(blocks)} blocks; {nbytes} bytes need more")
      if ptr % BLOCK_ALIGN: raise Delivery(align_err, f"mailbox block at {ptr:#x} is not {BLOCK_ALIGN}-byte aligned")
      tail = self.nic.dma.read(ptr + BLOCK_DATA + 48, 16)
      if int.from_bytes(tail[8:12], "big") != len(blocks):
        raise Delivery(BAD_BLK_NUM_ERR, f"mailbox block {len(blocks)} says block_num {int.from_bytes(tail[8:12], 'big')}")
      if tail[13] != token: raise Delivery(TOK_ERR, f"mailbox block {len(blocks)} has token {tail[13]}, the command {token}")
      blocks.append(ptr)
      ptr = int.from_bytes(tail[0:8], "big")
    return blocks

  def _execute(self, data: bytes, outlen: int) -> bytes:
    opcode = int.from_bytes(data[0:2], "big") if len(data) >= 2 else -1
    name = NAMES.get(opcode, f"opcode {opcode:#x}")
    out = bytearray(max(outlen, 0))
    try:
      if opcode not in self.commands: raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_OP_ERR, "command not implemented", name)
      handler, lin, lout = self.commands[opcode]
      if len(data) < lin.nbytes: raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_INP_LEN_ERR, "inlen too short",
                                                     f"{name}: {len(data)} < {lin.nbytes}")
      if outlen < lout.nbytes: raise CommandFailed(mlx5_core.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR, "outlen too short", f"{name}: {outlen} < {lout.nbytes}")
      cmd = Command(opcode, data, lin, lout, outlen)
      handler(cmd)
      out = cmd.out
      status = synd = 0
    except CommandFailed as f:
      status, synd = f.status, f.syndrome
      self.nic.log(f"{name} failed: status {status:#x} syndrome {synd:#010x}: {f}")
    if len(out) >= 8:
      out[0], out[1:4] = status, b"\0\0\0"
      out[4:8] = synd.to_bytes(4, "big")
    self.executed.append((name, status, synd))
    del self.executed[:-64]
    return bytes(out)
