"""QMDs (queue meta data: one grid launch) for the compute classes, built from the field tables of autogen.qmdlayout:
V03_00 on AMPERE_COMPUTE_A/B (clc6c0qmd.h/clc7c0qmd.h), V04_00 on HOPPER_COMPUTE_A (clcbc0qmd.h; reference
nv_driver.md sections 6 and 13.5), and constant buffer 0's driver words (section 8).
"""
from __future__ import annotations
import struct
from dataclasses import dataclass

from autogen import qmdlayout

LAYOUTS = qmdlayout.LAYOUTS
RESERVED_SHARED = 0x400                  # shared memory sm_80+ reserves per CTA (reference section 6)
# the SM shared-memory carveouts (KiB) and the most per SM: GA100 164, GA10x/AD10x 100, GH100 228
CARVEOUTS = (8, 16, 32, 64, 100, 132, 164, 196, 228)
MAX_SHARED_KB = {"sm_80": 164, "sm_86": 100, "sm_87": 164, "sm_89": 100, "sm_90": 228}
STACK_TOP = 0xFFFDC0                     # cb0 0x28: the initial stack pointer, the 16 MiB local window less 0x240 (section 8)
PREFETCH_MAX = 0x1FF                     # PROGRAM_PREFETCH_SIZE: 256-byte units


@dataclass
class Grid:
  """What one launch's QMD says besides its grid: the program and its resources."""
  program: int                           # SASS address (128-byte aligned)
  program_bytes: int
  registers: int
  shared_bytes: int                      # static shared memory of the kernel
  local_bytes: int                       # per thread
  sass_version: int                      # 0x90 for sm_90
  max_shared_kb: int


def sm_config(kb: int) -> int:
  """A MIN/MAX/TARGET_SM_CONFIG_SHARED_MEM_SIZE value: (KiB / 4) + 1."""
  return kb // 4 + 1


def build(cls: int, g: Grid, grid: tuple[int, int, int], block: tuple[int, int, int], cb0: tuple[int, int],
          constants: dict[int, tuple[int, int]] | None = None) -> bytes:
  """The QMD of class `cls` for `grid` CTAs of `block` threads, constant buffer 0 at cb0 = (address, bytes) and the
  program's other constant buffers ({slot: (address, bytes)})."""
  L = LAYOUTS[cls]
  v04 = L is qmdlayout.V04_HOPPER
  shared = -(-(RESERVED_SHARED + g.shared_bytes) // 128) * 128
  fits = next((kb for kb in CARVEOUTS if kb * 1024 >= shared and kb <= g.max_shared_kb), None)
  if fits is None: raise ValueError(f"{shared} bytes of shared memory per CTA: this GPU's SMs have {g.max_shared_kb} KiB")
  f = dict(QMD_MAJOR_VERSION=4 if v04 else 3, SASS_VERSION=g.sass_version, BARRIER_COUNT=1, SHARED_MEMORY_SIZE=shared,
           MIN_SM_CONFIG_SHARED_MEM_SIZE=sm_config(fits), TARGET_SM_CONFIG_SHARED_MEM_SIZE=sm_config(fits),
           MAX_SM_CONFIG_SHARED_MEM_SIZE=sm_config(g.max_shared_kb), SHADER_LOCAL_MEMORY_HIGH_SIZE=g.local_bytes,
           CTA_THREAD_DIMENSION0=block[0], CTA_THREAD_DIMENSION1=block[1], CTA_THREAD_DIMENSION2=block[2],
           PROGRAM_ADDRESS_LOWER=g.program & 0xFFFFFFFF, PROGRAM_ADDRESS_UPPER=g.program >> 32,
           PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED=(g.program >> 8) & 0xFFFFFFFF, PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED=g.program >> 40,
           PROGRAM_PREFETCH_SIZE=min(g.program_bytes >> 8, PREFETCH_MAX),
           INVALIDATE_TEXTURE_HEADER_CACHE=1, INVALIDATE_TEXTURE_SAMPLER_CACHE=1, INVALIDATE_TEXTURE_DATA_CACHE=1,
           INVALIDATE_SHADER_DATA_CACHE=1, API_VISIBLE_CALL_LIMIT=L.value("API_VISIBLE_CALL_LIMIT_NO_CHECK"),
           SAMPLER_INDEX=L.value("SAMPLER_INDEX_VIA_HEADER_INDEX"), CWD_MEMBAR_TYPE=L.value("CWD_MEMBAR_TYPE_L1_SYSMEMBAR"))
  if v04:
    f.update(QMD_TYPE=L.value("QMD_TYPE_GRID_CTA"), GRID_WIDTH=grid[0], GRID_HEIGHT=grid[1], GRID_DEPTH=grid[2],
             REGISTER_COUNT=g.registers)
  else:
    f.update(SM_GLOBAL_CACHING_ENABLE=1, CTA_RASTER_WIDTH=grid[0], CTA_RASTER_HEIGHT=grid[1], CTA_RASTER_DEPTH=grid[2],
             REGISTER_COUNT_V=g.registers)
  for slot, (addr, size) in {0: cb0, **(constants or {})}.items():
    f.update({f"CONSTANT_BUFFER_SIZE_SHIFTED4_{slot}": -(-size // 16), f"CONSTANT_BUFFER_VALID_{slot}": 1,
              f"CONSTANT_BUFFER_INVALIDATE_{slot}": 1}, **_cb_address(L, slot, addr))
  return L.build(**f)


def _cb_address(L: qmdlayout.QMDLayout, slot: int, addr: int) -> dict[str, int]:
  if addr % 64: raise ValueError(f"constant buffer {slot} at {addr:#x} is not 64-byte aligned")
  if L is qmdlayout.V04_HOPPER:
    return {f"CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_{slot}": addr >> 6 & 0xFFFFFFFF, f"CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_{slot}": addr >> 38}
  return {f"CONSTANT_BUFFER_ADDR_LOWER_{slot}": addr & 0xFFFFFFFF, f"CONSTANT_BUFFER_ADDR_UPPER_{slot}": addr >> 32}


def with_cb0(cls: int, q: bytes, addr: int) -> bytes:
  """QMD `q` with constant buffer 0 moved to `addr` (one launch's arguments; the rest of the QMD is per grid size)."""
  L = LAYOUTS[cls]
  v = int.from_bytes(q, "little")
  for k, x in _cb_address(L, 0, addr).items(): v = L.set(v, k, x)
  return v.to_bytes(L.nbytes, "little")


def cb0_words(block: tuple[int, int, int], grid: tuple[int, int, int], shared_window: int, local_window: int) -> bytes:
  """Constant buffer 0's first 0x30 bytes, what the SASS reads besides the parameters: blockDim (0x0), gridDim (0xc),
  the shared (0x18) and local (0x20) windows, the initial stack pointer (0x28) (reference section 8)."""
  return struct.pack("<6IQQQ", *block, *grid, shared_window, local_window, STACK_TOP)
