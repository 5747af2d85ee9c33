"""The model's channel host and copy engine driven by hand-built GPFIFO entries and pushbuffers (headers and entries
built from the facts of reference nv_driver.md section 4, not from the model's decoder): methods, strictness,
semaphores, copies."""
import re, time
import numpy as np
import pytest
from autogen.nv import copy as nv_copy
from drivers.nv.gpu import NVGPU
from drivers.system.kernel import kernel_interface

SEM_ADDR_LO, SEM_ADDR_HI, SEM_PAYLOAD_LO, SEM_PAYLOAD_HI, SEM_EXECUTE, NON_STALL_INTERRUPT = 0x5c, 0x60, 0x64, 0x68, 0x6c, 0x20
RELEASE, ACQ_STRICT_GEQ, ACQ_CIRC_GEQ = 1, 2, 3
SIZE64, TIMESTAMP = 1 << 24, 1 << 25
COPY_SUB = 4


def inc(sub, method, *data): return [1 << 29 | len(data) << 16 | sub << 13 | method >> 2, *data]
def non_inc(sub, method, *data): return [3 << 29 | len(data) << 16 | sub << 13 | method >> 2, *data]
def immd(sub, method, value): return [4 << 29 | value << 16 | sub << 13 | method >> 2]


class Rig:
  def __init__(self, chip="GH100"):
    self.k = kernel_interface(mock="nv", chip=chip)
    self.g = NVGPU(self.k)
    self.ch = self.g.create_channel("copy")
    self.g.schedule()
    self.host = self.g.alloc(1 << 16, cpu_access=True)   # pushbuffers: a GPFIFO entry reaches VA below 2^40 only
    self.pb = 0
    self.put = 0

  @property
  def engine(self): return self.k.model.hosts[self.ch.token]

  def userd(self, off): return self.ch.ring.view.read32(self.ch.userd_offset + off)

  def submit(self, words, wait=True):
    data = np.array(words, np.uint32).tobytes()
    va = self.host.va + self.pb
    self.host.view.write_bytes(self.pb, data)
    self.pb += -(-len(data) // 16) * 16
    entry = (va & 0xFFFFFFFC) | ((va >> 32) & 0xFF) << 32 | (len(words) << 42)   # ENTRY0.GET, ENTRY1.GET_HI / LENGTH
    self.ch.ring.view.write64(self.put * 8, entry)
    self.put = (self.put + 1) % self.ch.entries
    self.ch.ring.view.write32(self.ch.userd_offset + 0x8c, self.put)                 # GPPut
    self.g.ring_doorbell(self.ch)
    if wait: self.wait(lambda: self.userd(0x88) == self.put or self.engine.error)
    return va

  def wait(self, cond, s=30):
    end = time.monotonic() + s
    while not cond():
      assert time.monotonic() < end, "the model made no progress"
      with self.engine.changed: self.engine.changed.wait(0.01)

  def close(self): self.g.close()


@pytest.fixture
def rig():
  r = Rig()
  yield r
  r.close()


def test_semaphore_release_32_64_and_timestamp(rig):
  buf = rig.g.alloc(0x1000, cpu_access=True)
  t0 = time.monotonic_ns()
  rig.submit(inc(0, SEM_ADDR_LO, buf.va & 0xFFFFFFFF, buf.va >> 32, 0x11223344, 0x55667788) + immd(0, SEM_EXECUTE, RELEASE))
  assert rig.engine.error is None and buf.view.read64(0) == 0x11223344      # 32-bit: the high word stays 0
  rig.submit(inc(0, SEM_ADDR_LO, (buf.va + 0x10) & 0xFFFFFFFF, buf.va >> 32, 0x9, 0xABCDEF01) + inc(0, SEM_EXECUTE, RELEASE | SIZE64 | TIMESTAMP))
  assert buf.view.read64(0x10) == 0xABCDEF01_00000009
  assert t0 <= buf.view.read64(0x18) <= time.monotonic_ns()
  rig.submit(immd(0, NON_STALL_INTERRUPT, 0))
  assert rig.engine.nonstall == 1


def test_reduction_iadd_adds_the_payload_and_takes_the_timestamp(rig):
  """dev_pbdma.ref.txt: a REDUCTION counts as a release, so RELEASE_TIMESTAMP stamps it; IADD wraps in the width."""
  mem = rig.g.alloc(64, cpu_access=True)
  mem.view.write64(0, (1 << 64) - 2)
  iadd64 = 6 | 5 << 27 | 1 << 24 | 1 << 25               # REDUCTION, IADD, 64-bit, timestamp
  before = time.monotonic_ns()
  rig.submit(inc(0, SEM_ADDR_LO, mem.va & 0xFFFFFFFF, mem.va >> 32, 5, 0) + inc(0, SEM_EXECUTE, iadd64))
  assert rig.engine.error is None
  assert mem.view.read64(0) == 3 and before <= mem.view.read64(8) <= time.monotonic_ns()
  rig.submit(inc(0, SEM_ADDR_LO, (mem.va + 32) & 0xFFFFFFFF, mem.va >> 32, 7, 0) + inc(0, SEM_EXECUTE, 6 | 5 << 27)
             + inc(0, SEM_EXECUTE, 6 | 5 << 27))  # 32-bit IADD twice, no timestamp
  assert mem.view.read32(32) == 14 and mem.view.read64(40) == 0


def test_acquire_stalls_until_the_semaphore_reaches_the_payload(rig):
  sem, out = rig.g.alloc_host(0x1000), rig.g.alloc(0x1000, cpu_access=True)
  acquire = lambda v, op: inc(0, SEM_ADDR_LO, sem.va & 0xFFFFFFFF, sem.va >> 32, v & 0xFFFFFFFF, v >> 32) + inc(0, SEM_EXECUTE, op | SIZE64)
  release = lambda v: inc(0, SEM_ADDR_LO, out.va & 0xFFFFFFFF, out.va >> 32, v & 0xFFFFFFFF, v >> 32) + inc(0, SEM_EXECUTE, RELEASE | SIZE64)
  rig.submit(acquire(5 << 32, ACQ_CIRC_GEQ) + release(1) + acquire(6 << 32, ACQ_STRICT_GEQ) + release(2), wait=False)
  assert out.view.read64(0) == 0 and rig.userd(0x88) == 0
  sem.view.write64(0, 5 << 32)                        # a payload above 2^32: the 64-bit compare
  rig.wait(lambda: out.view.read64(0) == 1)           # first acquire done, stalled again on the second
  assert rig.userd(0x88) == 0
  sem.view.write64(0, 6 << 32)
  rig.wait(lambda: rig.userd(0x88) == rig.put)
  assert out.view.read64(0) == 2 and rig.engine.error is None


def test_circular_geq_wraps(rig):
  sem, out = rig.g.alloc_host(0x1000), rig.g.alloc(0x1000, cpu_access=True)
  sem.view.write32(0, 2)                              # 2 is "after" 0xFFFFFFF0 in a 32-bit circular compare
  rig.submit(inc(0, SEM_ADDR_LO, sem.va & 0xFFFFFFFF, sem.va >> 32, 0xFFFFFFF0) + immd(0, SEM_EXECUTE, ACQ_CIRC_GEQ)
             + inc(0, SEM_ADDR_LO, out.va & 0xFFFFFFFF, out.va >> 32, 7) + immd(0, SEM_EXECUTE, RELEASE))
  assert out.view.read32(0) == 7


@pytest.mark.parametrize("size", [1, 3, 4096, (3 << 20) + 7])
def test_copy_engine_linear_copy_with_semaphore(rig, size):
  src, dst = rig.g.alloc_host(size), rig.g.alloc(size + 64, cpu_access=True)
  data = np.random.default_rng(size).integers(0, 256, size, np.uint8).tobytes()
  src.view.write_bytes(0, data)
  sem = dst.va + dst.size - 16
  launch = 2 | 1 << 2 | 2 << 3 | 1 << 7 | 1 << 8      # NON_PIPELINED, FLUSH, FOUR_WORD semaphore, pitch / pitch
  rig.submit(inc(COPY_SUB, 0, nv_copy.HOPPER_DMA_COPY_A) + inc(COPY_SUB, 0x240, sem >> 32, sem & 0xFFFFFFFF, 0xC0FFEE)
             + inc(COPY_SUB, 0x400, src.va >> 32, src.va & 0xFFFFFFFF, dst.va >> 32, dst.va & 0xFFFFFFFF)
             + inc(COPY_SUB, 0x418, size) + inc(COPY_SUB, 0x300, launch))
  assert rig.engine.error is None
  assert dst.view.read_bytes(0, size) == data and dst.view.read32(dst.size - 16) == 0xC0FFEE
  assert dst.view.read_bytes(size, 16) == bytes(16)   # nothing past LINE_LENGTH_IN


def test_copy_multi_line_and_non_incrementing_methods(rig):
  src, dst = rig.g.alloc_host(0x1000), rig.g.alloc(0x1000, cpu_access=True)
  src.view.write_bytes(0, bytes(range(256)))
  rig.submit(inc(COPY_SUB, 0, nv_copy.HOPPER_DMA_COPY_A) + inc(COPY_SUB, 0x400, src.va >> 32, src.va & 0xFFFFFFFF, dst.va >> 32, dst.va & 0xFFFFFFFF)
             + inc(COPY_SUB, 0x410, 16, 32, 4, 3) + non_inc(COPY_SUB, 0x300, 2 | 1 << 7 | 1 << 8 | 1 << 9))
  got = dst.view.read_bytes(0, 96)
  for k in range(3): assert got[32 * k:32 * k + 4] == bytes(range(16 * k, 16 * k + 4)) and got[32 * k + 4:32 * k + 32] == bytes(28)


@pytest.mark.parametrize("words,match", [
  (inc(0, 0x4c, 1), r"host method 0x4c of class 0xc86f is not modelled"),
  (inc(5, 0x300, 1), r"method 0x300 on subchannel 5, which no SET_OBJECT bound"),
  (inc(COPY_SUB, 0, nv_copy.HOPPER_DMA_COPY_A) + inc(COPY_SUB, 0x700, 1), r"method 0x700 of copy class 0xc8b5 is not modelled"),
  (inc(COPY_SUB, 0, nv_copy.AMPERE_DMA_COPY_B), r"class 0xc7b5, which the channel has no object of \(it has 0xc8b5\)"),
  (inc(COPY_SUB, 0, nv_copy.HOPPER_DMA_COPY_A) + inc(COPY_SUB, 0x300, 2), r"SRC_MEMORY_LAYOUT BLOCKLINEAR"),
  (inc(0, SEM_EXECUTE, 5), r"SEM_EXECUTE operation 5 is not modelled"),
  (inc(0, SEM_EXECUTE, 6), r"SEM_EXECUTE reduction 0 is not modelled \(IADD is\)"),
  ([6 << 29], r"SEC_OP 6"),
  (inc(0, SEM_ADDR_LO, 0, 0, 0)[:3], r"runs past the 3-dword segment"),
])
def test_bad_pushbuffers_stop_the_channel_with_a_named_error(rig, words, match):
  rig.submit(words)
  assert rig.engine.error is not None
  assert re.search(match, rig.engine.error), rig.engine.error


def test_unmapped_semaphore_is_an_mmu_fault(rig):
  rig.submit(inc(0, SEM_ADDR_LO, 0x1000, 0, 1) + immd(0, SEM_EXECUTE, RELEASE))
  assert "GPU MMU fault" in rig.engine.error


def test_freeing_the_channel_stops_its_host(rig):
  rig.submit(immd(0, NON_STALL_INTERRUPT, 0))
  engine = rig.engine
  rig.g.destroy_channel(rig.ch)
  assert not engine.is_alive() and rig.k.model.hosts == {}


@pytest.mark.parametrize("chip,copy_class,faults", [("GA100", nv_copy.AMPERE_DMA_COPY_A, False), ("GH100", nv_copy.HOPPER_DMA_COPY_A, True)])
def test_sem_addr_hi_width_and_copy_class_per_chip(chip, copy_class, faults):
  """SEM_ADDR_HI.OFFSET is 7:0 in clc56f.h and 24:0 in clc86f.h: bit 8 of it is ignored on Ampere, an address bit
  (here unmapped: an MMU fault) on Hopper."""
  r = Rig(chip)
  try:
    src, dst = r.g.alloc_host(0x1000), r.g.alloc(0x1000, cpu_access=True)
    src.view.write_bytes(0, b"ampere!!")
    r.submit(inc(COPY_SUB, 0, copy_class) + inc(COPY_SUB, 0x400, src.va >> 32, src.va & 0xFFFFFFFF, dst.va >> 32, dst.va & 0xFFFFFFFF)
             + inc(COPY_SUB, 0x418, 8) + inc(COPY_SUB, 0x300, 2 | 1 << 7 | 1 << 8)
             + inc(0, SEM_ADDR_LO, (dst.va + 16) & 0xFFFFFFFF, (dst.va >> 32) | 0x100, 5) + immd(0, SEM_EXECUTE, RELEASE))
    assert dst.view.read_bytes(0, 8) == b"ampere!!"
    if faults: assert "GPU MMU fault" in r.engine.error
    else: assert r.engine.error is None and dst.view.read32(16) == 5
  finally: r.close()
