"""AMDDevice: the queue API on an AMD GPU, over either interface (KFD or the AM userspace PCI driver).

The interface supplies memory (`alloc`/`free` -> AMDMemory), hardware queues (`create_queue` -> QueueDesc),
register base addresses, and fault polling. This module adds what is AMD's own on top of drivers/hcq (which
provides rings, ordered submission, staging copies, the kernel-argument arena and the fault-poll rate limit):
code objects and their COV5 kernel arguments, scratch, and the PM4 (pm4.py) and SDMA (sdma.py) encoders.
"""
from __future__ import annotations
import struct, weakref
from typing import TYPE_CHECKING

from drivers.hcq.queue import dims3
from drivers.hcq.ring import Ring
from drivers.hcq import Device, Program, KernArgs
from drivers.amd.compiler import AMDGPUCompiler
from drivers.amd.elf import load_code_object, CodeObjectError, KCP_DISPATCH_PTR, KCP_KERNARG_SEGMENT_PTR, \
  KCP_PRIVATE_SEGMENT_BUFFER, KCP_QUEUE_PTR, KCP_DISPATCH_ID, KCP_FLAT_SCRATCH_INIT, KCP_PRIVATE_SEGMENT_SIZE
from drivers.amd.iface import AMDIface, AMDMemory, QueueDesc, PAGE
from drivers.amd import ip
from drivers.amd.pm4 import PM4Queue
from drivers.amd import profiler
from drivers.amd.sdma import SDMAQueue
if TYPE_CHECKING:
  from drivers.amd.sqtt.capture_gfx11 import ThreadTracer
  from drivers.amd.pmc_gfx11 import PerfCounters

RING_SIZE = 1 << 20            # bytes per hardware ring
SCRATCH_ALIGN = 256            # COMPUTE_TMPRING_SIZE.WAVESIZE unit (bytes per wave64)
HIDDEN = {"hidden_block_count_x": lambda g, l: g[0], "hidden_block_count_y": lambda g, l: g[1],
          "hidden_block_count_z": lambda g, l: g[2], "hidden_group_size_x": lambda g, l: l[0],
          "hidden_group_size_y": lambda g, l: l[1], "hidden_group_size_z": lambda g, l: l[2],
          "hidden_remainder_x": lambda g, l: 0, "hidden_remainder_y": lambda g, l: 0, "hidden_remainder_z": lambda g, l: 0,
          "hidden_global_offset_x": lambda g, l: 0, "hidden_global_offset_y": lambda g, l: 0,
          "hidden_global_offset_z": lambda g, l: 0, "hidden_grid_dims": lambda g, l: 3}
INT_FMT = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


class AMDKernArgs(KernArgs):
  """Explicit arguments at the offsets the code object's metadata gives, then the COV5 hidden arguments."""
  def __init__(self, view: memoryview, va: int, prg: AMDProgram, n_bufs: int, n_vals: int, global_size, local_size, release):
    super().__init__(view, va, n_bufs, n_vals, release)
    self.kernel, self.explicit, self.global_size, self.local_size = prg.kernel, prg.explicit_args, tuple(global_size), tuple(local_size)
    for a in self.kernel.args:   # the hidden arguments depend on the grid only: written once
      if a.kind in HIDDEN: struct.pack_into(INT_FMT[a.size], self.view, a.offset, HIDDEN[a.kind](self.global_size, self.local_size))

  def update(self, bufs, vals) -> None:
    explicit = self.explicit
    if len(bufs) + len(vals) != len(explicit):
      raise ValueError(f"kernel {self.kernel.name} takes {len(explicit)} arguments, got {len(bufs)} buffers and {len(vals)} values")
    for a, v in zip(explicit, [b.va for b in bufs] + [x & ((1 << (8 * min(a.size, 8))) - 1) for a, x in zip(explicit[len(bufs):], vals)]):
      if a.size not in INT_FMT: raise ValueError(f"kernel {self.kernel.name}: argument of {a.size} bytes at {a.offset} is not supported")
      struct.pack_into(INT_FMT[a.size], self.view, a.offset, v)


