"""`python -m autogen.ir3 [out.py]`: regenerate autogen/ir3/tables.py from tinymesa's ir3 disassembler."""
import os, sys
from autogen.ir3.gen import generate

if __name__ == "__main__":
  out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "tables.py")
  src = generate()
  with open(out, "w") as f: f.write(src)
  print(f"wrote {out} ({src.count(chr(10))} lines)")
