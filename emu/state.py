"""Where an emulated device keeps what survives its process: files under $TMPDIR/hcq-emu/<kind>-<index>/, among them
one `state` holding a ctypes structure that starts with a magic and a layout version. A model either writes it whole
(`save`: a temporary file renamed over it, so a process killed with -9 leaves the last complete state) or maps it
shared and changes it in place; either way `load` reads it and `saved` lists the devices that have one."""
from __future__ import annotations
import ctypes, os, tempfile
from typing import Any


def emu_dir(*parts: str) -> str:
  """$TMPDIR/hcq-emu/<parts>: what the emulated devices share across processes."""
  return os.path.join(os.environ.get("TMPDIR") or tempfile.gettempdir(), "hcq-emu", *parts)


def state_dir(kind: str, index: int) -> str:
  """Where emulated device `index` of model `kind` keeps its state: $TMPDIR/hcq-emu/<kind>-<index>."""
  return emu_dir(f"{kind}-{index}")


def load(path: str, layout: type[ctypes.Structure], magic: int, version: int) -> ctypes.Structure | None:
  """The state saved in `path`, or None when there is none (or it is another layout's)."""
  try:
    with open(os.path.join(path, "state"), "rb") as f: st = layout.from_buffer_copy(f.read(ctypes.sizeof(layout)))
  except (OSError, ValueError): return None
  return st if (st.magic, st.version) == (magic, version) else None


def load_or_new(path: str | None, layout: type[ctypes.Structure], magic: int, version: int) -> Any:
  """The state saved in `path` (None: keep none), or a new one: the magic, the layout version, the rest zero."""
  return (load(path, layout, magic, version) if path else None) or layout(magic, version)


def save(path: str, state: ctypes.Structure) -> None:
  os.makedirs(path, exist_ok=True)
  tmp = os.path.join(path, f"state.{os.getpid()}")
  with open(tmp, "wb") as f: f.write(bytes(state))
  os.replace(tmp, os.path.join(path, "state"))


def saved(kind: str, layout: type[ctypes.Structure], magic: int, version: int) -> list[int]:
  """Indexes of the emulated `kind` devices with saved state."""
  root, prefix = emu_dir(), f"{kind}-"
  names = os.listdir(root) if os.path.isdir(root) else []
  return sorted(int(n[len(prefix):]) for n in names if n.startswith(prefix) and n[len(prefix):].isdigit()
                and load(os.path.join(root, n), layout, magic, version))
