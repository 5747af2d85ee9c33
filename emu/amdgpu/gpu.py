"""The emulated GPU core (one chip of chips.py: Navi31, Navi48, Navi44): VRAM, the GPU MMU, the register file, the HDP, the clock, the engines, and
kernel dispatch into the shader core (emu/amdgcn) for the target its GC version runs. Both kernel interfaces sit on top of this one object: the KFD
model (as the kernel driver would) and the PCI function (as the AM userspace driver sees it). The core knows
neither: the PCI function decodes its blocks into the core's register file and listens to its errors and
interrupts (`on_error`, `on_interrupt`). The waves see memory through `shader_memory` (caches.py: the MMU, the
K$ and the I$) and launch from the COMPUTE_* registers as spi.py decodes them.
"""
from __future__ import annotations
import functools, threading, time
from dataclasses import dataclass
from typing import Callable

from autogen.amd import soc21_enum
from emu.pci import DMASpace
from emu.ring import RingError
from emu.amdgpu.vram import VRAM
from emu.amdgpu.mmu import MMU, FORMATS as PTE_FORMATS
from emu.amdgpu.registers import RegisterFile
from emu.amdgpu.hdp import HDPModel
from emu.amdgpu.engine import GPUEngine, KernelError
from emu.amdgpu.caches import ShaderMemory
from emu.amdgpu.spi import SHRegisters, launch as spi_launch
from emu.amdgpu.sqtt import ThreadTrace, schedule, shape
from emu.amdgpu.perfcounters import PerfCounters
from emu.amdgpu.chips import Chip, NAVI31
from emu.amdgcn import targets
from emu.amdgcn.dispatch import execute, WaveError
from emu.amdgcn.trace import Trace

CLOCK_HZ = 100_000_000        # GPU timestamp counter (RELEASE_MEM data_sel 3, SDMA TIMESTAMP): 100 MHz
# the register file's banked copies of SH_MEM_CONFIG / SH_MEM_BASES: VMID v at bank(BANK_SH_MEM + 2v) / +1, after the
# HQD copies of 4 MEC pipes x 8 queues x 64 registers (gfx.py, navi31.py's file layout)
BANK_SH_MEM = 4 * 8 * 64


@dataclass(frozen=True)
class DeviceError:
  engine: str
  message: str
  va: int | None = None
  kind: str = ""        # "fault" (the engine's own access faulted), "packet", "shader", "internal"
  fault: str = ""       # for a memory fault, its type (emu.amdgpu.mmu FAULT_*: not-present, read, write, execute, ...)

  def __str__(self) -> str: return f"{self.engine}: {self.message}"


