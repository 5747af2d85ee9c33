"""The driver's PM4 bits against the model, mutation style: each row changes one field the driver encodes in RELEASE_MEM,
ACQUIRE_MEM or SET_SH_REG (in the words PM4Queue emits, not in the driver), runs kernels and signals on a fresh
MOCKKFD+AMD device, and the change shows as a device error or a wrong result; the unchanged driver gets everything
right. What each row observes is its third column. Facts: drivers/amd/pm4.py, emu/amdgpu/pm4.py, spi.py, caches.py.

Not observable as data (the model's vector path and GL2 are coherent, emu/amdgpu/caches.py): the GLM/GLV/GL1/GL2 and
SEQ bits. Their rows check that the model performed the action the packet asks for (ShaderMemory.actions); SEQ (the
order of the actions) has no row: nothing in the model depends on it."""
from __future__ import annotations
import numpy as np
import pytest

from autogen.amd import gc_11_0_0 as gc, nvd, soc21_enum
from drivers.amd.device import AMDDevice
from drivers.amd.elf import load_code_object
from drivers.amd.kfd import KFDIface
from drivers.amd.pm4 import PM4Queue
from drivers.hcq import DeviceFault
from drivers.system.kernel import kernel_interface
from tests.drivers.amd.kernels import SRC

KONST = "__kernel void konst(__global int *out) { out[__builtin_amdgcn_workitem_id_x()] = %d; }"
BIG = (1 << 33) + 5                  # a signal value above 2^32
A = nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(1), nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1)


def sh(reg, f):
  """A SET_SH_REG mutation: `f(value)` replaces the value the driver writes to `reg`."""
  def mutate(q, p):
    i = q.device.gc_addr(reg) - nvd.PACKET3_SET_SH_REG_START - p[0]
    if 0 <= i < len(p) - 1: p[1 + i] = f(p[1 + i])
    return p
  return nvd.PACKET3_SET_SH_REG, mutate


def field(reg, name, f):
  """A SET_SH_REG mutation of one field of `reg`."""
  shift, width = reg.fields[name]
  mask = ((1 << width) - 1) << shift
  return sh(reg, lambda v: (v & ~mask) | ((f((v & mask) >> shift) << shift) & mask))


def dword(op, i, f, only=None):
  """A mutation of payload dword `i` of every `op` packet (`only(payload)`: of those it selects)."""
  def mutate(q, p):
    if only is None or only(p): p[i] = f(p[i])
    return p
  return op, mutate


def is_big(p) -> bool: return p[4] | p[5] << 32 == BIG    # the RELEASE_MEM of the signal set to BIG


def release(i, f): return dword(nvd.PACKET3_RELEASE_MEM, i, f)
def acquire(f): return dword(nvd.PACKET3_ACQUIRE_MEM, 6, f)


