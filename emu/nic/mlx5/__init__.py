"""The emulated ConnectX-6 Dx (mlx5) RoCEv2 NIC: cx6dx.py is the PCI function (init segment, UAR pages, persistence),
cmdq.py the command interface (slots, mailbox chains, status and syndrome), hca.py the HCA life cycle commands,
pages.py the firmware's page ownership, eq.py / cq.py / mkey.py / qp.py the objects, wqe.py the send and receive
queue formats, buffer.py the paged host buffers they live in. Each module's docstring says what it checks and what it
leaves out."""
import zlib

from emu.pci import ModelError

__all__ = ["ModelError", "CommandFailed", "syndrome"]


class CommandFailed(Exception):
  """A command the firmware refuses: `status` (MLX5_CMD_STAT_*) and a syndrome. Firmware syndromes are opaque 32-bit
  values; this model's are the CRC-32 of a short reason key (`syndrome(key)`), so tests can name the check."""
  def __init__(self, status: int, key: str, detail: str = ""):
    super().__init__(f"{key}: {detail}" if detail else key)
    self.status, self.key, self.syndrome = status, key, syndrome(key)


def syndrome(key: str) -> int:
  """The syndrome this model's firmware reports for the check named `key`."""
  return zlib.crc32(key.encode())
