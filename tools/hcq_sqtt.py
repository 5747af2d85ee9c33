"""hcq-sqtt: decode the SQTT (thread trace) buffers an AMD GPU wrote, one per shader engine.

  hcq-sqtt decode --target gfx1100 [--code-object FILE [--base ADDR] [--kernel NAME]] [--unit SA,WGP,SIMD] SE0.bin [SE1.bin ...] [--json]
      the waves of each buffer (file i is shader engine i): where each ran, its start and end, and each instruction's
      issue time and stall (with the code object: its PC and disassembly; --base is the address it was loaded at)
  hcq-sqtt summary (same arguments, no --json)
      per instruction: how often it issued, mean and max stall (RGP's instruction timing view)
  hcq-sqtt decode|summary DIR
      a launch HCQ_PROFILE + HCQ_SQTT saved (trace.json.sqtt/<n>-<kernel>/: its meta.json gives the rest)

--unit names the SIMD whose waves' instructions the trace holds (SQ_THREAD_TRACE_MASK SA_SEL, WGP_SEL, SIMD_SEL).
"""
from __future__ import annotations
import argparse, glob, json, os, sys
from collections import defaultdict

from tools.cli import add_version, run, UserError
from drivers.amd.sqtt import Code, Wave, decode, map_code


def from_dir(args: argparse.Namespace) -> None:
  """Fill the arguments from a saved launch's directory (drivers/amd/profiler.py writes it)."""
  d = args.buffers[0]
  try:
    with open(os.path.join(d, "meta.json")) as f: meta = json.load(f)
    args.target, args.base, args.kernel, args.unit = meta["target"], meta["base"], meta["kernel"], ",".join(map(str, meta["unit"]))
  except (OSError, ValueError, KeyError, TypeError) as e: raise UserError(f"{d}: not a saved trace (its meta.json: {e})") from None
  args.code_object = os.path.join(d, "code.hsaco")
  args.buffers = sorted(glob.glob(os.path.join(d, "se*.bin")), key=lambda p: int(os.path.basename(p)[2:-4]))


def load(args: argparse.Namespace) -> list[Wave]:
  if len(args.buffers) == 1 and os.path.isdir(args.buffers[0]): from_dir(args)
  if args.target is None: raise UserError("give --target (e.g. gfx1100), or a saved trace's directory")
  try: unit = tuple(int(x, 0) for x in args.unit.split(","))
  except ValueError: unit = ()
  if len(unit) != 3: raise UserError(f"--unit {args.unit!r}: give SA,WGP,SIMD (e.g. 0,0,0)")
  code = None
  if args.code_object:
    with open(args.code_object, "rb") as f: code = Code.from_code_object(f.read(), args.base, args.kernel)
  waves: list[Wave] = []
  for se, path in enumerate(args.buffers):
    with open(path, "rb") as f: ws = decode(f.read(), se, args.target, unit)   # type: ignore[arg-type]
    if code is not None: map_code(ws, code)
    waves += ws
  return waves


def decode_cmd(args: argparse.Namespace) -> int:
  waves = load(args)
  if args.json:
    json.dump([w.json() for w in waves], sys.stdout)
    print()
    return 0
  for w in waves:
    print(f"SE {w.se} SA {w.sa} WGP {w.wgp} SIMD {w.simd} slot {w.slot}: start {w.start} end {w.end}, {len(w.insts)} instructions")
    for i in w.insts:
      where = f"{i.pc:#x}" if i.pc is not None else "?"
      print(f"  {i.time:>10} stall {i.stall:>6}  {where:>12}  {i.text or i.op}")
  return 0


def summary_cmd(args: argparse.Namespace) -> int:
  from rich.console import Console
  from rich.table import Table
  rows: dict[tuple, list[int]] = defaultdict(list)
  for w in load(args):
    for i in w.insts: rows[(i.pc, i.text or i.op)].append(i.stall)
  t = Table(title=f"{sum(map(len, rows.values()))} instruction issues")
  for col in ("PC", "instruction", "hits", "mean stall", "max stall"): t.add_column(col, justify="left" if col == "instruction" else "right")
  for (pc, text), stalls in sorted(rows.items(), key=lambda kv: (kv[0][0] is None, kv[0][0] or 0, kv[0][1])):
    t.add_row("?" if pc is None else f"{pc:#x}", text, str(len(stalls)), f"{sum(stalls) / len(stalls):.1f}", str(max(stalls)))
  Console().print(t)
  return 0


def main(argv: list[str] | None = None) -> int | None:
  p = argparse.ArgumentParser(prog="hcq-sqtt", description="Decode AMD SQTT thread-trace buffers.")
  add_version(p)
  sub = p.add_subparsers(dest="cmd", required=True)
  for name, fn in (("decode", decode_cmd), ("summary", summary_cmd)):
    s = sub.add_parser(name)
    s.add_argument("--target", help="the GPU's target, e.g. gfx1100 (a saved trace's directory says it)")
    s.add_argument("--code-object", metavar="FILE", help="the HSA code object the traced kernel came from")
    s.add_argument("--base", type=lambda v: int(v, 0), default=0, metavar="ADDR", help="the address the code object was loaded at")
    s.add_argument("--kernel", help="the traced kernel (default: the code object's first)")
    s.add_argument("--unit", default="0,0,0", help="SA,WGP,SIMD the instruction tokens come from (default 0,0,0)")
    if name == "decode": s.add_argument("--json", action="store_true", help="one JSON list of waves")
    s.add_argument("buffers", nargs="+", metavar="SE.bin", help="the shader engines' buffers, SE 0 first (or a saved trace's directory)")
    s.set_defaults(fn=fn)
  args = p.parse_args(argv)
  return run("hcq-sqtt", lambda: args.fn(args))
