"""Running a PTX kernel over a grid: compiling its translation once (cached in memory and on disk by emu.cc), packing
its parameters, the memory callback, and the errors a launch stops with.

Memory is any emu.memory.GpuMemory (`lookup(addr, write) -> (start, length, host) | None`): emu.memory.Memory for
tests, UVM's GPU VA map in the NVIDIA model (emu.nvgpu.compute). Launch limits checked (CUDA compute capability 8.x/9.0):
at most 1024 threads per block, block dimensions 1024 x 1024 x 64, grid 2^31-1 x 65535 x 65535, and 227 KiB of
shared memory per block (static plus dynamic). A Program has its own copy of the module-level .global variables
(initialised from the PTX, kept across its launches) at translate.GLOBAL_WINDOW, outside the memory object.
"""
from __future__ import annotations
import struct
from dataclasses import dataclass
from functools import cache
from cffi import FFI
from emu import cc, memory
from emu.nvgpu.ptx import runtime
from emu.nvgpu.ptx.parse import Module, PtxError, parse
from emu.nvgpu.ptx.translate import GLOBAL_WINDOW, Translator

STOP_NONE, STOP_FAULT, STOP_LIMIT, STOP_WARP, STOP_TRAP = range(5)
SPACES = {0: "global", 1: "shared", 2: "local", 3: "param", 4: "generic (global)"}
MAX_THREADS, MAX_BLOCK, MAX_GRID, MAX_SHARED = 1024, (1024, 1024, 64), ((1 << 31) - 1, 65535, 65535), 227 << 10
# generic-address windows of shared and local memory (cvta.shared / cvta.local); no global buffer lives there
SHARED_WINDOW, LOCAL_WINDOW = 0x7F00_0000_0000, 0x7F80_0000_0000


class LaunchError(RuntimeError):
  """A launch stopped because of a thread: `kernel`, `block`, `thread`, `line` and `instruction` say which."""
  def __init__(self, msg: str, kernel: str, block: tuple, thread: tuple | None, line: int | None, instruction: str | None,
               address: int | None = None):
    super().__init__(msg)
    self.kernel, self.block, self.thread, self.line, self.instruction, self.address = kernel, block, thread, line, instruction, address


class PtxFault(LaunchError, memory.MemoryFault):
  """A thread accessed an unmapped, out-of-range or misaligned address."""


class PtxTrap(LaunchError):
  """A thread executed trap / brkpt."""


class WarpError(LaunchError):
  """A .sync warp instruction whose membermask names lanes that do not execute it together."""


class InstructionLimit(LaunchError):
  """The launch ran more thread-instructions than `max_instructions`."""


@dataclass
class Stats:
  thread_instructions: int
  blocks: int
  warps_per_block: int


@cache
def ffi() -> FFI:
  f = FFI()
  f.cdef(runtime.src("state.h") + "int launch_run(launch_t *d);")
  return f


