"""A PTX engine: NVIDIA's virtual ISA run on the CPU, for the MOCK+NV GPU model and tests.

`parse` reads PTX text (parse.py); `Program(ptx, name)` translates a kernel to C per basic block and compiles it
(translate.py, alu.py, c/rt.h; cached on disk); `launch(prog, mem, grid, block, params)` runs a grid over any
emu.memory.GpuMemory (launch.py). `nvrtc` compiles CUDA C to PTX and cubins with NVIDIA's NVRTC.
"""
from emu.nvgpu.ptx.parse import parse, PtxError
from emu.nvgpu.ptx.launch import Program, launch, Stats, LaunchError, PtxFault, PtxTrap, WarpError, InstructionLimit

__all__ = ["parse", "PtxError", "Program", "launch", "Stats", "LaunchError", "PtxFault", "PtxTrap", "WarpError",
           "InstructionLimit"]
