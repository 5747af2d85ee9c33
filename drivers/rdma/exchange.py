"""What two peers tell each other to connect RC queue pairs (perftest's and rdma_cm's exchange): each side's QPN, first
PSN, GID, MAC and path MTU, and the MRs it opens to the other (address, rkey, size).

Messages are JSON objects; everything a peer sends is checked before it is used (`check`): the exact set of fields,
their types (a bool is no integer), 24-bit QPNs and PSNs, 32-bit keys, 64-bit addresses, sizes in range, hex strings
of the right length. A message that fails is a ProtocolError naming the message, the field and what it must be.
"""
from __future__ import annotations
import json
from dataclasses import dataclass
from typing import Any, Callable

from drivers.rdma.verbs import PATH_MTUS

MAX_LINE = 64 << 10        # no control message is longer; a longer line is hostile


class ProtocolError(ValueError):
  """A peer's message is not what the protocol allows."""


def _int(lo: int, hi: int, what: str) -> Callable[[Any], int]:
  def check(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi: raise ValueError(f"must be {what}, got {v!r}")
    return v
  return check


def _hex(nbytes: int, what: str) -> Callable[[Any], bytes]:
  def check(v: Any) -> bytes:
    if not isinstance(v, str) or len(v) != 2 * nbytes: raise ValueError(f"must be {what} ({2 * nbytes} hex digits), got {v!r}")
    try: return bytes.fromhex(v)
    except ValueError: raise ValueError(f"must be {what} ({2 * nbytes} hex digits), got {v!r}") from None
  return check


def choice(options: tuple, what: str) -> Callable[[Any], Any]:
  def check(v: Any) -> Any:
    if isinstance(v, bool) or v not in options: raise ValueError(f"must be {what}, got {v!r}")
    return v
  return check


def _bool(v: Any) -> bool:
  if not isinstance(v, bool): raise ValueError(f"must be true or false, got {v!r}")
  return v


def _text(v: Any) -> str:
  if not isinstance(v, str) or len(v) > 4096: raise ValueError(f"must be a string of at most 4096 characters, got {v!r}")
  return v


U24 = _int(0, (1 << 24) - 1, "a 24-bit integer")
U32 = _int(0, (1 << 32) - 1, "a 32-bit integer")
U64 = _int(0, (1 << 64) - 1, "a 64-bit integer")
GID = _hex(16, "a 16-byte GID")
MAC = _hex(6, "a 6-byte MAC address")
MTU = choice(PATH_MTUS, f"a path MTU ({', '.join(map(str, PATH_MTUS))})")
BOOL, TEXT = _bool, _text


def size(lo: int, hi: int) -> Callable[[Any], int]: return _int(lo, hi, f"a size in [{lo}, {hi}] bytes")


def decode(line: bytes | str, source: str) -> dict:
  """One JSON line -> an object (dict); anything else is a ProtocolError."""
  if len(line) > MAX_LINE: raise ProtocolError(f"{source} sent a line of {len(line)} bytes (at most {MAX_LINE})")
  try: msg = json.loads(line)
  except (ValueError, UnicodeDecodeError) as e:
    text = line if isinstance(line, str) else line.decode(errors="replace")
    raise ProtocolError(f"{source} sent invalid JSON ({e}): {text.strip()[:120]!r}") from None
  if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
    raise ProtocolError(f"{source} sent {type(msg).__name__} {str(msg)[:120]!r}, not a message object with a \"type\"")
  return msg


def check(msg: dict, fields: dict[str, Callable[[Any], Any]], source: str) -> dict:
  """The message's fields (besides "type"), each checked; missing or unknown fields are errors."""
  kind = msg["type"]
  have = set(msg) - {"type"}
  if missing := sorted(set(fields) - have): raise ProtocolError(f"{source}'s {kind!r} message lacks {', '.join(missing)}")
  if extra := sorted(have - set(fields)): raise ProtocolError(f"{source}'s {kind!r} message has unknown fields {', '.join(extra)}")
  out = {}
  for name, conv in fields.items():
    try: out[name] = conv(msg[name])
    except ValueError as e: raise ProtocolError(f"{source}'s {kind!r} message: {name} {e}") from None
  return out


@dataclass(frozen=True)
class Endpoint:
  """One side of an RC connection: its QP number, the first PSN it sends, its GID and MAC, its largest path MTU."""
  qpn: int
  psn: int
  gid: bytes
  mac: bytes
  mtu: int

  FIELDS = {"qpn": U24, "psn": U24, "gid": GID, "mac": MAC, "mtu": MTU}

  def to_json(self) -> dict:
    return {"qpn": self.qpn, "psn": self.psn, "gid": self.gid.hex(), "mac": self.mac.hex(), "mtu": self.mtu}

  @classmethod
  def from_fields(cls, f: dict) -> Endpoint: return cls(**{k: f[k] for k in cls.FIELDS})


@dataclass(frozen=True)
class RemoteMR:
  """A peer's MR opened to us: `size` bytes at `addr`, key `rkey`."""
  addr: int
  rkey: int
  size: int

  FIELDS = {"addr": U64, "rkey": U32, "size": U64}

  def to_json(self) -> dict: return {"addr": self.addr, "rkey": self.rkey, "size": self.size}

  @classmethod
  def from_fields(cls, f: dict, source: str) -> RemoteMR:
    mr = cls(f["addr"], f["rkey"], f["size"])
    if mr.addr + mr.size > 1 << 64: raise ProtocolError(f"{source}'s MR [{mr.addr:#x}, +{mr.size:#x}) runs past 2^64")
    return mr

  def contains(self, offset: int, length: int) -> bool: return 0 <= offset and offset + length <= self.size
