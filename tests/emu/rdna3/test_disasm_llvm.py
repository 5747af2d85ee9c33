"""The disassembler against LLVM 22 itself: every opcode of every encoding with varied operands, plus random words.
For each instruction LLVM decodes, our size and text must be identical. LLVM runs in a child process (it can crash
on odd encodings; autogen.rdna3.llvm.disasm_batch isolates those).

Default run: a reduced sweep (a few variants per opcode + 5k random words). RDNA3_FULL_SWEEP=1 runs the full one
(200 variants per opcode + 200k random words) and prints the counts."""
import os, random, struct
import pytest
from autogen.rdna3 import llvm
from autogen.rdna3.encodings import family
from emu.rdna3.decode import DecodeError, decode
from emu.rdna3.disasm import format_inst

pytestmark = pytest.mark.skipif(not llvm.available(), reason="libLLVM 22 not installed (scripts/setup.sh)")
FULL = os.environ.get("RDNA3_FULL_SWEEP") == "1"
SKIP_FAMILIES = {"MIMG"}   # graphics-only image instructions: not decoded (see emu/rdna3/decode.py)


def compare(words: list[bytes]) -> tuple[int, int, list[str]]:
  """(words LLVM decodes, words we print identically, first mismatches)."""
  ref = llvm.disasm_batch(words)
  decoded = same = 0
  bad = []
  for w, (n, text) in zip(words, ref):
    if n <= 0 or family(struct.unpack_from("<I", w)[0]) in SKIP_FAMILIES: continue
    decoded += 1
    try:
      inst = decode(w)
      ours, size = format_inst(inst), inst.size
    except DecodeError as e: ours, size = f"DecodeError: {e}", 0
    if (ours, size) == (text, n): same += 1
    elif len(bad) < 20: bad.append(f"{w[:n].hex()}: llvm {text!r} ({n} bytes) / ours {ours!r} ({size} bytes)")
  return decoded, same, bad


def test_every_opcode_matches_llvm():
  words = llvm.sample_words(random.Random(1), 200 if FULL else 4)
  decoded, same, bad = compare(words)
  print(f"rdna3 disasm sweep: {len(words)} words, {decoded} decoded by LLVM, {decoded - same} mismatches")
  assert decoded > len(words) // 3 and not bad, "\n".join(bad)


def test_random_words_match_llvm():
  rng = random.Random(2)
  words = [struct.pack("<4I", *(rng.getrandbits(32) for _ in range(4))) for _ in range(200_000 if FULL else 5_000)]
  decoded, same, bad = compare(words)
  print(f"rdna3 disasm random: {len(words)} words, {decoded} decoded by LLVM, {decoded - same} mismatches")
  assert decoded > len(words) // 3 and not bad, "\n".join(bad)
