"""QMD decoding as the compute engine's scheduler (SKED) reads a grid launch: V03 on AMPERE_COMPUTE_A/B (clc6c0qmd.h,
clc7c0qmd.h), V04 on HOPPER_COMPUTE_A (clcbc0qmd.h), from the field tables of autogen.qmdlayout.

Strict: the version must be the class's (V03_00 on c6c0/c7c0; V04_00 on cbc0, whose header also defines V03 but
whether GH100 takes it is unverified, reference nv_driver.md section 13.5); every field the model does not act on must be
0 (or, for cache-invalidate and prefetch hints, which a model without caches needs nothing for, 0 or 1); bits that no
field covers must be 0. Each refusal is a QMDError naming the field and its value.
Acted on: grid and CTA dims, program address, register and barrier counts, shared memory size and SM shared-memory
configs, local memory size, SASS version, constant buffers 0-7 (valid, address, size), the release semaphores
(payload 32/64-bit, one/two/four words with the PTIMER ns at +8 for four, reductions, the non-blocking interrupt),
program prefetch (must cover the program address when its size is nonzero).
"""
from __future__ import annotations
import functools
from dataclasses import dataclass, field

from autogen import qmdlayout

LAYOUTS = qmdlayout.LAYOUTS
MAX_REGISTERS = 255                      # per thread (sm_80, sm_90)
REGISTER_FILE = 65536                    # 32-bit registers per SM
# hints a model with no caches, no prefetcher and one CTA at a time honours by doing nothing: the values accepted
HINTS = {**dict.fromkeys(("INVALIDATE_TEXTURE_HEADER_CACHE", "INVALIDATE_TEXTURE_SAMPLER_CACHE", "INVALIDATE_TEXTURE_DATA_CACHE",
                          "INVALIDATE_SHADER_DATA_CACHE", "INVALIDATE_INSTRUCTION_CACHE", "INVALIDATE_SHADER_CONSTANT_CACHE",
                          "SM_GLOBAL_CACHING_ENABLE", "API_VISIBLE_CALL_LIMIT", "SAMPLER_INDEX", "PROGRAM_PREFETCH_TYPE",
                          *(f"CONSTANT_BUFFER_{k}_{i}" for k in ("INVALIDATE", "PREFETCH_POST") for i in range(8))), (0, 1)),
         **{f"CONSTANT_BUFFER_PREFETCH_{i}": (0, 1, 2) for i in range(8)},     # NONE, PRE, POST
         "CWD_MEMBAR_TYPE": (0, 1, 3), "QMD_GROUP_ID": range(64)}              # L1_NONE, L1_SYSMEMBAR, L1_MEMBAR


class QMDError(RuntimeError):
  """A QMD the model refuses to launch."""


@dataclass
class Release:
  """A release semaphore of the QMD, written when the grid completes."""
  address: int
  payload: int
  payload64: bool
  words: int                             # 1, 2 or 4 (four: the timestamp at +8)
  reduction: int | None                  # RED_* op, or None for a plain write
  signed: bool
  interrupt: bool


@dataclass
class Launch:
  grid: tuple[int, int, int]
  block: tuple[int, int, int]
  program: int
  registers: int
  barriers: int
  shared_bytes: int
  local_bytes: int                       # per thread
  sass_version: int
  cbs: dict[int, tuple[int, int]] = field(default_factory=dict)   # slot -> (address, bytes)
  releases: list[Release] = field(default_factory=list)


