"""AMDDevice: the queue API on an AMD GPU, over either interface (KFD or the AM userspace PCI driver).

The interface supplies memory (`alloc`/`free` -> AMDMemory), hardware queues (`create_queue` -> QueueDesc),
register base addresses, and fault polling; everything above it (PM4/SDMA encoding, signals, kernargs,
code objects, staging copies) is shared by both.
"""
from __future__ import annotations
import struct, threading, time, weakref
from collections import deque

import numpy as np

from autogen.amd import gc_11_0_0 as gc
from drivers.hcq.queue import dims3
from drivers.hcq import Device, Program, KernArgs
from drivers.system.alloc import RangeAllocator
from drivers.amd.compiler import AMDGPUCompiler
from drivers.amd.elf import load_code_object, CodeObjectError, KCP_DISPATCH_PTR, KCP_KERNARG_SEGMENT_PTR, \
  KCP_PRIVATE_SEGMENT_BUFFER, KCP_QUEUE_PTR, KCP_DISPATCH_ID, KCP_FLAT_SCRATCH_INIT, KCP_PRIVATE_SEGMENT_SIZE
from drivers.amd.iface import AMDMemory, QueueDesc, PAGE
from drivers.amd.pm4 import PM4Queue
from drivers.amd.sdma import SDMAQueue

RING_SIZE = 1 << 20            # bytes per hardware ring
STAGING_SIZE, STAGING_COUNT = 2 << 20, 4
KERNARG_ARENA = 2 << 20
RING_TIMEOUT_S = 30
FAULT_POLL_S = 0.01            # how often waits ask the interface for fault reports
SCRATCH_ALIGN = 256            # COMPUTE_TMPRING_SIZE.WAVESIZE unit (bytes per wave64)
HIDDEN = {"hidden_block_count_x": lambda g, l: g[0], "hidden_block_count_y": lambda g, l: g[1],
          "hidden_block_count_z": lambda g, l: g[2], "hidden_group_size_x": lambda g, l: l[0],
          "hidden_group_size_y": lambda g, l: l[1], "hidden_group_size_z": lambda g, l: l[2],
          "hidden_remainder_x": lambda g, l: 0, "hidden_remainder_y": lambda g, l: 0, "hidden_remainder_z": lambda g, l: 0,
          "hidden_global_offset_x": lambda g, l: 0, "hidden_global_offset_y": lambda g, l: 0,
          "hidden_global_offset_z": lambda g, l: 0, "hidden_grid_dims": lambda g, l: 3}
INT_FMT = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


