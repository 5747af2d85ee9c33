"""Running a dispatch: wave setup from raw parameters or from a kernel descriptor, the loop around the
compiled scheduler, and the errors a dispatch stops with.

Kernel descriptor (AMDGPU HSA code object v5, 64 bytes): group_segment_fixed_size @0,
private_segment_fixed_size @4, kernarg_size @8, kernel_code_entry_byte_offset (i64) @16, rsrc3 @44,
rsrc1 @48, rsrc2 @52, kernel_code_properties (u16) @56. rsrc1: FLOAT_DENORM_MODE_32 [17:16],
FLOAT_DENORM_MODE_16_64 [19:18], ENABLE_IEEE_MODE [23], WGP_MODE [29]. rsrc2: ENABLE_PRIVATE_SEGMENT [0], USER_SGPR_COUNT [5:1],
ENABLE_SGPR_WORKGROUP_ID_X/Y/Z [9:7], ENABLE_SGPR_WORKGROUP_INFO [10], ENABLE_VGPR_WORKITEM_ID [12:11]. kernel_code_properties: user SGPRs in
this order when enabled: private segment buffer (4) [0], dispatch ptr (2) [1], queue ptr (2) [2], kernarg segment
ptr (2) [3], dispatch id (2) [4], flat scratch init (2) [5], private segment size (1) [6]; wave32 [10].
"""
from __future__ import annotations
import struct, weakref
from dataclasses import dataclass
from emu import memory
from emu.amdgcn import operands
from emu.amdgcn.disasm import disasm
from emu.amdgcn import runtime, targets
from emu.amdgcn.trace import Trace, CHUNK
from emu.amdgcn.program import Program, ffi, ILLEGAL_UNSUPPORTED, ILLEGAL_DECODE
from emu.amdgcn.gen_scalar import ILLEGAL_ROUND_MODE, ILLEGAL_CODE_END, ILLEGAL_HWREG, ILLEGAL_MOVREL
from emu.amdgcn.gen_interp import ILLEGAL_LDSDIR_M0, ILLEGAL_LDSDIR_WGP

STOP_NONE, STOP_FAULT, STOP_NOBLOCK, STOP_TRAP, STOP_HALT, STOP_LIMIT, STOP_ILLEGAL, STOP_TRACE = range(8)
SPACES = {0: "global", 1: "scratch (private)", 2: "LDS", 3: "misaligned atomic", 4: "scratch backing memory"}
ILLEGAL = {1: "VGPR index (M0-relative) out of range", ILLEGAL_ROUND_MODE: "non-default rounding modes are not modelled",
           ILLEGAL_CODE_END: "executed s_code_end padding (ran past the end of the program)",
           ILLEGAL_HWREG: "hardware register not modelled", ILLEGAL_MOVREL: "SGPR index (M0-relative) out of range",
           6: "swizzled buffer resources are not modelled",
           ILLEGAL_LDSDIR_M0: "M0 holds reserved bits, a reserved data type or a misaligned LDS offset for this load",
           ILLEGAL_LDSDIR_WGP: "LDS_PARAM_LOAD and LDS_DIRECT_LOAD are not supported in WGP mode (the kernel's rsrc1 WGP_MODE)"}
# flat apertures (bits 63:32 of their 4 GiB windows) when the caller gives none: KFD's for gfx9+ (kfd_flat_memory.c:
# LDS at 1 << 48, scratch at 2 << 48), i.e. SH_MEM_BASES SHARED_BASE 1, PRIVATE_BASE 2
SHARED_HI, PRIVATE_HI = 0x10000, 0x20000
DEFAULT_MODE = 0x2C0      # MODE: f32 denormals flushed, f16/f64 kept (FloatMode 192: denorm [7:4] = 0xC), IEEE [9] on
MAX_LDS = 64 << 10
HOST_SCRATCH_VA = 0xFFFF_F000_0000_0000   # where run()/dispatch() place the scratch they allocate themselves (no GPU memory)


class WaveError(RuntimeError):
  """A dispatch stopped because of a wave: `workgroup`, `wave`, `pc`, `instruction` say which and where."""
  def __init__(self, msg: str, workgroup: tuple, wave: int, pc: int, instruction: str, address: int | None = None):
    super().__init__(msg)
    self.workgroup, self.wave, self.pc, self.instruction, self.address = workgroup, wave, pc, instruction, address


