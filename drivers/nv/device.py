"""NVDevice: the queue API on an NVIDIA GPU through RM and UVM (drivers.nv.gpu), over nvidia.ko or its model.

One copy channel (its engine bound on subchannel 4) takes the copy queue's commands as pushbuffer methods
(reference nv_driver.md section 4): copies are copy-class LAUNCH_DMA, signals host SEM_EXECUTE releases (64-bit, with
the PTIMER timestamp at +8), waits host ACQ_STRICT_GEQ acquires. Pushbuffers go into a ring buffer in CPU-visible
vidmem (a GPFIFO entry reaches VA below 2^40 only); each submission becomes one GPFIFO entry (two where it wraps),
published by USERD GPPut and the usermode doorbell. Signals live in sysmem. Kernels need the compute class and the
PTX engine, which are not in this build: `program` and the compute queue refuse, saying so.
Not done yet: reading channel errors from the error notifier (a stuck channel shows as a wait that times out).
"""
from __future__ import annotations
from collections import deque
from functools import cached_property

from autogen.nv import classes as cl, copy as C
from drivers.hcq import Device, Queue, Signal
from drivers.hcq.patience import Patience
from drivers.hcq.ring import Ring, RingSealed
from drivers.nv.compiler import NVCompiler
from drivers.nv.gpu import NVGPU, NVChannel, NVMemory, PAGE
from drivers.nv.rm import field

PB_SIZE = 1 << 20                        # bytes of pushbuffer ring
COPY_SUB = 4                             # the subchannel the copy object is bound on (reference section 4)
MAX_COPY = 1 << 31                       # bytes per LAUNCH_DMA (LINE_LENGTH_IN is 32 bits; 2 GiB as the facts' copies)
GPGET, GPPUT = 0x88, 0x8c                # USERD (Nvc86fControl_struct)
LAUNCH_COPY = field(C.NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE, C.NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED) | \
  field(C.NVC8B5_LAUNCH_DMA_FLUSH_ENABLE, C.NVC8B5_LAUNCH_DMA_FLUSH_ENABLE_TRUE) | \
  field(C.NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT, C.NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH) | \
  field(C.NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT, C.NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH)
SEM64 = field(cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE, cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT)
RELEASE = field(cl.NVC56F_SEM_EXECUTE_OPERATION, cl.NVC56F_SEM_EXECUTE_OPERATION_RELEASE) | SEM64 | \
  field(cl.NVC56F_SEM_EXECUTE_RELEASE_WFI, cl.NVC56F_SEM_EXECUTE_RELEASE_WFI_EN) | \
  field(cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP, cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP_EN)
ACQUIRE = field(cl.NVC56F_SEM_EXECUTE_OPERATION, cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ) | SEM64


def methods(sub: int, method: int, *data: int) -> list[int]:
  """An incrementing method header (SEC_OP INC_METHOD, COUNT, SUBCHANNEL, ADDRESS in dwords) and its data."""
  return [field(cl.NVC56F_DMA_SEC_OP, cl.NVC56F_DMA_SEC_OP_INC_METHOD) | field(cl.NVC56F_DMA_METHOD_COUNT, len(data)) |
          field(cl.NVC56F_DMA_METHOD_SUBCHANNEL, sub) | field(cl.NVC56F_DMA_METHOD_ADDRESS, method >> 2), *data]


class GPFIFORing(Ring):
  """The pushbuffer ring (dwords, NOP-padded at its end: the NOP method header is 0) and the channel's GPFIFO: the
  doorbell turns what the ring got since the last one into GPFIFO entries. The read pointer is the pushbuffer position
  after the last GPFIFO entry the channel fetched (USERD GPGet)."""
  def __init__(self, device: NVDevice, ch: NVChannel, pb: NVMemory):
    self.ch, self.pb, self.gpu = ch, pb, device.gpu
    self.gp_put = 0                                   # GPFIFO entries written, monotonic
    self.ends: deque[tuple[int, int]] = deque()       # (entries written, pushbuffer dwords after them)
    self.last, self.done = 0, 0
    super().__init__(device, "copy", pb.view.view, memoryview(bytearray(8)), None, self._publish, 4, 0)

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
      elif wait.expired(): raise TimeoutError(f"{self.device.name}: the GPFIFO of the copy channel stayed full {wait.what}")
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


