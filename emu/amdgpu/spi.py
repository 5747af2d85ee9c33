"""The SPI's side of a compute dispatch on gfx11 and gfx12: the COMPUTE_* SH registers a compute queue sets, checked and
turned into the waves' launch state for the shader core (emu/amdgcn/dispatch.py). Fields as the chip's GC register module
(gc_11_0_0, gc_12_0_0) names them; what GC 12 changed is listed after the gfx11 rules (GENERATIONS holds both).

What SET_SH_REG may write (anything else raises: other COMPUTE_* registers are not modelled, the rest of the SH range
belongs to the graphics shader stages), and what the model does with each:
- PGM_LO/HI: the program address >> 8. USER_DATA_0..15: the user SGPRs, rsrc2 USER_SGPR of them.
- PGM_RSRC1: FLOAT_MODE, DX10_CLAMP and IEEE_MODE give the waves' initial MODE (round [3:0], denorm [7:4], [8], [9];
  the core's clamp modifier always follows the DX10 rule); WGP_MODE goes to the waves (LDS_PARAM_LOAD and
  LDS_DIRECT_LOAD refuse it). VGPRS/SGPRS (allocation granules), PRIORITY, PRIV, BULKY, MEM_ORDERED and FWD_PROGRESS
  change nothing a kernel can observe here; FP16_OVFL must be 0 (not modelled).
- PGM_RSRC2: SCRATCH_EN (a scratch slot, and the wave-offset SGPR after the workgroup ids), USER_SGPR, TGID_X/Y/Z_EN,
  TIDIG_COMP_CNT (how many of v0's x, y, z the wave gets; the others read 0), LDS_SIZE (512-byte granules).
  TRAP_PRESENT and EXCP_EN(_MSB) need a trap handler, TG_SIZE_EN a workgroup-info SGPR: not modelled, must be 0.
- PGM_RSRC3: INST_PREF_SIZE and IMAGE_OP are hints; SHARED_VGPR_CNT, TRAP_ON_START/END and the reserved bits must be 0.
- TMPRING_SIZE and DISPATCH_SCRATCH_BASE_LO/HI: the scratch ring (below).
- NUM_THREAD_X/Y/Z: NUM_THREAD_FULL is the workgroup size. START_X/Y/Z and RESTART_X/Y/Z (where a preempted dispatch
  resumes) must be 0: the model dispatches from workgroup (0, 0, 0) only.
- RESOURCE_LIMITS: TG_PER_CU, SIMD_DEST_CNTL, FORCE_SIMD_DIST and CU_GROUP_COUNT shape scheduling, and every setting
  admits the one workgroup at a time the model runs; WAVES_PER_SH and LOCK_THRESHOLD must be 0 (not modelled).
- PIPELINESTAT_ENABLE, PERFCOUNT_ENABLE: must be 0 (no statistics or performance counters are modelled).
- THREAD_TRACE_ENABLE: the queue's dispatches are traced by the SEs whose thread trace is on (sqtt.py).
The DISPATCH_DIRECT initiator: COMPUTE_SHADER_EN is required and CS_W32_EN picks the wave size; PARTIAL_TG_EN,
ORDERED_APPEND_ENBL, USE_THREAD_DIMENSIONS, RESTORE and AMP_SHADER_EN are not modelled; the rest are hints.

GC 12 (gc_12_0_0; LLVM AMDGPUUsage "Kernel Descriptor", the GFX12 rows of compute_pgm_rsrc1/2/3):
- PGM_RSRC1 bits 21 and 23 are WG_RR_EN and DISABLE_PERF (scheduling and counter hints): a gfx12 wave has no DX10_CLAMP
  or IEEE MODE bits to start with, so MODE is FLOAT_MODE alone. DEBUG_MODE must be 0 (not modelled); CDBG_USER is a hint.
- PGM_RSRC2 bit 6 is DYNAMIC_VGPR (TRAP_PRESENT is gone) and bit 31 WGP_TAKEOVER: both must be 0 (not modelled).
- PGM_RSRC3: INST_PREF_SIZE is 8 bits, TRAP_ON_START/END are gone; GLG_EN must be 0 (not modelled).
- TMPRING_SIZE.WAVESIZE is 18 bits, in the same 256-byte units (mesa ac_gpu_info.c scratch_wavesize_granularity_shift).
- NUM_THREAD_X/Y: NUM_THREAD_FULL is 13 bits; INTERLEAVE_BITS_X/Y must be 0 (not modelled).
- The initiator's INTERLEAVE_2D_EN is not modelled; PING_PONG_EN and TTRACE_QUEUE_ID are hints.

Scratch ("architected flat scratch"): with SCRATCH_EN the waves' private memory is the driver's ring at
DISPATCH_SCRATCH_BASE << 8, reached through the GPU MMU (nothing is allocated on the host). TMPRING_SIZE.WAVESIZE is one
wave's slot in 256-byte units and WAVES the slots of each shader engine (per SE on gfx11 and gfx12), so engine s's ring
starts at base + s * WAVES * slot; a lane owns slot / lanes bytes of its wave's (dword-swizzled) slot. The model runs
workgroup k on engine k % the chip's engine count and its wave i in slot i: a ring the driver made smaller than engines *
WAVES slots is overrun by the waves of the last engines, as on hardware, and a workgroup with more waves than WAVES never
launches (an error here).
"""
from __future__ import annotations
import functools
import importlib
from dataclasses import dataclass
from types import ModuleType

