"""A PTX engine: NVIDIA's virtual ISA run on the CPU, for the MOCK+NV GPU model and tests.

`parse` reads PTX text (parse.py); `Program(ptx, name)` translates a kernel to C per basic block and compiles it
(translate.py, alu.py, c/rt.h; cached on disk); `launch(prog, mem, grid, block, params)` runs a grid over any
emu.memory.GpuMemory (launch.py). The PTX comes from NVIDIA's NVRTC (drivers.nv.nvrtc, which tests and benches use).

Not modelled (each is a PtxError naming it and its line, never a silent wrong result): calls (`call`, .func), module-
level .const variables (__constant__ arrays), bar.arrive, atom/red on f16/bf16 types,
cp.async, ldmatrix / mma / wmma (tensor cores), textures and surfaces, packed-half compares, .L2::cache_hint.
Modelled loosely, and documented where implemented: named barrier ids and thread counts are not distinguished;
.approx math is the host's libm (within PTX's error bounds, not bit-equal to the hardware); a mul/add pair without
a rounding modifier is never fused (ptxas may fuse it); %clock / %clock64 / %globaltimer count thread-instructions;
%smid is 0 and %nsmid 1; registers, shared and local memory start zeroed; lanes of a warp run in lane order and warps
in index order, so atomics and races resolve deterministically.
"""
from emu.nvgpu.ptx.parse import parse, PtxError
from emu.nvgpu.ptx.launch import Program, launch, Stats, LaunchError, PtxFault, PtxTrap, WarpError, InstructionLimit

__all__ = ["parse", "PtxError", "Program", "launch", "Stats", "LaunchError", "PtxFault", "PtxTrap", "WarpError",
           "InstructionLimit"]
