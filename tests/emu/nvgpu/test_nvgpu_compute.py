"""The compute classes of the NVIDIA model: QMD V03 (GA100 c6c0, GA102 c7c0) and V04 (GH100 cbc0) decoded strictly
(each field mutated gives its own error), the compute methods checked against the class headers, the release
semaphores a QMD asks for, and what a launch checks in memory (cb0, shared memory, barriers, unmapped addresses)."""
import numpy as np
import pytest
from autogen import qmdlayout
from autogen.nv import compute as nv_compute
from drivers.hcq import DeviceFault
from drivers.nv import image, qmd as build_qmd
from drivers.nv.device import COMPUTE_SUB, NVDevice, methods
from drivers.nv.gpu import NVGPU
from drivers.system.kernel import kernel_interface
from emu.nvgpu.chips import CHIPS
from emu.nvgpu.qmd import LAYOUTS, QMDError, decode
from drivers.nv import nvrtc
from ptx_helpers import HAVE_NVRTC, VADD

CLASSES = {"GH100": nv_compute.HOPPER_COMPUTE_A, "GA100": nv_compute.AMPERE_COMPUTE_A, "GA102": nv_compute.AMPERE_COMPUTE_B}
PROG, CB0 = 0x10_0000_0500, 0x10_0020_0000


def good(chip: str, **over) -> tuple[qmdlayout.QMDLayout, int]:
  """A QMD as drivers/nv builds it for a 4x2x1 grid of 64x2x1 CTAs, as an int, with `over` fields replaced."""
  c = CHIPS[chip]
  g = build_qmd.Grid(PROG, 0x2800, 32, 256, 0, c.sass_version, c.max_shared_kb)
  L = LAYOUTS[CLASSES[chip]]
  q = int.from_bytes(build_qmd.build(CLASSES[chip], g, (4, 2, 1), (64, 2, 1), (CB0, 0x230)), "little")
  for k, v in over.items(): q = L.set(q, k, v)
  return L, q


def run(chip: str, q: int):
  L, c = LAYOUTS[CLASSES[chip]], CHIPS[chip]
  return decode(CLASSES[chip], q.to_bytes(L.nbytes, "little"), c.max_shared_kb, c.sass_version)


@pytest.mark.parametrize("chip", CLASSES)
def test_the_drivers_qmd_decodes_to_its_launch(chip):
  L, q = good(chip)
  d = run(chip, q)
  assert (d.grid, d.block, d.program, d.registers, d.barriers) == ((4, 2, 1), (64, 2, 1), PROG, 32, 1)
  assert d.cbs == {0: (CB0, 0x230)} and d.releases == [] and d.shared_bytes == 0x500 and d.sass_version == CHIPS[chip].sass_version


@pytest.mark.parametrize("chip", CLASSES)
def test_every_field_the_model_does_not_act_on_must_be_zero(chip):
  """Set each such field (all of them, from the header's table) to 1, or to a value its hint does not allow."""
  from emu.nvgpu.qmd import HINTS
  L, q = good(chip)
  acted = {f for f in L.fields if any(s in f for s in ("GRID_", "CTA_RASTER_", "CTA_THREAD_DIMENSION", "PROGRAM_", "REGISTER_COUNT",
           "BARRIER_COUNT", "SHARED_MEMORY_SIZE", "SM_CONFIG", "SASS_VERSION", "QMD_MAJOR", "QMD_MINOR", "QMD_TYPE", "SHADER_LOCAL",
           "CONSTANT_BUFFER_VALID", "CONSTANT_BUFFER_ADDR", "CONSTANT_BUFFER_SIZE", "RELEASE"))} | {"QMD_VERSION"}
  tried = 0
  for f, (hi, lo) in L.fields.items():
    if f in acted: continue
    bad = next((v for v in range(1, 1 << min(hi - lo + 1, 3)) if v not in HINTS.get(f, ())), None)
    if bad is None: continue                          # a 1-bit hint: both values are accepted
    with pytest.raises(QMDError, match=f"{L.prefix}_{f} = {bad:#x}"): run(chip, L.set(q, f, bad))
    tried += 1
  assert tried > 60


