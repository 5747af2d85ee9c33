"""NVDevice: the queue API on an NVIDIA GPU through RM and UVM (drivers.nv.gpu), over nvidia.ko or its model.

Two channels in one channel group, each fed by its own pushbuffer ring (reference nv_driver.md section 4): the copy
channel (the copy object on subchannel 4) takes the copy queue's commands, the compute channel (the compute object on
subchannel 1) the compute queue's. Copies are copy-class LAUNCH_DMA; kernels SEND_PCAS_A with the QMD's address and
SEND_SIGNALING_PCAS2_B PREFETCH_SCHEDULE (drivers.nv.program builds the QMD and constant buffer 0 in the launch's
argument memory); signals are host SEM_EXECUTE releases (64-bit, after the engine is idle, with the PTIMER timestamp at
+8), waits host ACQ_STRICT_GEQ acquires, on either channel, so each queue waits on the other's signals. Pushbuffers go
into ring buffers in CPU-visible vidmem (a GPFIFO entry reaches VA below 2^40 only); each submission becomes one GPFIFO
entry (two where it wraps), published by USERD GPPut and the usermode doorbell. Signals live in sysmem.
Timestamps: the copy queue releases a scratch semaphore with its timestamp and copies the timestamp over; the compute
channel has no copy engine, so a compute-queue timestamp is a timestamped REDUCTION IADD of 0 on the signal itself:
the time is stamped when it runs and the value stays what it is then (a reduction counts as a release).
A channel that stops is seen in its error notifier (NvNotification, nvgputypes.h: a nonzero status, info32 the
nverror.h code): waits then raise DeviceFault naming the channel and the code.
"""
from __future__ import annotations
from collections import deque
from functools import cached_property

from autogen.nv import classes as cl, compute as nv_compute, copy as nv_copy
from drivers.hcq import Device, Signal
from drivers.hcq.patience import Patience
from drivers.hcq.ring import Ring, RingQueue
from drivers.nv.compiler import NVCompiler
from drivers.nv.gpu import NVGPU, NVChannel, NVMemory, PAGE
from drivers.nv.program import NVKernArgs, NVProgram
from drivers.nv.rm import field

PB_SIZE = 1 << 20                        # bytes of pushbuffer ring
COPY_SUB, COMPUTE_SUB = 4, 1             # the subchannels the copy and compute objects are bound on (reference section 4)
# generic-address windows of shared and local memory (reference section 3, step 23; the shared one 4 GiB-aligned)
LOCAL_WINDOW, SHARED_WINDOW = 0x729300000000, 0x729400000000
# the compute methods sent (NVC6C0_* names): the same offsets in clc6c0.h, clc7c0.h and clcbc0.h (reference section 4)
assert all(getattr(nv_compute, f"{p}_{m}") == getattr(nv_compute, f"NVC6C0_{m}") for p in ("NVC7C0", "NVCBC0") for m in (
  "SET_SHADER_SHARED_MEMORY_WINDOW_A", "SET_SHADER_LOCAL_MEMORY_WINDOW_A", "SET_SHADER_LOCAL_MEMORY_A",
  "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A", "INVALIDATE_SHADER_CACHES_NO_WFI", "SEND_PCAS_A", "SEND_SIGNALING_PCAS2_B",
  "SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE"))
ERRORS = {13: "ROBUST_CHANNEL_GR_EXCEPTION", 31: "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT (an MMU fault)"}   # nverror.h
LOCAL_ALIGN = 0x20000                    # local memory is allocated in 128 KiB steps, per TPC in 32 KiB (section 3, step 25)
MAX_COPY = 1 << 31                       # bytes per LAUNCH_DMA (LINE_LENGTH_IN is 32 bits; 2 GiB as the facts' copies)
GPGET, GPPUT = 0x88, 0x8c                # USERD (Nvc86fControl_struct)
LAUNCH_COPY = field(nv_copy.NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE, nv_copy.NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED) | \
  field(nv_copy.NVC8B5_LAUNCH_DMA_FLUSH_ENABLE, nv_copy.NVC8B5_LAUNCH_DMA_FLUSH_ENABLE_TRUE) | \
  field(nv_copy.NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT, nv_copy.NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH) | \
  field(nv_copy.NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT, nv_copy.NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH)
SEM64 = field(cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE, cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT)
RELEASE = field(cl.NVC56F_SEM_EXECUTE_OPERATION, cl.NVC56F_SEM_EXECUTE_OPERATION_RELEASE) | SEM64 | \
  field(cl.NVC56F_SEM_EXECUTE_RELEASE_WFI, cl.NVC56F_SEM_EXECUTE_RELEASE_WFI_EN) | \
  field(cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP, cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP_EN)
