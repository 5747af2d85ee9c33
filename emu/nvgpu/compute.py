"""The compute classes (AMPERE_COMPUTE_A clc6c0.h, AMPERE_COMPUTE_B clc7c0.h, HOPPER_COMPUTE_A clcbc0.h; their method
offsets agree): the methods a driver sends to launch grids, QMD decoding (emu.nvgpu.qmd), and the grid run by the PTX
engine (emu.nvgpu.ptx) over the channel's GPU VA space (UVM's map, what the copy engine uses too).

Methods: SEND_PCAS_A (QMD address >> 8) then SEND_SIGNALING_PCAS2_B with a SCHEDULE action (SCHEDULE,
INVALIDATE_COPY_SCHEDULE, PREFETCH_SCHEDULE, INVALIDATE_PREFETCH_COPY_SCHEDULE) or SEND_SIGNALING_PCAS_B.SCHEDULE
launches the QMD; the NOP, INVALIDATE and PREFETCH actions need nothing. SET_SHADER_SHARED_MEMORY_WINDOW_A/B and
SET_SHADER_LOCAL_MEMORY_WINDOW_A/B place the generic-address windows (both must be set before a launch; on Hopper the
shared window is 4 GiB-aligned, reference section 4); SET_SHADER_LOCAL_MEMORY_A/B and _NON_THROTTLED_A/B/C the local
memory (bytes per TPC), which must be mapped and large enough for a QMD that asks for local memory.
INVALIDATE_SHADER_CACHES(_NO_WFI), NO_OPERATION and WAIT_FOR_IDLE need nothing in a serial model without caches. Every
method value is checked against the class header's fields (a bit outside them is refused), any other method refused.

A launch (strictly decoded, emu.nvgpu.qmd) runs when it is sent, the channel waiting for it (the model runs one thing at
a time). Constant buffer 0 holds what the SASS reads: blockDim at 0x0-0x8 and gridDim at 0xc-0x14 (checked against the
QMD's), on sm_90 the global-memory descriptor at 0x208 (0: raw VAs), and the parameters at 0x210 (sm_90) or 0x160
(sm_80/86) (reference section 8): the PTX kernel's parameter space is read there. Shared memory per CTA is the QMD's
SHARED_MEMORY_SIZE less the 1 KiB sm_80+ reserves (reference section 6): what the kernel's static .shared leaves of it is
its dynamic shared memory. A kernel with barriers needs BARRIER_COUNT >= 1; the QMD's register count and local memory
must cover what the cubin's .nv.info says its SASS uses (REGCOUNT, MIN_STACK_SIZE). On completion the QMD's release semaphores
are written in order. A fault or trap in the kernel stops the channel with the PTX engine's error (which names the
kernel, thread, instruction and address).

Where the PTX comes from: the model cannot run SASS. The driver uploads a program as the cubin file as it is, the PTX
text it was compiled from after it (NUL-terminated), at the start of one allocation (drivers/nv/program.py), and points
the QMD at the kernel's .text section there. The model finds the UVM mapping that holds the program address, parses the
cubin at its start (pyelftools), takes the kernel's name from the .text.<name> section at that offset, and runs that
kernel of the PTX after the cubin. Kernels are cached by program address with the image's bytes (compared again at every
launch, so a program rewritten in place is seen).
Not modelled: SASS, CGAs and queue QMDs, dependent QMDs, inline QMDs, report semaphores, local memory contents (the PTX
engine keeps its own per-thread local memory), constant buffers other than 0 (the PTX engine has no const space).
"""
from __future__ import annotations
import io, time
from collections import OrderedDict

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from autogen.nv import compute as nv_compute
from autogen.nvinfo import EIATTR_MIN_STACK_SIZE, EIATTR_REGCOUNT, per_symbol
from emu.nvgpu import ptx
from emu.nvgpu.chips import Chip
from emu.nvgpu.gpfifo import ClassModel, GPFIFOEngine, bits
from emu.nvgpu.qmd import LAYOUTS, Launch, QMDError, Release, decode
from emu.ring import RingError