@pytest.mark.parametrize("chip,fields,message", [
  ("GH100", {"QMD_MAJOR_VERSION": 3}, r"version 3.0 on compute class 0xcbc0: the model decodes V04_00 .*unverified"),
  ("GA100", {"QMD_MAJOR_VERSION": 4}, r"version 4.0 on compute class 0xc6c0: the model decodes V03_00"),
  ("GA102", {"QMD_VERSION": 1}, r"version 3.1 on compute class 0xc7c0"),
  ("GH100", {"QMD_TYPE": 3}, r"QMD_TYPE = 0x3: only GRID_CTA"),
  ("GH100", {"GRID_HEIGHT": 0}, r"GRID_HEIGHT = 0x0: an empty grid"),
  ("GA100", {"CTA_RASTER_DEPTH": 0}, r"CTA_RASTER_DEPTH = 0x0: an empty grid"),
  ("GH100", {"CTA_THREAD_DIMENSION2": 0}, r"CTA_THREAD_DIMENSION2 = 0x0: an empty CTA"),
  ("GA102", {"CTA_THREAD_DIMENSION1": 32}, r"CTA of \(64, 32, 1\) = 2048 threads: at most 1024"),
  ("GH100", {"REGISTER_COUNT": 0}, r"REGISTER_COUNT = 0x0: a thread has 1 to 255"),
  ("GA100", {"REGISTER_COUNT_V": 255, "CTA_THREAD_DIMENSION1": 16}, r"1024 threads of 255 registers do not fit"),
  ("GH100", {"SASS_VERSION": 0x80}, r"SASS_VERSION = 0x80: this GPU runs SASS version 0x90"),
  ("GA102", {"SASS_VERSION": 0x80}, r"SASS_VERSION = 0x80: this GPU runs SASS version 0x86"),
  ("GA102", {"MAX_SM_CONFIG_SHARED_MEM_SIZE": 42}, r"MAX_SM_CONFIG_SHARED_MEM_SIZE = 0x2a: an SM config .* 1 to 26 \(100 KiB\)"),
  ("GH100", {"MIN_SM_CONFIG_SHARED_MEM_SIZE": 0}, r"MIN_SM_CONFIG_SHARED_MEM_SIZE = 0x0"),
  ("GH100", {"MIN_SM_CONFIG_SHARED_MEM_SIZE": 9}, r"configs min 9 / target 3 / max 58 are not ordered"),
  ("GA100", {"SHARED_MEMORY_SIZE": 0x2080}, r"SHARED_MEMORY_SIZE = 0x2080: more than the target SM config's 8 KiB"),
  ("GH100", {"PROGRAM_ADDRESS_LOWER": 0x540}, r"PROGRAM_ADDRESS_LOWER = 0x540: the program address must be 128-byte aligned"),
  ("GA100", {"PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED": 1}, r"the prefetch does not start at the program"),
  ("GH100", {"CONSTANT_BUFFER_VALID_0": 0, "CONSTANT_BUFFER_SIZE_SHIFTED4_0": 0, "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0": 0,
             "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0": 0}, r"constant buffer 0 \(the kernel's parameters\) is not valid"),
  ("GA100", {"CONSTANT_BUFFER_VALID_0": 0}, r"CONSTANT_BUFFER_ADDR_LOWER_0 = .*constant buffer 0 is not valid but has an address"),
  ("GA102", {"CONSTANT_BUFFER_ADDR_LOWER_0": 0x20}, r"CONSTANT_BUFFER_ADDR_LOWER_0 = 0x20: constant buffers are 64-byte aligned"),
  ("GH100", {"RELEASE_SEMAPHORE1_PAYLOAD_LOWER": 5}, r"RELEASE_SEMAPHORE1_PAYLOAD_LOWER = 0x5: release 1 is not enabled"),
  ("GA100", {"RELEASE2_ENABLE": 1, "RELEASE2_STRUCTURE_SIZE": 3}, r"RELEASE2_STRUCTURE_SIZE = 0x3: not a structure size"),
  ("GH100", {"RELEASE_ENABLE_0": 1, "RELEASE_STRUCTURE_SIZE_0": 1, "RELEASE_PAYLOAD64B_0": 1}, r"a 64-bit payload does not fit a one-word"),
  ("GA102", {"RELEASE0_ENABLE": 1, "RELEASE0_TRAP_TYPE": 2}, r"RELEASE0_TRAP_TYPE = 0x2: conditional traps are not modelled"),
  ("GA100", {"RELEASE1_ENABLE": 1, "RELEASE1_NON_BLOCKING_INTR_TYPE": 2}, r"RELEASE1_NON_BLOCKING_INTR_TYPE = 0x2: conditional traps"),
  ("GH100", {"RELEASE_ENABLE_2": 1, "RELEASE_SEMAPHORE2_ADDR_LOWER": 0x1008}, r"ADDR_LOWER = 0x1008: a 4-word semaphore is 16-byte aligned"),
  ("GH100", {"CWD_MEMBAR_TYPE": 2}, r"CWD_MEMBAR_TYPE = 0x2: not one of the values \[0, 1, 3\]"),
])
def test_each_acted_on_field_is_checked(chip, fields, message):
  L, q = good(chip, **fields)
  with pytest.raises(QMDError, match=message): run(chip, q)


