"""gfx12 (RDNA4): encoding field layouts (encodings.py, from AMD's guide), how the generator probes them (probes.py), and
the opcode tables swept from LLVM 22's disassembler (tables.py: `python -m autogen.amdgcn gfx12`).

CPUS: the LLVM processors swept; the first is the base table, each other one an overlay of what differs."""
from autogen.amdgcn.gfx12 import encodings, probes

__all__ = ["encodings", "probes", "CPUS"]
CPUS = ("gfx1200", "gfx1201")   # RDNA4: Navi44, Navi48