from emu.ring import RingError
from emu.amdgcn.dispatch import Launch, Scratch

LDS_GRANULE = 512             # COMPUTE_PGM_RSRC2.LDS_SIZE unit on gfx11 and gfx12, bytes
SCRATCH_WAVESIZE_UNIT = 256   # COMPUTE_TMPRING_SIZE.WAVESIZE unit, bytes per wave
USER_DATA = 16                # COMPUTE_USER_DATA_0..15

# the registers a compute queue may write, by name
WRITABLE = ("PGM_LO", "PGM_HI", "PGM_RSRC1", "PGM_RSRC2", "PGM_RSRC3", "TMPRING_SIZE", "DISPATCH_SCRATCH_BASE_LO",
            "DISPATCH_SCRATCH_BASE_HI", "NUM_THREAD_X", "NUM_THREAD_Y", "NUM_THREAD_Z", "START_X", "START_Y", "START_Z",
            "RESTART_X", "RESTART_Y", "RESTART_Z", "RESOURCE_LIMITS", "PIPELINESTAT_ENABLE", "PERFCOUNT_ENABLE",
            "THREAD_TRACE_ENABLE", *(f"USER_DATA_{i}" for i in range(USER_DATA)))
_ZERO_COMMON = {"RESOURCE_LIMITS": ("WAVES_PER_SH", "LOCK_THRESHOLD"), "PIPELINESTAT_ENABLE": ("PIPELINESTAT_ENABLE",),
                "PERFCOUNT_ENABLE": ("PERFCOUNT_ENABLE",), "START_X": ("START",), "START_Y": ("START",),
                "START_Z": ("START",), "RESTART_X": ("RESTART",), "RESTART_Y": ("RESTART",), "RESTART_Z": ("RESTART",)}
_INITIATOR_NOT_MODELLED = ("PARTIAL_TG_EN", "ORDERED_APPEND_ENBL", "USE_THREAD_DIMENSIONS", "RESTORE", "AMP_SHADER_EN")


@dataclass(frozen=True)
class Generation:
  """What one GC generation's COMPUTE_* fields mean to the model: the fields that must be 0 (not modelled otherwise), by
  register; the initiator bits not modelled; whether RSRC1's DX10_CLAMP and IEEE_MODE start the waves' MODE."""
  must_be_zero: dict[str, tuple[str, ...]]
  initiator_not_modelled: tuple[str, ...]
  mode_bits: bool