class GPUModel:
  """`vram_path`/`regs_path`: files that keep VRAM and the registers across processes (None: in memory); `dma`: the
  bus address space the MMU reaches host memory through; `busy_ns`: where engine busy time accumulates, by kind;
  `chip`: which GPU (its register modules and segment bases); `gc_version`: the GC IP version the shader core's target
  follows from (default: the chip's)."""
  def __init__(self, vram_size: int = 512 << 20, vram_path: str | None = None, regs_path: str | None = None,
               dma: DMASpace | None = None, busy_ns=None, gc_version: tuple[int, int, int] | None = None, chip: Chip = NAVI31):
    self.chip, self.gc = chip, chip.reg("GC")
    self.gc_version = gc_version or chip.versions["GC"]
    self.vram, self.dma = VRAM(vram_size, vram_path), DMASpace() if dma is None else dma
    self.pte_format = PTE_FORMATS[chip.pte]
    self.mmu = MMU(self.vram, self.dma, self.pte_format)
    self.shader_memory = ShaderMemory(self.mmu)   # the waves' view: through the MMU, the K$ and the I$
    self.ip_bases = chip.ip_bases
    # the register modules and the segment bases they are addressed with (register names in messages)
    self.regs = RegisterFile(regs_path, tuple((chip.reg(ip), chip.ip_bases[ip]) for ip in ("GC", "MMHUB", "NBIO", "MP0", "HDP", "OSSSYS")))
    self.hdp = HDPModel(self)
    self.regs.map(self.hdp)
    self.sqtt, self.perf = ThreadTrace(self), PerfCounters(self)    # the SQ's thread trace and the counters
    self.regs.map(self.sqtt)
    self.regs.map(self.perf)
    self.engines: list[GPUEngine] = []
    self.on_error: list[Callable[[DeviceError], None]] = []
    self.on_interrupt: list[Callable[[str, int, str], None]] = []    # (source, context id, engine name)
    self.shader_lock = threading.Lock()      # one dispatch at a time: the model has one shader array
    self._t0 = time.perf_counter_ns()
    self.busy_ns = {"gfx": 0, "sdma": 0} if busy_ns is None else busy_ns   # what the SMU's activity counters see

  @functools.cached_property
  def target(self) -> targets.Target:
    """The ISA the waves run (ValueError, naming the GC versions the shader core has, when it has none for this GPU's: a
    GPU without one still boots and runs its queues)."""
    return targets.for_gc(self.gc_version)

  def clock(self) -> int:
    return (time.perf_counter_ns() - self._t0) // (1_000_000_000 // CLOCK_HZ)

  def busy_time(self, kind: str) -> int:
    """Busy nanoseconds of all engines of `kind` so far, including batches still executing."""
    now = time.perf_counter_ns()
    return self.busy_ns[kind] + sum(now - t for e in list(self.engines) if e.kind == kind and (t := e.busy_since) is not None)

  # --- faults and interrupts
  def report_fault(self, engine: str, message: str, va: int | None = None, kind: str = "") -> None:
    f = self.mmu.last_fault
    fault = f.kind if va is not None and kind in ("fault", "shader") and f is not None and f.va == va else ""
    err = DeviceError(engine, message, va, kind, fault)
    for cb in self.on_error: cb(err)

  def interrupt(self, source: str, ctx: int, engine: str = "") -> None:
    for cb in self.on_interrupt: cb(source, ctx, engine)

  def add_engine(self, engine: GPUEngine) -> None:
    self.engines.append(engine)
    engine.start()

  def remove_engine(self, engine: GPUEngine, wait: bool = True) -> None:
    """Stop an engine; without `wait` it finishes the packet in flight on its own (callers holding a lock the
    engine may need must not wait for it)."""
    engine.stop() if wait else engine.request_stop()
    if engine in self.engines: self.engines.remove(engine)

  def shutdown(self) -> None:
    for e in list(self.engines): self.remove_engine(e)

  # --- dispatch
  def dispatch(self, sh: SHRegisters, grid: tuple[int, int, int], initiator: int, queue: str) -> int:
    """DISPATCH_DIRECT with the queue's COMPUTE_* registers (emu/amdgpu/spi.py); returns wave-instructions executed."""
    launch, block = spi_launch(sh, initiator, queue, self.chip.gc_info["gc_num_se"])
    launch.shared_hi, launch.private_hi = self.flat_apertures(queue)
    launch.target = self.target.name
    with self.shader_lock:
      self.shader_memory.begin_dispatch()
      traced = bool(sh.get("THREAD_TRACE_ENABLE") & 1 and self.sqtt.tracing())
      trace = Trace() if traced or self.perf.counting() else None     # untraced dispatches take the fast path
      try: stats = execute(self.shader_memory, launch, grid, block, trace=trace)
      except WaveError as e: raise KernelError(f"{queue}: {e}", getattr(e, "address", None)) from None
      except ValueError as e: raise_engine(queue, f"bad dispatch: {e}")
      if trace is not None: self.observe(trace, traced)
      return stats.wave_instructions


  def observe(self, trace: Trace, traced: bool) -> None:
    """What the waves of a dispatch executed, timed (sqtt.schedule), into the thread trace and the counters."""
    start = self.sqtt.start_clock() if traced else 0
    waves, end = schedule(trace.runs, trace.insts, shape(self.chip.gc_info), start)
    if traced: self.sqtt.record(waves)
    if self.perf.counting(): self.perf.record(trace.runs, trace.insts, waves, start, end)

  # --- the flat apertures the waves see (SH_MEM_BASES, SH_MEM_CONFIG)
  def sh_mem_slot(self, vmid: int, bases: bool) -> int:
    """Register-file slot of VMID `vmid`'s SH_MEM_BASES (`bases`) or SH_MEM_CONFIG."""
    return self.regs.bank(BANK_SH_MEM + vmid * 2 + bases)

  def flat_apertures(self, queue: str, vmid: int = 0) -> tuple[int, int]:
    """(LDS, scratch) aperture bits 63:32 from VMID `vmid`'s SH_MEM_BASES (SHARED_BASE / PRIVATE_BASE are bits 63:48 of
    4 GiB windows); SH_MEM_CONFIG must be the mode the shader core models (64-bit addresses, unaligned accesses allowed;
    INITIAL_INST_PREFETCH and ICACHE_USE_GL1 only shape instruction caching and are not acted on). Every queue runs in
    VMID 0."""
    config = self.gc.regSH_MEM_CONFIG.decode(self.regs[self.sh_mem_slot(vmid, False)])
    bases = self.gc.regSH_MEM_BASES.decode(self.regs[self.sh_mem_slot(vmid, True)])
    if config["ADDRESS_MODE"] != soc21_enum.SH_MEM_ADDRESS_MODE_64:
      raise_engine(queue, f"SH_MEM_CONFIG of VMID {vmid}: ADDRESS_MODE {config['ADDRESS_MODE']} (32-bit) is not modelled: "
                          "program SH_MEM_ADDRESS_MODE_64")
    if config["ALIGNMENT_MODE"] != soc21_enum.SH_MEM_ALIGNMENT_MODE_UNALIGNED:
      raise_engine(queue, f"SH_MEM_CONFIG of VMID {vmid}: ALIGNMENT_MODE {config['ALIGNMENT_MODE']} is not modelled (the shader "
                          "core allows unaligned accesses: program SH_MEM_ALIGNMENT_MODE_UNALIGNED)")
    shared, private = bases["SHARED_BASE"], bases["PRIVATE_BASE"]
    if not shared or not private or shared == private:
      raise_engine(queue, f"SH_MEM_BASES of VMID {vmid} is {shared << 16 | private:#x}: the LDS (SHARED_BASE) and scratch "
                          "(PRIVATE_BASE) apertures must be programmed, non-zero and distinct")
    return shared << 16, private << 16


def raise_engine(queue: str, msg: str):
  raise RingError(f"{queue}: {msg}")
