"""README.md's code runs as written. Every ```python block runs in a fresh interpreter from the repository root with
its own TMPDIR (so emulated devices boot fresh), on the default device or the one the block names. Every ```sh line
runs too, except those in NOT_RUN, each with the reason. A ```toml block is pyproject.toml's: it must say what
pyproject.toml says. New blocks are picked up by themselves; a block in another language fails until it has a check."""
import os, re, subprocess, sys, tomllib
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
BLOCKS = [(m.group(1), m.group(2), README.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(README)]

NOT_RUN = {
  "make demo": "CI runs it (with make test): the set-up commands",
  "make test": "CI runs it: the whole suite, this test included",
  ".venv/bin/python -m autogen": "rewrites the committed bindings (tests/autogen regenerates them into a temporary directory)",
  ".venv/bin/python -m autogen kfd pci": "rewrites committed bindings (as above)",
  ".venv/bin/python -m autogen.amdgcn": "rewrites the committed opcode tables (tests/autogen checks them)",
  "RDNA3_FULL_SWEEP=1 .venv/bin/python -m pytest tests/emu/amdgcn/test_disasm_llvm.py -s": "minutes: all ~470k words through LLVM",
  ".venv/bin/python -m pytest tests/emu/amdgcn -k exec": "part of this test suite",
  ".venv/bin/python bench/amdgcn_isa.py": "a benchmark: measures, never fails",
  ".venv/bin/python bench/emu_throughput.py": "a benchmark: measures, never fails",
  ".venv/bin/python -m pytest tests/emu/nvgpu -k ptx": "part of this test suite",
  ".venv/bin/python bench/ptx_throughput.py": "a benchmark: measures, never fails",
  ".venv/bin/mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo "
  ".venv/bin/python examples/ddp_digits.py 2": "tests/compute/test_distributed.py runs it, and compares it with one rank",
}


def _command(line: str) -> str:
  """A README sh line without its trailing comment."""
  return re.split(r"\s{2,}#", line, maxsplit=1)[0].strip()


SH_LINES = [(_command(l), start + k + 1) for lang, body, start in BLOCKS if lang == "sh"
            for k, l in enumerate(body.splitlines()) if _command(l) and not l.lstrip().startswith("#")]


def test_every_block_has_a_check():
  assert BLOCKS, "no code blocks found in README.md"
  checked = ("python", "sh", "toml")
  assert all(lang in checked for lang, _, _ in BLOCKS), [(lang, line) for lang, _, line in BLOCKS if lang not in checked]


def _contained(part, whole) -> bool:
  if isinstance(part, dict): return isinstance(whole, dict) and all(k in whole and _contained(v, whole[k]) for k, v in part.items())
  return part == whole


@pytest.mark.parametrize("body,line", [pytest.param(b, n, id=f"line{n}") for lang, b, n in BLOCKS if lang == "toml"])
def test_toml_block_is_what_pyproject_says(body, line):
  project = tomllib.loads((ROOT / "pyproject.toml").read_text())
  assert _contained(tomllib.loads(body), project), f"README.md line {line}: the toml block is not in pyproject.toml:\n{body}"


def test_every_line_not_run_is_still_in_the_readme():
  assert set(NOT_RUN) <= {c for c, _ in SH_LINES}, f"stale NOT_RUN entries: {sorted(set(NOT_RUN) - {c for c, _ in SH_LINES})}"


def _env(tmp_path) -> dict:
  tmp = tmp_path / "tmp"
  tmp.mkdir()
  return {**os.environ, "TMPDIR": str(tmp)}


@pytest.mark.parametrize("code,line", [pytest.param(b, n, id=f"line{n}") for lang, b, n in BLOCKS if lang == "python"])
def test_python_block_runs(code, line, tmp_path):
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, f"README.md line {line}: the python block failed:\n{r.stdout}\n{r.stderr}"


@pytest.mark.parametrize("cmd,line", [pytest.param(c, n, id=f"line{n}") for c, n in SH_LINES if c not in NOT_RUN])
def test_sh_line_runs(cmd, line, tmp_path):
  if not (ROOT / ".venv/bin/python").exists(): cmd = cmd.replace(".venv/bin/python", sys.executable)
  r = subprocess.run(cmd, shell=True, cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, f"README.md line {line}: `{cmd}` failed:\n{r.stdout}\n{r.stderr}"