class AMDProgram(Program):
  def __init__(self, device: AMDDevice, name: str, lib: bytes):
    super().__init__(device, name, lib)
    co = load_code_object(lib)
    if co.arch != device.arch: raise CodeObjectError(f"code object is for {co.arch}, the device is {device.arch}: recompile with -mcpu={device.arch}")
    if name not in co.kernels: raise ValueError(f"the code object has no kernel named {name!r} (it has: {', '.join(sorted(co.kernels))})")
    self.kernel = k = co.kernels[name]
    self.explicit_args = [a for a in k.args if not a.kind.startswith("hidden_")]
    props = k.descriptor.kernel_code_properties
    for bit, what in ((KCP_PRIVATE_SEGMENT_BUFFER, "a private segment buffer"), (KCP_QUEUE_PTR, "a queue pointer"),
                      (KCP_DISPATCH_ID, "a dispatch id"), (KCP_FLAT_SCRATCH_INIT, "flat scratch init")):
      if props & bit: raise CodeObjectError(f"kernel {name} asks for {what} in its user SGPRs, which this driver does not provide")
    self.image = device.alloc_owned(len(co.image), cpu_access=True)
    device.upload(self.image, co.relocated(self.image.va))
    self.code_va = self.image.va + k.code_offset
    if self.code_va % 256: raise CodeObjectError(f"kernel {name} code is not 256-byte aligned ({self.code_va:#x})")
    device.ensure_scratch(k.descriptor.private_segment_fixed_size)
    # the 64-bit addresses among the user SGPRs, as (SGPR index, offset from the kernel arguments' address): the
    # dispatch packet after the arguments (64-byte aligned), then the arguments themselves
    seg = k.kernarg_segment_size
    self.user_args = [(0, seg + (-seg % 64))] if props & KCP_DISPATCH_PTR else []
    if props & KCP_KERNARG_SEGMENT_PTR: self.user_args.append((2 * len(self.user_args), 0))
    self.n_user_sgprs = 2 * len(self.user_args) + bool(props & KCP_PRIVATE_SEGMENT_SIZE)
    weakref.finalize(self, device.free_owned, self.image)

  def args_size(self, n_bufs: int, n_vals: int) -> int: return self.kernel.kernarg_segment_size

  def fill_kernargs(self, bufs, vals=(), global_size=(1, 1, 1), local_size=(1, 1, 1)) -> AMDKernArgs:
    self.check_buffers(bufs)
    gs, ls = dims3(global_size, "global_size"), dims3(local_size, "local_size")
    size = max(self.kernel.kernarg_segment_size, 8) + (64 if self.kernel.descriptor.kernel_code_properties & KCP_DISPATCH_PTR else 0)
    view, va, release = self.device.kernargs.alloc(size)
    args = AMDKernArgs(view, va, self, len(bufs), len(vals), gs, ls, release)
    args.update(bufs, vals)
    return args

  def user_sgprs(self, args: AMDKernArgs) -> list[int]:
    user = []
    for _, addend in self.user_args: user += [(args.va + addend) & 0xFFFFFFFF, (args.va + addend) >> 32]
    if self.kernel.descriptor.kernel_code_properties & KCP_PRIVATE_SEGMENT_SIZE: user.append(self.kernel.descriptor.private_segment_fixed_size)
    return user