GENERATIONS = {
  "gc_11_0_0": Generation({"PGM_RSRC1": ("FP16_OVFL",), "PGM_RSRC2": ("TRAP_PRESENT", "EXCP_EN", "EXCP_EN_MSB", "TG_SIZE_EN"),
                           "PGM_RSRC3": ("SHARED_VGPR_CNT", "TRAP_ON_START", "TRAP_ON_END"), **_ZERO_COMMON},
                          _INITIATOR_NOT_MODELLED, True),
  "gc_12_0_0": Generation({"PGM_RSRC1": ("FP16_OVFL", "DEBUG_MODE"),
                           "PGM_RSRC2": ("DYNAMIC_VGPR", "EXCP_EN", "EXCP_EN_MSB", "TG_SIZE_EN", "WGP_TAKEOVER"),
                           "PGM_RSRC3": ("SHARED_VGPR_CNT", "GLG_EN"), "NUM_THREAD_X": ("INTERLEAVE_BITS_X",),
                           "NUM_THREAD_Y": ("INTERLEAVE_BITS_Y",), **_ZERO_COMMON},
                          (*_INITIATOR_NOT_MODELLED, "INTERLEAVE_2D_EN"), False)}


class SHRegisters:
  """One queue's COMPUTE_* registers as SET_SH_REG sets them: `gc` is the chip's GC register module (its generation
  decodes them), `bases` the GC segment bases (dword addresses), `name_of` names any register address (for the refusal
  of one this queue may not write)."""
  def __init__(self, gc: ModuleType, bases, name_of):
    generation = gc.__name__.rpartition(".")[2]
    if generation not in GENERATIONS: raise ValueError(f"the SPI model decodes the COMPUTE_* registers of {', '.join(GENERATIONS)}, not {generation}")
    self.gc, self.generation = gc, generation
    self.addr = {name: getattr(gc, f"regCOMPUTE_{name}").addr(bases) for name in WRITABLE}
    self.name, self.name_of = {a: n for n, a in self.addr.items()}, name_of
    self.values: dict[str, int] = {}

  def write(self, addr: int, value: int, what: str) -> None:
    name = self.name.get(addr)
    if name is None:
      reg = self.name_of(addr)
      why = "is not a register the model acts on" if reg.startswith("COMPUTE_") else \
            "is not a compute register: a compute queue may write only COMPUTE_* SH registers"
      raise RingError(f"{what}: {reg} {why} (those modelled: COMPUTE_{', COMPUTE_'.join(WRITABLE[:20])}, COMPUTE_USER_DATA_0..15)")
    self.values[name] = value

  def get(self, name: str) -> int: return self.values.get(name, 0)


STATE = tuple(n for n in WRITABLE if not n.startswith("USER_DATA_") and n != "THREAD_TRACE_ENABLE")   # what a launch decodes (cached per value)


class Refused(Exception):
  """What the registers ask for cannot run (on hardware, or in the model)."""


def launch(sh: SHRegisters, initiator: int, queue: str, engines: int) -> tuple[Launch, tuple[int, int, int]]:
  """The waves' launch state and the workgroup size for DISPATCH_DIRECT with `initiator` on a GPU of `engines` shader
  engines (RingError if the registers ask for something the hardware would not run or the model does not model)."""
  try: kw, block, n_user = decode(sh.generation, engines, initiator, tuple(sh.get(n) for n in STATE))
  except Refused as e: raise RingError(f"{queue}: DISPATCH_DIRECT: {e}") from None
  return Launch(user_sgprs=[sh.get(f"USER_DATA_{i}") for i in range(n_user)], **kw), block


def bad(msg: str): raise Refused(msg)


