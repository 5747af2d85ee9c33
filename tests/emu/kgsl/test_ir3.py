"""The a6xx ir3 core (emu/kgsl/ir3.py) against independent oracles: its decode against tinymesa's disassembler
(disasm_a3xx) on everything mesa's compiler emits for compute.nir kernels, hand-encoded instructions and whole compiled
kernels against numpy, and its hazard checks against mesa's legalizer: a kernel ir3 legalized runs clean, and deleting
any one of its nops or sync flags is flagged."""
import os, re, subprocess, sys
import numpy as np
import pytest
from autogen.ir3 import disasm, tables
from emu.kgsl.ir3 import Core, HazardError, IR3Error, bits, syntax

pytest.importorskip("tinymesa", reason="the tinymesa wheel is not installed (scripts/setup.sh)")
from compute import Tensor                                   # noqa: E402
from compute.nir import NIRRenderer                          # noqa: E402
from compute.schedule import Kernel, create_schedule         # noqa: E402
from drivers.qcom.compiler import Variant, compile_nir       # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OPC = {cat: {e[0]: opc for opc, e in ops.items()} for cat, ops in tables.OPS.items()}
END = 6 << 55                                         # cat0 end
BASE = 0x10_0000_0000


def T(a): return Tensor(a, device="CPU")