class AMDDevice(Device):
  def __init__(self, name: str, iface: AMDIface):
    self.iface, self.arch = iface, iface.arch
    self._mems: list[AMDMemory] = []
    self.compiler = AMDGPUCompiler(self.arch)
    self.scratch: AMDMemory | None = None
    self.scratch_per_lane = 0
    self._queues: list[QueueDesc] = []
    self.compute_ring: Ring | None = None
    self.sdma_ring: Ring | None = None
    # the interface flushes the HDP from the host before each doorbell (the AM path); else compute submissions start
    # with the GPU-side flush, encoded once (pm4_hdp_flush)
    self.host_flushes_hdp = iface.host_flushes_hdp
    self.pm4_hdp_flush: list[int] | None = None
    self.thread_trace: ThreadTracer | None = None   # HCQ_SQTT=1 / HCQ_PMC=1: PM4Queue traces / counts each launch (profiler.py)
    self.perf_counters: PerfCounters | None = None
    try:
      # what the discovered IP versions pick, once (drivers/amd/ip.py): register modules, PM4 and SDMA packet formats
      self.regs = ip.Registers(iface.ip_versions)
      self.pm4, self.sdma_pkt = ip.PM4.pick(iface.ip_versions["GC"]), ip.SDMA.pick(iface.ip_versions["SDMA0"])
      super().__init__(name)
      if not self.host_flushes_hdp: self.pm4_hdp_flush = PM4Queue(self).hdp_flush_words()
      # the MEC counts dwords and lets a packet wrap; SDMA counts bytes and the tail is NOP-padded instead of splitting a
      # packet (sdma_v6_0.c sdma_v6_0_ring_insert_nop)
      self.compute_ring = self._ring("compute", unit=4, pad=None)
      self.sdma_ring = self._ring("sdma", unit=1, pad=self.sdma_pkt.NOP)
      # an interface with placement rules of its own (drivers/amd/usb.py) sizes kernel-argument chunks and copies host
      # data its own way
      if iface.kernarg_chunk is not None: self.kernargs.chunk_size = iface.kernarg_chunk
      if iface.staging is not None: self._staging = iface.staging(self)
      self.ensure_scratch(0)
      profiler.enable(self)
    except BaseException:   # leave nothing behind: queues, memory, the interface (and with it the device lock)
      for b in list(getattr(self, "_buffers", ())): b.free()
      self._shutdown()
      raise

  # --- registers
  def gc_addr(self, reg) -> int: return reg.addr(self.iface.ip_bases["GC"])
  def nbio_addr(self, reg) -> int: return reg.addr(self.iface.ip_bases["NBIO"])

  # --- hardware queues
  def _ring(self, kind: str, unit: int, pad: int | None) -> Ring:
    desc = self.iface.create_queue(kind, self.iface.ring_sizes.get(kind, RING_SIZE))
    self._queues.append(desc)
    def doorbell(wptr: int) -> None:
      if self.host_flushes_hdp: self.iface.before_doorbell()
      desc.doorbell.write64(desc.doorbell_offset, wptr)
    return Ring(self, kind, desc.ring.view, desc.rptr, desc.wptr, doorbell, unit, pad)

  # --- memory
  def _alloc(self, size: int, host: bool):
    mem = self.iface.alloc(size, host=host)
    return mem.va, (mem.view[:size] if mem.view is not None else None), mem

  def _free(self, mem: AMDMemory) -> None: self.iface.free(mem)

  def _bus_pages(self, mem: AMDMemory) -> tuple[list[int], int]:
    return self.iface.bus_pages(mem), PAGE

  def _import_peer(self, pages: list[int], page_size: int) -> tuple[int, AMDMemory]:
    if page_size != PAGE: raise NotImplementedError(f"{self.name}: {type(self.iface).__name__} maps peers' BARs in {PAGE}-byte pages")
    mem = self.iface.import_peer(pages)
    return mem.va, mem

  def _import_host(self, view: memoryview) -> tuple[int, AMDMemory]:
    mem, first = self.iface.import_host(view)
    return mem.va + first, mem

  def alloc_owned(self, size: int, **kw) -> AMDMemory:
    """Driver-internal memory (signals, kernargs, code, scratch), freed by free_owned or when the device closes."""
    mem = self.iface.alloc(size, **kw)
    self._mems.append(mem)
    return mem

  def free_owned(self, mem: AMDMemory) -> None:
    if mem in self._mems:
      self._mems.remove(mem)
      self.iface.free(mem)

  def _signal_chunk(self):
    size = self.iface.signal_page
    mem = self.alloc_owned(size, uncached=True)
    return mem.view[:size], mem.va

  def _kernarg_chunk(self, size: int) -> tuple[memoryview, int]:
    mem = self.alloc_owned(size, cpu_access=True)   # host-visible VRAM
    return mem.view, mem.va

  def ensure_scratch(self, per_lane: int) -> None:
    """Scratch memory for `per_lane` private bytes per work-item on every wave the GPU can hold."""
    per_lane = max(per_lane, 16)
    if self.scratch is not None and per_lane <= self.scratch_per_lane: return
    p = self.iface.props
    waves = p["simd_count"] // p["simd_per_cu"] * p["max_slots_scratch_cu"]
    size = -(-64 * per_lane // SCRATCH_ALIGN) * SCRATCH_ALIGN * waves
    if self.scratch is not None:
      self.synchronize()
      self.free_owned(self.scratch)
    self.scratch = self.alloc_owned(size)
    self.scratch_per_lane = per_lane

  def tmpring_size(self, per_lane: int) -> int:
    # WAVESIZE: one wave64's slot in 256-byte units; WAVES: the slots of each shader engine, whose rings follow each
    # other from COMPUTE_DISPATCH_SCRATCH_BASE (per SE on gfx11: mesa ac_get_scratch_tmpring_size), so the scratch buffer
    # holds WAVES slots for every engine
    p = self.iface.props
    engines = p["array_count"] // p["simd_arrays_per_engine"]
    wavesize = -(-64 * max(per_lane, 1) // SCRATCH_ALIGN)
    tmpring = self.regs.gc.regCOMPUTE_TMPRING_SIZE
    return tmpring.encode(WAVES=min(self.scratch.size // (wavesize * SCRATCH_ALIGN) // engines, 0xFFF), WAVESIZE=wavesize)

  def upload(self, mem: AMDMemory, data: bytes) -> None:
    if mem.view is not None: mem.view[:len(data)] = data
    else: self.staging.copyin(mem.va, memoryview(data))

  # --- queues and programs
  def compute_queue(self) -> PM4Queue: return PM4Queue(self)
  def copy_queue(self) -> SDMAQueue: return SDMAQueue(self)
  def program(self, name: str, lib: bytes) -> AMDProgram: return AMDProgram(self, name, lib)
  def ticks_to_us(self, ticks: int) -> float: return ticks / 100   # the GPU timestamp counter runs at 100 MHz

  def _poll_faults(self) -> str | None:
    if (fault := self.iface.poll_faults()) is None: return None
    kernels = [k.kernel.name for k in self.compute_ring.pending() if isinstance(k, AMDKernArgs)] if self.compute_ring else []
    return fault + (f" while running kernel {kernels[0]}" if kernels else "")

  def _refresh(self) -> None: self.iface.refresh()
  def _host_wrote(self) -> None: self.iface.publish()

  def _progress(self) -> tuple:
    return tuple(r.rptr for r in (self.compute_ring, self.sdma_ring) if r is not None)

  def _stop_queues(self) -> None:
    self.compute_ring = self.sdma_ring = None   # their memory goes with the queues
    while self._queues: self.iface.destroy_queue(self._queues.pop())

  def _shutdown(self) -> None:
    self._stop_queues()
    for mem in list(self._mems): self.free_owned(mem)
    self.iface.close()
