"""What the console scripts (hcq_smi, am_smi, hcq-rdma) share: `--version`, and errors as one line, not a traceback.

An error the user can act on (a bad device string or flag value, no such device, a busy device, missing firmware, a
missing or unwritable directory) ends the script with `<prog>: <message>` on stderr and exit status 2; a tool's own
failures (the tool ran and something failed: a command it ran, a peer) with one line and status 1; anything else is a
bug and shows its traceback. HCQ_DEBUG=1 shows the traceback of every error.
"""
from __future__ import annotations
import argparse, os, sys, traceback
from importlib.metadata import PackageNotFoundError, version as dist_version
from typing import Callable

DEBUG = "HCQ_DEBUG"
DIST = "hcq"            # the distribution the scripts come from (pyproject.toml [project] name)


class UserError(Exception):
  """What the user asked for does not exist or cannot be done as asked: one line, exit status 2."""


# errors a user causes and can act on: ValueError (bad device strings, flag values), OSError (missing, busy or
# inaccessible files, directories and devices), RuntimeError (busy devices, the drivers' firmware and hardware errors)
USER_ERRORS: tuple[type[Exception], ...] = (UserError, OSError, ValueError, RuntimeError)
BUGS = (NotImplementedError, RecursionError)   # RuntimeErrors no user causes: their traceback is what to report


def version() -> str:
  try: return dist_version(DIST)
  except PackageNotFoundError: return f"unknown ({DIST}'s package metadata is not installed: run scripts/setup.sh)"


class _Version(argparse.Action):
  """--version: the package metadata is read only when asked for (a script may run where it cannot be read)."""
  def __init__(self, option_strings: list[str], dest: str, **kw):
    super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

  def __call__(self, parser: argparse.ArgumentParser, namespace, values, option_string=None):
    print(f"{parser.prog} {version()}")
    parser.exit()


def add_version(p: argparse.ArgumentParser) -> None: p.add_argument("--version", action=_Version)


def run(prog: str, body: Callable[[], int | None], failures: tuple[type[Exception], ...] = ()) -> int | None:
  """body()'s exit status; an error in `failures` prints `prog: message` and gives 1, one of USER_ERRORS gives 2
  (`failures` are checked first), Ctrl-C `prog: interrupted` and 130; any other exception propagates (a bug)."""
  try: return body()
  except KeyboardInterrupt:
    print(f"{prog}: interrupted", file=sys.stderr)
    return 130
  except failures + USER_ERRORS as e:
    if isinstance(e, BUGS) and not isinstance(e, failures): raise
    if os.environ.get(DEBUG) == "1": traceback.print_exc()
    print(f"{prog}: {str(e) or type(e).__name__}", file=sys.stderr)
    return 1 if isinstance(e, failures) else 2
