"""The C text every compiled kernel starts with: the launch state (c/state.h) and the runtime (c/rt.h)."""
from __future__ import annotations
import os
from functools import cache
from emu import cc

C_DIR = os.path.join(os.path.dirname(__file__), "c")
CACHE = "ptx"                   # compiled kernels: under $XDG_CACHE_HOME/hcq/ptx (emu/cc.py)


@cache
def src(name: str) -> str:
  with open(os.path.join(C_DIR, name)) as f: return cc.inline_includes(f.read())


def header() -> str:
  return "#include <stdint.h>\n" + src("state.h") + src("rt.h")
