"""NVIDIA headers (open-gpu-kernel-modules at nvheaders.TAG, open-gpu-doc) -> one Python module of ctypes records,
enum constants, integer macros and (hi, lo) field ranges (clc86f.h's `2:0`, the QMD headers' `MW(583:580)`).

The same front end and layout check as cmodule.CModule: every record is built and compared with clang's layout.
The headers need no system headers (nvtypes.h defines the fixed-width types itself).
"""
from __future__ import annotations
import pathlib
from dataclasses import dataclass
from autogen.gen import cparse, nvheaders
from autogen.gen.cmodule import emit
from autogen.gen.writer import Module

SDK = "src/common/sdk/nvidia/inc"
UNIX = "src/nvidia/arch/nvalloc/unix/include"
UVM = "kernel-open/nvidia-uvm"
INCLUDE = (SDK, UNIX, "kernel-open/common/inc")   # open-gpu-kernel-modules directories the headers #include from


@dataclass(frozen=True)
class NVModule:
  """A generator: headers of one of the two trees ("kernel" or "doc") that make up one generated module."""
  out: str                          # path under autogen/, e.g. "nv/rm.py"
  tree: str
  headers: tuple[str, ...]
  doc: str = ""
  tag: str = nvheaders.TAG

  def __call__(self, outdir: pathlib.Path) -> list[pathlib.Path]:
    kernel, doc = nvheaders.packages(self.tag)
    pkg = kernel if self.tree == "kernel" else doc
    hdr = cparse.parse([pkg.path(h) for h in self.headers], [kernel.path(d) for d in INCLUDE])
    mod = Module(f"autogen/{self.out}", pkg, list(self.headers), self.doc)
    emit(hdr, mod, bit_ranges=True)
    path = outdir / self.out
    mod.write(path)
    return [path]