RSRC1, RSRC2, TMPRING = gc.regCOMPUTE_PGM_RSRC1, gc.regCOMPUTE_PGM_RSRC2, gc.regCOMPUTE_TMPRING_SIZE
# (row id, mutation, what shows it: "error" = a device error naming the cause, "result" = a wrong result, or the name
# of a cache action that goes missing)
ROWS = [
  # RELEASE_MEM (the signal and timestamp writes)
  ("release event CS_DONE", release(0, lambda v: (v & ~0x3F) | soc21_enum.CS_DONE), "error"),
  ("release event PS_DONE at index 6", release(0, lambda v: (v & ~0xF3F) | soc21_enum.PS_DONE | 6 << 8), "error"),
  ("release index 4 (partial flush)", release(0, lambda v: (v & ~0xF00) | 4 << 8), "error"),
  ("release index 6 (end of shader)", release(0, lambda v: (v & ~0xF00) | 6 << 8), "error"),
  ("release DATA_SEL 64 -> 32", dword(nvd.PACKET3_RELEASE_MEM, 1, lambda v: v & ~(7 << 29) | 1 << 29, only=is_big), "result"),
  ("release DATA_SEL -> none", dword(nvd.PACKET3_RELEASE_MEM, 1, lambda v: v & ~(7 << 29), only=is_big), "result"),
  ("release DATA_SEL clock -> data", release(1, lambda v: v & ~(7 << 29) | 2 << 29 if v >> 29 == 3 else v), "result"),
  ("release DATA_SEL 5 (GDS)", release(1, lambda v: v | 5 << 29), "error"),
  ("release INT_SEL 1 (interrupt only)", release(1, lambda v: v | 1 << 24), "error"),
  ("release INT_SEL 2 (interrupt)", release(1, lambda v: v | 2 << 24), "interrupt"),
  ("release DST_SEL 2", release(1, lambda v: v | 2 << 16), "error"),
  ("release GCR SEQ 3", release(0, lambda v: v | 3 << 22), "error"),
  ("release GCR GL2_DISCARD", release(0, lambda v: v | nvd.PACKET3_RELEASE_MEM_GCR_GL2_DISCARD), "error"),
  *((f"release GCR without {n}", release(0, lambda v, b=b: v & ~b), f"RELEASE_MEM {n}") for n, b in (
    ("GL2_WB", nvd.PACKET3_RELEASE_MEM_GCR_GL2_WB), ("GL2_INV", nvd.PACKET3_RELEASE_MEM_GCR_GL2_INV),
    ("GLV_INV", nvd.PACKET3_RELEASE_MEM_GCR_GLV_INV), ("GL1_INV", nvd.PACKET3_RELEASE_MEM_GCR_GL1_INV),
    ("GLM_WB", nvd.PACKET3_RELEASE_MEM_GCR_GLM_WB), ("GLM_INV", nvd.PACKET3_RELEASE_MEM_GCR_GLM_INV))),
  # ACQUIRE_MEM (before each dispatch, and the memory barrier's)
  ("acquire without GLK_INV", acquire(lambda v: v & ~A[1]), "either"),
  ("acquire without GLI_INV", acquire(lambda v: v & ~A[0]), "result"),
  ("acquire COHER_CNTL", dword(nvd.PACKET3_ACQUIRE_MEM, 0, lambda v: 1), "error"),
  ("acquire GCR SEQ 3", acquire(lambda v: v | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_SEQ(3)), "error"),
  *((f"acquire without {n}", acquire(lambda v, b=b: v & ~b), f"ACQUIRE_MEM {n}") for n, b in (
    ("GLM_INV", nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1)), ("GLV_INV", nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1)),
    ("GL1_INV", nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1)))),
  # SET_SH_REG
  ("PGM_LO + 256 bytes", sh(gc.regCOMPUTE_PGM_LO, lambda v: v + 1), "either"),
  ("RSRC1 f32 denormals flushed", field(RSRC1, "FLOAT_MODE", lambda v: v & ~0x30), "result"),
  ("RSRC1 FP16_OVFL", field(RSRC1, "FP16_OVFL", lambda v: 1), "error"),
  ("RSRC2 USER_SGPR - 1", field(RSRC2, "USER_SGPR", lambda v: v - 1), "either"),
  ("RSRC2 no TGID_X", field(RSRC2, "TGID_X_EN", lambda v: 0), "result"),
  ("RSRC2 no TGID_Y", field(RSRC2, "TGID_Y_EN", lambda v: 0), "result"),
  ("RSRC2 no SCRATCH_EN", field(RSRC2, "SCRATCH_EN", lambda v: 0), "error"),
  ("RSRC2 TIDIG_COMP_CNT 0", field(RSRC2, "TIDIG_COMP_CNT", lambda v: 0), "result"),
  ("RSRC2 LDS_SIZE 0", field(RSRC2, "LDS_SIZE", lambda v: 0), "error"),
  ("RSRC3 TRAP_ON_END", field(gc.regCOMPUTE_PGM_RSRC3, "TRAP_ON_END", lambda v: 1), "error"),
  ("TMPRING WAVESIZE / 4", field(TMPRING, "WAVESIZE", lambda v: v // 4), "error"),
  ("TMPRING WAVES 1", field(TMPRING, "WAVES", lambda v: 1), "error"),
  ("TMPRING WAVES x 6 (the total, not per SE)", field(TMPRING, "WAVES", lambda v: min(v * 6, 0xFFF)), "error"),
  ("SCRATCH_BASE_HI + 1", sh(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_HI, lambda v: v + 1), "error"),
  ("RESTART_X 1", sh(gc.regCOMPUTE_RESTART_X, lambda v: 1), "error"),
  ("RESOURCE_LIMITS WAVES_PER_SH", sh(gc.regCOMPUTE_RESOURCE_LIMITS, lambda v: 1), "error"),
  ("START_X 1", sh(gc.regCOMPUTE_START_X, lambda v: 1), "error"),
  ("NUM_THREAD_X - 1", sh(gc.regCOMPUTE_NUM_THREAD_X, lambda v: v - 1), "either"),
  ("PERFCOUNT_ENABLE", sh(gc.regCOMPUTE_PERFCOUNT_ENABLE, lambda v: 1), "error"),
]


def workload(dev) -> dict[str, object]:
  """Kernels and signals that use every field above; what they produced."""
  lib = dev.compiler.compile(SRC + "\n" + DENORM)
  put = lambda a: (b := dev.alloc(a.nbytes), b.copyin(a.data))[0]
  got = {}
  n = 7 * 64                                    # 7 workgroups: every shader engine's scratch ring, one twice
  idx, out = put(np.arange(n, dtype=np.int32) * 7), dev.alloc(4 * n)
  scratch = dev.program("scratch", lib)
  scratch(out, idx, global_size=(7,), local_size=(64,), wait=True)
  got["scratch"] = np.frombuffer(out.copyout(), np.int32).copy()
  idx2 = put(np.arange(n, dtype=np.int32) * 3)   # new kernel arguments in the kernarg page the first launch read
  scratch(out, idx2, global_size=(7,), local_size=(64,), wait=True)
  got["scratch2"] = np.frombuffer(out.copyout(), np.int32).copy()
  sums, data = dev.alloc(4 * 2), put(np.arange(512, dtype=np.float32))
  dev.program("lds_sum", lib)(sums, data, global_size=(2,), local_size=(256,), wait=True)
  got["lds_sum"] = np.frombuffer(sums.copyout(), np.float32).copy()
  grid = dev.alloc(4 * 8 * 4 * 2)
  dev.program("grid3d", lib)(grid, vals=(8, 4), global_size=(2, 2, 2), local_size=(4, 2, 1), wait=True)
  got["grid3d"] = np.frombuffer(grid.copyout(), np.int32).copy()
  den = dev.alloc(4)
  dev.program("denorm", lib)(den, vals=(int(TINY.view(np.uint32)),), wait=True)
  got["denorm"] = np.frombuffer(den.copyout(), np.float32).copy()
  k = dev.program("konst", dev.compiler.compile(KONST % 1))
  kout = dev.alloc(4 * 32)
  k(kout, local_size=(32,), wait=True)
  other = load_code_object(dev.compiler.compile(KONST % 2)).relocated(k.image.va)
  dev.upload(k.image, other)                     # the same kernel rewritten in place: the I$ must drop the old one
  k(kout, local_size=(32,), wait=True)
  got["konst"] = np.frombuffer(kout.copyout(), np.int32).copy()
  sig = dev.new_signal()
  dev.compute_queue().signal(sig, BIG).timestamp(sig).signal(dev.timeline, v := dev.next_timeline()).submit()
  dev.timeline.wait(v, timeout_ms=10_000)
  got["signal"], got["timestamp"] = sig.value, sig.timestamp
  return got


DENORM = "__kernel void denorm(__global float *out, float x) { out[0] = x * 2.0f; }"
TINY = np.float32(1e-40)             # an f32 denormal


def expected() -> dict[str, object]:
  i = np.arange(7 * 64)
  x, y, z = np.meshgrid(np.arange(8), np.arange(4), np.arange(2), indexing="ij")
  grid = np.zeros((2, 4, 8), np.int32)
  grid[z, y, x] = x + 100 * y + 10000 * z
  return {"scratch": (i * 7 & 63) * i, "scratch2": (i * 3 & 63) * i, "lds_sum": [np.arange(256).sum(), np.arange(256, 512).sum()],
          "grid3d": grid.ravel(), "denorm": [TINY * np.float32(2)], "konst": np.full(32, 2), "signal": BIG}


def fresh_device() -> AMDDevice:
  return AMDDevice("MOCKKFD+AMD", KFDIface(kernel_interface("kfd")))   # a KFD model of its own: a row may poison it


def check(got: dict, want: dict) -> list[str]:
  """The names of the results that are wrong."""
  bad = [k for k, v in want.items() if not np.array_equal(np.asarray(got[k]), np.asarray(v))]
  return bad + (["timestamp"] if not 0 < got["timestamp"] < 1 << 40 else [])


def test_the_unchanged_driver_gets_every_result_right():
  dev = fresh_device()
  try:
    gpu = dev.iface.k.model.nodes[dev.iface.gpu_id].gpu
    interrupts = []
    gpu.on_interrupt.append(lambda *a: interrupts.append(a))
    assert check(workload(dev), expected()) == [] and not interrupts
    assert {row[2] for row in ROWS if row[2].startswith(("RELEASE_MEM", "ACQUIRE_MEM"))} <= set(gpu.shader_memory.actions)
  finally: dev.close()


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_a_changed_bit_shows(row, monkeypatch):
  _, (op, mutate), shows = row
  real = PM4Queue.pkt3
  monkeypatch.setattr(PM4Queue, "pkt3", lambda q, o, *p: real(q, o, *(mutate(q, list(p)) if o == op else p)))
  dev = fresh_device()
  try:
    gpu = dev.iface.k.model.nodes[dev.iface.gpu_id].gpu
    interrupts = []
    gpu.on_interrupt.append(lambda *a: interrupts.append(a))
    if shows == "error":
      with pytest.raises(DeviceFault): workload(dev)
    elif shows == "result": assert check(workload(dev), expected()) != []
    elif shows == "either":
      try: assert check(workload(dev), expected()) != []
      except DeviceFault: pass
    elif shows == "interrupt":
      assert check(workload(dev), expected()) == [] and interrupts
    else:                                        # a cache action the model performs for the unchanged driver
      assert check(workload(dev), expected()) == [] and shows not in gpu.shader_memory.actions
  finally: dev.close()