class Ring:
  """Host side of one hardware ring: copies commands in, publishes the write pointer, rings the doorbell.
  PM4 rings count dwords and let packets wrap; SDMA rings count bytes and never split a packet (the tail is
  NOP-padded with zeros). Commands' referenced objects stay alive until the engine has read past them."""
  def __init__(self, dev: AMDDevice, desc: QueueDesc, name: str, unit: int):
    self.dev, self.desc, self.name, self.unit = dev, desc, name, unit
    self.size = desc.ring.size
    self.words = np.frombuffer(desc.ring.view, np.uint32)
    self.put = 0
    self.inflight: deque[tuple[int, list]] = deque()
    self.lock = threading.Lock()

  @property
  def rptr(self) -> int: return self.desc.rptr[0]

  def _reserve(self, nbytes: int) -> None:
    if nbytes > self.size: raise ValueError(f"{nbytes} bytes of commands do not fit the {self.size}-byte {self.name} ring")
    deadline = time.monotonic() + RING_TIMEOUT_S
    while (self.put - self.rptr) * self.unit + nbytes > self.size:
      self.dev.check_faults()
      if time.monotonic() > deadline:
        raise TimeoutError(f"{self.dev.name}: the {self.name} ring stayed full for {RING_TIMEOUT_S} s (engine read pointer "
                           f"{self.rptr}, write pointer {self.put}): the queue is stuck on a wait that is never satisfied")
      time.sleep(50e-6)

  def _write(self, words: list[int]) -> None:
    at = (self.put * self.unit // 4) % len(self.words)
    arr = np.asarray(words, np.uint32)
    first = min(len(arr), len(self.words) - at)
    self.words[at:at + first] = arr[:first]
    self.words[:len(arr) - first] = arr[first:]
    self.put += len(arr) * 4 // self.unit

  def _publish(self, keep: list) -> None:
    self.inflight.append((self.put, keep))
    while self.inflight and self.inflight[0][0] <= self.rptr: self.inflight.popleft()
    self.desc.wptr[0] = self.put
    self.dev.before_doorbell()
    self.desc.doorbell.write64(self.desc.doorbell_offset, self.put)

  def submit(self, words: list[int], keep: list) -> None:
    with self.lock:
      self._reserve(len(words) * 4)
      self._write(words)
      self._publish(keep)

  def submit_packets(self, packets: list[list[int]], keep: list) -> None:
    with self.lock:
      for p in packets:
        tail = self.size - (self.put * self.unit) % self.size
        if len(p) * 4 > tail:      # does not fit before the end: NOP (zero) padding, restart at 0
          self._reserve(tail)
          self._write([0] * (tail // 4))
        self._reserve(len(p) * 4)
        self._write(p)
      self._publish(keep)

  def kernels_in_flight(self) -> list[str]:
    r = self.rptr
    return [k.kernel.name for put, keep in self.inflight if put > r for k in keep if isinstance(k, AMDKernArgs)]


class AMDKernArgs(KernArgs):
  """Explicit arguments at the offsets the code object's metadata gives, then the COV5 hidden arguments."""
  def __init__(self, view: memoryview, va: int, prg: AMDProgram, n_bufs: int, n_vals: int, global_size, local_size, release):
    super().__init__(view, va, n_bufs, n_vals)
    self.kernel, self.global_size, self.local_size = prg.kernel, tuple(global_size), tuple(local_size)
    weakref.finalize(self, release)

  def update(self, bufs, vals) -> None:
    explicit = [a for a in self.kernel.args if not a.kind.startswith("hidden_")]
    if len(bufs) + len(vals) != len(explicit):
      raise ValueError(f"kernel {self.kernel.name} takes {len(explicit)} arguments, got {len(bufs)} buffers and {len(vals)} values")
    for a, v in zip(explicit, [b.va for b in bufs] + [x & ((1 << (8 * min(a.size, 8))) - 1) for a, x in zip(explicit[len(bufs):], vals)]):
      if a.size not in INT_FMT: raise ValueError(f"kernel {self.kernel.name}: argument of {a.size} bytes at {a.offset} is not supported")
      struct.pack_into(INT_FMT[a.size], self.view, a.offset, v)
    for a in self.kernel.args:
      if a.kind in HIDDEN: struct.pack_into(INT_FMT[a.size], self.view, a.offset, HIDDEN[a.kind](self.global_size, self.local_size))


class AMDProgram(Program):
  def __init__(self, device: AMDDevice, name: str, lib: bytes):
    super().__init__(device, name, lib)
    co = load_code_object(lib)
    if co.arch != device.arch: raise CodeObjectError(f"code object is for {co.arch}, the device is {device.arch}: recompile with -mcpu={device.arch}")
    if name not in co.kernels: raise ValueError(f"the code object has no kernel named {name!r} (it has: {', '.join(sorted(co.kernels))})")
    self.kernel = k = co.kernels[name]
    props = k.descriptor.kernel_code_properties
    for bit, what in ((KCP_PRIVATE_SEGMENT_BUFFER, "a private segment buffer"), (KCP_QUEUE_PTR, "a queue pointer"),
                      (KCP_DISPATCH_ID, "a dispatch id"), (KCP_FLAT_SCRATCH_INIT, "flat scratch init")):
      if props & bit: raise CodeObjectError(f"kernel {name} asks for {what} in its user SGPRs, which this driver does not provide")
    self.image = device.alloc_owned(len(co.image), cpu_access=True)
    device.upload(self.image, co.relocated(self.image.va))
    self.code_va = self.image.va + k.code_offset
    if self.code_va % 256: raise CodeObjectError(f"kernel {name} code is not 256-byte aligned ({self.code_va:#x})")
    device.ensure_scratch(k.descriptor.private_segment_fixed_size)
    self.pm4_templates: dict = {}
    self.n_user_sgprs = 2 * bool(props & KCP_DISPATCH_PTR) + 2 * bool(props & KCP_KERNARG_SEGMENT_PTR) + bool(props & KCP_PRIVATE_SEGMENT_SIZE)
    weakref.finalize(self, device.free_owned, self.image)

  def args_size(self, n_bufs: int, n_vals: int) -> int: return self.kernel.kernarg_segment_size

  def fill_kernargs(self, bufs, vals=(), global_size=(1, 1, 1), local_size=(1, 1, 1)) -> AMDKernArgs:
    self.check_buffers(bufs)
    gs, ls = dims3(global_size, "global_size"), dims3(local_size, "local_size")
    size = max(self.kernel.kernarg_segment_size, 8) + (64 if self.kernel.descriptor.kernel_code_properties & KCP_DISPATCH_PTR else 0)
    view, va, release = self.device.kernarg_alloc(size)
    args = AMDKernArgs(view, va, self, len(bufs), len(vals), gs, ls, release)
    args.update(bufs, vals)
    return args

  def user_sgprs(self, args: AMDKernArgs) -> list[int]:
    props, user = self.kernel.descriptor.kernel_code_properties, []
    if props & KCP_DISPATCH_PTR:
      dp = args.va + self.kernel.kernarg_segment_size + (-self.kernel.kernarg_segment_size % 64)
      user += [dp & 0xFFFFFFFF, dp >> 32]
    if props & KCP_KERNARG_SEGMENT_PTR: user += [args.va & 0xFFFFFFFF, args.va >> 32]
    if props & KCP_PRIVATE_SEGMENT_SIZE: user.append(self.kernel.descriptor.private_segment_fixed_size)
    return user


class AMDDevice(Device):
  def __init__(self, name: str, iface):
    self.iface, self.arch = iface, iface.arch
    self._mems: list[AMDMemory] = []
    self.compiler = AMDGPUCompiler(self.arch)
    self.scratch: AMDMemory | None = None
    self.scratch_per_lane = 0
    self._kernarg_lock = threading.Lock()
    self._kernarg_arenas: list[tuple[AMDMemory, RangeAllocator]] = []
    self._last_fault_poll = 0.0
    self.compute_ring: Ring | None = None
    self.sdma_ring: Ring | None = None
    try:
      super().__init__(name)
      self.compute_ring = Ring(self, iface.create_queue("compute", RING_SIZE), "compute", 4)
      self.sdma_ring = Ring(self, iface.create_queue("sdma", RING_SIZE), "SDMA", 1)
      self.staging = [self.alloc(STAGING_SIZE, host=True) for _ in range(STAGING_COUNT)]
      self._staging_done = [0] * STAGING_COUNT
      self.ensure_scratch(0)
    except BaseException:   # leave nothing behind: queues, memory, the interface (and with it the device lock)
      for b in list(getattr(self, "_buffers", ())): b.free()
      self._shutdown()
      raise

  # --- registers
  def gc_addr(self, reg) -> int: return reg.addr(self.iface.ip_bases["GC"])
  def nbio_addr(self, reg) -> int: return reg.addr(self.iface.ip_bases["NBIO"])
  def before_doorbell(self) -> None:
    if hasattr(self.iface, "before_doorbell"): self.iface.before_doorbell()

  # --- memory
  def _alloc(self, size: int, host: bool):
    mem = self.iface.alloc(size, host=host)
    return mem.va, (mem.view[:size] if mem.view is not None else None), mem

  def _free(self, mem: AMDMemory) -> None: self.iface.free(mem)

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
    mem = self.alloc_owned(PAGE, uncached=True)
    return mem.view, mem.va

  def kernarg_alloc(self, size: int) -> tuple[memoryview, int, object]:
    """Kernel-argument memory (host-visible VRAM); freed when its KernArgs object is gone."""
    size = (size + 63) & ~63
    with self._kernarg_lock:
      for _ in range(2):
        for mem, ra in self._kernarg_arenas:
          try: off = ra.alloc(size, 64)
          except MemoryError: continue
          lock = self._kernarg_lock
          def release(ra=ra, off=off):
            with lock: ra.free(off)
          return mem.view[off:off + size], mem.va + off, release
        mem = self.alloc_owned(max(KERNARG_ARENA, size), cpu_access=True)
        self._kernarg_arenas.append((mem, RangeAllocator(0, mem.size, "kernel-argument memory")))
    raise AssertionError("unreachable")

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
    wavesize = -(-64 * max(per_lane, 1) // SCRATCH_ALIGN)
    return gc.regCOMPUTE_TMPRING_SIZE.encode(WAVES=min(self.scratch.size // (wavesize * SCRATCH_ALIGN), 0xFFF), WAVESIZE=wavesize)

  def upload(self, mem: AMDMemory, data: bytes) -> None:
    if mem.view is not None: mem.view[:len(data)] = data
    else: self._stage_in(mem.va, memoryview(data))

  def _stage_in(self, va: int, data: memoryview) -> None:
    last = 0
    for i, off in enumerate(range(0, data.nbytes, STAGING_SIZE)):
      k, st = min(STAGING_SIZE, data.nbytes - off), i % STAGING_COUNT
      self.timeline.wait(self._staging_done[st])
      self.staging[st].host_view[:k] = data[off:off + k]
      with self.submit_lock:
        q = self.copy_queue().wait(self.timeline, self.timeline_value - 1)
        with q._profiled(f"copyin {k} B"): q._copy(va + off, self.staging[st].va, k)
        q.signal(self.timeline, last := self.next_timeline()).submit()
      self._staging_done[st] = last
    self.timeline.wait(last)

  def _copyin(self, buf, data: memoryview) -> None:
    if buf.host_view is not None:
      self.synchronize()
      buf.host_view[:data.nbytes] = data
    else: self._stage_in(buf.va, data)

  def _copyout(self, dest: memoryview, buf) -> None:
    self.synchronize()
    if buf.host_view is not None:
      dest[:] = buf.host_view[:dest.nbytes]
      return
    for off in range(0, dest.nbytes, STAGING_SIZE):
      k = min(STAGING_SIZE, dest.nbytes - off)
      with self.submit_lock:
        q = self.copy_queue().wait(self.timeline, self.timeline_value - 1)
        with q._profiled(f"copyout {k} B"): q._copy(self.staging[0].va, buf.va + off, k)
        q.signal(self.timeline, v := self.next_timeline()).submit()
      self.timeline.wait(v)
      dest[off:off + k] = self.staging[0].host_view[:k]

  # --- queues and programs
  def compute_queue(self) -> PM4Queue: return PM4Queue(self)
  def copy_queue(self) -> SDMAQueue: return SDMAQueue(self)
  def program(self, name: str, lib: bytes) -> AMDProgram: return AMDProgram(self, name, lib)
  def ticks_to_us(self, ticks: int) -> float: return ticks / 100   # the GPU timestamp counter runs at 100 MHz

  def check_faults(self) -> None:
    """Device errors so far; the interface is asked at most every FAULT_POLL_S (waits call this in their loop)."""
    if not self._faults and (now := time.monotonic()) - self._last_fault_poll >= FAULT_POLL_S:
      self._last_fault_poll = now
      if (fault := self.iface.poll_faults()) is not None:
        kernels = self.compute_ring.kernels_in_flight() if self.compute_ring is not None else []
        self.report_fault(fault + (f" while running kernel {kernels[0]}" if kernels else ""))
    super().check_faults()

  def _shutdown(self) -> None:
    for ring in (self.compute_ring, self.sdma_ring):
      if ring is not None: self.iface.destroy_queue(ring.desc)
    for mem in list(self._mems): self.free_owned(mem)
    self.iface.close()