class WaveFault(WaveError, memory.MemoryFault):
  """A wave accessed an unmapped / out-of-range address."""


class WaveTrap(WaveError):
  """s_trap, s_sethalt or an instruction the emulator cannot execute."""


class InstructionLimit(WaveError):
  """The dispatch ran more wave-instructions than `max_instructions`."""


@dataclass
class Stats:
  wave_instructions: int
  workgroups: int
  waves: int


@dataclass(frozen=True)
class Scratch:
  """The scratch ring the waves' private memory lives in (GPU addresses; a GPU model's COMPUTE_DISPATCH_SCRATCH_BASE and
  COMPUTE_TMPRING_SIZE): workgroup k runs on shader engine k % ses, and its wave i uses slot i of that engine's ring,
  at base + (k % ses) * se_bytes + i * wave_bytes. A lane may use wave_bytes / lanes bytes (the slot is dword-swizzled)."""
  base: int
  wave_bytes: int
  se_bytes: int = 0
  ses: int = 1


@dataclass
class Launch:
  """Everything a dispatch needs besides memory and the grid."""
  pc: int
  user_sgprs: list[int]
  wave64: bool = False
  lds_bytes: int = 0
  scratch_bytes_per_lane: int = 0   # without `scratch`: each lane's private bytes (host memory for this dispatch)
  tgid_enable: tuple[bool, bool, bool] = (True, True, True)
  scratch_offset_sgpr: bool = False
  mode: int = DEFAULT_MODE
  wgp_mode: bool = False
  target: str = targets.DEFAULT   # the ISA (targets.py): gfx1100, RDNA3.5 gfx1150 / gfx1151, RDNA4 gfx1200 / gfx1201
  scratch: Scratch | None = None   # the ring in GPU memory the waves' scratch lives in (its slots set the lanes' bytes)
  tid_components: int = 3          # how many of x, y, z v0 carries (the others read 0)
  shared_hi: int = SHARED_HI   # flat LDS aperture: addresses whose bits 63:32 are this (SH_MEM_BASES.SHARED_BASE << 16)
  private_hi: int = PRIVATE_HI # flat scratch aperture (SH_MEM_BASES.PRIVATE_BASE << 16)


# compiled programs per memory object (dropped with it), by (entry pc, wave64, target)
_programs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def program_for(mem, pc: int, wave64: bool, target: str = targets.DEFAULT) -> Program:
  """The compiled program at `pc`, rebuilt when the code in memory changed. A memory with an instruction cache
  (`icache_epoch`, which changes when it is invalidated) keeps running what it compiled until then without re-reading
  the code, as a stale I$ would."""
  progs = _programs.setdefault(mem, {})
  p, epoch = progs.get((pc, wave64, target)), getattr(mem, "icache_epoch", None)
  if p is not None and (epoch is None or p.epoch != epoch) and not p.still_valid(mem): p = None
  if p is None:
    p = Program(mem, pc, wave64, target)
    p.build()
    progs[(pc, wave64, target)] = p
  p.epoch = epoch
  return p


def _describe(p: Program, pc: int) -> str:
  return disasm(p.raw[pc], p.target)[0] if pc in p.raw else "<no instruction decoded here>"


