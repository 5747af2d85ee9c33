"""The shared skeleton of SQTT (SQ thread trace) token streams: what every generation's format has in common.

A shader engine's trace buffer is a stream of 4-bit nibbles, the low nibble of each byte first. A token starts at any
nibble; its low bits (up to 8) say its type, and the type fixes its length in nibbles and its fields (bit offsets
from the token's first nibble, read as one little-endian number). Most tokens carry a small time delta that the reader
adds to a running clock; a generation's module lists its token types (gfx11.py). Layout facts: the open SQTT decoders
(tinygrad's renderer/amd/sqtt.py describes the gfx11/gfx12/CDNA packet types); the reading code is this project's.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Iterator


class TraceError(ValueError):
  """Bytes that are not a trace of the expected format, or tokens that do not fit the code they are mapped onto."""


@dataclass(frozen=True)
class TokenType:
  """One kind of token: `code` in the low `bits` bits identifies it; `nibbles` long; `delta` = (lowest bit, width)
  of its time delta (None: carries none) plus `delta_add`; `fields` name -> (lowest bit, width). `marker`: a bit
  pair (set, clear) that, when the first is set and the second clear, makes the token a marker without a delta."""
  name: str
  code: int
  bits: int
  nibbles: int
  delta: tuple[int, int] | None = None
  fields: dict[str, tuple[int, int]] = field(default_factory=dict)
  delta_add: int = 0
  marker: tuple[int, int] | None = None

  def get(self, word: int, name: str) -> int:
    lo, width = self.fields[name]
    return (word >> lo) & ((1 << width) - 1)

  def time_delta(self, word: int) -> int:
    if self.delta is None: return 0
    if self.marker is not None and word >> self.marker[0] & 1 and not word >> self.marker[1] & 1: return 0
    lo, width = self.delta
    return ((word >> lo) & ((1 << width) - 1)) + self.delta_add

  def encode(self, delta: int = 0, **values: int) -> int:
    """The token as an integer (its first nibble in the low bits), for writers and tests."""
    word = self.code
    if self.delta is not None:
      lo, width = self.delta
      if not 0 <= delta - self.delta_add < 1 << width: raise ValueError(f"{self.name}: delta {delta} does not fit")
      word |= (delta - self.delta_add) << lo
    elif delta: raise ValueError(f"{self.name} carries no time delta")
    for name, v in values.items():
      lo, width = self.fields[name]
      if not 0 <= v < 1 << width: raise ValueError(f"{self.name}.{name} = {v} does not fit {width} bits")
      word |= v << lo
    return word


class Format:
  """A generation's token set: the type of a token is the one whose code matches the most low bits (ties cannot
  happen: the codes are prefix-free); a nibble no type matches is `fallback` (a one-nibble filler)."""
  def __init__(self, name: str, types: list[TokenType], fallback: str):
    self.name, self.types = name, {t.name: t for t in types}
    ordered = sorted(types, key=lambda t: -t.bits)
    default = self.types[fallback]
    self.table = tuple(next((t for t in ordered if b & ((1 << t.bits) - 1) == t.code), default) for b in range(256))

  def __getitem__(self, name: str) -> TokenType: return self.types[name]

  def tokens(self, data: bytes) -> Iterator[tuple[TokenType, int, int]]:
    """(type, time, token bits) for each whole token of `data`; the clock starts at 0. A token cut off by the end of
    the data ends the stream (the hardware pads its last write with filler)."""
    end, pos, time = len(data) * 2, 0, 0
    padded, table = bytes(data) + bytes(16), self.table
    while pos < end:
      word = int.from_bytes(padded[pos >> 1:(pos >> 1) + 12], "little") >> ((pos & 1) << 2)
      t = table[word & 0xFF]
      if pos + t.nibbles > end: return
      word &= (1 << 4 * t.nibbles) - 1
      time += t.time_delta(word)
      yield t, time, word
      pos += t.nibbles


def pack(tokens: list[tuple[TokenType, int]]) -> bytes:
  """(type, token bits) pairs laid out nibble by nibble as the hardware writes them, padded with a filler nibble."""
  nib = bytearray()
  for t, word in tokens: nib += bytes((word >> 4 * i) & 0xF for i in range(t.nibbles))
  if len(nib) & 1: nib.append(0)
  return bytes(lo | hi << 4 for lo, hi in zip(nib[0::2], nib[1::2]))
