"""The targets the shader core runs, by LLVM processor name: which generated ISA tables decode each one (an
autogen.amdgcn package: encodings.py, tables.py), the GC IP version of the GPUs that run it, and its wave sizes.

One core serves every target: decode, disassembly and code generation read the target's tables, and the semantics are
shared where the ISA guides say they are the same; what a target adds (RDNA3.5's scalar float instructions) comes
from its table rows. A new processor of a generation is a row here and an entry in its package's CPUS, swept with
`python -m autogen.amdgcn <isa>`; a new generation is a new autogen.amdgcn package (encodings.py, probes.py, CPUS)
named in autogen.amdgcn.ISAS.
GC version -> processor: Linux drivers/gpu/drm/amd/amdkfd/kfd_device.c (kgd2kfd_probe, gfx_target_version).
"""
from __future__ import annotations
import importlib
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType

DEFAULT = "gfx1100"   # what run() / dispatch() / decode() execute when no target is named


@dataclass(frozen=True)
class Target:
  name: str                          # LLVM processor (the -mcpu of the code it runs)
  isa: str                           # its generation's tables: autogen.amdgcn.<isa>
  gc_version: tuple[int, int, int]   # GC IP version in the IP discovery table of a GPU that runs it
  wave_sizes: tuple[int, ...]        # lanes per wave it can run (RDNA: 32 and 64)
  ttmp_tgids: bool = False           # workgroup ids in TTMP9 (x) / TTMP7 (y | z << 16), not in SGPRs after the user SGPRs
                                     # (gfx12's architected SGPRs: LLVM AMDGPUUsage, "Initial Kernel Execution State")

  @property
  def gfx_target_version(self) -> int:
    """KFD's gfx_target_version of the GPUs that run it: major * 10000 + minor * 100 + stepping (kfd_device.c, e.g. 120001)."""
    major, minor, step = self.gc_version
    return major * 10000 + minor * 100 + step

  @cached_property
  def encodings(self) -> ModuleType: return importlib.import_module(f"autogen.amdgcn.{self.isa}.encodings")

  @cached_property
  def tables(self) -> ModuleType: return importlib.import_module(f"autogen.amdgcn.{self.isa}.tables")

  @cached_property
  def ops(self) -> dict[str, dict[int, tuple]]:
    """The opcode table per family: the generation's base rows with this target's overlay applied (None rows dropped)."""
    t = self.tables
    if self.name not in t.TARGETS: raise ValueError(f"{self.name}: autogen.amdgcn.{self.isa} has no sweep of it: add it to the ISA's CPUS "
                                                    f"and run `python -m autogen.amdgcn {self.isa}`")
    overlay = t.TARGET_OPS.get(t.TARGETS[self.name] or "", {})
    return {fam: {op: e for op, e in sorted({**base, **overlay.get(fam, {})}.items()) if e is not None} for fam, base in t.OPS.items()}


TARGETS = {t.name: t for t in (
  Target("gfx1100", "gfx11", (11, 0, 0), (32, 64)),   # RDNA3: Navi31
  Target("gfx1150", "gfx11", (11, 5, 0), (32, 64)),   # RDNA3.5: Strix Point
  Target("gfx1151", "gfx11", (11, 5, 1), (32, 64)),   # RDNA3.5: Strix Halo
  Target("gfx1200", "gfx12", (12, 0, 0), (32, 64), ttmp_tgids=True),   # RDNA4: Navi44
  Target("gfx1201", "gfx12", (12, 0, 1), (32, 64), ttmp_tgids=True),   # RDNA4: Navi48
)}


def get(name: str) -> Target:
  if (t := TARGETS.get(name)) is None: raise ValueError(f"unknown target {name!r}: one of {', '.join(TARGETS)}")
  return t


def for_gc(version: tuple[int, int, int]) -> Target:
  """The target a GPU with GC IP `version` runs."""
  version = tuple(version)
  if (t := next((t for t in TARGETS.values() if t.gc_version == version), None)) is None:
    known = ", ".join(f"{'.'.join(map(str, t.gc_version))} ({t.name})" for t in TARGETS.values())
    raise ValueError(f"no shader core target runs GC {'.'.join(map(str, version))}: the core has GC {known}")
  return t