PREFIX = {nv_compute.AMPERE_COMPUTE_A: "NVC6C0", nv_compute.AMPERE_COMPUTE_B: "NVC7C0", nv_compute.HOPPER_COMPUTE_A: "NVCBC0"}
METHODS = ("NO_OPERATION", "WAIT_FOR_IDLE", "SET_SHADER_SHARED_MEMORY_WINDOW_A", "SET_SHADER_SHARED_MEMORY_WINDOW_B",
           "SET_SHADER_LOCAL_MEMORY_WINDOW_A", "SET_SHADER_LOCAL_MEMORY_WINDOW_B", "SET_SHADER_LOCAL_MEMORY_A",
           "SET_SHADER_LOCAL_MEMORY_B", "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A", "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B",
           "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C", "SEND_PCAS_A", "SEND_SIGNALING_PCAS_B", "SEND_SIGNALING_PCAS2_B",
           "INVALIDATE_SHADER_CACHES", "INVALIDATE_SHADER_CACHES_NO_WFI")
SCHEDULE = ("SCHEDULE", "INVALIDATE_COPY_SCHEDULE", "PREFETCH_SCHEDULE", "INVALIDATE_PREFETCH_COPY_SCHEDULE")
NO_LAUNCH = ("NOP", "INVALIDATE", "PREFETCH")
PARAM_OFFSET = {nv_compute.HOPPER_COMPUTE_A: 0x210, nv_compute.AMPERE_COMPUTE_A: 0x160, nv_compute.AMPERE_COMPUTE_B: 0x160}   # reference section 8
GLOBAL_DESCRIPTOR = 0x208                # sm_90 cb0: the global-memory descriptor, 0 in raw-VA mode
RESERVED_SHARED = 0x400                  # shared memory sm_80+ reserves per CTA
CACHE = 64                               # kernel translations kept per engine
RED = {0: lambda a, b: a + b, 1: min, 2: max, 3: lambda a, b: 0 if a >= b else a + 1,   # RED_ADD, MIN, MAX, INC
       4: lambda a, b: b if a == 0 or a > b else a - 1, 5: lambda a, b: a & b, 6: lambda a, b: a | b, 7: lambda a, b: a ^ b}


def _fields(prefix: str, method: str) -> int:
  """The bits of a method's value that its fields cover (the whole dword for a method with none)."""
  mask = 0
  for k, v in vars(nv_compute).items():
    if k.startswith(f"{prefix}_{method}_") and isinstance(v, tuple) and not any(
        k.startswith(f"{prefix}_{m}_") and len(m) > len(method) for m in METHODS if m.startswith(method)):
      mask |= ((1 << (v[0] - v[1] + 1)) - 1) << v[1]
  return mask or 0xFFFFFFFF


