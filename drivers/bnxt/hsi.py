"""The hardware/software interface as the driver uses it: structs from autogen.bnxt (bnxt_hsi.h, roce_hsi.h) filled by
field name, and the names of commands, error codes and completion statuses for messages."""
from __future__ import annotations
import ctypes, struct
from typing import Callable

from autogen import bnxt as bnxt_hsi


def encode(cls: type[ctypes.Structure], **fields) -> bytes:
  """`cls` with `fields` set, the rest zero. Array fields (MAC addresses, GIDs, a u64 split into two u32s) take bytes,
  or an int stored little-endian across the whole field."""
  s = cls()
  for name, value in fields.items():
    if (f := getattr(cls, name, None)) is None: raise AttributeError(f"{cls.__name__} has no field {name!r}")
    if isinstance(value, int) and issubclass(dict(cls._fields_)[name], ctypes.Array): value = value.to_bytes(f.size, "little")
    if isinstance(value, (bytes, bytearray)):
      if len(value) > f.size: raise ValueError(f"{cls.__name__}.{name} holds {f.size} bytes, not {len(value)}")
      ctypes.memmove(ctypes.addressof(s) + f.offset, bytes(value), len(value))
    else: setattr(s, name, value)
  return bytes(s)


class Packer:
  """Writes (or reads) the fields `names` (in offset order) of `cls` in a buffer with one struct call, leaving its other
  bytes as they are: for the datapath (WQEs, CQEs), where a ctypes structure costs microseconds per entry."""
  CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}

  def __init__(self, cls: type[ctypes.Structure], names: str):
    fmt, at = "<", 0
    for name in names.split():
      f = getattr(cls, name)
      if f.offset < at: raise ValueError(f"{cls.__name__}.{name}: fields must be named in offset order")
      fmt, at = fmt + "x" * (f.offset - at) + self.CODES[f.size], f.offset + f.size
    self.struct = struct.Struct(fmt)

  def pack_into(self, buf: bytearray | memoryview, offset: int, *values: int) -> None:
    self.struct.pack_into(buf, offset, *values)

  def unpack_from(self, buf: bytes | memoryview, offset: int = 0) -> tuple[int, ...]:
    return self.struct.unpack_from(buf, offset)


def decode(cls: type[ctypes.Structure], data: bytes | memoryview) -> ctypes.Structure:
  return cls.from_buffer_copy(bytes(data[:ctypes.sizeof(cls)]))


def _names(prefix: str, ok: Callable[[str], bool] = lambda n: True) -> dict[int, str]:
  out: dict[int, str] = {}
  for k, v in vars(bnxt_hsi).items():
    if k.startswith(prefix) and isinstance(v, int) and not k.endswith("_LAST") and ok(k[len(prefix):]):
      out.setdefault(v, k[len(prefix):])
  return out


# HWRM_<NAME> for every command with an input struct; HWRM_ERR_CODE_<NAME>
HWRM_COMMANDS = _names("HWRM_", lambda n: hasattr(bnxt_hsi, f"hwrm_{n.lower()}_input"))
HWRM_ERRORS = _names("HWRM_ERR_CODE_")
# RCFW opcodes (CMDQ_BASE_OPCODE_<NAME>) and completion statuses
RCFW_COMMANDS = _names("CMDQ_BASE_OPCODE_")
REQ_STATUS = _names("CQ_REQ_STATUS_")
RES_RC_STATUS = _names("CQ_RES_RC_STATUS_")
