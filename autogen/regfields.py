"""Registers with named bit fields, as the generated AMD register tables (autogen/amd/*) describe them.

A register's `offset` is in dwords relative to its IP block's base `base_idx` (the header's `_BASE_IDX`);
the base addresses of each IP instance come from the IP discovery table at run time, so the MMIO dword
address is `bases[base_idx] + offset` (`Reg.addr`). Fields come from the `REG__FIELD__SHIFT`/`_MASK` pairs.
"""
from __future__ import annotations
from typing import Sequence


class Reg:
  __slots__ = ("name", "offset", "base_idx", "_spec", "_fields")

  def __init__(self, offset: int | None, base_idx: int | None, fields: "str | Reg" = "", name: str = ""):
    """`fields` is a `NAME:shift:width ...` spec, or another Reg whose fields this one shares."""
    self.name, self.offset, self.base_idx = name, offset, base_idx
    self._spec = fields._spec if isinstance(fields, Reg) else fields
    self._fields: dict[str, tuple[int, int]] | None = None

  @property
  def fields(self) -> dict[str, tuple[int, int]]:
    """{field: (shift, width)} in header order (parsed on first use from the compact `NAME:shift:width` spec)."""
    if self._fields is None:
      self._fields = {n: (int(s), int(w)) for n, s, w in (f.split(":") for f in self._spec.split())}
    return self._fields

  def _field(self, name: str) -> tuple[int, int]:
    if (f := self.fields.get(name)) is None:
      raise ValueError(f"{self.name} has no field {name!r}; its fields are: {', '.join(self.fields) or '(none)'}")
    return f

  def mask(self, field: str) -> int:
    shift, width = self._field(field)
    return ((1 << width) - 1) << shift

  def encode(self, **values: int) -> int:
    """The register value with each named field set (other bits 0); a value wider than its field is an error."""
    out = 0
    for name, v in values.items():
      shift, width = self._field(name)
      if not 0 <= v < 1 << width:
        raise ValueError(f"{self.name}.{name} is {width} bit(s) wide; {v:#x} does not fit")
      out |= v << shift
    return out

  def decode(self, value: int) -> dict[str, int]:
    """Every field's value in `value`, in header order."""
    return {n: (value >> s) & ((1 << w) - 1) for n, (s, w) in self.fields.items()}

  def addr(self, bases: Sequence[int]) -> int:
    """MMIO dword address given the IP instance's segment bases (from IP discovery)."""
    if self.offset is None or self.base_idx is None: raise ValueError(f"{self.name} has fields but no register offset")
    return bases[self.base_idx] + self.offset

  def __repr__(self) -> str:
    where = "" if self.offset is None else f" offset={self.offset:#x} base_idx={self.base_idx}"
    return f"<Reg {self.name}{where} fields={len(self.fields)}>"


def name_registers(namespace: dict) -> None:
  """Give every Reg in a generated module its header name without the reg/ix/cfg prefix (used for messages)."""
  for key, v in namespace.items():
    if isinstance(v, Reg): v.name = key[3:] if key.startswith(("reg", "cfg")) else key[2:] if key.startswith("ix") else key