def execute(mem: memory.GpuMemory, launch: Launch, grid: tuple[int, int, int], block: tuple[int, int, int],
            max_instructions: int = 0, trace: Trace | None = None) -> Stats:
  """Run a dispatch; with `trace`, record the instructions each wave ran into it (trace.py)."""
  grid, block = tuple(int(g) for g in grid), tuple(int(b) for b in block)
  if len(grid) != 3 or len(block) != 3 or min(grid) < 1 or min(block) < 1:
    raise ValueError(f"grid {grid} and block {block} must be three positive sizes")
  nthreads = block[0] * block[1] * block[2]
  if nthreads > 1024: raise ValueError(f"block {block} has {nthreads} work-items; a workgroup holds at most 1024")
  if not 0 <= launch.lds_bytes <= MAX_LDS: raise ValueError(f"lds_bytes={launch.lds_bytes} is outside 0..{MAX_LDS}")
  ttmp = targets.get(launch.target).ttmp_tgids
  nsys = (0 if ttmp else sum(launch.tgid_enable)) + launch.scratch_offset_sgpr
  if len(launch.user_sgprs) + nsys > 32 or len(launch.user_sgprs) > 32:
    raise ValueError(f"{len(launch.user_sgprs)} user SGPRs (+{nsys} system SGPRs) is more than the 32 a wave can receive")
  lanes = 64 if launch.wave64 else 32
  nwaves = (nthreads + lanes - 1) // lanes
  f = ffi()
  if lanes not in (t := targets.get(launch.target)).wave_sizes: raise ValueError(f"{t.name} has no wave{lanes} (it runs wave{t.wave_sizes})")
  if mem.fetch(launch.pc) is None:
    raise WaveFault(f"instruction fetch at the entry point {launch.pc:#x} faulted (not mapped, or not executable)", (0, 0, 0), 0, launch.pc, "",
                    launch.pc)
  p = program_for(mem, launch.pc, launch.wave64, launch.target)
  sched = runtime.dispatch_run(launch.wave64)
  d = f.new("dispatch_t *")
  d.grid, d.block, d.wave64, d.nuser = list(grid), list(block), int(launch.wave64), len(launch.user_sgprs)
  d.user[0:len(launch.user_sgprs)] = [v & 0xFFFFFFFF for v in launch.user_sgprs]
  # tgid_en: 1 = the id in the next SGPR after the user SGPRs, 2 = the target's TTMP9 / TTMP7 (c/sched.c wave_init)
  d.tgid_en, d.scratch_off_en = [2] * 3 if ttmp else [int(x) for x in launch.tgid_enable], int(launch.scratch_offset_sgpr)
  if launch.shared_hi == launch.private_hi:
    raise ValueError(f"the flat LDS and scratch apertures are both at {launch.shared_hi << 32:#x}: they must differ")
  d.tid_mask = (1 << 10 * launch.tid_components) - 1
  d.shared_hi, d.private_hi, d.mode, d.entry, d.wgp_mode = launch.shared_hi, launch.private_hi, launch.mode, launch.pc, int(launch.wgp_mode)
  d.lds_bytes, d.scratch_per_lane, d.max_instructions = launch.lds_bytes, launch.scratch_bytes_per_lane, max_instructions
  keep = []
  if launch.lds_bytes: keep.append(lds := f.new("uint8_t[]", launch.lds_bytes)); d.lds = lds
  scratch, host_scratch = launch.scratch, None
  if scratch is None and launch.scratch_bytes_per_lane:   # one ring slot per wave of a workgroup, on the host
    wave_bytes = -(-launch.scratch_bytes_per_lane // 4) * 4 * lanes
    keep.append(host_scratch := f.new("uint8_t[]", nwaves * wave_bytes))
    scratch = Scratch(HOST_SCRATCH_VA, wave_bytes)
  if scratch is not None:
    d.scratch_base, d.scratch_wave_bytes, d.scratch_se_bytes, d.scratch_ses = scratch.base, scratch.wave_bytes, scratch.se_bytes, scratch.ses
    if launch.scratch is not None: d.scratch_per_lane = scratch.wave_bytes // lanes
  keep.append(waves := f.new("wave_t[]", nwaves)); d.waves, d.nwaves = waves, nwaves
  error: list[BaseException] = []

  scalar_lookup = getattr(mem, "lookup_scalar", None) or (lambda a: mem.lookup(a, False))

  def miss(dp, addr, write):
    if host_scratch is not None and 0 <= addr - HOST_SCRATCH_VA < len(host_scratch):
      dp.fill.va, dp.fill.len, dp.fill.host = HOST_SCRATCH_VA, len(host_scratch), host_scratch
      return 0
    try: run = scalar_lookup(int(addr)) if write == 2 else mem.lookup(int(addr), bool(write))
    except BaseException as e:   # a GPU model's own error: re-raised after the dispatch stops
      error.append(e)
      return 1
    if run is None: return 1
    dp.fill.va, dp.fill.len, dp.fill.host = run[0], run[1], f.cast("uint8_t *", run[2])
    return 0
  keep.append(cb := f.callback("int(dispatch_t *, uint64_t, uint32_t)", miss)); d.miss = cb
  if trace is not None and grid[0] * grid[1] * grid[2] >= 1 << 24: raise ValueError(f"grid {grid}: a traced dispatch has fewer than 2^24 workgroups")
  if trace is not None: keep.append(tbuf := f.new("uint64_t[]", CHUNK)); d.trace, d.trace_cap = tbuf, CHUNK
  while True:
    d.code_base, d.blocks, d.nblocks = p.base, p.blocks, p.nblocks
    rc = sched(d)
    if trace is not None: trace.drain(p, d, tbuf)
    if error: raise error[0]
    if rc == STOP_NONE: break
    if rc == STOP_TRACE: continue
    wg = tuple(d.wg)
    pc = int(d.stop_pc)
    where = f"workgroup {wg} wave {int(d.stop_wave)} at PC {pc:#x}"
    if rc == STOP_NOBLOCK:
      if mem.fetch(pc) is None: raise WaveFault(f"{where}: jumped to unmapped (or non-executable) address {pc:#x}", wg, int(d.stop_wave), pc, "", pc)
      if pc in p.leaders or pc & 3:
        raise WaveTrap(f"{where}: cannot run code at {pc:#x} ({p.problems.get(pc, 'not a valid instruction address')})", wg, int(d.stop_wave), pc, "")
      p.add(mem, pc)
      if trace is not None: trace.invalidate()
      try: p.build()
      except operands.Unsupported as e: raise WaveTrap(f"{where}: jumped to {pc:#x}: {e}", wg, int(d.stop_wave), pc, "") from e
      continue
    text = _describe(p, pc)
    if rc == STOP_FAULT:
      space, addr = SPACES.get(int(d.stop_arg), "memory"), int(d.stop_addr)
      limits = {1: f" (each lane has {int(d.scratch_per_lane)} bytes)", 2: f" (the workgroup has {launch.lds_bytes} bytes)"}
      limit = limits.get(int(d.stop_arg), " (not mapped)")
      raise WaveFault(f"{where}: `{text}` faulted on {space} address {addr:#x}{limit}", wg, int(d.stop_wave), pc, text, addr)
    if rc == STOP_TRAP:
      raise WaveTrap(f"{where}: `{text}` trapped (s_trap {int(d.stop_arg)}; no trap handler is modelled)", wg, int(d.stop_wave), pc, text)
    if rc == STOP_HALT: raise WaveTrap(f"{where}: `{text}` halted the wave (on hardware the dispatch would hang)", wg, int(d.stop_wave), pc, text)
    if rc == STOP_LIMIT: raise InstructionLimit(f"{where}: more than {max_instructions} wave-instructions executed", wg, int(d.stop_wave), pc, text)
    why = p.problems.get(pc) if int(d.stop_arg) in (ILLEGAL_UNSUPPORTED, ILLEGAL_DECODE) else ILLEGAL.get(int(d.stop_arg))
    raise WaveTrap(f"{where}: `{text}` cannot be executed: {why}", wg, int(d.stop_wave), pc, text)
  del keep
  return Stats(int(d.instructions), grid[0] * grid[1] * grid[2], grid[0] * grid[1] * grid[2] * nwaves)


def run(mem: memory.GpuMemory, pc: int, grid=(1, 1, 1), block=(32, 1, 1), user_sgprs=(), lds_bytes: int = 0,
        scratch_bytes_per_lane: int = 0, wave64: bool = False, max_instructions: int = 0, target: str = targets.DEFAULT) -> Stats:
  """Run raw machine code at `pc` for `target` (gfx1100, gfx1150, gfx1151, gfx1200, gfx1201): s0.. = user_sgprs, then
  the workgroup ids x, y, z (gfx12: in ttmp9 and ttmp7 = y | z << 16 instead); v0 = x | y << 10 | z << 20."""
  launch = Launch(pc, list(user_sgprs), wave64, lds_bytes, scratch_bytes_per_lane, target=target)
  return execute(mem, launch, grid, block, max_instructions)


@dataclass(frozen=True)
class KernelDescriptor:
  group_segment_size: int
  private_segment_size: int
  kernarg_size: int
  entry_offset: int
  rsrc1: int
  rsrc2: int
  rsrc3: int
  properties: int

  @classmethod
  def parse(cls, raw: bytes) -> "KernelDescriptor":
    if len(raw) < 64: raise ValueError(f"a kernel descriptor is 64 bytes, got {len(raw)}")
    g, p, k, _, entry = struct.unpack_from("<IIIIq", raw, 0)
    rsrc3, rsrc1, rsrc2, props = struct.unpack_from("<IIIH", raw, 44)
    return cls(g, p, k, entry, rsrc1, rsrc2, rsrc3, props)

  @property
  def wave64(self) -> bool: return not self.properties >> 10 & 1

  @property
  def mode(self) -> int:
    """Initial MODE: denorm fields from rsrc1 [19:16], IEEE from rsrc1 [23]; rounding from rsrc1 [15:12]."""
    return ((self.rsrc1 >> 12) & 0xF) | ((self.rsrc1 >> 16) & 0xF) << 4 | ((self.rsrc1 >> 23) & 1) << 9


def dispatch(mem: memory.GpuMemory, kd_addr: int, grid: tuple[int, int, int], block: tuple[int, int, int], *,
             kernarg_ptr: int = 0, dispatch_ptr: int = 0, queue_ptr: int = 0, dispatch_id: int = 0,
             lds_bytes: int | None = None, scratch_bytes_per_lane: int | None = None, max_instructions: int = 0,
             target: str = targets.DEFAULT, scratch: Scratch | None = None, trace: Trace | None = None) -> Stats:
  """Dispatch the kernel whose 64-byte descriptor is at `kd_addr` (the AMD GPU model's entry point) for `target`.
  `grid` counts workgroups. LDS defaults to the descriptor's group segment (plus any dynamic size the caller
  adds), scratch to its private segment size in host memory, or to the ring `scratch` in GPU memory. v0 carries the
  work-item id components rsrc2's ENABLE_VGPR_WORKITEM_ID [12:11] enables. `trace`: see execute()."""
  kd = KernelDescriptor.parse(memory.read(mem, kd_addr, 64))
  user: list[int] = []
  props = kd.properties
  if props & 1: raise operands.Unsupported("kernels that use the private segment buffer (flat scratch via a V#) are not supported; "
                                           "compile for gfx11 with architected scratch")
  for bit, vals in ((1, (dispatch_ptr, dispatch_ptr >> 32)), (2, (queue_ptr, queue_ptr >> 32)),
                    (3, (kernarg_ptr, kernarg_ptr >> 32)), (4, (dispatch_id, dispatch_id >> 32)), (5, (0, 0))):
    if props >> bit & 1: user += [v & 0xFFFFFFFF for v in vals]
  if props >> 6 & 1: user.append(kd.private_segment_size)
  count = (kd.rsrc2 >> 1) & 0x1F
  if len(user) > count: raise ValueError(f"kernel descriptor enables {len(user)} user SGPRs but USER_SGPR_COUNT is {count}")
  user += [0] * (count - len(user))
  if kd.rsrc2 >> 10 & 1: raise operands.Unsupported("ENABLE_SGPR_WORKGROUP_INFO is not supported")
  if kd.mode & 0xF: raise operands.Unsupported(f"FLOAT_ROUND_MODE {kd.mode & 0xF:#x} in rsrc1: only round-to-nearest-even is modelled")
  launch = Launch(kd_addr + kd.entry_offset, user, kd.wave64,
                  kd.group_segment_size if lds_bytes is None else lds_bytes,
                  kd.private_segment_size if scratch_bytes_per_lane is None else scratch_bytes_per_lane,
                  tuple(bool(kd.rsrc2 >> b & 1) for b in (7, 8, 9)), bool(kd.rsrc2 & 1), kd.mode, bool(kd.rsrc1 >> 29 & 1), target,
                  scratch, min((kd.rsrc2 >> 11 & 3) + 1, 3))
  return execute(mem, launch, grid, block, max_instructions, trace)