ACQUIRE = field(cl.NVC56F_SEM_EXECUTE_OPERATION, cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ) | SEM64
# a reduction counts as a release, so it takes the timestamp; adding 0 leaves the value (dev_pbdma.ref.txt)
STAMP = field(cl.NVC56F_SEM_EXECUTE_OPERATION, cl.NVC56F_SEM_EXECUTE_OPERATION_REDUCTION) | SEM64 | \
  field(cl.NVC56F_SEM_EXECUTE_REDUCTION, cl.NVC56F_SEM_EXECUTE_REDUCTION_IADD) | \
  field(cl.NVC56F_SEM_EXECUTE_RELEASE_WFI, cl.NVC56F_SEM_EXECUTE_RELEASE_WFI_EN) | \
  field(cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP, cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP_EN)
INVALIDATE = field(nv_compute.NVC6C0_INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION, 1) | \
  field(nv_compute.NVC6C0_INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA, 1) | field(nv_compute.NVC6C0_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT, 1)


def methods(sub: int, method: int, *data: int) -> list[int]:
  """An incrementing method header (SEC_OP INC_METHOD, COUNT, SUBCHANNEL, ADDRESS in dwords) and its data."""
  return [field(cl.NVC56F_DMA_SEC_OP, cl.NVC56F_DMA_SEC_OP_INC_METHOD) | field(cl.NVC56F_DMA_METHOD_COUNT, len(data)) |
          field(cl.NVC56F_DMA_METHOD_SUBCHANNEL, sub) | field(cl.NVC56F_DMA_METHOD_ADDRESS, method >> 2), *data]


def ch_name(ch: NVChannel, device: NVDevice) -> str: return "compute" if ch.engine_class == device.gpu.compute_class else "copy"


class GPFIFORing(Ring):
  """The pushbuffer ring (dwords, NOP-padded at its end: the NOP method header is 0) and the channel's GPFIFO: the
  doorbell turns what the ring got since the last one into GPFIFO entries. The read pointer is the pushbuffer position
  after the last GPFIFO entry the channel fetched (USERD GPGet)."""
  def __init__(self, device: NVDevice, ch: NVChannel, pb: NVMemory):
    self.ch, self.pb, self.gpu = ch, pb, device.gpu
    self.gp_put = 0                                   # GPFIFO entries written, monotonic
    self.ends: deque[tuple[int, int]] = deque()       # (entries written, pushbuffer dwords after them)
    self.last, self.done = 0, 0
    super().__init__(device, ch_name(ch, device), pb.view.view, memoryview(bytearray(8)), None, self._publish, 4, 0)

  def _fetched(self) -> int:
    """GPFIFO entries the channel has read (GPGet is that count modulo the ring)."""
    return self.gp_put - (self.gp_put - self.ch.ring.view.read32(self.ch.userd_offset + GPGET)) % self.ch.entries

  @property
  def rptr(self) -> int:
    fetched = self._fetched()
    while self.ends and self.ends[0][0] <= fetched: self.done = self.ends.popleft()[1]
    return self.done

  def _publish(self, put: int) -> None:
    words = self.size // 4
    start, n = self.last % words, put - self.last
    pieces = [(start, min(n, words - start))] + ([(0, n - (words - start))] if start + n > words else [])
    wait = None
    while self.gp_put + len(pieces) - self._fetched() > self.ch.entries - 1:   # full (GPPut == GPGet would read as empty)
      self.device.check_faults()
      if wait is None: wait = Patience(lambda: (self.rptr, self.device.progress()))
      elif wait.expired(): raise TimeoutError(f"{self.device.name}: the GPFIFO of the {self.name} channel stayed full {wait.what}")
      wait.nap()
    for off, ndw in pieces:
      va = self.pb.va + off * 4
      entry = field(cl.NVC56F_GP_ENTRY0_GET, (va & 0xFFFFFFFF) >> 2) | \
        (field(cl.NVC56F_GP_ENTRY1_GET_HI, va >> 32) | field(cl.NVC56F_GP_ENTRY1_LENGTH, ndw)) << 32
      self.ch.ring.view.write64(self.gp_put % self.ch.entries * 8, entry)
      self.gp_put += 1
    self.ends.append((self.gp_put, put))
    self.last = put
    self.ch.ring.view.write32(self.ch.userd_offset + GPPUT, self.gp_put % self.ch.entries)
    self.gpu.ring_doorbell(self.ch)


