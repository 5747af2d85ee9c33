"""gcc as the independent layout reference: compile a C probe that prints sizeof/_Alignof/offsetof."""
from __future__ import annotations
import pathlib, re, shutil, subprocess
import pytest
from autogen.gen import cparse, headers


def packages():
  try: return headers.packages()
  except headers.HeadersMissing as e: pytest.skip(f"header packages not available ({e})")


def c_names(text: str) -> dict[str, str]:
  """How C names each record a header defines: `struct X`/`union X` for a tag, `X` for a typedef of an unnamed one.
  Records with neither (unnamed nested ones) are absent: C has no name to probe them by."""
  out = {name: name for name in re.findall(r"\}\s*(?:__packed\s*|__attribute__\s*\(\(\s*\w+\s*\)\)\s*)?(\w+)\s*;", text)}
  out.update({name: f"{kind} {name}" for kind, name in re.findall(r"\b(struct|union)\s+(\w+)\s*\{", text)})
  return out


def run_probe(tmp: pathlib.Path, includes: list[pathlib.Path], include_dirs: list[pathlib.Path], kernel: bool,
              lines: list[str], defines: tuple[str, ...] = (), stubs: str = "") -> list[list[str]]:
  """Compile `lines` (printf statements) after including the headers, run it, return the split output lines."""
  gcc = shutil.which("gcc")
  if gcc is None: pytest.skip("gcc not installed: it is the layout reference")
  src = tmp / "probe.c"
  prelude = cparse.KERNEL_PRELUDE if kernel else ""
  src.write_text("#include <stddef.h>\n#include <stdio.h>\n" + prelude + stubs + "".join(f'#include "{h}"\n' for h in includes)
                 + "int main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n")
  exe = tmp / "probe"
  r = subprocess.run([gcc, "-std=gnu11", "-w", "-o", str(exe), str(src), *(f"-I{d}" for d in include_dirs),
                      *(f"-D{d}" for d in defines)],
                     capture_output=True, text=True)
  assert r.returncode == 0, f"gcc failed on the layout probe:\n{r.stderr[:4000]}"
  return [ln.split() for ln in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()]