@pytest.mark.parametrize("chip", CLASSES)
def test_bits_no_field_covers_must_be_zero(chip):
  L, q = good(chip)
  gap = next(b for b in range(L.bits) if not L.used >> b & 1)
  with pytest.raises(QMDError, match="bits .* that no field covers are set"): run(chip, q | 1 << gap)


# --- launches through a device: the model's checks that need memory, and what a launch writes

@pytest.fixture(params=["GH100", "GA100"])
def dev(request):
  d = NVDevice(f"MOCK+NV ({request.param})", NVGPU(kernel_interface(mock="nv", chip=request.param)))
  d.chip = request.param
  yield d
  d.close()


@pytest.fixture
def vadd(dev):
  if HAVE_NVRTC: pytest.skip(HAVE_NVRTC)
  return dev.program("vadd", image.pack(nvrtc.cubin(VADD, dev.arch), nvrtc.ptx(VADD, dev.arch)))


def host_of(dev):
  model = dev.gpu.k.model
  return model.hosts[model.rm.channels[dev.compute_ring.ch.token].chid]


def launch(dev, prg, mutate=None, extra=(), n=64):
  """vadd of n floats (ones) onto themselves; `mutate(args)` edits the arguments (cb0, QMD) before it is submitted and
  `extra` are methods after it. -> (the buffer, the value the timeline reaches when done)."""
  buf = dev.alloc(4 * n)
  buf.copyin(np.ones(n, np.float32).data)
  args = prg.fill_kernargs([buf, buf, buf], [n], (1,), (n,))
  if mutate: mutate(args)
  q = dev.compute_queue().wait(dev.timeline, dev.timeline_value - 1).exec(prg, args, (1,), (n,))
  q.words += list(extra)
  q.signal(dev.timeline, v := dev.next_timeline()).submit()
  return buf, v


def fails(dev, prg, match: str, **kw) -> None:
  _, v = launch(dev, prg, **kw)
  with pytest.raises(DeviceFault, match="the compute channel stopped"): dev.timeline.wait(v, timeout_ms=120000)
  assert __import__("re").search(match, host_of(dev).error), host_of(dev).error