@functools.lru_cache(maxsize=256)
def decode(generation: str, engines: int, initiator: int, state: tuple[int, ...]) -> tuple[dict, tuple[int, int, int], int]:
  """(Launch fields but the user SGPRs, workgroup size, user SGPR count) for the registers in STATE order, as GC register
  module `generation` defines them (a queue repeats the same values launch after launch, so this runs once for each)."""
  gc, gen = importlib.import_module(f"autogen.amd.{generation}"), GENERATIONS[generation]
  regs = dict(zip(STATE, state))
  ini = gc.regCOMPUTE_DISPATCH_INITIATOR.decode(initiator)
  if not ini["COMPUTE_SHADER_EN"]: bad("COMPUTE_SHADER_EN is not set in the initiator")
  if on := [f for f in gen.initiator_not_modelled if ini[f]]: bad(f"initiator {', '.join(on)} is not modelled")
  for name, zero in gen.must_be_zero.items():
    value = getattr(gc, f"regCOMPUTE_{name}").decode(regs[name])
    if on := [f for f in zero if value[f]]: bad(f"COMPUTE_{name} {', '.join(f'{f}={value[f]}' for f in on)} is not modelled (must be 0)")
  rsrc3 = gc.regCOMPUTE_PGM_RSRC3
  if regs["PGM_RSRC3"] & ~sum(rsrc3.mask(f) for f in rsrc3.fields): bad(f"COMPUTE_PGM_RSRC3 {regs['PGM_RSRC3']:#x} sets reserved bits")
  rsrc1, rsrc2 = gc.regCOMPUTE_PGM_RSRC1.decode(regs["PGM_RSRC1"]), gc.regCOMPUTE_PGM_RSRC2.decode(regs["PGM_RSRC2"])
  block = tuple(getattr(gc, f"regCOMPUTE_NUM_THREAD_{a}").decode(regs[f"NUM_THREAD_{a}"])["NUM_THREAD_FULL"] for a in "XYZ")
  if 0 in block: bad(f"COMPUTE_NUM_THREAD = {block}: program the workgroup size first")
  if rsrc2["USER_SGPR"] > USER_DATA: bad(f"COMPUTE_PGM_RSRC2.USER_SGPR = {rsrc2['USER_SGPR']}, but there are {USER_DATA} USER_DATA registers")
  if rsrc2["TIDIG_COMP_CNT"] == 3: bad("COMPUTE_PGM_RSRC2.TIDIG_COMP_CNT = 3 is reserved")
  wave64 = not ini["CS_W32_EN"]
  waves = -(-block[0] * block[1] * block[2] // (64 if wave64 else 32))
  # MODE at wave start: FLOAT_MODE = round [3:0] | denorm [7:4], DX10_CLAMP [8], IEEE [9] (RDNA3 ISA, "MODE"; gfx12: FLOAT_MODE only)
  mode = rsrc1["FLOAT_MODE"] | (rsrc1["DX10_CLAMP"] << 8 | rsrc1["IEEE_MODE"] << 9 if gen.mode_bits else 0)
  kw = dict(pc=(regs["PGM_HI"] << 32 | regs["PGM_LO"]) << 8, wave64=wave64, lds_bytes=rsrc2["LDS_SIZE"] * LDS_GRANULE,
            tgid_enable=(bool(rsrc2["TGID_X_EN"]), bool(rsrc2["TGID_Y_EN"]), bool(rsrc2["TGID_Z_EN"])),
            scratch_offset_sgpr=bool(rsrc2["SCRATCH_EN"]), mode=mode, wgp_mode=bool(rsrc1["WGP_MODE"]),
            scratch=scratch_ring(gc, regs, rsrc2, waves, engines), tid_components=rsrc2["TIDIG_COMP_CNT"] + 1)
  return kw, block, rsrc2["USER_SGPR"]


def scratch_ring(gc: ModuleType, regs: dict[str, int], rsrc2: dict[str, int], waves: int, engines: int) -> Scratch | None:
  """COMPUTE_DISPATCH_SCRATCH_BASE and COMPUTE_TMPRING_SIZE as the waves' scratch ring (None without SCRATCH_EN)."""
  if not rsrc2["SCRATCH_EN"]: return None
  tmpring = gc.regCOMPUTE_TMPRING_SIZE.decode(regs["TMPRING_SIZE"])
  if not tmpring["WAVESIZE"]: bad("the kernel enables scratch (COMPUTE_PGM_RSRC2.SCRATCH_EN) but COMPUTE_TMPRING_SIZE.WAVESIZE is 0")
  if tmpring["WAVES"] < waves:
    bad(f"a workgroup of {waves} waves needs {waves} scratch slots on its shader engine, COMPUTE_TMPRING_SIZE.WAVES is "
        f"{tmpring['WAVES']}: it would never launch")
  slot = tmpring["WAVESIZE"] * SCRATCH_WAVESIZE_UNIT
  base = (regs["DISPATCH_SCRATCH_BASE_HI"] << 32 | regs["DISPATCH_SCRATCH_BASE_LO"]) << 8
  return Scratch(base, slot, tmpring["WAVES"] * slot, engines)
