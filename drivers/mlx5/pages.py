"""Pages for the firmware (QUERY_PAGES, MANAGE_PAGES; kernel mlx5_core pagealloc.c): the driver gives the 4 KiB pages
the firmware asks for (boot, init, then regular pages on page-request events) and takes them back when it returns
them; at teardown every page is reclaimed, so none stays with the device."""
from __future__ import annotations
from typing import TYPE_CHECKING

from autogen import mlx5 as mlx5_ifc
from drivers.system.dma import DMAMemory

if TYPE_CHECKING: from drivers.mlx5.device import MLX5Device

CHUNK = 512                   # pages per MANAGE_PAGES (8 bytes each: 8 mailbox blocks)


class Pages:
  def __init__(self, dev: MLX5Device):
    self.dev = dev
    self.given: dict[int, DMAMemory] = {}

  def query(self, op_mod: int) -> int:
    """The pages the firmware wants for `op_mod` (BOOT, INIT, REGULAR); negative: it has that many to return."""
    n = self.dev.cmd(mlx5_ifc.MLX5_CMD_OP_QUERY_PAGES, op_mod=op_mod).get("num_pages")
    return n - (1 << 32) if n >> 31 else n

  def satisfy(self, op_mod: int) -> None:
    n = self.query(op_mod)
    if n > 0: self.give(n)
    elif n < 0: self.reclaim(-n)

  def give(self, n: int) -> None:
    while n > 0:
      k = min(n, CHUNK)
      mems = []
      try:
        for _ in range(k): mems.append(self.dev.pci.alloc_dma(4096))
      except (MemoryError, OSError) as e:      # the firmware hears that its request failed (ALLOCATION_FAIL)
        for m in mems: self.dev.pci.free_dma(m)
        self.dev.cmd(mlx5_ifc.MLX5_CMD_OP_MANAGE_PAGES, op_mod=mlx5_ifc.MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_FAIL, input_num_entries=n, poll=False)
        raise MemoryError(f"{self.dev.name}: cannot allocate the {n} pages the firmware asked for: {e}") from e
      addrs = [m.bus_addr(0) for m in mems]
      try: self.dev.cmd(mlx5_ifc.MLX5_CMD_OP_MANAGE_PAGES, op_mod=mlx5_ifc.MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_SUCCESS,
                        input_num_entries=k, payload=b"".join(a.to_bytes(8, "big") for a in addrs))
      except BaseException:
        for m in mems: self.dev.pci.free_dma(m)
        raise
      self.given.update(zip(addrs, mems))
      n -= k

  def reclaim(self, n: int) -> int:
    """Ask for up to `n` pages back; returns how many came."""
    got = 0
    while n > 0:
      k = min(n, CHUNK)
      out = self.dev.cmd(mlx5_ifc.MLX5_CMD_OP_MANAGE_PAGES, op_mod=mlx5_ifc.MLX5_MANAGE_PAGES_IN_OP_MOD_HCA_RETURN_PAGES,
                         input_num_entries=k, outlen=16 + 8 * k)
      m = out.get("output_num_entries")
      for i in range(m):
        addr = int.from_bytes(out.raw[16 + 8 * i:24 + 8 * i], "big")
        if (mem := self.given.pop(addr, None)) is None:
          raise RuntimeError(f"{self.dev.name}: the firmware returned page {addr:#x}, which the driver never gave it")
        self.dev.pci.free_dma(mem)
      got, n = got + m, n - k
      if m < k: break
    return got