def _names(v04: bool, L: qmdlayout.QMDLayout) -> dict[str, str]:
  if v04:
    return dict(grid=("GRID_WIDTH", "GRID_HEIGHT", "GRID_DEPTH"), regs="REGISTER_COUNT", cb_lo="CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_{}",
                cb_hi="CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_{}", prog=("PROGRAM_ADDRESS_LOWER", "PROGRAM_ADDRESS_UPPER"),
                rel=dict(enable="RELEASE_ENABLE_{}", lo="RELEASE_SEMAPHORE{}_ADDR_LOWER", hi="RELEASE_SEMAPHORE{}_ADDR_UPPER",
                         plo="RELEASE_SEMAPHORE{}_PAYLOAD_LOWER", phi="RELEASE_SEMAPHORE{}_PAYLOAD_UPPER", p64="RELEASE_PAYLOAD64B_{}",
                         size="RELEASE_STRUCTURE_SIZE_{}", red="RELEASE_REDUCTION_ENABLE_{}", op="RELEASE_REDUCTION_OP_{}",
                         fmt="RELEASE_REDUCTION_FORMAT_{}", membar="RELEASE_MEMBAR_TYPE_{}", intr="RELEASE_TRAP_TYPE_{}"))
  return dict(grid=("CTA_RASTER_WIDTH", "CTA_RASTER_HEIGHT", "CTA_RASTER_DEPTH"), regs="REGISTER_COUNT_V",
              cb_lo="CONSTANT_BUFFER_ADDR_LOWER_{}", cb_hi="CONSTANT_BUFFER_ADDR_UPPER_{}", prog=("PROGRAM_ADDRESS_LOWER", "PROGRAM_ADDRESS_UPPER"),
              rel=dict(enable="RELEASE{}_ENABLE", lo="RELEASE{}_ADDRESS_LOWER", hi="RELEASE{}_ADDRESS_UPPER", plo="RELEASE{}_PAYLOAD_LOWER",
                       phi="RELEASE{}_PAYLOAD_UPPER", p64="RELEASE{}_PAYLOAD64B", size="RELEASE{}_STRUCTURE_SIZE",
                       red="RELEASE{}_REDUCTION_ENABLE", op="RELEASE{}_REDUCTION_OP", fmt="RELEASE{}_REDUCTION_FORMAT",
                       membar="RELEASE{}_MEMBAR_TYPE",   # clc7c0qmd.h renames NON_BLOCKING_INTR_TYPE TRAP_TYPE
                       intr="RELEASE{}_NON_BLOCKING_INTR_TYPE" if "RELEASE0_NON_BLOCKING_INTR_TYPE" in L.fields else "RELEASE{}_TRAP_TYPE"))


@functools.cache
def _acted(L: qmdlayout.QMDLayout, v04: bool) -> frozenset[str]:
  """The fields decode() reads."""
  n = _names(v04, L)
  acted = {"QMD_MAJOR_VERSION", "QMD_MINOR_VERSION", "QMD_VERSION", "QMD_TYPE", *n["grid"], *n["prog"], n["regs"], "BARRIER_COUNT",
           "CTA_THREAD_DIMENSION0", "CTA_THREAD_DIMENSION1", "CTA_THREAD_DIMENSION2", "SHARED_MEMORY_SIZE", "SASS_VERSION",
           "MIN_SM_CONFIG_SHARED_MEM_SIZE", "MAX_SM_CONFIG_SHARED_MEM_SIZE", "TARGET_SM_CONFIG_SHARED_MEM_SIZE",
           "SHADER_LOCAL_MEMORY_LOW_SIZE", "SHADER_LOCAL_MEMORY_HIGH_SIZE", "PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED",
           "PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", "PROGRAM_PREFETCH_SIZE"}
  acted |= {f.format(i) for i in range(8) for f in ("CONSTANT_BUFFER_VALID_{}", n["cb_lo"], n["cb_hi"], "CONSTANT_BUFFER_SIZE_SHIFTED4_{}")}
  acted |= {f.format(i) for i in range(3) for f in n["rel"].values()}
  return frozenset(acted)


@functools.cache
def _checked(L: qmdlayout.QMDLayout, v04: bool) -> tuple[int, tuple[str, ...]]:
  """(the bits of every field that must be 0, the hint fields of the layout)."""
  acted, strict = _acted(L, v04), 0
  for f, (hi, lo) in L.fields.items():
    if f not in acted and f not in HINTS: strict |= ((1 << (hi - lo + 1)) - 1) << lo
  return strict, tuple(f for f in L.fields if f in HINTS)