RNG = np.random.default_rng(0)
X, X2 = RNG.standard_normal(100).astype(np.float32), RNG.standard_normal(100).astype(np.float32)
Y = RNG.standard_normal((4, 300)).astype(np.float32)
I = np.arange(-25, 25, dtype=np.int32)
H = np.array([1.5, -2.25, 3.0, 4.5], np.float16)
L = np.array([7, 2**32 + 5, -2**40 - 12345, 10**15, 4000000000, -9, 100, 3], np.int64)
L2 = np.array([1, 3, 7, -1000003, 2**33, 2, -9, 5], np.int64)
KERNELS = {   # name: (tensor of one kernel, numpy reference, tolerance)
  "mad": (lambda: T(X) * 3 + 1, lambda: X * 3 + 1, 0),
  "exp_div": (lambda: T(X).exp() / (T(X2) + 2), lambda: np.exp(X) / (X2 + 2), 1e-5),
  "sqrt_sin": (lambda: (T(X).abs() * 2).sqrt().sin(), lambda: np.sin(np.sqrt(np.abs(X) * 2)), 1e-5),
  "sum": (lambda: T(Y).sum(1), lambda: Y.sum(1), 1e-4),
  "amax": (lambda: T(Y).amax(1), lambda: Y.max(1), 0),
  "int_floordiv_mod": (lambda: T(I) // 3 + T(I) % 7 * T(I), lambda: I // 3 + I % 7 * I, 0),
  # int64 (nir_lower_int64: 32-bit halves, a long division whose ufind_msb needs clz.b of 0 to be -1)
  "int64_floordiv": (lambda: T(L) // T(L2), lambda: L // L2, 0),
  "half": (lambda: T(X).half() * 3, lambda: X.astype(np.float16) * np.float16(3), 0),
  # a preamble (shps/getone/stc/shpe) computes the addresses; the f32 sum lands in a half register by DST_CONV
  "half_sum": (lambda: T(H).sum(), lambda: H.sum(), 0),
  "uint8_wraps": (lambda: T(np.arange(30, dtype=np.uint8)) + 250, lambda: np.arange(30, dtype=np.uint8) + np.uint8(250), 0),
  "bool": (lambda: T(X) < 0.5, lambda: X < 0.5, 0),
  "where_max": (lambda: T(X).where(T(X) > 0, T(X2)).maximum(T(X2)), lambda: np.maximum(np.where(X > 0, X, X2), X2), 0),
}


def kernel(t: Tensor) -> Kernel:
  [k] = [k for k in create_schedule([t.lazydata.base]) if isinstance(k, Kernel)]
  return k


def words(v: Variant) -> list[int]: return [int.from_bytes(v.code[i:i + 8], "little") for i in range(0, len(v.code), 8)]


def run_variant(v: Variant, arrays: list[np.ndarray], groups: int, local: int, code: list[int] | None = None) -> list[np.ndarray]:
  """Run a variant on the core alone, as the dispatch sets it up: the buffers at addresses of their own, UBO 0 (their
  addresses) and the immediates in the const file, the local and workgroup ids in the variant's registers."""
  mem = {BASE + i * 0x100_0000: bytearray(np.ascontiguousarray(a).tobytes()) for i, a in enumerate(arrays)}
  def m(va: int, n: int, write: bool) -> memoryview:
    for base, buf in mem.items():
      if base <= va and va + n <= base + len(buf): return memoryview(buf)[va - base:va - base + n]
    raise IR3Error(f"unmapped [{va:#x}, +{n})")
  consts = np.zeros(v.constlen * 4, np.uint32)
  args = np.zeros(64, np.uint32)
  args[:2 * len(mem)] = np.array(list(mem), np.uint64).view(np.uint32)
  for _, start, end, off in v.ubo_ranges:
    n = min((end - start) // 4, len(consts) - off // 4)
    consts[off // 4:off // 4 + n] = args[start // 4:start // 4 + n]
  imms = np.array(v.imms, np.uint32)[:max(0, len(consts) - 4 * v.imm_offset)]
  consts[4 * v.imm_offset:4 * v.imm_offset + len(imms)] = imms
  n, every = groups * local, np.ones(groups * local, bool)
  core = Core(6, n, consts, m)
  for r, val in ((v.local_id_reg, np.arange(n) % local), (v.workgroup_id_reg, np.arange(n) // local)):
    core.write(r, False, val.astype(np.uint32), every)
    for k in (1, 2): core.write(r + k, False, np.zeros(n, np.uint32), every)
  core.run(code if code is not None else words(v), v.max_reg + 1)
  return [np.frombuffer(bytes(buf), a.dtype) for buf, a in zip(mem.values(), arrays)]


def compiled(name: str) -> tuple[Kernel, Variant, object]:
  k = kernel(KERNELS[name][0]())
  spec = NIRRenderer().render(k)
  return k, compile_nir(spec.src, 630, spec.name), spec


def inputs(k: Kernel) -> list[np.ndarray]:
  out = np.zeros(k.bufs[0].size, np.uint8 if k.bufs[0].dtype.name == "bool" else k.bufs[0].dtype.np)
  return [out] + [np.frombuffer(b.buffer.hcq.copyout(), b.dtype.np)[:b.size].copy() for b in k.bufs[1:]]


@pytest.mark.parametrize("name", list(KERNELS))
def test_compiled_kernels_decode_as_the_disassembler_says_and_compute_what_numpy_does(name):
  k, v, spec = compiled(name)
  code = words(v)
  for w, text in zip(code, disasm.disasm(code, 630)):
    mine = syntax(w)
    assert text == mine or text.startswith((mine + ",", mine + " ")), (mine, text)
  out = run_variant(v, inputs(k), spec.global_size[0], spec.local_size[0])[0]
  want = KERNELS[name][1]()
  got = out.view(bool) if want.dtype == bool else out
  if KERNELS[name][2]: np.testing.assert_allclose(got, want, rtol=KERNELS[name][2], atol=KERNELS[name][2])
  else: np.testing.assert_array_equal(got, want)


def mutations(code: list[int]):
  """(what, code) for each nop cycle or sync flag of the executed code (before `end`) deleted alone; a deleted `nop`
  moves the instructions after it up, and branches across it are re-aimed."""
  end = next(i for i, w in enumerate(code) if w >> 61 == 0 and bits(w, 58, 55) == 6 and not bits(w, 49, 49))
  def put(i, w): return code[:i] + [w] + code[i + 1:]
  for i, w in enumerate(code[:end]):
    cat = w >> 61
    if bits(w, 44, 44) and cat <= 4: yield f"(ss) at {i}", put(i, w & ~(1 << 44))
    if bits(w, 60, 60): yield f"(sy) at {i}", put(i, w & ~(1 << 60))
    if cat in (2, 3) and not bits(w, 41, 40):
      hi = 51 if cat == 2 else 15
      if n := bits(w, 43, 43) | bits(w, hi, hi) << 1:
        yield f"a (nop) at {i}", put(i, w & ~(1 << 43 | 1 << hi) | ((n - 1) & 1) << 43 | ((n - 1) >> 1) << hi)
    if cat == 0 and bits(w, 58, 55) == 0 and not bits(w, 49, 49):
      if bits(w, 42, 40): yield f"a repeat of the nop at {i}", put(i, w - (1 << 40))
      else:
        out = []
        for j, x in enumerate(code):
          if j == i: continue
          if x >> 61 == 0 and bits(x, 58, 55) in (1, 2) and not bits(x, 49, 49):
            t = j + (bits(x, 31, 0) ^ 1 << 31) - (1 << 31)
            x = x & ~0xFFFFFFFF | ((t - (t > i)) - (j - (j > i))) & 0xFFFFFFFF
          out.append(x)
        yield f"the nop at {i}", out


@pytest.mark.parametrize("name", ["exp_div", "sum", "int_floordiv_mod", "half", "bool", "where_max", "half_sum"])
def test_deleting_any_nop_or_sync_flag_mesa_placed_is_a_hazard(name):
  k, v, spec = compiled(name)
  run_variant(v, inputs(k), spec.global_size[0], spec.local_size[0])       # as legalized: clean
  count = 0
  for what, code in mutations(words(v)):
    with pytest.raises(HazardError, match=r"pc \d+: .*(needs|before \((ss|sy)\)|WAR|without \(ss\)\(sy\))"):
      run_variant(v, inputs(k), spec.global_size[0], spec.local_size[0], code)
      pytest.fail(f"deleting {what} went unnoticed")
    count += 1
  assert count >= 3


# --- hand-encoded instructions
def reg(name: str) -> int:
  n, c = name[1:].split(".")
  return int(n) << 2 | "xyzw".index(c)


def cat2(name: str, dst: str, src1: int | str, src2: int | str = 0, absneg1: int = 0, cond: int = 0) -> int:
  """A full-precision cat2 instruction; a str source is a register, an int an immediate (13:11 = 0b100)."""
  enc = lambda s: reg(s) if isinstance(s, str) else 0b100 << 11 | s & 0x7FF
  return 2 << 61 | OPC[2][name] << 53 | 1 << 52 | cond << 48 | reg(dst) << 32 | enc(src2) << 16 | absneg1 << 14 | enc(src1)


def run_words(code: list[int], a: np.ndarray, b: np.ndarray) -> Core:
  core = Core(6, len(a), np.zeros(4, np.uint32), lambda va, n, w: (_ for _ in ()).throw(IR3Error("no memory")))
  every = np.ones(len(a), bool)
  core.write(reg("r1.x"), False, a, every)
  core.write(reg("r1.y"), False, b, every)
  core.run(code)
  return core


CASES = [  # (instruction, what mesa's disassembler prints, numpy reference of (a, b))
  (cat2("add.f", "r0.w", "r1.x", "r1.y"), "add.f r0.w, r1.x, r1.y", lambda a, b: (a.view(np.float32) + b.view(np.float32)).view(np.uint32)),
  (cat2("add.f", "r0.w", "r1.x", "r1.y", absneg1=1), "add.f r0.w, (neg)r1.x, r1.y",
   lambda a, b: (b.view(np.float32) - a.view(np.float32)).view(np.uint32)),
  (cat2("add.s", "r0.w", "r1.x", -5), "add.s r0.w, r1.x, -5", lambda a, b: a + np.uint32(2**32 - 5)),
  (cat2("min.s", "r0.w", "r1.x", "r1.y"), "min.s r0.w, r1.x, r1.y", lambda a, b: np.minimum(a.view(np.int32), b.view(np.int32)).view(np.uint32)),
  (cat2("ashr.b", "r0.w", "r1.x", 31), "ashr.b r0.w, r1.x, 31", lambda a, b: (a.view(np.int32) >> 31).view(np.uint32)),
  (cat2("shl.b", "r0.w", "r1.x", "r1.y"), "shl.b r0.w, r1.x, r1.y", lambda a, b: a << (b & np.uint32(31))),
  # mull.u multiplies the low 16 bits: ir3_compiler_nir.c builds a 32-bit imul as mull.u + madsh.m16 twice
  (cat2("mull.u", "r0.w", "r1.x", "r1.y"), "mull.u r0.w, r1.x, r1.y", lambda a, b: (a & np.uint32(0xFFFF)) * (b & np.uint32(0xFFFF))),
  (cat2("cmps.s", "r0.w", "r1.x", "r1.y", cond=3), "cmps.s.ge r0.w, r1.x, r1.y",
   lambda a, b: (a.view(np.int32) >= b.view(np.int32)).astype(np.uint32)),
]


@pytest.mark.parametrize("word,text,ref", CASES, ids=[c[1] for c in CASES])
def test_hand_encoded_cat2_matches_the_disassembler_and_numpy(word, text, ref):
  assert disasm.disasm([word]) == [text] and syntax(word) == text.split(",")[0]
  rng = np.random.default_rng(len(text))
  a, b = rng.integers(0, 2**32, 64, dtype=np.uint32), rng.integers(0, 2**32, 64, dtype=np.uint32)
  if ".f" in text: a, b = (rng.standard_normal(64).astype(np.float32).view(np.uint32) for _ in range(2))
  core = run_words([word, END], a, b)
  np.testing.assert_array_equal(core.read(reg("r0.w"), False), ref(a, b))


def test_a_read_three_cycles_after_an_alu_write_is_clean_and_two_is_a_hazard():
  a = np.arange(8, dtype=np.uint32)
  nop2 = 1 << 51                                      # (nop2): SRC2_R with REPEAT 0
  run_words([cat2("add.u", "r0.x", "r1.x", 1) | nop2 | 1 << 43, cat2("add.u", "r0.y", "r0.x", 1), END], a, a)
  with pytest.raises(HazardError, match=r"pc 1: add.u reads r0.x \(low half\) 2 cycles after .* alu->alu needs 3"):
    run_words([cat2("add.u", "r0.x", "r1.x", 1) | nop2, cat2("add.u", "r0.y", "r0.x", 1), END], a, a)


def test_repeat_steps_the_registers_marked_r_and_sat_clamps():
  """(rpt1) add.u r0.x, (r)r1.x, 1 runs twice: r0.x = r1.x + 1, r0.y = r1.y + 1; (sat)add.u stops at 2^32 - 1."""
  a, b = np.array([5, 0xFFFFFFFF], np.uint32), np.array([7, 3], np.uint32)
  core = run_words([cat2("add.u", "r0.x", "r1.x", 1) | 1 << 40 | 1 << 43, END], a, b)
  np.testing.assert_array_equal(core.read(reg("r0.x"), False), a + np.uint32(1))
  np.testing.assert_array_equal(core.read(reg("r0.y"), False), b + np.uint32(1))
  core = run_words([cat2("add.u", "r0.x", "r1.x", "r1.y") | 1 << 42, END], a, b)
  np.testing.assert_array_equal(core.read(reg("r0.x"), False), [12, 0xFFFFFFFF])
  assert disasm.disasm([cat2("add.u", "r0.x", "r1.x", 1) | 1 << 40 | 1 << 43]) == ["(rpt1)add.u r0.x, (r)r1.x, 1"]


@pytest.mark.parametrize("word,why", [
  (3 << 61 | 0xE << 55, "sad.s16 .* is not modelled"),
  (5 << 61, "isam.* is not modelled"),
  (4 << 61 | 1 << 52 | 1 << 40, "rcp .* sets REPEAT"),
  (cat2("and.b", "r0.x", "r1.x", "r1.y") | 1 << 42, r"and.b .* with \(sat\) is not modelled"),
  (cat2("add.u", "r0.x", "r1.x", "r1.y") | 0b001 << 11, "relative source"),
  (cat2("add.u", "r0.x", "r1.x", "r1.y") | 0xF4 << 32, "a0.x"),
  (cat2("add.u", "r20.x", "r1.x", "r1.y"), "beyond the full register footprint"),
])
def test_unmodelled_instructions_and_fields_are_named(word, why):
  with pytest.raises(IR3Error, match=why):
    core = Core(6, 2, np.zeros(4, np.uint32), lambda va, n, w: memoryview(b""))
    core.run([word, END], footprint=8)


def test_code_that_runs_off_its_end_is_an_error():
  with pytest.raises(IR3Error, match="outside the program"): Core(6, 1, np.zeros(4, np.uint32), lambda *a: memoryview(b"")).run([0, 0])


def test_committed_tables_match_regeneration(tmp_path):
  if disasm.tinymesa_version() != tables.TINYMESA_VERSION:
    pytest.skip(f"tables were swept from tinymesa {tables.TINYMESA_VERSION}, this machine has {disasm.tinymesa_version()}")
  out = tmp_path / "tables.py"
  subprocess.run([sys.executable, "-m", "autogen.ir3", str(out)], cwd=ROOT, check=True, capture_output=True, timeout=300)
  with open(os.path.join(ROOT, "autogen", "ir3", "tables.py")) as f: assert out.read_text() == f.read()


def test_tables_cover_the_alu_categories():
  assert set(tables.OPS) == set(range(8)) and tables.OPC_FIELDS[2] == (58, 53)
  assert tables.OPS[6][0][0] == "ldg.u32" and tables.OPS[6][3][0] == "stg.u32" and tables.OPS[3][7][0] == "mad.f32"
  assert re.fullmatch(r"[a-z0-9.]+", tables.OPS[4][0][0])
