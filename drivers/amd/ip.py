"""What serves each discovered IP version above the IP table: register modules, packet formats, the compiler target.

Both kinds of interface report the versions (AM: the IP discovery table, am/discovery.py; KFD: sysfs ip_discovery),
and AMDDevice picks once from them: `dev.regs.gc` (the GC register module), `dev.pm4` (the PM4 packet format),
`dev.sdma_pkt` (the SDMA packet format). A version is served by the row of the greatest version of the same major not
above it, as Linux shares one register header across a major's minor versions (gc_11_0_0_offset.h for every GC 11)
and one packet header across generations (nvd.h for gfx10 and later). Rows name their module, imported when picked:
only the module owning a version imports it. Another generation is rows here (gfx9 PM4 soc15d.h, SDMA 4.4 / 7.0,
GC 12 registers) and its modules; nothing else changes.
"""
from __future__ import annotations
import importlib
from types import ModuleType
from typing import Any, Mapping

Version = tuple[int, int, int]


class UnsupportedIPError(RuntimeError):
  """The IP discovery table reports an IP version this driver has nothing for."""


def vstr(version: Version) -> str: return ".".join(map(str, version))


def target(gc: Version) -> str:
  """The LLVM processor (compiler target) of a GC version: gfx<major><minor><stepping>, minor and stepping as one hex
  digit each (AMDGPUUsage: GC 11.0.0 -> gfx1100, 9.4.2 -> gfx942, 9.0.10 -> gfx90a)."""
  major, minor, step = gc
  return f"gfx{major}{minor:x}{step:x}"


class VersionTable(dict):
  """{version: what serves it} for one IP: a module path ("pkg.mod") or an object in one ("pkg.mod:name"), imported
  when picked, or the object itself (one a test or plug-in adds). Public: a row is added by assigning it."""
  def __init__(self, what: str, ip: str, rows: Mapping[Version, Any]):
    super().__init__(rows)
    self.what, self.ip = what, ip

  def row(self, version: Version) -> Version:
    """The row that serves `version`: the greatest of its major not above it."""
    fits = [v for v in self if v[0] == version[0] and v <= version]
    if not fits:
      raise UnsupportedIPError(f"this driver has no {self.what} for {self.ip} {vstr(version)} (supported: {', '.join(map(vstr, sorted(self)))})")
    return max(fits)

  def pick(self, version: Version) -> Any:
    impl = self[self.row(version)]
    if not isinstance(impl, str): return impl
    module, _, name = impl.partition(":")
    return getattr(importlib.import_module(module), name) if name else importlib.import_module(module)


# register modules (generated from Linux's <ip>_<version>_offset.h / _sh_mask.h) of the IPs the device layer programs
# through packets, by IP (the AM driver's blocks and helpers, am/ip_table.py, each import their own: the class a version
# picks brings its registers)
REGISTERS: dict[str, VersionTable] = {ip: VersionTable("register module", ip, rows) for ip, rows in {
  "GC": {(11, 0, 0): "autogen.amd.gc_11_0_0", (12, 0, 0): "autogen.amd.gc_12_0_0"},
  "NBIO": {(4, 3, 0): "autogen.amd.nbio_4_3_0", (6, 3, 1): "autogen.amd.nbif_6_3_1"},
}.items()}
# packet formats: PM4 by the GC version (nvd.h: gfx10+), SDMA by the SDMA version
# (gfx_v12_0.c includes nvd.h; sdma_v7_0.c builds its packets from sdma_v6_0_0_pkt_open.h)
PM4 = VersionTable("PM4 packet format", "GC", {(11, 0, 0): "drivers.amd.pm4_nv", (12, 0, 0): "drivers.amd.pm4_nv"})
SDMA = VersionTable("SDMA packet format", "SDMA0", {(6, 0, 0): "drivers.amd.sdma_v6_0_pkt", (7, 0, 0): "drivers.amd.sdma_v6_0_pkt"})
# thread trace and performance counters (HCQ_SQTT / HCQ_PMC: profiler.py), programmed through the GC's registers
THREAD_TRACE = VersionTable("thread-trace programming (HCQ_SQTT)", "GC", {(11, 0, 0): "drivers.amd.sqtt.capture_gfx11:ThreadTracer"})
PERF_COUNTERS = VersionTable("performance-counter programming (HCQ_PMC)", "GC", {(11, 0, 0): "drivers.amd.pmc_gfx11:PerfCounters"})


class Registers:
  """The register module of each reported IP (`gc`, `nbio`, ...: the IP name in lower case), picked once."""
  def __init__(self, versions: Mapping[str, Version]):
    self.modules: dict[str, ModuleType] = {ip.lower(): REGISTERS[ip].pick(v) for ip, v in versions.items() if ip in REGISTERS}

  def __getattr__(self, name: str) -> ModuleType:
    try: return self.__dict__["modules"][name]
    except KeyError:
      raise AttributeError(f"the device layer has no register module for IP {name.upper()} (it has: {', '.join(self.modules)})") from None
