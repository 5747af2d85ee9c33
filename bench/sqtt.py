"""Thread tracing on the emulated GPU and the SQTT decoder (issue 31): (a) a 64k-float vector add compiled by clang-22
run untraced, with the shader core's trace records (emu/amdgcn/trace.py), and with the GPU model's timing model and
gfx11 token writer on top (emu/amdgpu/sqtt.py, every wave of SE 0 traced in detail): time per dispatch and the ratio to
the untraced run of the same process; (b) the decoder (drivers/amd/sqtt) on the token stream (a) wrote: tokens per
second of the token reader and of wave assembly. Prints one JSON line per figure.
Usage: python bench/sqtt.py [repeats]"""
import json, os, struct, sys
import numpy as np
from figures import best_with

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "emu", "amdgcn"))
from exec_helpers import compile_cl, CodeObject, buffer, VADD                  # noqa: E402 (clang-22)
from emu.amdgcn import Memory                                                 # noqa: E402
from emu.amdgcn.trace import Trace                                            # noqa: E402
from emu.amdgpu.sqtt import schedule, shape, Tokens, INST_OP, LAYOUT          # noqa: E402
from emu.amdgpu.chips import NAVI31                                           # noqa: E402
from drivers.amd.sqtt import gfx11, decode                                    # noqa: E402


def emit(name: str, value: float, unit: str, **extra) -> None:
  print(json.dumps({"bench": f"sqtt/{name}", "value": round(value, 4), "unit": unit, **extra}), flush=True)


def tokens(trace: Trace) -> bytes:
  """Every wave of the dispatch as one SE's detailed stream (the heaviest a trace gets)."""
  waves, _ = schedule(trace.runs, trace.insts, shape(NAVI31.gc_info))
  events = []
  for n, (_, _, _, _, slot, t0, t1, issues) in enumerate(waves):
    events += [(t0, n, 0, "WAVESTART", dict(wave=slot % 16)), (t1, n, 2, "WAVEEND", dict(wave=slot % 16))]
    events += [(t, n, 1, tok, {"wave": slot % 16, "op": INST_OP[cls]} if tok == "INST" else {"wave": slot % 16})
               for t, tok, cls, _ in issues if tok != "END"]
  w = Tokens()
  w.put("LAYOUT_HEADER", layout=LAYOUT)
  for t, _, _, name, f in sorted(events, key=lambda e: e[:3]): w.put(name, t, **f)
  return w.data()


def main() -> None:
  repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
  n = 65536
  mem = Memory()
  co = CodeObject(mem, compile_cl(VADD))
  a, b = np.random.default_rng(0).standard_normal((2, n)).astype(np.float32)
  pa, pb, pc = buffer(mem, a), buffer(mem, b), mem.alloc(4 * n)
  args = struct.pack("<QQQi", pa, pb, pc, n)
  run = lambda trace=None: co.kernel("vadd", (n // 64, 1, 1), (64, 1, 1), args, trace=trace)
  run()
  t_off, st = best_with(run, repeats)
  t_rec, _ = best_with(lambda: run(Trace()), repeats)
  def full():
    tr = Trace()
    run(tr)
    return tokens(tr)
  t_full, data = best_with(full, repeats)
  emit("vadd_64k_untraced_seconds", t_off, "s", wave_instructions=st.wave_instructions)
  emit("vadd_64k_records_vs_untraced", t_rec / t_off, "x")
  emit("vadd_64k_tokens_vs_untraced", t_full / t_off, "x", trace_bytes=len(data))
  ntok = sum(1 for _ in gfx11.FORMAT.tokens(data))
  t_tok, _ = best_with(lambda: sum(1 for _ in gfx11.FORMAT.tokens(data)), repeats)
  t_dec, _ = best_with(lambda: decode(data), repeats)
  emit("decode_tokens_per_s", ntok / t_tok, "tokens/s", tokens=ntok)
  emit("decode_waves_tokens_per_s", ntok / t_dec, "tokens/s")


if __name__ == "__main__":
  main()