def qmd_set(args, **fields):
  """Change fields of the QMD in a launch's arguments."""
  L = LAYOUTS[args.prg.device.gpu.compute_class]
  o = args.prg.qmd_offset
  q = int.from_bytes(args.view[o:o + L.nbytes], "little")
  for k, v in fields.items(): q = L.set(q, k, v)
  args.view[o:o + L.nbytes] = q.to_bytes(L.nbytes, "little")


def test_a_launch_runs_the_ptx_after_the_cubin(dev, vadd):
  buf, v = launch(dev, vadd)
  dev.timeline.wait(v, timeout_ms=120000)
  np.testing.assert_array_equal(np.frombuffer(buf.copyout(), np.float32), np.full(64, 2, np.float32))
  assert host_of(dev).sub[COMPUTE_SUB].launches == 1


def test_cb0_must_hold_the_qmds_block_and_grid_dims(dev, vadd):
  fails(dev, vadd, r"blockDim \(0, 1, 1\) and gridDim \(1, 1, 1\) at 0x0-0x14, the QMD launches \(64, 1, 1\)",
        mutate=lambda a: a.view.__setitem__(slice(0, 4), bytes(4)))


def test_the_hopper_global_memory_descriptor_must_be_zero(dev, vadd):
  if dev.chip != "GH100": pytest.skip("sm_90's cb0 only")
  fails(dev, vadd, r"holds 0x1 at 0x208, the global-memory descriptor", mutate=lambda a: a.view.__setitem__(slice(0x208, 0x209), b"\1"))


def test_shared_memory_must_cover_the_reserved_kilobyte(dev, vadd):
  fails(dev, vadd, r"SHARED_MEMORY_SIZE 0x380 is less than .* plus the 0x400 reserved", mutate=lambda a: qmd_set(a, SHARED_MEMORY_SIZE=0x380))


def test_cb0_must_be_large_enough_for_the_parameters(dev, vadd):
  fails(dev, vadd, r"constant buffer 0 is 256 bytes; kernel vadd's 28 bytes of parameters",
        mutate=lambda a: qmd_set(a, CONSTANT_BUFFER_SIZE_SHIFTED4_0=16))


def test_the_qmd_must_give_the_registers_the_cubin_says_the_sass_uses(dev, vadd):
  f = "REGISTER_COUNT" if dev.chip == "GH100" else "REGISTER_COUNT_V"
  fails(dev, vadd, rf"QMD register count {vadd.kernel.registers - 1} is less than the {vadd.kernel.registers} registers",
        mutate=lambda a: qmd_set(a, **{f: vadd.kernel.registers - 1}))


def test_local_memory_the_qmd_asks_for_must_be_set_up(dev, vadd):
  fails(dev, vadd, r"asks for 4096 bytes of local memory per thread; SET_SHADER_LOCAL_MEMORY_NON_THROTTLED gives None",
        mutate=lambda a: qmd_set(a, SHADER_LOCAL_MEMORY_HIGH_SIZE=4096))


def test_a_program_address_with_no_kernel_there_is_refused(dev, vadd):
  lo = "PROGRAM_ADDRESS_LOWER"
  fails(dev, vadd, r"no \.text\.<kernel> section of the cubin starts at offset", mutate=lambda a: qmd_set(
    a, **{lo: (vadd.grid.program + 128) & 0xFFFFFFFF, "PROGRAM_PREFETCH_SIZE": 0}))


def test_a_kernel_reading_an_unmapped_address_faults_the_channel(dev, vadd):
  po = vadd.kernel.param_offset
  fails(dev, vadd, r"kernel vadd, block \(0, 0, 0\), thread \(0, 0, 0\): read of global address 0x500000000000 is not mapped",
        mutate=lambda a: a.view.__setitem__(slice(po, po + 8), (0x5000_0000_0000).to_bytes(8, "little")))
  n = dev.compute_ring.ch.notifier.view
  assert n.read32(8) == 31 and n.read16(0xE) != 0            # ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT in the notifier