class NVCopyQueue(Queue):
  kind = "copy"

  def __init__(self, device: NVDevice):
    super().__init__(device)
    self.words: list[int] = []
    self.keep: list = []

  def _copy(self, dest_va: int, src_va: int, size: int) -> None:
    for off in range(0, size, MAX_COPY):
      n, at = min(MAX_COPY, size - off), len(self.words)
      s, d = src_va + off, dest_va + off
      self._patch_point("src", ((at + 1, 32), (at + 2, 0)), 64, off)
      self._patch_point("dest", ((at + 3, 32), (at + 4, 0)), 64, off)
      self.words += methods(COPY_SUB, C.NVC8B5_OFFSET_IN_UPPER, s >> 32, s & 0xFFFFFFFF, d >> 32, d & 0xFFFFFFFF)
      self.words += methods(COPY_SUB, C.NVC8B5_LINE_LENGTH_IN, n) + methods(COPY_SUB, C.NVC8B5_LAUNCH_DMA, LAUNCH_COPY)

  def _semaphore(self, va: int, value: int, op: int) -> int:
    at = len(self.words)
    self.words += methods(0, cl.NVC56F_SEM_ADDR_LO, va & 0xFFFFFFFF, va >> 32, value & 0xFFFFFFFF, value >> 32)
    self.words += methods(0, cl.NVC56F_SEM_EXECUTE, op)
    return at + 3                                      # where SEM_PAYLOAD_LO is

  def _signal(self, sig: Signal, value: int) -> None:
    self.keep.append(sig)
    self._patch_point("value", self._semaphore(sig.va, value, RELEASE), 64)

  def _wait(self, sig: Signal, value: int) -> None:
    self.keep.append(sig)
    self._patch_point("value", self._semaphore(sig.va, value, ACQUIRE), 64)

  def _timestamp(self, sig: Signal) -> None:
    """A timestamped release into a scratch slot, then its timestamp copied to the signal's (a release would also
    overwrite the signal's value)."""
    scratch = self.device.new_signal(0, "timestamp scratch")
    self.keep += [sig, scratch]
    self._semaphore(scratch.va, 0, RELEASE)
    self._copy(sig.timestamp_va, scratch.timestamp_va, 8)

  def _submit(self) -> None: self.device.copy_ring.submit([self.words], self.keep)
  def _seal(self) -> RingSealed: return RingSealed(self.device.copy_ring, self.kind, self.words, self.patches, self.keep)


class NVDevice(Device):
  def __init__(self, name: str, gpu: NVGPU):
    self.gpu, self.arch = gpu, gpu.arch
    self.copy_ring: GPFIFORing | None = None
    try:
      super().__init__(name)
      ch = gpu.create_channel("copy")
      gpu.schedule()
      self.copy_ring = GPFIFORing(self, ch, gpu.alloc(PB_SIZE, cpu_access=True))
      self.copy_ring.submit([methods(COPY_SUB, cl.NVC56F_SET_OBJECT, gpu.copy_class)], [])
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
  def compute_queue(self) -> Queue: raise NotImplementedError(self._no_kernels())
  def program(self, name: str, lib: bytes):
    raise NotImplementedError(self._no_kernels())

  def _no_kernels(self) -> str:
    return (f"{self.name}: kernels on NV need the compute class (QMD launch) and, on MOCK+NV, the PTX engine, which are "
            "not in this build yet; copies, signals and waits work (copy_queue)")

  def ticks_to_us(self, ticks: int) -> float: return ticks / 1000   # PTIMER counts nanoseconds (clc361.h TIME_0/1)
  def _progress(self) -> tuple: return (self.copy_ring.rptr,) if self.copy_ring is not None else ()

  def _stop_queues(self) -> None:
    if self.copy_ring is not None:
      self.gpu.destroy_channel(self.copy_ring.ch)
      self.copy_ring = None

  def _shutdown(self) -> None:
    self._stop_queues()
    self.gpu.close()
