"""The AMD shader core: decode, disassemble and execute machine code of every target it has a table for (targets.py:
gfx1100, RDNA3.5's gfx1150 / gfx1151, RDNA4's gfx1200 / gfx1201), wave32 and wave64. `target=` picks one (default gfx1100).

`Memory()` is a standalone sparse GPU address space; any object with `lookup(addr, write)` (see memory.py)
can stand in for it (the AMD GPU model translates through its page tables). `run(...)` runs raw code,
`dispatch(...)` a kernel described by a kernel descriptor. Code is compiled to C per basic block (cached on
disk); see program.py.
"""
from emu.memory import Memory, MemoryFault, GpuMemory
from emu.amdgcn.dispatch import run, dispatch, Stats, WaveError, WaveFault, WaveTrap, InstructionLimit, KernelDescriptor
from emu.amdgcn.operands import Unsupported
from emu.amdgcn.disasm import disasm

__all__ = ["Memory", "MemoryFault", "GpuMemory", "run", "dispatch", "Stats", "WaveError", "WaveFault", "WaveTrap",
           "InstructionLimit", "KernelDescriptor", "Unsupported", "disasm"]
