"""What the shader core runs differently for gfx12 (RDNA4) targets, beside its tables and field layouts.

RDNA4 renamed instructions whose operation RDNA3 already has (AMD "RDNA4 Instruction Set Architecture" guide, the
opcode chapters next to the RDNA3 guide's): the carry-out scalar adds gained `_co`, v_mad_u64_u32 / v_mad_i64_i32
became v_mad_co_*, and the float min/max family took IEEE 754-2019's minimumNumber/maximumNumber names (`_num_`): the
RDNA3 min/max with MODE.IEEE clear, the only mode a gfx12 wave has (its kernel descriptor's IEEE_MODE bit is reserved,
LLVM AMDGPUUsage). `same_as` gives the RDNA3 name whose code generator runs them.
"""
from __future__ import annotations

RENAMED = {"s_add_co_u32": "s_add_u32", "s_sub_co_u32": "s_sub_u32", "s_add_co_i32": "s_add_i32", "s_sub_co_i32": "s_sub_i32",
           "s_add_co_ci_u32": "s_addc_u32", "s_sub_co_ci_u32": "s_subb_u32", "s_addk_co_i32": "s_addk_i32",
           "v_mad_co_u64_u32": "v_mad_u64_u32", "v_mad_co_i64_i32": "v_mad_i64_i32"}


def same_as(op: str) -> str | None:
  """The RDNA3 instruction a gfx12 instruction `op` (base mnemonic) executes as, or None if it is its own."""
  if op in RENAMED: return RENAMED[op]
  return op.replace("_num_", "_") if "_num_" in op else None