class NVQueue(RingQueue):
  """Host methods both channels take: semaphore releases and acquires."""
  device: NVDevice

  def _semaphore(self, va: int, value: int, op: int) -> int:
    at = len(self.words)
    self.words += methods(0, cl.NVC56F_SEM_ADDR_LO, va & 0xFFFFFFFF, va >> 32, value & 0xFFFFFFFF, value >> 32)
    self.words += methods(0, cl.NVC56F_SEM_EXECUTE, op)
    return at + 3                                      # where SEM_PAYLOAD_LO is

  def _signal(self, sig: Signal, value: int) -> None:
    self._patch_point("value", self._semaphore(sig.va, value, RELEASE), 64)

  def _wait(self, sig: Signal, value: int) -> None:
    self._patch_point("value", self._semaphore(sig.va, value, ACQUIRE), 64)


class NVComputeQueue(NVQueue):
  kind = "compute"

  @property
  def ring(self) -> GPFIFORing: return self.device.compute_ring

  def _exec(self, prg: NVProgram, args: NVKernArgs, global_size, local_size) -> None:
    """Invalidate the shader caches (the program and its arguments were written by the CPU), point PCAS at the QMD
    (patch role "args": its address >> 8 from the arguments' address) and schedule it."""
    if not isinstance(args, NVKernArgs) or args.prg is not prg: raise ValueError(f"kernel {prg.name}: arguments not from its fill_kernargs")
    args.set_dims(global_size, local_size)
    self.words += methods(COMPUTE_SUB, nv_compute.NVC6C0_INVALIDATE_SHADER_CACHES_NO_WFI, INVALIDATE)
    self._patch_point("args", ((len(self.words) + 1, 8),), 40, prg.qmd_offset)
    self.words += methods(COMPUTE_SUB, nv_compute.NVC6C0_SEND_PCAS_A, args.qmd_va >> 8)
    self.words += methods(COMPUTE_SUB, nv_compute.NVC6C0_SEND_SIGNALING_PCAS2_B,
                          nv_compute.NVC6C0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE)

  def _timestamp(self, sig: Signal) -> None:
    """An IADD of 0 with the timestamp: the GPU stamps the time when it runs it, and the value stays whatever it is then."""
    self._semaphore(sig.va, 0, STAMP)


class NVCopyQueue(NVQueue):
  kind = "copy"

  @property
  def ring(self) -> GPFIFORing: return self.device.copy_ring

  def _copy(self, dest_va: int, src_va: int, size: int) -> None:
    for off in range(0, size, MAX_COPY):
      n, at = min(MAX_COPY, size - off), len(self.words)
      s, d = src_va + off, dest_va + off
      self._patch_point("src", ((at + 1, 32), (at + 2, 0)), 64, off)
      self._patch_point("dest", ((at + 3, 32), (at + 4, 0)), 64, off)
      self.words += methods(COPY_SUB, nv_copy.NVC8B5_OFFSET_IN_UPPER, s >> 32, s & 0xFFFFFFFF, d >> 32, d & 0xFFFFFFFF)
      self.words += methods(COPY_SUB, nv_copy.NVC8B5_LINE_LENGTH_IN, n) + methods(COPY_SUB, nv_copy.NVC8B5_LAUNCH_DMA, LAUNCH_COPY)

  def _timestamp(self, sig: Signal) -> None:
    """A timestamped release into a scratch slot, then its timestamp copied to the signal's (a release would also
    overwrite the signal's value)."""
    scratch = self.device.new_signal(0, "timestamp scratch")
    self._hold(scratch)
    self._semaphore(scratch.va, 0, RELEASE)
    self._copy(sig.timestamp_va, scratch.timestamp_va, 8)