class Program:
  """One kernel of a PTX module, translated to C and compiled."""

  def __init__(self, module: Module | str, name: str | None = None):
    self.module = parse(module) if isinstance(module, str) else module
    if name is None:
      if len(self.module.kernels) != 1:
        raise PtxError(f"the PTX module has kernels {sorted(self.module.kernels)}: name the one to run")
      name = next(iter(self.module.kernels))
    if name not in self.module.kernels: raise PtxError(f"kernel {name!r} is not in the PTX module (it has {sorted(self.module.kernels)})")
    self.name, self.kernel = name, self.module.kernels[name]
    self.t = Translator(self.module, self.kernel)
    self.globals = ffi().new("uint8_t[]", max(1, len(self.t.global_image)))
    ffi().memmove(self.globals, bytes(self.t.global_image), len(self.t.global_image))
    src = runtime.header() + self.t.source()
    with cc.timed(f"the PTX engine's C translation of kernel {name}", runtime.CACHE):
      self.lib = ffi().dlopen(cc.build(src, "ptx", where=runtime.CACHE))

  @property
  def param_bytes(self) -> int: return self.kernel.param_bytes

  def pack(self, *args: int | float | bytes) -> bytes:
    """The parameter buffer for `args`, one per .param in order: ints (pointers too) and floats packed by the
    parameter's type, bytes for .b8 arrays (structs by value)."""
    params = self.kernel.params
    if len(args) != len(params): raise TypeError(f"kernel {self.name} takes {len(params)} parameters, got {len(args)}")
    buf = bytearray(self.param_bytes)
    for p, v in zip(params, args):
      if isinstance(v, (bytes, bytearray)):
        if len(v) != p.size: raise ValueError(f"parameter {p.name} is {p.size} bytes, got {len(v)}")
        buf[p.offset:p.offset + p.size] = v
        continue
      fmt = {"f32": "<f", "f64": "<d"}.get(p.type) or {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[p.size]
      if p.type[0] == "s": fmt = fmt.lower()
      try: buf[p.offset:p.offset + p.size] = struct.pack(fmt, v)
      except struct.error as e: raise ValueError(f"parameter {p.name} (.{p.type}): {e}") from None
    return bytes(buf)

  def inst_at(self, idx: int) -> tuple[int, str]:
    i = self.t.insts[idx]
    return i.line, i.text


def _dims(v: int | tuple[int, ...], what: str, limit: tuple[int, int, int]) -> tuple[int, int, int]:
  d = (v, 1, 1) if isinstance(v, int) else tuple(v) + (1,) * (3 - len(v))
  if len(d) != 3 or any(not isinstance(x, int) or x < 1 for x in d): raise ValueError(f"{what} {v!r}: give 1 to 3 positive sizes")
  if any(x > m for x, m in zip(d, limit)): raise ValueError(f"{what} {d} is larger than the limit {limit}")
  return d


def launch(prog: Program, mem: memory.GpuMemory, grid: int | tuple, block: int | tuple, params: bytes = b"", *,
           shared_bytes: int = 0, max_instructions: int = 0, windows: tuple[int, int] = (SHARED_WINDOW, LOCAL_WINDOW)) -> Stats:
  """Run `prog` over `grid` blocks of `block` threads; `params` is the parameter buffer (Program.pack),
  `shared_bytes` the dynamic shared memory per block, `windows` the generic addresses of shared and local memory (a GPU
  model's window registers). Raises a LaunchError subclass when a thread faults."""
  g, b = _dims(grid, "grid", MAX_GRID), _dims(block, "block", MAX_BLOCK)
  nthreads = b[0] * b[1] * b[2]
  if nthreads > MAX_THREADS: raise ValueError(f"block {b} has {nthreads} threads; at most {MAX_THREADS}")
  if len(params) < prog.param_bytes:
    raise ValueError(f"kernel {prog.name} needs {prog.param_bytes} bytes of parameters, got {len(params)}")
  shared = prog.t.static_shared + shared_bytes
  if shared_bytes < 0 or shared > MAX_SHARED:
    raise ValueError(f"kernel {prog.name}: {shared} bytes of shared memory per block ({prog.t.static_shared} static); at most {MAX_SHARED}")
  f = ffi()
  nwarps = (nthreads + 31) // 32
  keep = [f.new("uint8_t[]", max(1, len(params))), f.new("uint8_t[]", max(1, shared)),
          f.new("uint8_t[]", max(1, prog.t.local_bytes * 32 * nwarps)), f.new("uint8_t[]", max(1, prog.t.reg_bytes * nwarps)),
          f.new("warp_t[]", nwarps)]
  d = f.new("launch_t *")
  d.grid, d.block = list(g), list(b)
  d.shared_bytes, d.local_bytes, d.reg_bytes, d.param_bytes = shared, prog.t.local_bytes, prog.t.reg_bytes, len(params)
  (d.shared_window, d.local_window), d.max_instructions = windows, max_instructions
  d.globals_window, d.globals_bytes, d.globals = GLOBAL_WINDOW, len(prog.t.global_image), prog.globals
  f.memmove(keep[0], params, len(params))
  d.params, d.shared, d.local, d.regs, d.warps = keep
  d.nwarps = nwarps

  broken: list[BaseException] = []
  def miss(dp, addr, write):
    try: run = mem.lookup(int(addr), bool(write))
    except BaseException as e:      # the memory object's own bug: stop the launch and raise it below
      broken.append(e); return 1
    if run is None: return 1
    dp.fill.va, dp.fill.len, dp.fill.host = run[0], run[1], f.cast("uint8_t *", run[2])
    return 0
  keep.append(cb := f.callback("int(launch_t *, uint64_t, uint32_t)", miss))
  d.miss = cb
  rc = prog.lib.launch_run(d)
  if broken: raise broken[0]
  if rc != STOP_NONE: _raise(prog, d, rc)
  return Stats(int(d.instructions), g[0] * g[1] * g[2], nwarps)


def _raise(prog: Program, d, rc: int) -> None:
  c = d.cta
  block = (c % d.grid[0], c // d.grid[0] % d.grid[1], c // (d.grid[0] * d.grid[1]))
  where = f"kernel {prog.name}, block {block}"
  if rc == STOP_LIMIT:
    raise InstructionLimit(f"{where}: ran past the limit of {d.max_instructions} thread-instructions", prog.name, block, None, None, None)
  line, text = prog.inst_at(d.stop_inst)
  w = d.warps[d.stop_warp]
  lane = d.stop_lane
  thread = (w.tid[0][lane], w.tid[1][lane], w.tid[2][lane])
  at = f"line {line} `{text}`"
  if rc == STOP_FAULT:
    arg, addr = d.stop_arg, d.stop_addr
    kind = "write" if arg & 0x100 else "read"
    why = "is misaligned" if arg & 0x200 else "is not mapped" if arg & 0xff in (0, 4) else "is outside the space"
    raise PtxFault(f"{where}, thread {thread}: {kind} of {SPACES[arg & 0xff]} address {addr:#x} {why} ({at})",
                   prog.name, block, thread, line, text, addr)
  if rc == STOP_TRAP: raise PtxTrap(f"{where}, warp {d.stop_warp}: trap ({at})", prog.name, block, None, line, text)
  if rc == STOP_WARP:
    what = {1: f"lanes {d.stop_addr:#010x} of its membermask are not executing it (divergent)",
            2: f"an executing lane is not in its membermask {d.stop_addr:#010x}"}[d.stop_arg]
    raise WarpError(f"{where}, warp {d.stop_warp}: {what} ({at})", prog.name, block, None, line, text)
  raise LaunchError(f"{where}: stopped with code {rc}", prog.name, block, None, None, None)
