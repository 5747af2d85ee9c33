"""The GPU model's waves run the ISA of its GC version (emu/amdgcn/targets.py): a GC 11.5.0 core (RDNA3.5, gfx1150)
executes the scalar float instructions RDNA3.5 adds, a GC 11.0.0 one (gfx1100) cannot decode them, and a GC version no
target runs is refused when the model is made. The dispatch goes through the COMPUTE_* registers as a queue sets them."""
import struct
import numpy as np
import pytest

from autogen.amd import gc_11_0_0 as gc, soc21_enum
from emu.amdgpu.engine import KernelError
from emu.amdgpu.gpu import GPUModel
from emu.amdgpu.mmu import PTE_VALID, PTE_READABLE, PTE_WRITEABLE, PTE_EXECUTABLE
from emu.amdgpu.spi import SHRegisters
from tests.emu.amdgcn.exec_helpers import assemble

START = 0x2000_0000_0000
PDB2, PDB1, PDB0, PTB, CODE, OUT = 0x0, 0x1000, 0x2000, 0x3000, 0x100000, 0x101000
CODE_VA, OUT_VA = START + 0x5000, START + 0x6000
RWX = PTE_VALID | PTE_READABLE | PTE_WRITEABLE | PTE_EXECUTABLE
SRC = """
  s_add_f32 s4, s2, s3
  v_mov_b32 v1, s4
  v_mov_b32 v0, 0
  global_store_b32 v0, v1, s[0:1]
  s_endpgm
"""


def model(gc_version) -> GPUModel:
  """A model whose VMID 0 maps CODE_VA and OUT_VA (4 KiB pages) and whose flat apertures are KFD's."""
  gpu = GPUModel(16 << 20, gc_version=gc_version)
  for table, index, value in ((PDB2, 0, PDB1 | PTE_VALID), (PDB1, 0, PDB0 | PTE_VALID), (PDB0, 0, PTB | PTE_VALID),
                              (PTB, 5, CODE | RWX), (PTB, 6, OUT | RWX)):
    gpu.vram.write(table + index * 8, value.to_bytes(8, "little"))
  gpu.mmu.set_context(PDB2, START, 0x7FFF_FFFF_FFFF)
  gpu.mmu.set_enabled(None)
  gpu.regs[gpu.sh_mem_slot(0, False)] = gc.regSH_MEM_CONFIG.encode(ADDRESS_MODE=soc21_enum.SH_MEM_ADDRESS_MODE_64,
                                                                   ALIGNMENT_MODE=soc21_enum.SH_MEM_ALIGNMENT_MODE_UNALIGNED)
  gpu.regs[gpu.sh_mem_slot(0, True)] = gc.regSH_MEM_BASES.encode(SHARED_BASE=1, PRIVATE_BASE=2)
  return gpu


def dispatch(gpu: GPUModel, code: bytes, a: float, b: float) -> float:
  gpu.vram.write(CODE, code)
  sh = SHRegisters(gpu.gc, gpu.ip_bases["GC"], gpu.regs.name_of)
  regs = {"PGM_LO": (CODE_VA >> 8) & 0xFFFFFFFF, "PGM_HI": CODE_VA >> 40, "NUM_THREAD_X": 32, "NUM_THREAD_Y": 1, "NUM_THREAD_Z": 1,
          "PGM_RSRC1": gc.regCOMPUTE_PGM_RSRC1.encode(FLOAT_MODE=0xC0, IEEE_MODE=1), "PGM_RSRC2": gc.regCOMPUTE_PGM_RSRC2.encode(USER_SGPR=4),
          "USER_DATA_0": OUT_VA & 0xFFFFFFFF, "USER_DATA_1": OUT_VA >> 32,
          "USER_DATA_2": struct.unpack("<I", struct.pack("<f", a))[0], "USER_DATA_3": struct.unpack("<I", struct.pack("<f", b))[0]}
  for name, value in regs.items(): sh.write(sh.addr[name], value, "SET_SH_REG")
  gpu.dispatch(sh, (1, 1, 1), gc.regCOMPUTE_DISPATCH_INITIATOR.encode(COMPUTE_SHADER_EN=1, CS_W32_EN=1), "compute0")
  return float(np.frombuffer(gpu.vram.read(OUT, 4), np.float32)[0])


@pytest.mark.parametrize("gc_version, target", [((11, 0, 0), "gfx1100"), ((11, 5, 0), "gfx1150"), ((11, 5, 1), "gfx1151")])
def test_the_gc_version_picks_the_target(gc_version, target):
  assert GPUModel(1 << 20, gc_version=gc_version).target.name == target


def test_the_discovery_tables_gc_version_is_the_default():
  assert GPUModel(1 << 20).target.name == "gfx1100"


def test_an_rdna35_core_runs_the_scalar_float_instructions():
  code = assemble(SRC, cpu="gfx1150")
  assert dispatch(model((11, 5, 0)), code, 1.5, 2.25) == np.float32(1.5) + np.float32(2.25)
  assert dispatch(model((11, 5, 1)), code, -3.0, 0.125) == np.float32(-3.0) + np.float32(0.125)


def test_an_rdna3_core_cannot_decode_them():
  with pytest.raises(KernelError, match="is not a gfx1100 instruction"): dispatch(model((11, 0, 0)), assemble(SRC, cpu="gfx1150"), 1.0, 2.0)


def test_a_gc_version_no_target_runs_is_refused():
  with pytest.raises(ValueError, match=r"no shader core target runs GC 9\.4\.3: .*11\.0\.0 \(gfx1100\)"):
    GPUModel(1 << 20, gc_version=(9, 4, 3)).target