@pytest.mark.parametrize("method,value,message", [
  (0x1234, 0, r"method 0x1234 of compute class .* is not modelled"),
  (nv_compute.NVC6C0_SET_SHADER_LOCAL_MEMORY_A, 1 << 30, r"SET_SHADER_LOCAL_MEMORY_A = 0x40000000 sets bits 0x40000000 outside its fields"),
  (nv_compute.NVC6C0_SEND_SIGNALING_PCAS2_B, 6, r"PCAS_ACTION 0x6 is not modelled"),
  (nv_compute.NVC6C0_SEND_SIGNALING_PCAS2_B, 0x102, r"(0x102: only PCAS_ACTION \(3:0\) is modelled|bits 0x100 outside its fields)"),
])
def test_compute_methods_are_checked_against_the_class_header(dev, vadd, method, value, message):
  fails(dev, vadd, message, extra=methods(COMPUTE_SUB, method, value))


@pytest.mark.parametrize("words,p64,reduction,want", [
  ("ONE_WORD", 0, None, (0x1111_2222, 0)), ("TWO_WORDS", 1, None, (0x3333_4444_1111_2222, 0)),
  ("FOUR_WORDS", 1, None, (0x3333_4444_1111_2222, "ts")), ("ONE_WORD", 0, ("RED_ADD", 7), (0x1111_2229, 0)),
  ("ONE_WORD", 0, ("RED_INC", 5), (6, 0)), ("ONE_WORD", 0, ("RED_INC", 0x1111_2222), (0, 0)), ("ONE_WORD", 0, ("RED_MAX", 3), (0x1111_2222, 0)),
])
def test_release_semaphores_are_written_when_the_grid_completes(dev, vadd, words, p64, reduction, want):
  sig = dev.new_signal(0)
  L = LAYOUTS[dev.gpu.compute_class]
  v04 = L is qmdlayout.V04_HOPPER
  name = (lambda f: {"enable": "RELEASE_ENABLE_0", "lo": "RELEASE_SEMAPHORE0_ADDR_LOWER", "hi": "RELEASE_SEMAPHORE0_ADDR_UPPER",
                     "plo": "RELEASE_SEMAPHORE0_PAYLOAD_LOWER", "phi": "RELEASE_SEMAPHORE0_PAYLOAD_UPPER", "p64": "RELEASE_PAYLOAD64B_0",
                     "size": "RELEASE_STRUCTURE_SIZE_0", "red": "RELEASE_REDUCTION_ENABLE_0", "op": "RELEASE_REDUCTION_OP_0"}[f]) if v04 else \
         (lambda f: {"enable": "RELEASE0_ENABLE", "lo": "RELEASE0_ADDRESS_LOWER", "hi": "RELEASE0_ADDRESS_UPPER", "plo": "RELEASE0_PAYLOAD_LOWER",
                     "phi": "RELEASE0_PAYLOAD_UPPER", "p64": "RELEASE0_PAYLOAD64B", "size": "RELEASE0_STRUCTURE_SIZE",
                     "red": "RELEASE0_REDUCTION_ENABLE", "op": "RELEASE0_REDUCTION_OP"}[f])
  size = L.value(f"{name('size').removesuffix('_0')}_SEMAPHORE_{words}")
  f = {name("enable"): 1, name("lo"): sig.va & 0xFFFFFFFF, name("hi"): sig.va >> 32, name("plo"): 0x1111_2222,
       name("phi"): 0x3333_4444 if p64 else 0, name("p64"): p64, name("size"): size}
  if reduction:
    sig.value = reduction[1]
    f.update({name("red"): 1, name("op"): L.value(f"{name('op').removesuffix('_0')}_{reduction[0]}")})
  _, v = launch(dev, vadd, mutate=lambda a: qmd_set(a, **f))
  dev.timeline.wait(v, timeout_ms=120000)
  assert sig.value == want[0]
  assert (sig._mem[1] > 0) == (want[1] == "ts")
