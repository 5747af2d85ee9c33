"""The compute dispatch of the KGSL model's GPU: what CP_EXEC_CS starts, from the registers and the state the CP loaded
(mesa's computerator programs the same: src/freedreno/computerator/a6xx.c), run on the ir3 core (emu.kgsl.ir3).

Checked before anything runs (each a fault naming the register): HLSQ_CS_CNTL.ENABLED and SP_CS_CONFIG.ENABLED set;
SP_CS_CONFIG without textures, samplers or IBOs; SP_CS_INSTRLEN equal to what CP_LOAD_STATE6 loaded (ST6_SHADER,
SB6_CS_SHADER); SP_CS_CTRL_REG0.MERGEDREGS (the core's register file is merged) and its full footprint covering every
register the code names; HLSQ_CS_CNTL_0's work-group size and offset consts and HLSQ_CS_CNTL_1's linear local id unused
(regid(63, 0)); HLSQ_CS_NDRANGE global sizes equal to local size x workgroup count, offsets 0; HLSQ_CS_KERNEL_GROUP_X..Z 1.
Every invocation starts with its local id (x, y, z) in LOCALIDREGID and following components and its workgroup id in
WGIDCONSTID and following; the const file is HLSQ_CS_CNTL.CONSTLEN vec4s of what CP_LOAD_STATE6 put in ST6_CONSTANTS.
"""
from __future__ import annotations
from typing import Callable
import numpy as np
from autogen import adreno as a
from emu.kgsl.ir3 import Core, IR3Error

UNUSED_REGID = 63 << 2


class DispatchError(Exception):
  """A dispatch the registers or loaded state make invalid, named."""


def field(v: int, f: tuple[int, int]) -> int: return v >> f[1] & ((1 << (f[0] - f[1] + 1)) - 1)


def exec_cs(gen: int, regs: dict[int, int], code: bytes | None, consts: bytes, groups: tuple[int, int, int],
            mem: Callable[[int, int, bool], memoryview]) -> int:
  """Run CP_EXEC_CS of `groups` workgroups -> instructions issued."""
  def reg(r: int) -> int:
    if r not in regs: raise DispatchError(f"CP_EXEC_CS: {_name(r)} was never written")
    return regs[r]
  if gen != 6: raise DispatchError(f"CP_EXEC_CS on a{gen}xx: the model dispatches a6xx compute only")
  if code is None: raise DispatchError("CP_EXEC_CS before any CP_LOAD_STATE6 of the compute shader (ST6_SHADER, SB6_CS_SHADER)")
  cntl, config = reg(a.REG_A6XX_HLSQ_CS_CNTL), reg(a.REG_A6XX_SP_CS_CONFIG)
  if not field(cntl, a.REG_A6XX_HLSQ_CS_CNTL_ENABLED) or not field(config, a.REG_A6XX_SP_CS_CONFIG_ENABLED):
    raise DispatchError("CP_EXEC_CS with HLSQ_CS_CNTL.ENABLED or SP_CS_CONFIG.ENABLED clear")
  if any(field(config, f) for f in (a.REG_A6XX_SP_CS_CONFIG_NTEX, a.REG_A6XX_SP_CS_CONFIG_NSAMP, a.REG_A6XX_SP_CS_CONFIG_NIBO)):
    raise DispatchError(f"SP_CS_CONFIG {config:#x}: textures, samplers and IBOs are not modelled")
  instrlen = reg(a.REG_A6XX_SP_CS_INSTRLEN)
  if instrlen * 128 != len(code):
    raise DispatchError(f"SP_CS_INSTRLEN {instrlen} (x 16 instructions) is not the {len(code) // 128} units CP_LOAD_STATE6 loaded")
  reg0 = reg(a.REG_A6XX_SP_CS_CTRL_REG0)
  if not field(reg0, a.REG_A6XX_SP_CS_CTRL_REG0_MERGEDREGS): raise DispatchError("SP_CS_CTRL_REG0.MERGEDREGS clear: not modelled")
  cntl0, cntl1 = reg(a.REG_A6XX_HLSQ_CS_CNTL_0), reg(a.REG_A6XX_HLSQ_CS_CNTL_1)
  if (field(cntl0, a.REG_A6XX_HLSQ_CS_CNTL_0_WGSIZECONSTID), field(cntl0, a.REG_A6XX_HLSQ_CS_CNTL_0_WGOFFSETCONSTID),
      field(cntl1, a.REG_A6XX_HLSQ_CS_CNTL_1_LINEARLOCALIDREGID)) != (UNUSED_REGID,) * 3:
    raise DispatchError(f"HLSQ_CS_CNTL_0 {cntl0:#x} / _1 {cntl1:#x}: work-group size/offset consts and the linear local id are not modelled")
  nd = [reg(a.REG_A6XX_HLSQ_CS_NDRANGE_0 + i) for i in range(7)]
  local = tuple(field(nd[0], f) + 1 for f in (a.REG_A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEX, a.REG_A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEY,
                                               a.REG_A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEZ))
  if (nd[1], nd[3], nd[5]) != tuple(n * g for n, g in zip(local, groups)) or (nd[2], nd[4], nd[6]) != (0, 0, 0):
    raise DispatchError(f"HLSQ_CS_NDRANGE global sizes {nd[1]}, {nd[3]}, {nd[5]} (offsets {nd[2]}, {nd[4]}, {nd[6]}) are not local size "
                        f"{local} x the {groups} workgroups of CP_EXEC_CS")
  if [reg(a.REG_A6XX_HLSQ_CS_KERNEL_GROUP_X + i) for i in range(3)] != [1, 1, 1]:
    raise DispatchError("HLSQ_CS_KERNEL_GROUP_X..Z are not 1: not modelled")
  constlen = field(cntl, a.REG_A6XX_HLSQ_CS_CNTL_CONSTLEN)
  cfile = np.zeros(constlen * 4, np.uint32)
  loaded = np.frombuffer(consts[:constlen * 16], np.uint32)
  cfile[:len(loaded)] = loaded
  words = np.frombuffer(code, np.uint64)
  lid, wgid = field(cntl0, a.REG_A6XX_HLSQ_CS_CNTL_0_LOCALIDREGID), field(cntl0, a.REG_A6XX_HLSQ_CS_CNTL_0_WGIDCONSTID)
  n_local, n = local[0] * local[1] * local[2], local[0] * local[1] * local[2] * groups[0] * groups[1] * groups[2]
  if n == 0: return 0
  core = Core(gen, n, cfile, mem)
  foot = field(reg0, a.REG_A6XX_SP_CS_CTRL_REG0_FULLREGFOOTPRINT)
  i = np.arange(n)
  li, gi = i % n_local, i // n_local
  ids = {lid: li % local[0], lid + 1: li // local[0] % local[1], lid + 2: li // (local[0] * local[1]),
         wgid: gi % groups[0], wgid + 1: gi // groups[0] % groups[1], wgid + 2: gi // (groups[0] * groups[1])}
  for r, v in ids.items(): core.write(r, False, v.astype(np.uint32), np.ones(n, bool))
  try: return core.run([int(x) for x in words], foot)
  except IR3Error as e: raise DispatchError(f"the compute shader: {e}") from None


def _name(r: int) -> str:
  return next((k.removeprefix("REG_A6XX_") for k, v in vars(a).items() if k.startswith("REG_A6XX_") and v == r), f"register {r:#x}")