def decode(cls: int, raw: bytes, max_shared_kb: int, sass_version: int) -> Launch:
  """The launch a QMD of compute class `cls` describes, on a chip whose SMs have `max_shared_kb` KiB of shared memory
  and run SASS version `sass_version` (0x90 = sm_90); QMDError for anything the model refuses."""
  L = LAYOUTS[cls]
  q = int.from_bytes(raw[:L.nbytes], "little")
  v04 = L is qmdlayout.V04_HOPPER
  n = _names(v04, L)
  g = lambda f: L.get(q, f)
  def refuse(f: str, why: str) -> QMDError: return QMDError(f"QMD {L.prefix}_{f} = {g(f):#x}: {why}")

  want = (4, 0) if v04 else (3, 0)
  got = (g("QMD_MAJOR_VERSION"), g("QMD_MINOR_VERSION" if v04 else "QMD_VERSION"))
  if got != want:
    raise QMDError(f"QMD version {got[0]}.{got[1]} on compute class {cls:#x}: the model decodes V{want[0]:02d}_{want[1]:02d} on it"
                   + (" (GH100 taking V03 is unverified)" if v04 else ""))
  if v04 and g("QMD_TYPE") != L.value("QMD_TYPE_GRID_CTA"): raise refuse("QMD_TYPE", "only GRID_CTA grids are modelled (no CGAs, no queues)")
  if q & ~L.used: raise QMDError(f"QMD {L.prefix}: bits {q & ~L.used:#x} that no field covers are set (reserved: must be 0)")

  strict, hints = _checked(L, v04)
  if q & strict:
    f = next(f for f in L.fields if f not in hints and f not in _acted(L, v04) and g(f))
    raise refuse(f, "the model does not act on this field: it must be 0")
  for f in hints:
    if g(f) not in HINTS[f]: raise refuse(f, f"not one of the values {list(HINTS[f])} of this field")

  grid = tuple(g(f) for f in n["grid"])
  block = (g("CTA_THREAD_DIMENSION0"), g("CTA_THREAD_DIMENSION1"), g("CTA_THREAD_DIMENSION2"))
  for f, v in zip(n["grid"], grid):
    if not v: raise refuse(f, "an empty grid")
  for i, v in enumerate(block):
    if not v: raise refuse(f"CTA_THREAD_DIMENSION{i}", "an empty CTA")
  threads = block[0] * block[1] * block[2]
  if threads > 1024: raise QMDError(f"QMD CTA of {block} = {threads} threads: at most 1024 (sm_80, sm_90)")
  regs = g(n["regs"])
  if not 1 <= regs <= MAX_REGISTERS: raise refuse(n["regs"], f"a thread has 1 to {MAX_REGISTERS} registers")
  if regs * -(-threads // 32) * 32 > REGISTER_FILE:
    raise refuse(n["regs"], f"{threads} threads of {regs} registers do not fit the SM's {REGISTER_FILE}-register file")
  if g("SASS_VERSION") != sass_version: raise refuse("SASS_VERSION", f"this GPU runs SASS version {sass_version:#x}")
  shared = g("SHARED_MEMORY_SIZE")
  # SM shared-memory configs are (KiB / 4) + 1 (reference section 6); the CTA's shared memory must fit the target
  cfg = {f: g(f) for f in ("MIN_SM_CONFIG_SHARED_MEM_SIZE", "TARGET_SM_CONFIG_SHARED_MEM_SIZE", "MAX_SM_CONFIG_SHARED_MEM_SIZE")}
  for f, v in cfg.items():
    if not 1 <= v <= max_shared_kb // 4 + 1: raise refuse(f, f"an SM config of (KiB/4)+1 from 1 to {max_shared_kb // 4 + 1} ({max_shared_kb} KiB)")
  if not cfg["MIN_SM_CONFIG_SHARED_MEM_SIZE"] <= cfg["TARGET_SM_CONFIG_SHARED_MEM_SIZE"] <= cfg["MAX_SM_CONFIG_SHARED_MEM_SIZE"]:
    raise QMDError(f"QMD SM shared-memory configs min {cfg['MIN_SM_CONFIG_SHARED_MEM_SIZE']} / target "
                   f"{cfg['TARGET_SM_CONFIG_SHARED_MEM_SIZE']} / max {cfg['MAX_SM_CONFIG_SHARED_MEM_SIZE']} are not ordered")
  if shared > (cfg["TARGET_SM_CONFIG_SHARED_MEM_SIZE"] - 1) * 4096:
    raise refuse("SHARED_MEMORY_SIZE", f"more than the target SM config's {(cfg['TARGET_SM_CONFIG_SHARED_MEM_SIZE'] - 1) * 4} KiB")
  program = g(n["prog"][0]) | g(n["prog"][1]) << 32
  if program % 128: raise refuse(n["prog"][0], "the program address must be 128-byte aligned (a SASS instruction bundle)")
  if g("PROGRAM_PREFETCH_SIZE"):
    pre = g("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED") | g("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED") << 32
    if pre != program >> 8: raise refuse("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", f"the prefetch does not start at the program ({program:#x} >> 8)")
  launch = Launch(grid, block, program, regs, g("BARRIER_COUNT"), shared,
                  g("SHADER_LOCAL_MEMORY_LOW_SIZE") + g("SHADER_LOCAL_MEMORY_HIGH_SIZE"), g("SASS_VERSION"))
  shift = 6 if v04 else 0
  for i in range(8):
    lo, hi = n["cb_lo"].format(i), n["cb_hi"].format(i)
    addr = (g(lo) | g(hi) << 32) << shift
    if not g(f"CONSTANT_BUFFER_VALID_{i}"):
      if addr or g(f"CONSTANT_BUFFER_SIZE_SHIFTED4_{i}"): raise refuse(lo, f"constant buffer {i} is not valid but has an address or size")
      continue
    if addr % 64: raise refuse(lo, "constant buffers are 64-byte aligned")
    launch.cbs[i] = (addr, g(f"CONSTANT_BUFFER_SIZE_SHIFTED4_{i}") << 4)
  if 0 not in launch.cbs: raise QMDError(f"QMD {L.prefix}: constant buffer 0 (the kernel's parameters) is not valid")
  for i in range(3):
    r = {k: f.format(i) for k, f in n["rel"].items()}
    if not g(r["enable"]):
      if any(g(f) for f in r.values()): raise refuse(next(f for f in r.values() if g(f)), f"release {i} is not enabled")
      continue
    size = g(r["size"])
    sizes = {L.value(f"{r['size'].removesuffix(f'_{i}')}_SEMAPHORE_{nm}"): w for w, nm in ((1, "ONE_WORD"), (2, "TWO_WORDS"), (4, "FOUR_WORDS"))}
    if size not in sizes: raise refuse(r["size"], "not a structure size")
    p64 = bool(g(r["p64"]))
    if p64 and sizes[size] == 1: raise refuse(r["p64"], "a 64-bit payload does not fit a one-word semaphore")
    intr = g(r["intr"])
    if intr > 1: raise refuse(r["intr"], "conditional traps are not modelled (NONE and an unconditional interrupt are)")
    addr = g(r["lo"]) | g(r["hi"]) << 32
    align = 16 if sizes[size] == 4 else 8 if p64 else 4
    if addr % align: raise refuse(r["lo"], f"a {sizes[size]}-word semaphore is {align}-byte aligned")
    launch.releases.append(Release(addr, g(r["plo"]) | (g(r["phi"]) << 32 if p64 else 0), p64, sizes[size],
                                   g(r["op"]) if g(r["red"]) else None, bool(g(r["fmt"])), bool(intr)))
  return launch
