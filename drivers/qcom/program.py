"""An ir3 kernel on an Adreno GPU: its instructions and immediates in GPU memory, and the CP packets that dispatch it.

The dispatch is mesa's computerator's (src/freedreno/computerator/a6xx.c: cs_program_emit, cs_const_emit,
a6xx_emit_grid), a6xx registers from autogen.adreno:
  SP_MODE_CONTROL (constant demotion | 4), HLSQ_INVALIDATE_CMD (every stage's state and IBOs), HLSQ_CS_CNTL (CONSTLEN:
  the variant's constlen rounded up to 4 vec4s, ENABLED), SP_CS_CONFIG (ENABLED; no textures, samplers or IBOs) and
  SP_CS_INSTRLEN, SP_CS_CTRL_REG0 (THREADSIZE, FULL/HALFREGFOOTPRINT = max_reg + 1 / max_half_reg + 1, MERGEDREGS,
  BRANCHSTACK), SP_CS_UNKNOWN_A9B1 (SHARED_SIZE in KiB units, at least 1, and UNK6: the value 0x41 computerator writes
  for no shared memory), HLSQ_CS_CNTL_0 (workgroup-id and local-id registers; the work-group size and offset consts
  unused: regid(63, 0)), HLSQ_CS_CNTL_1 (no linear local id; THREADSIZE), SP_CS_OBJ_START, CP_LOAD_STATE6_FRAG of the
  instructions (ST6_SHADER, SB6_CS_SHADER, instrlen units of 16 instructions), the consts (ST6_CONSTANTS, SB6_CS_SHADER,
  vec4 units): each UBO range ir3 pushed, read from the kernel arguments (UBO 0: the buffers' addresses), and the
  immediates, read from the program's memory; HLSQ_CS_NDRANGE_0..6 (1 dimension, the local size, the global size),
  HLSQ_CS_KERNEL_GROUP_X..Z = 1, CP_EXEC_CS with the workgroup counts.
a7xx moved these registers (the SP_/HLSQ_ split changed): autogen.adreno's register database predates a7xx, so a7xx
kernels compile but do not dispatch (NoDispatch says so). Private memory (register spills) is refused the same way.
"""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING
from autogen import adreno as a
from drivers.hcq.program import Program
from drivers.qcom import cp
from drivers.qcom.compiler import Variant

if TYPE_CHECKING:
  from drivers.qcom.device import QCOMDevice

THREAD64, THREAD128 = 0, 1          # enum a6xx_threadsize
UNUSED_REGID = 63 << 2              # regid(63, 0): "no register"
MAX_LOCAL = 1024                    # HLSQ_CS_NDRANGE_0.LOCALSIZEX holds size - 1 in 10 bits


class NoDispatch(NotImplementedError):
  """A kernel hcq compiles but cannot dispatch on this GPU, named with the reason."""


def f(field: tuple[int, int], v: int) -> int: return cp.field(field, v)