class NVDevice(Device):
  shared_window, local_window = SHARED_WINDOW, LOCAL_WINDOW

  def __init__(self, name: str, gpu: NVGPU):
    self.gpu, self.arch = gpu, gpu.arch
    self.copy_ring: GPFIFORing | None = None
    self.compute_ring: GPFIFORing | None = None
    self.local: NVMemory | None = None
    self.local_per_thread = 0
    try:
      super().__init__(name)
      copy, compute = gpu.create_channel("copy"), gpu.create_channel("compute")
      gpu.schedule()
      self.copy_ring = GPFIFORing(self, copy, gpu.alloc(PB_SIZE, cpu_access=True))
      self.copy_ring.submit([methods(COPY_SUB, cl.NVC56F_SET_OBJECT, gpu.copy_class)], [])
      self.compute_ring = GPFIFORing(self, compute, gpu.alloc(PB_SIZE, cpu_access=True))
      self.compute_ring.submit([methods(COMPUTE_SUB, cl.NVC56F_SET_OBJECT, gpu.compute_class) +
                                methods(COMPUTE_SUB, nv_compute.NVC6C0_SET_SHADER_SHARED_MEMORY_WINDOW_A, SHARED_WINDOW >> 32,
                                        SHARED_WINDOW & 0xFFFFFFFF) +
                                methods(COMPUTE_SUB, nv_compute.NVC6C0_SET_SHADER_LOCAL_MEMORY_WINDOW_A, LOCAL_WINDOW >> 32,
                                        LOCAL_WINDOW & 0xFFFFFFFF)], [])
    except BaseException:
      for b in list(getattr(self, "_buffers", ())): b.free()
      self._shutdown()
      raise

  def _alloc(self, size: int, host: bool):
    mem = self.gpu.alloc(size, vram=not host)
    return mem.va, (mem.view.view[:size] if mem.view is not None else None), mem

  def _free(self, mem: NVMemory) -> None: self.gpu.free(mem)

  def _signal_chunk(self) -> tuple[memoryview, int]:
    mem = self.gpu.alloc(PAGE, vram=False)
    return mem.view.view, mem.va

  def _kernarg_chunk(self, size: int) -> tuple[memoryview, int]:
    mem = self.gpu.alloc(size, cpu_access=True)
    return mem.view.view, mem.va

  @cached_property
  def compiler(self) -> NVCompiler: return NVCompiler(self.arch)    # CUDA C for the GPU's SM (GR info SM_VERSION)

  def copy_queue(self) -> NVCopyQueue: return NVCopyQueue(self)
  def compute_queue(self) -> NVComputeQueue: return NVComputeQueue(self)
  def program(self, name: str, lib: bytes) -> NVProgram:
    """Kernel `name` of an NV kernel image (drivers.nv.image: the cubin and its PTX, what the NV compiler builds)."""
    self._check_open()
    return NVProgram(self, name, lib)

  def free_code(self, mem: NVMemory) -> None:
    """Free a program's upload (when the program is gone: its launches' arguments, which the rings keep until the
    channel read past them, hold it; this runs from a finalizer, so it must not wait for the device)."""
    if not self.closed and mem in self.gpu.memory: self.gpu.free(mem)

  def ensure_local(self, per_thread: int) -> None:
    """Local memory for `per_thread` bytes of every thread the GPU holds at once (reference section 3, step 25): bytes
    per TPC = per-thread bytes x 32 lanes x warps per SM x SMs per TPC, for every TPC; set on the compute channel."""
    if per_thread <= self.local_per_thread: return
    gr = self.gpu.gr
    per_tpc = -(-(-(-per_thread // 16) * 16) * 32 * gr["max_warps_per_sm"] * gr["sm_per_tpc"] // 0x8000) * 0x8000
    size = -(-per_tpc * gr["tpc_per_gpc"] * gr["gpcs"] // LOCAL_ALIGN) * LOCAL_ALIGN
    mem = self.gpu.alloc(size)
    def work(q: NVQueue) -> None:
      q.words += methods(COMPUTE_SUB, nv_compute.NVC6C0_SET_SHADER_LOCAL_MEMORY_A, mem.va >> 32, mem.va & 0xFFFFFFFF)
      q.words += methods(COMPUTE_SUB, nv_compute.NVC6C0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, per_tpc >> 32, per_tpc & 0xFFFFFFFF, 0xFF)
    self.synchronize()
    self.ordered_submit(self.compute_queue(), work)
    old, self.local, self.local_per_thread = self.local, mem, per_thread
    if old is not None:
      self.synchronize()
      self.gpu.free(old)

  def ticks_to_us(self, ticks: int) -> float: return ticks / 1000   # PTIMER counts nanoseconds (clc361.h TIME_0/1)
  def _poll_faults(self) -> str | None:
    """NvNotification of each channel's error notifier: info32 at 0x8, status at 0xe."""
    for r in (self.copy_ring, self.compute_ring):
      if r is not None and (n := r.ch.notifier.view) is not None and n.read16(0xE):
        code = n.read32(0x8)
        return f"the {r.name} channel stopped: its RM error notifier reports error {code} ({ERRORS.get(code, 'see nverror.h')})"
    return None

  def _progress(self) -> tuple: return tuple(r.rptr for r in (self.copy_ring, self.compute_ring) if r is not None)

  def _stop_queues(self) -> None:
    for ring in ("copy_ring", "compute_ring"):
      if (r := getattr(self, ring)) is not None:
        self.gpu.destroy_channel(r.ch)
        setattr(self, ring, None)

  def _shutdown(self) -> None:
    self._stop_queues()
    self.gpu.close()