class Compute(ClassModel):
  def __init__(self, engine: GPFIFOEngine, cls: int, chip: Chip):
    self.engine, self.cls, self.chip, self.prefix = engine, cls, chip, PREFIX[cls]
    self.name = f"compute class {cls:#x}"
    self.methods = {getattr(nv_compute, f"{self.prefix}_{m}"): m for m in METHODS if hasattr(nv_compute, f"{self.prefix}_{m}")}
    self.masks = {m: _fields(self.prefix, m) for m in self.methods.values()}
    self.regs: dict[str, int | None] = dict.fromkeys(self.methods.values())
    # (allocation, pc) -> (image, kernel, its SASS's registers and stack bytes per thread from .nv.info)
    self.programs: OrderedDict[tuple[int, int], tuple[bytes, ptx.Program, int, int]] = OrderedDict()
    self.launches = 0

  def _f(self, method: str, fld: str, v: int) -> int: return bits(v, getattr(nv_compute, f"{self.prefix}_{method}_{fld}"))
  def _value(self, name: str) -> int: return getattr(nv_compute, f"{self.prefix}_{name}")

  def method(self, addr: int, value: int) -> None:
    name = self.methods.get(addr)
    if name is None: raise RingError(f"{self.engine.qname}: method {addr:#x} of {self.name} is not modelled")
    if value & ~self.masks[name]:
      raise RingError(f"{self.engine.qname}: {self.prefix}_{name} = {value:#x} sets bits {value & ~self.masks[name]:#x} "
                      f"outside its fields ({self.masks[name]:#x})")
    self.regs[name] = value
    if name == "SEND_SIGNALING_PCAS2_B":
      action = self._f(name, "PCAS_ACTION", value)
      if value & ~0xF:   # SELECT and OFFSET_MINUS_ONE (clc7c0.h, clcbc0.h): which PCAS slot, not modelled
        raise RingError(f"{self.engine.qname}: {self.prefix}_{name} = {value:#x}: only PCAS_ACTION (3:0) is modelled")
      names = {self._value(f"{name}_PCAS_ACTION_{a}"): a for a in SCHEDULE + NO_LAUNCH}
      if action not in names: raise RingError(f"{self.engine.qname}: {self.prefix}_{name} PCAS_ACTION {action:#x} is not modelled")
      if names[action] in SCHEDULE: self._launch()
    elif name == "SEND_SIGNALING_PCAS_B" and self._f(name, "SCHEDULE", value): self._launch()

  def _addr(self, hi: str, lo: str) -> int | None:
    a, b = self.regs[hi], self.regs[lo]
    return None if a is None or b is None else a << 32 | b

  # --- launch
  def _launch(self) -> None:
    if self.regs["SEND_PCAS_A"] is None: raise RingError(f"{self.engine.qname}: a PCAS schedule with no SEND_PCAS_A (QMD address) before it")
    qmd_va = self.regs["SEND_PCAS_A"] << 8
    mem = self.engine.mem
    try: launch = decode(self.cls, mem.read(qmd_va, LAYOUTS[self.cls].nbytes), self.chip.max_shared_kb, self.chip.sass_version)
    except QMDError as e: raise RingError(f"{self.engine.qname}: QMD at {qmd_va:#x}: {e}", qmd_va) from None
    prog, regs, stack = self._program(launch.program)
    if launch.registers < regs:
      raise RingError(f"{self.engine.qname}: QMD register count {launch.registers} is less than the {regs} registers kernel "
                      f"{prog.name}'s SASS uses (REGCOUNT in its cubin's .nv.info)")
    if launch.local_bytes < stack:
      raise RingError(f"{self.engine.qname}: QMD local memory of {launch.local_bytes} bytes per thread is less than kernel "
                      f"{prog.name}'s {stack}-byte stack (MIN_STACK_SIZE in its cubin's .nv.info)")
    windows = self._windows()
    self._check_local(launch)
    cb0, size = launch.cbs[0]
    po = PARAM_OFFSET[self.cls]
    if size < po + prog.param_bytes:
      raise RingError(f"{self.engine.qname}: constant buffer 0 is {size} bytes; kernel {prog.name}'s {prog.param_bytes} bytes of "
                      f"parameters are at {po:#x} on this class")
    cb = mem.read(cb0, max(po + prog.param_bytes, 0x18))
    dims = tuple(int.from_bytes(cb[i:i + 4], "little") for i in range(0, 0x18, 4))
    if dims != launch.block + launch.grid:
      raise RingError(f"{self.engine.qname}: constant buffer 0 holds blockDim {dims[:3]} and gridDim {dims[3:]} at 0x0-0x14, "
                      f"the QMD launches {launch.block} x {launch.grid} (the SASS reads them from cb0)")
    if self.cls == nv_compute.HOPPER_COMPUTE_A and (d := int.from_bytes(mem.read(cb0 + GLOBAL_DESCRIPTOR, 8), "little")):
      raise RingError(f"{self.engine.qname}: constant buffer 0 holds {d:#x} at {GLOBAL_DESCRIPTOR:#x}, the global-memory "
                      "descriptor sm_90 code reads: it must be 0 (raw virtual addresses)")
    dynamic = launch.shared_bytes - RESERVED_SHARED - prog.t.static_shared
    if dynamic < 0:
      raise RingError(f"{self.engine.qname}: QMD SHARED_MEMORY_SIZE {launch.shared_bytes:#x} is less than kernel {prog.name}'s "
                      f"{prog.t.static_shared} bytes of static shared memory plus the {RESERVED_SHARED:#x} reserved per CTA")
    if launch.barriers == 0 and any(i.op in ("bar", "barrier") for i in prog.t.insts):
      raise RingError(f"{self.engine.qname}: QMD BARRIER_COUNT is 0 but kernel {prog.name} synchronizes on barriers")
    try: ptx.launch(prog, mem, launch.grid, launch.block, cb[po:po + prog.param_bytes], shared_bytes=dynamic, windows=windows)
    except ptx.LaunchError as e:
      err = RingError(f"{self.engine.qname}: the grid of QMD {qmd_va:#x} stopped: {e}", e.address)
      if isinstance(e, ptx.PtxFault): err.kind = "fault"        # the SM's MMU fault
      raise err from None
    self.launches += 1
    for r in launch.releases: self._release(r)

  def _windows(self) -> tuple[int, int]:
    shared = self._addr("SET_SHADER_SHARED_MEMORY_WINDOW_A", "SET_SHADER_SHARED_MEMORY_WINDOW_B")
    local = self._addr("SET_SHADER_LOCAL_MEMORY_WINDOW_A", "SET_SHADER_LOCAL_MEMORY_WINDOW_B")
    if shared is None or local is None:
      raise RingError(f"{self.engine.qname}: a launch before SET_SHADER_SHARED_MEMORY_WINDOW_A/B and SET_SHADER_LOCAL_MEMORY_WINDOW_A/B "
                      "placed the shared and local windows")
    if self.cls == nv_compute.HOPPER_COMPUTE_A and shared % (1 << 32):
      raise RingError(f"{self.engine.qname}: the shared memory window {shared:#x} is not 4 GiB-aligned, as Hopper needs")
    return shared, local

  def _check_local(self, launch: Launch) -> None:
    """Local memory the QMD asks for: SET_SHADER_LOCAL_MEMORY_A/B, sized by _NON_THROTTLED for every thread a TPC holds."""
    if not launch.local_bytes: return
    base = self._addr("SET_SHADER_LOCAL_MEMORY_A", "SET_SHADER_LOCAL_MEMORY_B")
    per_tpc = self._addr("SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A", "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B")
    chip = self.chip
    need = launch.local_bytes * 32 * chip.max_warps_per_sm * chip.sm_per_tpc
    if base is None or per_tpc is None or per_tpc < need:
      raise RingError(f"{self.engine.qname}: the QMD asks for {launch.local_bytes} bytes of local memory per thread; "
                      f"SET_SHADER_LOCAL_MEMORY_NON_THROTTLED gives {per_tpc} bytes per TPC, {need} needed "
                      f"(SET_SHADER_LOCAL_MEMORY at {base})")
    total = per_tpc * chip.gpcs * chip.tpc_per_gpc
    for a in (base, base + total - 1): self.engine.mem.read(a, 1)   # an MMU fault if it is not mapped

  def _program(self, pc: int) -> tuple[ptx.Program, int, int]:
    """The PTX kernel behind program address `pc` (the cubin at the start of its allocation, the PTX after it), and the
    registers and stack bytes per thread its SASS needs."""
    uvm = self.engine.mem
    m = uvm.mapping(pc)
    if m is None: raise RingError(f"{self.engine.qname}: the QMD's program address {pc:#x} is not mapped", pc)
    if (hit := self.programs.get((m.va, pc))) is not None:      # the same bytes still there: the same kernel
      if len(hit[0]) <= m.length and uvm.read(m.va, len(hit[0])) == hit[0]:
        self.programs.move_to_end((m.va, pc))
        return hit[1:]
    where = f"{self.engine.qname}: the program at {pc:#x} (allocation at {m.va:#x})"
    head = uvm.read(m.va, 64)
    if head[:4] != b"\x7fELF" or head[4] != 2:
      raise RingError(f"{where}: no 64-bit cubin at the start of the allocation (the model runs the PTX after it)")
    sh_off, sh_size, sh_num = (int.from_bytes(head[a:a + n], "little") for a, n in ((0x28, 8), (0x3a, 2), (0x3c, 2)))
    ph_off, ph_size, ph_num = (int.from_bytes(head[a:a + n], "little") for a, n in ((0x20, 8), (0x36, 2), (0x38, 2)))
    end = max(sh_off + sh_size * sh_num, ph_off + ph_size * ph_num, 64)
    if end > m.length: raise RingError(f"{where}: the cubin's headers run past the {m.length:#x}-byte allocation")
    try:
      elf = ELFFile(io.BytesIO(uvm.read(m.va, end)))
      end = max([end] + [s["sh_offset"] + s["sh_size"] for s in elf.iter_sections() if s["sh_type"] != "SHT_NOBITS"])
      text = next((s.name for s in elf.iter_sections() if s.name.startswith(".text.") and s["sh_offset"] == pc - m.va), None)
      if text is None: raise RingError(f"{where}: no .text.<kernel> section of the cubin starts at offset {pc - m.va:#x}")
      info, symtab = elf.get_section_by_name(".nv.info"), elf.get_section_by_name(".symtab")
      symbols = {i: s.name for i, s in enumerate(symtab.iter_symbols())} if symtab is not None else {}
      attrs = per_symbol(info.data(), symbols, (EIATTR_REGCOUNT, EIATTR_MIN_STACK_SIZE)).get(text[6:], {}) if info else {}
    except (ELFError, ValueError) as e: raise RingError(f"{where}: the cubin is malformed ({e})") from None
    if EIATTR_REGCOUNT not in attrs: raise RingError(f"{where}: the cubin's .nv.info has no REGCOUNT for kernel {text[6:]}")
    tail = b""
    while (nul := tail.find(b"\0")) < 0:
      if end + len(tail) >= m.length: raise RingError(f"{where}: no NUL-terminated PTX after the cubin")
      tail += uvm.read(m.va + end + len(tail), min(0x1000, m.length - end - len(tail)))
    try: prog = ptx.Program(tail[:nul].decode(), text[len(".text."):])
    except (ptx.PtxError, UnicodeDecodeError) as e: raise RingError(f"{where}: its PTX does not load: {e}") from None
    hit = self.programs[(m.va, pc)] = (uvm.read(m.va, end) + tail[:nul + 1], prog, attrs[EIATTR_REGCOUNT], attrs.get(EIATTR_MIN_STACK_SIZE, 0))
    if len(self.programs) > CACHE: self.programs.popitem(last=False)
    return hit[1:]

  def _release(self, r: Release) -> None:
    mem, n = self.engine.mem, 8 if r.payload64 else 4
    value = r.payload
    if r.reduction is not None:
      old = int.from_bytes(mem.read(r.address, n), "little", signed=r.signed)
      pay = int.from_bytes(r.payload.to_bytes(n, "little"), "little", signed=r.signed)
      value = RED[r.reduction](old, pay) % (1 << 8 * n)
    out = value.to_bytes(n, "little") + bytes(4 if r.words == 2 and n == 4 else 0)
    if r.words == 4: out = out.ljust(8, b"\0") + time.monotonic_ns().to_bytes(8, "little")   # the PTIMER's clock at +8
    mem.write(r.address, out)
    if r.interrupt: self.engine.interrupt()


def engine_classes(chip: Chip) -> dict:
  """{compute class: factory(engine)} for the compute class the chip lists."""
  return {cls: (lambda e, cls=cls: Compute(e, cls, chip)) for cls in PREFIX if cls in chip.engine_classes}
