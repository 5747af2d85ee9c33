"""The disassembler against LLVM 22 itself: every opcode of every encoding with varied operands, plus random words.
For each instruction LLVM decodes, our size and text must be identical. LLVM runs in a child process (it can crash
on odd encodings; autogen.amdgcn.llvm.disasm_batch isolates those).

Default run: a reduced sweep (a few variants per opcode + 5k random words). RDNA3_FULL_SWEEP=1 runs the full one
(200 variants per opcode + 200k random words) and prints the counts."""
import os, random, struct, subprocess
import pytest
from autogen.amdgcn import llvm
from autogen.amdgcn.gfx11 import encodings
from emu.amdgcn.decode import DecodeError, decode
from emu.amdgcn.disasm import disasm, format_inst
from emu.amdgcn import targets

pytestmark = pytest.mark.skipif(not llvm.available(), reason="libLLVM 22 not installed (scripts/setup.sh)")
FULL = os.environ.get("RDNA3_FULL_SWEEP") == "1"


def llvm_defect(w: bytes) -> bool:
  """Words where LLVM 22's own output is inconsistent, left out of the comparison:
  - v_fma_mixlo/mixhi_f16 DPP16 with dpp_ctrl bit 7 set: LLVM prints a corrupted quad_perm (ctrl 0x80 prints
    [0,0,0,0], 0xc1 'Invalid dpp_ctrl'), while v_fma_mix_f32 and every other DPP op print it right;
  - image ops whose vdata or (non-NSA) vaddr VGPR tuple may run past v255: LLVM prints some of those as v[255:256],
    falls back to another variant for others."""
  w0, w1, w2 = struct.unpack_from("<3I", w)
  if w0 >> 23 == 0x198 and (w0 >> 16) & 0x7F in (0x21, 0x22) and w1 & 0x1FF == 250 and (w2 >> 8) & 0x180 == 0x80: return True
  last_addr = w2 >> 24 if w0 & 1 else w1 & 0xFF   # NSA: the 5th address may be a tuple
  return w0 >> 26 == 0b111100 and ((w1 >> 8) & 0xFF > 250 or last_addr > 243)


def not_decoded_yet(w: bytes, target: str) -> bool:
  """gfx12's VIMAGE / VSAMPLE (bits 31:26 = 0b110100 / 0b111001): not decoded yet; such words must raise DecodeError."""
  return targets.get(target).isa == "gfx12" and struct.unpack_from("<I", w)[0] >> 26 in (0b110100, 0b111001)


def _decodes(w: bytes, target: str) -> bool:
  try: decode(w, 0, target)
  except DecodeError: return False
  return True


def compare(words: list[bytes], what: str, target: str = "gfx1100") -> tuple[int, int, list[str]]:
  """(words LLVM decodes, words we print identically, first mismatches); prints the counts."""
  ref = llvm.disasm_batch(words, target)
  decoded = same = skipped = lenient = 0
  bad = []
  for w, (n, text) in zip(words, ref):
    if n <= 0:
      lenient += _decodes(w, target)
      continue
    if llvm_defect(w):
      skipped += 1
      continue
    if not_decoded_yet(w, target):
      assert not _decodes(w, target), f"{w.hex()}: an image word decodes though images are not modelled for {target}"
      skipped += 1
      continue
    decoded += 1
    try:
      inst = decode(w, 0, target)
      ours, size = format_inst(inst), inst.size
    except DecodeError as e: ours, size = f"DecodeError: {e}", 0
    if (ours, size) == (text, n): same += 1
    elif len(bad) < 20: bad.append(f"{w[:n].hex()}: llvm {text!r} ({n} bytes) / ours {ours!r} ({size} bytes)")
  print(f"rdna3 disasm {target} {what}: {len(words)} words, {decoded} decoded by LLVM and compared, {decoded - same} mismatches; "
        f"{skipped} left out (llvm_defect, not_decoded_yet); {lenient} of the words LLVM rejects still decode here")
  return decoded, same, bad


@pytest.mark.parametrize("target", llvm.TARGETS)
def test_every_opcode_matches_llvm(target):
  words = llvm.sample_words(random.Random(1), 200 if FULL else 4 if target == "gfx1100" else 1, target)
  decoded, same, bad = compare(words, "sweep", target)
  assert decoded > len(words) // 3 and not bad, "\n".join(bad)


@pytest.mark.parametrize("target", llvm.TARGETS)
def test_random_words_match_llvm(target):
  rng = random.Random(2)
  words = [struct.pack("<4I", *(rng.getrandbits(32) for _ in range(4))) for _ in range(200_000 if FULL else 5_000 if target == "gfx1100" else 1_000)]
  decoded, same, bad = compare(words, "random", target)
  assert decoded > len(words) // 3 and not bad, "\n".join(bad)


