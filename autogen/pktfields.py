"""Packets described by `<PREFIX><PKT>_<DWORD>_<field>_{offset,mask,shift}` triples, as sdma_v6_0_0_pkt_open.h
(autogen.amd.sdma_v6_0_0_pkt_open) describes SDMA packets: encode a packet from field values, read a field."""
from __future__ import annotations
from types import ModuleType
from typing import Sequence


def _triple(mod: ModuleType, name: str) -> tuple[int, int, int]:
  try: return tuple(getattr(mod, f"{name}_{k}") for k in ("offset", "mask", "shift"))  # type: ignore[return-value]
  except AttributeError: raise ValueError(f"{mod.__name__} has no packet field {name}") from None


def get(mod: ModuleType, name: str, words: Sequence[int]) -> int:
  """Field `name` (e.g. SDMA_PKT_COPY_LINEAR_COUNT_count) of the packet in `words`."""
  off, mask, shift = _triple(mod, name)
  return (int(words[off]) >> shift) & mask


def encode(mod: ModuleType, prefix: str, ndw: int, **fields: int) -> list[int]:
  """An `ndw`-dword packet with each `<DWORD>_<field>=value` of packet `prefix` set (others 0)."""
  words = [0] * ndw
  for name, v in fields.items():
    off, mask, shift = _triple(mod, f"{prefix}_{name}")
    if not 0 <= v <= mask: raise ValueError(f"{prefix}_{name} is {mask.bit_length()} bit(s) wide; {v:#x} does not fit")
    words[off] |= v << shift
  return words
