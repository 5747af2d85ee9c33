"""`python -m autogen.amdgcn [isa ...] [--out DIR]`: regenerate <isa>/tables.py (default: every ISA in ISAS) from LLVM 22's
disassembler, under autogen/amdgcn/ or DIR."""
import argparse, os
from autogen.amdgcn import ISAS
from autogen.amdgcn.gen import generate

if __name__ == "__main__":
  ap = argparse.ArgumentParser(prog="python -m autogen.amdgcn", description=__doc__.split("\n")[0])
  ap.add_argument("isas", nargs="*", help=f"ISA generations (default: all): {', '.join(ISAS)}")
  ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="directory holding <isa>/tables.py")
  args = ap.parse_args()
  if unknown := [n for n in args.isas if n not in ISAS]: ap.error(f"unknown ISA {', '.join(unknown)}; known: {', '.join(ISAS)}")
  for name in args.isas or ISAS:
    os.makedirs(os.path.join(args.out, name), exist_ok=True)
    src = generate(name)
    with open(out := os.path.join(args.out, name, "tables.py"), "w") as f: f.write(src)
    print(f"wrote {out} ({src.count(chr(10))} lines)")
