"""QMD (queue meta data) layouts as field tables, from the generated ranges in autogen.nv.qmd (open-gpu-doc
clc6c0qmd.h, clc7c0qmd.h, clcbc0qmd.h): the driver builds QMDs from them and the GPU model decodes QMDs with them.

A field is `MW(hi:lo)`, bit positions in the QMD read as one little-endian integer (bit 0 = bit 0 of dword 0). The
headers' indexed fields (`CONSTANT_BUFFER_VALID(i)`, `RELEASE_ENABLE(i)`, ...) appear once per index, as
`CONSTANT_BUFFER_VALID_3`; value names (`..._TRUE`) stay in autogen.nv.qmd.
"""
from __future__ import annotations
from autogen.nv import compute as nv_compute, qmd as nv_qmd

# index ranges of the indexed fields, from the gaps the headers leave for them
_COUNTS = {"CONSTANT_BUFFER_": 8, "RELEASE_": 3, "DEPENDENT_QMD_": 2, "TPC_DISABLE_MASK": 18}


class QMDLayout:
  """One QMD version of one class: `prefix` such as NVCBC0_QMDV04_00, `bits` its size."""
  def __init__(self, prefix: str, bits: int):
    self.prefix, self.bits = prefix, bits
    self.fields: dict[str, tuple[int, int]] = {}
    for k, v in vars(nv_qmd).items():
      if not k.startswith(prefix + "_"): continue
      name = k[len(prefix) + 1:]
      if isinstance(v, tuple): self.fields[name] = v
      elif callable(v):
        n = next(c for p, c in _COUNTS.items() if name.startswith(p))
        for i in range(n): self.fields[f"{name}_{i}"] = v(i)
    self.used = 0                                       # bits some field covers
    for hi, lo in self.fields.values(): self.used |= ((1 << (hi - lo + 1)) - 1) << lo

  @property
  def nbytes(self) -> int: return self.bits // 8

  def value(self, name: str) -> int:
    """A value constant of a field: value("QMD_TYPE_GRID_CTA")."""
    return getattr(nv_qmd, f"{self.prefix}_{name}")

  def get(self, qmd: int, name: str) -> int:
    hi, lo = self.fields[name]
    return qmd >> lo & ((1 << (hi - lo + 1)) - 1)

  def set(self, qmd: int, name: str, v: int) -> int:
    hi, lo = self.fields[name]
    width = hi - lo + 1
    if not 0 <= v < 1 << width: raise ValueError(f"{self.prefix}_{name}: {v:#x} does not fit its {width} bits")
    return qmd & ~(((1 << width) - 1) << lo) | v << lo

  def build(self, **values: int) -> bytes:
    q = 0
    for k, v in values.items(): q = self.set(q, k, v)
    return q.to_bytes(self.nbytes, "little")


# what each compute class's QMD is (Ampere defines V03 as its newest, Hopper V04)
V03_AMPERE_A = QMDLayout("NVC6C0_QMDV03_00", 2048)
V03_AMPERE_B = QMDLayout("NVC7C0_QMDV03_00", 2048)
V04_HOPPER = QMDLayout("NVCBC0_QMDV04_00", 3072)
LAYOUTS = {nv_compute.AMPERE_COMPUTE_A: V03_AMPERE_A, nv_compute.AMPERE_COMPUTE_B: V03_AMPERE_B,
           nv_compute.HOPPER_COMPUTE_A: V04_HOPPER}   # by compute class
