"""RDNA3 decoder / disassembler throughput, against LLVM 22's own disassembler (libLLVM in-process) on the same
instructions. One JSON line per figure. Usage: python bench/amdgcn_isa.py [repeats]"""
import json, random, sys, time
from autogen.amdgcn import llvm
from emu.amdgcn.decode import decode
from emu.amdgcn.disasm import format_inst


def program(n: int) -> bytes:
  """n instructions LLVM decodes (random operands, every family but MIMG), back to back."""
  dis, rng, out = llvm.Disassembler(), random.Random(7), []
  words = llvm.sample_words(rng, 2)
  while len(out) < n:
    w = words[rng.randrange(len(words))]
    size, _ = dis(w)
    if size and w[3] >> 2 != 0b111100: out.append(w[:size])
  return b"".join(out)


def bench(name: str, fn, code: bytes, count: int, repeats: int) -> float:
  best = min(_timed(fn, code) for _ in range(repeats))
  print(json.dumps({"bench": name, "instructions": count, "seconds": round(best, 4), "insts_per_s": round(count / best)}))
  return best


def _timed(fn, code: bytes) -> float:
  t = time.perf_counter()
  fn(code)
  return time.perf_counter() - t


def walk(step):
  def run(code: bytes) -> None:
    off = 0
    while off < len(code): off += step(code, off)
  return run


if __name__ == "__main__":
  repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
  code = program(20000)
  dis = llvm.Disassembler()
  t_llvm = bench("llvm22_disasm", walk(lambda c, o: dis(c[o:o + 16])[0]), code, 20000, repeats)
  t_dec = bench("rdna3_decode", walk(lambda c, o: decode(c, o).size), code, 20000, repeats)
  t_dis = bench("rdna3_disasm", walk(lambda c, o: (i := decode(c, o)) and (format_inst(i), i.size)[1]), code, 20000, repeats)
  print(json.dumps({"bench": "rdna3_decode_vs_llvm", "speedup": round(t_llvm / t_dec, 2)}))
  print(json.dumps({"bench": "rdna3_disasm_vs_llvm", "speedup": round(t_llvm / t_dis, 2)}))
