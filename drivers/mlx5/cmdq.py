"""The command queue (kernel mlx5_core cmd.c; include/linux/mlx5/device.h mlx5_cmd_layout, mlx5_cmd_prot_block).

One 4 KiB page of 64-byte command slots (the init segment says how many and their stride) plus a pool of 1 KiB
mailbox blocks: inputs past 16 bytes and outputs past 16 bytes go through chains of 512-byte data blocks, each with the
next block's address, its number and the command's token. A chain is a linked list of any length (inlen and outlen are
32-bit): a command that needs more blocks than the pool has (CREATE_MKEY of a large MR) gets a chain of its own for its
run, as the kernel allocates messages past its caches (drivers/net/ethernet/mellanox/mlx5/core/cmd.c mlx5_alloc_cmd_msg).
A command is handed over with status_own = 1 and a doorbell bit; the firmware clears bit 0 when done, with the delivery
status in bits 1-7 and the command's status and syndrome in the first output bytes. MANAGE_PAGES uses the last slot (as
the kernel does), everything else slot 0.
"""
from __future__ import annotations

from autogen import mlx5 as mlx5_ifc, mlx5_core
from drivers.system.poll import wait_until
from drivers.mlx5.ifc import COMMANDS, DELIVERY, CommandError, swap32
from drivers.system.dma import DMAMemory
from drivers.system.mmio import MMIO
from drivers.system.pci import PCIDevice

CMDQ_ADDR_H, CMDQ_ADDR_L_SZ, CMD_DBELL = 0x010, 0x014, 0x018
LAYOUT, BLOCK, DATA = 64, 1024, mlx5_core.MLX5_CMD_DATA_BLOCK_SIZE
MAILBOXES = 128                     # the standing pool: 64 KiB of input and output data per command
TIMEOUT_S = 60.0


class CommandQueue:
  def __init__(self, pci: PCIDevice, bar: MMIO, name: str):
    self.pci, self.bar, self.name = pci, bar, name
    sz = swap32(bar.read32(CMDQ_ADDR_L_SZ)) & 0xFF
    self.log_stride, self.slots = sz & 0xF, 1 << (sz >> 4 & 0xF)
    if (1 << self.log_stride) < LAYOUT or self.slots < 2:
      raise RuntimeError(f"{name}: the init segment reports {self.slots} command slots of {1 << self.log_stride} bytes")
    self.page = pci.alloc_dma(4096)
    self.mbox = pci.alloc_dma(MAILBOXES * BLOCK)
    self.token = 0
    addr = self.page.bus_addr(0)
    bar.write32(CMDQ_ADDR_H, swap32(addr >> 32))
    bar.write32(CMDQ_ADDR_L_SZ, swap32(addr & 0xFFFFF000))

  def _chain(self, mbox: DMAMemory, first: int, data: bytes, nblocks: int) -> None:
    v = mbox.view
    for i in range(nblocks):
      b = (first + i) * BLOCK
      nxt = mbox.bus_addr((first + i + 1) * BLOCK) if i + 1 < nblocks else 0
      v[b:b + BLOCK] = bytes(BLOCK)
      chunk = data[i * DATA:(i + 1) * DATA]
      v[b:b + len(chunk)] = chunk
      v[b + 560:b + 568] = nxt.to_bytes(8, "big")
      v[b + 568:b + 572] = i.to_bytes(4, "big")
      v[b + 573] = self.token

  def exec(self, inp: bytes, outlen: int) -> bytes:
    """Run one command (`inp`: its input bytes); its output bytes, or CommandError with its status and syndrome."""
    opcode, op_mod = int.from_bytes(inp[0:2], "big"), int.from_bytes(inp[6:8], "big")
    nin, nout = -(-max(0, len(inp) - 16) // DATA), -(-max(0, outlen - 16) // DATA)
    mbox = self.mbox if nin + nout <= MAILBOXES else self.pci.alloc_dma((nin + nout) * BLOCK)
    stuck = False
    try: out = self._run(mbox, opcode, inp, outlen, nin, nout)
    except TimeoutError:
      stuck = True              # the firmware may still write a chain it never gave back: close frees it
      raise
    finally:
      if mbox is not self.mbox and not stuck: self.pci.free_dma(mbox)
    if status := out[0]: raise CommandError(self.name, opcode, status, int.from_bytes(out[4:8], "big"), op_mod)
    return out[:outlen]

  def _run(self, mbox: DMAMemory, opcode: int, inp: bytes, outlen: int, nin: int, nout: int) -> bytes:
    """The command's output bytes once the firmware gave its slot back."""
    self.token = self.token % 255 + 1
    self._chain(mbox, 0, inp[16:], nin)
    self._chain(mbox, nin, b"", nout)
    slot = self.slots - 1 if opcode == mlx5_ifc.MLX5_CMD_OP_MANAGE_PAGES else 0
    lay = bytearray(LAYOUT)
    lay[0] = mlx5_core.MLX5_PCI_CMD_XPORT
    lay[4:8] = len(inp).to_bytes(4, "big")
    lay[8:16] = mbox.bus_addr(0).to_bytes(8, "big")
    lay[16:16 + min(16, len(inp))] = inp[:16]
    lay[48:56] = mbox.bus_addr(nin * BLOCK).to_bytes(8, "big")
    lay[56:60] = outlen.to_bytes(4, "big")
    lay[60], lay[63] = self.token, mlx5_core.CMD_OWNER_HW
    base = slot << self.log_stride
    self.page.view[base:base + LAYOUT] = lay
    self.bar.write32(CMD_DBELL, swap32(1 << slot))
    v = self.page.view
    wait_until(lambda: not v[base + 63] & mlx5_core.CMD_OWNER_HW, TIMEOUT_S,
               lambda: f"{self.name}: {COMMANDS.get(opcode)} ({opcode:#x}) did not complete in {TIMEOUT_S:g} s")
    if delivery := v[base + 63] >> 1:
      raise RuntimeError(f"{self.name}: {COMMANDS.get(opcode)} ({opcode:#x}) was not delivered: delivery status "
                         f"{DELIVERY.get(delivery, '?')} ({delivery:#x})")
    return bytes(v[base + 32:base + 48]) + b"".join(bytes(mbox.view[(nin + i) * BLOCK:(nin + i) * BLOCK + DATA]) for i in range(nout))

  def close(self) -> None:
    self.pci.free_dma(self.mbox)
    self.pci.free_dma(self.page)
