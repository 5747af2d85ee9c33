"""gfx11 (RDNA3 and RDNA3.5): encoding field layouts (encodings.py, from AMD's guide), how the generator probes them
(probes.py), and the opcode tables swept from LLVM 22's disassembler (tables.py: `python -m autogen.amdgcn gfx11`).

CPUS: the LLVM processors swept; the first is the base table, each other one an overlay of what differs."""
from autogen.amdgcn.gfx11 import encodings, probes

__all__ = ["encodings", "probes", "CPUS"]
CPUS = ("gfx1100", "gfx1150", "gfx1151")   # RDNA3 (Navi31), RDNA3.5 (Strix Point, Strix Halo)