def test_scalar_float_opcodes_match_llvm_on_rdna35_only():
  """Every RDNA3.5 scalar float opcode with varied operands: LLVM gfx1150 and gfx1151 print what we print; gfx1100
  (LLVM and we alike) rejects them."""
  from autogen.amdgcn.gfx11.tables import TARGET_OPS
  rng = random.Random(3)
  words = []
  for fam, ops in TARGET_OPS["gfx1150"].items():
    fields = encodings.FIELDS[fam]
    for opc in ops:
      for _ in range(40 if FULL else 8):
        ws = [encodings.PREFIX[fam], 0, rng.choice((0x3F800000, 0x3C00, 0x12345678)), 0]
        for name, f in fields.items(): encodings.put(ws, f, opc if name == "op" else rng.getrandbits(f[2]))
        words.append(struct.pack("<4I", *ws))
  for target in ("gfx1150", "gfx1151"):
    decoded, same, bad = compare(words, "scalar float", target)
    assert decoded > len(words) // 2 and not bad, "\n".join(bad)
  assert all(n <= 0 for n, _ in llvm.disasm_batch(words)) and not any(_decodes(w, "gfx1100") for w in words)


KERNEL = r"""
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void k(__global float *a, __global const float *b, __global half *h, __global int *c, int n, float s) {
  __local float tile[64];
  int i = get_global_id(0), l = get_local_id(0);
  tile[l] = b[i] * s;
  barrier(CLK_LOCAL_MEM_FENCE);
  float acc = 0.0f;
  for (int j = 0; j < n; j++) acc = fma(tile[(l + j) & 63], a[j], acc);
  a[i] = native_sqrt(acc) + native_exp2(acc) / (1.0f + fabs(acc));
  h[i] = (half)acc * h[i] + (half)1.5f;
  c[i] = atomic_add(&c[0], (int)acc) ^ (i >> 3) + (int)s;
  double d = (double)acc * 3.0;
  if (d > 10.0) a[i + 1] = (float)(d * d);
}
"""


@pytest.mark.parametrize("target", ["gfx1100", "gfx1201"])
def test_compiled_kernel_matches_objdump(tmp_path, target):
  """A clang-22 compiled OpenCL kernel: every line of llvm-objdump's listing, in order."""
  from drivers.hcq.compiler import llvm_tool
  try: clang, objdump, objcopy = llvm_tool("clang"), llvm_tool("llvm-objdump"), llvm_tool("llvm-objcopy")
  except FileNotFoundError as e: pytest.skip(str(e))
  src, obj, text = tmp_path / "k.cl", tmp_path / "k.o", tmp_path / "k.bin"
  src.write_text(KERNEL)
  subprocess.run([clang, "-x", "cl", "-Xclang", "-finclude-default-header", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa",
                  f"-mcpu={target}", "-nogpulib", "-O2", "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
  subprocess.run([objcopy, "-O", "binary", "--only-section=.text", str(obj), str(text)], check=True)
  listing = subprocess.run([objdump, "-d", f"--mcpu={target}", str(obj)], check=True, capture_output=True, text=True).stdout
  ref = [line.split("//")[0].strip() for line in listing.splitlines() if line.startswith("\t")]
  assert len(ref) > 300 and disasm(text.read_bytes(), target) == ref


def test_gfx12_printing_rules_match_llvm():
  """Words that exercise gfx12's own printing (each found differing once): th names per load/store/atomic and scope,
  scale_offset and nv, SMEM offsets with and without soffset, s_prefetch's positional offset, a 96-bit ttmp tuple,
  byte_sel, Lo128 notes on e32 and DPP operands, v_cndmask_b32's DPP |src1, vcc_lo|, VDSDIR waits, export."""
  words = [bytes.fromhex(h).ljust(16, b"\0") for h in (
    "c01620f47e885805", "4f5190f5c3674300", "2fc7b4f5000000dc", "008064f4de17ecc9", "68bc10f50000000c", "5ebb52f673061ca9",
    "e5c00ceefd00f17866f7d863", "000012ee200041000000803f", "c90004eddf007a14a288bd41", "690006edda0021012f9ecfc7",
    "b6000ec417b8648000000000", "1ec011c42b0070006da22d44", "00606cd79201c803", "c5206bd7fb005407",
    "e8a5007e", "fe30fb7c", "ea2853668601aefd", "fa2445034a6b8e9a", "4e388fce", "b85899ce", "0f0800f804030201")]
  for target in ("gfx1200", "gfx1201"):
    decoded, same, bad = compare(words, "gfx12 rules", target)
    assert decoded == len(words) and not bad, "\n".join(bad)