class QCOMProgram(Program):
  """Kernel `name` of a packed ir3 variant (drivers.qcom.compiler.Variant) in GPU memory: the instructions at the start,
  the immediates (vec4s) after them."""
  def __init__(self, device: QCOMDevice, name: str, lib: bytes):
    super().__init__(device, name, lib)
    self.v = v = Variant.unpack(lib)
    if v.gpu_id != device.gpu_id:
      raise ValueError(f"kernel {name} was compiled for Adreno {v.gpu_id}; {device.name} is an Adreno {device.gpu_id}: recompile for it")
    if device.gen != 6:
      raise NoDispatch(f"{device.name} is an a{device.gpu_id}: hcq dispatches kernels on a6xx only (its register database, "
                       "mesa's a6xx.xml of 2021, predates a7xx's compute registers)")
    if v.pvtmem_size: raise NoDispatch(f"kernel {name} spills to private memory ({v.pvtmem_size} bytes), which hcq does not set up")
    if any(r[0] != 0 for r in v.ubo_ranges): raise NoDispatch(f"kernel {name} reads UBOs other than its arguments (UBO 0)")
    imms = v.imms + [0] * (-len(v.imms) % 4)
    self.imm_units = min(len(imms) // 4, max(0, v.constlen - v.imm_offset))   # consts past constlen are not read
    blob = v.code + struct.pack(f"<{len(imms)}I", *imms)
    self.mem = device.gpu.alloc(max(len(blob), 1))
    self.mem.view.view[:len(blob)] = blob
    self.code_va, self.imm_va = self.mem.va, self.mem.va + len(v.code)
    self.state = self._program_state()

  def __del__(self) -> None:
    if (mem := getattr(self, "mem", None)) is not None and not self.device.closed: self.device.gpu.free(mem)

  def args_size(self, n_bufs: int, n_vals: int) -> int:
    """The buffers' addresses, and at least every byte of UBO 0 a range pushes to consts (the CP reads whole vec4s)."""
    return max([8 * n_bufs + 4 * n_vals, *(r[2] for r in self.v.ubo_ranges)])

  def _program_state(self) -> list[int]:
    """The packets that load the program: everything but its constants and grid."""
    v = self.v
    thr = THREAD128 if v.double_threadsize else THREAD64
    shared = max((v.shared_size - 1) // 1024, 1) if v.shared_size else 1
    w = cp.pkt4(a.REG_A6XX_SP_MODE_CONTROL, f(a.REG_A6XX_SP_MODE_CONTROL_CONSTANT_DEMOTION_ENABLE, 1) | 4)
    w += cp.pkt4(a.REG_A6XX_HLSQ_INVALIDATE_CMD, sum(f(getattr(a, f"REG_A6XX_HLSQ_INVALIDATE_CMD_{s}"), 1) for s in
                                                   ("VS_STATE", "HS_STATE", "DS_STATE", "GS_STATE", "FS_STATE", "CS_STATE", "CS_IBO", "GFX_IBO")))
    w += cp.pkt4(a.REG_A6XX_HLSQ_CS_CNTL, f(a.REG_A6XX_HLSQ_CS_CNTL_CONSTLEN, -(-v.constlen // 4) * 4) | f(a.REG_A6XX_HLSQ_CS_CNTL_ENABLED, 1))
    w += cp.pkt4(a.REG_A6XX_SP_CS_CONFIG, f(a.REG_A6XX_SP_CS_CONFIG_ENABLED, 1), v.instrlen)   # then SP_CS_INSTRLEN
    w += cp.pkt4(a.REG_A6XX_SP_CS_CTRL_REG0, f(a.REG_A6XX_SP_CS_CTRL_REG0_THREADSIZE, thr) |
                 f(a.REG_A6XX_SP_CS_CTRL_REG0_FULLREGFOOTPRINT, v.max_reg + 1) |
                 f(a.REG_A6XX_SP_CS_CTRL_REG0_HALFREGFOOTPRINT, v.max_half_reg + 1) |
                 f(a.REG_A6XX_SP_CS_CTRL_REG0_MERGEDREGS, int(v.mergedregs)) | f(a.REG_A6XX_SP_CS_CTRL_REG0_BRANCHSTACK, v.branchstack))
    w += cp.pkt4(a.REG_A6XX_SP_CS_UNKNOWN_A9B1, f(a.REG_A6XX_SP_CS_UNKNOWN_A9B1_SHARED_SIZE, shared) | f(a.REG_A6XX_SP_CS_UNKNOWN_A9B1_UNK6, 1))
    w += cp.pkt4(a.REG_A6XX_HLSQ_CS_CNTL_0, f(a.REG_A6XX_HLSQ_CS_CNTL_0_WGIDCONSTID, v.workgroup_id_reg) |
                 f(a.REG_A6XX_HLSQ_CS_CNTL_0_WGSIZECONSTID, UNUSED_REGID) | f(a.REG_A6XX_HLSQ_CS_CNTL_0_WGOFFSETCONSTID, UNUSED_REGID) |
                 f(a.REG_A6XX_HLSQ_CS_CNTL_0_LOCALIDREGID, v.local_id_reg),
                 f(a.REG_A6XX_HLSQ_CS_CNTL_1_LINEARLOCALIDREGID, UNUSED_REGID) | f(a.REG_A6XX_HLSQ_CS_CNTL_1_THREADSIZE, thr))
    w += cp.pkt4(a.REG_A6XX_SP_CS_OBJ_START, *cp.lo_hi(self.code_va))
    w += cp.pkt4(a.REG_A6XX_SP_CS_INSTRLEN, v.instrlen)
    w += cp.load_state6(a.ST6_SHADER, a.SB6_CS_SHADER, v.instrlen, self.code_va)
    if self.imm_units: w += cp.load_state6(a.ST6_CONSTANTS, a.SB6_CS_SHADER, self.imm_units, self.imm_va, v.imm_offset)
    return w

  def dispatch(self, args_va: int, global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> tuple[list[int], list]:
    """(packets, [(index of an address of the arguments in them, its offset from args_va)]) of one launch."""
    if any(not 1 <= n <= MAX_LOCAL for n in local_size) or local_size[0] * local_size[1] * local_size[2] > MAX_LOCAL:
      raise ValueError(f"kernel {self.name}: local size {local_size}: each dimension and their product are 1..{MAX_LOCAL}")
    w, at = list(self.state), []
    for _, start, end, const_off in self.v.ubo_ranges:     # the pushed range of the arguments (UBO 0)
      if start % 16 or end % 16 or const_off % 16: raise NoDispatch(f"kernel {self.name}: UBO range {start}..{end} is not vec4-aligned")
      units = min(end - start, max(0, self.v.constlen * 16 - const_off)) // 16
      if units:
        at.append((len(w) + 2, start))
        w += cp.load_state6(a.ST6_CONSTANTS, a.SB6_CS_SHADER, units, args_va + start, const_off // 16)
    gx, gy, gz = global_size
    lx, ly, lz = local_size
    w += cp.pkt4(a.REG_A6XX_HLSQ_CS_NDRANGE_0, f(a.REG_A6XX_HLSQ_CS_NDRANGE_0_KERNELDIM, 3) | f(a.REG_A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEX, lx - 1) |
                 f(a.REG_A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEY, ly - 1) | f(a.REG_A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEZ, lz - 1),
                 lx * gx, 0, ly * gy, 0, lz * gz, 0)
    w += cp.pkt4(a.REG_A6XX_HLSQ_CS_KERNEL_GROUP_X, 1, 1, 1)
    w += cp.exec_cs(gx, gy, gz)
    return w, at
