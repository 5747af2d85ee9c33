"""Child processes for tests that need a second process (device owners, lock holders)."""
import os, subprocess, sys


def start(code: str, ready: str = "up") -> subprocess.Popen:
  """Run `code` in a fresh interpreter with the repository importable; return once it prints `ready`."""
  p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, PYTHONPATH=os.getcwd()))
  if p.stdout.readline().strip() != ready:
    p.kill()
    raise AssertionError(f"the child process did not start: {p.communicate()[1]}")
  return p
